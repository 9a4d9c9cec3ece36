//! The error cases: every error ends the job (MPI_ERRORS_ARE_FATAL) with one line naming
//! the rank, the call and the error class, from the rank that made it; every other rank
//! ends at its next wait ("ended: ..."), long before its deadlock timeout.

use mpi::collective::SystemOperation;
use mpi::platform::host::{self, Options};
use mpi::traits::*;
use std::time::{Duration, Instant};

/// Runs an `n`-rank job whose rank `bad` fails: its line must be `want` (the start of it
/// when `want` ends with '…'), every other rank must have been ended by it, and the job
/// must end well before the 60 s deadlock timeout.
fn fails(n: u32, bad: usize, want: &str, body: impl Fn() + Send + Sync + 'static) {
    let t = Instant::now();
    let out = host::run(
        n,
        Options {
            deadlock_ms: 60_000,
            ..Options::default()
        },
        body,
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "the job took {:?}",
        t.elapsed()
    );
    for (r, res) in out.iter().enumerate() {
        let e = res.as_ref().expect_err("every rank ends");
        if r == bad {
            match want.strip_suffix('…') {
                Some(prefix) => assert!(e.starts_with(prefix), "rank {r}: {e}"),
                None => assert_eq!(e, want, "rank {r}"),
            }
        } else {
            assert_eq!(e, &format!("ended: rank {bad} ended the job"), "rank {r}");
        }
    }
}

/// The others wait for a message from `bad` that never comes.
fn others_wait(world: &impl Communicator, bad: i32) {
    world.process_at_rank(bad).receive_with_tag::<u8>(12345);
    unreachable!("nobody sends that");
}

#[test]
fn send_to_a_rank_that_does_not_exist() {
    fails(
        3,
        1,
        "rank 1: MPI_Send: MPI_ERR_RANK: no such rank in the communicator",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 1 {
                w.process_at_rank(3).send(&1u32);
            }
            others_wait(&w, 1);
        },
    );
    fails(
        2,
        0,
        "rank 0: MPI_Send: MPI_ERR_RANK: no such rank in the communicator",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 0 {
                w.process_at_rank(-1).send(&1u32);
            }
            others_wait(&w, 0);
        },
    );
}

#[test]
fn receive_from_a_rank_of_no_split() {
    fails(
        4,
        2,
        "rank 2: MPI_Recv: MPI_ERR_RANK: no such rank in the communicator",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let half = w
                .split_by_color(mpi::topology::Color::with_value(w.rank() / 2))
                .unwrap();
            if w.rank() == 2 {
                half.process_at_rank(2).receive::<u8>();
            }
            others_wait(&w, 2);
        },
    );
}

#[test]
fn bad_tags() {
    fails(
        2,
        1,
        "rank 1: MPI_Send: MPI_ERR_TAG: tags are 0..=1073741823",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 1 {
                w.process_at_rank(0).send_with_tag(&1u8, -3);
            }
            others_wait(&w, 1);
        },
    );
    fails(
        2,
        0,
        "rank 0: MPI_Isend: MPI_ERR_TAG: tags are 0..=1073741823",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 0 {
                let x = 1u8;
                mpi::request::scope(|s| {
                    w.process_at_rank(1)
                        .immediate_send_with_tag(s, &x, mpi::TAG_UB + 1)
                        .wait();
                });
            }
            others_wait(&w, 0);
        },
    );
}

#[test]
fn receive_buffer_too_small() {
    // Eager.
    fails(
        2,
        1,
        "rank 1: MPI_Recv: MPI_ERR_TRUNCATE: message longer than the receive buffer",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 0 {
                w.process_at_rank(1).send(&[7u8; 10]);
                others_wait(&w, 1);
            }
            let mut small = [0u8; 4];
            w.process_at_rank(0).receive_into(&mut small);
        },
    );
    // Rendezvous, and a value smaller than the message.
    fails(
        2,
        1,
        "rank 1: MPI_Recv: MPI_ERR_TRUNCATE: message longer than the receive buffer",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 0 {
                w.process_at_rank(1).send(&vec![1u64; 50_000][..]);
                others_wait(&w, 1);
            }
            w.process_at_rank(0).receive::<u64>();
        },
    );
    // A nonblocking receive reports it when it completes.
    fails(
        2,
        0,
        "rank 0: MPI_Wait: MPI_ERR_TRUNCATE: message longer than the receive buffer",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 1 {
                w.process_at_rank(0).send(&[1.0f64, 2.0]);
                others_wait(&w, 0);
            }
            let mut one = 0.0f64;
            mpi::request::scope(|s| {
                w.process_at_rank(1)
                    .immediate_receive_into(s, &mut one)
                    .wait();
            });
        },
    );
}

#[test]
fn an_empty_message_into_a_value() {
    fails(2, 1, "rank 1: MPI_Recv: MPI_ERR_COUNT: received an empty message from rank 0 (tag 0) into a value", || {
        let u = mpi::initialize().unwrap();
        let w = u.world();
        if w.rank() == 0 {
            w.process_at_rank(1).send(&[0i32; 0][..]);
            others_wait(&w, 1);
        }
        w.process_at_rank(0).receive::<i32>();
    });
}

#[test]
fn an_operation_not_defined_on_the_datatype() {
    fails(
        4,
        2,
        "rank 2: MPI_Allreduce: MPI_ERR_OP: unknown operation or not defined on the datatype",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let mut out = 0.0f32;
            let op = if w.rank() == 2 {
                SystemOperation::bitwise_and()
            } else {
                SystemOperation::sum()
            };
            w.all_reduce_into(&1.0f32, &mut out, op);
        },
    );
    fails(
        3,
        0,
        "rank 0: MPI_Reduce: MPI_ERR_OP: unknown operation or not defined on the datatype",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let root = w.process_at_rank(0);
            if w.rank() == 0 {
                let mut out = 0.0f64;
                root.reduce_into_root(&1.0f64, &mut out, SystemOperation::logical_xor());
            } else {
                // The others' sum is fine: they wait (at the latest in MPI_Finalize) and
                // are ended.
                root.reduce_into(&1.0f64, SystemOperation::sum());
            }
        },
    );
}

#[test]
fn buffers_of_the_wrong_type_or_size() {
    fails(
        2,
        1,
        "rank 1: MPI_Allreduce: MPI_ERR_TYPE: send buffer of I32 but receive buffer of U32",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            if w.rank() == 1 {
                let mut out = 0u32;
                w.all_reduce_into(&1i32, &mut out, SystemOperation::sum());
            }
            others_wait(&w, 1);
        },
    );
    fails(
        3,
        1,
        "rank 1: MPI_Allgather: MPI_ERR_COUNT: negative count or buffer sizes that do not match",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let mut all = vec![0u16; if w.rank() == 1 { 2 } else { 3 }];
            w.all_gather_into(&7u16, &mut all[..]);
        },
    );
}

#[test]
fn roots() {
    fails(
        3,
        2,
        "rank 2: MPI_Bcast: MPI_ERR_ROOT: root is no rank of the communicator",
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let mut x = 0u8;
            let root = if w.rank() == 2 { 3 } else { 0 };
            w.process_at_rank(root).broadcast_into(&mut x);
        },
    );
    fails(3, 0, "rank 0: MPI_Gather: MPI_ERR_ROOT: called by the root (rank 0), which must use gather_into_root", || {
        let u = mpi::initialize().unwrap();
        let w = u.world();
        w.process_at_rank(0).gather_into(&1u8);
    });
    fails(3, 1, "rank 1: MPI_Reduce: MPI_ERR_ROOT: called by rank 1, not the root (rank 0), which must use reduce_into", || {
        let u = mpi::initialize().unwrap();
        let w = u.world();
        let root = w.process_at_rank(0);
        if w.rank() == 1 {
            let mut out = 0;
            root.reduce_into_root(&1i32, &mut out, SystemOperation::sum());
        }
        others_wait(&w, 1);
    });
}

#[test]
fn abort_ends_the_job() {
    fails(4, 2, "rank 2: MPI_Abort: called with error code 7", || {
        let u = mpi::initialize().unwrap();
        let w = u.world();
        if w.rank() == 2 {
            w.abort(7);
        }
        // The others are in a collective when it happens.
        w.barrier();
        unreachable!("rank 2 never enters the barrier");
    });
}

#[test]
fn a_call_after_finalize() {
    fails(1, 0, "rank 0: MPI_Comm_rank: MPI_ERR_OTHER: called after MPI_Finalize (the Universe was dropped)", || {
        let u = mpi::initialize().unwrap();
        let w = u.world();
        drop(u);
        w.rank();
    });
}

/// Ranks that all wait on each other: the first to reach the deadlock timeout ends the job
/// with the core's line saying where it waits (both may reach it at the same moment, so
/// either line may be the one).
#[test]
fn a_deadlock_names_the_rank_and_the_call() {
    let t = Instant::now();
    let out = host::run(
        2,
        Options {
            deadlock_ms: 2_000,
            ..Options::default()
        },
        || {
            let u = mpi::initialize().unwrap();
            let w = u.world();
            let other = 1 - w.rank();
            w.process_at_rank(other).receive_with_tag::<u8>(42);
        },
    );
    assert!(t.elapsed() < Duration::from_secs(15));
    let lines: Vec<String> = out.into_iter().map(|r| r.unwrap_err()).collect();
    let fatal: Vec<_> = lines.iter().filter(|l| !l.starts_with("ended:")).collect();
    assert!(!fatal.is_empty(), "{lines:?}");
    for l in fatal {
        let r: i32 = l[5..6].parse().unwrap();
        assert_eq!(
            l,
            &format!(
                "rank {r}: MPI_Recv: MPI_ERR_OTHER: deadlock: rank {r} waits in MPI_Recv (receive from source {}, tag 42, context 0) with no progress for 2000 ms: deadlock",
                1 - r
            )
        );
    }
}

#[test]
fn a_second_initialize_is_none() {
    let out = host::run(2, Options::default(), || {
        let u = mpi::initialize().unwrap();
        let again = mpi::initialize().is_none();
        let threaded = mpi::initialize_with_threading(mpi::Threading::Multiple);
        (again, threaded.is_none(), u.size())
    });
    for r in out {
        assert_eq!(r.unwrap(), (true, true, Some(2)));
    }
}
