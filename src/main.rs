//! `hhc`: the offline tool — log inspection, recovery, simulators, analysis —
//! and `hhc stats`, the view of a running SPDK target's HHC bdevs.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;

#[derive(Parser)]
#[command(name = "hhc", version, about = "HHC hybrid host cache: offline tools and simulators")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect an HHC log device (or image file).
    Log(cli::log::Args),
    /// Replay an HHC log onto the backing device after the cache device was lost.
    Recover(cli::recover::Args),
    /// Deterministic fault-injection simulator with a durability oracle.
    Torture(cli::torture::Args),
    /// Timed simulator: the paper's experiments in virtual time.
    Simulate(cli::simulate::Args),
    /// Reliability analysis (MTTDL) of HHC against RAID5/RAID6.
    Mttdl(cli::mttdl::Args),
    /// Engine micro-benchmarks: CPU per request and RAM per block.
    Bench(cli::bench::Args),
    /// How large a log keeps hhc near wb for a given write load.
    Size(cli::size::Args),
    /// A running SPDK target's HHC bdevs: requests, blocks, log, devices, latency.
    Stats(cli::stats::Args),
    /// A simulator workload as fio iologs (one per thread), to replay on a bdev.
    Trace(cli::trace::Args),
}

fn main() -> ExitCode {
    // Like any Unix filter: `hhc log inspect ... | head` ends quietly
    // instead of panicking on a closed pipe (Rust ignores SIGPIPE).
    // SAFETY: restoring the default disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Log(args) => cli::log::run(args),
        Command::Recover(args) => cli::recover::run(args),
        Command::Torture(args) => cli::torture::run(args),
        Command::Simulate(args) => cli::simulate::run(args),
        Command::Mttdl(args) => cli::mttdl::run(args),
        Command::Bench(args) => cli::bench::run_cli(args),
        Command::Size(args) => cli::size::run(args),
        Command::Stats(args) => cli::stats::run(args),
        Command::Trace(args) => cli::trace::run(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("hhc: {message}");
            ExitCode::from(2)
        }
    }
}
