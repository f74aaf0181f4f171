//! Block-level versions of the Filebench personalities of the paper (§3.1).
//! Files are fixed LBA extents laid out one after another behind an ext4-like
//! journal area; each thread is a closed-loop requester that runs its
//! personality's flowop loop with no think time. Whole-file reads and writes
//! are cut into requests of at most `MAX_REQUEST_BLOCKS`, as the block layer
//! does. `Op::Fsync` is an ext4 fsync: the runner hands it to the journal
//! model (journal.rs), which turns it into a group commit.

use crate::simcore::prng::Prng;

/// 128 KiB in 4 KiB blocks: the largest request a thread issues.
pub const MAX_REQUEST_BLOCKS: u32 = 32;
/// ext4's default journal for file systems above 128 GiB: 128 MiB.
pub const JOURNAL_AREA_BLOCKS: u64 = 32 * 1024;
/// ext4 commits a transaction 5 s after it started (`commit=` default).
pub const EXT4_COMMIT_INTERVAL_NS: u64 = 5_000_000_000;
/// Writers stall once this much has been written since the committing
/// transaction: the host's dirty-page limit (dirty_ratio 20 % of the paper's
/// 512 MiB hosts, rounded down) expressed in blocks.
pub const HOST_DIRTY_LIMIT_BLOCKS: u64 = (64 << 20) / 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read { lba: u64, blocks: u32 },
    Write { lba: u64, blocks: u32 },
    /// fsync(2): wait until a journal commit covers this thread's writes.
    Fsync,
    /// A bare bdev FLUSH (the user-described job).
    Flush,
}

/// A user-described job: `read=70,size_kib=16,threads=8,flush_every=4,working_set_mib=1024,random=1`.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomJob {
    pub read_percent: u32,
    pub request_blocks: u32,
    pub threads: usize,
    /// A FLUSH after every this many writes of a thread (0: never).
    pub flush_every_writes: u32,
    pub working_set_blocks: u64,
    pub random: bool,
}

impl Default for CustomJob {
    fn default() -> Self {
        CustomJob {
            read_percent: 70,
            request_blocks: 4,
            threads: 16,
            flush_every_writes: 8,
            working_set_blocks: (1 << 30) / 4096,
            random: true,
        }
    }
}

impl CustomJob {
    pub fn parse(text: &str) -> Result<CustomJob, String> {
        let mut job = CustomJob::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("job: expected key=value, got '{pair}'"))?;
            let number: u64 = value.trim().parse().map_err(|_| format!("job: '{value}' is not a whole number"))?;
            match key.trim() {
                "read" if number <= 100 => job.read_percent = number as u32,
                "size_kib" if number >= 4 && number.is_multiple_of(4) && number <= 1024 => job.request_blocks = (number / 4) as u32,
                "threads" if (1..=1024).contains(&number) => job.threads = number as usize,
                "flush_every" => job.flush_every_writes = number as u32,
                "working_set_mib" if number >= 1 => job.working_set_blocks = number * 256,
                "random" if number <= 1 => job.random = number == 1,
                "read" | "size_kib" | "threads" | "working_set_mib" | "random" => {
                    return Err(format!("job: {key}={value} is out of range"))
                }
                _ => return Err(format!("job: unknown key '{key}' (read, size_kib, threads, flush_every, working_set_mib, random)")),
            }
        }
        if job.working_set_blocks < job.request_blocks as u64 {
            return Err("job: working_set_mib is smaller than one request".into());
        }
        Ok(job)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadKind {
    Websearch,
    Fileserver,
    Varmail,
    Custom(CustomJob),
}

impl WorkloadKind {
    /// A personality by name (websearch, fileserver, varmail) or a custom
    /// job's `key=value` list.
    pub fn parse(text: &str) -> Result<WorkloadKind, String> {
        match text.trim() {
            "websearch" => Ok(WorkloadKind::Websearch),
            "fileserver" => Ok(WorkloadKind::Fileserver),
            "varmail" => Ok(WorkloadKind::Varmail),
            job => CustomJob::parse(job).map(WorkloadKind::Custom),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadKind::Websearch => "websearch",
            WorkloadKind::Fileserver => "fileserver",
            WorkloadKind::Varmail => "varmail",
            WorkloadKind::Custom(_) => "custom",
        }
    }

    /// Threads the paper (or Filebench's default personality) uses.
    pub fn default_threads(&self) -> usize {
        match self {
            WorkloadKind::Websearch => 40,
            WorkloadKind::Fileserver => 50,
            WorkloadKind::Varmail => 16,
            WorkloadKind::Custom(job) => job.threads,
        }
    }
}

/// How a file set looks: file count, size range, and append headroom.
struct FileSetShape {
    files_count: u64,
    size_blocks_min: u32,
    size_blocks_max: u32,
    /// Room behind each file for appends before it counts as recreated.
    slack_blocks: u32,
}

impl FileSetShape {
    /// The paper's file sets (§3.1), shrunk by `scale`.
    fn of(kind: &WorkloadKind, scale: f64) -> FileSetShape {
        let scaled = |count: f64| ((count * scale).round() as u64).max(64);
        match kind {
            // 100 000 files of 16 KiB on average: 1.6 GB.
            WorkloadKind::Websearch => FileSetShape { files_count: scaled(100_000.0), size_blocks_min: 1, size_blocks_max: 7, slack_blocks: 0 },
            // 128 KiB files, 2.2 GB.
            WorkloadKind::Fileserver => FileSetShape { files_count: scaled(16_800.0), size_blocks_min: 16, size_blocks_max: 48, slack_blocks: 8 },
            // 16 KiB mail files, 1.6 GB.
            WorkloadKind::Varmail => FileSetShape { files_count: scaled(100_000.0), size_blocks_min: 1, size_blocks_max: 7, slack_blocks: 4 },
            WorkloadKind::Custom(_) => FileSetShape { files_count: 0, size_blocks_min: 0, size_blocks_max: 0, slack_blocks: 0 },
        }
    }
}

struct File {
    lba: u64,
    /// The size Filebench gave the file at creation; whole-file writes write it.
    size_blocks: u32,
    capacity_blocks: u32,
    length_blocks: u32,
}

struct ThreadState {
    rng: Prng,
    pending: std::collections::VecDeque<Op>,
    writes_since_flush: u32,
    /// Next request slot of a sequential custom job.
    cursor_slot: u64,
}

pub struct Workload {
    kind: WorkloadKind,
    files: Vec<File>,
    files_end_lba: u64,
    /// websearch's shared access log: appended sequentially, wraps.
    log_area: (u64, u64),
    log_cursor_blocks: u64,
    threads: Vec<ThreadState>,
    /// An fsync is a bare FLUSH (`Op::Flush`), with no journal in between.
    fsync_as_flush: bool,
}

/// 64 MiB for websearch's access log file.
const WEB_LOG_BLOCKS: u64 = 16 * 1024;

impl Workload {
    pub fn new(kind: WorkloadKind, threads_count: usize, scale: f64, seed: u64) -> Workload {
        let shape = FileSetShape::of(&kind, scale);
        let mut layout_rng = Prng::labelled(seed, u64::MAX);
        let mut next_lba = JOURNAL_AREA_BLOCKS;
        let files: Vec<File> = (0..shape.files_count)
            .map(|_| {
                let spread = (shape.size_blocks_max - shape.size_blocks_min + 1) as u64;
                let size_blocks = shape.size_blocks_min + layout_rng.below(spread) as u32;
                let file = File { lba: next_lba, size_blocks, capacity_blocks: size_blocks + shape.slack_blocks, length_blocks: size_blocks };
                next_lba += file.capacity_blocks as u64;
                file
            })
            .collect();
        let files_end_lba = match &kind {
            WorkloadKind::Custom(job) => JOURNAL_AREA_BLOCKS + job.working_set_blocks,
            _ => next_lba,
        };
        let threads = (0..threads_count)
            .map(|t| ThreadState {
                rng: Prng::labelled(seed, t as u64),
                pending: Default::default(),
                writes_since_flush: 0,
                // Sequential streams start spread over the working set.
                cursor_slot: match &kind {
                    WorkloadKind::Custom(job) => t as u64 * (job.working_set_blocks / job.request_blocks as u64) / threads_count as u64,
                    _ => 0,
                },
            })
            .collect();
        Workload {
            kind,
            files,
            files_end_lba,
            log_area: (files_end_lba, WEB_LOG_BLOCKS),
            log_cursor_blocks: 0,
            threads,
            fsync_as_flush: false,
        }
    }

    /// The same op streams with every fsync a bare FLUSH of its thread and
    /// no journal: what fio does replaying the workload's trace.
    pub fn with_fsync_as_flush(mut self) -> Workload {
        self.fsync_as_flush = true;
        self
    }

    pub fn kind(&self) -> &WorkloadKind {
        &self.kind
    }

    pub fn threads_count(&self) -> usize {
        self.threads.len()
    }

    /// Blocks the workload may touch (journal, files, log): the backing
    /// device must be at least this large.
    pub fn address_space_blocks(&self) -> u64 {
        self.log_area.0 + self.log_area.1
    }

    /// Blocks holding file data at the start: the working set.
    pub fn working_set_blocks(&self) -> u64 {
        match &self.kind {
            WorkloadKind::Custom(job) => job.working_set_blocks,
            _ => self.files.iter().map(|f| f.length_blocks as u64).sum(),
        }
    }

    /// The extent a warm-up reads so the cache starts full of the file set.
    pub fn file_area(&self) -> (u64, u64) {
        (JOURNAL_AREA_BLOCKS, self.files_end_lba - JOURNAL_AREA_BLOCKS)
    }

    /// Whether the ext4 journal model applies (not to the raw custom job).
    pub fn uses_journal(&self) -> bool {
        !matches!(self.kind, WorkloadKind::Custom(_)) && !self.fsync_as_flush
    }

    pub fn next_op(&mut self, thread: usize) -> Op {
        loop {
            match self.threads[thread].pending.pop_front() {
                Some(Op::Fsync) if self.fsync_as_flush => return Op::Flush,
                Some(op) => return op,
                None => {}
            }
            self.plan_iteration(thread);
        }
    }

    fn plan_iteration(&mut self, thread: usize) {
        match self.kind.clone() {
            WorkloadKind::Websearch => self.plan_websearch(thread),
            WorkloadKind::Fileserver => self.plan_fileserver(thread),
            WorkloadKind::Varmail => self.plan_varmail(thread),
            WorkloadKind::Custom(job) => self.plan_custom(thread, &job),
        }
    }

    fn random_file(&mut self, thread: usize) -> usize {
        self.threads[thread].rng.below(self.files.len() as u64) as usize
    }

    fn push_extent(&mut self, thread: usize, write: bool, lba: u64, blocks: u32) {
        let mut done = 0;
        while done < blocks {
            let piece = (blocks - done).min(MAX_REQUEST_BLOCKS);
            let lba = lba + done as u64;
            let op = if write { Op::Write { lba, blocks: piece } } else { Op::Read { lba, blocks: piece } };
            self.threads[thread].pending.push_back(op);
            done += piece;
        }
    }

    fn read_whole_file(&mut self, thread: usize, file: usize) {
        let (lba, length) = (self.files[file].lba, self.files[file].length_blocks);
        self.push_extent(thread, false, lba, length);
    }

    /// appendfilerand: 1-7 blocks (16 KiB on average) at the end of the file;
    /// a file that outgrows its extent is taken as deleted and recreated.
    fn append_file(&mut self, thread: usize, file: usize) {
        let blocks = 1 + self.threads[thread].rng.below(7) as u32;
        let entry = &mut self.files[file];
        if entry.length_blocks + blocks > entry.capacity_blocks {
            entry.length_blocks = 0;
        }
        let lba = entry.lba + entry.length_blocks as u64;
        entry.length_blocks += blocks;
        self.push_extent(thread, true, lba, blocks);
    }

    /// webserver.f: ten whole-file reads, then one 16 KiB append to the log.
    fn plan_websearch(&mut self, thread: usize) {
        for _ in 0..10 {
            let file = self.random_file(thread);
            self.read_whole_file(thread, file);
        }
        let blocks = 4;
        let (log_lba, log_blocks) = self.log_area;
        if self.log_cursor_blocks + blocks > log_blocks {
            self.log_cursor_blocks = 0;
        }
        let lba = log_lba + self.log_cursor_blocks;
        self.log_cursor_blocks += blocks;
        self.push_extent(thread, true, lba, blocks as u32);
    }

    /// fileserver.f: create + write a whole file, append to a file, read a
    /// whole file (delete and stat do no data I/O).
    fn plan_fileserver(&mut self, thread: usize) {
        let written = self.random_file(thread);
        let entry = &mut self.files[written];
        entry.length_blocks = entry.size_blocks;
        let (lba, size) = (entry.lba, entry.size_blocks);
        self.push_extent(thread, true, lba, size);
        let appended = self.random_file(thread);
        self.append_file(thread, appended);
        let read = self.random_file(thread);
        self.read_whole_file(thread, read);
    }

    /// varmail.f: delete + create + append + fsync, open + append + fsync,
    /// two whole-file reads.
    fn plan_varmail(&mut self, thread: usize) {
        let created = self.random_file(thread);
        self.files[created].length_blocks = 0;
        self.append_file(thread, created);
        self.threads[thread].pending.push_back(Op::Fsync);
        let appended = self.random_file(thread);
        self.append_file(thread, appended);
        self.threads[thread].pending.push_back(Op::Fsync);
        for _ in 0..2 {
            let file = self.random_file(thread);
            self.read_whole_file(thread, file);
        }
    }

    fn plan_custom(&mut self, thread: usize, job: &CustomJob) {
        let state = &mut self.threads[thread];
        let slots = job.working_set_blocks / job.request_blocks as u64;
        let slot = if job.random {
            state.rng.below(slots)
        } else {
            state.cursor_slot = (state.cursor_slot + 1) % slots;
            state.cursor_slot
        };
        let lba = JOURNAL_AREA_BLOCKS + slot * job.request_blocks as u64;
        let blocks = job.request_blocks;
        if state.rng.below(100) < job.read_percent as u64 {
            state.pending.push_back(Op::Read { lba, blocks });
            return;
        }
        state.pending.push_back(Op::Write { lba, blocks });
        state.writes_since_flush += 1;
        if job.flush_every_writes > 0 && state.writes_since_flush.is_multiple_of(job.flush_every_writes) {
            state.pending.push_back(Op::Flush);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Mix {
        reads: u64,
        writes: u64,
        read_blocks: u64,
        write_blocks: u64,
        fsyncs: u64,
        flushes: u64,
    }

    fn mix_of(kind: WorkloadKind, scale: f64, ops: usize) -> Mix {
        let mut workload = Workload::new(kind, 4, scale, 11);
        let limit = workload.address_space_blocks();
        let mut mix = Mix::default();
        for i in 0..ops {
            match workload.next_op(i % 4) {
                Op::Read { lba, blocks } => {
                    assert!(lba + blocks as u64 <= limit && blocks <= MAX_REQUEST_BLOCKS && blocks > 0);
                    mix.reads += 1;
                    mix.read_blocks += blocks as u64;
                }
                Op::Write { lba, blocks } => {
                    assert!(lba >= JOURNAL_AREA_BLOCKS && lba + blocks as u64 <= limit && blocks <= MAX_REQUEST_BLOCKS);
                    mix.writes += 1;
                    mix.write_blocks += blocks as u64;
                }
                Op::Fsync => mix.fsyncs += 1,
                Op::Flush => mix.flushes += 1,
            }
        }
        mix
    }

    #[test]
    fn websearch_reads_ten_files_per_append() {
        let mix = mix_of(WorkloadKind::Websearch, 0.01, 11_000);
        assert_eq!(mix.reads, 10 * mix.writes);
        assert_eq!(mix.write_blocks, 4 * mix.writes);
        let mean_read_kib = mix.read_blocks as f64 * 4.0 / mix.reads as f64;
        assert!((14.0..18.0).contains(&mean_read_kib), "{mean_read_kib}");
        assert_eq!(mix.fsyncs + mix.flushes, 0);
    }

    #[test]
    fn fileserver_writes_twice_as_often_as_it_reads() {
        let mix = mix_of(WorkloadKind::Fileserver, 0.05, 30_000);
        let ratio = mix.writes as f64 / mix.reads as f64;
        assert!((1.6..2.4).contains(&ratio), "{ratio} {mix:?}");
        assert_eq!(mix.fsyncs, 0);
    }

    #[test]
    fn varmail_fsyncs_after_every_append() {
        let mix = mix_of(WorkloadKind::Varmail, 0.01, 30_000);
        assert!(mix.fsyncs.abs_diff(mix.writes) <= 4, "{mix:?}");
        assert!(mix.reads.abs_diff(mix.writes) <= 8, "{mix:?}");
        let mean_append_kib = mix.write_blocks as f64 * 4.0 / mix.writes as f64;
        assert!((14.0..18.0).contains(&mean_append_kib), "{mean_append_kib}");
    }

    #[test]
    fn working_sets_match_the_paper_at_full_scale() {
        for (kind, gb) in [(WorkloadKind::Websearch, 1.6), (WorkloadKind::Fileserver, 2.2), (WorkloadKind::Varmail, 1.6)] {
            let workload = Workload::new(kind, 1, 1.0, 1);
            let measured_gb = workload.working_set_blocks() as f64 * 4096.0 / 1e9;
            assert!((measured_gb - gb).abs() / gb < 0.1, "{measured_gb} vs {gb}");
            let half = Workload::new(workload.kind().clone(), 1, 0.5, 1).working_set_blocks() as f64 * 4096.0 / 1e9;
            assert!((half * 2.0 - measured_gb).abs() / measured_gb < 0.05, "scale 0.5: {half}");
        }
    }

    #[test]
    fn custom_job_follows_its_mix_and_flush_interval() {
        let job = CustomJob::parse("read=25,size_kib=8,threads=4,flush_every=3,working_set_mib=64,random=1").unwrap();
        let mix = mix_of(WorkloadKind::Custom(job), 1.0, 40_000);
        let read_share = mix.reads as f64 / (mix.reads + mix.writes) as f64;
        assert!((0.22..0.28).contains(&read_share), "{read_share}");
        assert!(mix.flushes.abs_diff(mix.writes / 3) <= 4, "{mix:?}");
        assert_eq!(mix.read_blocks, 2 * mix.reads);
        assert!(CustomJob::parse("read=101").is_err());
        assert!(CustomJob::parse("color=1").is_err());
    }

    #[test]
    fn same_seed_same_operations() {
        let run = |seed| {
            let mut workload = Workload::new(WorkloadKind::Fileserver, 3, 0.01, seed);
            (0..500).map(|i| workload.next_op(i % 3)).collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
