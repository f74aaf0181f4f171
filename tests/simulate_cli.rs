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

/// The `[flushes, writes]` figures of each point of a `--json` run.
fn flushes_and_writes(json: &str) -> Vec<(f64, f64)> {
    number_after(json, "flushes").into_iter().zip(number_after(json, "writes")).collect()
}

#[test]
fn bare_fsync_replaces_the_journal_with_one_flush_per_fsync() {
    let run = |fsync: &str| {
        let dir = tempfile::tempdir().unwrap();
        let output = hhc(&[
            "simulate", "--experiment", "custom", "--job", "varmail", "--threads", "4", "--fsync", fsync,
            "--cache-mib", "64", "--log-mib", "64", "--policies", "wb", "--settle-s", "0.5", "--duration-s", "1",
            "--json", "--out-dir", dir.path().to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let json = String::from_utf8(output.stdout).unwrap();
        assert!(json.contains("\"threads\":4"), "{json}");
        flushes_and_writes(&json)[0]
    };
    // varmail fsyncs after each of its appends, and an append is one request.
    let (flushes, writes) = run("flush");
    assert!(writes > 100.0 && (flushes - writes).abs() <= 4.0, "{flushes} flushes, {writes} writes");
    // ext4's journal groups them, and adds its own commit writes.
    let (flushes, writes) = run("journal");
    assert!(flushes > 0.0 && flushes < writes / 2.0, "{flushes} flushes, {writes} writes");
    let output = hhc(&["simulate", "--experiment", "custom", "--job", "varmail", "--fsync", "never", "--out-dir", "/nonexistent/x"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("journal or flush"));
}

#[test]
fn trace_writes_one_replayable_iolog_per_thread_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let trace = |out: &str| {
        let out = dir.path().join(out);
        let output = hhc(&[
            "trace", "--workload", "varmail", "--threads", "3", "--ops-per-thread", "60", "--filename", "dev0",
            "--out-dir", out.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let summary = String::from_utf8(output.stdout).unwrap();
        let logs: Vec<String> = (0..3).map(|t| std::fs::read_to_string(out.join(format!("thread-{t:03}.iolog"))).unwrap()).collect();
        (summary, logs)
    };
    let (summary, logs) = trace("a");
    assert_eq!(trace("b").1, logs, "same arguments, same iologs");
    let space = number_after(&summary, "address_space_bytes")[0] as u64;
    for log in &logs {
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines[..3], ["fio version 2 iolog", "dev0 add", "dev0 open"]);
        assert_eq!(lines.last(), Some(&"dev0 close"));
        let ops = &lines[3..lines.len() - 1];
        assert_eq!(ops.len(), 60);
        let mut syncs = 0;
        for op in ops {
            let fields: Vec<&str> = op.split(' ').collect();
            let (offset, len): (u64, u64) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
            match fields[1] {
                "sync" => {
                    syncs += 1;
                    assert_eq!((offset, len), (0, 0));
                }
                "read" | "write" => assert!(len > 0 && len % 4096 == 0 && offset % 4096 == 0 && offset + len <= space, "{op}"),
                other => panic!("action {other}"),
            }
        }
        // Two fsyncs in each varmail loop of six requests or more.
        assert!(syncs >= 10, "{syncs} syncs in {ops:?}");
    }
    assert_ne!(logs[0], logs[1], "every thread draws its own requests");
    let output = hhc(&["trace", "--workload", "nope", "--out-dir", dir.path().join("c").to_str().unwrap()]);
    assert!(!output.status.success());
}

#[test]
fn the_memory_table_is_for_the_papers_cache_whatever_the_scale() {
    let dir = tempfile::tempdir().unwrap();
    let output = hhc(&[
        "simulate", "--experiment", "memory", "--scale", "0.005", "--settle-s", "0.5", "--duration-s", "1", "--json",
        "--out-dir", dir.path().to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json = String::from_utf8(output.stdout).unwrap();
    // The run's own engine: fixed costs over a 19 MiB cache.
    assert!(number_after(&json, "memory_percent_of_cache")[0] > 10.0, "{json}");
    // The paper's 4 GB cache: the order of the paper's 0.56 %.
    assert_eq!(number_after(&json, "cache_bytes"), vec![4e9]);
    let percent = number_after(&json, "percent_of_cache");
    let per_live_entry = number_after(&json, "log_bytes_per_live_entry");
    assert!(percent.len() == 1 && percent[0] < 2.0 && per_live_entry[0] < 100.0, "{json}");
    let markdown = std::fs::read_to_string(dir.path().join("results.md")).unwrap();
    let header = markdown.lines().find(|l| l.starts_with("| §3.5 memory")).unwrap();
    assert_eq!(header, "| §3.5 memory | 4 GB cache (computed) | this run (scale 0.005) | paper |");
    let row = markdown.lines().find(|l| l.starts_with("| bookkeeping / cache capacity % |")).unwrap();
    let at_4gb: f64 = row.split('|').nth(2).unwrap().trim().parse().unwrap();
    assert!((at_4gb - percent[0]).abs() < 0.001, "{row}");
    // The caption says what the computed column stands on.
    assert!(markdown.contains("computed, whatever --scale, from the engine's structure sizes") && markdown.contains("No workload ran at 4 GB"), "{markdown}");
}

#[test]
fn fig5_names_its_cache_size_and_every_missed_target_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let output = hhc(&[
        "simulate", "--experiment", "fig5", "--scale", "0.005", "--settle-s", "0.5", "--duration-s", "1", "--out-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let svg = std::fs::read_to_string(dir.path().join("fig5.svg")).unwrap();
    assert!(svg.contains("Fig. 5: IOPS per policy, 19.1 MiB cache (the paper's 4 GB x scale 0.005)"), "{svg}");
    assert!(!svg.contains("0.0 GB"));
    let markdown = String::from_utf8(output.stdout).unwrap();
    let header = markdown.lines().find(|l| l.starts_with("| target |")).unwrap();
    assert_eq!(header, "| target | measured | goal | verdict | why missed | from |");
    let rows: Vec<Vec<&str>> =
        markdown.lines().filter(|l| l.starts_with("| fig5 ")).map(|l| l.split('|').map(str::trim).collect()).collect();
    assert_eq!(rows.len(), 1 + 3 + 3, "{markdown}");
    for row in rows {
        let (verdict, why, from) = (row[4], row[5], row[6]);
        assert!(from.starts_with("paper Fig. 5: "), "{row:?}");
        if verdict.starts_with("MISSED") {
            assert!(why.contains("docs/results.md") || why.starts_with("not explained"), "{row:?}");
        } else {
            assert!(verdict == "met" && why.is_empty(), "{row:?}");
        }
    }
}

#[test]
fn the_log_sweep_runs_hhc_at_each_log_size_and_prints_the_cleaning_cost() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = hhc(&[
        "simulate",
        "--experiment",
        "log-sweep",
        "--scale",
        "0.005",
        "--steady-settle-s",
        "2",
        "--steady-duration-s",
        "4",
        "--policies",
        "wb,hhc",
        "--jobs",
        "2",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let markdown = String::from_utf8(output.stdout).unwrap();
    for workload in ["fileserver", "varmail"] {
        for size in ["1x", "2x", "4x", "10x"] {
            let row = markdown.lines().find(|l| l.starts_with(&format!("| {workload} | {size} |")));
            let cells: Vec<&str> = row.unwrap_or_else(|| panic!("no {workload} {size} row: {markdown}")).split('|').map(str::trim).collect();
            // hhc's IOPS and its ratio to wb are figures, not blanks.
            assert!(cells[3].parse::<f64>().unwrap() > 0.0, "{markdown}");
            assert!(cells[4].parse::<f64>().unwrap() > 0.0, "{markdown}");
            // The live fraction of what was cleaned is a fraction.
            let u: f64 = cells[8].parse().unwrap();
            assert!((0.0..1.0).contains(&u), "{markdown}");
        }
    }
    // The smallest log is the one that wraps most often.
    let wraps = |size: &str| -> f64 {
        let row = markdown.lines().find(|l| l.starts_with(&format!("| fileserver | {size} |"))).unwrap();
        row.split('|').map(str::trim).nth(7).unwrap().parse().unwrap()
    };
    assert!(wraps("1x") > wraps("10x"), "{markdown}");
    assert!(!markdown.contains("## targets"), "the sweep's points carry no paper targets: {markdown}");
    let svg = std::fs::read_to_string(out.join("log-sweep.svg")).unwrap();
    assert!(svg.contains("fileserver: hhc / wb") && svg.contains("varmail: hhc / wb-flush"), "{svg}");
}
