//! Requesters that keep a bounded number of requests outstanding: reads and
//! writes of 1–4 blocks, biased to a small hot set so blocks are overwritten
//! while earlier writes are still in flight, and flushes at random; with
//! `sequential_percent`, reads and writes of 1–8 blocks that continue a
//! sequential read or write stream (for the sequential cutoff).
//! Periodic flushes and policy switches are scheduled by the runner.

use crate::simcore::prng::Prng;
use crate::io::Nanos;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub requesters_count: u32,
    pub outstanding_max: u32,
    pub think_ns_max: Nanos,
    pub write_percent: u32,
    pub flush_percent: u32,
    pub blocks_per_request_max: u32,
    pub hot_blocks_count: u64,
    pub hot_percent: u32,
    /// A flush every this many ns regardless of requesters (fsync timers).
    pub periodic_flush_ns: Option<Nanos>,
    /// Share of reads and writes that continue a sequential stream (set by
    /// the fault plan, not drawn here).
    pub sequential_percent: u32,
}

impl WorkloadSpec {
    pub fn draw(prng: &mut Prng) -> WorkloadSpec {
        WorkloadSpec {
            requesters_count: prng.between(1, 16) as u32,
            outstanding_max: prng.between(1, 4) as u32,
            think_ns_max: prng.between(0, 200_000),
            write_percent: prng.between(30, 80) as u32,
            flush_percent: prng.between(1, 10) as u32,
            blocks_per_request_max: prng.between(1, 4) as u32,
            hot_blocks_count: prng.between(4, 32),
            hot_percent: prng.between(30, 90) as u32,
            periodic_flush_ns: prng.percent(50).then(|| prng.between(1_000_000, 20_000_000)),
            sequential_percent: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read { lba: u64, blocks_count: u32 },
    Write { lba: u64, blocks_count: u32 },
    Flush,
}

pub struct Workload {
    pub spec: WorkloadSpec,
    blocks_count: u64,
    prng: Prng,
    outstanding: Vec<u32>,
    /// Where the next sequential read and write start.
    read_next: u64,
    write_next: u64,
}

impl Workload {
    pub fn new(spec: WorkloadSpec, blocks_count: u64, prng: Prng) -> Workload {
        let outstanding = vec![0; spec.requesters_count as usize];
        Workload { spec, blocks_count, prng, outstanding, read_next: 0, write_next: blocks_count / 2 }
    }

    pub fn requesters_count(&self) -> usize {
        self.outstanding.len()
    }

    /// Whether requester `index` may submit another request now.
    pub fn has_room(&self, index: usize) -> bool {
        self.outstanding[index] < self.spec.outstanding_max
    }

    pub fn started(&mut self, index: usize) {
        self.outstanding[index] += 1;
    }

    pub fn finished(&mut self, index: usize) {
        self.outstanding[index] -= 1;
    }

    /// A crash ends every outstanding request.
    pub fn forget_outstanding(&mut self) {
        self.outstanding.fill(0);
    }

    pub fn think_ns(&mut self) -> Nanos {
        self.prng.between(0, self.spec.think_ns_max)
    }

    pub fn next_op(&mut self) -> Op {
        let roll = self.prng.below(100) as u32;
        if roll < self.spec.flush_percent {
            return Op::Flush;
        }
        let write = roll < self.spec.flush_percent + self.spec.write_percent;
        // Drawn only when on, so seeds without streams draw as before.
        if self.spec.sequential_percent > 0 && self.prng.percent(self.spec.sequential_percent) {
            return self.next_sequential(write);
        }
        let blocks_count = self.prng.between(1, self.spec.blocks_per_request_max as u64) as u32;
        let lba = self.draw_lba(blocks_count);
        if write {
            Op::Write { lba, blocks_count }
        } else {
            Op::Read { lba, blocks_count }
        }
    }

    fn next_sequential(&mut self, write: bool) -> Op {
        let blocks_count = self.prng.between(1, 8.min(self.blocks_count)) as u32;
        let next = if write { &mut self.write_next } else { &mut self.read_next };
        if *next + blocks_count as u64 > self.blocks_count {
            *next = 0;
        }
        let lba = *next;
        *next += blocks_count as u64;
        if write {
            Op::Write { lba, blocks_count }
        } else {
            Op::Read { lba, blocks_count }
        }
    }

    fn draw_lba(&mut self, blocks_count: u32) -> u64 {
        let last_start = self.blocks_count - blocks_count as u64;
        let hot = self.spec.hot_blocks_count.min(last_start + 1);
        if self.prng.percent(self.spec.hot_percent) {
            self.prng.below(hot)
        } else {
            self.prng.between(0, last_start)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_stay_inside_the_device_and_include_every_kind() {
        let mut prng = Prng::new(5);
        let spec = WorkloadSpec::draw(&mut prng);
        let mut w = Workload::new(spec, 40, prng.fork());
        let (mut reads, mut writes, mut flushes) = (0, 0, 0);
        for _ in 0..2000 {
            match w.next_op() {
                Op::Read { lba, blocks_count } => { assert!(lba + blocks_count as u64 <= 40); reads += 1 }
                Op::Write { lba, blocks_count } => { assert!(lba + blocks_count as u64 <= 40); writes += 1 }
                Op::Flush => flushes += 1,
            }
        }
        assert!(reads > 0 && writes > 0 && flushes > 0);
    }
}
