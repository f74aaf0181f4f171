//! The SPDK driver of the engine: the only Rust code that touches SPDK or
//! raw pointers. The C shim (spdk-glue/) registers bdev module `hhc`; it
//! calls the `hhc_rs_*` functions and offers the `hhc_glue_*` functions
//! bindgen generates into `sys`.
//!
//! Threading: one owner SPDK thread per HHC bdev (the thread that created
//! it, or one the module made for its `cpumask`) opens and closes its
//! bases, runs its timers, life cycle and recovery, and answers its RPCs
//! (forward.rs); the app thread registers its bdev. The engine sits in a
//! `NodeCell` (owner.rs) that one thread enters at a time: a channel on
//! another thread queues its requests and its poller enters the node once a
//! pass to start them as a batch; the device commands that use those
//! requests' buffers go out on that thread's lane (its own channels to the
//! backing and cache bdevs) and come back there, so a request runs to
//! completion on its own thread; other commands go out on the owner's
//! channels. Requests finished by another thread come back through a
//! bounded per-channel queue. While the engine passes every request through
//! (bypass.rs) they go straight to the backing bdev, as in bdev_passthru.
//! Panics abort (`panic = "abort"` in release; `extern "C"` entry
//! points abort on unwinding in every profile). Errors become negative errno
//! in `errno`.
//!
//! Rooms, each importing only the rooms above it:
//! 1. No SPDK calls; built and tested everywhere: `bdev_state` (a node's
//!    bdev from registration to destruct), `errno`, `io_tag` (what a base
//!    command's tag names), `json`, `iov`, `params`, `report` (stat
//!    fields, latency histogram, counter baselines), `latency` (each base
//!    bdev's command latencies).
//! 2. Thin wrappers of the C shim: `sys` (bindgen), `logger`, `memory`,
//!    `owner` (threads, time, the cells of a node's state), `rpc` (answers).
//! 3. `base` (base bdevs and lanes), `bypass` (requests past the engine),
//!    `recovery` (log scan and replay after a cache loss).
//! 4. The node: `node` (a node, its `Core` and its loop) and the files
//!    that each add one concern to `Core` or reach a node, which import
//!    one another: `request` (the request path, RESET), `commands` (the
//!    engine's device commands), `channels` (what the owner tells every
//!    channel), `lifecycle` (open, probe, register, fail, destruct,
//!    records, takeover), `info` (reports), `control` (the operator RPCs:
//!    stats, policy, flush_all), `recover` (bdev_hhc_recover and the
//!    records of lost caches), `registry` (the node list, by name and
//!    owner thread), `forward` (work sent to a node's owner), `create`
//!    (the create RPC and examine), `entry` (data path and channel entry
//!    points).
//! - `model`: the test-only device-model bdev (module `hhc_model`,
//!   spdk-glue/hhc_model.c), apart from all of the above: its model and
//!   stats build everywhere; its `entry` is built only into the
//!   device-model module (feature `spdk-model`, cfg `hhc_spdk_model`), with
//!   `sys` and `rpc` and none of the HHC module.

pub mod bdev_state;
pub mod errno;
pub mod io_tag;
pub mod iov;
pub mod json;
pub mod latency;
pub mod model;
pub mod params;
pub mod report;

#[cfg(hhc_spdk)]
mod base;
#[cfg(hhc_spdk)]
mod bypass;
#[cfg(hhc_spdk)]
mod channels;
#[cfg(hhc_spdk)]
mod commands;
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
// The device-model module answers with a part of it only.
#[cfg(any(hhc_spdk, hhc_spdk_model))]
#[cfg_attr(not(hhc_spdk), allow(dead_code))]
mod rpc;
#[cfg(any(hhc_spdk, hhc_spdk_model))]
mod sys;
