//! Reads include/mpi.h into Rust with bindgen (`$OUT_DIR/mpi_h.rs`), writes the table of every
//! integer macro the header defines (`$OUT_DIR/constants.rs`, used by the drift test against
//! the C compiler), and compiles the long double reduction kernels (src/ldouble.c) with the
//! target's C compiler.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use bindgen::callbacks::{IntKind, ParseCallbacks};

/// Every MPI_ integer macro is a C `int` (handles are ints, see mpi.h), so bindgen gives it
/// Rust's c_int rather than guessing from the value.
#[derive(Debug)]
struct IntMacros;

impl ParseCallbacks for IntMacros {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        name.starts_with("MPI_").then_some(IntKind::Int)
    }
}

/// The names of the integer macros in mpi.h: `#define MPI_NAME value`, where value is a
/// number, a parenthesized negative number or another such macro (pointer casts excluded).
fn integer_macros(header: &str) -> Vec<String> {
    header
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == "#define").then_some(())?;
            let name = words.next()?;
            let value: String = words.collect::<Vec<_>>().join(" ");
            let numeric = value.starts_with(|c: char| c.is_ascii_digit())
                || value.starts_with("(-")
                || value.starts_with("MPI_");
            (name.starts_with("MPI_") && numeric).then(|| name.to_string())
        })
        .collect()
}

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let header = dir.join("include/mpi.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=src/ldouble.c");

    let mut builder = bindgen::Builder::default()
        .header(header.to_str().expect("the repository path is UTF-8"))
        .use_core()
        .ctypes_prefix("core::ffi")
        .allowlist_item("MPI_.*")
        .parse_callbacks(Box::new(IntMacros))
        .layout_tests(true)
        .generate_comments(false);
    // Kestrel's own target (a JSON spec) is unknown to clang: name the PowerPC 32-bit SysV ABI
    // the header is compiled for there.
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("powerpc") {
        builder = builder.clang_arg("--target=powerpc-unknown-linux-gnu");
    }
    let bindings = builder
        .generate()
        .expect("bindgen could not read include/mpi.h (libclang missing? run scripts/setup.sh)");
    bindings
        .write_to_file(out.join("mpi_h.rs"))
        .expect("write mpi_h.rs");

    let text = fs::read_to_string(&header).expect("read include/mpi.h");
    let mut table =
        String::from("/// Every integer macro of mpi.h with its value as bindgen read it.\n");
    table.push_str("pub const ALL: &[(&str, i64)] = &[\n");
    for name in integer_macros(&text) {
        writeln!(table, "    (\"{name}\", crate::abi::{name} as i64),").expect("write to a String");
    }
    table.push_str("];\n");
    fs::write(out.join("constants.rs"), table).expect("write constants.rs");

    // The drift test's C side (tests/abi_drift.rs): the same names, printed by the C compiler.
    let mut probe =
        String::from("#include <mpi.h>\n#include \"probe_layout.h\"\nint main(void)\n{\n");
    for name in integer_macros(&text) {
        writeln!(
            probe,
            "    printf(\"{name} %lld\\n\", (long long)({name}));"
        )
        .expect("write to a String");
    }
    probe.push_str("    print_layout();\n    return 0;\n}\n");
    fs::write(out.join("probe.c"), probe).expect("write probe.c");

    let mut c = cc::Build::new();
    c.file("src/ldouble.c")
        .include("include")
        .flag_if_supported("-std=c99")
        .warnings(true);
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("powerpc") {
        // Debian's cross gcc; -mcpu=440fp because plain 440 means soft float to gcc, which
        // the hard-float glibc that kestrel-mpicc links against cannot be mixed with.
        c.compiler("powerpc-linux-gnu-gcc").flag("-mcpu=440fp");
    }
    c.compile("kestrel_mpi_ldouble");
}
