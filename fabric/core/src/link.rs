//! Links: where a packet for torus coordinates (X, Y, Z) goes from this node.
//!
//! Inside one node (one QEMU) every endpoint k sits at (k, 0, 0), so every destination is
//! local: [`LocalLink`]. A later issue adds links between QEMU nodes behind the same trait
//! (a [`Hop::Remote`] answer and [`Link::send`]); the engine routes in dimension order
//! (X, then Y, then Z), which for a local destination is the endpoint itself.

use crate::{Coords, EpId};
use kestrel_bgp::torus::MAX_ENDPOINTS;

/// Where a packet goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// An endpoint of this node.
    Local(EpId),
    /// Out of the node, towards `dir` (0 X+, 1 X-, 2 Y+, 3 Y-, 4 Z+, 5 Z-).
    Remote(u8),
    /// Outside the machine (coordinates beyond its size): a header error at the sender.
    Outside,
}

/// Why a link did not take a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// This fabric has no links out of the node.
    NoLink,
    /// The link is busy or down; the packet is dropped (and counted).
    Down,
}

/// The links of this node.
pub trait Link {
    /// The machine's size in nodes per dimension (X, Y, Z).
    fn machine(&self) -> Coords;
    /// Where a packet for `dest` goes.
    fn route(&self, dest: Coords) -> Hop;
    /// Sends one packet (16-byte header + payload) out towards `dir`.
    fn send(&mut self, dir: u8, packet: &[u8]) -> Result<(), LinkError>;
}

/// The node alone: endpoint k is (k, 0, 0) in a machine of (MAX_ENDPOINTS, 1, 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalLink;

impl Link for LocalLink {
    fn machine(&self) -> Coords {
        Coords {
            x: MAX_ENDPOINTS as u8,
            y: 1,
            z: 1,
        }
    }

    fn route(&self, dest: Coords) -> Hop {
        if u32::from(dest.x) < MAX_ENDPOINTS && dest.y == 0 && dest.z == 0 {
            Hop::Local(EpId(dest.x))
        } else {
            Hop::Outside
        }
    }

    fn send(&mut self, _dir: u8, _packet: &[u8]) -> Result<(), LinkError> {
        Err(LinkError::NoLink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_link_routes_x_only() {
        let l = LocalLink;
        assert_eq!(l.route(Coords { x: 3, y: 0, z: 0 }), Hop::Local(EpId(3)));
        assert_eq!(l.route(Coords { x: 16, y: 0, z: 0 }), Hop::Outside);
        assert_eq!(l.route(Coords { x: 1, y: 1, z: 0 }), Hop::Outside);
        assert_eq!(LocalLink.send(0, &[0; 16]), Err(LinkError::NoLink));
    }
}
