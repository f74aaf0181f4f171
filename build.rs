// SPDK discovery and the C shim are added by the SPDK module; until then the
// core builds on its own.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
