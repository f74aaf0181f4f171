//! Restarts and recoveries of one seed: power loss and the warm restart
//! after it, the cache-loss recovery (log replay, then the backing device
//! checked alone), and the block-by-block verification after each.

use super::memory::{contract, perform, Memory, RecoveryMemory, TargetMemory};
use super::{Event, Origin, Outstanding, Sim, PHASE_LIMIT_NS, VERIFY_CHUNK_BLOCKS, VERIFY_READS_OUTSTANDING, VERIFY_RETRIES};
use crate::engine::{EngineState, StartMode};
use crate::io::{DeviceIo, DeviceRole, IoKind, Machine, Nanos};
use crate::sim::oracle::Violation;
use crate::sim::pattern::{decode_block, Found};
use crate::sim::workload::Op;
use crate::simcore::TargetFactory;
use crate::simcore::event_queue::EventQueue;
use std::collections::BTreeMap;

impl<F: TargetFactory> Sim<'_, F> {
    /// The host loses power: in-flight and volatile writes settle at random,
    /// the target's memory is gone, everything outstanding ends unanswered.
    pub(super) fn power_off(&mut self) {
        let mut in_flight_writes: BTreeMap<DeviceRole, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
        if let Some(target) = self.target.as_mut() {
            let mut memory = TargetMemory { target, requests: &mut self.requests, finished: &self.finished };
            for io in self.in_flight.values().filter(|io| io.kind == IoKind::Write) {
                if let Ok(bytes) = memory.bytes(io.buffer, io.len_bytes, false) {
                    in_flight_writes.entry(io.device).or_default().push((io.offset_bytes, bytes.to_vec()));
                }
            }
        }
        self.devices.cache.power_loss(in_flight_writes.remove(&DeviceRole::Cache).unwrap_or_default());
        for (i, mirror) in self.devices.mirrors.iter_mut().enumerate() {
            mirror.power_loss(in_flight_writes.remove(&DeviceRole::Log(i as u8)).unwrap_or_default());
        }
        self.devices.backing.power_loss(in_flight_writes.remove(&DeviceRole::Backing).unwrap_or_default());
        self.retire_target();
        self.in_flight.clear();
        self.requests.clear();
        self.events.retain(|e| matches!(e, Event::Fault(_) | Event::PeriodicFlush | Event::IdleEnd));
        self.wake_pending.fill(false);
        self.workload.forget_outstanding();
        self.oracle.crash();
        self.recovering = true;
    }

    pub(super) fn recover_after_power_loss(&mut self, context: &str) -> Result<(), Violation> {
        if self.devices.cache.is_dead() {
            // The power went while the host had not yet noticed the dead cache.
            self.figures.power_losses += 1;
            return self.recover_after_cache_loss();
        }
        self.figures.power_losses += 1;
        self.power_off();
        self.start_target(StartMode::Open)?;
        self.verify_through_target(context)?;
        self.figures.recoveries += 1;
        self.resume_workload();
        Ok(())
    }

    /// A power loss during which mirror `mirror`, if dead, is found again
    /// with what it held when it died.
    pub(super) fn recover_with_mirror_back(&mut self, mirror: u8) -> Result<(), Violation> {
        if self.devices.cache.is_dead() || !self.devices.mirrors[mirror as usize].is_dead() {
            return self.recover_after_power_loss("recovery after power loss");
        }
        self.figures.power_losses += 1;
        self.power_off();
        self.devices.mirrors[mirror as usize].revive();
        self.rejoined[mirror as usize] = true;
        self.rejoined_unconfirmed[mirror as usize] = true;
        self.figures.mirror_returns += 1;
        self.trace(|| format!("mirror {mirror} is back, stale"));
        self.start_target(StartMode::Open)?;
        self.verify_through_target("recovery after power loss with a stale mirror back")?;
        self.figures.recoveries += 1;
        self.resume_workload();
        Ok(())
    }

    pub(super) fn start_target(&mut self, start: StartMode) -> Result<(), Violation> {
        self.trace(|| format!("start {start:?} with policy {}", self.policy));
        self.recovering = true;
        let config = self.config();
        let target = self.factory.start(&config, start, self.now).map_err(|reason| {
            self.violation("2 (durability)", None, "the target starts", &format!("{start:?} refused: {reason}"), "start")
        })?;
        self.retire_target();
        self.target = Some(target);
        let started = |sim: &Self| *sim.target.as_ref().unwrap().state() != EngineState::Starting;
        self.run_until_within(started, PHASE_LIMIT_NS, &format!("{start:?}"))?;
        match self.target.as_ref().unwrap().state() {
            EngineState::Ready => Ok(()),
            other => Err(self.violation("2 (durability)", None, "Ready", &format!("{other:?}"), &format!("{start:?} after a failure it must survive"))),
        }
    }

    /// Reads every block through the target and checks it against what
    /// may have survived; the found values become the new baseline.
    pub(super) fn verify_through_target(&mut self, context: &str) -> Result<(), Violation> {
        self.verify_queue = (0..self.oracle.blocks_count()).step_by(VERIFY_CHUNK_BLOCKS as usize).map(|lba| (lba, 0)).collect();
        self.verify_context = context.to_string();
        self.submit_verify_reads();
        self.run_until(|sim| sim.verify_queue.is_empty() && sim.requests.is_empty())
    }

    pub(super) fn submit_verify_reads(&mut self) {
        let verifying = self.requests.values().filter(|o| o.origin == Origin::Verifier).count();
        for _ in verifying..VERIFY_READS_OUTSTANDING {
            let Some((lba, attempts)) = self.verify_queue.pop_front() else { return };
            let blocks_count = (self.oracle.blocks_count() - lba).min(VERIFY_CHUNK_BLOCKS as u64) as u32;
            self.verify_attempts.insert(lba, attempts);
            self.submit(Op::Read { lba, blocks_count }, Origin::Verifier);
        }
    }

    pub(super) fn verified_read_done(&mut self, out: Outstanding, ok: bool) -> Result<(), Violation> {
        let lba = out.request.lba;
        let attempts = self.verify_attempts.remove(&lba).unwrap_or(0);
        if ok {
            self.check_recovered_blocks(lba, &out.data)?;
        } else if attempts + 1 >= VERIFY_RETRIES {
            let found = format!("{} reads of blocks {lba}..{} failed", attempts + 1, lba + out.request.blocks_count as u64);
            return Err(self.violation("2 (durability)", Some(lba), "readable blocks", &found, &self.verify_context.clone()));
        } else {
            self.verify_queue.push_back((lba, attempts + 1));
        }
        self.submit_verify_reads();
        Ok(())
    }

    /// Checks blocks recovered from `lba` on, then makes them the baseline.
    pub(super) fn check_recovered_blocks(&mut self, lba: u64, data: &[u8]) -> Result<(), Violation> {
        let block_bytes = self.plan.config.block_size as usize;
        for (i, block) in data.chunks_exact(block_bytes).enumerate() {
            let block_lba = lba + i as u64;
            let found = decode_block(block_lba, block);
            let context = format!("{}, at {} ns", self.verify_context, self.now);
            self.oracle.check_recovered(block_lba, found, &context)?;
            if let Found::Value(write) = found {
                self.oracle.rebase(block_lba, write);
            }
            self.figures.blocks_checked += 1;
        }
        Ok(())
    }

    /// Lets background work (write-back, reclamation, superblock) run with
    /// no requests, so the final crash finds it mid-way.
    pub(super) fn idle_for_ns(&mut self, duration_ns: Nanos) -> Result<(), Violation> {
        let until = self.now + duration_ns;
        self.push_event(until, Event::IdleEnd);
        self.run_until(|sim| sim.ended || sim.now >= until)
    }

    /// The cache device is gone: replay the log onto the backing device (if
    /// the policy promises that this is enough), check the backing device
    /// alone, then start over with new hardware.
    pub(super) fn recover_after_cache_loss(&mut self) -> Result<(), Violation> {
        self.power_off();
        if !self.cache_loss_survivable() {
            self.figures.unsurvivable += 1;
            self.ended = true;
            self.events.clear();
            return Ok(());
        }
        if self.log_ever_used {
            self.replay_log()?;
        }
        // Whatever the replay wrote must be durable before the log is reused.
        self.devices.backing.power_loss(Vec::new());
        self.verify_backing_directly()?;
        self.figures.recoveries += 1;
        self.replace_dead_devices();
        // A format chooses a new identity (docs/format.md; the SPDK module's
        // `random_instance_id`): the surviving mirrors still hold the old
        // instance's segments, at the very sequences the new log starts
        // with, and only the instance id in each segment keeps a scan of
        // the new log from chaining into them. Derived, not drawn, so the
        // seed's random stream stays as it was.
        let id = &mut self.plan.config.instance_id;
        *id = id.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29) | 1;
        self.start_target(StartMode::Format)?;
        self.resume_workload();
        Ok(())
    }

    /// docs/design.md §1.3: cache plus every log device lost loses dirty data.
    /// A mirror with silent corruption does not count as a good copy, nor
    /// does one that came back stale until the engine called it healthy.
    pub(super) fn cache_loss_survivable(&self) -> bool {
        if !self.policy.survives_cache_loss() || !self.spec.policy.survives_cache_loss() {
            return false;
        }
        if !self.log_ever_used {
            return true;
        }
        let returned = &self.rejoined_unconfirmed;
        let (hung, given_up) = (&self.hung, &self.given_up);
        self.devices.mirrors.iter().enumerate().any(|(i, m)| !m.is_dead() && !m.spec().silent.any() && !returned[i] && !hung[i] && !given_up[i])
    }

    pub(super) fn replay_log(&mut self) -> Result<(), Violation> {
        let config = self.config();
        let mut machine = self.factory.cache_loss_recovery(&config).map_err(|reason| {
            self.violation("2 (durability)", None, "a log recovery", &format!("recovery refused to start: {reason}"), "cache loss")
        })?;
        let mut queue: EventQueue<DeviceIo> = EventQueue::new();
        loop {
            while let Some(io) = machine.poll_io() {
                let device = self.devices.get(io.device).ok_or_else(|| contract(format!("recovery command for absent device {}", io.device), self.now))?;
                let done_at = device.submit(self.now, &io).map_err(|e| contract(e, self.now))?;
                queue.schedule(done_at, io);
            }
            if let Some(outcome) = machine.outcome() {
                self.figures.corruptions_detected += machine.corruptions_detected();
                return outcome.map_err(|reason| self.violation("2 (durability)", None, "a log recovery", &format!("recovery failed: {reason}"), "cache loss"));
            }
            let Some((at, io)) = queue.pop() else {
                return Err(self.violation("5 (errors)", None, "a finished recovery", "recovery waits with no I/O in flight", "cache loss"));
            };
            self.now = self.now.max(at);
            let status = perform(&mut self.devices, &io, &mut RecoveryMemory(machine.as_mut())).map_err(|e| contract(e, self.now))?;
            machine.handle_io_completion(self.now, io.id, status);
        }
    }

    pub(super) fn verify_backing_directly(&mut self) -> Result<(), Violation> {
        let block_bytes = self.plan.config.block_size as usize;
        let mut block = vec![0u8; block_bytes];
        self.verify_context = "backing device alone after cache loss and log replay".into();
        for lba in 0..self.oracle.blocks_count() {
            self.devices.backing.read_current(lba * block_bytes as u64, &mut block);
            self.check_recovered_blocks(lba, &block.clone())?;
        }
        Ok(())
    }

    pub(super) fn replace_dead_devices(&mut self) {
        self.devices.cache.replace();
        for (i, mirror) in self.devices.mirrors.iter_mut().enumerate() {
            if mirror.is_dead() {
                mirror.replace();
            }
            // New hardware, or a mirror the new log is formatted on.
            self.rejoined[i] = false;
            self.rejoined_unconfirmed[i] = false;
            self.given_up[i] = false;
        }
    }
}
