//! The collective (tree) network, bgp-interconnect.md 2.2: two virtual channels (VCs) with
//! header and payload FIFOs, a 32-bit packet header, status words, and DCRs at 0xC00.
//!
//! Deviation forced by the 440 (no Double Hummer): a payload quad is written to DI and read
//! from DR as four 32-bit (or two 64-bit) accesses at +0..+12; a model assembles them.

regs! { "COLL_";
    /// Guest-physical base of VC0's window.
    VC0_BASE: u64 = 0x6_1000_0000;
    /// Guest-physical base of VC1's window.
    VC1_BASE: u64 = 0x6_1100_0000;
    /// Size of one VC window.
    VC_SIZE: u64 = 0x400;
    /// Number of virtual channels.
    VCS: u32 = 2;
    /// VC register: data (payload) injection, one 16-byte quad per store sequence (WO).
    DI: u32 = 0x00;
    /// VC register: header injection, one 32-bit word (WO).
    HI: u32 = 0x10;
    /// VC register: data (payload) reception, one quad (RO).
    DR: u32 = 0x20;
    /// VC register: header reception (RO).
    HR: u32 = 0x30;
    /// VC register: status of this VC (RO).
    S: u32 = 0x40;
    /// VC register: status of the other VC (RO).
    SO: u32 = 0x50;
    /// Packets per injection or reception FIFO.
    FIFO_PACKETS: u32 = 8;
    /// Payload bytes per packet.
    PAYLOAD_BYTES: u32 = 256;
    /// Payload quads (16 bytes) per packet.
    PAYLOAD_QUADS: u32 = 16;
    /// Header: class (route) field, bits 0-3: shift.
    HDR_CLASS_SHIFT: u32 = 28;
    /// Header: class field mask (after the shift).
    HDR_CLASS_MASK: u32 = 0xF;
    /// Header: bit 4, point-to-point.
    HDR_P2P: u32 = 1 << 27;
    /// Header: bit 5, interrupt at the receiver.
    HDR_IRQ: u32 = 1 << 26;
    /// Header (P2P): target node address, bits 6-29: shift.
    HDR_P2P_ADDR_SHIFT: u32 = 2;
    /// Header (P2P): target node address mask (24 bits, after the shift).
    HDR_P2P_ADDR_MASK: u32 = 0xFF_FFFF;
    /// Header (not P2P): ALU opcode, bits 6-8: shift.
    HDR_OP_SHIFT: u32 = 23;
    /// Header (not P2P): ALU opcode mask (after the shift).
    HDR_OP_MASK: u32 = 0x7;
    /// Header (not P2P): operand size (16-bit words - 1), bits 9-15: shift.
    HDR_OPSIZE_SHIFT: u32 = 16;
    /// Header (not P2P): operand size mask (after the shift).
    HDR_OPSIZE_MASK: u32 = 0x7F;
    /// Header (not P2P): tag, bits 16-29: shift.
    HDR_TAG_SHIFT: u32 = 2;
    /// Header (not P2P): tag mask (after the shift).
    HDR_TAG_MASK: u32 = 0x3FFF;
    /// Header: injection checksum mode, bits 30-31.
    HDR_CSUM_MASK: u32 = 0x3;
    /// ALU opcode: none (broadcast).
    OP_NONE: u32 = 0;
    /// ALU opcode: bitwise OR.
    OP_OR: u32 = 1;
    /// ALU opcode: bitwise AND.
    OP_AND: u32 = 2;
    /// ALU opcode: bitwise XOR.
    OP_XOR: u32 = 3;
    /// ALU opcode: unsigned maximum.
    OP_MAX: u32 = 5;
    /// ALU opcode: unsigned integer addition.
    OP_ADD: u32 = 6;
    /// Status: injection payload quads in the FIFO, bits 0-7: shift.
    ST_INJ_QUADS_SHIFT: u32 = 24;
    /// Status: injection headers in the FIFO, bits 12-15: shift.
    ST_INJ_HDRS_SHIFT: u32 = 16;
    /// Status: reception payload quads, bits 16-23: shift.
    ST_RCV_QUADS_SHIFT: u32 = 8;
    /// Status: bit 27, a received header has the IRQ bit set.
    ST_RCV_IRQ: u32 = 1 << 4;
    /// Status: reception headers, bits 28-31: shift.
    ST_RCV_HDRS_SHIFT: u32 = 0;
    /// Status: mask of a quad-count field (after its shift).
    ST_QUADS_MASK: u32 = 0xFF;
    /// Status: mask of a header-count field (after its shift).
    ST_HDRS_MASK: u32 = 0xF;
    /// First DCR of the collective.
    DCR_BASE: u32 = 0xC00;
    /// Number of collective DCRs.
    DCR_COUNT: u32 = 0x80;
    /// DCR offset of RDR0 (route descriptors; two classes per register, RDR0..RDR7).
    DCR_RDR0: u32 = 0x00;
    /// Number of route descriptor registers.
    RDR_COUNT: u32 = 8;
    /// RDR bit of the lower-numbered (even) class: source link 2 (IBM bit 1).
    RDR_LO_SRC2: u32 = 1 << 30;
    /// RDR even class: source link 1 (bit 2).
    RDR_LO_SRC1: u32 = 1 << 29;
    /// RDR even class: source link 0 (bit 3).
    RDR_LO_SRC0: u32 = 1 << 28;
    /// RDR even class: target link 2 (bit 5).
    RDR_LO_TGT2: u32 = 1 << 26;
    /// RDR even class: target link 1 (bit 6).
    RDR_LO_TGT1: u32 = 1 << 25;
    /// RDR even class: target link 0 (bit 7).
    RDR_LO_TGT0: u32 = 1 << 24;
    /// RDR even class: source local client, i.e. this node injects into the class (bit 14).
    RDR_LO_SRCL: u32 = 1 << 17;
    /// RDR even class: target local client, i.e. this node receives the class (bit 15).
    RDR_LO_TGTL: u32 = 1 << 16;
    /// The odd class's bits are the even class's shifted right by this (IBM bits 16-31).
    RDR_HI_SHIFT: u32 = 16;
    /// DCR offset of RCFG (router configuration).
    DCR_RCFG: u32 = 0x10;
    /// DCR offset of FPTR (FIFO pointers).
    DCR_FPTR: u32 = 0x40;
    /// DCR offset of NADDR (24-bit node address for P2P).
    DCR_NADDR: u32 = 0x41;
    /// DCR offset of VCFG0 (VC0 configuration).
    DCR_VCFG0: u32 = 0x42;
    /// DCR offset of VCFG1.
    DCR_VCFG1: u32 = 0x43;
    /// VCFG bit 0: receive all (turn off P2P address filtering).
    VCFG_RCVALL: u32 = 1 << 31;
    /// VCFG bits 21-23: reception watermark: shift.
    VCFG_RWM_SHIFT: u32 = 8;
    /// VCFG bits 29-31: injection watermark: shift.
    VCFG_IWM_SHIFT: u32 = 0;
    /// VCFG watermark field mask (after its shift).
    VCFG_WM_MASK: u32 = 0x7;
    /// DCR offset of PRXF (reception exception flags; a read clears).
    DCR_PRXF: u32 = 0x44;
    /// DCR offset of PRXEN (reception exception enables).
    DCR_PRXEN: u32 = 0x45;
    /// DCR offset of PIXF (injection exception flags; a read clears).
    DCR_PIXF: u32 = 0x48;
    /// DCR offset of PIXEN (injection exception enables).
    DCR_PIXEN: u32 = 0x49;
    /// PRXF/PRXEN bit 12: bad address, VC0 (Kestrel: an access outside the VC's registers).
    PRX_BADADDR0: u32 = 1 << 19;
    /// PRXF/PRXEN bit 13: bad address, VC1.
    PRX_BADADDR1: u32 = 1 << 18;
    /// PRXF/PRXEN bit 26: payload underrun VC0 (DR read with nothing received).
    PRX_PUR0: u32 = 1 << 5;
    /// PRXF/PRXEN bit 27: payload underrun VC1.
    PRX_PUR1: u32 = 1 << 4;
    /// PRXF/PRXEN bit 28: header underrun VC0 (HR read with nothing received).
    PRX_HUR0: u32 = 1 << 3;
    /// PRXF/PRXEN bit 29: header underrun VC1.
    PRX_HUR1: u32 = 1 << 2;
    /// PRXF/PRXEN bit 30: VC0 reception above its watermark.
    PRX_WM0: u32 = 1 << 1;
    /// PRXF/PRXEN bit 31: VC1 reception above its watermark.
    PRX_WM1: u32 = 1 << 0;
    /// PIXF/PIXEN bit 14: collision (Kestrel: a payload write without a header, or a
    /// partial quad followed by a header).
    PIX_COLLISION: u32 = 1 << 17;
    /// PIXF/PIXEN bit 12 (in 6-13, parity/alignment/address errors): Kestrel: VC0 injected a
    /// header the fabric cannot deliver (reserved ALU opcode, a class this node does not
    /// source, a reduction whose contributors disagree on opcode or operand size).
    PIX_BADHDR0: u32 = 1 << 19;
    /// PIXF/PIXEN bit 13: the same for VC1.
    PIX_BADHDR1: u32 = 1 << 18;
    /// PIXF/PIXEN bit 25: payload overflow VC0.
    PIX_POF0: u32 = 1 << 6;
    /// PIXF/PIXEN bit 26: payload overflow VC1.
    PIX_POF1: u32 = 1 << 5;
    /// PIXF/PIXEN bit 27: header overflow VC0.
    PIX_HOF0: u32 = 1 << 4;
    /// PIXF/PIXEN bit 28: header overflow VC1.
    PIX_HOF1: u32 = 1 << 3;
    /// PIXF/PIXEN bit 29: VC0 injection at or below its watermark.
    PIX_WM0: u32 = 1 << 2;
    /// PIXF/PIXEN bit 30: VC1 injection at or below its watermark.
    PIX_WM1: u32 = 1 << 1;
    /// PIXF/PIXEN bit 31: enable.
    PIX_ENABLE: u32 = 1 << 0;
    /// BIC line: injection exception.
    IRQ_INJ_EXC: u32 = 0xB4;
    /// BIC line: reception exception.
    IRQ_RCV_EXC: u32 = 0xB5;
    /// BIC line: a packet with the header IRQ bit arrived on VC0.
    IRQ_RCV_VC0: u32 = 0xB6;
    /// BIC line: the same on VC1.
    IRQ_RCV_VC1: u32 = 0xB7;
    /// BIC line: no-target trap (a packet no node receives; Kestrel counts the drop too).
    IRQ_NO_TARGET: u32 = 0xA1;
    /// BIC line: ALU overflow.
    IRQ_ALU_OVERFLOW: u32 = 0xA2;
    /// Kestrel's class for bgnet (the device tree's `tree-route`; the default fabric
    /// policy's partition `node`, `kestrel_abi::grants`).
    BGNET_CLASS: u32 = 0;
    /// Kestrel's class for the native MPI layer's reductions (the default fabric policy's
    /// partition `native`).
    MPI_CLASS: u32 = 14;
    /// Link-layer header bytes in front of every collective packet's frame data (bgnet).
    LINK_HDR_BYTES: u32 = 16;
}

/// A collective header field: the class.
pub const fn hdr_class(h: u32) -> u32 {
    (h >> HDR_CLASS_SHIFT) & HDR_CLASS_MASK
}

/// The DCR (absolute number) of the route descriptor holding `class`, and the class's bits
/// within it: `(dcr, shift)`, where a bit of the even class's layout (`RDR_LO_*`) moves
/// right by `shift`.
pub const fn rdr_of_class(class: u32) -> (u32, u32) {
    (
        DCR_BASE + DCR_RDR0 + (class & 0xF) / 2,
        if class.is_multiple_of(2) {
            0
        } else {
            RDR_HI_SHIFT
        },
    )
}

/// The local source and target bits (SRCL, TGTL) of route descriptor register `dcr` that
/// belong to the classes in `classes` (bit c = class c): the bits an endpoint granted those
/// classes may set.
pub fn local_route_bits(dcr: u32, classes: u16) -> u32 {
    route_word(dcr, 0, classes, classes)
}

/// Route descriptor register `dcr` (an RDR) with value `v`, its two classes' local source and
/// target bits set from `sources` / `targets` (bit c = class c) and its link bits kept: what
/// the engine's `set_routes` does to that register.
pub fn route_word(dcr: u32, v: u32, sources: u16, targets: u16) -> u32 {
    let mut v = v;
    for class in 0..2 * RDR_COUNT {
        let (d, shift) = rdr_of_class(class);
        if d != dcr {
            continue;
        }
        v &= !((RDR_LO_SRCL | RDR_LO_TGTL) >> shift);
        if sources & (1 << class) != 0 {
            v |= RDR_LO_SRCL >> shift;
        }
        if targets & (1 << class) != 0 {
            v |= RDR_LO_TGTL >> shift;
        }
    }
    v
}
