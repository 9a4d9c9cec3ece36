//! Links the mpibench program with the native-task linker script of the user runtime.
//! `kestrel-user` exports the script's path (`links = "kestrel_user"`).
fn main() {
    let script = std::env::var("DEP_KESTREL_USER_LD").expect("kestrel-user exports user.ld");
    println!("cargo:rustc-link-arg=-T{script}");
    println!("cargo:rerun-if-env-changed=DEP_KESTREL_USER_LD");
}
