// Links libKeepsakeC.so: from KEEPSAKE_LIB_DIR, else the Swift package's release build, else its
// debug build (this crate lives in bindings/rust of the Keepsake checkout). The run path is set
// so that tests and examples find it; an app ships it on the library path.
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=KEEPSAKE_LIB_DIR");
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let directory = std::env::var("KEEPSAKE_LIB_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        let release = checkout.join(".build/release");
        if release.join("libKeepsakeC.so").exists() { release } else { checkout.join(".build/debug") }
    });
    println!("cargo:rustc-link-search=native={}", directory.display());
    println!("cargo:rustc-link-lib=dylib=KeepsakeC");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", directory.display());
}
