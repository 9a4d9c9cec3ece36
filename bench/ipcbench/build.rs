//! Links the task with the native-task linker script.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-arg=-T{dir}/../../ukernel/user/user.ld");
    println!("cargo:rerun-if-changed={dir}/../../ukernel/user/user.ld");
}
