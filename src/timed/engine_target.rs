//! The real engine as the simulator's target.

use super::experiments::{MemoryFigures, TargetFactory};
use super::runner::{KeptAreas, SimTarget};
use crate::config::Config;
use crate::engine::{Engine, EngineState, StartMode};
use crate::io::{DeviceIo, HeapAllocator, IoId, IoStatus, Nanos, Request, RequestCompletion, RequestData};

impl SimTarget for Engine {
    fn handle_request(&mut self, now: Nanos, request: Request, data: Option<&dyn RequestData>) {
        Engine::handle_request(self, now, request, data)
    }
    fn handle_io_completion(&mut self, now: Nanos, id: IoId, status: IoStatus) {
        Engine::handle_io_completion(self, now, id, status)
    }
    fn handle_timer(&mut self, now: Nanos) {
        Engine::handle_timer(self, now)
    }
    fn poll_io(&mut self) -> Option<DeviceIo> {
        Engine::poll_io(self)
    }
    fn poll_completion(&mut self) -> Option<RequestCompletion> {
        Engine::poll_completion(self)
    }
    fn next_timer(&self) -> Option<Nanos> {
        Engine::next_timer(self)
    }
    fn io_memory_mut(&mut self, region: u32) -> &mut [u8] {
        Engine::io_memory_mut(self, region)
    }
    fn is_ready(&self) -> bool {
        matches!(self.state(), EngineState::Ready)
    }
    fn dirty_and_total_blocks(&self) -> (u64, u64) {
        let stats = self.stats();
        (stats.dirty_blocks, stats.cache_blocks)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.stats();
        vec![
            ("reads", s.reads),
            ("writes", s.writes),
            ("flushes", s.flushes),
            ("read_misses", s.read_misses),
            ("evictions", s.evictions),
            ("writebacks", s.writebacks),
            ("revokes", s.revokes),
            ("log_blocks_copied", s.log_blocks_copied),
            ("log_blocks_from_cache", s.log_blocks_from_cache),
            ("log_segments_written", s.log_segments_written),
            ("log_parts_written", s.log_parts_written),
            ("log_wraps", s.log_wraps),
            ("log_segments_total_now", s.log_segments_total),
            ("log_segments_in_use_now", s.log_segments_in_use),
            ("log_live_entries_now", s.log_live_entries),
            ("log_segments_reclaimed", s.log_segments_reclaimed),
            ("flush_fallbacks", s.flush_fallbacks),
            ("commits", s.commits),
            ("meta_pages_written", s.meta_pages_written),
            ("unlogged_dirty_blocks_now", s.unlogged_dirty_blocks),
            ("free_blocks_now", s.free_blocks),
        ]
    }
}

/// Formats a fresh engine for every point (no state carries over).
pub struct EngineFactory;

impl TargetFactory for EngineFactory {
    type Target = Engine;

    fn build(&self, config: &Config) -> Result<(Engine, KeptAreas), String> {
        let engine = Engine::new(config.clone(), StartMode::Format, &mut HeapAllocator, 0).map_err(|e| e.to_string())?;
        let areas = KeptAreas {
            cache_below_bytes: engine.cache_layout().data_offset_bytes,
            log_below_bytes: engine.log_layout().segments_offset_bytes,
        };
        Ok((engine, areas))
    }

    fn memory(&self, engine: &Engine) -> MemoryFigures {
        let report = engine.memory_report();
        MemoryFigures {
            cache_blocks: report.cache_blocks,
            cache_index_bytes: report.cache_index_bytes,
            log_live_entries: report.log_live_entries,
            log_bookkeeping_bytes: report.log_bookkeeping_bytes,
            other_bookkeeping_bytes: report.commit_bookkeeping_bytes,
            io_buffer_bytes: report.io_buffer_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Policy;
    use crate::timed::experiments::{fig5_points, fig7_points, run_points, steady_points, Settings};

    #[test]
    fn tiny_varmail_run_produces_figures_and_hhc_flushes_faster_than_wb_flush() {
        let settings = Settings {
            scale: 0.005,
            settle_s: 1.0,
            measure_s: 4.0,
            jobs: 2,
            policies: vec![Policy::WriteBackFlush, Policy::Hhc],
            ..Settings::default()
        };
        let points: Vec<_> = fig7_points(&settings).into_iter().filter(|p| p.threads == 16).collect();
        let results = run_points(&EngineFactory, &points, &settings, &|_| {});
        let flush_p50 = |policy| {
            let result = results.iter().find(|r| r.point.policy == policy).unwrap();
            let figures = result.figures.as_ref().unwrap();
            assert!(figures.iops() > 0.0 && figures.flush_latency.count() > 0, "{policy}: {figures:?}");
            figures.flush_latency.percentile_ns(0.5)
        };
        let (hhc, wb_flush) = (flush_p50(Policy::Hhc), flush_p50(Policy::WriteBackFlush));
        assert!(hhc < wb_flush, "HHC flush p50 {hhc} ns vs WB-Flush {wb_flush} ns");
    }

    #[test]
    fn the_steady_state_log_wraps_in_the_measured_window_and_the_figures_log_does_not() {
        let settings = Settings {
            scale: 0.005,
            settle_s: 2.0,
            measure_s: 10.0,
            steady_settle_s: 2.0,
            steady_measure_s: 10.0,
            jobs: 2,
            policies: vec![Policy::Hhc],
            ..Settings::default()
        };
        let varmail = |points: Vec<crate::timed::experiments::Point>| points.into_iter().find(|p| p.workload.name() == "varmail").unwrap();
        let points = vec![varmail(steady_points(&settings)), varmail(fig5_points(&settings))];
        let results = run_points(&EngineFactory, &points, &settings, &|_| {});
        let figures: Vec<_> = results.iter().map(|r| r.figures.as_ref().unwrap()).collect();
        let (steady, fig5) = (figures[0], figures[1]);
        assert!(steady.log_wraps() > 1.0, "steady: {:?}", steady.target_counters);
        assert!(steady.counter("log_wraps") >= 1);
        assert!(fig5.log_wraps() < 0.05 && fig5.counter("log_wraps") == 0, "fig5: {:?}", fig5.target_counters);
        assert!(steady.log_mb_s() > 0.0 && fig5.log_mb_s() > 0.0);
    }
}
