//! The drift test of the C ABI: a C probe built from include/mpi.h by the C compiler prints
//! every integer macro, the layout of MPI_Status, the pointer constants and the size and
//! extent of every datatype; each must equal what the Rust side (bindgen's reading of the same
//! header, and the crate's own tables) says. The same probe built for the PowerPC 440 with
//! Debian's cross gcc and run under qemu-ppc-static must print the same constants and layout
//! (the ABI does not change with the machine), and the PowerPC sizes recorded here.

use kestrel_mpi_c::abi::{self, MPI_Status};
use kestrel_mpi_c::constants;
use kestrel_mpi_c::datatype::Datatype;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = include_str!("../include/mpi.h");
const POINTER_MACROS: [&str; 4] = [
    "MPI_STATUS_IGNORE",
    "MPI_STATUSES_IGNORE",
    "MPI_IN_PLACE",
    "MPI_BOTTOM",
];

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn parse(output: &str) -> BTreeMap<String, i64> {
    output
        .lines()
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').expect("NAME VALUE");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

/// Builds the probe with `cc` (extra flags after) into `exe` and runs it, through `runner`
/// when given.
fn probe(cc: &str, flags: &[&str], exe: &Path, runner: &[&str]) -> BTreeMap<String, i64> {
    let source = Path::new(env!("OUT_DIR")).join("probe.c");
    let status = Command::new(cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(exe)
        .arg(&source)
        .arg(format!("-I{}", manifest().join("include").display()))
        .arg(format!("-I{}", manifest().join("tests").display()))
        .args(flags)
        .status()
        .unwrap_or_else(|e| panic!("{cc} not found ({e}): run scripts/setup.sh"));
    assert!(status.success(), "{cc} could not build the probe");
    let out = match runner.split_first() {
        Some((prog, args)) => Command::new(prog).args(args).arg(exe).output(),
        None => Command::new(exe).output(),
    }
    .unwrap_or_else(|e| panic!("could not run the probe ({e}): run scripts/setup.sh"));
    assert!(out.status.success(), "the probe failed");
    parse(&String::from_utf8(out.stdout).expect("ASCII"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi-drift");
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir.join(name)
}

/// The Rust side's view of everything the probe prints.
fn rust_view() -> BTreeMap<String, i64> {
    let mut v: BTreeMap<String, i64> = constants::ALL
        .iter()
        .map(|(n, x)| (n.to_string(), *x))
        .collect();
    let mut put = |k: &str, x: usize| v.insert(k.to_string(), x as i64);
    put("sizeof MPI_Status", size_of::<MPI_Status>());
    put("offsetof MPI_SOURCE", offset_of!(MPI_Status, MPI_SOURCE));
    put("offsetof MPI_TAG", offset_of!(MPI_Status, MPI_TAG));
    put("offsetof MPI_ERROR", offset_of!(MPI_Status, MPI_ERROR));
    put(
        "offsetof kestrel_count",
        offset_of!(MPI_Status, kestrel_count),
    );
    put(
        "offsetof kestrel_cancelled",
        offset_of!(MPI_Status, kestrel_cancelled),
    );
    put("sizeof MPI_Comm", size_of::<abi::MPI_Comm>());
    put("sizeof MPI_Datatype", size_of::<abi::MPI_Datatype>());
    put("sizeof MPI_Op", size_of::<abi::MPI_Op>());
    put("sizeof MPI_Request", size_of::<abi::MPI_Request>());
    put("sizeof MPI_Errhandler", size_of::<abi::MPI_Errhandler>());
    let addr = |p: *mut core::ffi::c_void| p.addr() as isize as i64;
    v.insert(
        "pointer MPI_STATUS_IGNORE".into(),
        addr(abi::MPI_STATUS_IGNORE.cast()),
    );
    v.insert(
        "pointer MPI_STATUSES_IGNORE".into(),
        addr(abi::MPI_STATUSES_IGNORE.cast()),
    );
    v.insert("pointer MPI_IN_PLACE".into(), addr(abi::MPI_IN_PLACE));
    v.insert("pointer MPI_BOTTOM".into(), addr(abi::MPI_BOTTOM));
    for dt in kestrel_mpi_c::datatype::ALL {
        let name = if dt == Datatype::LongLong {
            "MPI_LONG_LONG_INT"
        } else {
            dt.name()
        };
        v.insert(format!("size {name}"), dt.size() as i64);
        if dt.index_offset().is_some() {
            v.insert(format!("extent {name}"), dt.extent() as i64);
        }
    }
    v
}

#[test]
fn every_macro_of_mpi_h_is_checked() {
    let checked: Vec<&str> = constants::ALL
        .iter()
        .map(|(n, _)| *n)
        .chain(POINTER_MACROS)
        .collect();
    for line in HEADER.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("#define") {
            let name = words.next().expect("a macro name");
            if name.starts_with("MPI_") {
                assert!(
                    checked.contains(&name),
                    "{name} is in mpi.h but neither bindgen's table nor POINTER_MACROS"
                );
            }
        }
    }
}

#[test]
fn the_host_c_compiler_agrees_with_rust() {
    let c = probe("gcc", &[], &scratch("probe-host"), &[]);
    let rust = rust_view();
    for (name, value) in &c {
        assert_eq!(
            rust.get(name),
            Some(value),
            "{name}: C says {value}, Rust {:?}",
            rust.get(name)
        );
    }
    assert_eq!(
        c.len(),
        rust.len(),
        "the probe and the Rust view list different names"
    );
}

#[test]
fn the_powerpc_abi_is_the_same_and_has_the_recorded_sizes() {
    let host = probe("gcc", &[], &scratch("probe-host2"), &[]);
    let ppc = probe(
        "powerpc-linux-gnu-gcc",
        &["-static", "-mcpu=440fp"],
        &scratch("probe-ppc"),
        &["qemu-ppc-static", "-cpu", "440epb"],
    );
    for (name, value) in &host {
        if !name.starts_with("size ") && !name.starts_with("extent ") {
            assert_eq!(
                ppc.get(name),
                Some(value),
                "{name} differs between the host and the PowerPC"
            );
        }
    }
    // The 32-bit PowerPC SysV ABI (Debian's gcc 12: long double is IBM double-double).
    let want = [
        ("size MPI_LONG", 4),
        ("size MPI_UNSIGNED_LONG", 4),
        ("size MPI_LONG_DOUBLE", 16),
        ("size MPI_LONG_INT", 8),
        ("extent MPI_LONG_INT", 8),
        ("size MPI_DOUBLE_INT", 12),
        ("extent MPI_DOUBLE_INT", 16),
        ("size MPI_LONG_DOUBLE_INT", 20),
        ("extent MPI_LONG_DOUBLE_INT", 32),
        ("sizeof MPI_Status", 20),
    ];
    for (name, value) in want {
        assert_eq!(ppc.get(name), Some(&value), "{name} on the PowerPC");
    }
}
