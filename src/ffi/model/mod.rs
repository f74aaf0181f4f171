//! The test-only device-model bdev (module `hhc_model`, spdk-glue/hhc_model.c):
//! a passthrough vbdev that holds each I/O until one of the timed
//! simulator's device models (`crate::models`) says the command is done.
//! This file is the part without SPDK calls (building a model from the RPC's
//! kind and parameter overrides, the shared model state and its stats), so
//! it builds and tests everywhere; `entry` has the `hhc_rs_model_*` entry
//! points C calls, built only into libspdk_bdev_hhc_model.so (feature
//! `spdk-model`), never into the HHC module. docs/spdk.md, "Device models
//! (test only)".

#[cfg(hhc_spdk_model)]
mod entry;

use super::json::JsonObject;
use crate::io::{IoKind, Nanos};
use crate::models::params::{set_entry, Entry};
use crate::models::{BackingParams, DeviceModel, Hdd, HddParams, Raid5Iscsi, Ssd, SsdParams};
use std::sync::Mutex;

/// The device kinds of `bdev_hhc_model_create`, with the profile-file
/// section whose keys (and defaults) each takes.
const KINDS: [(&str, &str); 3] = [("hdd", "log_hdd"), ("ssd", "ssd"), ("raid5", "backing")];

/// The model of `kind` with `overrides` (profile keys without or with their
/// section prefix: `rpm` or `log_hdd.rpm`) over the profile's defaults, and
/// its stripe's data bytes (a RAID5's; 0 for the others).
pub fn build(kind: &str, overrides: &[(String, f64)]) -> Result<(Box<dyn DeviceModel + Send>, u64), String> {
    let section = KINDS
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, section)| *section)
        .ok_or_else(|| format!("unknown model '{kind}': expected hdd, ssd or raid5"))?;
    let apply = |entries: &mut [Entry<'_>]| -> Result<(), String> {
        for (key, value) in overrides {
            let bare = key.strip_prefix(section).and_then(|k| k.strip_prefix('.')).unwrap_or(key);
            set_entry(entries, bare, *value).map_err(|e| format!("model {kind}: {e}"))?;
        }
        Ok(())
    };
    let invalid = |e: String| format!("model {kind}: {e}");
    Ok(match kind {
        "hdd" => {
            let mut params = HddParams::default();
            apply(&mut params.entries())?;
            params.validate("").map_err(invalid)?;
            (Box::new(Hdd::new(&params)), 0)
        }
        "ssd" => {
            let mut params = SsdParams::default();
            apply(&mut params.entries())?;
            params.validate("").map_err(invalid)?;
            (Box::new(Ssd::new(&params)), 0)
        }
        _ => {
            let mut params = BackingParams::default();
            apply(&mut params.entries())?;
            params.validate("").map_err(invalid)?;
            let raid = Raid5Iscsi::new(&params);
            let stripe_bytes = raid.stripe_data_bytes();
            (Box::new(raid), stripe_bytes)
        }
    })
}

#[derive(Default)]
struct Stats {
    reads: u64,
    /// Model commands: a plug's writes are one (`gathered`).
    writes: u64,
    flushes: u64,
    /// Writes that went to the model inside another's command.
    writes_gathered: u64,
    /// Time the model had at least one command in service.
    busy_ns: Nanos,
    /// Sum over commands of (model completion - submission), per kind
    /// (read, write, flush).
    model_latency_ns: [u128; 3],
    completed: u64,
    /// Sum of (upward completion - submission), of completed commands.
    latency_ns: u128,
    /// Sum and maximum of (upward completion - base completion): how long
    /// the vbdev held a command after the base device was done with it.
    delay_added_ns: u128,
    delay_added_max_ns: Nanos,
    queue_depth: u64,
    queue_depth_max: u64,
}

struct State {
    model: Box<dyn DeviceModel + Send>,
    /// The latest completion the model has given.
    busy_until: Nanos,
    /// The latest submission time seen: the model needs them in order.
    last_now: Nanos,
    stats: Stats,
}

/// One device head shared by every channel of one model bdev. A Mutex is
/// enough for a test device: one short critical section per command on
/// submission and one on completion; contention only costs CPU, not model
/// time, as the clock is read inside the lock.
pub struct ModelDevice {
    kind: String,
    stripe_bytes: u64,
    state: Mutex<State>,
}

impl ModelDevice {
    pub fn new(kind: &str, overrides: &[(String, f64)]) -> Result<ModelDevice, String> {
        let (model, stripe_bytes) = build(kind, overrides)?;
        Ok(ModelDevice {
            kind: kind.to_string(),
            stripe_bytes,
            state: Mutex::new(State { model, busy_until: 0, last_now: 0, stats: Stats::default() }),
        })
    }

    /// A RAID5's data bytes per stripe, 0 for the other kinds: the SPDK
    /// module gathers writes for a RAID5 and hands a plug to the model as
    /// soon as it fills a stripe.
    pub fn stripe_bytes(&self) -> u64 {
        self.stripe_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Submits a command at `clock()` (read under the lock, so the model
    /// sees times in order); returns (submission time, model completion).
    pub fn submit(&self, clock: impl FnOnce() -> Nanos, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> (Nanos, Nanos) {
        let mut state = self.lock();
        let now = clock().max(state.last_now);
        state.last_now = now;
        let done = state.model.submit(now, kind, offset_bytes, len_bytes).max(now);
        state.stats.busy_ns += done.saturating_sub(now.max(state.busy_until));
        state.busy_until = state.busy_until.max(done);
        let stats = &mut state.stats;
        *stats.count_mut(kind) += 1;
        stats.model_latency_ns[kind_index(kind)] += u128::from(done - now);
        stats.queue_depth += 1;
        stats.queue_depth_max = stats.queue_depth_max.max(stats.queue_depth);
        (now, done)
    }

    /// `pieces` more writes went inside the last command submitted (the
    /// SPDK module's plug); each completes, and leaves the queue, itself.
    pub fn gathered(&self, pieces: u32) {
        let mut state = self.lock();
        let stats = &mut state.stats;
        stats.writes_gathered += u64::from(pieces);
        stats.queue_depth += u64::from(pieces);
        stats.queue_depth_max = stats.queue_depth_max.max(stats.queue_depth);
    }

    /// A command submitted at `submitted` completed upward at `completed`;
    /// its base I/O was done at `base_done`.
    pub fn complete(&self, submitted: Nanos, base_done: Nanos, completed: Nanos) {
        let mut state = self.lock();
        let stats = &mut state.stats;
        stats.queue_depth = stats.queue_depth.saturating_sub(1);
        stats.completed += 1;
        stats.latency_ns += u128::from(completed.saturating_sub(submitted));
        let added = completed.saturating_sub(base_done);
        stats.delay_added_ns += u128::from(added);
        stats.delay_added_max_ns = stats.delay_added_max_ns.max(added);
    }

    /// The answer of bdev_hhc_model_get_stats.
    pub fn stats_json(&self, name: &str) -> String {
        let state = self.lock();
        let s = &state.stats;
        let commands = s.reads + s.writes + s.flushes;
        let mean_us = |total: u128, count: u64| if count == 0 { 0 } else { (total / u128::from(count) / 1_000) as u64 };
        let charged = |kind| mean_us(s.model_latency_ns[kind_index(kind)], s.count(kind));
        let json = JsonObject::new()
            .string("name", name)
            .string("model", &self.kind)
            .number("commands", commands)
            .number("reads", s.reads)
            .number("writes", s.writes)
            .number("flushes", s.flushes)
            .number("writes_gathered", s.writes_gathered)
            .number("busy_ns", s.busy_ns)
            .number("model_latency_avg_us", mean_us(s.model_latency_ns.iter().sum(), commands))
            .number("read_model_latency_avg_us", charged(IoKind::Read))
            .number("write_model_latency_avg_us", charged(IoKind::Write))
            .number("flush_model_latency_avg_us", charged(IoKind::Flush))
            .number("completed", s.completed)
            .number("latency_avg_us", mean_us(s.latency_ns, s.completed))
            .number("delay_added_avg_us", mean_us(s.delay_added_ns, s.completed))
            .number("delay_added_max_us", s.delay_added_max_ns / 1_000)
            .number("queue_depth", s.queue_depth)
            .number("queue_depth_max", s.queue_depth_max);
        match state.model.member_commands_count() {
            Some(count) => json.number("member_commands", count).finish(),
            None => json.finish(),
        }
    }
}

fn kind_index(kind: IoKind) -> usize {
    match kind {
        IoKind::Read => 0,
        IoKind::Write => 1,
        IoKind::Flush => 2,
    }
}

impl Stats {
    fn count(&self, kind: IoKind) -> u64 {
        match kind {
            IoKind::Read => self.reads,
            IoKind::Write => self.writes,
            IoKind::Flush => self.flushes,
        }
    }

    fn count_mut(&mut self, kind: IoKind) -> &mut u64 {
        match kind {
            IoKind::Read => &mut self.reads,
            IoKind::Write => &mut self.writes,
            IoKind::Flush => &mut self.flushes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keys_and_values_are_checked() {
        assert!(build("tape", &[]).err().unwrap().contains("unknown model 'tape'"));
        let bad_key = build("hdd", &[("nope".into(), 1.0)]).err().unwrap();
        assert_eq!(bad_key, "model hdd: unknown parameter 'nope'");
        assert!(build("ssd", &[("channels".into(), 0.0)]).err().unwrap().contains("channels must be greater than 0"));
        assert!(build("raid5", &[("disks".into(), 2.0)]).err().unwrap().contains("RAID5"));
        assert!(build("raid5", &[("disk.rpm".into(), -1.0)]).err().unwrap().contains(">= 0"));
        // Section prefixes of the profile file are accepted too.
        assert!(build("hdd", &[("log_hdd.rpm".into(), 5400.0)]).is_ok());
        assert!(build("raid5", &[("backing.link_mb_s".into(), 0.0), ("request_latency_us".into(), 0.0)]).is_ok());
        assert!(build("hdd", &[("backing.disk.rpm".into(), 5400.0)]).is_err());
    }

    #[test]
    fn one_head_shared_and_stats_add_up() {
        let device = ModelDevice::new("hdd", &[]).unwrap();
        let (now, first) = device.submit(|| 1_000_000, IoKind::Read, 1 << 30, 4096);
        assert_eq!(now, 1_000_000);
        // A second command, even with an older clock reading, queues behind the first.
        let (now2, second) = device.submit(|| 0, IoKind::Read, 1 << 34, 4096);
        assert_eq!(now2, now);
        assert!(second > first);
        device.complete(now, first + 10, first + 20);
        let stats = device.stats_json("m");
        assert!(stats.contains("\"commands\":2"), "{stats}");
        assert!(stats.contains("\"queue_depth\":1"), "{stats}");
        assert!(stats.contains("\"queue_depth_max\":2"), "{stats}");
        assert!(stats.contains(&format!("\"busy_ns\":{}", second - now)), "{stats}");
        // A FLUSH on the HDD (write cache off) costs the command overhead.
        let (at, done) = device.submit(|| second, IoKind::Flush, 0, 0);
        assert_eq!(done - at, 50_000);
        let stats = device.stats_json("m");
        assert!(stats.contains("\"flush_model_latency_avg_us\":50,"), "{stats}");
        assert!(stats.contains(&format!("\"read_model_latency_avg_us\":{},", (first - now + second - now) / 2_000)), "{stats}");
        assert!(!stats.contains("member_commands"), "{stats}");
    }

    #[test]
    fn raid5_stats_count_member_disk_commands_and_charge_per_kind() {
        let device = ModelDevice::new("raid5", &[("link_mb_s".into(), 0.0), ("request_latency_us".into(), 0.0)]).unwrap();
        // A 16 KiB write inside one chunk: read-modify-write, 2 reads + 2 writes.
        let (now, done) = device.submit(|| 1_000_000, IoKind::Write, 1 << 20, 16384);
        let stats = device.stats_json("r");
        assert!(stats.contains("\"member_commands\":4"), "{stats}");
        assert!(stats.contains(&format!("\"write_model_latency_avg_us\":{},", (done - now) / 1_000)), "{stats}");
        assert!(stats.contains("\"read_model_latency_avg_us\":0,"), "{stats}");
    }

    #[test]
    fn gathered_writes_are_one_model_command_and_each_completes() {
        let device = ModelDevice::new("raid5", &[("link_mb_s".into(), 0.0), ("request_latency_us".into(), 0.0)]).unwrap();
        assert_eq!(device.stripe_bytes(), 256 << 10);
        assert_eq!(ModelDevice::new("hdd", &[]).unwrap().stripe_bytes(), 0);
        // Four 64 KiB pieces of one stripe as one command: a full-stripe
        // write, data and parity, no reads.
        let (now, done) = device.submit(|| 1_000_000, IoKind::Write, 0, 256 << 10);
        device.gathered(3);
        let stats = device.stats_json("r");
        assert!(stats.contains("\"writes\":1,") && stats.contains("\"writes_gathered\":3,"), "{stats}");
        assert!(stats.contains("\"member_commands\":5"), "{stats}");
        assert!(stats.contains("\"queue_depth\":4,") && stats.contains("\"queue_depth_max\":4"), "{stats}");
        for _ in 0..4 {
            device.complete(now, done, done);
        }
        let stats = device.stats_json("r");
        assert!(stats.contains("\"queue_depth\":0,") && stats.contains("\"completed\":4,"), "{stats}");
    }
}
