//! The engine's side of the fabric service protocol.
//!
//! The wire codec (labels, ops, request and reply words, events, the shared page) is
//! `kestrel_fabric_client::proto` (fabric/client/src/proto.rs, docs/adr/0020): the service
//! helper landed it first, and one protocol has one codec. This module holds what only
//! the engine knows and the service needs on the wire:
//! - [`error_code`] / [`error_from_code`]: a [`FabricError`] as the byte the client codec
//!   carries in `FabricErr::Engine(code)`;
//! - [`diagnostic_words`] / [`diagnostic_from_words`]: a [`Diagnostic`] as three words
//!   (kind, address high, address low; the value in a fourth), for a service that logs or
//!   forwards `Fabric::take_diagnostic`;
//! - [`stats_words`]: the four counters of the client codec's `Stats` reply (packets,
//!   bytes, drops, errors).
//!
//! Every decoder is total (never panics) and round-trips (property tests below; the fuzz
//! target `fabric` replays them).

use crate::{DiagKind, Diagnostic, FabricError, Stats};

/// The wire code of an engine error (1..=10; 0 is never used).
pub fn error_code(e: FabricError) -> u8 {
    match e {
        FabricError::NoSuchEndpoint => 1,
        FabricError::NoFreeEndpoint => 2,
        FabricError::BadWindow => 3,
        FabricError::BadRegister => 4,
        FabricError::BadDcr => 5,
        FabricError::BadVc => 6,
        FabricError::BadFrame => 7,
        FabricError::InjectionFull => 8,
        FabricError::BadHeader => 9,
        FabricError::OutsideWindow => 10,
    }
}

/// The engine error with wire code `c`.
pub fn error_from_code(c: u8) -> Option<FabricError> {
    Some(match c {
        1 => FabricError::NoSuchEndpoint,
        2 => FabricError::NoFreeEndpoint,
        3 => FabricError::BadWindow,
        4 => FabricError::BadRegister,
        5 => FabricError::BadDcr,
        6 => FabricError::BadVc,
        7 => FabricError::BadFrame,
        8 => FabricError::InjectionFull,
        9 => FabricError::BadHeader,
        10 => FabricError::OutsideWindow,
        _ => return None,
    })
}

/// A diagnostic as four words: kind code, address high, address low, value.
pub fn diagnostic_words(d: &Diagnostic) -> [u32; 4] {
    [d.kind as u32, (d.addr >> 32) as u32, d.addr as u32, d.value]
}

/// The inverse of [`diagnostic_words`]; `None` for an unknown kind.
pub fn diagnostic_from_words(w: [u32; 4]) -> Option<Diagnostic> {
    Some(Diagnostic {
        kind: DiagKind::from_code(w[0])?,
        addr: u64::from(w[1]) << 32 | u64::from(w[2]),
        value: w[3],
    })
}

/// The client codec's `Stats` reply: packets (torus + collective + frames, sent and
/// received), payload bytes (torus, sent and received), drops, errors; each saturated to
/// 32 bits.
pub fn stats_words(s: &Stats) -> [u32; 4] {
    let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let packets = s.dma_packets_sent
        + s.dma_packets_received
        + s.tree_packets_sent
        + s.tree_packets_received
        + s.frames_sent
        + s.frames_received;
    [
        sat(packets),
        sat(s.dma_bytes_sent + s.dma_bytes_received),
        sat(s.drops),
        sat(s.errors),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn error_codes_round_trip_and_are_distinct() {
        let mut seen = [false; 256];
        for c in 0..=255u8 {
            if let Some(e) = error_from_code(c) {
                assert_eq!(error_code(e), c);
                assert!(!seen[usize::from(c)]);
                seen[usize::from(c)] = true;
            }
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), 10);
        assert_eq!(error_from_code(0), None);
    }

    proptest! {
        #[test]
        fn diagnostic_round_trip(k in 1..=11u32, addr in any::<u64>(), value in any::<u32>()) {
            let d = Diagnostic { kind: DiagKind::from_code(k).unwrap(), addr, value };
            prop_assert_eq!(diagnostic_from_words(diagnostic_words(&d)), Some(d));
        }

        #[test]
        fn diagnostic_decode_is_total(w in any::<[u32; 4]>()) {
            if let Some(d) = diagnostic_from_words(w) {
                prop_assert_eq!(diagnostic_words(&d), w);
            }
        }

        #[test]
        fn stats_words_saturate(a in any::<[u32; 10]>()) {
            let s = Stats::from_array(a.map(u64::from));
            let w = stats_words(&s);
            prop_assert_eq!(w[2], a[8]);
            prop_assert_eq!(w[3], a[9]);
            prop_assert_eq!(Stats::from_array(s.to_array()), s);
        }
    }
}
