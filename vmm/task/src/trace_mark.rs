//! Per-phase trace snapshots (docs/adr/0027-table1-phases.md): with `vmm.trace_marks=on`, a
//! guest console line `kestrel-trace-mark NAME` makes the VMM print the guest's cumulative
//! trace table right after that line.
//!
//! The console model notices the line (`kestrel_vmm_core::trace_mark::Mark::from_line`, on
//! every complete line of the guest's UART0 output) and keeps the mark; the fault loop takes
//! it after the fault that wrote the line's end and calls [`print`] while the vCPU waits for
//! its reply. The printout is a heading, `vmm: trace mark NAME at time base T` (`vmm: vm<i>
//! trace mark ...` with several VMs), then the table `machine::print_trace` prints at power-off,
//! unchanged: the counters are only read, never reset, so consecutive tables subtract to the
//! exits between two marks (bench/table1.py). T is read before the counters, while the guest
//! waits in the exit that wrote the mark: the guest ran no instruction between the two.

use crate::machine;
use kestrel_abi::ThreadId;
use kestrel_user::{println, sys};
use kestrel_vmm_core::trace_mark::{parse_option, Mark, OPTION};

/// Whether the kernel command line turns the snapshots on (`vmm.trace_marks=on`; default off).
pub fn enabled() -> bool {
    let Some(v) = crate::boot_option(OPTION) else {
        return false;
    };
    match parse_option(&v) {
        Some(on) => on,
        None => {
            println!("vmm: {OPTION}{v} is neither on nor off; trace marks stay off");
            false
        }
    }
}

/// Prints the heading for `mark` and `vcpu`'s cumulative trace table (`vm`: the VM's index
/// when several VMs share the console).
pub fn print(vcpu: ThreadId, vm: Option<usize>, mark: &Mark) {
    let tb = sys::timebase();
    match vm {
        Some(i) => println!("vmm: vm{i} trace mark {mark} at time base {tb}"),
        None => println!("vmm: trace mark {mark} at time base {tb}"),
    }
    machine::print_trace(vcpu, vm);
}
