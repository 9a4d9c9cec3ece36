//! The files of the kernel's `virt/` form layers (the list in `virt/mod.rs`): their imports
//! of each other have no cycle. It lives beside `kernel_layers.rs` for the same reason: the
//! kernel crate only builds for the PowerPC target.
//!
//! A file of `virt/` uses another when its code (outside `//` comments) names
//! `super::<file>` or `crate::virt::<file>`, including inside a `use super::{...}` group;
//! naming `super::<item>` for an item of `mod.rs` uses `mod.rs`. `mod.rs` uses every
//! module it names as `<file>::`. A cycle among these edges fails the test with the files
//! on it, and so does an edge that does not go down the layers listed in [`LAYERS`] (the
//! list in `virt/mod.rs`; a new file must be placed there).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const VIRT_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernel/src/virt");

/// `virt/`'s layers, bottom first (`virt/mod.rs` says what each is for): a file uses only
/// files of lower layers.
const LAYERS: &[&[&str]] = &[
    &["vcpu"],
    &["mmu"],
    &["pv"],
    &["inject"],
    &["fault"],
    &["split"],
    &["emulate", "fast", "control"],
    &["mod"],
];

/// The code of `source` without `//` comments (doc comments included).
fn code(source: &str) -> String {
    source
        .lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first path segments of the items of a `{...}` group starting at `s` (after `{`),
/// at its top level only.
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if c.is_whitespace() => {}
            _ if at_item_start && depth == 0 => {
                at_item_start = false;
                let name = ident(&s[i..]);
                if !name.is_empty() {
                    heads.push(name);
                }
            }
            _ => {}
        }
    }
    heads
}

/// The first segments after every `prefix` in `code` (`prefix::name` or
/// `prefix::{a, b::c}`).
fn heads_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let tail = &rest[i + prefix.len()..];
        // `xsuper::` is not `super::`.
        let before = rest[..i].chars().last();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            if let Some(group) = tail.strip_prefix('{') {
                names.extend(group_heads(group));
            } else {
                let name = ident(tail);
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        }
        rest = tail;
    }
    names
}

/// File (module name, `mod` for `mod.rs`) → the files it uses.
fn graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut sources = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path
                .file_stem()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            let source = fs::read_to_string(&path).expect("kernel source is UTF-8");
            sources.insert(name, code(&source));
        }
    }
    assert!(
        sources.contains_key("mod"),
        "no mod.rs in {}",
        dir.display()
    );
    let modules: BTreeSet<String> = sources.keys().filter(|n| *n != "mod").cloned().collect();
    let mut edges = BTreeMap::new();
    for (name, code) in &sources {
        let mut uses = BTreeSet::new();
        if name == "mod" {
            for m in &modules {
                if code.contains(&format!("{m}::")) {
                    uses.insert(m.clone());
                }
            }
        } else {
            let mut heads = heads_after(code, "super::");
            heads.extend(heads_after(code, "crate::virt::"));
            for h in heads {
                if modules.contains(&h) {
                    if h != *name {
                        uses.insert(h);
                    }
                } else {
                    uses.insert("mod".to_string());
                }
            }
        }
        edges.insert(name.clone(), uses);
    }
    edges
}

/// A cycle of `edges`, if there is one (the files on it, the first repeated at the end).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).expect("on the stack");
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, edges, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn virt_files_have_no_import_cycle() {
    let edges = graph(Path::new(VIRT_SRC));
    assert!(edges.len() > 2, "virt/ has too few files: {edges:?}");
    if let Some(cycle) = find_cycle(&edges) {
        panic!(
            "import cycle among virt/: {}\nall edges: {edges:#?}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn virt_files_use_only_lower_layers() {
    let layer = |n: &str| LAYERS.iter().position(|l| l.contains(&n));
    let mut bad = Vec::new();
    for (file, uses) in graph(Path::new(VIRT_SRC)) {
        let Some(mine) = layer(&file) else {
            bad.push(format!("virt/{file}.rs is in no layer of LAYERS"));
            continue;
        };
        for u in uses {
            if layer(&u).is_none_or(|theirs| theirs >= mine) {
                bad.push(format!(
                    "virt/{file}.rs uses virt/{u}.rs, which is not below it"
                ));
            }
        }
    }
    assert_eq!(bad, Vec::<String>::new());
}

#[test]
fn only_mod_rs_uses_mod_rs_items_never_the_others() {
    // No file below `mod.rs` reaches back up to an item of `mod.rs` (the top layer).
    let edges = graph(Path::new(VIRT_SRC));
    let back: Vec<_> = edges
        .iter()
        .filter(|(n, uses)| *n != "mod" && uses.contains("mod"))
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(
        back,
        Vec::<String>::new(),
        "files using items of virt/mod.rs"
    );
}

#[test]
fn the_scanner_sees_groups_paths_and_cycles() {
    let c =
        code("use super::{mmu, vcpu::{a, b}, Kernel};\nlet x = super::pv::f(); // super::split\n");
    let heads = heads_after(&c, "super::");
    assert_eq!(
        heads.into_iter().collect::<Vec<_>>(),
        ["Kernel", "mmu", "pv", "vcpu"]
    );
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&edges), None);
    edges.get_mut("c").unwrap().insert("a".to_string());
    assert_eq!(
        find_cycle(&edges),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
