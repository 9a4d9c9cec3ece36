//! `kestrel-mpi-rs-test`: the Rust MPI face's checks on the target
//! (`tests/functional/test_mpi_rs.py`). Start it under N module names ending in the rank
//! (`kestrel-mpirs0` .. `kestrel-mpirs7`) beside `kestrel-fabric`, with `mpi.ranks=N` on the
//! kernel command line (and the face's other `mpi.` arguments, `mpi::platform::kestrel`).
//! Each rank
//!
//! - runs `mpi::selftest` (point to point of every datatype, pair order, wildcards,
//!   zero-length and multi-megabyte messages of `mpirs.big_kib=` KiB (default 2048),
//!   nonblocking completion in any order, synchronous sends, probes, every reduction on
//!   every datatype against a serial result, barrier separation, the data-moving
//!   collectives), printing `mpirs R/N: CHECK: ok (...)` or `... FAILED: ...` per check and
//!   `mpirs R/N: P checks passed, F failed` at the end; then MPI_Finalize;
//! - or, with `mpirs.fail=KIND`, plays one error case in which rank `mpirs.fail_rank=`
//!   (default 3) errs and the others wait for it: `rank` (a send to rank N: MPI_ERR_RANK),
//!   `truncate` (a receive buffer too small: MPI_ERR_TRUNCATE), `op` (a bitwise AND of
//!   floats: MPI_ERR_OP), `abort` (MPI_Abort with code 7), `deadlock` (every rank receives
//!   from the next, nobody sends). The erring rank prints the face's one line and the job
//!   ends: every program exits with code 1, and no rank prints
//!   `mpirs R/N: error case KIND did not end the job`.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use kestrel_user::{println, sys};
use mpi::collective::SystemOperation;
use mpi::selftest::{run, Sizes};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

fn arg<'a>(args: &'a str, key: &str) -> Option<&'a str> {
    args.split_ascii_whitespace()
        .find_map(|a| a.strip_prefix(key))
}

/// Error case `kind`, rank `bad` erring: never returns on a rank the job's end reaches.
fn fail(world: &SimpleCommunicator, kind: &str, bad: i32) {
    let (me, n) = (world.rank(), world.size());
    let wait_for_bad = || {
        world.process_at_rank(bad).receive_with_tag::<u8>(1);
    };
    match kind {
        "rank" => {
            if me == bad {
                world.process_at_rank(n).send(&1u32);
            }
            wait_for_bad();
        }
        "truncate" => {
            let from = (bad + n - 1) % n;
            if me == from {
                world.process_at_rank(bad).send_with_tag(&[7u8; 100][..], 2);
            }
            if me == bad {
                let mut small = [0u8; 10];
                world
                    .process_at_rank(from)
                    .receive_into_with_tag(&mut small[..], 2);
            }
            wait_for_bad();
        }
        "op" => {
            let op = if me == bad {
                SystemOperation::bitwise_and()
            } else {
                SystemOperation::sum()
            };
            let mut out = 0.0f32;
            world.all_reduce_into(&1.0f32, &mut out, op);
        }
        "abort" => {
            if me == bad {
                world.abort(7);
            }
            world.barrier();
        }
        "deadlock" => {
            world
                .process_at_rank((me + 1) % n)
                .receive_with_tag::<u8>(42);
        }
        _ => {
            println!("mpirs {me}/{n}: no error case {kind:?} (rank, truncate, op, abort, deadlock)")
        }
    }
    println!("mpirs {me}/{n}: error case {kind} did not end the job");
}

#[no_mangle]
pub extern "C" fn task_main() {
    let _ = sys::set_name("mpirs");
    let mut buf = [0u8; kestrel_abi::BOOTARGS_LEN];
    let n = sys::bootargs(&mut buf);
    let args = core::str::from_utf8(&buf[..n]).unwrap_or("");
    let big = arg(args, "mpirs.big_kib=")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2048)
        << 10;
    let Some(universe) = mpi::initialize() else {
        println!("mpirs: MPI was initialized already");
        return;
    };
    let world = universe.world();
    let (me, size) = (world.rank(), world.size());
    if let Some(kind) = arg(args, "mpirs.fail=") {
        let bad = arg(args, "mpirs.fail_rank=")
            .and_then(|v| v.parse().ok())
            .unwrap_or(3)
            % size;
        println!("mpirs {me}/{size}: error case {kind}, rank {bad} errs");
        fail(&world, kind, bad);
        return;
    }
    let t0 = mpi::time();
    let (passed, failed) = run(&universe, Sizes { big }, &mut |line| {
        println!("mpirs {me}/{size}: {line}")
    });
    println!(
        "mpirs {me}/{size}: {passed} checks passed, {failed} failed in {:.1} s",
        mpi::time() - t0
    );
    drop(world);
    drop(universe);
}
