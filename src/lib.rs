//! HHC: a hybrid host cache. The engine (`engine`, `log`, `cache`) is sans-IO:
//! drivers feed it requests, device completions and time, and carry out the
//! device commands it emits. See DESIGN notes in README.md and docs/.

pub mod config;
pub mod format;
pub mod io;
pub mod sim;
