//! The torus DMA engine, bgp-interconnect.md 2.3: a DMA group's registers (4 KiB per group),
//! the DMA DCRs at 0xD00, the 32-byte injection descriptor, and the 16-byte packet header
//! (8-byte hardware header + 8-byte software header).
//!
//! Addresses in FIFO and counter registers are physical addresses shifted right by 4
//! (16-byte units). A Kestrel VM sees exactly one group (its own), as group
//! [`VM_GROUP`]; the VMM translates its guest-physical values to fabric bus addresses.

regs! { "DMA_";
    /// Guest-physical base of DMA group 0 (group g at `BASE + g * GROUP_SIZE`).
    BASE: u64 = 0x6_0000_0000;
    /// Size of one group's register page.
    GROUP_SIZE: u64 = 0x1000;
    /// Groups of a node.
    GROUPS: u32 = 4;
    /// The group number a Kestrel VM's own DMA group has (Kittyhawk's kernel uses group 3).
    VM_GROUP: u32 = 3;
    /// Injection FIFOs per group.
    INJ_FIFOS: u32 = 32;
    /// Reception FIFOs per group (plus one header FIFO).
    RCV_FIFOS: u32 = 8;
    /// Injection (and reception) counters per group.
    COUNTERS: u32 = 64;
    /// Injection FIFO f's registers at `INJ_FIFO + 16 * f`.
    INJ_FIFO: u32 = 0x000;
    /// Distance between two FIFOs' (or counters') register blocks.
    FIFO_STRIDE: u32 = 0x10;
    /// FIFO register: START (address >> 4).
    FIFO_START: u32 = 0x0;
    /// FIFO register: END (address >> 4; the FIFO is [START, END)).
    FIFO_END: u32 = 0x4;
    /// FIFO register: HEAD (address >> 4). Injection: the DMA advances it. Reception:
    /// software advances it.
    FIFO_HEAD: u32 = 0x8;
    /// FIFO register: TAIL (address >> 4). Injection: software advances it. Reception: the
    /// DMA advances it.
    FIFO_TAIL: u32 = 0xC;
    /// Injection FIFOs not empty (bit per FIFO, MSB = FIFO 0).
    INJ_NOT_EMPTY: u32 = 0x200;
    /// Injection FIFOs with room (bit per FIFO).
    INJ_AVAILABLE: u32 = 0x208;
    /// Injection FIFO threshold crossed (bit per FIFO).
    INJ_THRESHOLD: u32 = 0x210;
    /// Write 1s: clear injection FIFO threshold-crossed bits.
    INJ_THRESHOLD_CLEAR: u32 = 0x218;
    /// Injection FIFOs activated (bit per FIFO, RO).
    INJ_ACTIVATED: u32 = 0x220;
    /// Write 1s: activate injection FIFOs.
    INJ_ACTIVATE: u32 = 0x224;
    /// Write 1s: deactivate injection FIFOs.
    INJ_DEACTIVATE: u32 = 0x228;
    /// Injection counters enabled, words 0 and 1 (bit per counter, MSB of word 0 = 0).
    INJ_CTR_ENABLED: u32 = 0x300;
    /// Write 1s: enable injection counters (2 words).
    INJ_CTR_ENABLE: u32 = 0x308;
    /// Write 1s: disable injection counters (2 words).
    INJ_CTR_DISABLE: u32 = 0x310;
    /// Injection counters that hit zero (2 words).
    INJ_CTR_HIT_ZERO: u32 = 0x320;
    /// Write 1s: clear hit-zero bits (2 words).
    INJ_CTR_CLEAR_HIT_ZERO: u32 = 0x328;
    /// Injection counter group status (bit per 8-counter subgroup with a hit-zero).
    INJ_CTR_GRP_STATUS: u32 = 0x330;
    /// Injection counter c's registers at `INJ_CTR + 16 * c`.
    INJ_CTR: u32 = 0x400;
    /// Counter register: COUNT (bytes still to send or to receive).
    CTR_COUNT: u32 = 0x0;
    /// Counter register: INCREMENT (a write adds to COUNT; reads 0).
    CTR_INCREMENT: u32 = 0x4;
    /// Counter register: BASE (address >> 4).
    CTR_BASE: u32 = 0x8;
    /// Counter register (reception only): LIMIT / MAX (address >> 4).
    CTR_LIMIT: u32 = 0xC;
    /// Reception FIFO f's registers at `RCV_FIFO + 16 * f`.
    RCV_FIFO: u32 = 0x800;
    /// The reception header FIFO's registers.
    RCV_HDR_FIFO: u32 = 0x880;
    /// 16 words of storage the DMA does not use.
    SCRATCH: u32 = 0x900;
    /// Reception FIFOs not empty (two words; bit `group * 8 + f`, MSB first).
    RCV_NOT_EMPTY: u32 = 0xA00;
    /// Reception FIFOs with room (two words).
    RCV_AVAILABLE: u32 = 0xA08;
    /// Reception FIFO threshold crossed (two words).
    RCV_THRESHOLD: u32 = 0xA10;
    /// Write 1s: clear reception threshold-crossed bits (two words).
    RCV_THRESHOLD_CLEAR: u32 = 0xA18;
    /// Reception counters enabled (2 words).
    RCV_CTR_ENABLED: u32 = 0xB00;
    /// Write 1s: enable reception counters.
    RCV_CTR_ENABLE: u32 = 0xB08;
    /// Write 1s: disable reception counters.
    RCV_CTR_DISABLE: u32 = 0xB10;
    /// Reception counters that hit zero (2 words).
    RCV_CTR_HIT_ZERO: u32 = 0xB18;
    /// Write 1s: clear reception hit-zero bits.
    RCV_CTR_CLEAR_HIT_ZERO: u32 = 0xB20;
    /// Reception counter group status.
    RCV_CTR_GRP_STATUS: u32 = 0xB30;
    /// Reception counter c's registers at `RCV_CTR + 16 * c`.
    RCV_CTR: u32 = 0xC00;
    /// First DMA DCR.
    DCR_BASE: u32 = 0xD00;
    /// Number of DMA DCRs.
    DCR_COUNT: u32 = 0x100;
    /// DCR offset: reset (all ones = in reset).
    DCR_RESET: u32 = 0x00;
    /// DCR offset: base control.
    DCR_BASE_CONTROL: u32 = 0x01;
    /// Base control bit 0: use the DMA (not the torus FIFOs).
    BASE_CONTROL_USE_DMA: u32 = 1 << 31;
    /// DCR offset: injection range window w (0..8) minimum (address >> 4) at
    /// `DCR_INJ_MIN + 2 * w`, maximum at `+ 1`.
    DCR_INJ_MIN: u32 = 0x02;
    /// DCR offset: reception range window w minimum at `DCR_RCV_MIN + 2 * w`, maximum at `+ 1`.
    DCR_RCV_MIN: u32 = 0x14;
    /// Range-check windows per direction.
    RANGE_WINDOWS: u32 = 8;
    /// DCR offset: injection FIFO enable of group g at `DCR_INJ_FIFO_ENABLE + g`.
    DCR_INJ_FIFO_ENABLE: u32 = 0x2C;
    /// DCR offset: reception FIFO enable (bit `group * 8 + f`).
    DCR_RCV_FIFO_ENABLE: u32 = 0x30;
    /// DCR offset: reception header FIFO enable.
    DCR_RCV_HDR_FIFO_ENABLE: u32 = 0x31;
    /// DCR offset: reception FIFO type (bit per FIFO: which threshold and interrupt, 0/1).
    DCR_RCV_FIFO_TYPE: u32 = 0x38;
    /// DCR offset: reception threshold of type 0 FIFOs (in 16-byte units).
    DCR_RCV_THRESHOLD0: u32 = 0x3A;
    /// DCR offset: reception threshold of type 1 FIFOs.
    DCR_RCV_THRESHOLD1: u32 = 0x3B;
    /// DCR offset: the reception FIFO map, `DCR_RCV_MAP + 2 * pid_pair + word`; a byte per
    /// arrival direction (XP, XM, YP, YM, ZP, ZM, HIGH, LOCAL), value `group << 3 | fifo`.
    /// Kestrel delivers everything inside a node as LOCAL (byte 7, the last of word 1).
    DCR_RCV_MAP: u32 = 0x60;
    /// PID values a packet can carry (hardware header bits Pid0, Pid1); the reception FIFO
    /// map has two DCRs per PID.
    PIDS: u32 = 4;
    /// Reception FIFO map: DCRs per PID pair (PID = Pid0 << 1 | Pid1, 4 pairs).
    RCV_MAP_DCRS_PER_PID: u32 = 2;
    /// Reception FIFO map: the word (of the pair) holding the LOCAL arrival byte.
    RCV_MAP_LOCAL_WORD: u32 = 1;
    /// Reception FIFO map: shift of the LOCAL byte in its word (the last byte).
    RCV_MAP_LOCAL_SHIFT: u32 = 0;
    /// DCR offset: injection FIFO interrupt enable of group g at `DCR_INJ_FIFO_IRQ_EN + g`.
    DCR_INJ_FIFO_IRQ_EN: u32 = 0x6D;
    /// DCR offset: reception FIFO interrupt enable of type t at `DCR_RCV_FIFO_IRQ_EN + t`
    /// (bit `group * 8 + f`, MSB first).
    DCR_RCV_FIFO_IRQ_EN: u32 = 0x71;
    /// DCR offset: injection counter hit-zero interrupt enable for line i at
    /// `DCR_INJ_CTR_IRQ_EN + i` (bit per 8-counter subgroup `group * 8 + s`).
    DCR_INJ_CTR_IRQ_EN: u32 = 0x76;
    /// DCR offset: reception counter hit-zero interrupt enable for line i at
    /// `DCR_RCV_CTR_IRQ_EN + i`.
    DCR_RCV_CTR_IRQ_EN: u32 = 0x7A;
    /// DCR offset: fatal error enable 0 (bit per [`DCR_FATAL_STATUS`] bit; the fatal IRQ
    /// line is raised while `status & enable` is not zero). Kestrel's reset value enables
    /// [`ERR_RANGE`] and [`ERR_DESCRIPTOR`].
    DCR_FATAL_ENABLE: u32 = 0x7E;
    /// DCR offset: fatal error status 0 (Kestrel sets [`ERR_RANGE`] here).
    DCR_FATAL_STATUS: u32 = 0x93;
    /// DCR offset: the bad address of the last range-check violation (address >> 4).
    DCR_BAD_ADDRESS: u32 = 0x97;
    /// DCR offset (Kestrel's, no BG/P counterpart): who may direct-put into reception
    /// counter c of the group, at `DCR_PUT_FROM + c` (64 DCRs). BG/P's DMA lands a direct
    /// put in any enabled counter; on a shared fabric the counter's owner names the sender
    /// it expects (`coord_word` of its coordinates | [`PUT_FROM_ONE`]) or allows every
    /// endpoint it may reach ([`PUT_FROM_ANY`]). Reset: 0, nobody (the owner's own local
    /// memcopies always land). A refused put is dropped and counted at the receiver, with
    /// [`ERR_PUT_REFUSED`] in the sender's fatal status.
    DCR_PUT_FROM: u32 = 0xA0;
    /// `DCR_PUT_FROM` value bit: the sender whose coordinate word is in bits 8-31 may put.
    PUT_FROM_ONE: u32 = 1 << 0;
    /// `DCR_PUT_FROM` value bit: any endpoint the owner may reach may put.
    PUT_FROM_ANY: u32 = 1 << 1;
    /// Fatal error status bit: a DMA address outside every range-check window.
    ERR_RANGE: u32 = 1 << 31;
    /// Fatal error status bit: a descriptor the engine could not decode (bad counter id,
    /// zero-size packet, FIFO pointers outside the FIFO).
    ERR_DESCRIPTOR: u32 = 1 << 30;
    /// Fatal error status bit: a reception FIFO was full and a packet was dropped.
    ERR_RCV_OVERFLOW: u32 = 1 << 29;
    /// Fatal error status bit (Kestrel's): a packet went to an endpoint this one has no
    /// grant to reach, or a direct put to a counter whose owner did not allow this sender
    /// ([`DCR_PUT_FROM`]); the packet was dropped.
    ERR_PUT_REFUSED: u32 = 1 << 28;
    /// Descriptor size in bytes.
    DESC_BYTES: u32 = 32;
    /// Descriptor word 0 bit 30: prefetch only.
    DESC_PREFETCH_ONLY: u32 = 1 << 1;
    /// Descriptor word 0 bit 31: local memory copy.
    DESC_LOCAL_MEMCOPY: u32 = 1 << 0;
    /// Descriptor word 1, bits 24-31: injection counter id (`group * 64 + counter`).
    DESC_CTR_ID_MASK: u32 = 0xFF;
    /// Descriptor byte offset of word 2 (base_offset, added to the counter's BASE).
    DESC_BASE_OFFSET: u32 = 8;
    /// Descriptor byte offset of word 3 (message length in bytes).
    DESC_LENGTH: u32 = 12;
    /// Descriptor byte offset of the 8-byte hardware header (words 4-5).
    DESC_HW_HDR: u32 = 16;
    /// Descriptor byte offset of the 8-byte software header (words 6-7).
    DESC_SW_HDR: u32 = 24;
    /// Packet header size (hardware + software header) in every FIFO slot.
    PKT_HDR_BYTES: u32 = 16;
    /// Largest payload of a packet (8 chunks of 32 bytes, minus the header).
    PKT_MAX_PAYLOAD: u32 = 240;
    /// Bytes per chunk.
    CHUNK_BYTES: u32 = 32;
    /// HW header word 0 bits 0-6: checksum skip: shift.
    HW_CSUM_SKIP_SHIFT: u32 = 25;
    /// HW header word 0 bit 7: skip checksum.
    HW_SK: u32 = 1 << 24;
    /// HW header word 0 bits 8-13: hint bits x+ x- y+ y- z+ z-: shift.
    HW_HINT_SHIFT: u32 = 18;
    /// HW header word 0 bit 14: deposit.
    HW_DP: u32 = 1 << 17;
    /// HW header word 0 bit 15: PID bit 0.
    HW_PID0: u32 = 1 << 16;
    /// HW header word 0 bits 16-18: chunks - 1: shift (packet = (chunks + 1) * 32 bytes).
    HW_CHUNKS_SHIFT: u32 = 13;
    /// HW header chunk field mask (after the shift).
    HW_CHUNKS_MASK: u32 = 0x7;
    /// HW header word 0 bit 19: PID bit 1.
    HW_PID1: u32 = 1 << 12;
    /// HW header word 0 bit 20: direct put (1) or memory FIFO (0).
    HW_DM: u32 = 1 << 11;
    /// HW header word 0 bit 21: dynamic routing.
    HW_DYNAMIC: u32 = 1 << 10;
    /// HW header word 0 bits 22-23: virtual channel: shift.
    HW_VC_SHIFT: u32 = 8;
    /// HW header word 0 bits 24-31: destination X.
    HW_X_MASK: u32 = 0xFF;
    /// HW header word 1 bits 0-7: destination Y: shift.
    HW_Y_SHIFT: u32 = 24;
    /// HW header word 1 bits 8-15: destination Z: shift.
    HW_Z_SHIFT: u32 = 16;
    /// SW header byte offset of Put_Offset (word 2 of the packet header).
    SW_PUT_OFFSET: u32 = 8;
    /// SW header byte offset of word 3 (direct put: rcv counter, payload bytes, flags, FIFO id;
    /// memory FIFO: SW_Arg:24, Func_Id:8).
    SW_WORD3: u32 = 12;
    /// Direct put, SW word 3 bits 0-7: reception counter id: shift.
    SW_RCV_CTR_SHIFT: u32 = 24;
    /// BIC line: DMA fatal error (range check, bad descriptor).
    IRQ_FATAL: u32 = 0x3F;
    /// BIC line: injection FIFO threshold of group g is `IRQ_INJ_FIFO_THRESHOLD + g`.
    IRQ_INJ_FIFO_THRESHOLD: u32 = 0x58;
    /// BIC line: reception FIFO threshold of type t is `IRQ_RCV_FIFO_THRESHOLD + t`.
    IRQ_RCV_FIFO_THRESHOLD: u32 = 0x5C;
    /// BIC line: injection counter hit zero, line i is `IRQ_INJ_CTR_ZERO + i`.
    IRQ_INJ_CTR_ZERO: u32 = 0x60;
    /// BIC line: reception counter hit zero, line i is `IRQ_RCV_CTR_ZERO + i`.
    IRQ_RCV_CTR_ZERO: u32 = 0x64;
    /// BIC line: injection counter error, line i.
    IRQ_INJ_CTR_ERROR: u32 = 0x68;
    /// BIC line: DMA write error (a delivery outside the reception range windows).
    IRQ_WRITE_ERROR: u32 = 0x6F;
    /// Bytes of bgnet's torus link header in front of a frame.
    LINK_HDR_BYTES: u32 = 12;
    /// bgnet's torus framing: most packets of one memory-FIFO message (39, so a message of
    /// `39 * PKT_MAX_PAYLOAD` bytes, link header included, as Kittyhawk's TORUS_MAX_MTU).
    MSG_MAX_PKTS: u32 = 39;
}

/// Offset of injection FIFO `f`'s register `reg`.
pub const fn inj_fifo(f: u32, reg: u32) -> u32 {
    INJ_FIFO + f * FIFO_STRIDE + reg
}

/// Offset of reception FIFO `f`'s register `reg`.
pub const fn rcv_fifo(f: u32, reg: u32) -> u32 {
    RCV_FIFO + f * FIFO_STRIDE + reg
}

/// Offset of injection counter `c`'s register `reg`.
pub const fn inj_ctr(c: u32, reg: u32) -> u32 {
    INJ_CTR + c * FIFO_STRIDE + reg
}

/// Offset of reception counter `c`'s register `reg`.
pub const fn rcv_ctr(c: u32, reg: u32) -> u32 {
    RCV_CTR + c * FIFO_STRIDE + reg
}

/// The bit of counter `c` of group `group` in a counter group status or hit-zero interrupt
/// enable word ([`DCR_RCV_CTR_IRQ_EN`], [`DCR_INJ_CTR_IRQ_EN`]): one bit per 8-counter
/// subgroup, `group * 8 + c / 8`, MSB first.
pub const fn ctr_subgroup_bit(group: u32, c: u32) -> u32 {
    0x8000_0000u32.wrapping_shr(group * 8 + c / 8)
}
