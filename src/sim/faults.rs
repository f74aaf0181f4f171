//! The per-seed fault plan, BUGGIFY style: each fault kind is switched on for
//! a seed with some probability and its parameters are drawn from the seed,
//! so that a sweep covers every combination and one seed reproduces one.

use super::device::{DeviceSpec, SilentFaults};
use crate::simcore::prng::Prng;
use super::workload::WorkloadSpec;
use crate::config::{Config, CutoffPolicy, Mutation, Options, Policy, SEQ_CUTOFF_THRESHOLD_MIN};
use crate::format::{META_ENTRIES_PER_PAGE, UNIT_BYTES};
use crate::io::Nanos;

pub const BLOCK_BYTES: u32 = 4096;
const SEGMENT_BYTES: u32 = 64 * 1024;
/// The log superblock copies precede the segments (Config::validate).
const LOG_SEGMENTS_OFFSET_BYTES: u64 = 8192;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    PowerLoss,
    CacheDeath,
    MirrorDeath(u8),
    /// A power loss during which mirror `m`, if dead, is found again with the
    /// contents it had when it died (a flaky disk back after a reboot, a
    /// saved configuration naming a detached mirror).
    MirrorReturns(u8),
    /// A fresh device attached online in mirror slot `m`, whose device was
    /// removed (an operator's `bdev_hhc_attach_log`); skipped unless the
    /// slot's device is dead and the target serves.
    MirrorAttached(u8),
    /// Mirror `m` answers nothing for the given time (`SimDevice::hang_until`).
    MirrorHangs(u8, Nanos),
    /// Mirror `m`'s hang is over (scheduled by the simulator).
    MirrorThaws(u8),
    SwitchPolicy(Policy),
    /// `set_options` while the engine serves (the cutoff, dirty threshold,
    /// write-back depth, idle time).
    SetOptions(Options),
}

/// A fault fires once the workload has submitted `at_op` requests, then
/// `delay_ns` later, so it lands at an arbitrary instant between I/Os.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedFault {
    pub at_op: u64,
    pub delay_ns: Nanos,
    pub fault: Fault,
}

/// Which kinds a seed switched on (for the figures and for sweep coverage).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultKinds {
    pub power_loss: bool,
    pub cache_death: bool,
    pub mirror_death: bool,
    pub all_mirrors_death: bool,
    pub log_corruption: bool,
    pub backing_errors: bool,
    pub latency_spikes: bool,
    pub backing_without_flush: bool,
    pub buffer_pool_exhaustion: bool,
    pub log_fills_up: bool,
    pub policy_switches: bool,
    /// The sequential cutoff on (`always` or `full`, a small threshold) and
    /// sequential streams in the workload.
    pub seq_cutoff: bool,
    /// A dead mirror comes back, stale, at a restart; later the other mirror
    /// and then the cache die (drawn from a PRNG of its own).
    pub mirror_returns: bool,
    /// A mirror replaced online: removed, a fresh one attached (it
    /// re-syncs), later the other mirror and then the cache die (drawn from
    /// a PRNG of its own).
    pub mirror_replaced: bool,
    /// A mirror stops answering for a while, past the engine's mirror
    /// timeout or not, and later the cache dies (drawn from a PRNG of its
    /// own).
    pub mirror_hangs: bool,
}

impl FaultKinds {
    /// Names of the kinds switched on.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            (self.power_loss, "power-loss"),
            (self.cache_death, "cache-death"),
            (self.mirror_death, "mirror-death"),
            (self.all_mirrors_death, "all-mirrors-death"),
            (self.log_corruption, "log-corruption"),
            (self.backing_errors, "backing-errors"),
            (self.latency_spikes, "latency-spikes"),
            (self.backing_without_flush, "backing-without-flush"),
            (self.buffer_pool_exhaustion, "buffer-pool-exhaustion"),
            (self.log_fills_up, "log-fills-up"),
            (self.policy_switches, "policy-switches"),
            (self.seq_cutoff, "seq-cutoff"),
            (self.mirror_returns, "mirror-returns"),
            (self.mirror_replaced, "mirror-replaced"),
            (self.mirror_hangs, "mirror-hangs"),
        ];
        all.into_iter().filter(|(on, _)| *on).map(|(_, name)| name).collect()
    }
}

#[derive(Clone, Debug)]
pub struct FaultPlan {
    pub config: Config,
    pub cache: DeviceSpec,
    pub mirrors: Vec<DeviceSpec>,
    pub backing: DeviceSpec,
    pub workload: WorkloadSpec,
    /// Sorted by `at_op`.
    pub faults: Vec<PlannedFault>,
    pub kinds: FaultKinds,
}

impl FaultPlan {
    pub fn draw(seed: u64, ops: u64, policy: Policy, mutation: Mutation) -> FaultPlan {
        let mut prng = Prng::new(seed ^ 0x7472_6963_6B73_u64);
        let mut kinds = draw_kinds(&mut prng);
        let mirrors_count = draw_mirrors_count(&mut prng, &kinds);
        let config = draw_config(&mut prng, policy, mutation, mirrors_count, &kinds);
        let cache = cache_spec(&mut prng, &config, &kinds);
        let backing = backing_spec(&mut prng, &config, &kinds);
        let corrupt_mirrors = if kinds.log_corruption { corrupt_mirrors_count(&mut prng, mirrors_count) } else { 0 };
        let mirrors = (0..mirrors_count).map(|i| mirror_spec(&mut prng, &config, &kinds, i < corrupt_mirrors)).collect();
        let mut config = config;
        let mut workload = WorkloadSpec::draw(&mut prng);
        let faults = draw_faults(&mut prng, ops, policy, mirrors_count, &mut kinds);
        // From a PRNG of its own, so every other draw of a seed stays what
        // it was before the cutoff existed (the seeds that once failed
        // still run the same faults).
        let mut faults = faults;
        let mut cutoff_prng = Prng::new(seed ^ 0x5345_5143_5554);
        draw_seq_cutoff(&mut cutoff_prng, &mut config, &mut workload, &mut kinds);
        if kinds.seq_cutoff {
            draw_options_changes(&mut cutoff_prng, ops, &config, &mut faults);
        }
        // Likewise from a PRNG of its own: seeds without it run as before.
        let mut returns_prng = Prng::new(seed ^ 0x5245_5455_524E);
        let mut plan = FaultPlan { config, cache, mirrors, backing, workload, faults, kinds };
        draw_mirror_returns(&mut returns_prng, ops, &mut plan);
        // And online mirror replacement (its own PRNG too).
        draw_mirror_replaced(&mut Prng::new(seed ^ 0x5245_504C_4143), ops, &mut plan);
        // And the gap after barrier parts (its own PRNG too).
        draw_barrier_gap(&mut Prng::new(seed ^ 0x4741_5053), &mut plan.config);
        // And a mirror that stops answering (its own PRNG too), from
        // MIRROR_HANGS_FROM_SEED on only.
        if seed >= MIRROR_HANGS_FROM_SEED {
            draw_mirror_hangs(&mut Prng::new(seed ^ 0x4841_4E47), ops, &mut plan);
        }
        plan
    }
}

fn draw_kinds(prng: &mut Prng) -> FaultKinds {
    FaultKinds {
        power_loss: prng.percent(60),
        cache_death: prng.percent(30),
        mirror_death: prng.percent(25),
        all_mirrors_death: prng.percent(10),
        log_corruption: prng.percent(25),
        backing_errors: prng.percent(25),
        latency_spikes: prng.percent(25),
        backing_without_flush: prng.percent(15),
        buffer_pool_exhaustion: prng.percent(25),
        log_fills_up: prng.percent(25),
        policy_switches: prng.percent(20),
        seq_cutoff: false, // drawn last, from its own PRNG (draw_seq_cutoff)
        mirror_returns: false, // likewise (draw_mirror_returns)
        mirror_replaced: false, // likewise (draw_mirror_replaced)
        mirror_hangs: false,    // likewise (draw_mirror_hangs)
    }
}

/// Corruption of the only mirror plus a cache loss is beyond the design, so
/// corrupting seeds mostly get a second mirror to recover from.
fn draw_mirrors_count(prng: &mut Prng, kinds: &FaultKinds) -> u8 {
    let drawn = prng.between(1, 3) as u8;
    if kinds.log_corruption && drawn == 1 && prng.percent(70) {
        2
    } else {
        drawn
    }
}

fn corrupt_mirrors_count(prng: &mut Prng, mirrors_count: u8) -> u8 {
    if mirrors_count == 1 {
        1
    } else {
        prng.between(1, mirrors_count as u64 - 1) as u8
    }
}

fn draw_config(prng: &mut Prng, policy: Policy, mutation: Mutation, mirrors_count: u8, kinds: &FaultKinds) -> Config {
    let cache_blocks = prng.between(32, 160);
    let backing_blocks = prng.between(256, 1024);
    let log_buffers_count = if kinds.buffer_pool_exhaustion { 2 } else { prng.between(2, 6) as u32 };
    let min_segments = 2 * log_buffers_count as u64 + 2;
    let segments = if kinds.log_fills_up { prng.between(min_segments, min_segments + 4) } else { prng.between(48, 128) };
    Config {
        policy,
        block_size: BLOCK_BYTES,
        // Data blocks plus room for the superblock, the owner record's two
        // copies and both metadata slots.
        cache_device_bytes: (cache_blocks + 6) * BLOCK_BYTES as u64,
        log_device_bytes: LOG_SEGMENTS_OFFSET_BYTES + segments * SEGMENT_BYTES as u64,
        mirrors_count,
        backing_device_bytes: backing_blocks * BLOCK_BYTES as u64,
        segment_bytes: SEGMENT_BYTES,
        log_buffers_count,
        dirty_threshold_percent: prng.between(10, 80) as u8,
        writeback_parallelism: prng.between(1, 16) as u32,
        idle_after_ns: prng.between(1_000_000, 50_000_000),
        superblock_interval_ns: prng.between(10_000_000, 1_000_000_000),
        backing_has_flush: !kinds.backing_without_flush,
        instance_id: prng.next_u64() | 1,
        mutation,
        owner_record: Vec::new(),
        ..Config::default()
    }
}

/// Half the seeds cut sequential streams off at 64–256 KiB (16–64 blocks),
/// with a workload whose requests often continue a stream; the others keep
/// the cutoff off (`never`, the default).
fn draw_seq_cutoff(prng: &mut Prng, config: &mut Config, workload: &mut WorkloadSpec, kinds: &mut FaultKinds) {
    kinds.seq_cutoff = prng.percent(50);
    if !kinds.seq_cutoff {
        config.seq_cutoff_policy = CutoffPolicy::Never;
        return;
    }
    config.seq_cutoff_policy = *prng.pick(&[CutoffPolicy::Always, CutoffPolicy::Full]);
    config.seq_cutoff_threshold_bytes = prng.between(SEQ_CUTOFF_THRESHOLD_MIN, 4 * SEQ_CUTOFF_THRESHOLD_MIN);
    workload.sequential_percent = prng.between(20, 80) as u32;
}

/// One to three `set_options` calls at random points: the cutoff's policy
/// and threshold, the dirty threshold, the write-back depth (up to the
/// created one) and the idle time change under load.
fn draw_options_changes(prng: &mut Prng, ops: u64, config: &Config, faults: &mut Vec<PlannedFault>) {
    for _ in 0..prng.between(1, 3) {
        let options = Options {
            dirty_threshold_percent: prng.between(5, 90) as u8,
            writeback_parallelism: prng.between(1, config.writeback_parallelism as u64) as u32,
            idle_after_ns: prng.between(1_000_000, 50_000_000),
            seq_cutoff_policy: *prng.pick(&CutoffPolicy::ALL),
            seq_cutoff_threshold_bytes: prng.between(SEQ_CUTOFF_THRESHOLD_MIN, 4 * SEQ_CUTOFF_THRESHOLD_MIN),
        };
        let at_op = prng.between(1, ops.max(2) - 1);
        faults.push(PlannedFault { at_op, delay_ns: prng.between(0, 3_000_000), fault: Fault::SetOptions(options) });
    }
    // Stable: the other faults keep their order.
    faults.sort_by_key(|f| f.at_op);
}

/// A fifth of the seeds with two or more mirrors get the sequence that
/// exposes a returned mirror counted in sync although it missed writes:
/// mirror a dies, comes back at a power loss (stale), later mirror b dies,
/// later the cache dies, so the replay has only a's copy, and only if the
/// engine called a healthy since its return (`cache_loss_survivable`).
/// Some seeds leave time to re-sync, some do not.
fn draw_mirror_returns(prng: &mut Prng, ops: u64, plan: &mut FaultPlan) {
    let mirrors_count = plan.config.mirrors_count;
    plan.kinds.mirror_returns = mirrors_count >= 2 && prng.percent(20);
    if !plan.kinds.mirror_returns {
        return;
    }
    let faults = &mut plan.faults;
    let a = prng.below(mirrors_count as u64) as u8;
    let b = (a + prng.between(1, mirrors_count as u64 - 1) as u8) % mirrors_count;
    let ops = ops.max(8);
    let died = prng.between(1, ops / 4);
    let returned = prng.between(died + 1, ops / 2);
    // Half the seeds lose b and the cache as soon as the restart is done (a
    // fault due while the simulator recovers fires right after it): a warm
    // restart copies the newest parts to every mirror it counts healthy and
    // logs every dirty block again, after which the head soon passes the
    // returned mirror's holes, so a stale window is short.
    let soon = prng.percent(50);
    let other_died = if soon { returned } else { prng.between(returned + 1, 3 * ops / 4) };
    let cache_died = if soon { returned + prng.between(0, 2) } else { prng.between(other_died + 1, ops - 1) };
    let sequence = [(died, Fault::MirrorDeath(a)), (returned, Fault::MirrorReturns(a)), (other_died, Fault::MirrorDeath(b)), (cache_died, Fault::CacheDeath)];
    let mut delay_before = 0;
    for (at_op, fault) in sequence {
        // Faults due at one request keep their order.
        let delay_ns = prng.between(0, 3_000_000) + delay_before;
        delay_before = delay_ns;
        faults.push(PlannedFault { at_op, delay_ns, fault });
    }
    // Stable: the other faults keep their order.
    faults.sort_by_key(|f| f.at_op);
}

/// A fifth of the seeds with two or more mirrors replace one online, as an
/// operator swaps a failing log disk: mirror a is removed, a fresh device
/// is attached in its slot and re-syncs (it counts once every live entry
/// lies in segments written to it), later mirror b is removed, later the
/// cache dies, so the replay has only the new mirror's copy, and only if
/// the engine called it healthy by then (`cache_loss_survivable`). Some
/// seeds leave time to re-sync, some do not.
fn draw_mirror_replaced(prng: &mut Prng, ops: u64, plan: &mut FaultPlan) {
    let mirrors_count = plan.config.mirrors_count;
    plan.kinds.mirror_replaced = mirrors_count >= 2 && prng.percent(20);
    if !plan.kinds.mirror_replaced {
        return;
    }
    let a = prng.below(mirrors_count as u64) as u8;
    let b = (a + prng.between(1, mirrors_count as u64 - 1) as u8) % mirrors_count;
    let ops = ops.max(8);
    let removed = prng.between(1, ops / 4);
    let attached = removed + prng.between(0, 2);
    let other_removed = if prng.percent(25) { attached + prng.between(0, 2) } else { prng.between(attached + 1, 3 * ops / 4) };
    let cache_died = prng.between(other_removed + 1, ops - 1);
    let sequence = [
        (removed, Fault::MirrorDeath(a)),
        (attached, Fault::MirrorAttached(a)),
        (other_removed, Fault::MirrorDeath(b)),
        (cache_died, Fault::CacheDeath),
    ];
    let mut delay_before = 0;
    for (at_op, fault) in sequence {
        let delay_ns = prng.between(0, 3_000_000) + delay_before;
        delay_before = delay_ns;
        plan.faults.push(PlannedFault { at_op, delay_ns, fault });
    }
    plan.faults.sort_by_key(|f| f.at_op);
}

/// The first seed whose plan may have a mirror stop answering: the seeds
/// before it keep the plans they were swept with, and the regression seeds
/// among them (tests/torture.rs) the faults that once broke the engine.
pub const MIRROR_HANGS_FROM_SEED: u64 = 1_000_000;

/// A fifth of the seeds with two or more mirrors have mirror a stop
/// answering once for a while, some for less than the engine's mirror
/// timeout (drawn here, 2-20 ms), most for up to four times it; later the
/// cache dies, so the replay must find every flushed write on the mirrors
/// that answered, or on a if the engine never stopped counting it.
fn draw_mirror_hangs(prng: &mut Prng, ops: u64, plan: &mut FaultPlan) {
    plan.kinds.mirror_hangs = plan.config.mirrors_count >= 2 && prng.percent(20);
    if !plan.kinds.mirror_hangs {
        return;
    }
    let timeout = prng.between(2_000_000, 20_000_000);
    plan.config.mirror_timeout_ns = timeout;
    let a = prng.below(plan.config.mirrors_count as u64) as u8;
    let hang_ns = if prng.percent(25) { prng.between(timeout / 4, timeout / 2) } else { prng.between(timeout, 4 * timeout) };
    let ops = ops.max(8);
    let hung = prng.between(1, 3 * ops / 4);
    let cache_died = prng.between(hung + 1, ops - 1);
    let delay_ns = prng.between(0, 3_000_000);
    plan.faults.push(PlannedFault { at_op: hung, delay_ns, fault: Fault::MirrorHangs(a, hang_ns) });
    plan.faults.push(PlannedFault { at_op: cache_died, delay_ns: prng.between(0, 3_000_000), fault: Fault::CacheDeath });
    plan.faults.sort_by_key(|f| f.at_op);
}

/// The gap the engine may leave after a barrier part: none, one block, a
/// few, or more than the simulator's 16-block segments hold (the part then
/// ends its segment). The mirrors' latencies (0.2-5 ms, drawn per write)
/// often pass for a rotating log's, so gaps come and go in most seeds.
fn draw_barrier_gap(prng: &mut Prng, config: &mut Config) {
    config.barrier_gap_bytes = *prng.pick(&[0, 1, 2, 5, 32]) * config.block_size;
}

fn spikes(prng: &mut Prng, on: bool) -> (u32, Nanos) {
    if on && prng.percent(60) {
        (prng.between(1_000, 50_000) as u32, prng.between(5_000_000, 100_000_000))
    } else {
        (0, 0)
    }
}

fn cache_spec(prng: &mut Prng, config: &Config, kinds: &FaultKinds) -> DeviceSpec {
    let (spike_ppm, spike_ns) = spikes(prng, kinds.latency_spikes);
    DeviceSpec {
        size_bytes: config.cache_device_bytes,
        parallelism: prng.between(1, 16) as u32,
        latency_ns_min: 10_000,
        latency_ns_max: prng.between(20_000, 200_000),
        spike_ppm,
        spike_ns,
        volatile_cache: prng.percent(70),
        torn_sectors_below_bytes: cache_data_offset_bytes(config),
        atomic_unit_bytes: config.block_size as u64,
        error_ppm: 0,
        silent: SilentFaults::default(),
    }
}

/// Where the cache data area starts: superblock and metadata below it are
/// written to survive torn sectors. Same arithmetic as `Config::validate`
/// (superblock unit, two metadata slots, aligned to the block size), with the
/// page count taken for every block the device could hold — exact for the
/// simulator's caches, which fit one metadata page.
fn cache_data_offset_bytes(config: &Config) -> u64 {
    let unit = UNIT_BYTES as u64;
    let pages = (config.cache_device_bytes / config.block_size as u64).div_ceil(META_ENTRIES_PER_PAGE as u64);
    (unit + 2 * pages * unit).next_multiple_of(config.block_size as u64)
}

fn mirror_spec(prng: &mut Prng, config: &Config, kinds: &FaultKinds, corrupt: bool) -> DeviceSpec {
    let (spike_ppm, spike_ns) = spikes(prng, kinds.latency_spikes);
    // A slow log starves the segment buffer pool.
    let slow = if kinds.buffer_pool_exhaustion { 10 } else { 1 };
    let silent = if corrupt {
        SilentFaults {
            lost_ppm: prng.between(0, 20_000) as u32,
            misdirected_ppm: prng.between(0, 10_000) as u32,
            torn_ppm: prng.between(0, 20_000) as u32,
            bit_flip_ppm: prng.between(0, 20_000) as u32,
        }
    } else {
        SilentFaults::default()
    };
    DeviceSpec {
        size_bytes: config.log_device_bytes,
        parallelism: prng.between(1, 2) as u32,
        latency_ns_min: 200_000 * slow,
        latency_ns_max: prng.between(500_000, 5_000_000) * slow,
        spike_ppm,
        spike_ns,
        volatile_cache: prng.percent(70),
        torn_sectors_below_bytes: u64::MAX,
        atomic_unit_bytes: 512,
        error_ppm: 0,
        silent,
    }
}

fn backing_spec(prng: &mut Prng, config: &Config, kinds: &FaultKinds) -> DeviceSpec {
    let (spike_ppm, spike_ns) = spikes(prng, kinds.latency_spikes);
    // A slow backing device keeps blocks dirty, so the log fills up.
    let slow = if kinds.log_fills_up { 10 } else { 1 };
    DeviceSpec {
        size_bytes: config.backing_device_bytes,
        parallelism: prng.between(1, 16) as u32,
        latency_ns_min: 100_000 * slow,
        latency_ns_max: prng.between(200_000, 3_000_000) * slow,
        spike_ppm,
        spike_ns,
        // Without FLUSH support a completed write counts as durable.
        volatile_cache: config.backing_has_flush && prng.percent(70),
        torn_sectors_below_bytes: 0,
        atomic_unit_bytes: config.block_size as u64,
        error_ppm: if kinds.backing_errors { prng.between(1_000, 30_000) as u32 } else { 0 },
        silent: SilentFaults::default(),
    }
}

fn draw_faults(prng: &mut Prng, ops: u64, policy: Policy, mirrors_count: u8, kinds: &mut FaultKinds) -> Vec<PlannedFault> {
    let mut faults = Vec::new();
    let at = |prng: &mut Prng, fault| PlannedFault { at_op: prng.between(1, ops.max(2) - 1), delay_ns: prng.between(0, 3_000_000), fault };
    if kinds.power_loss {
        for _ in 0..prng.between(1, 3) {
            faults.push(at(prng, Fault::PowerLoss));
        }
    }
    if kinds.cache_death {
        faults.push(at(prng, Fault::CacheDeath));
    }
    if kinds.all_mirrors_death {
        for mirror in 0..mirrors_count {
            faults.push(at(prng, Fault::MirrorDeath(mirror)));
        }
    } else if kinds.mirror_death {
        let mirror = prng.below(mirrors_count as u64) as u8;
        faults.push(at(prng, Fault::MirrorDeath(mirror)));
    }
    if kinds.policy_switches {
        for _ in 0..prng.between(1, 3) {
            let target = *prng.pick(&switch_targets(policy));
            faults.push(at(prng, Fault::SwitchPolicy(target)));
        }
    }
    faults.sort_by_key(|f| f.at_op);
    faults
}

/// Switching among policies with the same promise keeps the run's contract
/// meaningful; the base policy comes back last so its own paths are tested.
fn switch_targets(policy: Policy) -> Vec<Policy> {
    Policy::ALL.into_iter().filter(|p| p.survives_cache_loss() == policy.survives_cache_loss()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_reproducible_and_valid() {
        for seed in 0..200 {
            let a = FaultPlan::draw(seed, 1000, Policy::Hhc, Mutation::None);
            let b = FaultPlan::draw(seed, 1000, Policy::Hhc, Mutation::None);
            assert_eq!(a.faults, b.faults);
            assert_eq!(a.config, b.config);
            assert!(a.faults.windows(2).all(|w| w[0].at_op <= w[1].at_op));
            assert_eq!(a.mirrors.len(), a.config.mirrors_count as usize);
        }
    }

    #[test]
    fn every_fault_kind_appears_within_a_few_seeds() {
        let plans: Vec<FaultPlan> = (0..64).map(|s| FaultPlan::draw(s, 1000, Policy::Hhc, Mutation::None)).collect();
        let any = |f: fn(&FaultKinds) -> bool| plans.iter().any(|p| f(&p.kinds));
        assert!(any(|k| k.power_loss) && any(|k| k.cache_death) && any(|k| k.mirror_death) && any(|k| k.all_mirrors_death));
        assert!(any(|k| k.log_corruption) && any(|k| k.backing_errors) && any(|k| k.latency_spikes));
        assert!(any(|k| k.backing_without_flush) && any(|k| k.buffer_pool_exhaustion) && any(|k| k.log_fills_up));
        assert!(any(|k| k.policy_switches) && any(|k| k.seq_cutoff) && any(|k| k.mirror_returns) && any(|k| k.mirror_replaced));
    }

    #[test]
    fn mirror_returns_come_in_order_and_leave_other_seeds_alone() {
        let mut seen = 0;
        for seed in 0..400 {
            let plan = FaultPlan::draw(seed, 1000, Policy::Hhc, Mutation::None);
            let returns: Vec<&PlannedFault> = plan.faults.iter().filter(|f| matches!(f.fault, Fault::MirrorReturns(_))).collect();
            assert_eq!(plan.kinds.mirror_returns, !returns.is_empty());
            if !plan.kinds.mirror_returns {
                continue;
            }
            seen += 1;
            assert!(plan.config.mirrors_count >= 2);
            let Fault::MirrorReturns(a) = returns[0].fault else { unreachable!() };
            let at = |wanted: Fault| plan.faults.iter().filter(|f| f.fault == wanted).map(|f| f.at_op).collect::<Vec<_>>();
            assert!(at(Fault::MirrorDeath(a)).iter().any(|&t| t < returns[0].at_op));
            let later_death = (0..plan.config.mirrors_count).filter(|&b| b != a).flat_map(|b| at(Fault::MirrorDeath(b))).any(|t| t >= returns[0].at_op);
            assert!(later_death, "seed {seed}: no other mirror dies after the return");
            assert!(at(Fault::CacheDeath).iter().any(|&t| t >= returns[0].at_op));
        }
        assert!(seen > 20, "only {seen} seeds with a returning mirror");
    }
}
