//! The log scan's read-ahead: whole segments read from the mirror being
//! scanned, several positions ahead of the part the scan stands at, so that
//! a log on a rotating disk streams at its media rate. Reading one part
//! header after another missed a revolution per part (about 18 ms a part: a
//! 1 GiB log of 4,814 parts took 85 s to scan).

use crate::io::{IoAllocator, IoRegion, IoStatus};

/// Read-ahead memory: as many whole segments as fit in this, within
/// `WINDOWS_MIN..=WINDOWS_MAX`.
pub const READ_AHEAD_BYTES: usize = 8 << 20;
const WINDOWS_MIN: usize = 2;
const WINDOWS_MAX: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// Its read is in flight: its memory belongs to the device.
    Loading,
    /// The whole segment is in memory.
    Loaded,
    /// Its read failed with this status; the scan has not looked yet.
    Failed(IoStatus),
    /// Its read failed, and the scan reads the parts of that segment one at
    /// a time into its memory, each at its own place in the segment.
    PartByPart,
}

/// One segment's worth of memory, holding segment `position` (counted from
/// the head) as read from mirror `mirror_position` (scanner order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub mirror_position: usize,
    pub position: u32,
    pub state: WindowState,
}

pub struct SegmentWindows {
    segment_bytes: usize,
    memory: Box<dyn IoRegion>,
    windows: Vec<Option<Window>>,
}

impl SegmentWindows {
    pub fn new(segment_bytes: usize, alloc: &mut dyn IoAllocator) -> SegmentWindows {
        let count = (READ_AHEAD_BYTES / segment_bytes.max(1)).clamp(WINDOWS_MIN, WINDOWS_MAX);
        SegmentWindows { segment_bytes, memory: alloc.alloc(count * segment_bytes), windows: vec![None; count] }
    }

    pub fn count(&self) -> usize {
        self.windows.len()
    }

    pub fn find(&self, mirror_position: usize, position: u32) -> Option<usize> {
        self.windows.iter().position(|w| w.is_some_and(|w| (w.mirror_position, w.position) == (mirror_position, position)))
    }

    pub fn get(&self, index: usize) -> Window {
        self.windows[index].expect("a window in use")
    }

    pub fn set_state(&mut self, index: usize, state: WindowState) {
        self.windows[index].as_mut().expect("a window in use").state = state;
    }

    /// Takes a free window for (mirror, position), its read to be issued.
    pub fn take(&mut self, mirror_position: usize, position: u32) -> Option<usize> {
        debug_assert!(self.find(mirror_position, position).is_none());
        let index = self.windows.iter().position(Option::is_none)?;
        self.windows[index] = Some(Window { mirror_position, position, state: WindowState::Loading });
        Some(index)
    }

    /// Frees the windows of positions the scan has passed, but not those
    /// still loading (their memory is the device's until they complete).
    pub fn release_behind(&mut self, position: u32) {
        for slot in &mut self.windows {
            if slot.is_some_and(|w| w.position < position && w.state != WindowState::Loading) {
                *slot = None;
            }
        }
    }

    /// Makes room by freeing the window furthest ahead that is not loading;
    /// false if every window is loading.
    pub fn evict_furthest(&mut self) -> bool {
        let furthest = (0..self.windows.len())
            .filter(|&i| self.windows[i].is_some_and(|w| w.state != WindowState::Loading))
            .max_by_key(|&i| self.windows[i].map(|w| w.position));
        furthest.map(|i| self.windows[i] = None).is_some()
    }

    pub fn has_free(&self) -> bool {
        self.windows.iter().any(Option::is_none)
    }

    /// Byte offset of window `index` in the memory region.
    pub fn offset_bytes(&self, index: usize) -> usize {
        index * self.segment_bytes
    }

    /// The segment bytes of window `index`.
    pub fn segment(&mut self, index: usize) -> &[u8] {
        let start = self.offset_bytes(index);
        &self.memory.as_mut_slice()[start..start + self.segment_bytes]
    }

    pub fn memory_mut(&mut self) -> &mut [u8] {
        self.memory.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::HeapAllocator;

    #[test]
    fn sizes_follow_the_segment() {
        assert_eq!(SegmentWindows::new(1 << 20, &mut HeapAllocator).count(), 8);
        assert_eq!(SegmentWindows::new(4 << 20, &mut HeapAllocator).count(), 2);
        assert_eq!(SegmentWindows::new(64 << 20, &mut HeapAllocator).count(), 2);
        assert_eq!(SegmentWindows::new(32 << 10, &mut HeapAllocator).count(), 8);
    }

    #[test]
    fn loading_windows_are_never_freed() {
        let mut windows = SegmentWindows::new(4 << 20, &mut HeapAllocator);
        let first = windows.take(0, 0).unwrap();
        let second = windows.take(0, 1).unwrap();
        assert!(windows.take(0, 2).is_none());
        windows.release_behind(5);
        assert!(!windows.evict_furthest(), "both are loading");
        windows.set_state(first, WindowState::Loaded);
        windows.set_state(second, WindowState::Loaded);
        assert!(windows.evict_furthest());
        assert_eq!(windows.find(0, 1), None, "the one furthest ahead went first");
        assert_eq!(windows.find(0, 0), Some(first));
        windows.release_behind(1);
        assert_eq!(windows.find(0, 0), None);
    }
}
