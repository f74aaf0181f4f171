//! A commit round of many metadata pages is encoded, and applied once
//! durable, `commit_step_pages` pages per call into the engine
//! (engine/commit.rs, `RoundStep`), so requests are served between the
//! steps. Done at once, a round of 256 pages (65,536 entries) held up every
//! request of the SPDK poller pass it ran in. `blocks_visited` counts the
//! encoding, so that is what the test sees of the steps.

use hhc::config::{Config, Policy};
use hhc::driver::harness::Harness;
use hhc::engine::Timer;
use hhc::format::META_ENTRIES_PER_PAGE;

const BS: usize = 4096;
const STEP_PAGES: u32 = 4;
const ENTRIES_PER_PAGE: u64 = META_ENTRIES_PER_PAGE as u64;

fn stepped_config() -> Config {
    Config {
        // Write-through: every block written is mapped and clean, so the
        // only blocks visited are the commits' (no write-back scan, no
        // eviction in a cache this size).
        policy: Policy::WriteThrough,
        cache_device_bytes: 40 << 20,
        log_device_bytes: 16 << 20,
        backing_device_bytes: 64 << 20,
        segment_bytes: 256 << 10,
        commit_step_pages: STEP_PAGES,
        ..Config::default()
    }
}

/// Blocks visited (`Stats::blocks_visited`) by the call into the engine
/// that visited the most, and by all of them.
#[derive(Default)]
struct Visits {
    seen: u64,
    most: u64,
    /// Timers that brought the engine back for a commit's next step.
    commit_step_timers: u32,
}

impl Visits {
    /// After each call into the engine.
    fn note(&mut self, harness: &Harness) {
        let visited = harness.engine.stats().blocks_visited;
        self.most = self.most.max(visited - self.seen);
        self.seen = visited;
    }

    /// Submits a request and drives `harness` until it completes, a call
    /// at a time.
    fn run(&mut self, harness: &mut Harness, submit: impl FnOnce(&mut Harness) -> u64) {
        self.note(harness);
        let id = submit(harness);
        self.note(harness);
        self.run_until(harness, |h| h.is_done(id));
        harness.take_result(id).expect("done").0.expect("request");
    }

    /// Drives `harness` a call at a time (a completion, else the timer it
    /// asks for) until `done`.
    fn run_until(&mut self, harness: &mut Harness, done: impl Fn(&Harness) -> bool) {
        while !done(harness) {
            if !harness.step() && !done(harness) {
                let (timer, at) = harness.engine.next_timer().expect("work left asks for a timer");
                assert_eq!(harness.engine.poll_timeout(), Some(at), "poll_timeout is the earliest timer");
                self.commit_step_timers += u32::from(timer == Timer::CommitStep);
                harness.now = harness.now.max(at);
                harness.engine.handle_timer(harness.now);
            }
            self.note(harness);
        }
    }
}

#[test]
fn a_commit_round_is_encoded_and_applied_a_step_at_a_time() {
    let mut harness = Harness::format(stepped_config(), 1);
    let mut visits = Visits::default();
    // One block for each of 9,000 LBAs: 36 metadata pages changed, in the
    // commits the writes start and the one that idleness starts after
    // them. (Not a flush's: while a flush is in progress the steps run
    // back to back.)
    let lbas = 9_000u64;
    for lba in 0..lbas {
        visits.run(&mut harness, |h| h.write(lba, vec![lba as u8; BS]));
    }
    let pages = lbas.div_ceil(ENTRIES_PER_PAGE);
    let commits = harness.engine.stats().commits;
    visits.run_until(&mut harness, |h| {
        let stats = h.engine.stats();
        stats.commits > commits && stats.meta_pages_written >= pages
    });
    let most = visits.most;
    // `blocks_visited` counts the commits' encoding (applying goes in the
    // same steps, uncounted).
    let stats = harness.engine.stats();
    assert!(stats.meta_pages_written >= pages, "{} metadata pages written, fewer than the {pages} changed", stats.meta_pages_written);
    assert!(stats.blocks_visited >= pages * ENTRIES_PER_PAGE, "{} blocks visited, fewer than the {pages} pages hold", stats.blocks_visited);
    // A call takes one step of the running round, and a new commit's first
    // step besides (`Engine::maybe_commit`).
    let two_steps = 2 * STEP_PAGES as u64 * ENTRIES_PER_PAGE;
    assert!(most <= two_steps, "one call visited {most} blocks: more than two steps of {STEP_PAGES} pages ({two_steps} entries)");
    // Steps no request's completion ran came back on the commit's own timer.
    assert!(visits.commit_step_timers > 0, "no step ran on the commit step timer");
}
