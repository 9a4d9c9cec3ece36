//! Per-phase trace snapshots: the guest names a point in its run, the VMM prints the
//! guest's cumulative trace table there (docs/adr/0027-table1-phases.md).
//!
//! A guest job (guests/linux/scripts/job) prints the console line `kestrel-trace-mark NAME`
//! at the start of each phase. With `vmm.trace_marks=on` on the Kestrel command line, the VMM
//! prints, right after that line, a heading naming the mark and the time base, then the
//! vCPU's trace table in the same format as the one printed at power-off; bench/table1.py
//! subtracts consecutive tables to get each phase's exits. This module is the pure part: which
//! console line is a mark (guest-controlled bytes: never panics, accepts only a short name of
//! safe characters) and what the option's value means. Printing is the VMM task's
//! (vmm/task/src/trace_mark.rs).

use core::fmt;

/// The console line that asks for a snapshot starts with this (then the name, nothing after).
pub const LINE_PREFIX: &[u8] = b"kestrel-trace-mark ";
/// The kernel command line option that turns the snapshots on (`on`) or off (`off`, default).
pub const OPTION: &str = "vmm.trace_marks=";
/// Longest mark name: enough for a phase name, short enough for a fixed buffer.
pub const MAX_NAME: usize = 32;

/// A mark's name: 1 to [`MAX_NAME`] bytes of `[A-Za-z0-9_.:-]`, so it prints as it is and
/// cannot forge another console line.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    name: [u8; MAX_NAME],
    len: u8,
}

impl Mark {
    /// The mark a complete console line (without its line end) asks for, if it is one: exactly
    /// [`LINE_PREFIX`] and a valid name. Trailing spaces or a carriage return are tolerated
    /// (a serial console adds one); anything else makes it an ordinary line.
    pub fn from_line(line: &[u8]) -> Option<Mark> {
        let rest = line.strip_prefix(LINE_PREFIX)?;
        let end = rest
            .iter()
            .rposition(|&b| b != b' ' && b != b'\r')
            .map_or(0, |i| i + 1);
        Mark::new(&rest[..end])
    }

    /// A mark named `name`, if the name is valid.
    pub fn new(name: &[u8]) -> Option<Mark> {
        if name.is_empty() || name.len() > MAX_NAME || !name.iter().all(|&b| is_name_byte(b)) {
            return None;
        }
        let mut m = Mark {
            name: [0; MAX_NAME],
            len: name.len() as u8,
        };
        m.name[..name.len()].copy_from_slice(name);
        Some(m)
    }

    /// The name (always ASCII).
    pub fn name(&self) -> &str {
        // Only bytes that `is_name_byte` accepts are stored: ASCII, so valid UTF-8.
        core::str::from_utf8(&self.name[..self.len as usize]).unwrap_or("?")
    }
}

impl fmt::Debug for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mark({})", self.name())
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-')
}

/// What `vmm.trace_marks=` says: `Some(true)` for `on`, `Some(false)` for `off`, `None` for
/// anything else (the VMM says so and leaves the snapshots off).
pub fn parse_option(value: &str) -> Option<bool> {
    match value {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn a_mark_line_names_its_mark() {
        let m = Mark::from_line(b"kestrel-trace-mark gzip").expect("a mark");
        assert_eq!(m.name(), "gzip");
        assert_eq!(
            Mark::from_line(b"kestrel-trace-mark end \r").map(|m| m.name().len()),
            Some(3)
        );
        assert_eq!(
            Mark::from_line(b"kestrel-trace-mark phase_1.a:b-c")
                .unwrap()
                .name(),
            "phase_1.a:b-c"
        );
    }

    #[test]
    fn other_lines_are_not_marks() {
        for line in [
            &b""[..],
            b"kestrel-trace-mark",
            b"kestrel-trace-mark ",
            b"kestrel-trace-mark two words",
            b" kestrel-trace-mark x",
            b"kestrel-trace-markx",
            b"kestrel-trace-mark \x1b[2Jx",
            b"echo kestrel-trace-mark x",
            b"kestrel-trace-mark 0123456789012345678901234567890123",
        ] {
            assert_eq!(Mark::from_line(line), None, "{:?}", line);
        }
        assert!(Mark::from_line(b"kestrel-trace-mark 01234567890123456789012345678901").is_some());
    }

    #[test]
    fn the_option() {
        assert_eq!(parse_option("on"), Some(true));
        assert_eq!(parse_option("off"), Some(false));
        assert_eq!(parse_option("yes"), None);
        assert_eq!(parse_option(""), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Any console line: no panic, and a mark only for the prefix plus a valid name,
        /// which comes back unchanged.
        #[test]
        fn any_line(tail in proptest::collection::vec(any::<u8>(), 0..48), prefixed: bool) {
            let mut line = Vec::new();
            if prefixed {
                line.extend_from_slice(LINE_PREFIX);
            }
            line.extend_from_slice(&tail);
            match Mark::from_line(&line) {
                Some(m) => {
                    prop_assert!(prefixed);
                    prop_assert!(!m.name().is_empty() && m.name().len() <= MAX_NAME);
                    prop_assert!(m.name().bytes().all(is_name_byte));
                    prop_assert!(tail.starts_with(m.name().as_bytes()));
                    prop_assert!(tail[m.name().len()..].iter().all(|&b| b == b' ' || b == b'\r'));
                }
                None => prop_assert!(!prefixed || Mark::new(&tail).is_none()),
            }
        }

        /// Every valid name round-trips through its console line.
        #[test]
        fn valid_names_round_trip(name in "[A-Za-z0-9_.:-]{1,32}") {
            let mut line = Vec::from(LINE_PREFIX);
            line.extend_from_slice(name.as_bytes());
            let mark = Mark::from_line(&line);
            prop_assert_eq!(mark.as_ref().map(Mark::name), Some(name.as_str()));
        }
    }
}
