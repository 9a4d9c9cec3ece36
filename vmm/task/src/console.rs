//! The real console's input side: bytes typed on the board's UART0 go to one VM's
//! virtual UART0 at a time.
//!
//! The kernel prints on the same UART (transmit side only); the VMM owns the receive
//! side: it attaches to UART0's UIC line, enables the receive interrupt and reads the
//! bytes in its fault loop. With several VMs, `Ctrl-]` followed by a VM number moves
//! the input focus (`Ctrl-]` twice sends one `Ctrl-]`). Outputs are told apart by the
//! `[vmN] ` prefix on every line (see `Machine`).

use crate::fabric::VmFabric;
use crate::machine::Machine;
use kestrel_devices::uart::{ier, lsr, reg};
use kestrel_user::{println, root, sys};

/// UIC0 input of the board's UART0 (bamboo).
pub const UART_IRQ: u32 = 0;
/// UART0 registers, mapped 1:1 by the root task.
const UART0: u32 = 0xEF60_0300;
/// The focus-switch escape byte (`Ctrl-]`, as in telnet).
const ESCAPE: u8 = 0x1d;

pub struct Console {
    nvms: usize,
    focus: usize,
    escape: bool,
}

fn read(r: u32) -> u8 {
    // SAFETY: UART0's register page is mapped 1:1, uncached and guarded, by the root task
    // (`Console::new` asked for it before any access); byte reads of these registers have
    // no effect beyond the UART's own state.
    unsafe { ((UART0 + r) as *const u8).read_volatile() }
}

fn write(r: u32, v: u8) {
    // SAFETY: as in `read`; only IER is written, which the kernel's console output
    // (polling LSR, writing THR) does not use.
    unsafe { ((UART0 + r) as *mut u8).write_volatile(v) }
}

impl Console {
    /// Takes UART0's receive interrupt. Without it (the line is taken) the VMs run
    /// without console input, which is said once.
    pub fn new(nvms: usize) -> Console {
        // UART0's page (mapped 1:1, uncached) and its interrupt line come from the root task.
        let taken = root::device(UART0 & !(kestrel_abi::PAGE_SIZE - 1))
            .and_then(|()| root::interrupt(UART_IRQ, sys::my_id(), 0));
        match taken {
            Ok(()) => {
                write(reg::IER, ier::RDI);
                if nvms > 1 {
                    println!(
                        "vmm: console input goes to vm0; Ctrl-] then a VM number (0-{}) switches",
                        nvms - 1
                    );
                }
            }
            Err(e) => println!("vmm: no console input (UART0): {e}"),
        }
        Console {
            nvms,
            focus: 0,
            escape: false,
        }
    }

    /// The VM that console input goes to.
    pub fn focus(&self) -> usize {
        self.focus
    }

    /// Drains the UART's receive FIFO into the focused VM's virtual UART. Returns
    /// whether that VM got input.
    pub fn input<'a, F: VmFabric>(
        &mut self,
        mut machines: impl Iterator<Item = &'a mut Machine<F>>,
    ) -> bool {
        let mut got = 0usize;
        let mut target = machines.nth(self.focus);
        let mut budget = 256;
        while read(reg::LSR) & lsr::DR != 0 && budget > 0 {
            budget -= 1;
            let b = read(reg::RBR);
            if self.escape {
                self.escape = false;
                if b != ESCAPE {
                    match (b as char).to_digit(10) {
                        Some(d) if (d as usize) < self.nvms => {
                            self.focus = d as usize;
                            println!("vmm: console input now goes to vm{d}");
                            // Bytes after the switch belong to the new VM (next interrupt).
                            break;
                        }
                        _ => println!(
                            "vmm: Ctrl-] then 0-{} switches the console's VM",
                            self.nvms - 1
                        ),
                    }
                    continue;
                }
            } else if b == ESCAPE && self.nvms > 1 {
                self.escape = true;
                continue;
            }
            if let Some(m) = target.as_mut() {
                m.console_input(b);
                got += 1;
            }
        }
        got > 0
    }
}
