//! The engine's state in words, for stall reports (the torture simulator's
//! liveness check), test failures and debugging.

use super::Engine;
use std::collections::HashMap;

impl Engine {
    /// One LBA's cache state in words (every block carrying it), for
    /// diagnostics and test failures.
    pub fn describe_lba(&self, lba: u64) -> String {
        let current = u32::try_from(lba).ok().and_then(|l| self.cache.lookup(l));
        let mut text = format!("lba {lba}: current {current:?}");
        for block in 0..self.cache.blocks_count() {
            if self.cache.lba(block) as u64 == lba && self.cache.state(block) != crate::cache::BlockState::Free {
                text += &format!(
                    "; block {block} {:?} flags {:#010b} v{} pins {}",
                    self.cache.state(block),
                    self.cache.flags_bits(block),
                    self.cache.version(block),
                    self.cache.pins(block)
                );
            }
        }
        text
    }
}

impl Engine {
    /// Every block in use: state, LBA, flags, version and pins, one per line.
    pub fn describe_blocks(&self) -> String {
        let mut text = String::new();
        for block in 0..self.cache.blocks_count() {
            if self.cache.state(block) != crate::cache::BlockState::Free {
                text += &format!(
                    "block {block} {:?} lba {} flags {:#010b} v{} pins {}{}\n",
                    self.cache.state(block),
                    self.cache.lba(block),
                    self.cache.flags_bits(block),
                    self.cache.version(block),
                    self.cache.pins(block),
                    self.ordered_describe(block)
                );
            }
        }
        text
    }

    /// What the engine is waiting for, in words (diagnostics for stuck requests).
    pub fn describe_pending(&self) -> String {
        let mut ops: HashMap<String, u32> = HashMap::new();
        for op in self.commands.in_flight() {
            let name = format!("{op:?}");
            *ops.entry(name.split([' ', '{']).next().unwrap_or("").to_string()).or_default() += 1;
        }
        let flushes: Vec<String> = self
            .flushes
            .iter()
            .map(|f| format!("pass {} {:?} wb_done {} commit {:?}", f.writeback_pass.map_or("none".into(), |p| p.to_string()), f.log, self.writeback.passes.done_through(f.writeback_pass), f.commit_target))
            .collect();
        format!(
            "state {:?}; next timer {:?}; requests {}; waiting {}; ops {:?}; flushes {:?}; commit done {}; {}; writeback queue {} (passes open: [{}]) in flight {} revoke_wait {}; free blocks {} dirty {} unlogged {}",
            self.state,
            self.next_timer(),
            self.requests.len(),
            self.waiting.len(),
            ops,
            flushes,
            self.commit.completed(),
            self.log.describe(),
            self.writeback.queue.len(),
            self.writeback.passes.open().map(|(pass, entries)| format!("({pass}, {entries})")).collect::<Vec<_>>().join(", "),
            self.writeback.in_flight(),
            self.writeback.revokes.waiting(),
            self.cache.free_count(),
            self.cache.dirty_count(),
            self.cache.unlogged_dirty_count(),
        )
    }
}
