//! HHC: a hybrid host cache. The engine (`engine`, `log`, `cache`) is sans-IO:
//! drivers feed it requests, device completions and time, and carry out the
//! device commands it emits. See README.md and docs/.

#[cfg(feature = "tools")]
pub mod bench;
pub mod cache;
pub mod config;
pub mod direct;
pub mod driver;
pub mod engine;
pub mod ffi;
pub mod format;
pub mod histogram;
pub mod io;
pub mod json;
pub mod hdd_log;
pub mod models;
pub mod queue;
#[cfg(feature = "tools")]
pub mod mttdl;
pub mod recovery;
#[cfg(feature = "tools")]
pub mod sim;
#[cfg(feature = "tools")]
pub mod simcore;
pub mod sizing;
pub(crate) mod slab;
#[cfg(feature = "tools")]
pub mod svg;
#[cfg(feature = "tools")]
pub mod timed;
