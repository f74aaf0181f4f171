//! `hhc simulate` from the command line: the steady-state experiment runs
//! with its own windows and log size and reports how often the log wrapped,
//! apart from the paper's targets.

use std::process::{Command, Output};

fn hhc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hhc")).args(args).output().unwrap()
}

fn number_after(text: &str, key: &str) -> Vec<f64> {
    text.match_indices(&format!("\"{key}\":"))
        .map(|(at, _)| {
            let rest = &text[at + key.len() + 3..];
            let end = rest.find([',', '}']).unwrap();
            rest[..end].trim().parse().unwrap()
        })
        .collect()
}

#[test]
fn steady_experiment_wraps_its_log_and_keeps_its_checks_apart() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("small-log.profile");
    // Three quarters of the default steady-state log (15 MiB at this scale).
    std::fs::write(&profile, "engine.steady_log_mib = 3072\n").unwrap();
    let out = dir.path().join("out");
    let output = hhc(&[
        "simulate",
        "--experiment",
        "steady",
        "--scale",
        "0.005",
        "--steady-settle-s",
        "2",
        "--steady-duration-s",
        "8",
        "--policies",
        "wt,hhc",
        "--profile",
        profile.to_str().unwrap(),
        "--jobs",
        "2",
        "--json",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json = String::from_utf8(output.stdout).unwrap();
    assert_eq!(number_after(&json, "steady_measure_s"), vec![8.0]);
    assert_eq!(number_after(&json, "measured_s"), vec![8.0; 4], "fileserver and varmail, wt and hhc");
    let wraps = number_after(&json, "log_wraps");
    assert_eq!(wraps.len(), 4);
    // WT has no log; HHC's goes round within the window on both workloads.
    assert_eq!((wraps[0], wraps[2]), (0.0, 0.0), "{json}");
    assert!(wraps[1] > 1.0 && wraps[3] > 1.0, "{json}");
    assert!(json.contains("\"experiment\":\"steady\",\"name\":\"steady varmail"), "{json}");
    let markdown = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(markdown.contains("## steady-state checks"), "{markdown}");
    assert!(!markdown.contains("## targets"), "only the paper's figures have targets: {markdown}");
}

#[test]
fn unknown_experiment_names_the_steady_one() {
    let output = hhc(&["simulate", "--experiment", "nope", "--out-dir", "/nonexistent/never-written"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("steady"));
}
