//! IPC message tags, timeouts, typed items and error codes (after L4 X.2 §5).

use crate::fpage::Fpage;

/// Number of message registers (MR0..MR63). MR0..MR6 travel in r6..r12.
pub const NUM_MRS: usize = 64;
/// Message registers carried in CPU registers (r6..r12).
pub const REG_MRS: usize = 7;

/// MR0: `label[31:16] | flags[15:12] | t[11:6] | u[5:0]`.
///
/// `u` untyped words follow in MR1..MRu, then `t` words of typed items (two words per
/// map/grant item).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(transparent)]
pub struct MsgTag(pub u32);

impl MsgTag {
    /// Set in a received tag when the IPC failed; the error code is in r4.
    pub const FLAG_ERROR: u32 = 1 << 15;

    pub const fn new(label: u16, untyped: u32, typed: u32) -> MsgTag {
        MsgTag(((label as u32) << 16) | ((typed & 0x3f) << 6) | (untyped & 0x3f))
    }
    pub const fn label(self) -> u16 {
        (self.0 >> 16) as u16
    }
    pub const fn untyped(self) -> usize {
        (self.0 & 0x3f) as usize
    }
    pub const fn typed(self) -> usize {
        ((self.0 >> 6) & 0x3f) as usize
    }
    pub const fn flags(self) -> u32 {
        (self.0 >> 12) & 0xf
    }
    pub const fn is_error(self) -> bool {
        self.0 & Self::FLAG_ERROR != 0
    }
    /// Words after MR0 that the message occupies.
    pub const fn words(self) -> usize {
        self.untyped() + self.typed()
    }
    /// Checks that the message fits in MR1..MR63 and typed words come in pairs.
    pub const fn validate(self) -> Result<(), IpcError> {
        if self.words() >= NUM_MRS || !self.typed().is_multiple_of(2) {
            Err(IpcError::MsgOverflow)
        } else {
            Ok(())
        }
    }
}

/// Labels the kernel uses for messages it synthesises (negative in 16 bits, as in L4).
pub mod label {
    /// Interrupt IPC, from `ThreadId::irq(n)`, no words.
    pub const INTERRUPT: u16 = 0xfff0;
    /// Page fault: `PAGEFAULT | access` (access = r4/w2/x1 in the low nibble).
    pub const PAGEFAULT: u16 = 0xffe0;
    /// Exception other than a page fault; layout in [`crate::fault::exc`].
    pub const EXCEPTION: u16 = 0xffb0;
    /// Reply label a handler may use to ask the kernel to stop the faulting thread.
    pub const KILL: u16 = 0xffa0;
    /// Virtualization fault from a vCPU: `VIRT_FAULT | VirtFault` (see `crate::vcpu`).
    pub const VIRT_FAULT: u16 = 0xffc0;

    pub const fn is_virt_fault(l: u16) -> bool {
        l & 0xfff0 == VIRT_FAULT
    }

    pub const fn is_pagefault(l: u16) -> bool {
        l & 0xfff0 == PAGEFAULT
    }
}

/// Typed item word 0, low nibble: map item (`1000`) or grant item (`1010`).
pub mod item {
    pub const MAP: u32 = 0x8;
    pub const GRANT: u32 = 0xa;
    pub const KIND_MASK: u32 = 0xe;
}

/// A map or grant item: word 0 = send base ("hot spot") | kind, word 1 = fpage.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MapItem {
    pub hot_spot: u32,
    pub fpage: Fpage,
    pub grant: bool,
}

impl MapItem {
    pub const fn map(hot_spot: u32, fpage: Fpage) -> MapItem {
        MapItem {
            hot_spot: hot_spot & !0x3ff,
            fpage,
            grant: false,
        }
    }
    pub const fn grant(hot_spot: u32, fpage: Fpage) -> MapItem {
        MapItem {
            hot_spot: hot_spot & !0x3ff,
            fpage,
            grant: true,
        }
    }
    pub const fn encode(self) -> [u32; 2] {
        [
            self.hot_spot | if self.grant { item::GRANT } else { item::MAP },
            self.fpage.0,
        ]
    }
    pub const fn decode(w0: u32, w1: u32) -> Option<MapItem> {
        let grant = match w0 & item::KIND_MASK {
            item::MAP => false,
            item::GRANT => true,
            _ => return None,
        };
        Some(MapItem {
            hot_spot: w0 & !0x3ff,
            fpage: Fpage(w1),
            grant,
        })
    }
}

/// One timeout: `0` = zero (never block), [`Timeout::NEVER`] = infinite, otherwise a
/// relative timeout in microseconds, rounded up to the kernel tick.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct Timeout(pub u16);

impl Timeout {
    pub const ZERO: Timeout = Timeout(0);
    pub const NEVER: Timeout = Timeout(0xffff);
    /// Largest relative timeout: `0xfffe` units of [`TIMEOUT_UNIT_US`].
    pub const fn from_us(us: u32) -> Timeout {
        let units = us.div_ceil(TIMEOUT_UNIT_US);
        Timeout(if units == 0 {
            0
        } else if units >= 0xffff {
            0xfffe
        } else {
            units as u16
        })
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub const fn is_never(self) -> bool {
        self.0 == 0xffff
    }
    pub const fn as_us(self) -> u32 {
        self.0 as u32 * TIMEOUT_UNIT_US
    }
}

/// Relative timeouts count in units of 100 us.
pub const TIMEOUT_UNIT_US: u32 = 100;

/// r5 of `Ipc`: send timeout in bits 31..16, receive timeout in bits 15..0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct Timeouts(pub u32);

impl Timeouts {
    pub const fn new(send: Timeout, recv: Timeout) -> Timeouts {
        Timeouts(((send.0 as u32) << 16) | recv.0 as u32)
    }
    pub const NEVER: Timeouts = Timeouts::new(Timeout::NEVER, Timeout::NEVER);
    pub const fn send(self) -> Timeout {
        Timeout((self.0 >> 16) as u16)
    }
    pub const fn recv(self) -> Timeout {
        Timeout(self.0 as u16)
    }
}

/// IPC error, returned in r4 as `code << 1 | phase` (phase 0 = send, 1 = receive) with
/// [`MsgTag::FLAG_ERROR`] set in the returned tag.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum IpcError {
    /// The timeout expired before the partner was ready.
    Timeout = 1,
    /// The partner does not exist (nil, deleted, or wrong version).
    NoPartner = 2,
    /// The partner was deleted or halted while we waited.
    Canceled = 3,
    /// The tag is malformed or the message does not fit.
    MsgOverflow = 4,
    /// A map/grant item was invalid: bad fpage, nothing mapped, or no receive window.
    MapFailed = 5,
    /// The IPC was aborted with `ExchangeRegisters(ABORT_IPC)`.
    Aborted = 6,
    /// The kernel ran out of memory while mapping.
    NoMemory = 7,
}

/// Which phase an IPC error happened in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IpcPhase {
    Send = 0,
    Receive = 1,
}

impl IpcError {
    pub const fn encode(self, phase: IpcPhase) -> u32 {
        ((self as u32) << 1) | phase as u32
    }
    pub const fn decode(raw: u32) -> Option<(IpcError, IpcPhase)> {
        let phase = if raw & 1 == 0 {
            IpcPhase::Send
        } else {
            IpcPhase::Receive
        };
        let e = match raw >> 1 {
            1 => Self::Timeout,
            2 => Self::NoPartner,
            3 => Self::Canceled,
            4 => Self::MsgOverflow,
            5 => Self::MapFailed,
            6 => Self::Aborted,
            7 => Self::NoMemory,
            _ => return None,
        };
        Some((e, phase))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fpage::Rights;
    use proptest::prelude::*;

    #[test]
    fn tag_fields() {
        let t = MsgTag::new(0x1234, 3, 2);
        assert_eq!(t.label(), 0x1234);
        assert_eq!(t.untyped(), 3);
        assert_eq!(t.typed(), 2);
        assert!(!t.is_error());
        assert!(t.validate().is_ok());
        assert_eq!(MsgTag::new(1, 0, 3).validate(), Err(IpcError::MsgOverflow));
        assert_eq!(MsgTag::new(1, 63, 2).validate(), Err(IpcError::MsgOverflow));
    }

    #[test]
    fn timeouts() {
        let t = Timeouts::new(Timeout::ZERO, Timeout::NEVER);
        assert!(t.send().is_zero());
        assert!(t.recv().is_never());
        assert_eq!(Timeout::from_us(250).0, 3);
        assert_eq!(Timeout::from_us(u32::MAX).0, 0xfffe);
    }

    #[test]
    fn map_item_roundtrip() {
        let f = Fpage::page(0x8000_1000, Rights::RW);
        let m = MapItem::grant(0x1000_1000, f);
        let [a, b] = m.encode();
        assert_eq!(MapItem::decode(a, b), Some(m));
        assert_eq!(MapItem::decode(0x1000_0004, b), None);
    }

    proptest! {
        #[test]
        fn tag_roundtrip(label in any::<u16>(), u in 0u32..64, t in 0u32..64) {
            let tag = MsgTag::new(label, u, t);
            prop_assert_eq!(tag.label(), label);
            prop_assert_eq!(tag.untyped(), u as usize);
            prop_assert_eq!(tag.typed(), t as usize);
        }

        #[test]
        fn error_roundtrip(code in 1u32..8, phase in 0u32..2) {
            let raw = (code << 1) | phase;
            let (e, p) = IpcError::decode(raw).unwrap();
            prop_assert_eq!(e.encode(p), raw);
        }
    }
}
