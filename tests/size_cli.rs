//! `hhc size`: the log a load needs, judged against the simulator's sweep.

use std::process::{Command, Output};

fn hhc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hhc")).args(args).output().unwrap()
}

fn log_needed_mib(stdout: &str) -> f64 {
    let line = stdout.lines().find(|l| l.starts_with("log needed")).unwrap_or_else(|| panic!("{stdout}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn a_log_too_small_for_the_load_is_named_and_fails_the_check() {
    // The simulator's fileserver at a 41 MiB cache: 105 MB/s written,
    // 8.6 MB/s written back; 4x the cache ran at 0.79x wb.
    let output = hhc(&["size", "--cache-mib", "41", "--write-mb-s", "105", "--writeback-mb-s", "8.6", "--log-mib", "164"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("too small"), "{stdout}");
    let needed = log_needed_mib(&stdout);
    assert!((164.0..=410.0).contains(&needed), "between the 4x that fell short and the 10x that held: {stdout}");
}

#[test]
fn a_large_enough_log_passes_and_a_saturated_log_disk_does_not() {
    // Varmail's: 4x ran at 1.41x wb (the rule asks 2.6x; 2x already ran at
    // 1.15x, its log disk taking the moves: the rule errs on the safe side).
    let output = hhc(&["size", "--cache-mib", "41", "--write-mb-s", "27", "--writeback-mb-s", "10", "--dirty-percent", "84", "--log-mib", "164"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("enough") && stdout.contains("keeps up"), "{stdout}");
    let output = hhc(&["size", "--cache-mib", "41", "--write-mb-s", "120", "--writeback-mb-s", "10", "--log-mib", "4096"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("caps hhc's writes"), "{stdout}");
}

#[test]
fn bad_input_is_refused_with_the_option_named() {
    for (args, named) in [
        (vec!["--cache-mib", "0", "--write-mb-s", "1", "--writeback-mb-s", "1"], "--cache-mib"),
        (vec!["--cache-mib", "10", "--write-mb-s", "-3", "--writeback-mb-s", "1"], "--write-mb-s"),
        (vec!["--cache-mib", "10", "--write-mb-s", "3", "--writeback-mb-s", "1", "--dirty-percent", "120"], "--dirty-percent"),
    ] {
        let output = hhc(&[&["size"], args.as_slice()].concat());
        assert_eq!(output.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&output.stderr).contains(named), "{named}");
    }
}
