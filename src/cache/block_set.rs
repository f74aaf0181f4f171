//! A fixed-size set of block numbers: one bit per block, and one summary bit
//! per 64 blocks so that walking a sparse set skips empty words. Sized once;
//! inserting never allocates.

pub struct BlockSet {
    words: Box<[u64]>,
    /// Bit `w` set: `words[w]` is not zero.
    summary: Box<[u64]>,
    len: u32,
}

impl BlockSet {
    pub fn new(blocks_count: u32) -> Self {
        let words = (blocks_count as usize).div_ceil(64);
        BlockSet { words: vec![0; words].into_boxed_slice(), summary: vec![0; words.div_ceil(64)].into_boxed_slice(), len: 0 }
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn contains(&self, block: u32) -> bool {
        self.words[block as usize / 64] & (1 << (block % 64)) != 0
    }

    pub fn insert(&mut self, block: u32) {
        let w = block as usize / 64;
        let bit = 1 << (block % 64);
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.summary[w / 64] |= 1 << (w % 64);
            self.len += 1;
        }
    }

    pub fn remove(&mut self, block: u32) {
        let w = block as usize / 64;
        let bit = 1 << (block % 64);
        if self.words[w] & bit != 0 {
            self.words[w] &= !bit;
            self.len -= 1;
            if self.words[w] == 0 {
                self.summary[w / 64] &= !(1 << (w % 64));
            }
        }
    }

    /// The smallest member at or after `from`.
    pub fn next_from(&self, from: u32) -> Option<u32> {
        let w = from as usize / 64;
        let here = self.words.get(w)? & (!0u64 << (from % 64));
        if here != 0 {
            return Some((w * 64) as u32 + here.trailing_zeros());
        }
        let w = w + 1;
        let mut s = w / 64;
        let mut summary = self.summary.get(s)? & (!0u64 << (w % 64));
        loop {
            if summary != 0 {
                let word = s * 64 + summary.trailing_zeros() as usize;
                return Some((word * 64) as u32 + self.words[word].trailing_zeros());
            }
            s += 1;
            summary = *self.summary.get(s)?;
        }
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.summary.iter().enumerate().flat_map(move |(s, &summary)| {
            bits(summary).flat_map(move |w| {
                let word = s * 64 + w as usize;
                bits(self.words[word]).map(move |bit| (word * 64) as u32 + bit)
            })
        })
    }

    pub fn memory_bytes(&self) -> usize {
        (self.words.len() + self.summary.len()) * 8
    }
}

/// The positions of the set bits of `word`, lowest first.
fn bits(mut word: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        if word == 0 {
            return None;
        }
        let bit = word.trailing_zeros();
        word &= word - 1;
        Some(bit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn behaves_like_a_btree_set(blocks in 1u32..9000, ops in proptest::collection::vec((any::<u32>(), any::<bool>()), 1..300)) {
            let mut set = BlockSet::new(blocks);
            let mut model = BTreeSet::new();
            for (raw, insert) in ops {
                let block = raw % blocks;
                if insert {
                    set.insert(block);
                    model.insert(block);
                } else {
                    set.remove(block);
                    model.remove(&block);
                }
                prop_assert_eq!(set.contains(block), model.contains(&block));
            }
            for from in [0, blocks / 3, blocks / 2, blocks - 1, blocks, blocks + 70] {
                prop_assert_eq!(set.next_from(from), model.range(from..).next().copied());
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.into_iter().collect::<Vec<_>>());
        }
    }
}
