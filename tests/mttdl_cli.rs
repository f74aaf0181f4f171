//! `hhc mttdl` end to end: JSON figures against the library's closed forms, plots on disk,
//! recommendations and error exits.

use hhc::mttdl::models::{
    hhc1_mttdl_exact_hours, raid5_mttdl_exact_hours, raid6_mttdl_exact_hours,
};
use hhc::mttdl::{Devices, HOURS_PER_YEAR};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn hhc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hhc"))
        .arg("mttdl")
        .args(args)
        .output()
        .expect("run hhc")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

fn out_dir(test_name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(test_name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        ((actual - expected) / expected).abs() < 1e-12,
        "{actual} vs {expected}"
    );
}

#[test]
fn json_table_matches_closed_forms_and_plots_are_written() {
    let dir = out_dir("mttdl_json");
    let output = hhc(&[
        "--json",
        "--disks",
        "4,8",
        "--mttr-hours",
        "24,168",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    let json = json_of(&output);
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let disks = row["disks"].as_u64().unwrap() as usize;
        let mttr_hours = row["mttr_hours"].as_f64().unwrap();
        let devices = Devices {
            mttr_hours,
            ..Devices::default()
        };
        let years = |key: &str| row[key].as_f64().unwrap();
        assert_close(
            years("raid5_years"),
            raid5_mttdl_exact_hours(disks, &devices) / HOURS_PER_YEAR,
        );
        assert_close(
            years("raid6_years"),
            raid6_mttdl_exact_hours(disks, &devices) / HOURS_PER_YEAR,
        );
        assert_close(
            years("hhc1_years"),
            hhc1_mttdl_exact_hours(&devices) / HOURS_PER_YEAR,
        );
        // The paper's claims, with the default datasheet figures.
        assert!(years("hhc1_years") > years("raid5_years"));
        assert!(years("hhc2_years") > years("raid6_years"));
    }
    let plots = json["plots"].as_array().unwrap();
    assert_eq!(plots.len(), 2);
    for plot in plots {
        let svg = std::fs::read_to_string(plot.as_str().unwrap()).expect("plot file exists");
        assert!(svg.starts_with("<svg"), "{svg:.80}");
        assert!(svg.trim_end().ends_with("</svg>"));
        // Two MTTRs x (backing, HHC) + the SSD line.
        assert_eq!(svg.matches("<polyline").count(), 5);
    }
}

#[test]
fn table_lists_every_row_and_the_plot_files() {
    let dir = out_dir("mttdl_table");
    let output = hhc(&[
        "--disks",
        "4-6",
        "--mttr-hours",
        "24",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("HHC-2/RAID6"));
    let rows = stdout
        .lines()
        .filter(|line| line.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    assert_eq!(rows.count(), 3);
    assert!(stdout.contains(dir.join("fig4a_hhc1_vs_raid5.svg").to_str().unwrap()));
    assert!(dir.join("fig4b_hhc2_vs_raid6.svg").exists());
}

#[test]
fn recommend_answers_the_papers_pairing() {
    for (backing, mirrors) in [("raid5", 1), ("raid6", 2)] {
        let output = hhc(&[
            "--recommend",
            "--json",
            "--backing",
            backing,
            "--disks",
            "8",
            "--mttr-hours",
            "24",
        ]);
        let json = json_of(&output);
        let answer = &json["recommendations"][0];
        assert_eq!(
            answer["mirrors"].as_u64(),
            Some(mirrors),
            "{backing}: {answer}"
        );
        let hhc_years = answer["hhc_years_by_mirrors"].as_array().unwrap();
        assert_eq!(hhc_years.len(), mirrors as usize);
        let backing_years = answer["backing_years"].as_f64().unwrap();
        assert!(hhc_years.last().unwrap().as_f64().unwrap() >= backing_years);
    }
}

#[test]
fn recommend_without_an_answer_exits_1() {
    // Log HDDs that fail as fast as they are repaired cannot match a RAID6 array.
    let output = hhc(&[
        "--recommend",
        "--json",
        "--disks",
        "6",
        "--log-mttf-hours",
        "24",
        "--mirrors-max",
        "3",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    for answer in json["recommendations"].as_array().unwrap() {
        assert!(answer["mirrors"].is_null());
        assert_eq!(answer["hhc_years_by_mirrors"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn invalid_input_is_reported() {
    let output = hhc(&["--no-plots", "--disks", "2"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs more than 2 disks"));
    let output = hhc(&["--no-plots", "--mttr-hours=0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("MTTR must be positive"));
}
