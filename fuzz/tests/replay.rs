//! Regression replay: every fuzz target over its committed seeds (`seeds/<target>/`) and
//! the inputs that once broke it (`regressions/<target>/`), as an ordinary test; and the
//! committed seeds are the ones `kestrel_fuzz::seeds` generates (so they stay in step
//! with the code they exercise).

use kestrel_fuzz::{seeds, TARGETS};
use std::fs;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_target_replays_its_seeds_and_regressions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for t in TARGETS {
        let seeds = files(&root.join("seeds").join(t.name));
        assert!(
            !seeds.is_empty(),
            "target {} has no seeds: run the seed generator",
            t.name
        );
        for f in seeds
            .iter()
            .chain(&files(&root.join("regressions").join(t.name)))
        {
            let data = fs::read(f).expect("readable seed");
            // A panic names the target through the file path in the backtrace's message.
            eprintln!("replay {}", f.display());
            (t.run)(&data);
        }
    }
}

#[test]
fn committed_seeds_are_the_generated_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for t in TARGETS {
        for (name, bytes) in seeds::seeds(t.name) {
            let path = root.join("seeds").join(t.name).join(&name);
            let committed = fs::read(&path).unwrap_or_default();
            assert!(
                committed == bytes,
                "{} differs from the generator: run `cargo test -p kestrel-fuzz --test seeds -- --ignored`",
                path.display()
            );
        }
    }
}

#[test]
fn short_random_inputs_never_break_a_target() {
    // A fixed pseudo-random stream: cheap smoke coverage without the fuzzer.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for t in TARGETS {
        for len in [0usize, 1, 7, 64, 512] {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            (t.run)(&data);
        }
    }
}

#[test]
fn seeds_reach_past_the_first_checks() {
    // Seeds that are refused at once would leave the fuzzer far from the interesting code.
    let seed = |t: &str, n: usize| seeds::seeds(t).swap_remove(n).1;
    for (n, physical, range) in [
        (0, false, (0x1000_0000, 0xF000_0000)),
        (2, true, (0, 64 << 20)),
    ] {
        let img = &seed("elf", n)[1..];
        let plan = if physical {
            kestrel_kcore::elf::load_plan_physical(img, range.0, range.1)
        } else {
            kestrel_kcore::elf::load_plan(img, range.0, range.1)
        };
        assert!(plan.is_ok(), "elf seed {n}: {plan:?}");
    }
    assert_eq!(kestrel_abi::bootmod::count(&seed("archive", 0)), Some(2));
    assert!(kestrel_kcore::bootinfo::BoardInfo::from_fdt(&seed("fdt", 0)).is_ok());
}
