//! Links the demo with the native-task linker script of the user runtime, plus
//! `sections.ld`, which adds the end-of-code symbol the pager needs.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = format!("{dir}/../../user/user.ld");
    println!("cargo:rustc-link-arg=-T{script}");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rustc-link-arg={dir}/sections.ld");
    println!("cargo:rerun-if-changed={dir}/sections.ld");
}
