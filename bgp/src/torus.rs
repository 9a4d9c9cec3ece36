//! The torus DCRs at 0xC80 (bgp-interconnect.md 2.3) and the geometry of Kestrel's fabric.
//!
//! Inside one QEMU node the fabric gives every endpoint (a VM or a native program) its own
//! torus coordinates: endpoint k is (k, 0, 0) in a machine of (N, 1, 1).

regs! { "TORUS_";
    /// First torus DCR.
    DCR_BASE: u32 = 0xC80;
    /// Number of torus DCRs.
    DCR_COUNT: u32 = 0x80;
    /// DCR offset: reset.
    DCR_RESET: u32 = 0x00;
    /// DCR offset: machine size, nodes - 1 per dimension (X bits 0-7, Y 8-15, Z 16-23).
    DCR_SIZE: u32 = 0x01;
    /// DCR offset: this node's coordinates (X bits 0-7, Y 8-15, Z 16-23).
    DCR_COORDS: u32 = 0x02;
    /// DCR offset: plus neighbours.
    DCR_NEIGHBOUR_PLUS: u32 = 0x03;
    /// DCR offset: minus neighbours.
    DCR_NEIGHBOUR_MINUS: u32 = 0x04;
    /// Coordinate word: X shift.
    COORD_X_SHIFT: u32 = 24;
    /// Coordinate word: Y shift.
    COORD_Y_SHIFT: u32 = 16;
    /// Coordinate word: Z shift.
    COORD_Z_SHIFT: u32 = 8;
    /// Most endpoints (VMs plus native programs) one fabric serves.
    MAX_ENDPOINTS: u32 = 16;
    /// Fabric bus: endpoint k's memory window starts at bus address `(k + 1) * BUS_SLOT`
    /// (so bus 0 is never valid, and every bus address >> 4 fits in 32 bits).
    BUS_SLOT: u64 = 0x8000_0000;
    /// Largest memory window of one endpoint (one bus slot).
    MAX_WINDOW: u64 = 0x8000_0000;
    /// Payload bytes the fabric's DMA moves within one engine call; the rest continues in
    /// its owner's next call or at the host's timer (`Fabric::poll`), so one endpoint's
    /// huge messages stall nobody, and no endpoint's work runs in another's call.
    INJECT_BUDGET_BYTES: u64 = 1 << 20;
    /// Descriptors the fabric's DMA starts within one engine call.
    INJECT_BUDGET_DESCRIPTORS: u32 = 4096;
    /// Frames (pv NIC) queued per endpoint before the fabric drops (and counts) more.
    FRAME_QUEUE_FRAMES: u32 = 128;
    /// Largest Ethernet frame the fabric carries (1514 + 4-byte VLAN tag).
    FRAME_MAX_BYTES: u32 = 1518;
    /// Smallest frame: an Ethernet header.
    FRAME_MIN_BYTES: u32 = 14;
    /// bgnet: the first MAC byte of a torus-routed address has `(b & 7) == 6`.
    MAC_TORUS_KIND: u32 = 6;
    /// bgnet: the link protocol of Ethernet frames.
    LINK_PROTO_NET: u32 = 1;
}

/// The coordinate word of (x, y, z).
pub const fn coord_word(x: u8, y: u8, z: u8) -> u32 {
    (x as u32) << COORD_X_SHIFT | (y as u32) << COORD_Y_SHIFT | (z as u32) << COORD_Z_SHIFT
}
