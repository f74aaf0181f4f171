//! The SPDK driver of the engine: the only Rust code that touches SPDK or
//! raw pointers. The C shim (spdk-glue/) registers bdev module `hhc`; it
//! calls the `hhc_rs_*` functions in `entry` and offers the `hhc_glue_*`
//! functions bindgen generates into `sys`.
//!
//! Threading: one owner SPDK thread per HHC bdev (the thread that created
//! it) runs the engine and does all base-bdev I/O on its own channels.
//! Requests submitted on other threads reach it through a bounded queue and
//! are completed back on their own thread through a bounded per-channel
//! queue. Panics abort (`panic = "abort"` in release; `extern "C"` entry
//! points abort on unwinding in every profile). Errors become negative errno.
//!
//! `json`, `iov` and `params` hold no unsafe SPDK calls and build everywhere,
//! so their tests run without SPDK.

pub mod iov;
pub mod json;
pub mod params;

#[cfg(hhc_spdk)]
mod entry;
#[cfg(hhc_spdk)]
mod logger;
#[cfg(hhc_spdk)]
mod memory;
#[cfg(hhc_spdk)]
mod node;
#[cfg(hhc_spdk)]
mod sys;
