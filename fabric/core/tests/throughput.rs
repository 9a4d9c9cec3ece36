//! Host throughput of the engine (not a test of speed: it asserts only that the data
//! arrived). Run on purpose:
//! `cargo test --release -p kestrel-fabric --test throughput -- --ignored --nocapture`.

mod common;
use common::*;
use kestrel_bgp::dma::{self as d, *};
use kestrel_fabric::EpId;
use kestrel_fabric::FabricApi;
use std::time::Instant;

const A: EpId = EpId(0);
const B: EpId = EpId(1);

#[test]
#[ignore = "measurement; run on purpose with --release"]
fn memory_fifo_and_direct_put_throughput() {
    let mut r = Rig::new(2);
    r.setup_inj(A, 0);
    r.setup_rcv(B, 0);
    r.fill(A, DATA_AT, &pattern(0x2000, 1));
    // Memory FIFO: 3360-byte messages (14 full packets), the receiver drains after each.
    let rounds = 20_000u32;
    let t = Instant::now();
    for _ in 0..rounds {
        r.post(A, 0, fifo_desc(1, DATA_AT as u32, 3360, 0));
        let tail = r.r(B, d::rcv_fifo(0, FIFO_TAIL));
        r.w(B, d::rcv_fifo(0, FIFO_HEAD), tail);
    }
    let s = t.elapsed().as_secs_f64();
    let bytes = f64::from(rounds) * 3360.0;
    assert_eq!(r.f.stats(B).drops, 0);
    eprintln!(
        "memory FIFO: {:.0} MB/s ({:.2} us per 3360-byte message)",
        bytes / s / 1e6,
        s * 1e6 / f64::from(rounds)
    );
    // Direct put: 8 KiB into a counter, re-armed each round.
    r.setup_rcv_ctr(B, 0, 0x4000, 0x2000);
    let t = Instant::now();
    for _ in 0..rounds {
        r.w(B, d::rcv_ctr(0, CTR_COUNT), 0x2000);
        r.post(A, 0, put_desc(1, DATA_AT as u32, 0x2000, 0, 0));
    }
    let s = t.elapsed().as_secs_f64();
    assert_eq!(r.r(B, d::rcv_ctr(0, CTR_COUNT)), 0);
    eprintln!(
        "direct put: {:.0} MB/s",
        f64::from(rounds) * 8192.0 / s / 1e6
    );
}
