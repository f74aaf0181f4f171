//! The legal moves of a block's state. Every change of a block's state
//! checks its move here; any other move is a caller's bug that would break
//! copy-on-write or hand a block out twice, so it fails at once instead of
//! surfacing as stale data much later.

use super::BlockState::{self, Dropped, Evicting, Free, Mapped, Superseded};

/// Every legal (from, to) pair, once, and when it happens.
pub(super) const MOVES: [(BlockState, BlockState, &str); 11] = [
    (Free, Free, "the free list is built at creation, or rebuilt after a warm restart's restore"),
    (Free, Mapped, "a write or a fill takes a free block; a warm restart restores an LBA's newest entry"),
    (Free, Superseded, "a warm restart restores an entry older than its LBA's newest"),
    (Mapped, Superseded, "a newer block of its LBA is mapped (or restored)"),
    (Mapped, Evicting, "a committed clean block is evicted, invalidated or discarded"),
    (Mapped, Dropped, "an uncommitted block is evicted, invalidated or discarded, or its data write failed"),
    (Superseded, Mapped, "its successor's data write failed: it is current again"),
    (Superseded, Evicting, "its LBA's current block was discarded at a warm restart"),
    (Superseded, Dropped, "never durable and its successor is written, or a commit invalidated its entry"),
    (Evicting, Dropped, "a commit invalidated its entry"),
    (Dropped, Free, "no read or write is in flight on it any more"),
];

const STATES: u32 = 5;

/// Bit `from * STATES + to` set: the move is legal.
const LEGAL: u32 = {
    let mut bits = 0u32;
    let mut i = 0;
    while i < MOVES.len() {
        let bit = 1 << (MOVES[i].0 as u32 * STATES + MOVES[i].1 as u32);
        assert!(bits & bit == 0, "a move listed twice");
        bits |= bit;
        i += 1;
    }
    bits
};

#[inline]
pub(super) fn legal(from: BlockState, to: BlockState) -> bool {
    LEGAL >> (from as u32 * STATES + to as u32) & 1 != 0
}

/// The illegal moves, by what a caller that made one got wrong; each
/// class has a test that the assertion fires (`cache::tests`).
#[cfg(test)]
pub(super) const ILLEGAL: [(&str, &[(BlockState, BlockState)]); 4] = [
    ("a block in use freed without being dropped", &[(Mapped, Free), (Superseded, Free), (Evicting, Free)]),
    (
        "an evicted or dropped block brought back",
        &[(Evicting, Mapped), (Evicting, Superseded), (Dropped, Mapped), (Dropped, Superseded), (Dropped, Evicting)],
    ),
    ("a free block put out of use", &[(Free, Evicting), (Free, Dropped)]),
    ("a block in use moved to the state it is in", &[(Mapped, Mapped), (Superseded, Superseded), (Evicting, Evicting), (Dropped, Dropped)]),
];

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [BlockState; STATES as usize] = [Free, Mapped, Superseded, Evicting, Dropped];

    #[test]
    fn every_pair_is_either_listed_or_in_an_illegal_class() {
        for from in ALL {
            for to in ALL {
                let listed = MOVES.iter().any(|&(f, t, _)| (f, t) == (from, to));
                let classes = ILLEGAL.iter().filter(|(_, moves)| moves.contains(&(from, to))).count();
                assert_eq!(legal(from, to), listed, "{from:?} -> {to:?}");
                assert_eq!(classes, usize::from(!listed), "{from:?} -> {to:?} in {classes} illegal classes");
            }
        }
    }
}
