//! An ext4 (data=ordered, jbd2) journal reduced to what shapes block I/O:
//! one running transaction collects writes; a commit writes the descriptor,
//! metadata and commit blocks to the journal area and then FLUSHes (the
//! checksummed commit block of `journal_async_commit` spares the second
//! flush). Only one transaction commits at a time, so fsyncs that arrive
//! during a commit are grouped into the next one. A transaction commits when
//! an fsync asks for it, 5 s after it started, or when the host's dirty limit
//! is reached — and writers stall while that limit is reached and the
//! previous commit is still running (balance_dirty_pages waiting on jbd2).
//! Sans-IO like the engine: the runner carries out `poll_io` and reports back.

use super::workloads::JOURNAL_AREA_BLOCKS;
use crate::io::Nanos;
use std::collections::VecDeque;

/// Descriptor and metadata blocks per commit are capped: ext4 logs each
/// touched inode-table/bitmap block once per transaction.
const METADATA_BLOCKS_MAX: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalIo {
    Write { lba: u64, blocks: u32 },
    Flush,
}

#[derive(Default)]
struct Transaction {
    writes_count: u64,
    blocks_count: u64,
    started_at: Option<Nanos>,
    fsync_waiters: Vec<usize>,
}

enum CommitPhase {
    WritingJournal,
    Flushing,
}

struct Commit {
    waiters: Vec<usize>,
    phase: CommitPhase,
}

pub struct Journal {
    commit_interval_ns: Nanos,
    dirty_limit_blocks: u64,
    cursor_blocks: u64,
    running: Transaction,
    committing: Option<Commit>,
    commit_requested: bool,
    throttled: Vec<usize>,
    outbox: VecDeque<JournalIo>,
    woken: VecDeque<usize>,
    commits_count: u64,
}

impl Journal {
    pub fn new(commit_interval_ns: Nanos, dirty_limit_blocks: u64) -> Journal {
        Journal {
            commit_interval_ns,
            dirty_limit_blocks,
            cursor_blocks: 0,
            running: Transaction::default(),
            committing: None,
            commit_requested: false,
            throttled: Vec::new(),
            outbox: VecDeque::new(),
            woken: VecDeque::new(),
            commits_count: 0,
        }
    }

    pub fn commits_count(&self) -> u64 {
        self.commits_count
    }

    /// Whether a thread may write now or must wait for the running commit.
    pub fn write_allowed(&self) -> bool {
        self.running.blocks_count < self.dirty_limit_blocks
    }

    pub fn throttle(&mut self, thread: usize) {
        self.throttled.push(thread);
    }

    pub fn note_write(&mut self, now: Nanos, blocks: u32) {
        self.running.writes_count += 1;
        self.running.blocks_count += blocks as u64;
        self.running.started_at.get_or_insert(now);
        if !self.write_allowed() {
            self.request_commit();
        }
    }

    /// `thread` waits (see `poll_woken`) until a commit covers its writes.
    pub fn fsync(&mut self, thread: usize) {
        self.running.fsync_waiters.push(thread);
        self.request_commit();
    }

    /// When the running transaction's commit timer fires, if it is armed.
    /// When the running transaction is due for its periodic commit; None
    /// once that commit is asked for (it starts when the one in flight ends:
    /// a deadline left standing would ask for a timer at once, for ever).
    pub fn next_deadline(&self) -> Option<Nanos> {
        if self.commit_requested {
            return None;
        }
        self.running.started_at.map(|started| started + self.commit_interval_ns)
    }

    pub fn handle_timer(&mut self, now: Nanos) {
        if self.next_deadline().is_some_and(|deadline| deadline <= now) {
            self.request_commit();
        }
    }

    pub fn poll_io(&mut self) -> Option<JournalIo> {
        self.outbox.pop_front()
    }

    /// Threads whose fsync completed or whose write may proceed.
    pub fn poll_woken(&mut self) -> Option<usize> {
        self.woken.pop_front()
    }

    /// The last `JournalIo` handed out has completed.
    pub fn handle_io_done(&mut self) {
        let commit = self.committing.as_mut().expect("journal I/O completed without a commit");
        match commit.phase {
            CommitPhase::WritingJournal => {
                commit.phase = CommitPhase::Flushing;
                self.outbox.push_back(JournalIo::Flush);
            }
            CommitPhase::Flushing => {
                let commit = self.committing.take().expect("checked above");
                self.woken.extend(commit.waiters);
                self.commits_count += 1;
                self.start_commit_if_due();
            }
        }
    }

    fn request_commit(&mut self) {
        self.commit_requested = true;
        self.start_commit_if_due();
    }

    fn start_commit_if_due(&mut self) {
        let has_work = self.running.writes_count > 0 || !self.running.fsync_waiters.is_empty();
        if self.committing.is_some() || !self.commit_requested || !has_work {
            return;
        }
        self.commit_requested = false;
        let transaction = std::mem::take(&mut self.running);
        let blocks = 2 + transaction.writes_count.min(METADATA_BLOCKS_MAX);
        if self.cursor_blocks + blocks > JOURNAL_AREA_BLOCKS {
            self.cursor_blocks = 0;
        }
        self.outbox.push_back(JournalIo::Write { lba: self.cursor_blocks, blocks: blocks as u32 });
        self.cursor_blocks += blocks;
        self.committing = Some(Commit { waiters: transaction.fsync_waiters, phase: CommitPhase::WritingJournal });
        // The new running transaction is empty: stalled writers may go on.
        self.woken.extend(self.throttled.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_woken(journal: &mut Journal) -> Vec<usize> {
        std::iter::from_fn(|| journal.poll_woken()).collect()
    }

    #[test]
    fn fsyncs_during_a_commit_are_grouped_into_the_next() {
        let mut journal = Journal::new(5_000_000_000, u64::MAX);
        journal.note_write(0, 4);
        journal.fsync(0);
        assert_eq!(journal.poll_io(), Some(JournalIo::Write { lba: 0, blocks: 3 }));
        for thread in 1..4 {
            journal.note_write(1, 4);
            journal.fsync(thread);
        }
        assert_eq!(journal.poll_io(), None, "one commit at a time");
        journal.handle_io_done();
        assert_eq!(journal.poll_io(), Some(JournalIo::Flush));
        journal.handle_io_done();
        assert_eq!(drain_woken(&mut journal), vec![0]);
        // The three waiting fsyncs share one commit.
        assert_eq!(journal.poll_io(), Some(JournalIo::Write { lba: 3, blocks: 5 }));
        journal.handle_io_done();
        journal.handle_io_done();
        assert_eq!(drain_woken(&mut journal), vec![1, 2, 3]);
        assert_eq!(journal.commits_count(), 2);
    }

    #[test]
    fn writers_stall_at_the_dirty_limit_until_the_commit_starts() {
        let mut journal = Journal::new(5_000_000_000, 8);
        journal.note_write(0, 8);
        // The limit starts a commit at once and the new transaction is empty.
        assert!(journal.poll_io().is_some());
        journal.note_write(1, 8);
        assert!(!journal.write_allowed());
        journal.throttle(7);
        journal.handle_io_done();
        assert!(drain_woken(&mut journal).is_empty());
        journal.handle_io_done();
        assert_eq!(drain_woken(&mut journal), vec![7]);
        assert!(journal.write_allowed());
    }

    #[test]
    fn periodic_commit_fires_five_seconds_after_the_first_write() {
        let mut journal = Journal::new(5_000_000_000, u64::MAX);
        assert_eq!(journal.next_deadline(), None);
        journal.note_write(1_000, 1);
        assert_eq!(journal.next_deadline(), Some(5_000_001_000));
        journal.handle_timer(4_000_000_000);
        assert_eq!(journal.poll_io(), None);
        journal.handle_timer(5_000_001_000);
        assert!(matches!(journal.poll_io(), Some(JournalIo::Write { .. })));
    }

    #[test]
    fn a_deadline_passing_during_a_slow_commit_waits_for_it_without_a_timer() {
        let mut journal = Journal::new(5_000_000_000, u64::MAX);
        journal.note_write(0, 1);
        journal.fsync(0);
        assert!(matches!(journal.poll_io(), Some(JournalIo::Write { .. })));
        journal.note_write(1_000_000_000, 1);
        // The commit in flight takes longer than the next one's interval.
        let now = 7_000_000_000;
        journal.handle_timer(now);
        assert_eq!(journal.poll_io(), None, "one commit at a time");
        assert!(journal.next_deadline().is_none_or(|at| at > now), "timer at {:?} <= now", journal.next_deadline());
        journal.handle_io_done();
        assert_eq!(journal.poll_io(), Some(JournalIo::Flush));
        journal.handle_io_done();
        // The overdue commit starts as soon as the slow one ends.
        assert!(matches!(journal.poll_io(), Some(JournalIo::Write { .. })));
    }
}
