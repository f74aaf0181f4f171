//! Request data that lives in scattered buffers (a bdev I/O's iovec array):
//! the engine's one copy into the log reads from it, and device commands on
//! a byte range of a request get the matching sub-array.

use crate::io::RequestData;
use libc::iovec;

/// Read access to the buffers of one request.
pub struct IovecData<'a> {
    pub iovs: &'a [iovec],
}

impl RequestData for IovecData<'_> {
    fn copy_to(&self, offset_bytes: u64, dst: &mut [u8]) {
        let mut skip = offset_bytes as usize;
        let mut copied = 0;
        for iov in self.iovs {
            if copied == dst.len() {
                break;
            }
            if skip >= iov.iov_len {
                skip -= iov.iov_len;
                continue;
            }
            let take = (iov.iov_len - skip).min(dst.len() - copied);
            // SAFETY: the bdev layer keeps every iovec of an outstanding I/O
            // valid and readable for iov_len bytes; skip + take <= iov_len.
            let src = unsafe { std::slice::from_raw_parts((iov.iov_base as *const u8).add(skip), take) };
            dst[copied..copied + take].copy_from_slice(src);
            copied += take;
            skip = 0;
        }
        assert_eq!(copied, dst.len(), "request buffer shorter than {} bytes at offset {offset_bytes}", dst.len());
    }
}

/// The iovec of `len_bytes` at `offset_bytes` of memory the caller owns.
pub fn region_iovec(memory: &mut [u8], offset_bytes: u64, len_bytes: u64) -> iovec {
    let range = offset_bytes as usize..(offset_bytes + len_bytes) as usize;
    let bytes = &mut memory[range];
    iovec { iov_base: bytes.as_mut_ptr().cast(), iov_len: bytes.len() }
}

/// Appends to `out` the iovecs that cover `len_bytes` starting at
/// `offset_bytes` of the buffer `iovs` describes. Returns false when the
/// buffer is shorter.
pub fn sub_range(iovs: &[iovec], offset_bytes: u64, len_bytes: u64, out: &mut Vec<iovec>) -> bool {
    let mut skip = offset_bytes as usize;
    let mut left = len_bytes as usize;
    for iov in iovs {
        if left == 0 {
            break;
        }
        if skip >= iov.iov_len {
            skip -= iov.iov_len;
            continue;
        }
        let take = (iov.iov_len - skip).min(left);
        // Pointer arithmetic only; nothing is dereferenced here.
        let base = (iov.iov_base as *mut u8).wrapping_add(skip);
        out.push(iovec { iov_base: base.cast(), iov_len: take });
        left -= take;
        skip = 0;
    }
    left == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iovs_of(parts: &mut [Vec<u8>]) -> Vec<iovec> {
        parts.iter_mut().map(|p| iovec { iov_base: p.as_mut_ptr().cast(), iov_len: p.len() }).collect()
    }

    #[test]
    fn copy_and_sub_range_agree_with_a_flat_buffer() {
        let flat: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut parts = vec![flat[..100].to_vec(), flat[100..101].to_vec(), flat[101..700].to_vec(), flat[700..].to_vec()];
        let iovs = iovs_of(&mut parts);
        let data = IovecData { iovs: &iovs };
        for (offset, len) in [(0, 1000), (0, 1), (99, 3), (100, 1), (101, 899), (650, 300), (999, 1), (5, 0)] {
            let mut dst = vec![0u8; len];
            data.copy_to(offset as u64, &mut dst);
            assert_eq!(dst, &flat[offset..offset + len], "copy at {offset}+{len}");
            let mut sub = Vec::new();
            assert!(sub_range(&iovs, offset as u64, len as u64, &mut sub));
            let gathered: Vec<u8> = sub
                .iter()
                // SAFETY: the sub-range points into `parts`, alive here.
                .flat_map(|iov| unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len) }.to_vec())
                .collect();
            assert_eq!(gathered, &flat[offset..offset + len], "sub-range at {offset}+{len}");
        }
        let mut sub = Vec::new();
        assert!(!sub_range(&iovs, 990, 11, &mut sub), "a range past the end is refused");
    }
}
