//! Nonblocking operations through the face with 8 ranks: completion in any order (waits in
//! reverse, tests polled, wait_any), guards, futures, static scopes, and the scope rules.

mod common;
use common::{job, pattern, N};
use mpi::platform::host::{self, Options};
use mpi::request::{self, StaticScope, WaitGuard};
use mpi::traits::*;

/// Each rank posts a receive from every rank (itself included), sends to every rank in
/// reverse order (large ones by rendezvous, one synchronous), then completes the receives
/// in reverse order of posting and the sends with wait_any.
#[test]
fn completion_in_any_order() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let size_of = |r: i32| if r % 2 == 0 { 300_000 } else { 10 };
        let mut bufs: Vec<Vec<u8>> = (0..n).map(|k| vec![0u8; size_of(k)]).collect();
        let outgoing: Vec<Vec<u8>> = (0..n)
            .map(|k| pattern(size_of(me), (me * 8 + k) as u32))
            .collect();
        request::scope(|scope| {
            let recvs: Vec<_> = bufs
                .iter_mut()
                .enumerate()
                .map(|(k, b)| {
                    world
                        .process_at_rank(k as i32)
                        .immediate_receive_into_with_tag(scope, &mut b[..], 5)
                })
                .collect();
            let mut sends: Vec<_> = (0..n)
                .rev()
                .map(|k| {
                    let p = world.process_at_rank(k);
                    let m = &outgoing[k as usize][..];
                    if k == 3 {
                        p.immediate_synchronous_send_with_tag(scope, m, 5)
                    } else {
                        p.immediate_send_with_tag(scope, m, 5)
                    }
                })
                .collect();
            for (k, r) in recvs.into_iter().enumerate().rev() {
                let st = r.wait();
                assert_eq!(
                    (st.source_rank(), st.tag(), st.bytes()),
                    (k as i32, 5, size_of(k as i32))
                );
            }
            let mut done = vec![false; n as usize];
            while let Some((i, _)) = request::wait_any(&mut sends) {
                // Indices shift as requests leave the vector: count, not place.
                let _ = i;
                let k = done.iter().position(|d| !d).unwrap();
                done[k] = true;
            }
            assert!(done.iter().all(|&d| d));
        });
        for (k, b) in bufs.iter().enumerate() {
            assert_eq!(
                b[..],
                pattern(size_of(k as i32), (k as i32 * 8 + me) as u32)[..],
                "from {k}"
            );
        }
    });
}

/// Receives completed by polling `test` in a round robin, out of posting order.
#[test]
fn test_polls_until_done() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let mut got = vec![[0u64; 4]; n as usize];
        request::scope(|scope| {
            let mut pending: Vec<_> = got
                .iter_mut()
                .enumerate()
                .map(|(k, g)| {
                    (
                        k,
                        world
                            .process_at_rank(k as i32)
                            .immediate_receive_into_with_tag(scope, g, 8),
                    )
                })
                .collect();
            // Send to the ranks in a rotated order, then poll.
            for j in 0..n {
                let k = (me + j) % n;
                world
                    .process_at_rank(k)
                    .send_with_tag(&[me as u64, k as u64, 7, 8], 8);
            }
            let mut order = Vec::new();
            while !pending.is_empty() {
                let (k, r) = pending.remove(0);
                match r.test() {
                    Ok(st) => {
                        assert_eq!(st.source_rank(), k as i32);
                        order.push(k);
                    }
                    Err(r) => pending.push((k, r)),
                }
            }
            assert_eq!(order.len(), n as usize);
        });
        for (k, g) in got.iter().enumerate() {
            assert_eq!(*g, [k as u64, me as u64, 7, 8]);
        }
        world.barrier();
    });
}

#[test]
fn futures_guards_and_static_scopes() {
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let me = world.rank();
        let n = world.size();
        let next = world.process_at_rank((me + 1) % n);
        let prev = (me + n - 1) % n;
        // A future, taken with get.
        let fut = world.any_process().immediate_receive_with_tag::<f64>(1);
        next.send_with_tag(&(me as f64 * 1.5), 1);
        let (x, st) = fut.get();
        assert_eq!((x, st.source_rank()), (prev as f64 * 1.5, prev));
        // A future polled with try until the value is there.
        let mut fut = world
            .process_at_rank(prev)
            .immediate_receive_with_tag::<[i16; 2]>(2);
        world.barrier();
        next.send_with_tag(&[me as i16, -(me as i16)], 2);
        let (v, _) = loop {
            match fut.r#try() {
                Ok(v) => break v,
                Err(f) => fut = f,
            }
        };
        assert_eq!(v, [prev as i16, -(prev as i16)]);
        // A static scope over leaked buffers.
        let out: &'static [u32] = Box::leak(vec![me as u32; 5].into_boxed_slice());
        let inb: &'static mut [u32] = Box::leak(vec![0u32; 5].into_boxed_slice());
        let r = world
            .process_at_rank(prev)
            .immediate_receive_into_with_tag(StaticScope, inb, 3);
        let s = next.immediate_send_with_tag(StaticScope, out, 3);
        s.wait_without_status();
        r.wait();
        // Guards wait when they go out of scope; a request moves into a shorter scope.
        let mut a = 0i32;
        let b = me;
        request::scope(|outer| {
            request::scope(|inner| {
                let g = WaitGuard::from(
                    world
                        .process_at_rank(prev)
                        .immediate_receive_into_with_tag(outer, &mut a, 4),
                );
                let r: mpi::request::Request<'_, i32, _> = g.into();
                let r = r.shrink_scope_to(inner);
                let _s = WaitGuard::from(next.immediate_send_with_tag(inner, &b, 4));
                r.wait();
            });
        });
        assert_eq!(a, prev);
    });
}

fn expect_panic(n: u32, body: impl Fn() + Send + Sync + 'static) -> Vec<String> {
    host::run(n, Options::default(), body)
        .into_iter()
        .map(|r| r.expect_err("the rank should have panicked"))
        .collect()
}

#[test]
fn a_request_dropped_unfinished_panics() {
    let e = expect_panic(1, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let mut x = 0u8;
        request::scope(|scope| {
            let _ = world.this_process().immediate_receive_into(scope, &mut x);
        });
    });
    assert_eq!(e, ["request was dropped without being completed"]);
}

#[test]
fn a_scope_left_with_a_request_panics() {
    let e = expect_panic(1, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let mut x = 0u8;
        request::scope(|scope| {
            std::mem::forget(world.this_process().immediate_receive_into(scope, &mut x));
        });
    });
    assert_eq!(
        e,
        ["at least one request was dropped without being completed"]
    );
}
