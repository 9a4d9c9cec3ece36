//! Point to point through the rsmpi-shaped face with 8 ranks on threads over the engine:
//! ordering between a pair, wildcards, zero-length and multi-megabyte messages, every
//! datatype, probes, synchronous sends, send-receive.

mod common;
use common::{job, pattern, N};
use mpi::point_to_point::{send_receive_into, send_receive_into_with_tags};
use mpi::request::WaitGuard;
use mpi::traits::*;

#[test]
fn readme_ring_and_broadcast() {
    // rsmpi's README example, unchanged but for the checks.
    job(N, || {
        let universe = mpi::initialize().unwrap();
        let world = universe.world();
        let size = world.size();
        let rank = world.rank();
        let next_rank = (rank + 1) % size;
        let previous_rank = (rank - 1 + size) % size;
        let msg = vec![rank, 2 * rank, 4 * rank];
        mpi::request::scope(|scope| {
            let _sreq = WaitGuard::from(
                world
                    .process_at_rank(next_rank)
                    .immediate_send(scope, &msg[..]),
            );
            let (msg, status) = world.any_process().receive_vec::<i32>();
            let x = status.source_rank();
            assert_eq!(x, previous_rank);
            assert_eq!(vec![x, 2 * x, 4 * x], msg);
            let root_process = world.process_at_rank(0);
            let mut a = if rank == 0 { vec![2, 4, 8, 16] } else { vec![0; 4] };
            root_process.broadcast_into(&mut a[..]);
            assert_eq!(&a[..], &[2, 4, 8, 16]);
        });
        assert!(mpi::initialize().is_none(), "a second MPI_Init");
    });
}
