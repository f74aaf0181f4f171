//! The reference model: which value each block may hold, given what was
//! submitted, acknowledged and flushed. It decides docs/design.md §2 invariants
//! 1–3 for every block read while running and after every recovery;
//! invariants 4 and 5 surface through the same checks (a revoke made durable
//! too early resurrects an older value after a replay; dirty data dropped
//! after an error is a lost flushed write).
//!
//! Time is a logical clock (`tick`) bumped at every submission and
//! completion, so "acknowledged before the flush was submitted" is exact.

use super::pattern::{Found, WriteId};
use crate::io::RequestId;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub type Tick = u64;

/// A broken promise, with everything needed to understand it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The docs/design.md §2 invariant, e.g. "2 (durability)".
    pub invariant: &'static str,
    pub lba: Option<u64>,
    pub expected: String,
    pub found: String,
    /// When and where it was seen (running read, recovery after power loss, ...).
    pub context: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invariant {} violated", self.invariant)?;
        if let Some(lba) = self.lba {
            write!(f, " at block {lba}")?;
        }
        write!(f, " ({}): expected {}, found {}", self.context, self.expected, self.found)
    }
}

#[derive(Clone, Copy, Debug)]
struct WriteEntry {
    write: WriteId,
    submit_tick: Tick,
    /// Acknowledgement, failure, or the crash that cut it short.
    end_tick: Option<Tick>,
    acked: bool,
    /// A value verified after recovery: it stands for everything before it.
    base: bool,
}

impl WriteEntry {
    fn ended_before(&self, tick: Tick) -> bool {
        self.end_tick.is_some_and(|end| end < tick)
    }
}

pub struct Oracle {
    tick: Tick,
    /// Per block, the writes that may still be its value (oldest first).
    blocks: Vec<Vec<WriteEntry>>,
    /// Highest submission tick of a completed flush: a write acknowledged
    /// before it is covered by a completed flush.
    flush_horizon: Tick,
    open_flushes: BTreeMap<RequestId, Tick>,
    /// Submission ticks of reads in flight (with multiplicity): a write they
    /// may still return must not be pruned.
    open_reads: BTreeMap<Tick, u32>,
    open_writes: BTreeMap<WriteId, (u64, u32)>,
    touched_since_prune: BTreeSet<u64>,
    next_write: WriteId,
}

impl Oracle {
    pub fn new(blocks_count: u64) -> Oracle {
        let base = WriteEntry { write: 0, submit_tick: 0, end_tick: Some(0), acked: true, base: true };
        Oracle {
            tick: 1,
            blocks: vec![vec![base]; blocks_count as usize],
            flush_horizon: 0,
            open_flushes: BTreeMap::new(),
            open_reads: BTreeMap::new(),
            open_writes: BTreeMap::new(),
            touched_since_prune: BTreeSet::new(),
            next_write: 1,
        }
    }

    pub fn blocks_count(&self) -> u64 {
        self.blocks.len() as u64
    }

    fn bump(&mut self) -> Tick {
        self.tick += 1;
        self.tick
    }

    /// Registers a write of `blocks_count` blocks at `lba`; returns its id.
    pub fn submit_write(&mut self, lba: u64, blocks_count: u32) -> WriteId {
        let write = self.next_write;
        self.next_write += 1;
        let submit_tick = self.bump();
        for block in lba..lba + blocks_count as u64 {
            self.blocks[block as usize].push(WriteEntry { write, submit_tick, end_tick: None, acked: false, base: false });
        }
        self.open_writes.insert(write, (lba, blocks_count));
        write
    }

    pub fn complete_write(&mut self, write: WriteId, acked: bool) {
        let (lba, blocks_count) = self.open_writes.remove(&write).expect("write completed twice or never submitted");
        let tick = self.bump();
        for block in lba..lba + blocks_count as u64 {
            let entry = self.blocks[block as usize].iter_mut().rev().find(|e| e.write == write);
            let entry = entry.expect("history of an open write was pruned");
            entry.end_tick = Some(tick);
            entry.acked = acked;
            self.touched_since_prune.insert(block);
        }
    }

    /// A read's submission tick, to be passed to `check_read` and `end_read`.
    pub fn submit_read(&mut self) -> Tick {
        let tick = self.bump();
        *self.open_reads.entry(tick).or_default() += 1;
        tick
    }

    /// The read submitted at `read_submit_tick` completed (checked or failed).
    pub fn end_read(&mut self, read_submit_tick: Tick) {
        let count = self.open_reads.get_mut(&read_submit_tick).expect("read ended twice or never submitted");
        *count -= 1;
        if *count == 0 {
            self.open_reads.remove(&read_submit_tick);
        }
    }

    pub fn submit_flush(&mut self, id: RequestId) {
        let tick = self.bump();
        self.open_flushes.insert(id, tick);
    }

    pub fn complete_flush(&mut self, id: RequestId, ok: bool) {
        let submit_tick = self.open_flushes.remove(&id).expect("flush completed twice or never submitted");
        self.bump();
        if ok && submit_tick > self.flush_horizon {
            self.flush_horizon = submit_tick;
            self.prune();
        }
    }

    /// Everything in flight ends now without an acknowledgement.
    pub fn crash(&mut self) {
        let tick = self.bump();
        for (_, (lba, blocks_count)) in std::mem::take(&mut self.open_writes) {
            for block in lba..lba + blocks_count as u64 {
                for entry in self.blocks[block as usize].iter_mut().filter(|e| e.end_tick.is_none()) {
                    entry.end_tick = Some(tick);
                }
            }
        }
        self.open_flushes.clear();
        self.open_reads.clear();
    }

    /// Invariant 1: a read submitted at `read_submit_tick` and completing now.
    pub fn check_read(&mut self, lba: u64, found: Found, read_submit_tick: Tick) -> Result<(), Violation> {
        let now = self.bump();
        let history = &self.blocks[lba as usize];
        let allowed: Vec<&WriteEntry> = history
            .iter()
            .filter(|e| e.submit_tick < now)
            .filter(|e| !history.iter().any(|later| later.acked && later.ended_before(read_submit_tick) && e.ended_before(later.submit_tick)))
            .collect();
        check_found(lba, found, &allowed, "1 (running reads)", "1 (running reads)", "read while running")
    }

    /// Invariants 2 and 3 for a block recovered after a failure.
    pub fn check_recovered(&self, lba: u64, found: Found, context: &str) -> Result<(), Violation> {
        let allowed = self.recoverable(lba);
        check_found(lba, found, &allowed, "2 (durability)", "3 (crash states)", context)
    }

    /// Writes that may be a block's value after a crash: all but those
    /// overtaken by a later write covered by a completed flush.
    fn recoverable(&self, lba: u64) -> Vec<&WriteEntry> {
        let history = &self.blocks[lba as usize];
        history.iter().filter(|e| !history.iter().any(|later| self.is_durable(later) && e.ended_before(later.submit_tick))).collect()
    }

    fn is_durable(&self, entry: &WriteEntry) -> bool {
        entry.base || (entry.acked && entry.ended_before(self.flush_horizon))
    }

    /// After a verified recovery the found value is the block's new,
    /// durable starting point.
    pub fn rebase(&mut self, lba: u64, write: WriteId) {
        let tick = self.bump();
        self.blocks[lba as usize] = vec![WriteEntry { write, submit_tick: tick, end_tick: Some(tick), acked: true, base: true }];
    }

    /// Drops writes that can never be read again: overtaken by a durable
    /// write that ended before every read still in flight was submitted.
    /// Bounded histories keep the checks cheap.
    fn prune(&mut self) {
        let oldest_read = self.open_reads.keys().next().copied().unwrap_or(Tick::MAX);
        for lba in std::mem::take(&mut self.touched_since_prune) {
            let history = &self.blocks[lba as usize];
            let keep: Vec<WriteEntry> = history
                .iter()
                .filter(|e| {
                    !history.iter().any(|later| self.is_durable(later) && later.ended_before(oldest_read) && e.ended_before(later.submit_tick))
                })
                .copied()
                .collect();
            if keep.len() < history.len() {
                self.blocks[lba as usize] = keep;
            } else {
                // Nothing could go yet; look again at the next flush.
                self.touched_since_prune.insert(lba);
            }
        }
    }

    pub fn open_writes_count(&self) -> usize {
        self.open_writes.len()
    }
}

fn check_found(
    lba: u64,
    found: Found,
    allowed: &[&WriteEntry],
    invariant_for_old: &'static str,
    invariant_for_garbage: &'static str,
    context: &str,
) -> Result<(), Violation> {
    let invariant = match found {
        Found::Value(write) if allowed.iter().any(|e| e.write == write) => return Ok(()),
        Found::Value(_) => invariant_for_old,
        Found::Foreign { .. } | Found::Torn | Found::Garbage => invariant_for_garbage,
    };
    Err(Violation { invariant, lba: Some(lba), expected: describe_allowed(allowed), found: found.to_string(), context: context.to_string() })
}

fn describe_allowed(allowed: &[&WriteEntry]) -> String {
    let names: Vec<String> = allowed
        .iter()
        .map(|e| match (e.write, e.acked) {
            (0, _) => "initial zeroes".to_string(),
            (w, true) => format!("write #{w}"),
            (w, false) => format!("write #{w} (unacknowledged)"),
        })
        .collect();
    match names.len() {
        0 => "nothing (model bug)".into(),
        1 => names[0].clone(),
        _ => format!("one of {}", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_must_return_last_acknowledged_write_or_a_concurrent_one() {
        let mut o = Oracle::new(4);
        let w1 = o.submit_write(1, 1);
        o.complete_write(w1, true);
        let r = o.submit_read();
        assert!(o.check_read(1, Found::Value(w1), r).is_ok());
        assert!(o.check_read(1, Found::Value(0), r).is_err(), "older value after an ack");
        let w2 = o.submit_write(1, 1);
        let r = o.submit_read();
        assert!(o.check_read(1, Found::Value(w2), r).is_ok(), "concurrent write may show");
        assert!(o.check_read(1, Found::Value(w1), r).is_ok());
        assert!(o.check_read(1, Found::Torn, r).is_err());
        assert!(o.check_read(1, Found::Foreign { lba: 2, write: w1 }, r).is_err());
    }

    #[test]
    fn a_read_in_flight_across_a_flush_may_return_what_was_current_when_it_started() {
        let mut o = Oracle::new(1);
        let w1 = o.submit_write(0, 1);
        o.complete_write(w1, true);
        let r = o.submit_read();
        let w2 = o.submit_write(0, 1);
        o.complete_write(w2, true);
        o.submit_flush(1);
        o.complete_flush(1, true);
        assert!(o.check_read(0, Found::Value(w1), r).is_ok());
        o.end_read(r);
        let r2 = o.submit_read();
        assert!(o.check_read(0, Found::Value(w1), r2).is_err());
    }

    #[test]
    fn recovery_must_keep_flushed_writes_and_may_keep_later_ones() {
        let mut o = Oracle::new(2);
        let w1 = o.submit_write(0, 2);
        o.complete_write(w1, true);
        o.submit_flush(100);
        let w2 = o.submit_write(0, 1); // submitted after the flush started
        o.complete_flush(100, true);
        o.complete_write(w2, true);
        o.crash();
        assert!(o.check_recovered(0, Found::Value(w1), "t").is_ok());
        assert!(o.check_recovered(0, Found::Value(w2), "t").is_ok());
        let lost = o.check_recovered(1, Found::Value(0), "t").unwrap_err();
        assert_eq!(lost.invariant, "2 (durability)");
    }

    #[test]
    fn unflushed_writes_may_vanish_but_failed_writes_do_not_cover_anything() {
        let mut o = Oracle::new(1);
        let w1 = o.submit_write(0, 1);
        o.complete_write(w1, true);
        let w2 = o.submit_write(0, 1);
        o.complete_write(w2, false);
        o.submit_flush(1);
        o.complete_flush(1, true);
        o.crash();
        assert!(o.check_recovered(0, Found::Value(w1), "t").is_ok());
        assert!(o.check_recovered(0, Found::Value(w2), "t").is_ok(), "a failed write may have landed");
        assert!(o.check_recovered(0, Found::Value(0), "t").is_err());
    }

    #[test]
    fn rebase_makes_the_recovered_value_the_only_past() {
        let mut o = Oracle::new(1);
        let w1 = o.submit_write(0, 1);
        o.crash();
        o.rebase(0, 0);
        assert!(o.check_recovered(0, Found::Value(w1), "t").is_err());
        assert!(o.check_recovered(0, Found::Value(0), "t").is_ok());
    }
}
