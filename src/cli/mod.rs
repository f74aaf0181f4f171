//! One file per subcommand; each has `Args` (clap) and `run`.

pub mod bench;
pub mod log;
mod log_files;
pub mod mttdl;
pub mod recover;
pub mod simulate;
pub mod size;
pub mod stats;
pub mod torture;
pub mod trace;

/// A subcommand's outcome: an exit code, or a message for stderr (exit 2).
pub type CliResult = Result<std::process::ExitCode, String>;
