//! What the fuzzer and its sibling say to each other (one IPC call each way, registers only).
//!
//! The sibling's first thread answers every message it receives: a [`QUERY`] (or anything
//! else) with [`COUNT`] and its rounds so far, a [`STOP`] carrying both magic words with
//! [`COUNT`] and then it exits. Any other sender, the fuzzer's random messages included, gets
//! the same [`COUNT`] answer, so nothing a sender puts in a message can stop or confuse it.

/// Query: "how many rounds so far?". No words.
pub const QUERY: u16 = 0x5f00;
/// Answer: MR1 = rounds done, MR2 = [`MAGIC`], MR3 = corrupt rounds seen (0 when healthy).
pub const COUNT: u16 = 0x5f01;
/// Stop: MR1 = [`STOP_MAGIC`], MR2 = `!STOP_MAGIC`. The sibling answers, then exits.
pub const STOP: u16 = 0x5f02;
/// Second word of every [`COUNT`] answer: tells the sibling from a thread that happens to
/// answer with the same label.
pub const MAGIC: u32 = 0x5349_424c;
pub const STOP_MAGIC: u32 = 0x5354_4f50;
