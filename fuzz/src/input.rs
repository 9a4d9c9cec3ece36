//! The fuzz input as a stream of numbers, and its inverse for writing seeds.
//!
//! [`Input`] reads big-endian numbers from the front of the fuzzer's byte string and
//! yields zeros once it is exhausted, so every byte string is a valid input and a short
//! one is a short run. [`SeedWriter`] writes the same encoding, so seeds built from the
//! property tests' generators replay exactly the operations they describe.

/// A reader over the fuzzer's bytes.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte (0 when exhausted).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// A byte below `n` (1..=256).
    pub fn below(&mut self, n: u32) -> u32 {
        u32::from(self.u8()) % n.max(1)
    }

    /// One of `choices` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len() as u32) as usize]
    }

    /// Up to `n` bytes (fewer when the input runs out).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }
}

/// Writes seeds in [`Input`]'s encoding.
#[derive(Default)]
pub struct SeedWriter {
    pub bytes: Vec<u8>,
}

impl SeedWriter {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes.push(v);
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(v as u8)
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(b);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_and_reader_agree_and_exhaustion_reads_zero() {
        let mut w = SeedWriter::default();
        w.u8(7)
            .u16(0x1234)
            .u32(0xdead_beef)
            .u64(0x0102_0304_0506_0708)
            .bool(true);
        let mut r = Input::new(&w.bytes);
        assert_eq!(r.u8(), 7);
        assert_eq!(r.u16(), 0x1234);
        assert_eq!(r.u32(), 0xdead_beef);
        assert_eq!(r.u64(), 0x0102_0304_0506_0708);
        assert!(r.bool());
        assert!(r.is_empty());
        assert_eq!(r.u32(), 0);
        assert_eq!(r.bytes(3), b"");
    }
}
