//! The suite the target program runs (`mpi::selftest`), here as 8 threads over the engine.

mod common;
use common::{job_with, N};
use mpi::platform::host::Options;
use mpi::selftest::{run, Sizes};
use mpi::traits::*;

#[test]
fn the_target_suite_passes_on_the_host() {
    let opts = Options {
        window: 4 << 20,
        ..Options::default()
    };
    let out = job_with(N, opts, || {
        let universe = mpi::initialize().unwrap();
        let mut lines = Vec::new();
        let me = universe.world().rank();
        let (passed, failed) = run(&universe, Sizes { big: 3 << 20 }, &mut |l| {
            // As it happens (cargo shows it for a failed test).
            println!("rank {me}: {l}");
            lines.push(l.to_string())
        });
        (passed, failed, lines)
    });
    for (r, (passed, failed, lines)) in out.iter().enumerate() {
        assert_eq!((*passed, *failed), (11, 0), "rank {r}: {lines:#?}");
    }
}
