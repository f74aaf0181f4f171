//! `hhc torture`: runs the deterministic fault-injection simulator over a
//! range of seeds and reports every broken invariant with the command that
//! reproduces it.

use super::CliResult;
use hhc::config::{Mutation, Policy};
use hhc::json::{Json, Object};
use hhc::sim::{self, Figures, RunSpec, SeedOutcome};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// How many seeds to run (default 100, or 1 with --seed).
    #[arg(long)]
    seeds: Option<u64>,
    /// First seed (the seeds run are S, S+1, ...).
    #[arg(long)]
    seed: Option<u64>,
    /// Requests per seed.
    #[arg(long, default_value_t = 5000)]
    ops: u64,
    /// Write policy under test: passthrough, wt, wb, wb-flush, wb-ordered, hhc.
    #[arg(long, default_value = "hhc")]
    policy: Policy,
    /// Requests and completions handed to the engine as one batch at most,
    /// as the SPDK module's poller passes do (1: each on its own).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    input_batch: u32,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Violations printed in full at most (all are counted).
    #[arg(long, default_value_t = 10)]
    show: usize,
    /// Run against a deliberately broken engine (proves the oracle fails).
    #[arg(long, hide = true, value_parser = parse_mutation, default_value = "none")]
    mutation: Mutation,
    /// Crash test, child side: run a workload over image files in DIR
    /// (created afresh) until killed, logging acknowledgements to a side file.
    #[arg(long, hide = true, value_name = "DIR")]
    process_workload: Option<PathBuf>,
    /// Crash test, checking side: restart over the files in DIR and verify
    /// every block against the side file.
    #[arg(long, hide = true, value_name = "DIR", conflicts_with = "process_workload")]
    process_verify: Option<PathBuf>,
}

fn parse_mutation(name: &str) -> Result<Mutation, String> {
    let mutation = sim::mutation_by_name(name)
        .ok_or_else(|| format!("unknown mutation '{name}' (expected one of {})", sim::MUTATION_NAMES.join(", ")))?;
    if mutation != Mutation::None && !hhc::config::MUTATIONS_BUILT {
        return Err(format!("mutation '{name}' needs a build with the `mutations` feature (cargo build --features mutations)"));
    }
    Ok(mutation)
}

pub fn run(args: Args) -> CliResult {
    if let Some(dir) = &args.process_workload {
        return process_workload(&args, dir);
    }
    if let Some(dir) = &args.process_verify {
        return process_verify(&args, dir);
    }
    let first_seed = args.seed.unwrap_or(0);
    let seeds_count = args.seeds.unwrap_or(if args.seed.is_some() { 1 } else { 100 });
    if args.ops == 0 {
        return Err("--ops must be at least 1".into());
    }
    let factory = sim::engine_factory();
    sim::announce_panics();
    let mut figures = Figures::default();
    let mut failures: Vec<SeedOutcome> = Vec::new();
    for seed in first_seed..first_seed.saturating_add(seeds_count) {
        let spec = RunSpec { seed, ops: args.ops, policy: args.policy, mutation: args.mutation, input_batch: args.input_batch };
        let outcome = sim::run_seed(&factory, spec);
        figures.add(&outcome.figures);
        if outcome.violation.is_some() {
            if !args.json && failures.len() < args.show {
                print_violation(&outcome);
            }
            failures.push(outcome);
        }
    }
    if args.json {
        println!("{}", json_report(&args, first_seed, &figures, &failures));
    } else {
        print_figures(&args, &figures);
    }
    Ok(if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_violation(outcome: &SeedOutcome) {
    let violation = outcome.violation.as_ref().expect("printing a seed without a violation");
    println!("seed {}: invariant {} violated", outcome.spec.seed, violation.invariant);
    if let Some(lba) = violation.lba {
        println!("  block:    {lba}");
    }
    println!("  expected: {}", violation.expected);
    println!("  found:    {}", violation.found);
    println!("  when:     {}", violation.context);
    let kinds = outcome.kinds.names();
    let faults = if kinds.is_empty() { "none besides volatile caches and the final power loss".to_string() } else { kinds.join(", ") };
    println!("  faults:   {faults}");
    println!("  reproduce: {}{}", sim::reproduce_command(&outcome.spec), mutation_flag(outcome.spec.mutation));
}

fn mutation_flag(mutation: Mutation) -> String {
    if mutation == Mutation::None {
        String::new()
    } else {
        format!(" --mutation {}", sim::mutation_name(mutation))
    }
}

fn print_figures(args: &Args, figures: &Figures) {
    println!("torture: policy {}, {} requests per seed{}", args.policy, args.ops, mutation_flag(args.mutation));
    for (name, value) in figures.named() {
        println!("  {:<22}{value}", name.replace('_', " "));
    }
}

fn json_report(args: &Args, first_seed: u64, figures: &Figures, failures: &[SeedOutcome]) -> String {
    let figures_json = figures.named().iter().fold(Object::new(), |object, &(name, value)| object.field(name, value));
    let violations: Vec<Json> = failures.iter().map(|outcome| violation_json(outcome).into()).collect();
    Object::new()
        .field("policy", args.policy.name())
        .field("ops", args.ops)
        .field("first_seed", first_seed)
        .field("mutation", sim::mutation_name(args.mutation))
        .field("figures", figures_json)
        .field("violations", violations)
        .to_string()
}

fn violation_json(outcome: &SeedOutcome) -> Object {
    let v = outcome.violation.as_ref().expect("a failure without a violation");
    let faults: Vec<Json> = outcome.kinds.names().iter().map(|name| Json::text(*name)).collect();
    Object::new()
        .field("seed", outcome.spec.seed)
        .field("faults", faults)
        .field("invariant", v.invariant)
        .field("block", v.lba)
        .field("expected", v.expected.as_str())
        .field("found", v.found.as_str())
        .field("context", v.context.as_str())
        .field("reproduce", format!("{}{}", sim::reproduce_command(&outcome.spec), mutation_flag(outcome.spec.mutation)))
}

fn process_workload(args: &Args, dir: &Path) -> CliResult {
    let factory = sim::engine_factory();
    match sim::process::run_workload(&factory, dir, args.policy, args.seed.unwrap_or(0), args.ops) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(message) => {
            println!("workload stopped: {message}");
            Ok(ExitCode::from(1))
        }
    }
}

fn process_verify(args: &Args, dir: &Path) -> CliResult {
    let factory = sim::engine_factory();
    match sim::process::verify(&factory, dir, args.policy) {
        Ok(blocks) => {
            println!("verified {blocks} blocks after kill -9");
            Ok(ExitCode::SUCCESS)
        }
        Err(violation) => {
            println!("{violation}");
            Ok(ExitCode::from(1))
        }
    }
}
