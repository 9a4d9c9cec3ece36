//! The paravirtual interface (`kestrel_abi::pv`, Linux's KVM interface): hypercalls from the
//! guest supervisor, system calls everywhere else and with the interface off, `EV_IDLE`,
//! and the magic page (its contents follow the guest's state both ways, and its `critical`
//! field holds off interrupts). The tiny VMM of `virt.rs` runs the guests; the page is at
//! Linux's address, the top page of the address space.

use super::{at, count, expect_virt, gpr, ppc, reply_pc, set_tlb, Vm, HANDLER};
use crate::common::{call_failed, expect_kerror, TestResult};
use core::mem::offset_of;
use kestrel_abi::pv::{self, SharedPage};
use kestrel_abi::{vcpuctl, KError, ThreadId, TracePoint, VirtFault};
use kestrel_ppc440::encode::{ori, RFI};
use kestrel_ppc440::msr::PR as MSR_PR;
use kestrel_ppc440::tlb::word2;
use kestrel_user::sys;

/// Where the guests map the magic page (Linux's `KVM_MAGIC_PAGE`, -4096).
const MAGIC_EA: i32 = -4096;

/// The displacement of a 32-bit guest's `lwz`/`stw` (base register 0) of magic-page field
/// `offset`; `low` for the low word of a 64-bit field.
const fn field(offset: usize, low: bool) -> i16 {
    (MAGIC_EA + offset as i32 + if low { 4 } else { 0 }) as i16
}

const MSR: i16 = field(offset_of!(SharedPage, msr), true);
const SPRG0: i16 = field(offset_of!(SharedPage, sprg0), true);
const SRR0: i16 = field(offset_of!(SharedPage, srr0), true);
const CRITICAL: i16 = field(offset_of!(SharedPage, critical), true);
const INT_PENDING: i16 = field(offset_of!(SharedPage, int_pending), false);

/// `lis r0,magic@h; ori r0,r0,magic@l` (what Linux's hypercall stub starts with).
const MAGIC_R0: [u32; 2] = [pv::HCALL_INSNS[0], pv::HCALL_INSNS[1]];

/// `lis r11,token@h; ori r11,r11,token@l`.
const fn token(t: u32) -> [u32; 2] {
    [ppc::lis(11, (t >> 16) as u16), ori(11, 11, t as u16)]
}

fn set_pv(id: ThreadId, on: bool) -> TestResult {
    sys::vcpu_control(id, vcpuctl::SET_PV, on as u32, 0, 0)
        .map_err(|e| call_failed("VcpuControl(SET_PV)", e))
}

/// Hypercalls from the guest supervisor: `HC_FEATURES` reports the magic page, an unknown
/// token `EV_UNIMPLEMENTED`; the same `sc` (r0 magic) from guest user mode is the guest's
/// own system call, with its registers untouched.
pub fn hypercalls() -> TestResult {
    let [t0, t1] = token(pv::HC_FEATURES);
    let code = [
        MAGIC_R0[0],
        MAGIC_R0[1],
        t0,
        t1,
        ppc::SC,
        ori(20, 3, 0),
        ori(21, 4, 0),
        // 0x2a0063: no hypercall of Kestrel's.
        ori(11, 11, 0x63),
        ppc::SC,
        ori(22, 3, 0),
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR8, 3),
        ppc::li(3, at(17) as i16),
        ppc::mtspr(ppc::SRR0, 3),
        ppc::li(3, MSR_PR as i16),
        ppc::mtspr(ppc::SRR1, 3),
        RFI,
        // Guest user mode from here.
        ppc::li(3, 5),
        ppc::SC,
        ppc::B_SELF,
    ];
    let vm = Vm::new(&code)?;
    // Entry 0 for guest user mode too.
    let w2 = ppc::ENTRY0_W2 | word2::UX.mask() | word2::UW.mask() | word2::UR.mask();
    set_tlb(vm.id(), 0, [ppc::ENTRY0_W0, 0, w2], 0)
        .map_err(|e| call_failed("VcpuControl(SET_TLB)", e))?;
    vm.load(
        HANDLER,
        &[ppc::mfspr(23, ppc::SRR0), ppc::HALT[0], ppc::HALT[1]],
    );
    set_pv(vm.id(), true)?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 8)?;
    ensure!(
        (gpr(&m, 20), gpr(&m, 21)) == (pv::EV_SUCCESS, pv::FEATURE_MAGIC_PAGE),
        "HC_FEATURES did not report the magic page",
        "r3 {:#x}, r4 {:#x}",
        gpr(&m, 20),
        gpr(&m, 21)
    );
    ensure!(
        gpr(&m, 22) == pv::EV_UNIMPLEMENTED,
        "an unknown hypercall did not return EV_UNIMPLEMENTED",
        "r3 {:#x}",
        gpr(&m, 22)
    );
    ensure!(
        gpr(&m, 23) == at(19) && gpr(&m, 3) == 5,
        "the user-mode sc was not reflected as a system call with r3 kept",
        "srr0 {:#x}, r3 {:#x}",
        gpr(&m, 23),
        gpr(&m, 3)
    );
    // Both hypercalls and the system call are `sc` exits.
    ensure!(
        count(&vm.trace()?, TracePoint::ExceptSyscall) == 3,
        "EXCEPT_SYSCALL is not 3"
    );
    Ok(())
}

/// With the interface off (a new vCPU's state, `vmm.pv=off`), a guest-supervisor `sc`
/// with the magic r0 is the guest's system call.
pub fn off_is_syscall() -> TestResult {
    let [t0, t1] = token(pv::HC_FEATURES);
    let vm = Vm::new(&[
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR8, 3),
        MAGIC_R0[0],
        MAGIC_R0[1],
        t0,
        t1,
        ppc::li(3, 5),
        ppc::SC,
        ppc::B_SELF,
    ])?;
    vm.load(
        HANDLER,
        &[ppc::mfspr(23, ppc::SRR0), ppc::HALT[0], ppc::HALT[1]],
    );
    set_pv(vm.id(), true)?;
    set_pv(vm.id(), false)?;
    expect_kerror(
        "VcpuControl(SET_PV, 2)",
        sys::vcpu_control(vm.id(), vcpuctl::SET_PV, 2, 0, 0),
        &[KError::InvalidParam],
    )?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 8)?;
    ensure!(
        gpr(&m, 23) == at(8) && gpr(&m, 3) == 5 && gpr(&m, 4) == 0,
        "with the interface off, the magic sc was not the guest's system call",
        "srr0 {:#x}, r3 {:#x}, r4 {:#x}",
        gpr(&m, 23),
        gpr(&m, 3),
        gpr(&m, 4)
    );
    Ok(())
}

/// `EV_IDLE` with nothing pending waits like MSR[WE]: an Idle fault whose pc is the
/// instruction after the `sc`; resumed there, the guest sees `EV_SUCCESS`.
pub fn idle() -> TestResult {
    let [t0, t1] = token(pv::EV_IDLE);
    let vm = Vm::new(&[
        MAGIC_R0[0],
        MAGIC_R0[1],
        t0,
        t1,
        ppc::li(3, 7),
        ppc::SC,
        ori(20, 3, 0),
        ppc::HALT[0],
        ppc::HALT[1],
    ])?;
    set_pv(vm.id(), true)?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Idle, at(6))?;
    let m = vm.resume(&reply_pc(at(6), 0))?;
    expect_virt(&m, VirtFault::Halt, at(8))?;
    ensure!(
        gpr(&m, 20) == pv::EV_SUCCESS,
        "EV_IDLE did not return EV_SUCCESS",
        "r3 {:#x}",
        gpr(&m, 20)
    );
    ensure!(
        count(&vm.trace()?, TracePoint::GuestIdle) == 1,
        "GUEST_IDLE is not 1"
    );
    Ok(())
}

/// `HC_PPC_MAP_MAGIC_PAGE` at Linux's address: the page shows the guest's MSR, a store to
/// its SPRG0 is what a trapping `mfspr SPRG0` reads next, a trapping `mtspr SRR0` shows in
/// it, and MSR[EE] set through it is the guest's MSR[EE] (what Linux's patched `mfmsr`,
/// `mtspr`, `wrteei` do).
pub fn magic_page() -> TestResult {
    let [t0, t1] = token(pv::HC_PPC_MAP_MAGIC_PAGE);
    let code = [
        MAGIC_R0[0],
        MAGIC_R0[1],
        t0,
        t1,
        ppc::li(3, MAGIC_EA as i16),
        ppc::li(
            4,
            (MAGIC_EA | pv::MAGIC_PAGE_FLAG_NOT_MAPPED_NX as i32) as i16,
        ),
        ppc::SC,
        ori(20, 3, 0),
        ori(21, 4, 0),
        ppc::mfmsr(22),
        ppc::lwz(23, MSR, 0),
        ppc::li(5, 0x1234),
        ppc::stw(5, SPRG0, 0),
        ppc::mfspr(24, ppc::SPRG0),
        ppc::li(6, 0x777),
        ppc::mtspr(ppc::SRR0, 6),
        ppc::lwz(25, SRR0, 0),
        ppc::lwz(7, MSR, 0),
        ori(7, 7, ppc::MSR_EE as u16),
        ppc::stw(7, MSR, 0),
        ppc::mfmsr(26),
        ppc::HALT[0],
        ppc::HALT[1],
    ];
    let vm = Vm::new(&code)?;
    set_pv(vm.id(), true)?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, at(22))?;
    ensure!(
        (gpr(&m, 20), gpr(&m, 21)) == (pv::EV_SUCCESS, pv::MAGIC_FEAT_MAS0_TO_SPRG7),
        "HC_PPC_MAP_MAGIC_PAGE failed",
        "r3 {:#x}, r4 {:#x}",
        gpr(&m, 20),
        gpr(&m, 21)
    );
    ensure!(
        gpr(&m, 23) == gpr(&m, 22),
        "the page's msr is not the guest's MSR",
        "page {:#x}, mfmsr {:#x}",
        gpr(&m, 23),
        gpr(&m, 22)
    );
    ensure!(
        gpr(&m, 24) == 0x1234,
        "mfspr SPRG0 does not read what the guest stored in the page",
        "{:#x}",
        gpr(&m, 24)
    );
    ensure!(
        gpr(&m, 25) == 0x777,
        "the page's srr0 does not show mtspr SRR0",
        "{:#x}",
        gpr(&m, 25)
    );
    ensure!(
        gpr(&m, 26) & ppc::MSR_EE != 0,
        "MSR[EE] set through the page is not the guest's",
        "mfmsr {:#x}",
        gpr(&m, 26)
    );
    ensure!(
        vm.state()?.sprg[0] == 0x1234,
        "the vCPU state's SPRG0 is not the page's"
    );
    Ok(())
}

/// While the page's `critical` equals r1 no interrupt is injected, though MSR[EE] is set
/// (through the page) and the external line is raised; `int_pending` says one is pending.
/// Once `critical` differs, the next exit delivers it.
pub fn critical_section() -> TestResult {
    let [t0, t1] = token(pv::HC_PPC_MAP_MAGIC_PAGE);
    let code = [
        ppc::li(3, HANDLER as i16),
        ppc::mtspr(ppc::IVOR4, 3),
        ppc::li(1, 0x100),
        ppc::li(2, 0x200),
        MAGIC_R0[0],
        MAGIC_R0[1],
        t0,
        t1,
        ppc::li(3, MAGIC_EA as i16),
        ppc::li(4, MAGIC_EA as i16),
        ppc::SC,
        ppc::stw(1, CRITICAL, 0),
        ppc::lwz(7, MSR, 0),
        ori(7, 7, ppc::MSR_EE as u16),
        ppc::stw(7, MSR, 0),
        ppc::mfspr(24, ppc::SPRG0),
        ppc::lwz(27, INT_PENDING, 0),
        ppc::stw(2, CRITICAL, 0),
        ppc::mfspr(25, ppc::SPRG0),
        ppc::HALT[0],
        ppc::HALT[1],
    ];
    let vm = Vm::new(&code)?;
    vm.load(
        HANDLER,
        &[ppc::mfspr(26, ppc::SRR0), ppc::HALT[0], ppc::HALT[1]],
    );
    set_pv(vm.id(), true)?;
    sys::vcpu_control(vm.id(), vcpuctl::SET_IRQ, 1, 0, 0)
        .map_err(|e| call_failed("VcpuControl(SET_IRQ)", e))?;
    let m = vm.run()?;
    expect_virt(&m, VirtFault::Halt, HANDLER + 8)?;
    ensure!(
        gpr(&m, 26) == at(19),
        "the interrupt was not delivered right after the critical section",
        "srr0 {:#x}, expected {:#x}",
        gpr(&m, 26),
        at(19)
    );
    ensure!(
        gpr(&m, 27) != 0,
        "int_pending is 0 with the external line raised"
    );
    Ok(())
}
