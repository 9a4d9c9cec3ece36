//! The seed generator: `cargo test -p kestrel-fuzz --test seeds -- --ignored` (re)writes
//! `fuzz/seeds/<target>/seed-NNN` from `kestrel_fuzz::seeds` and checks that each seed
//! passes its target.

use kestrel_fuzz::{seeds, TARGETS};
use std::fs;
use std::path::Path;

#[test]
#[ignore = "writes fuzz/seeds/; run on purpose after changing a generator"]
fn write_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    for t in TARGETS {
        let dir = root.join(t.name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the seed directory");
        let all = seeds::seeds(t.name);
        assert!(!all.is_empty(), "no seeds for {}", t.name);
        for (name, bytes) in all {
            (t.run)(&bytes);
            fs::write(dir.join(name), bytes).expect("write a seed");
        }
    }
}
