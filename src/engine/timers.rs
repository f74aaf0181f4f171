//! The engine's timers, by name. `poll_timeout` is the earliest of them;
//! `handle_timer` names the one that fired in a trace line, and a stall
//! report names the one armed. Every timer only brings the engine back
//! to its background work (`run_background`): what it does then depends on
//! the state, not on the timer.

use super::{Engine, EngineState, COMMIT_STEP_DELAY_NS, STOPPING_TICK_NS};
use crate::io::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    /// Background work is pending (dirty blocks, waiting writes, flushes,
    /// a commit wanted, a log head not durable yet): idle detection,
    /// write-back pacing, mirror command deadlines and dry write-back scans
    /// are looked at again every tick (a tenth of `idle_after`, at least
    /// 100 us; 1 ms at most while stopping).
    Tick,
    /// The next write the log's back-pressure admits (engine/throttle.rs).
    ThrottleAdmit,
    /// The next step of the commit in flight (engine/commit.rs).
    CommitStep,
}

impl Engine {
    /// The timer due first, and when; none while the engine is not
    /// running or stopping, or has nothing to come back for.
    pub fn next_timer(&self) -> Option<(Timer, Nanos)> {
        if !matches!(self.state, EngineState::Ready | EngineState::Stopping) {
            return None;
        }
        let busy = self.cache.dirty_count() > 0
            || !self.waiting.is_empty()
            || !self.flushes.is_empty()
            || self.commit.wanted()
            || self.log.head_sequence > self.log.durable_head_sequence;
        let tick = busy.then(|| (Timer::Tick, self.now + self.tick_ns()));
        // (only while writes wait: the tick is armed then too)
        let admit = self.throttle_timeout().map(|at| (Timer::ThrottleAdmit, at));
        let commit_step = self.commit.has_step_due().then(|| (Timer::CommitStep, self.now + COMMIT_STEP_DELAY_NS));
        [tick, admit, commit_step].into_iter().flatten().min_by_key(|&(_, at)| at)
    }

    pub(super) fn tick_ns(&self) -> Nanos {
        let tick = (self.config.idle_after_ns / 10).max(100_000);
        // A clean stop waits for no idle detection.
        if self.state == EngineState::Stopping {
            tick.min(STOPPING_TICK_NS)
        } else {
            tick
        }
    }

    /// Which timer a `handle_timer` at `now` answers (before the engine
    /// takes `now`), for the trace.
    pub(super) fn note_timer_fired(&self, now: Nanos) {
        if let Some((timer, at)) = self.next_timer().filter(|&(_, at)| at <= now) {
            log::trace!("hhc: timer {timer:?} due at {at} ns fired at {now} ns");
        }
    }
}
