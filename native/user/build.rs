//! Exports `user.ld`, the linker script of every native program, to the build scripts of the
//! packages that depend on this runtime: they read it from `DEP_KESTREL_USER_LD` (Cargo's
//! `links` metadata), so no program names the runtime's path.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = format!("{dir}/user.ld");
    println!("cargo:ld={script}");
    println!("cargo:rerun-if-changed={script}");
}
