// Links libKeepsakeC.so, found in this order: KEEPSAKE_LIB_DIR; the system's (the `libkeepsake`
// package installs it on the library path); this checkout's static-stdlib build
// (`scripts/build-library`: Swift's standard library linked in, so it needs no toolchain to run),
// else its release or debug build. A library from the checkout is copied into this build's
// OUT_DIR and named as a native search path there: cargo puts such paths on the library path of
// what `cargo run` and `cargo test` start — this crate's own tests and examples, and the
// binaries of every crate that depends on it — so they run with no LD_LIBRARY_PATH.
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=KEEPSAKE_LIB_DIR");
    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    if let Ok(directory) = std::env::var("KEEPSAKE_LIB_DIR") {
        link(Path::new(&directory), &out);
        return;
    }
    let system = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"];
    let candidates = [
        checkout.join(".build/static/lib"),
        checkout.join(".build/release"),
        checkout.join(".build/debug"),
    ];
    for directory in &candidates {
        println!("cargo:rerun-if-changed={}", directory.join("libKeepsakeC.so").display());
    }
    if let Some(directory) = system.iter().map(Path::new).find(|d| d.join("libKeepsakeC.so").exists()) {
        println!("cargo:rustc-link-search=native={}", directory.display());
        println!("cargo:rustc-link-lib=dylib=KeepsakeC");
        return;
    }
    if let Some(directory) = candidates.iter().find(|d| d.join("libKeepsakeC.so").exists()) {
        return link(directory, &out);
    }
    // Nothing built yet in this checkout: where there is a Swift toolchain, build the library
    // as the packages ship it (a few minutes, once), so that `cargo test` just works.
    let script = checkout.join("scripts/build-library");
    let has_swift = std::process::Command::new("sh")
        .arg("-c")
        .arg("command -v swift")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if has_swift && script.exists() {
        println!("cargo:warning=building libKeepsakeC.so with scripts/build-library (once)");
        let built = std::process::Command::new(&script).status();
        if matches!(built, Ok(status) if status.success()) {
            return link(&checkout.join(".build/static/lib"), &out);
        }
    }
    panic!(
        "libKeepsakeC.so not found: install the libkeepsake package, run scripts/build-library \
         in the Keepsake checkout, or set KEEPSAKE_LIB_DIR to the directory that holds it"
    );
}

/// Copies the library into OUT_DIR and links it from there (the run path too, for a binary run
/// by hand; a library built with the toolchain's shared standard library needs its directory).
fn link(directory: &Path, out: &Path) {
    let library = directory.join("libKeepsakeC.so");
    std::fs::copy(&library, out.join("libKeepsakeC.so"))
        .unwrap_or_else(|error| panic!("{}: {error}", library.display()));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=KeepsakeC");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", out.display());
    if let Some(runtime) = swift_runtime() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", runtime.display());
    }
}

/// The toolchain's shared standard library directory, where there is a toolchain.
fn swift_runtime() -> Option<PathBuf> {
    let swiftc = std::process::Command::new("sh")
        .arg("-c")
        .arg("readlink -f \"$(command -v swiftc)\"")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(swiftc.stdout).ok()?.trim());
    Some(path.parent()?.parent()?.join("lib/swift/linux")).filter(|p| p.exists())
}
