//! The tag a base bdev command carries through the C shim and back: which
//! machine started it, and what its completion must release. C sees a u64;
//! Rust packs and reads it here alone.

use crate::io::{DeviceRole, IoId};

/// Whose base command a completion ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoTag {
    /// The creation probe's one read of the cache bdev.
    Probe,
    /// A command of a recovery machine (ids of its own).
    Recovery(IoId),
    Engine(EngineTag),
}

/// An engine command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineTag {
    pub id: u32,
    /// The request slot whose buffer the command borrows, released when it
    /// completes.
    pub lender: Option<u32>,
    /// Which base a command on a request thread's lane went to (its
    /// completion arrives without one); None on the owner's channels, whose
    /// completions name their base.
    pub lane: Option<DeviceRole>,
}

const RECOVERY: u64 = 1 << 63;
const PROBE: u64 = 1 << 62;
/// A lane command on the cache bdev; a lane command without it went to the
/// backing bdev.
const LANE_CACHE: u64 = 1 << 61;
/// A lane command on the backing bdev.
const LANE_BACKING: u64 = 1 << 60;
/// Bits 32-59: the lender's slot + 1 (0: no lender).
const LENDER_SHIFT: u32 = 32;
const LENDER_MASK: u64 = (1 << 28) - 1;

impl IoTag {
    pub fn engine(id: IoId, lender: Option<u32>, lane: Option<DeviceRole>) -> IoTag {
        let id = u32::try_from(id).unwrap_or_else(|_| panic!("engine I/O id {id} exceeds 32 bits"));
        IoTag::Engine(EngineTag { id, lender, lane })
    }

    pub fn pack(self) -> u64 {
        match self {
            IoTag::Probe => PROBE,
            IoTag::Recovery(id) => {
                assert!(id < PROBE, "recovery I/O id {id} reaches the tag's flag bits");
                RECOVERY | id
            }
            IoTag::Engine(EngineTag { id, lender, lane }) => {
                let lender = lender.map_or(0, |slot| {
                    let bits = u64::from(slot) + 1;
                    assert!(bits <= LENDER_MASK, "request slot {slot} does not fit a tag");
                    bits << LENDER_SHIFT
                });
                let lane = match lane {
                    None => 0,
                    Some(DeviceRole::Cache) => LANE_CACHE,
                    Some(DeviceRole::Backing) => LANE_BACKING,
                    Some(role) => panic!("no lane goes to the {role} bdev"),
                };
                u64::from(id) | lender | lane
            }
        }
    }

    pub fn unpack(tag: u64) -> IoTag {
        if tag & RECOVERY != 0 {
            return IoTag::Recovery(tag & !RECOVERY);
        }
        if tag & PROBE != 0 {
            return IoTag::Probe;
        }
        let lender = match (tag >> LENDER_SHIFT) & LENDER_MASK {
            0 => None,
            bits => Some((bits - 1) as u32),
        };
        let lane = if tag & LANE_CACHE != 0 {
            Some(DeviceRole::Cache)
        } else if tag & LANE_BACKING != 0 {
            Some(DeviceRole::Backing)
        } else {
            None
        };
        IoTag::Engine(EngineTag { id: tag as u32, lender, lane })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tag_reads_back_as_packed() {
        let tags = [
            IoTag::Probe,
            IoTag::Recovery(0),
            IoTag::Recovery(PROBE - 1),
            IoTag::engine(0, None, None),
            IoTag::engine(u32::MAX as u64, Some(0), Some(DeviceRole::Cache)),
            IoTag::engine(7, Some(LENDER_MASK as u32 - 1), Some(DeviceRole::Backing)),
            IoTag::engine(12, Some(3), None),
        ];
        for tag in tags {
            assert_eq!(IoTag::unpack(tag.pack()), tag, "{:#x}", tag.pack());
        }
    }

    #[test]
    fn fields_do_not_overlap() {
        let tag = IoTag::engine(u32::MAX as u64, Some(LENDER_MASK as u32 - 1), Some(DeviceRole::Backing)).pack();
        assert_eq!(tag & (RECOVERY | PROBE | LANE_CACHE), 0);
        let tag = IoTag::engine(u32::MAX as u64, Some(LENDER_MASK as u32 - 1), Some(DeviceRole::Cache)).pack();
        assert_eq!(tag & (RECOVERY | PROBE | LANE_BACKING), 0);
    }

    #[test]
    #[should_panic(expected = "exceeds 32 bits")]
    fn an_engine_id_past_32_bits_is_refused() {
        IoTag::engine(1 << 32, None, None);
    }

    #[test]
    #[should_panic(expected = "does not fit a tag")]
    fn a_lender_past_the_field_is_refused() {
        IoTag::engine(1, Some(LENDER_MASK as u32), None).pack();
    }
}
