//! `hhc mttdl`: the paper's reliability comparison (§2, Fig. 4) with the user's device figures,
//! and `--recommend`: how many log mirrors match a given backing array.

use super::CliResult;
use hhc::json::{Json, Object};
use hhc::mttdl::models::{hhc_mttdl_hours, hhc_mttdl_paper_composite_hours, raid_mttdl_hours};
use hhc::mttdl::plot::{LogPlot, Series};
use hhc::mttdl::recommend::{recommend_mirrors, Recommendation};
use hhc::mttdl::{
    Backing, Devices, Error, Repair, DEFAULT_HDD_MTTF_HOURS, DEFAULT_SSD_MTTF_HOURS, HOURS_PER_YEAR,
};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;

#[derive(clap::Args)]
pub struct Args {
    /// Disks in the backing array: a range "4-16" or a list "4,8,12".
    #[arg(long, default_value = "4-16")]
    disks: DiskCounts,
    /// Mean time to repair (replace + rebuild or resync) in hours; several, comma-separated.
    #[arg(long = "mttr-hours", value_delimiter = ',', default_values_t = [12.0, 24.0, 72.0, 168.0])]
    mttrs_hours: Vec<f64>,
    /// MTTF of a backing-array disk, hours.
    #[arg(long, default_value_t = DEFAULT_HDD_MTTF_HOURS)]
    backing_mttf_hours: f64,
    /// MTTF of a log HDD, hours [default: same as --backing-mttf-hours, as in the paper].
    #[arg(long)]
    log_mttf_hours: Option<f64>,
    /// MTTF of the cache SSD, hours.
    #[arg(long, default_value_t = DEFAULT_SSD_MTTF_HOURS)]
    ssd_mttf_hours: f64,
    /// Repair discipline within a redundancy group.
    #[arg(long, value_enum, default_value_t = Repair::Independent)]
    repair: Repair,
    /// Print machine-readable JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Directory for the Fig. 4-style SVG plots.
    #[arg(long, default_value = "out/mttdl")]
    out_dir: PathBuf,
    /// Do not write plots.
    #[arg(long)]
    no_plots: bool,
    /// Answer "how many log mirrors match my backing array?" instead of printing the table.
    #[arg(long)]
    recommend: bool,
    /// Backing array layout for --recommend.
    #[arg(long, value_enum, default_value_t = Backing::Raid6)]
    backing: Backing,
    /// Largest number of log mirrors --recommend considers.
    #[arg(long, default_value_t = 8)]
    mirrors_max: usize,
}

/// Backing-array widths, parsed from "A-B" or "A,B,C".
#[derive(Clone, Debug)]
struct DiskCounts(Vec<usize>);

impl FromStr for DiskCounts {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let number = |part: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad disk count {part:?}"))
        };
        let counts: Vec<usize> = match text.split_once('-') {
            Some((first, last)) => (number(first)?..=number(last)?).collect(),
            None => text.split(',').map(number).collect::<Result<_, _>>()?,
        };
        if counts.is_empty() {
            return Err(format!("no disk counts in {text:?}"));
        }
        Ok(DiskCounts(counts))
    }
}

pub fn run(args: Args) -> CliResult {
    if args.mttrs_hours.is_empty() {
        return Err("--mttr-hours needs at least one value".into());
    }
    if args.recommend {
        run_recommend(&args)
    } else {
        run_comparison(&args)
    }
}

fn devices(args: &Args, mttr_hours: f64) -> Devices {
    Devices {
        backing_mttf_hours: args.backing_mttf_hours,
        log_mttf_hours: args.log_mttf_hours.unwrap_or(args.backing_mttf_hours),
        ssd_mttf_hours: args.ssd_mttf_hours,
        mttr_hours,
        repair: args.repair,
    }
}

fn repair_name(repair: Repair) -> &'static str {
    match repair {
        Repair::Independent => "independent",
        Repair::Serial => "serial",
    }
}

fn years(hours: f64) -> f64 {
    hours / HOURS_PER_YEAR
}

/// One (N, MTTR) point of Fig. 4; MTTDLs in hours.
struct Row {
    disks: usize,
    mttr_hours: f64,
    raid5_hours: f64,
    hhc1_hours: f64,
    raid6_hours: f64,
    hhc2_hours: f64,
    /// HHC-2 by the paper's lumped-mirror approximation (eq. 7), for comparison.
    hhc2_paper_hours: f64,
}

fn compute_rows(args: &Args) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    for &mttr_hours in &args.mttrs_hours {
        let devices = devices(args, mttr_hours);
        let hhc1_hours = hhc_mttdl_hours(1, &devices)?;
        let hhc2_hours = hhc_mttdl_hours(2, &devices)?;
        let hhc2_paper_hours = hhc_mttdl_paper_composite_hours(2, &devices)?;
        for &disks in &args.disks.0 {
            rows.push(Row {
                disks,
                mttr_hours,
                raid5_hours: raid_mttdl_hours(disks, 1, &devices)?,
                hhc1_hours,
                raid6_hours: raid_mttdl_hours(disks, 2, &devices)?,
                hhc2_hours,
                hhc2_paper_hours,
            });
        }
    }
    Ok(rows)
}

fn run_comparison(args: &Args) -> CliResult {
    let rows = compute_rows(args).map_err(|error| error.to_string())?;
    let plots = if args.no_plots {
        Vec::new()
    } else {
        write_plots(args, &rows)?
    };
    let output = if args.json {
        comparison_json(args, &rows, &plots)
    } else {
        comparison_table(args, &rows, &plots)
    };
    print!("{output}");
    Ok(ExitCode::SUCCESS)
}

fn parameters_line(args: &Args) -> String {
    let devices = devices(args, 0.0);
    format!(
        "backing HDD MTTF {} h, log HDD MTTF {} h, SSD MTTF {} h, {} repair",
        devices.backing_mttf_hours,
        devices.log_mttf_hours,
        devices.ssd_mttf_hours,
        repair_name(devices.repair)
    )
}

fn comparison_table(args: &Args, rows: &[Row], plots: &[PathBuf]) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "MTTDL in years; {}", parameters_line(args));
    let _ = writeln!(
        text,
        "SSD alone (write-back without log): {:.3e} years",
        years(args.ssd_mttf_hours)
    );
    let _ = writeln!(
        text,
        "{:>5} {:>7} {:>10} {:>10} {:>11} {:>10} {:>10} {:>11}",
        "disks", "MTTR_h", "RAID5", "HHC-1", "HHC-1/RAID5", "RAID6", "HHC-2", "HHC-2/RAID6"
    );
    for row in rows {
        let _ = writeln!(
            text,
            "{:>5} {:>7} {:>10.3e} {:>10.3e} {:>11.1} {:>10.3e} {:>10.3e} {:>11.1}",
            row.disks,
            row.mttr_hours,
            years(row.raid5_hours),
            years(row.hhc1_hours),
            row.hhc1_hours / row.raid5_hours,
            years(row.raid6_hours),
            years(row.hhc2_hours),
            row.hhc2_hours / row.raid6_hours,
        );
    }
    for plot in plots {
        let _ = writeln!(text, "plot: {}", plot.display());
    }
    text
}

fn parameters_json(args: &Args) -> Object {
    let devices = devices(args, 0.0);
    Object::new()
        .field("backing_mttf_hours", Json::Exp(devices.backing_mttf_hours))
        .field("log_mttf_hours", Json::Exp(devices.log_mttf_hours))
        .field("ssd_mttf_hours", Json::Exp(devices.ssd_mttf_hours))
        .field("repair", repair_name(devices.repair))
        .field("hours_per_year", Json::Exp(HOURS_PER_YEAR))
}

fn comparison_json(args: &Args, rows: &[Row], plots: &[PathBuf]) -> String {
    let rows_json: Vec<Json> = rows
        .iter()
        .map(|row| {
            Object::new()
                .field("disks", row.disks as u64)
                .field("mttr_hours", Json::Exp(row.mttr_hours))
                .field("raid5_years", Json::Exp(years(row.raid5_hours)))
                .field("hhc1_years", Json::Exp(years(row.hhc1_hours)))
                .field("raid6_years", Json::Exp(years(row.raid6_hours)))
                .field("hhc2_years", Json::Exp(years(row.hhc2_hours)))
                .field("hhc2_paper_approx_years", Json::Exp(years(row.hhc2_paper_hours)))
                .into()
        })
        .collect();
    let plots_json: Vec<Json> = plots.iter().map(|path| Json::text(path.display().to_string())).collect();
    let object = Object::new()
        .field("parameters", parameters_json(args))
        .field("ssd_mttf_years", Json::Exp(years(args.ssd_mttf_hours)))
        .field("rows", rows_json)
        .field("plots", plots_json);
    format!("{object}\n")
}

/// Line colours, one per MTTR; the backing array is solid and HHC dashed in the same colour.
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// MTTDL (hours) of the backing array and of HHC that one figure compares.
type Pick = fn(&Row) -> (f64, f64);

fn write_plots(args: &Args, rows: &[Row]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(&args.out_dir)
        .map_err(|error| format!("cannot create {}: {error}", args.out_dir.display()))?;
    let figures: [(&str, &str, &str, &str, Pick); 2] = [
        ("fig4a_hhc1_vs_raid5.svg", "(a)", "RAID5", "HHC-1", |row| {
            (row.raid5_hours, row.hhc1_hours)
        }),
        ("fig4b_hhc2_vs_raid6.svg", "(b)", "RAID6", "HHC-2", |row| {
            (row.raid6_hours, row.hhc2_hours)
        }),
    ];
    let mut paths = Vec::new();
    for (file_name, panel, backing_name, hhc_name, pick) in figures {
        let mut plot = figure(args, rows, (backing_name, hhc_name), pick);
        plot.title = format!("{panel} MTTDL of {hhc_name} vs {backing_name} (paper Fig. 4)");
        let path = args.out_dir.join(file_name);
        write_file(&path, &plot.to_svg())?;
        paths.push(path);
    }
    Ok(paths)
}

/// MTTDL against array width, one solid (backing) and one dashed (HHC) line per MTTR.
fn figure(
    args: &Args,
    rows: &[Row],
    (backing_name, hhc_name): (&str, &str),
    pick: Pick,
) -> LogPlot {
    let mut series = Vec::new();
    for (index, &mttr_hours) in args.mttrs_hours.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let at_mttr: Vec<&Row> = rows
            .iter()
            .filter(|row| row.mttr_hours == mttr_hours)
            .collect();
        let points = |of_hhc: bool| {
            let point = |row: &&Row| {
                let (backing_hours, hhc_hours) = pick(row);
                (
                    row.disks as f64,
                    years(if of_hhc { hhc_hours } else { backing_hours }),
                )
            };
            at_mttr.iter().map(point).collect()
        };
        let label = |name| format!("{name}, MTTR {mttr_hours} h");
        series.push(Series {
            label: label(backing_name),
            points: points(false),
            color,
            dashed: false,
        });
        series.push(Series {
            label: label(hhc_name),
            points: points(true),
            color,
            dashed: true,
        });
    }
    series.push(ssd_series(args));
    LogPlot {
        title: String::new(),
        x_label: format!("disks in the backing {backing_name} array"),
        y_label: "MTTDL (years, log scale)".into(),
        series,
    }
}

/// The paper's figure also shows the SSD's MTTF: a write-back cache without the log.
fn ssd_series(args: &Args) -> Series {
    let ssd_years = years(args.ssd_mttf_hours);
    let points = args
        .disks
        .0
        .iter()
        .map(|&disks| (disks as f64, ssd_years))
        .collect();
    Series {
        label: "SSD alone (MTTF)".into(),
        points,
        color: "#7f7f7f",
        dashed: true,
    }
}

fn write_file(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

fn run_recommend(args: &Args) -> CliResult {
    let mut answers = Vec::new();
    for &disks in &args.disks.0 {
        for &mttr_hours in &args.mttrs_hours {
            let recommendation = recommend_mirrors(
                args.backing,
                disks,
                &devices(args, mttr_hours),
                args.mirrors_max,
            )
            .map_err(|error| error.to_string())?;
            answers.push((disks, mttr_hours, recommendation));
        }
    }
    let output = if args.json {
        recommend_json(args, &answers)
    } else {
        recommend_text(args, &answers)
    };
    print!("{output}");
    let all_answered = answers
        .iter()
        .all(|(_, _, recommendation)| recommendation.mirrors.is_some());
    Ok(if all_answered {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn recommend_text(args: &Args, answers: &[(usize, f64, Recommendation)]) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "MTTDL in years; {}", parameters_line(args));
    for (disks, mttr_hours, recommendation) in answers {
        let backing_years = years(recommendation.backing_mttdl_hours);
        let _ = writeln!(
            text,
            "{} of {disks} disks, MTTR {mttr_hours} h: MTTDL {backing_years:.3e} years",
            args.backing.name()
        );
        for (index, &hhc_hours) in recommendation.hhc_mttdl_hours_by_mirrors.iter().enumerate() {
            let verdict = if hhc_hours >= recommendation.backing_mttdl_hours {
                "meets"
            } else {
                "falls short of"
            };
            let _ = writeln!(
                text,
                "  HHC-{}: {:.3e} years, {verdict} the backing array",
                index + 1,
                years(hhc_hours)
            );
        }
        let _ = match recommendation.mirrors {
            Some(mirrors) => writeln!(text, "  => {mirrors} log mirror(s)"),
            None => writeln!(
                text,
                "  => none up to {} mirrors suffices",
                args.mirrors_max
            ),
        };
    }
    text
}

fn recommend_json(args: &Args, answers: &[(usize, f64, Recommendation)]) -> String {
    let answers_json: Vec<Json> = answers
        .iter()
        .map(|(disks, mttr_hours, recommendation)| {
            let hhc_years: Vec<Json> =
                recommendation.hhc_mttdl_hours_by_mirrors.iter().map(|&hours| Json::Exp(years(hours))).collect();
            Object::new()
                .field("disks", *disks as u64)
                .field("mttr_hours", Json::Exp(*mttr_hours))
                .field("backing_years", Json::Exp(years(recommendation.backing_mttdl_hours)))
                .field("hhc_years_by_mirrors", hhc_years)
                .field("mirrors", recommendation.mirrors.map(|mirrors| mirrors as u64))
                .into()
        })
        .collect();
    let object = Object::new()
        .field("parameters", parameters_json(args))
        .field("backing", args.backing.name().to_lowercase())
        .field("recommendations", answers_json);
    format!("{object}\n")
}
