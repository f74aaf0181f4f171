//! Engine I/O memory from SPDK's DMA allocator, so log segment buffers,
//! write-back staging and metadata pages can go to any bdev unbounced.

use super::sys;
use crate::io::{IoAllocator, IoRegion};

/// 4 KiB alignment satisfies every base bdev HHC accepts (block size <= 4 KiB).
const DMA_ALIGN_BYTES: usize = 4096;

pub struct DmaAllocator;

struct DmaRegion {
    ptr: *mut u8,
    len_bytes: usize,
}

// SAFETY: the region is owned exclusively by one DmaRegion; nothing else
// holds the pointer, so moving it to another thread moves the ownership.
unsafe impl Send for DmaRegion {}

impl IoAllocator for DmaAllocator {
    fn alloc(&mut self, len_bytes: usize) -> Box<dyn IoRegion> {
        // SAFETY: plain allocation call; the result is checked for NULL.
        let ptr = unsafe { sys::hhc_glue_dma_zmalloc(len_bytes.max(1), DMA_ALIGN_BYTES) } as *mut u8;
        // Regions are allocated once at creation; running out of DMA memory
        // there is a sizing error of the application, not a recoverable state.
        assert!(!ptr.is_null(), "spdk_dma_zmalloc of {len_bytes} bytes failed (raise -s / spdk_mem)");
        Box::new(DmaRegion { ptr, len_bytes })
    }
}

impl IoRegion for DmaRegion {
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to len_bytes of zeroed memory owned by self,
        // which lives as long as the returned borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len_bytes) }
    }
}

impl Drop for DmaRegion {
    fn drop(&mut self) {
        // SAFETY: ptr came from hhc_glue_dma_zmalloc and is freed once.
        unsafe { sys::hhc_glue_dma_free(self.ptr.cast()) }
    }
}
