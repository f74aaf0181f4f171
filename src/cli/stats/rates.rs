//! Per-second rates between two refreshes of one bdev: the counters'
//! deltas over the time between the two answers. The target's own `rates`
//! are not used: their window starts at anyone's previous get_stats (a
//! second viewer, a script) and this view's would silently shrink.

use super::snapshot::Snapshot;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Window {
    /// Counter name -> change per second, over `seconds`.
    Rates { seconds: f64, per_s: Vec<(String, f64)> },
    /// Why there are no rates for this report.
    Unavailable(String),
}

impl Window {
    pub fn rate(&self, counter: &str) -> Option<f64> {
        match self {
            Window::Rates { per_s, .. } => per_s.iter().find(|(n, _)| n == counter).map(|&(_, r)| r),
            Window::Unavailable(_) => None,
        }
    }

    /// The change of `counter` over the window (rate times its length).
    pub fn delta(&self, counter: &str) -> Option<f64> {
        match self {
            Window::Rates { seconds, .. } => self.rate(counter).map(|r| r * seconds),
            Window::Unavailable(_) => None,
        }
    }
}

/// The rates from `before` to `after`, answered `local_elapsed` apart by
/// this process's clock. The target's `since_reset_ms` measures the window
/// where both answers have it (the target's clock at the moment it read
/// the counters); a reset or a re-created bdev in between leaves no rates.
pub fn between(before: &Snapshot, after: &Snapshot, local_elapsed: Duration) -> Window {
    let seconds = match (before.since_reset_ms, after.since_reset_ms) {
        (Some(b), Some(a)) if a < b => return Window::Unavailable("the stats were reset since the last report".into()),
        (Some(b), Some(a)) => (a - b) as f64 / 1000.0,
        _ => local_elapsed.as_secs_f64(),
    };
    if seconds <= 0.0 {
        return Window::Unavailable("no time passed since the last report".into());
    }
    let mut per_s = Vec::with_capacity(after.counters.len());
    for (name, now) in &after.counters {
        let Some(then) = before.counter(name) else { continue };
        if *now < then {
            return Window::Unavailable(format!("{name} went back (stats reset or bdev re-created)"));
        }
        per_s.push((name.clone(), (now - then) as f64 / seconds));
    }
    Window::Rates { seconds, per_s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fixture(name: &str) -> Snapshot {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        Snapshot::parse(&serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn rates_between_two_real_answers_match_the_targets_own() {
        // The second answer's `rates` cover the time since the first
        // get_stats (nothing else called it), measured in nanoseconds and
        // floored: the view's, over whole milliseconds, agree within a
        // millisecond in the window's 1654.
        let (first, second) = (fixture("get_stats_running_1.json"), fixture("get_stats_running_2.json"));
        let window = between(&first, &second, Duration::from_secs(99));
        let Window::Rates { seconds, .. } = &window else { panic!("{window:?}") };
        assert!((seconds - 1.654).abs() < 1e-9, "the target's clock, not the local one: {seconds}");
        let raw: Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{}/tests/fixtures/get_stats_running_2.json", env!("CARGO_MANIFEST_DIR"))).unwrap())
                .unwrap();
        let mut compared = 0;
        for (key, target) in raw["rates"].as_object().unwrap() {
            let Some(counter) = key.strip_suffix("_per_s") else { continue };
            let ours = window.rate(counter).unwrap_or_else(|| panic!("no rate of {counter}"));
            let target = target.as_u64().unwrap() as f64;
            assert!((ours - target).abs() <= target / 1000.0 + 1.0, "{counter}: {ours} vs the target's {target}");
            compared += 1;
        }
        assert!(compared > 30, "{compared}");
        assert!(window.rate("writebacks").unwrap() > 1000.0);
        assert_eq!(window.delta("reads").map(f64::round), Some(516.0));
    }

    #[test]
    fn a_reset_or_a_counter_going_back_leaves_no_rates() {
        let (first, mut second) = (fixture("get_stats_running_1.json"), fixture("get_stats_running_2.json"));
        assert!(matches!(between(&second, &first, Duration::from_secs(1)), Window::Unavailable(why) if why.contains("reset")));
        second.counters.iter_mut().find(|(n, _)| n == "flushes").unwrap().1 = 3;
        assert!(matches!(between(&first, &second, Duration::from_secs(1)), Window::Unavailable(why) if why.contains("flushes went back")));
    }

    #[test]
    fn without_since_reset_the_local_clock_measures() {
        let mut first = fixture("get_stats_running_1.json");
        let mut second = first.clone();
        first.since_reset_ms = None;
        second.since_reset_ms = None;
        second.counters.iter_mut().find(|(n, _)| n == "reads").unwrap().1 += 500;
        let window = between(&first, &second, Duration::from_millis(250));
        assert_eq!(window.rate("reads"), Some(2000.0));
        assert_eq!(window.rate("writes"), Some(0.0));
        assert!(matches!(between(&first, &second, Duration::ZERO), Window::Unavailable(_)));
    }
}
