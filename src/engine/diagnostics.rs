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
        for key in self.ops.keys() {
            let name = format!("{:?}", self.ops.get(key).unwrap());
            *ops.entry(name.split([' ', '{']).next().unwrap_or("").to_string()).or_default() += 1;
        }
        let flushes: Vec<String> = self
            .flushes
            .iter()
            .map(|f| format!("tag {} {:?} wb_left {} commit {:?}", f.tag, f.log, f.writebacks_remaining, f.commit_target))
            .collect();
        format!(
            "state {:?}; requests {}; waiting {}; ops {:?}; flushes {:?}; commit done {}; {}; writeback queue {} (for flushes: {:?}) in flight {} revoke_wait {}; free blocks {} dirty {} unlogged {}",
            self.state,
            self.requests.len(),
            self.waiting.len(),
            ops,
            flushes,
            self.commit.completed(),
            self.log.describe(),
            self.writeback.queue.len(),
            self.queued_flush_tags(),
            self.writeback.in_flight(),
            self.writeback.revokes.waiting(),
            self.cache.free_count(),
            self.cache.dirty_count(),
            self.cache.unlogged_dirty_count(),
        )
    }

    /// Write-backs queued for each waiting flush, by the flush's tag.
    fn queued_flush_tags(&self) -> std::collections::BTreeMap<u32, u32> {
        let mut per_tag = std::collections::BTreeMap::new();
        for &(_, tag) in &self.writeback.queue {
            if let Some(tag) = tag {
                *per_tag.entry(tag).or_default() += 1;
            }
        }
        per_tag
    }
}
