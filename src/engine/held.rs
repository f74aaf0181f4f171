//! The data of block writes that have to wait (for a free cache block),
//! kept so that their log copy is made from it when they start — as it
//! would have been had they started at once — instead of being read back
//! from the cache device later: a re-log that the next flush waits for.
//! A bounded pool, filled at creation; when it is full a waiting write goes
//! without, as before.

use crate::io::RequestData;

/// Bytes of held data (in whole blocks, at least `HELD_BLOCKS_MIN`). The
/// simulator's fileserver (50 threads of multi-block writes) needs up to
/// 8 MiB: with 4 MiB the writes that found the pool full were re-logged
/// from the cache device (69 K blocks against 112 K copied) and the flush
/// p99 reached 1.3 s; with 8 MiB none were.
const HELD_BYTES: usize = 8 << 20;
const HELD_BLOCKS_MIN: usize = 16;

#[derive(Default)]
pub(super) struct HeldData {
    /// Taken out while a held block is handed to the write path.
    memory: Vec<u8>,
    free: Vec<u32>,
    block_size: usize,
}

impl HeldData {
    /// An empty pool when nothing is logged (`logging` false).
    pub fn new(block_size: u32, logging: bool) -> Self {
        let block_size = block_size as usize;
        let slots = if logging { (HELD_BYTES / block_size).max(HELD_BLOCKS_MIN) } else { 0 };
        HeldData { memory: vec![0; slots * block_size], free: (0..slots as u32).rev().collect(), block_size }
    }

    /// Copies the block at `offset_bytes` of `data` into a free slot; the
    /// slot, or None if the pool is full.
    pub fn hold(&mut self, data: &dyn RequestData, offset_bytes: u64) -> Option<u32> {
        let slot = self.free.pop()?;
        let start = slot as usize * self.block_size;
        data.copy_to(offset_bytes, &mut self.memory[start..start + self.block_size]);
        Some(slot)
    }

    pub fn release(&mut self, slot: u32) {
        debug_assert!(!self.free.contains(&slot), "held slot {slot} released twice");
        self.free.push(slot);
    }

    /// Calls `f` with slot `slot`'s block as request data found at
    /// `offset_bytes` (where the write path looks for it), or with None.
    /// (The engine takes the pool out of itself for the call.)
    pub fn with_block<R>(&self, slot: Option<u32>, offset_bytes: u64, f: impl FnOnce(Option<&dyn RequestData>) -> R) -> R {
        let Some(slot) = slot else { return f(None) };
        let start = slot as usize * self.block_size;
        let block = HeldBlock { bytes: &self.memory[start..start + self.block_size], offset_bytes };
        f(Some(&block))
    }
}

/// One held block, seen as the request data it came from.
struct HeldBlock<'a> {
    bytes: &'a [u8],
    offset_bytes: u64,
}

impl RequestData for HeldBlock<'_> {
    fn copy_to(&self, offset_bytes: u64, dst: &mut [u8]) {
        let start = (offset_bytes - self.offset_bytes) as usize;
        dst.copy_from_slice(&self.bytes[start..start + dst.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_block_reads_back_as_the_request_data_it_came_from() {
        let mut held = HeldData::new(512, true);
        let request: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8).collect();
        let slot = held.hold(&request, 1024);
        let mut out = vec![0u8; 512];
        held.with_block(slot, 1024, |data| data.unwrap().copy_to(1024, &mut out));
        assert_eq!(out, request[1024..1536]);
        held.release(slot.unwrap());
    }

    #[test]
    fn the_pool_is_bounded_and_slots_come_back() {
        let mut held = HeldData::new(1 << 20, true);
        let request = vec![7u8; 1 << 20];
        let slots: Vec<u32> = (0..HELD_BLOCKS_MIN).map(|_| held.hold(&request, 0).expect("a free slot")).collect();
        assert_eq!(held.hold(&request, 0), None);
        held.release(slots[3]);
        assert_eq!(held.hold(&request, 0), Some(slots[3]));
        assert_eq!(HeldData::new(4096, false).hold(&request, 0), None);
    }
}
