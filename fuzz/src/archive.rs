//! Target `archive`: the boot-module archive reader (`kestrel_abi::bootmod`), which the
//! root task runs on what `-initrd` carries and the VMM on the archive it maps.
//!
//! Input: the archive bytes. Checked: `count` is `Some(n)` only with the magic and a
//! table that fits; every module `get` returns is a slice of the archive inside its
//! bounds, named by the entry's bytes up to the first NUL (at most 24, valid UTF-8);
//! `get(n)` and beyond is `None`; `find` returns the first module of that name; and
//! re-packing the modules gives an archive that reads back the same.

use kestrel_abi::bootmod::{count, find, get, Module, ENTRY_LEN, HEADER_LEN, MAGIC, NAME_LEN};

pub fn run(data: &[u8]) {
    let Some(n) = count(data) else {
        assert!(get(data, 0).is_none() && find(data, "").is_none());
        return;
    };
    assert_eq!(data[..8], MAGIC);
    assert!(
        HEADER_LEN + n * ENTRY_LEN <= data.len(),
        "table of {n} fits"
    );
    assert!(
        get(data, n).is_none()
            && get(data, n.saturating_add(1)).is_none()
            && get(data, usize::MAX).is_none()
    );
    let range = data.as_ptr_range();
    let mut modules: Vec<Module> = Vec::new();
    let mut complete = true;
    for i in 0..n.min(64) {
        let Some(m) = get(data, i) else {
            complete = false;
            continue;
        };
        let r = m.data.as_ptr_range();
        assert!(
            range.start <= r.start && r.end <= range.end,
            "module {i} outside the archive"
        );
        let e = HEADER_LEN + i * ENTRY_LEN;
        let raw = &data[e..e + NAME_LEN];
        let len = raw.iter().position(|&c| c == 0).unwrap_or(NAME_LEN);
        assert_eq!(m.name.as_bytes(), &raw[..len], "module {i} name");
        let first = find(data, m.name).expect("a module's name is found");
        let k = modules.iter().position(|o| o.name == m.name);
        match k {
            Some(k) => assert_eq!(first, modules[k], "find returns the first of a name"),
            None if complete => assert_eq!(first, m),
            None => {}
        }
        modules.push(m);
    }
    if complete && n <= 64 {
        let packed = pack(&modules);
        assert_eq!(count(&packed), Some(modules.len()));
        for (i, m) in modules.iter().enumerate() {
            assert_eq!(get(&packed, i), Some(*m), "re-packed module {i}");
        }
    }
}

/// An archive of `modules` (the layout of `bootmod`'s `build` test helper and of
/// `scripts/mkbootmod.py`).
pub fn pack(modules: &[Module]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(modules.len() as u32).to_be_bytes());
    let mut off = HEADER_LEN + modules.len() * ENTRY_LEN;
    for m in modules {
        let mut name = [0u8; NAME_LEN];
        name[..m.name.len()].copy_from_slice(m.name.as_bytes());
        out.extend_from_slice(&name);
        out.extend_from_slice(&(off as u32).to_be_bytes());
        out.extend_from_slice(&(m.data.len() as u32).to_be_bytes());
        off += m.data.len();
    }
    for m in modules {
        out.extend_from_slice(m.data);
    }
    out
}
