//! Device timing models. Each answers one question: a command submitted at
//! `now` completes when? They keep the state that makes the answer depend on
//! history — busy channels, head position, queued work — but never data.
//! The timed simulator (`timed`, feature `tools`) runs the engine over them;
//! the test device-model bdev of the SPDK module (`ffi::model`) holds real
//! I/O until they say it is done. Their parameters and defaults: `params`.

mod hdd;
pub mod params;
mod raid5_iscsi;
mod ssd;

pub use hdd::Hdd;
pub use params::{BackingParams, HddParams, SsdParams};
pub use raid5_iscsi::Raid5Iscsi;
pub use ssd::Ssd;

use crate::io::{IoKind, Nanos};

pub trait DeviceModel {
    /// Accepts a command at `now` (commands arrive in time order) and returns
    /// its completion time (>= now).
    fn submit(&mut self, now: Nanos, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> Nanos;

    /// Commands issued to member disks so far, for an array (a RAID5 small
    /// write is four); None for a single device.
    fn member_commands_count(&self) -> Option<u64> {
        None
    }
}

pub(crate) fn us(value: f64) -> Nanos {
    (value * 1_000.0).round() as Nanos
}

pub(crate) fn ms(value: f64) -> Nanos {
    (value * 1_000_000.0).round() as Nanos
}

/// Time to move `len_bytes` at `mb_s` (10^6 bytes per second).
pub(crate) fn transfer_ns(len_bytes: u64, mb_s: f64) -> Nanos {
    (len_bytes as f64 * 1_000.0 / mb_s).round() as Nanos
}
