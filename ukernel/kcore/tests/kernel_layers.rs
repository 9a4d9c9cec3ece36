//! The kernel's layering rules (docs/adr/0010-kernel-layering.md), checked on its source.
//!
//! It lives here because the kernel crate (`ukernel/kernel`) only builds for the PowerPC
//! target and has no host tests; kcore is the kernel's host-tested half. The check reads
//! every `crate::<module>` path outside comments in each layer's folder and compares the
//! module against the layer's allowed dependencies:
//!
//! - `arch` uses no other kernel module;
//! - `platform` uses `arch`;
//! - `api` uses `arch` and `platform`, and reaches virtualization only through
//!   `crate::Virtualization`, named in `api/hooks.rs` alone;
//! - `virt` uses `api`, `arch` and `platform`, never `glue`;
//! - `glue` may use everything.
//!
//! The root-level macros (`kprint!`, `kprintln!`) are allowed everywhere.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const KERNEL_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernel/src");
const MACROS: [&str; 2] = ["kprint", "kprintln"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules named as `crate::<name>` in `source`, outside `//` comments.
fn crate_paths(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in source.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `$crate::` in macros counts like `crate::`.
            names.insert(name);
            rest = tail;
        }
    }
    names
}

/// Every (file, module) pair in layer `layer` whose module is not in `allowed`.
fn violations(layer: &str, allowed: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&Path::new(KERNEL_SRC).join(layer), &mut files);
    assert!(!files.is_empty(), "no sources under {KERNEL_SRC}/{layer}");
    let mut bad = Vec::new();
    for file in files {
        let source = fs::read_to_string(&file).expect("kernel source is UTF-8");
        let rel = file
            .strip_prefix(KERNEL_SRC)
            .unwrap_or(&file)
            .display()
            .to_string();
        for name in crate_paths(&source) {
            let ok = name == layer
                || allowed.contains(&name.as_str())
                || MACROS.contains(&name.as_str())
                || (name == "Virtualization" && rel.ends_with("api/hooks.rs"));
            if !ok {
                bad.push(format!("{rel} uses crate::{name}"));
            }
        }
    }
    bad
}

#[test]
fn arch_uses_no_other_kernel_module() {
    assert_eq!(violations("arch", &[]), Vec::<String>::new());
}

#[test]
fn platform_uses_only_arch() {
    assert_eq!(violations("platform", &["arch"]), Vec::<String>::new());
}

#[test]
fn api_reaches_virtualization_only_through_its_hooks() {
    assert_eq!(
        violations("api", &["arch", "platform"]),
        Vec::<String>::new()
    );
}

#[test]
fn virt_never_uses_glue() {
    assert_eq!(
        violations("virt", &["api", "arch", "platform"]),
        Vec::<String>::new()
    );
}

#[test]
fn the_scanner_sees_paths_and_skips_comments() {
    let names =
        crate_paths("use crate::api::{a, b}; // crate::glue\nlet x = $crate::platform::f();");
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["api", "platform"]);
}
