//! Two problems the MPI core (`kestrel-mpi`) had, as tests of the core alone
//! (`mpi::platform::host::run_core`): both failed on the core before it kept messages on a
//! communicator it had not made yet (`Mpi::made`) and turned eager sends stuck on credits
//! into rendezvous (`eager_to_rts`, ADR 0035).

use kestrel_mpi::{wire, Datatype, Mpi, Op, WORLD};
use mpi::platform::host::{run_core, Fabric, Options};

/// Every rank's result; a rank that panicked fails the test.
fn job<T: Send + 'static>(
    n: u32,
    window: u64,
    deadlock_ms: u64,
    body: impl Fn(&mut Mpi<Fabric>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let opts = Options {
        window,
        deadlock_ms,
    };
    run_core(n, opts, body)
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// A rank that finished making a communicator sends on it at once; a rank still inside the
/// making (its MPI_Comm_dup's allreduce) drops the message (`Stats::bad`): the receive
/// for it never completes. Fails at the first or second round on a 2-core host.
#[test]
fn a_message_on_a_communicator_not_made_yet_is_kept() {
    let out = job(8, 4 << 20, 5_000, |m: &mut Mpi<Fabric>| {
        let me = m.rank(WORLD).unwrap();
        for round in 0..50 {
            let c = m.comm_dup(WORLD).unwrap();
            let mut sum = [0u8; 8];
            let r = m
                .allreduce(c, &1u64.to_ne_bytes(), &mut sum, Datatype::U64, Op::Sum)
                .and_then(|_| m.bcast(c, &mut vec![me as u8; 4096], 1));
            if let Err(e) = r {
                return format!(
                    "rank {me}, round {round}: {e}: {:?}; messages dropped: {}",
                    m.deadlock_report(),
                    m.stats().bad
                );
            }
            m.comm_free(c).unwrap();
        }
        String::new()
    });
    let failed: Vec<_> = out.into_iter().filter(|l| !l.is_empty()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Rank 1 leaves rank 0 owing it just under half a pool of credits (messages rank 0 took),
/// then sends an empty, a 1-byte and a largest eager message; rank 0 receives the largest
/// first. Rank 1's pool is full with the two small unmatched ones plus what is owed, rank 0
/// owes less than the half that makes it send a CREDIT, and it waits for the large message:
/// a deadlock, though MPI requires the send to complete once its receive is posted.
#[test]
fn eager_sends_complete_when_the_receiver_takes_a_later_message_first() {
    let out = job(2, 1 << 20, 3_000, |m: &mut Mpi<Fabric>| {
        let l = m.limits_now();
        let one = wire::ring_cost(kestrel_spi::LINK_HDR + wire::HDR + 1);
        let owed = ((l.q_data / 2 - 1) / one) as usize;
        let mut buf = vec![0u8; l.eager_max];
        let r = if m.rank(WORLD).unwrap() == 1 {
            (0..owed)
                .try_for_each(|_| m.send(WORLD, 0, 9, &[1]))
                .and_then(|_| m.barrier(WORLD))
                .and_then(|_| {
                    let a = m.isend(WORLD, 0, 0, &[], false)?;
                    let b = m.isend(WORLD, 0, 1, &[1], false)?;
                    let c = m.isend(WORLD, 0, 2, &buf, false)?;
                    m.waitall(&[a, b, c]).map(drop)
                })
        } else {
            (0..owed)
                .try_for_each(|_| m.recv(WORLD, 1, 9, &mut buf).map(drop))
                .and_then(|_| m.barrier(WORLD))
                .and_then(|_| m.recv(WORLD, 1, 2, &mut buf))
                .and_then(|_| m.recv(WORLD, 1, 1, &mut buf))
                .and_then(|_| m.recv(WORLD, 1, 0, &mut buf))
                .map(drop)
        };
        r.map_err(|e| format!("{e}: {:?}", m.deadlock_report()))
    });
    for r in out {
        r.unwrap();
    }
}
