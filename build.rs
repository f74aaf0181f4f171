//! Finds SPDK for the `spdk` feature: compiles the C shim (spdk-glue/) with
//! `cc` and runs bindgen over spdk-glue/hhc_glue.h only. SPDK comes from
//! `SPDK_DIR` (a prefix with include/ and lib/pkgconfig/) or pkg-config.
//! Without the feature, or without SPDK, the core builds alone; the second
//! case says so loudly. With `spdk-model` instead the build is the
//! test-only device-model module's (cfg `hhc_spdk_model`, its C files
//! alone), never the HHC module's (cfg `hhc_spdk`).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The C shim's files of the HHC module (not hhc_tgt.c, which
/// spdk-glue/Makefile links).
const GLUE_SOURCES: [&str; 5] = [
    "spdk-glue/hhc_glue.c",
    "spdk-glue/hhc_base.c",
    "spdk-glue/hhc_node.c",
    "spdk-glue/hhc_rpc.c",
    "spdk-glue/hhc_common.c",
];

/// The C files of the test-only device-model module.
const MODEL_SOURCES: [&str; 2] = ["spdk-glue/hhc_model.c", "spdk-glue/hhc_common.c"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=spdk-glue/hhc_glue.h");
    println!("cargo:rerun-if-changed=spdk-glue/hhc_glue_internal.h");
    for file in GLUE_SOURCES.iter().chain(&MODEL_SOURCES) {
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rerun-if-env-changed=SPDK_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo::rustc-check-cfg=cfg(hhc_spdk)");
    println!("cargo::rustc-check-cfg=cfg(hhc_spdk_model)");
    if env::var_os("CARGO_FEATURE_SPDK").is_none() {
        return;
    }
    match find_spdk() {
        Some(include_dirs) => build_module(&include_dirs),
        None => println!(
            "cargo:warning=SPDK not found (set SPDK_DIR or make pkg-config find spdk_bdev); skipping the SPDK module"
        ),
    }
}

/// The include directories of SPDK, or None when it is not installed.
fn find_spdk() -> Option<Vec<PathBuf>> {
    if let Some(dir) = env::var_os("SPDK_DIR") {
        let dir = PathBuf::from(dir);
        let include = dir.join("include");
        return include.join("spdk/bdev_module.h").exists().then(|| vec![include]);
    }
    let output = Command::new("pkg-config").args(["--cflags-only-I", "spdk_bdev"]).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let flags = String::from_utf8(output.stdout).ok()?;
    let dirs: Vec<PathBuf> = flags.split_whitespace().filter_map(|f| f.strip_prefix("-I")).map(PathBuf::from).collect();
    dirs.iter().any(|d| d.join("spdk/bdev_module.h").exists()).then_some(dirs)
}

#[cfg(feature = "spdk")]
fn build_module(include_dirs: &[PathBuf]) {
    let model = env::var_os("CARGO_FEATURE_SPDK_MODEL").is_some();
    let mut build = cc::Build::new();
    build.files(if model { &MODEL_SOURCES[..] } else { &GLUE_SOURCES[..] }).include("spdk-glue").warnings(true).extra_warnings(true);
    build.flag_if_supported("-Wno-unused-parameter").flag_if_supported("-Wno-missing-field-initializers");
    for dir in include_dirs {
        build.include(dir);
    }
    // Bundled into the Rust staticlib; the final link against SPDK's shared
    // libraries happens in spdk-glue/Makefile.
    build.compile("hhc_glue");

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let bindings = bindgen::Builder::default()
        .header("spdk-glue/hhc_glue.h")
        .allowlist_function("hhc_glue_.*")
        .allowlist_type("hhc_glue_.*")
        .allowlist_var("HHC_GLUE_.*")
        // The same C struct as libc::iovec; sharing the type spares casts.
        .blocklist_type("iovec")
        .raw_line("pub use libc::iovec;")
        .rustified_enum("hhc_glue_io_kind")
        .rustified_enum("hhc_glue_log_level")
        .rustified_enum("hhc_glue_control")
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over spdk-glue/hhc_glue.h failed (is libclang installed?): {e}"));
    bindings.write_to_file(out_dir.join("hhc_glue.rs")).expect("write bindings");
    println!("cargo:rustc-cfg={}", if model { "hhc_spdk_model" } else { "hhc_spdk" });
}

#[cfg(not(feature = "spdk"))]
fn build_module(_include_dirs: &[PathBuf]) {}
