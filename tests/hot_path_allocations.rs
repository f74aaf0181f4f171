//! The engine allocates nothing per request once warm: every policy runs a
//! mix of reads (hits and misses), writes, overwrites and flushes over twice
//! the cache's size (so eviction, write-back, log reclamation and commits all
//! run), and the heap is watched while the same mix runs again.
//! `HHC_ALLOC_TRACE=1` prints a backtrace of each allocation counted.

use hhc::bench::{config, NullDriver};
use hhc::config::Policy;
use hhc::io::RequestKind;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct CountingAllocator;

static WATCHING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// `HHC_ALLOC_TRACE` read before watching (reading it allocates).
static TRACE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while a backtrace is taken, which allocates too.
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if !WATCHING.load(Ordering::Relaxed) || TRACING.with(Cell::get) {
        return;
    }
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    if TRACE.load(Ordering::Relaxed) {
        TRACING.with(|t| t.set(true));
        eprintln!("allocation:\n{}", std::backtrace::Backtrace::force_capture());
        TRACING.with(|t| t.set(false));
    }
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const CACHE_BYTES: u64 = 16 << 20;
const BLOCKS: u64 = CACHE_BYTES / 4096;
const OPERATIONS: u64 = if cfg!(debug_assertions) { 10_000 } else { 40_000 };

/// A deterministic mix over twice the cache: 1 in 16 requests a flush, then
/// reads and writes half and half, with hot and cold LBAs.
fn run_mix(driver: &mut NullDriver, first_id: u64, data: &Vec<u8>) {
    let mut state = 0x2545_f491_4f6c_dd1du64 ^ first_id;
    for i in 0..OPERATIONS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let lba = if state.is_multiple_of(4) { (state >> 32) % (2 * BLOCKS) } else { (state >> 8) % (BLOCKS / 8) };
        let id = first_id + i;
        match i % 16 {
            15 => driver.request(id, RequestKind::Flush, 0, None),
            n if n % 2 == 0 => driver.request(id, RequestKind::Read, lba, None),
            _ => driver.request(id, RequestKind::Write, lba, Some(data)),
        }
    }
}

fn allocations_when_warm(policy: Policy) -> u64 {
    let mut driver = NullDriver::new(config(policy, CACHE_BYTES));
    let data = vec![0x5a; 4096];
    for pass in 0..3 {
        run_mix(&mut driver, pass * OPERATIONS, &data);
    }
    let before = driver.engine.stats();
    ALLOCATIONS.store(0, Ordering::Relaxed);
    WATCHING.store(true, Ordering::Relaxed);
    run_mix(&mut driver, 3 * OPERATIONS, &data);
    WATCHING.store(false, Ordering::Relaxed);
    let after = driver.engine.stats();
    // The watched pass did the work it is meant to watch.
    let requests = |s: &hhc::engine::Stats| s.reads + s.writes + s.flushes;
    assert_eq!(requests(&after), requests(&before) + OPERATIONS, "{policy}: requests went missing");
    if policy.uses_cache() {
        assert!(after.read_misses > before.read_misses, "{policy}: no read missed");
        assert!(after.evictions > before.evictions && after.commits > before.commits, "{policy}: no eviction or commit");
    }
    if policy.is_write_back() {
        assert!(after.writebacks > before.writebacks, "{policy}: nothing written back");
    }
    if policy == Policy::Hhc {
        assert!(after.log_segments_written > before.log_segments_written, "hhc: no log segment written");
    }
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// One test for all policies: the counter is global to the process.
#[test]
fn a_warm_engine_allocates_nothing_per_request() {
    TRACE.store(std::env::var_os("HHC_ALLOC_TRACE").is_some(), Ordering::Relaxed);
    let mut found = Vec::new();
    for policy in Policy::ALL {
        let allocations = allocations_when_warm(policy);
        if allocations > 0 {
            found.push(format!("{policy}: {allocations} allocations in {OPERATIONS} requests"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
