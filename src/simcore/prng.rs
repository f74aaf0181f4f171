//! The simulators' only source of randomness (both `hhc torture` and `hhc
//! simulate`): xoshiro256** seeded through splitmix64, written out here so
//! that one seed reproduces a run on every platform and every toolchain (no
//! dependency may change the stream). The torture simulator's reports depend
//! on this exact stream: changing it changes which seeds find what.

/// One step of splitmix64; also used to derive block contents.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Clone, Debug)]
pub struct Prng {
    state: [u64; 4],
}

impl Prng {
    pub fn new(seed: u64) -> Prng {
        let mut sm = seed;
        let state = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        Prng { state }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// An independent stream, so that one consumer drawing more numbers does
    /// not shift what every other consumer draws.
    pub fn fork(&mut self) -> Prng {
        Prng::new(self.next_u64())
    }

    /// An independent stream named by a seed and a label (one per thread or
    /// file set), so adding a consumer does not shift the others.
    pub fn labelled(seed: u64, label: u64) -> Prng {
        Prng::new(seed.wrapping_add(label.wrapping_mul(0xD1B5_4A32_D192_ED03)))
    }

    /// Uniform in `0..bound` (bound > 0), by multiply-shift (no modulo bias
    /// worth caring about at 64 bits).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high, "empty range {low}..={high}");
        low + self.below(high - low + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < percent as u64
    }

    /// True with probability `ppm` / 1 000 000.
    pub fn ppm(&mut self, ppm: u32) -> bool {
        self.below(1_000_000) < ppm as u64
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let a: Vec<u64> = { let mut p = Prng::new(7); (0..8).map(|_| p.next_u64()).collect() };
        let b: Vec<u64> = { let mut p = Prng::new(7); (0..8).map(|_| p.next_u64()).collect() };
        let c: Vec<u64> = { let mut p = Prng::new(8); (0..8).map(|_| p.next_u64()).collect() };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn labelled_streams_differ_by_label_and_repeat_by_seed() {
        assert_eq!(Prng::labelled(7, 1).next_u64(), Prng::labelled(7, 1).next_u64());
        assert_ne!(Prng::labelled(7, 1).next_u64(), Prng::labelled(7, 2).next_u64());
        assert_ne!(Prng::labelled(7, 1).next_u64(), Prng::labelled(8, 1).next_u64());
    }

    #[test]
    fn splitmix_matches_reference_values() {
        // First outputs of splitmix64 from state 0 (Vigna's reference code).
        let mut state = 0u64;
        assert_eq!(splitmix64(&mut state), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut state), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut p = Prng::new(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = p.below(5);
            assert!(v < 5);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
