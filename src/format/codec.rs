//! Little-endian field access and the checksum shared by every on-disk
//! structure. Callers check the buffer length once, up front, so these
//! helpers index directly.

use super::FormatError;

pub(crate) fn put_u8(out: &mut [u8], offset: usize, value: u8) {
    out[offset] = value;
}

pub(crate) fn put_u16(out: &mut [u8], offset: usize, value: u16) {
    out[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut [u8], offset: usize, value: u32) {
    out[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut [u8], offset: usize, value: u64) {
    out[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn get_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

pub(crate) fn get_u32(bytes: &[u8], offset: usize) -> u32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_le_bytes(raw)
}

pub(crate) fn get_u64(bytes: &[u8], offset: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[offset..offset + 8]);
    u64::from_le_bytes(raw)
}

/// CRC-32/IEEE (crc32fast) of `bytes` as if the 4-byte checksum field at
/// `crc_offset` held zeros, so the stored value can live inside the range
/// it covers without copying the structure.
pub(crate) fn crc_with_field_zeroed(bytes: &[u8], crc_offset: usize) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..crc_offset]);
    hasher.update(&[0u8; 4]);
    hasher.update(&bytes[crc_offset + 4..]);
    hasher.finalize()
}

/// Computes and stores the checksum of `bytes` at `crc_offset`.
pub(crate) fn store_crc(bytes: &mut [u8], crc_offset: usize) {
    let crc = crc_with_field_zeroed(bytes, crc_offset);
    put_u32(bytes, crc_offset, crc);
}

pub(crate) fn check_crc(bytes: &[u8], crc_offset: usize) -> Result<(), FormatError> {
    if get_u32(bytes, crc_offset) == crc_with_field_zeroed(bytes, crc_offset) {
        Ok(())
    } else {
        Err(FormatError::ChecksumMismatch)
    }
}

/// Every structure starts with magic (u32 at 0) and version (u16 at 4).
pub(crate) fn check_magic_and_version(bytes: &[u8], magic: u32, version: u16) -> Result<(), FormatError> {
    check_magic_and_versions(bytes, magic, version..=version).map(|_| ())
}

/// As `check_magic_and_version`, for a structure of which several versions
/// are read; the version found.
pub(crate) fn check_magic_and_versions(
    bytes: &[u8],
    magic: u32,
    versions: std::ops::RangeInclusive<u16>,
) -> Result<u16, FormatError> {
    if get_u32(bytes, 0) != magic {
        return Err(FormatError::BadMagic);
    }
    match get_u16(bytes, 4) {
        found if versions.contains(&found) => Ok(found),
        other => Err(FormatError::UnsupportedVersion(other)),
    }
}

pub(crate) fn is_valid_block_size(block_size: u32) -> bool {
    block_size.is_power_of_two() && (4096..=65536).contains(&block_size)
}

pub(crate) fn check_block_size(block_size: u32) -> Result<(), FormatError> {
    if is_valid_block_size(block_size) {
        Ok(())
    } else {
        Err(FormatError::BadField("block_size"))
    }
}

pub(crate) fn check_zero(bytes: &[u8], field: &'static str) -> Result<(), FormatError> {
    if bytes.iter().all(|&b| b == 0) {
        Ok(())
    } else {
        Err(FormatError::BadField(field))
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    /// Flips bit `bit` (counted over the whole slice) of `bytes`.
    pub fn flip_bit(bytes: &mut [u8], bit: usize) {
        bytes[bit / 8] ^= 1 << (bit % 8);
    }
}
