//! Crash test with a real process: `hhc torture --process-workload` runs the
//! engine over image files, is killed with SIGKILL at a moment drawn from a
//! seed, and `hhc torture --process-verify` restarts over the same files and
//! checks every block against the side file of acknowledged writes and
//! completed flushes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const HHC: &str = env!("CARGO_BIN_EXE_hhc");

/// Runs the workload for `run_ms`, kills it and returns the verifier's
/// output (success, report).
fn kill_then_verify(dir: &Path, policy: &str, seed: u64, run_ms: u64, damage: impl Fn(&Path)) -> (bool, String) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let dir_arg = dir.to_str().unwrap();
    let mut child = Command::new(HHC)
        .args(["torture", "--process-workload", dir_arg, "--policy", policy, "--seed", &seed.to_string(), "--ops", "100000000"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn hhc");
    std::thread::sleep(Duration::from_millis(run_ms));
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush, no goodbye
    let output = child.wait_with_output().unwrap();
    assert!(still_running, "workload ended before the kill: {}", String::from_utf8_lossy(&output.stdout));
    let side_log = std::fs::read_to_string(dir.join("acknowledged.log")).unwrap();
    assert!(side_log.lines().any(|l| l.starts_with("A ")), "the workload acknowledged nothing in {run_ms} ms");
    damage(dir);
    let verify = Command::new(HHC).args(["torture", "--process-verify", dir_arg, "--policy", policy]).output().expect("run verifier");
    let report = format!("{}{}", String::from_utf8_lossy(&verify.stdout), String::from_utf8_lossy(&verify.stderr));
    (verify.status.success(), report)
}

fn kill_and_verify(dir: &Path, policy: &str, seed: u64, run_ms: u64) {
    let (ok, report) = kill_then_verify(dir, policy, seed, run_ms, |_| {});
    assert!(ok, "policy {policy} seed {seed}, killed after {run_ms} ms: {report}");
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
    let (ok, report) = kill_then_verify(&dir, "hhc", 1, 400, wipe);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "wiped devices passed verification: {report}");
}

#[test]
fn kill_9_at_random_moments_loses_no_flushed_write() {
    let base = std::env::temp_dir().join(format!("hhc-crash-{}", std::process::id()));
    for policy in ["hhc", "wb", "wt"] {
        for seed in 0..3u64 {
            // Kill times spread over startup, steady state and background work.
            let run_ms = 150 + (seed * 7919 + policy.len() as u64 * 131) % 600;
            kill_and_verify(&base.join(format!("{policy}-{seed}")), policy, seed, run_ms);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
