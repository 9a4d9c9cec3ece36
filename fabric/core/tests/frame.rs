//! Frames for the pv NIC: bgnet's MAC rule, broadcast, drops, queue bound.

mod common;
use common::*;
use kestrel_bgp::torus::FRAME_QUEUE_FRAMES;
use kestrel_fabric::FabricApi;
use kestrel_fabric::{DiagKind, EpId, FabricError};

fn frame(dst: [u8; 6], src: [u8; 6], n: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend(pattern(n, 3));
    f
}

#[test]
fn torus_mac_routes_to_its_endpoint() {
    let mut r = Rig::new(3);
    let (a, c) = (r.f.frame_mac(EpId(0)), r.f.frame_mac(EpId(2)));
    assert_eq!(c, [6, 0, 0, 2, 0, 0]);
    let f = frame(c, a, 100);
    r.f.frame_send(EpId(0), &f).unwrap();
    assert_eq!(r.f.take_changed(), Ok(0b100));
    let mut buf = [0u8; 1518];
    assert_eq!(r.f.frame_receive(EpId(2), &mut buf), Ok(Some(f.len())));
    assert_eq!(&buf[..f.len()], &f[..]);
    assert_eq!(r.f.frame_receive(EpId(2), &mut buf), Ok(None));
    assert_eq!(r.f.frame_receive(EpId(1), &mut buf), Ok(None));
}

#[test]
fn broadcast_goes_to_every_other_endpoint() {
    let mut r = Rig::new(3);
    let f = frame([0xFF; 6], r.f.frame_mac(EpId(1)), 28);
    r.f.frame_send(EpId(1), &f).unwrap();
    assert_eq!(r.f.frames_queued(EpId(0)), 1);
    assert_eq!(r.f.frames_queued(EpId(1)), 0);
    assert_eq!(r.f.frames_queued(EpId(2)), 1);
    // A short buffer gets the start; the length says how long the frame was.
    let mut buf = [0u8; 10];
    assert_eq!(r.f.frame_receive(EpId(0), &mut buf), Ok(Some(f.len())));
    assert_eq!(&buf, &f[..10]);
}

#[test]
fn other_macs_and_missing_endpoints_drop() {
    let mut r = Rig::new(2);
    let src = r.f.frame_mac(EpId(0));
    r.f.frame_send(EpId(0), &frame([2, 0, 0, 0, 0, 1], src, 10))
        .unwrap();
    r.f.frame_send(EpId(0), &frame([6, 0, 0, 9, 0, 0], src, 10))
        .unwrap();
    r.f.frame_send(EpId(0), &frame([6, 0, 0, 1, 1, 0], src, 10))
        .unwrap();
    assert_eq!(r.f.stats(EpId(0)).drops, 3);
    assert_eq!(
        r.f.take_diagnostic(EpId(0)).unwrap().kind,
        DiagKind::FrameDropped
    );
    assert_eq!(
        r.f.frame_send(EpId(0), &[0; 13]),
        Err(FabricError::BadFrame)
    );
    assert_eq!(
        r.f.frame_send(EpId(0), &[0; 1519]),
        Err(FabricError::BadFrame)
    );
    assert_eq!(r.f.frames_queued(EpId(1)), 0);
}

#[test]
fn the_queue_is_bounded() {
    let mut r = Rig::new(2);
    let f = frame(r.f.frame_mac(EpId(1)), r.f.frame_mac(EpId(0)), 1500);
    for _ in 0..FRAME_QUEUE_FRAMES + 3 {
        r.f.frame_send(EpId(0), &f).unwrap();
    }
    assert_eq!(r.f.frames_queued(EpId(1)), FRAME_QUEUE_FRAMES as usize);
    assert_eq!(r.f.stats(EpId(1)).drops, 3);
    assert_eq!(
        r.f.stats(EpId(1)).frames_received,
        u64::from(FRAME_QUEUE_FRAMES)
    );
}
