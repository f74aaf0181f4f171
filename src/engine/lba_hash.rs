//! Hash sets and maps keyed by LBA for the engine's small in-flight tables.
//! One multiply per key instead of SipHash: they hold only what is in flight
//! (bounded by the queue depth), so a crafted key pattern could cost a few
//! probes, never memory, and the write-back scan looks keys up per block.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct LbaHasher(u64);

impl Hasher for LbaHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u32(byte as u32);
        }
    }

    fn write_u32(&mut self, key: u32) {
        // Fibonacci hashing: the high bits (hashbrown's tag) and the low
        // bits (its bucket) both depend on every key bit that matters here.
        self.0 = (self.0 ^ key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub type LbaSet = HashSet<u32, BuildHasherDefault<LbaHasher>>;
pub type LbaTable<V> = HashMap<u32, V, BuildHasherDefault<LbaHasher>>;
