//! Deterministic fault-injection simulator with a durability oracle
//! (`hhc torture`). The real engine runs against simulated devices in
//! virtual time; one seed draws the devices, the faults and the workload, so
//! one seed reproduces a run exactly. See docs/design.md §2 for the invariants
//! the oracle checks. The target factory, the toy target, the PRNG and the
//! event queue it shares with `hhc simulate` are in `src/simcore/`.

pub mod device;
pub mod faults;
pub mod oracle;
pub mod pattern;
pub mod process;
pub mod runner;
pub mod workload;

use crate::config::Mutation;
pub use oracle::Violation;
pub use runner::{announce_panics, run_seed, RunSpec, SeedOutcome};

/// What a sweep did, summed over seeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub seeds: u64,
    /// Requests the workload submitted (verification reads not included).
    pub requests: u64,
    pub flushes: u64,
    pub request_errors: u64,
    pub blocks_checked: u64,
    pub power_losses: u64,
    pub device_deaths: u64,
    pub policy_switches: u64,
    pub options_changes: u64,
    /// Dead log mirrors found again, stale, at a restart (`mirror-returns`).
    pub mirror_returns: u64,
    /// Fresh log mirrors attached online to a removed one's slot (`mirror-replaced`).
    pub mirror_attaches: u64,
    /// Mirrors that stopped answering for a while (`Fault::MirrorHangs`).
    pub mirror_hangs: u64,
    /// Writes the sequential cutoff sent to the backing device alone.
    pub cutoff_writes: u64,
    /// Log blocks left unwritten after barrier parts (`Stats::log_gap_blocks`).
    pub log_gap_blocks: u64,
    /// Events handed in inside a batch after its first (completions, and
    /// requesters' wake-ups, which may submit a request; `RunSpec::input_batch`).
    pub batched_inputs: u64,
    pub corruptions_injected: u64,
    /// Corrupt log copies the cache-loss recovery recognised and skipped.
    pub corruptions_detected: u64,
    /// Corrupted ranges that some later read ran into, in seeds without a violation.
    pub corruptions_read_back: u64,
    pub recoveries: u64,
    /// Failures beyond the design (cache and every good log copy lost, or a
    /// cache loss under a policy that does not promise to survive it).
    pub unsurvivable: u64,
    pub violations: u64,
}

impl Figures {
    pub fn add(&mut self, other: &Figures) {
        let pairs: [(&mut u64, u64); 21] = [
            (&mut self.corruptions_read_back, other.corruptions_read_back),
            (&mut self.seeds, other.seeds),
            (&mut self.requests, other.requests),
            (&mut self.flushes, other.flushes),
            (&mut self.request_errors, other.request_errors),
            (&mut self.blocks_checked, other.blocks_checked),
            (&mut self.power_losses, other.power_losses),
            (&mut self.device_deaths, other.device_deaths),
            (&mut self.policy_switches, other.policy_switches),
            (&mut self.options_changes, other.options_changes),
            (&mut self.mirror_returns, other.mirror_returns),
            (&mut self.mirror_attaches, other.mirror_attaches),
            (&mut self.mirror_hangs, other.mirror_hangs),
            (&mut self.cutoff_writes, other.cutoff_writes),
            (&mut self.log_gap_blocks, other.log_gap_blocks),
            (&mut self.batched_inputs, other.batched_inputs),
            (&mut self.corruptions_injected, other.corruptions_injected),
            (&mut self.corruptions_detected, other.corruptions_detected),
            (&mut self.recoveries, other.recoveries),
            (&mut self.unsurvivable, other.unsurvivable),
            (&mut self.violations, other.violations),
        ];
        for (mine, theirs) in pairs {
            *mine += theirs;
        }
    }

    /// Name and value of every figure, in report order.
    pub fn named(&self) -> [(&'static str, u64); 21] {
        [
            ("seeds", self.seeds),
            ("requests", self.requests),
            ("flushes", self.flushes),
            ("request_errors", self.request_errors),
            ("blocks_checked", self.blocks_checked),
            ("power_losses", self.power_losses),
            ("device_deaths", self.device_deaths),
            ("policy_switches", self.policy_switches),
            ("options_changes", self.options_changes),
            ("mirror_returns", self.mirror_returns),
            ("mirror_attaches", self.mirror_attaches),
            ("mirror_hangs", self.mirror_hangs),
            ("cutoff_writes", self.cutoff_writes),
            ("log_gap_blocks", self.log_gap_blocks),
            ("batched_inputs", self.batched_inputs),
            ("corruptions_injected", self.corruptions_injected),
            ("corruptions_detected", self.corruptions_detected),
            ("corruptions_read_back", self.corruptions_read_back),
            ("recoveries", self.recoveries),
            ("unsurvivable", self.unsurvivable),
            ("violations", self.violations),
        ]
    }
}

/// The command line that reruns exactly one seed.
pub fn reproduce_command(spec: &RunSpec) -> String {
    let batch = if spec.input_batch > 1 { format!(" --input-batch {}", spec.input_batch) } else { String::new() };
    format!("hhc torture --seed {} --ops {} --policy {}{batch}", spec.seed, spec.ops, spec.policy)
}

pub const MUTATION_NAMES: [&str; 9] = [
    "none",
    "flush-skips-log",
    "revoke-before-backing-flush",
    "commit-before-data",
    "read-wrong-block",
    "stale-mirror-healthy",
    "attached-mirror-healthy",
    "superseded-freed-early",
    "recorded-head-too-far",
];
const MUTATIONS: [Mutation; 9] = [
    Mutation::None,
    Mutation::FlushSkipsLog,
    Mutation::RevokeBeforeBackingFlush,
    Mutation::CommitBeforeData,
    Mutation::ReadWrongBlock,
    Mutation::StaleMirrorHealthy,
    Mutation::AttachedMirrorHealthy,
    Mutation::SupersededFreedEarly,
    Mutation::RecordedHeadTooFar,
];

pub fn mutation_name(mutation: Mutation) -> &'static str {
    MUTATION_NAMES[MUTATIONS.iter().position(|m| *m == mutation).expect("a mutation without a name")]
}

pub fn mutation_by_name(name: &str) -> Option<Mutation> {
    MUTATION_NAMES.iter().position(|n| *n == name).map(|i| MUTATIONS[i])
}

/// The target `hhc torture` runs: the real engine.
pub fn engine_factory() -> crate::simcore::EngineFactory {
    crate::simcore::EngineFactory
}
