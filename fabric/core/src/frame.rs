//! Frames for the paravirtual NIC: Ethernet frames routed by destination MAC, bgnet's rule
//! (bgp-interconnect.md 2.4): `(mac[0] & 7) == 6` is a torus MAC, X, Y, Z = mac[3..5];
//! broadcast and multicast (`mac[0]` bit 0) go to every other endpoint the sender may reach; anything else is
//! dropped and counted. Each endpoint has a queue of at most FRAME_QUEUE_FRAMES frames;
//! a full queue drops (and counts) the frame. An endpoint's MAC is 06:00:00:X:Y:Z.
//!
//! A frame whose source MAC (bytes 6..12) is not the sender's own
//! ([`FabricApi::frame_mac`](crate::FabricApi::frame_mac)) is dropped before it goes
//! anywhere: counted as the sender's error, with a [`DiagKind::FrameSource`] diagnostic
//! (issue 18: a tenant cannot send as another). A frame reaches only endpoints the sender
//! may reach (a shared partition in their [`Grant`](crate::Grant)s): a unicast frame to
//! another is dropped and counted ([`DiagKind::Unreachable`]), a broadcast skips them.

use crate::{Coords, DiagKind, EpId, Fabric, FabricError, Hop, Link, Memory, MAX_ENDPOINTS};
use kestrel_bgp::torus::{FRAME_MAX_BYTES, FRAME_MIN_BYTES, FRAME_QUEUE_FRAMES, MAC_TORUS_KIND};

/// The low 24 bits of a MAC (for diagnostics).
fn mac_low(m: &[u8]) -> u64 {
    u64::from(m[3]) << 16 | u64::from(m[4]) << 8 | u64::from(m[5])
}

impl<M: Memory, L: Link> Fabric<M, L> {
    /// [`FabricApi::frame_send`](crate::FabricApi::frame_send).
    pub(crate) fn send_frame(&mut self, ep: EpId, frame: &[u8]) -> Result<(), FabricError> {
        let e = self.slot_mut(ep).ok_or(FabricError::NoSuchEndpoint)?;
        if !(FRAME_MIN_BYTES as usize..=FRAME_MAX_BYTES as usize).contains(&frame.len()) {
            e.stats.errors += 1;
            return Err(FabricError::BadFrame);
        }
        e.stats.frames_sent += 1;
        let mine = crate::FabricApi::frame_mac(self, ep);
        if frame[6..12] != mine {
            self.note_error(ep, DiagKind::FrameSource, mac_low(&frame[6..12]), 0);
            self.settle();
            return Ok(());
        }
        let dst = &frame[..6];
        if dst[0] & 1 != 0 {
            for k in 0..MAX_ENDPOINTS {
                let to = EpId(k as u8);
                if to != ep && self.slot(to).is_some() && self.may_reach(ep, to) {
                    self.frame_deliver(to, frame);
                }
            }
        } else if u32::from(dst[0] & 7) == MAC_TORUS_KIND {
            let c = Coords {
                x: dst[3],
                y: dst[4],
                z: dst[5],
            };
            match self.link.route(c) {
                Hop::Local(to) if self.slot(to).is_some() && !self.may_reach(ep, to) => {
                    self.note_drop(ep, DiagKind::Unreachable, mac_low(dst), u32::from(to.0))
                }
                Hop::Local(to) if self.slot(to).is_some() => self.frame_deliver(to, frame),
                _ => self.note_drop(ep, DiagKind::FrameDropped, mac_low(dst), 0),
            }
        } else {
            self.note_drop(ep, DiagKind::FrameDropped, mac_low(dst), 0);
        }
        self.settle();
        Ok(())
    }

    /// [`FabricApi::frame_receive`](crate::FabricApi::frame_receive).
    pub(crate) fn receive_frame(&mut self, ep: EpId, buf: &mut [u8]) -> Option<usize> {
        let e = self.slot_mut(ep)?;
        let f = e.frames.pop_front()?;
        let n = f.len().min(buf.len());
        buf[..n].copy_from_slice(&f[..n]);
        Some(f.len())
    }

    /// [`FabricApi::frames_queued`](crate::FabricApi::frames_queued).
    pub(crate) fn queued_frames(&self, ep: EpId) -> usize {
        self.slot(ep).map_or(0, |e| e.frames.len())
    }

    fn frame_deliver(&mut self, to: EpId, frame: &[u8]) {
        let Some(e) = self.slot_mut(to) else { return };
        if e.frames.len() >= FRAME_QUEUE_FRAMES as usize {
            self.note_drop(to, DiagKind::FrameDropped, mac_low(frame), 0);
            return;
        }
        e.frames.push_back(frame.to_vec());
        e.stats.frames_received += 1;
        self.changed |= 1 << to.0;
    }
}
