//! The paravirtual interface Kestrel offers guests: Linux's KVM-on-PowerPC interface, so
//! that an unmodified Linux built with `CONFIG_KVM_GUEST` and `CONFIG_EPAPR_PARAVIRT` finds
//! it (docs/adr/0025-paravirtual-linux.md). Every number here is Linux's (the comments
//! name the header); the host tests below pin them.
//!
//! - The VMM's device tree has a `/hypervisor` node, compatible [`COMPATIBLE`], whose
//!   `hcall-instructions` are [`HCALL_INSNS`] (KVM's sequence: `lis r0,magic@h;
//!   ori r0,r0,magic@l; sc; nop`), and `has-idle` (Linux then idles through [`EV_IDLE`]).
//! - Hypercall ABI (ePAPR 1.1 §7.5, `asm/epapr_hcalls.h`): r11 = token
//!   ([`hcall_token`]: vendor << 16 | number), r3..r10 = arguments; on return r3 =
//!   status ([`EV_SUCCESS`], [`EV_UNIMPLEMENTED`], ...), r4.. = results. A guest-supervisor
//!   `sc` with r0 = [`SC_MAGIC_R0`] is a hypercall; any other `sc` (and every `sc` while
//!   the VMM turned the interface off, [`crate::vcpuctl::SET_PV`]) is a system call.
//! - The magic page: one page per vCPU holding [`SharedPage`] (Linux's
//!   `struct kvm_vcpu_arch_shared`, uapi `asm/kvm_para.h`), mapped for the guest
//!   supervisor at the effective address [`HC_PPC_MAP_MAGIC_PAGE`] names.

use kestrel_ppc440::encode;

/// `compatible` of the `/hypervisor` node Linux looks for (`arch/powerpc/kernel/firmware.c`,
/// `check_kvm_guest`).
pub const COMPATIBLE: &str = "linux,kvm";

/// r0 of a KVM hypercall: "KVM!" (`KVM_SC_MAGIC_R0`).
pub const SC_MAGIC_R0: u32 = 0x4b56_4d21;

/// The hypercall instructions (`hcall-instructions`), which Linux copies over the four
/// placeholder words of `epapr_hypercall_start` and `epapr_ev_idle_start`
/// (`epapr_paravirt.c`): `lis r0,magic@h; ori r0,r0,magic@l; sc; nop`.
pub const HCALL_INSNS: [u32; 4] = [
    encode::lis(0, (SC_MAGIC_R0 >> 16) as u16),
    encode::ori(0, 0, SC_MAGIC_R0 as u16),
    encode::SC,
    encode::ori(0, 0, 0),
];

/// ePAPR hypercall vendor ids (`EV_EPAPR_VENDOR_ID`, `EV_KVM_VENDOR_ID`).
pub const EV_EPAPR_VENDOR_ID: u32 = 1;
pub const EV_KVM_VENDOR_ID: u32 = 42;

/// The r11 token of hypercall `num` of `vendor` (`_EV_HCALL_TOKEN`).
pub const fn hcall_token(vendor: u32, num: u32) -> u32 {
    (vendor << 16) | num
}

/// `KVM_HC_FEATURES`: r4 = the feature bits ([`FEATURE_MAGIC_PAGE`]).
pub const HC_FEATURES: u32 = hcall_token(EV_KVM_VENDOR_ID, 3);
/// `KVM_HC_PPC_MAP_MAGIC_PAGE`: r3 = guest-physical address (unused on Book E: the page
/// is reached through its effective address only), r4 = effective address | flags
/// ([`MAGIC_PAGE_FLAG_NOT_MAPPED_NX`]); r4 on return = the magic-page feature bits
/// ([`MAGIC_FEAT_MAS0_TO_SPRG7`]).
pub const HC_PPC_MAP_MAGIC_PAGE: u32 = hcall_token(EV_KVM_VENDOR_ID, 4);
/// `EV_IDLE` (ePAPR): wait until an interrupt is pending; Linux calls it with MSR[EE] set.
pub const EV_IDLE: u32 = hcall_token(EV_EPAPR_VENDOR_ID, 16);

/// Hypercall status codes (r3 on return).
pub const EV_SUCCESS: u32 = 0;
pub const EV_UNIMPLEMENTED: u32 = 12;

/// Bit of `KVM_FEATURE_MAGIC_PAGE` (1) in the `HC_FEATURES` result.
pub const FEATURE_MAGIC_PAGE: u32 = 1 << 1;
/// Magic-page feature: the page's MAS0..MAS7, ESR, PIR and SPRG4..7 fields are kept
/// (`KVM_MAGIC_FEAT_MAS0_TO_SPRG7`; the 440 has no MAS registers, those fields stay 0).
pub const MAGIC_FEAT_MAS0_TO_SPRG7: u32 = 1 << 1;
/// Guest's flag in r4 of `HC_PPC_MAP_MAGIC_PAGE`: it does not execute from the page
/// (`MAGIC_PAGE_FLAG_NOT_MAPPED_NX`). Kestrel never maps the page executable.
pub const MAGIC_PAGE_FLAG_NOT_MAPPED_NX: u32 = 1 << 0;

/// The magic page's contents: Linux's `struct kvm_vcpu_arch_shared` (uapi
/// `asm/kvm_para.h`), big-endian. A 32-bit guest reads and writes the low word of each
/// 64-bit field (offset + 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SharedPage {
    pub scratch1: u64,
    pub scratch2: u64,
    pub scratch3: u64,
    /// The guest is in a critical section (no asynchronous interrupt) while this equals
    /// its r1 in supervisor mode.
    pub critical: u64,
    pub sprg0: u64,
    pub sprg1: u64,
    pub sprg2: u64,
    pub sprg3: u64,
    pub srr0: u64,
    pub srr1: u64,
    /// DEAR on Book E.
    pub dar: u64,
    pub msr: u64,
    pub dsisr: u32,
    /// Non-zero: an interrupt is pending (the guest's templates trap to take it when they
    /// enable MSR[EE]).
    pub int_pending: u32,
    pub sr: [u32; 16],
    pub mas0: u32,
    pub mas1: u32,
    pub mas7_3: u64,
    pub mas2: u64,
    pub mas4: u32,
    pub mas6: u32,
    pub esr: u32,
    pub pir: u32,
    pub sprg4: u64,
    pub sprg5: u64,
    pub sprg6: u64,
    pub sprg7: u64,
}

impl SharedPage {
    /// All fields 0.
    pub const ZERO: SharedPage = SharedPage {
        scratch1: 0,
        scratch2: 0,
        scratch3: 0,
        critical: 0,
        sprg0: 0,
        sprg1: 0,
        sprg2: 0,
        sprg3: 0,
        srr0: 0,
        srr1: 0,
        dar: 0,
        msr: 0,
        dsisr: 0,
        int_pending: 0,
        sr: [0; 16],
        mas0: 0,
        mas1: 0,
        mas7_3: 0,
        mas2: 0,
        mas4: 0,
        mas6: 0,
        esr: 0,
        pir: 0,
        sprg4: 0,
        sprg5: 0,
        sprg6: 0,
        sprg7: 0,
    };
}

/// Guest MSR bits a guest may change through the page's `msr` field without trapping
/// (Linux's templates: `MSR_EE | MSR_RI`; Book E has no RI, so only EE).
pub const SHARED_MSR_BITS: u32 = kestrel_ppc440::msr::EE;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// The layout against Linux 6.1's `struct kvm_vcpu_arch_shared` (offsets as
    /// `asm-offsets.c` reports them: `KVM_MAGIC_CRITICAL` 24, `KVM_MAGIC_MSR` 88,
    /// `KVM_MAGIC_INT` 100, ...).
    #[test]
    fn shared_page_matches_linux() {
        let linux = [
            (offset_of!(SharedPage, scratch1), 0),
            (offset_of!(SharedPage, scratch2), 8),
            (offset_of!(SharedPage, scratch3), 16),
            (offset_of!(SharedPage, critical), 24),
            (offset_of!(SharedPage, sprg0), 32),
            (offset_of!(SharedPage, sprg1), 40),
            (offset_of!(SharedPage, sprg2), 48),
            (offset_of!(SharedPage, sprg3), 56),
            (offset_of!(SharedPage, srr0), 64),
            (offset_of!(SharedPage, srr1), 72),
            (offset_of!(SharedPage, dar), 80),
            (offset_of!(SharedPage, msr), 88),
            (offset_of!(SharedPage, dsisr), 96),
            (offset_of!(SharedPage, int_pending), 100),
            (offset_of!(SharedPage, sr), 104),
            (offset_of!(SharedPage, mas0), 168),
            (offset_of!(SharedPage, mas1), 172),
            (offset_of!(SharedPage, mas7_3), 176),
            (offset_of!(SharedPage, mas2), 184),
            (offset_of!(SharedPage, mas4), 192),
            (offset_of!(SharedPage, mas6), 196),
            (offset_of!(SharedPage, esr), 200),
            (offset_of!(SharedPage, pir), 204),
            (offset_of!(SharedPage, sprg4), 208),
            (offset_of!(SharedPage, sprg5), 216),
            (offset_of!(SharedPage, sprg6), 224),
            (offset_of!(SharedPage, sprg7), 232),
        ];
        for (i, (ours, theirs)) in linux.iter().enumerate() {
            assert_eq!(ours, theirs, "field {i}");
        }
        assert_eq!(size_of::<SharedPage>(), 240);
        assert!(size_of::<SharedPage>() <= crate::PAGE_SIZE as usize);
    }

    /// Linux's numbers (`asm/kvm_para.h`, `linux/kvm_para.h`, `asm/epapr_hcalls.h`).
    #[test]
    fn numbers_match_linux() {
        assert_eq!(SC_MAGIC_R0, u32::from_be_bytes(*b"KVM!"));
        assert_eq!(HC_FEATURES, (42 << 16) | 3);
        assert_eq!(HC_PPC_MAP_MAGIC_PAGE, (42 << 16) | 4);
        assert_eq!(EV_IDLE, (1 << 16) | 16);
        assert_eq!((EV_SUCCESS, EV_UNIMPLEMENTED), (0, 12));
        assert_eq!(FEATURE_MAGIC_PAGE, 2);
        assert_eq!(MAGIC_FEAT_MAS0_TO_SPRG7, 2);
        assert_eq!(MAGIC_PAGE_FLAG_NOT_MAPPED_NX, 1);
        assert_eq!(SHARED_MSR_BITS, 0x8000);
    }

    /// KVM's booke hypercall sequence, word by word.
    #[test]
    fn hcall_instructions() {
        assert_eq!(
            HCALL_INSNS,
            [0x3c00_4b56, 0x6000_4d21, 0x4400_0002, 0x6000_0000]
        );
    }
}
