//! Crash test with a real process: `hhc torture --process-workload` runs the
//! engine over image files, is killed with SIGKILL at a point of its work
//! drawn from a seed (a number of acknowledged writes, whatever the machine's
//! speed), and `hhc torture --process-verify` restarts over the same files
//! and checks every block against the side file of acknowledged writes and
//! completed flushes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HHC: &str = env!("CARGO_BIN_EXE_hhc");

/// A hang guard only: how long the workload may take to reach the moment
/// of its kill. The moment itself is counted in the workload's progress
/// (acknowledged writes), never in wall-clock time, so a slow or busy
/// machine kills it at the same point of its work, only later.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Where in its work the workload is killed: once its side file records at
/// least `acknowledged` successful writes and `flushes` completed flushes.
#[derive(Clone, Copy, Debug)]
struct KillAt {
    acknowledged: usize,
    flushes: usize,
}

/// (acknowledged writes, completed flushes) in a side file so far; a last
/// line still being written is not counted.
fn progress(side_log: &str) -> (usize, usize) {
    let complete = &side_log[..side_log.rfind('\n').map_or(0, |at| at + 1)];
    let acknowledged = complete.lines().filter(|l| l.starts_with("A ") && l.ends_with(" 1")).count();
    let flushes = complete.lines().filter(|l| l.starts_with("D ") && l.ends_with(" 1")).count();
    (acknowledged, flushes)
}

/// Polls the side file until the workload got as far as `at`; panics (after
/// killing it) if it ended first or `HANG_GUARD` passed.
fn wait_for_progress(child: &mut Child, side_log: &Path, at: KillAt) {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(side_log).unwrap_or_default();
        let (acknowledged, flushes) = progress(&text);
        if acknowledged >= at.acknowledged && flushes >= at.flushes {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("workload ended ({status}) before {at:?}: {acknowledged} writes acknowledged, {flushes} flushes completed");
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            panic!("workload still short of {at:?} after {HANG_GUARD:?} (hang guard): {acknowledged} writes acknowledged, {flushes} flushes completed");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs the workload until it got as far as `at`, kills it and returns the
/// verifier's output (success, report).
fn kill_then_verify(dir: &Path, policy: &str, seed: u64, at: KillAt, damage: impl Fn(&Path)) -> (bool, String) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let dir_arg = dir.to_str().unwrap();
    let mut child = Command::new(HHC)
        .args(["torture", "--process-workload", dir_arg, "--policy", policy, "--seed", &seed.to_string(), "--ops", "100000000"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn hhc");
    wait_for_progress(&mut child, &dir.join("acknowledged.log"), at);
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush, no goodbye
    let output = child.wait_with_output().unwrap();
    assert!(still_running, "workload ended before the kill: {}", String::from_utf8_lossy(&output.stdout));
    let side_log = std::fs::read_to_string(dir.join("acknowledged.log")).unwrap();
    let (acknowledged, flushes) = progress(&side_log);
    assert!(acknowledged >= at.acknowledged && flushes >= at.flushes, "the side file went back: {acknowledged} acknowledged, {flushes} flushes");
    damage(dir);
    let verify = Command::new(HHC).args(["torture", "--process-verify", dir_arg, "--policy", policy]).output().expect("run verifier");
    let report = format!("{}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    (verify.status.success(), report)
}

fn kill_and_verify(dir: &Path, policy: &str, seed: u64, at: KillAt) {
    let (ok, report) = kill_then_verify(dir, policy, seed, at, |_| {});
    assert!(ok, "policy {policy} seed {seed}, killed at {at:?}: {report}");
}

/// The verifier must be able to fail: wiping every image after the kill
/// loses flushed writes, and it has to say so.
#[test]
fn the_verifier_notices_wiped_devices() {
    let dir = std::env::temp_dir().join(format!("hhc-crash-wiped-{}", std::process::id()));
    let wipe = |dir: &Path| {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "img") {
                let len = std::fs::metadata(&path).unwrap().len();
                std::fs::write(&path, vec![0u8; len as usize]).unwrap();
            }
        }
    };
    // Flushed writes to lose: killed once some are acknowledged and flushed.
    let (ok, report) = kill_then_verify(&dir, "hhc", 1, KillAt { acknowledged: 200, flushes: 5 }, wipe);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "wiped devices passed verification: {report}");
}

#[test]
fn kill_9_at_random_moments_loses_no_flushed_write() {
    let base = std::env::temp_dir().join(format!("hhc-crash-{}", std::process::id()));
    for policy in ["hhc", "wb", "wt"] {
        for seed in 0..3u64 {
            // Kill moments spread from early work (the first acknowledged
            // write) over steady state to background work, counted in
            // acknowledged writes; at least one flush completed, so there
            // is a flushed write to lose.
            let acknowledged = 1 + ((seed * 7919 + policy.len() as u64 * 131) % 2000) as usize;
            kill_and_verify(&base.join(format!("{policy}-{seed}")), policy, seed, KillAt { acknowledged, flushes: 1 });
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
