//! The SPDK driver of the engine: the only Rust code that touches SPDK or
//! raw pointers. The C shim (spdk-glue/) registers bdev module `hhc`; it
//! calls the `hhc_rs_*` functions and offers the `hhc_glue_*` functions
//! bindgen generates into `sys`.
//!
//! Threading: one owner SPDK thread per HHC bdev (the thread that created
//! it, or one the module made for its `cpumask`) runs the engine and does
//! all base-bdev I/O on its own channels; RPCs about it are sent there and
//! answered from there (forward.rs); the app thread registers its bdev.
//! Requests submitted on other threads reach it through a bounded queue and
//! are completed back on their own thread through a bounded per-channel
//! queue. Panics abort (`panic = "abort"` in release; `extern "C"` entry
//! points abort on unwinding in every profile). Errors become negative errno
//! in `errno`.
//!
//! Rooms, each importing only those above it in this list:
//! - `errno`, `json`, `iov`, `params`, `report` (stat fields, latency
//!   histogram, counter baselines): no SPDK calls; build and test everywhere.
//! - `sys` (bindgen), `logger`, `memory`, `owner` (threads, time, the
//!   owner-thread cell), `rpc` (answers): thin wrappers of the C shim.
//! - `base` (base bdevs), `request` (the request path, RESET), `recovery`
//!   (log scan and replay after a cache loss).
//! - `node` (a node and its owner's loop), then `registry` (the node list,
//!   by name and owner thread), `forward` (work sent to a node's owner),
//!   `lifecycle` (open, probe, register, fail, destruct, recovery), `info`
//!   (reports), `control` (the operator RPCs: stats, policy, flush_all),
//!   `recover` (bdev_hhc_recover and the records of lost caches), `create`
//!   (the create RPC and examine), `entry` (data path and channel entry
//!   points).
//! - `model`: the test-only device-model bdev (module `hhc_model`,
//!   spdk-glue/hhc_model.c), apart from all of the above: its model and
//!   stats build everywhere, its `entry` needs SPDK.

pub mod errno;
pub mod iov;
pub mod json;
pub mod model;
pub mod params;
pub mod report;

#[cfg(hhc_spdk)]
mod base;
#[cfg(hhc_spdk)]
mod control;
#[cfg(hhc_spdk)]
mod create;
#[cfg(hhc_spdk)]
mod entry;
#[cfg(hhc_spdk)]
mod forward;
#[cfg(hhc_spdk)]
mod info;
#[cfg(hhc_spdk)]
mod lifecycle;
#[cfg(hhc_spdk)]
mod logger;
#[cfg(hhc_spdk)]
mod memory;
#[cfg(hhc_spdk)]
mod node;
#[cfg(hhc_spdk)]
mod owner;
#[cfg(hhc_spdk)]
mod recovery;
#[cfg(hhc_spdk)]
mod recover;
#[cfg(hhc_spdk)]
mod registry;
#[cfg(hhc_spdk)]
mod request;
#[cfg(hhc_spdk)]
mod rpc;
#[cfg(hhc_spdk)]
mod sys;
