//! HHC: a hybrid host cache. The engine (`engine`, `log`, `cache`) is sans-IO:
//! drivers feed it requests, device completions and time, and carry out the
//! device commands it emits. See README.md and docs/.

pub mod bench;
pub mod cache;
pub mod config;
pub mod driver;
pub mod engine;
pub mod format;
pub mod io;
pub mod json;
pub mod ffi;
pub mod log;
pub mod mttdl;
pub mod recovery;
pub mod sim;
pub mod simcore;
pub mod timed;
