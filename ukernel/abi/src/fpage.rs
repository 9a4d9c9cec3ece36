//! Flexpages: size-aligned regions of an address space plus access rights (L4 X.2 §4.1).
//!
//! Encoding (32 bits): `base[31:10] | log2size[9:4] | 0 | rights[2:0]`, where rights are
//! r = 4, w = 2, x = 1. `log2size` is 10..=32; 32 with base 0 is the complete space.
//! The smallest unit the kernel maps is one 4 KiB page.

/// Access rights, in the low three bits of a flexpage.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Rights(pub u8);

impl Rights {
    pub const NONE: Rights = Rights(0);
    pub const X: Rights = Rights(1);
    pub const W: Rights = Rights(2);
    pub const R: Rights = Rights(4);
    pub const RX: Rights = Rights(5);
    pub const RW: Rights = Rights(6);
    pub const RWX: Rights = Rights(7);

    pub const fn contains(self, other: Rights) -> bool {
        self.0 & other.0 == other.0
    }
    pub const fn intersect(self, other: Rights) -> Rights {
        Rights(self.0 & other.0)
    }
    pub const fn remove(self, other: Rights) -> Rights {
        Rights(self.0 & !other.0 & 7)
    }
    pub const fn is_empty(self) -> bool {
        self.0 & 7 == 0
    }
}

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u32 = 1 << PAGE_SHIFT;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct Fpage(pub u32);

impl Fpage {
    pub const NIL: Fpage = Fpage(0);

    /// A flexpage of `2^log2size` bytes at `base` with `rights`. Returns `None` unless
    /// `10 <= log2size <= 32` and `base` is aligned to the size.
    pub const fn new(base: u32, log2size: u32, rights: Rights) -> Option<Fpage> {
        if log2size < 10 || log2size > 32 {
            return None;
        }
        if log2size < 32 && base & ((1u32 << log2size) - 1) != 0 {
            return None;
        }
        if log2size == 32 && base != 0 {
            return None;
        }
        Some(Fpage(
            (base & !0x3ff) | (log2size << 4) | (rights.0 as u32 & 7),
        ))
    }

    /// The complete address space.
    pub const fn complete(rights: Rights) -> Fpage {
        Fpage((32 << 4) | (rights.0 as u32 & 7))
    }

    /// One 4 KiB page containing `addr`.
    pub const fn page(addr: u32, rights: Rights) -> Fpage {
        Fpage((addr & !(PAGE_SIZE - 1)) | (PAGE_SHIFT << 4) | (rights.0 as u32 & 7))
    }

    pub const fn is_nil(self) -> bool {
        self.log2size() < 10
    }
    pub const fn log2size(self) -> u32 {
        (self.0 >> 4) & 0x3f
    }
    pub const fn base(self) -> u32 {
        if self.log2size() >= 32 {
            0
        } else {
            self.0 & !0x3ff & !((1u32 << self.log2size()) - 1)
        }
    }
    /// Size in bytes as u64 (the complete space is 2^32).
    pub const fn size(self) -> u64 {
        1u64 << self.log2size()
    }
    /// Last byte of the region.
    pub const fn last(self) -> u32 {
        (self.base() as u64 + self.size() - 1) as u32
    }
    pub const fn rights(self) -> Rights {
        Rights((self.0 & 7) as u8)
    }
    pub const fn with_rights(self, r: Rights) -> Fpage {
        Fpage((self.0 & !7) | (r.0 as u32 & 7))
    }
    pub const fn contains(self, addr: u32) -> bool {
        !self.is_nil() && addr >= self.base() && addr <= self.last()
    }
    /// Valid and at least one page large (the kernel's mapping unit).
    pub const fn is_mappable(self) -> bool {
        self.log2size() >= PAGE_SHIFT && self.log2size() <= 32
    }
}

/// Computes where a send flexpage lands inside a receive window (L4 X.2 map semantics):
/// the transferred region has the size of the smaller of the two; when the window is
/// larger, `hot_spot` (the send base word of the map item) selects the aligned slot in
/// the window; when the send page is larger, `hot_spot` selects which part of it is sent.
///
/// Returns `(source_base, dest_base, log2size)`.
pub fn map_target(send: Fpage, window: Fpage, hot_spot: u32) -> Option<(u32, u32, u32)> {
    if !send.is_mappable() || !window.is_mappable() {
        return None;
    }
    let s = send.log2size();
    let w = window.log2size();
    if s <= w {
        let off = if w == 32 {
            hot_spot
        } else {
            hot_spot & ((1u32 << w) - 1)
        };
        let off = if s == 32 { 0 } else { off & !((1u32 << s) - 1) };
        Some((send.base(), window.base().wrapping_add(off), s))
    } else {
        let off = if s == 32 {
            hot_spot
        } else {
            hot_spot & ((1u32 << s) - 1)
        };
        let off = off & !((1u32 << w) - 1);
        Some((send.base().wrapping_add(off), window.base(), w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encode_decode() {
        let f = Fpage::new(0x1234_0000, 16, Rights::RW).unwrap();
        assert_eq!(f.base(), 0x1234_0000);
        assert_eq!(f.log2size(), 16);
        assert_eq!(f.rights(), Rights::RW);
        assert_eq!(f.last(), 0x1234_ffff);
        assert!(f.contains(0x1234_8000));
        assert!(!f.contains(0x1235_0000));
    }

    #[test]
    fn rejects_misaligned_and_bad_sizes() {
        assert!(Fpage::new(0x1000, 16, Rights::R).is_none());
        assert!(Fpage::new(0, 9, Rights::R).is_none());
        assert!(Fpage::new(0, 33, Rights::R).is_none());
        assert!(Fpage::new(0x1000, 32, Rights::R).is_none());
        assert!(Fpage::NIL.is_nil());
    }

    #[test]
    fn complete_space() {
        let f = Fpage::complete(Rights::RWX);
        assert_eq!(f.base(), 0);
        assert_eq!(f.size(), 1 << 32);
        assert!(f.contains(0xffff_ffff));
        assert_eq!(f.last(), 0xffff_ffff);
    }

    #[test]
    fn map_into_larger_window_uses_hot_spot() {
        let send = Fpage::page(0x8000_3000, Rights::RW);
        let window = Fpage::complete(Rights::RWX);
        assert_eq!(
            map_target(send, window, 0x1000_5000),
            Some((0x8000_3000, 0x1000_5000, 12))
        );
    }

    #[test]
    fn map_into_smaller_window_trims_send() {
        let send = Fpage::new(0x8000_0000, 16, Rights::RW).unwrap();
        let window = Fpage::page(0x2000_0000, Rights::RWX);
        assert_eq!(
            map_target(send, window, 0x3000),
            Some((0x8000_3000, 0x2000_0000, 12))
        );
    }

    proptest! {
        #[test]
        fn roundtrip(base in any::<u32>(), log in 10u32..32, r in 0u8..8) {
            let base = base & !((1u32 << log) - 1);
            let f = Fpage::new(base, log, Rights(r)).unwrap();
            prop_assert_eq!(f.base(), base);
            prop_assert_eq!(f.log2size(), log);
            prop_assert_eq!(f.rights(), Rights(r));
            prop_assert!(f.contains(base));
            prop_assert!(f.contains(f.last()));
        }

        #[test]
        fn map_target_stays_inside_both(sb in any::<u32>(), sl in 12u32..=32, wb in any::<u32>(), wl in 12u32..=32, hot in any::<u32>()) {
            let sb = if sl == 32 { 0 } else { sb & !((1u32 << sl) - 1) };
            let wb = if wl == 32 { 0 } else { wb & !((1u32 << wl) - 1) };
            let s = Fpage::new(sb, sl, Rights::RWX).unwrap();
            let w = Fpage::new(wb, wl, Rights::RWX).unwrap();
            let (src, dst, l) = map_target(s, w, hot).unwrap();
            prop_assert_eq!(l, sl.min(wl));
            let len = 1u64 << l;
            prop_assert!(s.contains(src) && (src as u64 + len - 1) <= s.last() as u64);
            prop_assert!(w.contains(dst) && (dst as u64 + len - 1) <= w.last() as u64);
        }
    }
}
