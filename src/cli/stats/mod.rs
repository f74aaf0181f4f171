//! `hhc stats`: an operator's view of running HHC bdevs, like Open CAS's
//! `casadm -P`. Asks a running SPDK target over its JSON-RPC socket
//! (`bdev_hhc_get_stats`, and `bdev_hhc_get_bdevs` for the names) and
//! prints a grouped report, refreshed every `-i` seconds with rates.

mod jsonrpc;
mod rates;
mod snapshot;
mod view;

use super::CliResult;
use jsonrpc::{RpcClient, RpcError};
use rates::Window;
use serde_json::{json, Value};
use snapshot::Snapshot;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// JSON-RPC error code of an unknown bdev (-ENODEV).
const NO_DEVICE: i64 = -19;
/// Moves the cursor home and clears the terminal.
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";

#[derive(clap::Args)]
pub struct Args {
    /// The SPDK target's JSON-RPC Unix socket (its -r option).
    #[arg(long, short = 's')]
    socket: PathBuf,
    /// Only this HHC bdev; without it, every HHC bdev of the target.
    #[arg(long, short = 'b')]
    name: Option<String>,
    /// Refresh every SECONDS, with per-second rates from the counters' changes.
    #[arg(short = 'i', long = "interval", value_name = "SECONDS")]
    interval: Option<f64>,
    /// Stop after K reports (default: 1 without -i, no end with it).
    #[arg(long, value_name = "K")]
    count: Option<u64>,
    /// Print the bdev_hhc_get_stats answers as they are, one JSON object a line.
    #[arg(long)]
    json: bool,
    /// Seconds to wait for the connection and for each answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    timeout: f64,
}

fn duration(flag: &str, seconds: f64) -> Result<Duration, String> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds < 1e9) {
        return Err(format!("{flag} {seconds}: give a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

pub fn run(args: Args) -> CliResult {
    let interval = args.interval.map(|s| duration("-i", s)).transpose()?;
    let timeout = duration("--timeout", args.timeout)?;
    let count = match (args.count, interval) {
        (Some(0), _) => return Err("--count 0: give at least 1".to_string()),
        (Some(k), None) if k > 1 => return Err(format!("--count {k} needs -i SECONDS between the reports")),
        (Some(k), _) => Some(k),
        (None, None) => Some(1),
        (None, Some(_)) => None,
    };
    let mut client = RpcClient::connect(&args.socket, timeout).map_err(|e| e.to_string())?;
    let clear = interval.is_some() && !args.json && std::io::stdout().is_terminal();
    let mut previous: HashMap<String, (Snapshot, Instant)> = HashMap::new();
    let started = Instant::now();
    let mut report = 1u64;
    while count.is_none_or(|k| report <= k) {
        if let Some(interval) = interval.filter(|_| report > 1) {
            let due = started + interval.mul_f64((report - 1) as f64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        let answers = fetch(&mut client, args.name.as_deref()).map_err(|e| e.to_string())?;
        let text = if args.json {
            answers.iter().map(|a| format!("{a}\n")).collect()
        } else {
            let mut text = String::new();
            if clear {
                text.push_str(CLEAR_SCREEN);
            }
            if let Some(interval) = interval {
                if report > 1 && !clear {
                    text.push('\n');
                }
                let of = count.map_or_else(String::new, |k| format!(" of {k}"));
                let socket = args.socket.display();
                text.push_str(&format!("== hhc stats {socket}, every {:.1} s: report {report}{of} ==\n", interval.as_secs_f64()));
            }
            text.push_str(&reports(&answers, interval.is_some(), &mut previous)?);
            text
        };
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).map_err(|e| format!("writing the report: {e}"))?;
        report += 1;
    }
    Ok(ExitCode::SUCCESS)
}

/// The get_stats answer of `name`, or of every HHC bdev the target lists.
fn fetch(client: &mut RpcClient, name: Option<&str>) -> Result<Vec<Value>, RpcError> {
    if let Some(name) = name {
        return Ok(vec![client.call("bdev_hhc_get_stats", Some(json!({"name": name})))?]);
    }
    let listed = client.call("bdev_hhc_get_bdevs", None)?;
    let malformed = || RpcError::Malformed(format!("bdev_hhc_get_bdevs answered no list of named bdevs: {listed}"));
    let bdevs = listed.as_array().ok_or_else(malformed)?;
    let names: Vec<&str> = bdevs.iter().map(|b| b.get("name").and_then(Value::as_str)).collect::<Option<_>>().ok_or_else(malformed)?;
    let mut answers = Vec::with_capacity(names.len());
    for name in names {
        match client.call("bdev_hhc_get_stats", Some(json!({"name": name}))) {
            Ok(answer) => answers.push(answer),
            // Deleted between the list and its stats.
            Err(RpcError::Remote { code: NO_DEVICE, .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(answers)
}

/// The text reports of `answers`; with `rates`, each with the rates since
/// the bdev's report in `previous`, which they then replace.
fn reports(answers: &[Value], rates: bool, previous: &mut HashMap<String, (Snapshot, Instant)>) -> Result<String, String> {
    if answers.is_empty() {
        return Ok("no HHC bdevs\n".to_string());
    }
    let mut text = String::new();
    for (i, answer) in answers.iter().enumerate() {
        let stats = Snapshot::parse(answer).map_err(|why| format!("bdev_hhc_get_stats answered malformed stats: {why}"))?;
        let now = Instant::now();
        let window = rates.then(|| match previous.get(&stats.name) {
            Some((before, at)) => rates::between(before, &stats, now - *at),
            None => Window::Unavailable("the first report; rates from the next refresh".to_string()),
        });
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&view::render(&stats, window.as_ref()));
        previous.insert(stats.name.clone(), (stats, now));
    }
    Ok(text)
}
