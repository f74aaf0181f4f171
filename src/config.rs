//! Creation parameters of an HHC instance, their validation, and the write
//! policies.

use crate::format::{SegmentLayout, UNIT_BYTES};
use crate::io::Nanos;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// No caching: every request goes to the backing device (the paper's Raw).
    Passthrough,
    /// Write-through: writes complete when both cache and backing have them.
    WriteThrough,
    /// Write-back; a flush makes the cache device durable only.
    WriteBack,
    /// Write-back; a flush writes every dirty block back and flushes the backing
    /// device (Qin et al., ATC'14).
    WriteBackFlush,
    /// Write-back in acknowledgement order, epoch by epoch, so the backing
    /// device always holds a barrier-consistent prefix (Koller et al., FAST'13).
    WriteBackOrdered,
    /// Write-back with the HDD log: a flush waits for the log, not the backing.
    Hhc,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Passthrough,
        Policy::WriteThrough,
        Policy::WriteBack,
        Policy::WriteBackFlush,
        Policy::WriteBackOrdered,
        Policy::Hhc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Passthrough => "passthrough",
            Policy::WriteThrough => "wt",
            Policy::WriteBack => "wb",
            Policy::WriteBackFlush => "wb-flush",
            Policy::WriteBackOrdered => "wb-ordered",
            Policy::Hhc => "hhc",
        }
    }

    /// Policies that may hold dirty blocks in the cache.
    pub fn is_write_back(self) -> bool {
        matches!(
            self,
            Policy::WriteBack | Policy::WriteBackFlush | Policy::WriteBackOrdered | Policy::Hhc
        )
    }

    pub fn uses_cache(self) -> bool {
        self != Policy::Passthrough
    }

    pub fn uses_log(self) -> bool {
        self == Policy::Hhc
    }

    /// Whether flushed data survives the loss of the cache device.
    pub fn survives_cache_loss(self) -> bool {
        !matches!(self, Policy::WriteBack | Policy::WriteBackOrdered)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| ConfigError::invalid(format!("unknown policy '{s}' (expected one of passthrough, wt, wb, wb-flush, wb-ordered, hhc)")))
    }
}

/// When the sequential cutoff sends a long sequential stream past the cache
/// (like bcache's `sequential_cutoff` and OCF's seq-cutoff policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutoffPolicy {
    /// Never: every request goes through the cache.
    Never,
    /// Only while the cache is full (OCF's default): a stream then evicts
    /// nothing that other work would hit again, and a cache with room keeps
    /// every stream (a sequential warm-up pass is cached).
    Full,
    /// Whenever a stream has reached the threshold (bcache's behaviour).
    Always,
}

impl CutoffPolicy {
    pub const ALL: [CutoffPolicy; 3] = [CutoffPolicy::Never, CutoffPolicy::Full, CutoffPolicy::Always];

    pub fn name(self) -> &'static str {
        match self {
            CutoffPolicy::Never => "never",
            CutoffPolicy::Full => "full",
            CutoffPolicy::Always => "always",
        }
    }

    /// The policy as a gauge value (0 never, 1 full, 2 always).
    pub fn code(self) -> u64 {
        self as u64
    }
}

impl fmt::Display for CutoffPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CutoffPolicy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CutoffPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| ConfigError::invalid(format!("unknown seq_cutoff_policy '{s}' (expected one of never, full, always)")))
    }
}

/// Bounds of `Config::seq_cutoff_threshold_bytes`. Below 64 KiB a few
/// adjacent requests of ordinary random I/O would count as a stream; 4 GiB
/// is OCF's maximum.
pub const SEQ_CUTOFF_THRESHOLD_MIN: u64 = 64 << 10;
pub const SEQ_CUTOFF_THRESHOLD_MAX: u64 = 4 << 30;
/// bcache's default `sequential_cutoff`.
pub const SEQ_CUTOFF_THRESHOLD_DEFAULT: u64 = 4 << 20;
/// Most write-backs in flight (`Config::writeback_parallelism`): each holds
/// a staging run of up to 128 KiB, allocated at creation (128 MiB at most).
pub const WRITEBACK_PARALLELISM_MAX: u32 = 1024;

/// What an operator may change while the engine serves
/// (`Engine::set_options`); the same fields of `Config` at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub dirty_threshold_percent: u8,
    /// At most the value the engine was created with (its staging pool).
    pub writeback_parallelism: u32,
    pub idle_after_ns: Nanos,
    pub seq_cutoff_policy: CutoffPolicy,
    pub seq_cutoff_threshold_bytes: u64,
}

impl Options {
    /// Checks every value; the message names the option at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=100).contains(&self.dirty_threshold_percent) {
            return Err(ConfigError::invalid(format!("dirty_threshold {} must be 1..100 percent", self.dirty_threshold_percent)));
        }
        if !(1..=WRITEBACK_PARALLELISM_MAX).contains(&self.writeback_parallelism) {
            return Err(ConfigError::invalid(format!(
                "writeback_parallelism {} must be 1..{WRITEBACK_PARALLELISM_MAX}",
                self.writeback_parallelism
            )));
        }
        if self.idle_after_ns == 0 {
            // (Nanos::MAX is fine: never idle, as the benchmarks run.)
            return Err(ConfigError::invalid("idle_after 0 must be at least 1 ns"));
        }
        let threshold = self.seq_cutoff_threshold_bytes;
        if !(SEQ_CUTOFF_THRESHOLD_MIN..=SEQ_CUTOFF_THRESHOLD_MAX).contains(&threshold) {
            return Err(ConfigError::invalid(format!(
                "seq_cutoff_threshold {threshold} bytes must be {SEQ_CUTOFF_THRESHOLD_MIN}..{SEQ_CUTOFF_THRESHOLD_MAX}"
            )));
        }
        Ok(())
    }
}

/// A creation parameter that cannot work: its kind (which the FFI turns
/// into an errno) and a message naming the parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub kind: ConfigErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// A value out of its range, malformed, or contradicting another.
    Invalid,
    /// A device too small for what it must hold.
    TooSmall,
    /// A device or count beyond what the on-disk formats address.
    TooLarge,
    /// Something this build cannot do.
    Unsupported,
}

impl ConfigError {
    pub fn invalid(message: impl Into<String>) -> ConfigError {
        ConfigError { kind: ConfigErrorKind::Invalid, message: message.into() }
    }

    pub fn too_small(message: impl Into<String>) -> ConfigError {
        ConfigError { kind: ConfigErrorKind::TooSmall, message: message.into() }
    }

    pub fn too_large(message: impl Into<String>) -> ConfigError {
        ConfigError { kind: ConfigErrorKind::TooLarge, message: message.into() }
    }

    pub fn unsupported(message: impl Into<String>) -> ConfigError {
        ConfigError { kind: ConfigErrorKind::Unsupported, message: message.into() }
    }

    /// The same error, its message after `prefix` (what it was about).
    pub fn prefixed(self, prefix: &str) -> ConfigError {
        ConfigError { message: format!("{prefix}{}", self.message), ..self }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub policy: Policy,
    /// Cache block size = the HHC bdev's block size; power of two, 4–64 KiB.
    pub block_size: u32,
    pub cache_device_bytes: u64,
    /// Capacity of the smallest log mirror (all mirrors use this layout).
    pub log_device_bytes: u64,
    pub mirrors_count: u8,
    /// Bit i: log mirror slot i has no device at the start (the slot of a
    /// detached mirror, kept so that the others keep their indexes). Such a
    /// mirror is failed from the start, never read or written, until one is
    /// attached there (`Engine::handle_mirror_attached`).
    pub mirrors_absent: u16,
    pub backing_device_bytes: u64,
    pub segment_bytes: u32,
    /// Log space left unwritten after a barrier part, when the engine sees
    /// that this makes the next barrier part faster (engine/gap.rs: a
    /// rotating log and a host that sends one barrier at a time); a
    /// multiple of `block_size`, 0 for never. `BARRIER_GAP_BYTES_DEFAULT`
    /// says why its default.
    pub barrier_gap_bytes: u32,
    /// Segment-sized buffers in the log pool (>= 2 for a pipeline); 0 picks
    /// `LOG_BUFFERS_AUTO`, fewer where the log is small
    /// (`Config::log_buffers_for`).
    pub log_buffers_count: u32,
    /// Background write-back keeps dirty blocks under this share of the cache.
    pub dirty_threshold_percent: u8,
    /// Write-backs in flight at most (bounded staging pool).
    pub writeback_parallelism: u32,
    /// The backing device's stripe (a RAID's data bytes per stripe; SPDK's
    /// `optimal_io_boundary`), 0 if it has none: write-back runs then span
    /// up to one stripe and never cross its boundary, so runs of adjacent
    /// dirty blocks become full-stripe writes (no read-modify-write).
    pub backing_stripe_bytes: u32,
    /// Requests the engine holds at most, and blocks they may span together:
    /// its tables and queues are sized for them at creation, and a request
    /// beyond either completes with `RequestError::Busy` (the SPDK module's
    /// -ENOMEM: the bdev layer sends it again once others complete). A
    /// request longer than `request_blocks_max` on its own is out of range.
    pub requests_max: u32,
    pub request_blocks_max: u32,
    /// The device counts as idle after this long without a request.
    pub idle_after_ns: Nanos,
    /// Sequential cutoff (engine/cutoff.rs): when a stream of adjacent
    /// requests in one direction that has reached the threshold bypasses
    /// the cache.
    pub seq_cutoff_policy: CutoffPolicy,
    pub seq_cutoff_threshold_bytes: u64,
    /// The log superblock is rewritten at most this often (and when space needs it).
    pub superblock_interval_ns: Nanos,
    /// A log mirror that leaves a command unanswered this long counts as
    /// failed (engine/mirror_timeout.rs); 0: never.
    pub mirror_timeout_ns: Nanos,
    /// Metadata pages a commit round encodes, or applies once durable, per
    /// call into the engine (engine/commit.rs, `RoundStep`): requests are
    /// served between the steps. At least 1.
    pub commit_step_pages: u32,
    /// Whether the backing device supports FLUSH; without it a completed write
    /// is taken as durable.
    pub backing_has_flush: bool,
    /// Identity written at format time; ties the log to the cache.
    pub instance_id: u64,
    /// A takeover: the instance whose log was replayed before this one was
    /// formatted over the same mirrors (0: none). Every log superblock
    /// carries it, so that the taken-over instance never starts warm again
    /// (docs/format.md, "A replayed log").
    pub previous_instance: u64,
    /// A deliberate defect, for proving that the torture oracle can fail.
    /// Honoured only in builds with the `mutations` feature (the tests);
    /// elsewhere `validate` refuses anything but `Mutation::None`.
    pub mutation: Mutation,
    /// Written opaquely into the cache device's owner record at format (at
    /// most `format::OWNER_BYTES_MAX` bytes): what the owner of the devices
    /// needs to find them again, such as the SPDK module's create
    /// parameters. `Engine::set_owner_record` replaces it later.
    pub owner_record: Vec<u8>,
}

/// Whether this build honours `Config::mutation` (cargo feature `mutations`,
/// which only the tests turn on).
pub const MUTATIONS_BUILT: bool = cfg!(feature = "mutations");

/// Deliberately broken behaviours the torture oracle must catch. The engine
/// reads them through `Engine::mutation`, a constant `None` without the
/// `mutations` feature, so production builds compile every switch away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mutation {
    #[default]
    None,
    /// `hhc` flush completes without waiting for the log segments.
    FlushSkipsLog,
    /// Revokes are queued as soon as the backing write completes, before the
    /// backing device was flushed.
    RevokeBeforeBackingFlush,
    /// Metadata commits skip the cache device flush and write the new mapping
    /// before the data it points to is known to be written.
    CommitBeforeData,
    /// A read hit returns the block of the wrong slot (off by one).
    ReadWrongBlock,
    /// A warm start calls a stale mirror (outside the newest superblock's
    /// in-sync mask) healthy at once instead of re-syncing it.
    StaleMirrorHealthy,
    /// A mirror attached online is called healthy at once instead of
    /// syncing (it lacks every entry logged before it joined).
    AttachedMirrorHealthy,
    /// The log's head passes a segment whose entries are dead only by
    /// supersession before a durable barrier covers the superseding entries
    /// (`LogManager::advance_head`), so a cache-loss replay, which stops at
    /// the last durable barrier, may find neither copy.
    SupersededFreedEarly,
    /// Every part records a head one segment past the log's (within the
    /// part's own segment), so a cache-loss replay, which starts at the
    /// newest recorded head, skips a segment that may hold live entries.
    RecordedHeadTooFar,
}

/// Largest backing stripe write-back aligns to: every write-back in flight
/// has a staging extent of a whole run (`writeback_parallelism` x this).
pub const BACKING_STRIPE_BYTES_MAX: u32 = 1 << 20;

/// `Config::mirror_timeout_ns` by default: far beyond an HDD's command
/// time under a deep queue (tens of milliseconds), within what an
/// application waits for a flush.
pub const MIRROR_TIMEOUT_NS_DEFAULT: Nanos = 10_000_000_000;

/// The default gap after a barrier part: 128 KiB is one millisecond of a
/// 7,200 rpm disk's outer tracks (125 MB/s), about a journalling host's
/// turnaround from one commit's FLUSH completing to the next one's (the
/// simulator's varmail: fixed 128 KiB segments, one barrier per slot, gave
/// a flush p50 of 0.9 ms against 8.3 ms packed). A shorter turnaround waits
/// the difference; a longer one misses the sector, which the engine sees,
/// and then stops leaving gaps.
pub const BARRIER_GAP_BYTES_DEFAULT: u32 = 128 << 10;

/// Largest gap after a barrier part: a gap that leaves no room for another
/// part ends the segment instead (log/mod.rs, `seal`), so one beyond the
/// largest segment could never mean more than that.
pub const BARRIER_GAP_BYTES_MAX: u32 = crate::format::SEGMENT_MAX_BYTES;

/// Log buffers by default (`log_buffers_count` 0). A buffer is busy until
/// its segment is on every mirror, so the pool bounds the log's bandwidth:
/// with 4, an HDD log took 48 MB/s and the writes beyond it went unlogged,
/// to be read back from the cache device (fileserver in the simulator: 107 K
/// blocks re-logged against 5 K copied, flush p50 1.2 s); with 16 it keeps up.
pub const LOG_BUFFERS_AUTO: u32 = 16;

impl Default for Config {
    fn default() -> Self {
        Config {
            policy: Policy::Hhc,
            block_size: 4096,
            cache_device_bytes: 256 << 20,
            log_device_bytes: 256 << 20,
            mirrors_count: 1,
            mirrors_absent: 0,
            backing_device_bytes: 1 << 30,
            segment_bytes: 1 << 20,
            barrier_gap_bytes: BARRIER_GAP_BYTES_DEFAULT,
            log_buffers_count: 0,
            dirty_threshold_percent: 30,
            writeback_parallelism: 64,
            backing_stripe_bytes: 0,
            requests_max: 4096,
            request_blocks_max: 8192,
            idle_after_ns: 50_000_000,
            // Off: a warmed cache is always full, so OCF's `full` would cut
            // streams off in steady state and send their writes to the slow
            // backing device (docs/engine.md). bcache's threshold for when
            // it is turned on.
            seq_cutoff_policy: CutoffPolicy::Never,
            seq_cutoff_threshold_bytes: SEQ_CUTOFF_THRESHOLD_DEFAULT,
            superblock_interval_ns: 5_000_000_000,
            mirror_timeout_ns: MIRROR_TIMEOUT_NS_DEFAULT,
            commit_step_pages: COMMIT_STEP_PAGES_DEFAULT,
            backing_has_flush: true,
            instance_id: 0x4848_4300_0000_0001,
            previous_instance: 0,
            mutation: Mutation::None,
            owner_record: Vec::new(),
        }
    }
}

/// `Config::commit_step_pages`: 4,064 entries, tens of microseconds. A
/// round of 256 pages done at once held up every request of the SPDK
/// poller pass it ran in for a few hundred microseconds.
pub const COMMIT_STEP_PAGES_DEFAULT: u32 = 16;

/// Where each structure lives on the cache device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLayout {
    pub block_size: u32,
    pub blocks_count: u64,
    pub meta_pages_count: u32,
    /// Byte offset of metadata slot A; slot B follows it.
    pub meta_offset_bytes: u64,
    pub data_offset_bytes: u64,
}

impl CacheLayout {
    pub fn meta_page_offset(&self, page: u32, slot_b: bool) -> u64 {
        let slot = if slot_b { self.meta_pages_count as u64 } else { 0 };
        self.meta_offset_bytes + (slot + page as u64) * UNIT_BYTES as u64
    }

    pub fn block_offset(&self, block: u64) -> u64 {
        self.data_offset_bytes + block * self.block_size as u64
    }
}

/// Where each structure lives on a log mirror.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLayout {
    pub segment: SegmentLayout,
    pub segments_count: u32,
    pub segments_offset_bytes: u64,
}

impl LogLayout {
    pub fn segment_offset(&self, segment_index: u32) -> u64 {
        self.segments_offset_bytes + segment_index as u64 * self.segment.segment_bytes as u64
    }
}

fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

impl Config {
    /// The values an operator may change online.
    pub fn options(&self) -> Options {
        Options {
            dirty_threshold_percent: self.dirty_threshold_percent,
            writeback_parallelism: self.writeback_parallelism,
            idle_after_ns: self.idle_after_ns,
            seq_cutoff_policy: self.seq_cutoff_policy,
            seq_cutoff_threshold_bytes: self.seq_cutoff_threshold_bytes,
        }
    }

    pub fn set_options(&mut self, options: Options) {
        self.dirty_threshold_percent = options.dirty_threshold_percent;
        self.writeback_parallelism = options.writeback_parallelism;
        self.idle_after_ns = options.idle_after_ns;
        self.seq_cutoff_policy = options.seq_cutoff_policy;
        self.seq_cutoff_threshold_bytes = options.seq_cutoff_threshold_bytes;
    }

    pub fn backing_blocks(&self) -> u64 {
        self.backing_device_bytes / self.block_size as u64
    }

    /// Checks every parameter and derives the device layouts.
    pub fn validate(&self) -> Result<(CacheLayout, LogLayout), ConfigError> {
        if self.mutation != Mutation::None && !MUTATIONS_BUILT {
            return Err(ConfigError::unsupported(format!("mutation {:?} needs a build with the `mutations` feature", self.mutation)));
        }
        if self.commit_step_pages == 0 {
            return Err(ConfigError::invalid("commit_step_pages must be at least 1"));
        }
        let bs = self.block_size;
        if !(4096..=65536).contains(&bs) || !bs.is_power_of_two() {
            return Err(ConfigError::invalid(format!("block_size {bs} must be a power of two between 4096 and 65536")));
        }
        self.options().validate()?;
        if self.mirrors_count > crate::format::LOG_MIRRORS_MAX {
            return Err(ConfigError::invalid(format!("{} log mirrors; at most {} are supported", self.mirrors_count, crate::format::LOG_MIRRORS_MAX)));
        }
        if self.mirrors_absent >> self.mirrors_count.min(crate::format::LOG_MIRRORS_MAX) != 0 {
            return Err(ConfigError::invalid(format!("absent mirrors {:#x} beyond the {} log mirrors", self.mirrors_absent, self.mirrors_count)));
        }
        if self.mirrors_count == 0 && self.policy.uses_log() {
            return Err(ConfigError::invalid("policy hhc needs at least one log device"));
        }
        let stripe = self.backing_stripe_bytes;
        if stripe != 0 && (!stripe.is_multiple_of(bs) || stripe > BACKING_STRIPE_BYTES_MAX) {
            return Err(ConfigError::invalid(format!(
                "backing_stripe {stripe} bytes must be a multiple of block_size {bs} and at most {BACKING_STRIPE_BYTES_MAX}"
            )));
        }
        if !self.barrier_gap_bytes.is_multiple_of(bs) || self.barrier_gap_bytes > BARRIER_GAP_BYTES_MAX {
            return Err(ConfigError::invalid(format!(
                "barrier_gap {} bytes must be a multiple of block_size {bs} and at most {BARRIER_GAP_BYTES_MAX}",
                self.barrier_gap_bytes
            )));
        }
        if self.owner_record.len() > crate::format::OWNER_BYTES_MAX {
            return Err(ConfigError::invalid(format!(
                "owner record of {} bytes; at most {}",
                self.owner_record.len(),
                crate::format::OWNER_BYTES_MAX
            )));
        }
        if self.log_buffers_count == 1 {
            return Err(ConfigError::invalid(format!("buffer_count {} must be 0 (automatic) or at least 2", self.log_buffers_count)));
        }
        if self.requests_max == 0 || self.request_blocks_max == 0 {
            return Err(ConfigError::invalid(format!(
                "requests_max {} and request_blocks_max {} must be at least 1",
                self.requests_max, self.request_blocks_max
            )));
        }
        if self.backing_blocks() == 0 {
            return Err(ConfigError::too_small("backing device is smaller than one cache block"));
        }
        if self.backing_blocks() >= u32::MAX as u64 {
            return Err(ConfigError::too_large(format!(
                "backing device of {} blocks exceeds the 2^32-1 block limit of the cache index (use a larger block_size)",
                self.backing_blocks()
            )));
        }
        let cache = self.cache_layout()?;
        let segment = SegmentLayout::new(self.segment_bytes, bs)
            .map_err(|e| ConfigError::invalid(format!("segment_size {} with block_size {bs}: {e}", self.segment_bytes)))?;
        let segments_offset_bytes = align_up(2 * UNIT_BYTES as u64, bs as u64);
        let segments_count = (self.log_device_bytes.saturating_sub(segments_offset_bytes) / self.segment_bytes as u64)
            .min(u32::MAX as u64) as u32;
        let buffers = self.log_buffers_for(segments_count);
        if self.mirrors_count > 0 && segments_count < 2 * buffers + 2 {
            return Err(ConfigError::too_small(format!(
                "log device of {} bytes holds {segments_count} segments of {} bytes; at least {} are needed",
                self.log_device_bytes,
                self.segment_bytes,
                2 * buffers + 2
            )));
        }
        Ok((cache, LogLayout { segment, segments_count, segments_offset_bytes }))
    }

    /// The log buffers a log of `segments_count` segments gets: the count
    /// asked for, or with 0, `LOG_BUFFERS_AUTO` where the log holds it
    /// comfortably (an eighth of its segments), never under 2.
    pub fn log_buffers_for(&self, segments_count: u32) -> u32 {
        match self.log_buffers_count {
            0 => LOG_BUFFERS_AUTO.min(segments_count / 8).max(2),
            asked => asked,
        }
    }

    fn cache_layout(&self) -> Result<CacheLayout, ConfigError> {
        let bs = self.block_size as u64;
        let unit = UNIT_BYTES as u64;
        let per_page = crate::format::META_ENTRIES_PER_PAGE as u64;
        // The superblock and the owner record's copies come first.
        let meta_offset = crate::format::CACHE_HEADER_UNITS * unit;
        // Each block costs its data plus two metadata entries (slots A and B).
        let usable = self.cache_device_bytes.saturating_sub(meta_offset + bs);
        let mut blocks = usable / (bs + 2 * unit / per_page);
        loop {
            let pages = blocks.div_ceil(per_page);
            let data_offset = align_up(meta_offset + 2 * pages * unit, bs);
            if data_offset + blocks * bs <= self.cache_device_bytes || blocks == 0 {
                break;
            }
            blocks -= 1;
        }
        if blocks < 16 {
            return Err(ConfigError::too_small(format!(
                "cache device of {} bytes holds {blocks} blocks of {bs} bytes; at least 16 are needed",
                self.cache_device_bytes
            )));
        }
        let meta_pages_count = blocks.div_ceil(per_page) as u32;
        Ok(CacheLayout {
            block_size: self.block_size,
            blocks_count: blocks,
            meta_pages_count,
            meta_offset_bytes: meta_offset,
            data_offset_bytes: align_up(meta_offset + 2 * meta_pages_count as u64 * unit, bs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_says_its_kind() {
        let kind = |config: Config| config.validate().expect_err("must be refused").kind;
        let ok = Config::default();
        assert!(ok.validate().is_ok());
        assert_eq!(kind(Config { dirty_threshold_percent: 0, ..ok.clone() }), ConfigErrorKind::Invalid);
        assert_eq!(kind(Config { block_size: 3000, ..ok.clone() }), ConfigErrorKind::Invalid);
        assert_eq!(kind(Config { cache_device_bytes: 64 << 10, ..ok.clone() }), ConfigErrorKind::TooSmall);
        assert_eq!(kind(Config { log_device_bytes: 4 << 20, ..ok.clone() }), ConfigErrorKind::TooSmall);
        assert_eq!(kind(Config { backing_device_bytes: 1024, ..ok.clone() }), ConfigErrorKind::TooSmall);
        assert_eq!(kind(Config { backing_device_bytes: 4096 << 32, ..ok.clone() }), ConfigErrorKind::TooLarge);
        if !MUTATIONS_BUILT {
            assert_eq!(kind(Config { mutation: Mutation::FlushSkipsLog, ..ok }), ConfigErrorKind::Unsupported);
        }
    }
}
