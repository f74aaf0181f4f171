//! `hhc stats` end to end against a fake SPDK target: a Unix socket served
//! by a test thread with real answers (tests/fixtures/), error objects,
//! garbage and closed connections. Every failure must be a message on
//! stderr and exit code 2, never a panic.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What the fake target sends for one request: bytes, or a closed connection.
enum Reply {
    Bytes(Vec<u8>),
    Close,
}

fn result(id: &Value, result: Value) -> Reply {
    // Compact and without a newline, as SPDK writes.
    Reply::Bytes(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string().into_bytes())
}

fn error(id: &Value, code: i64, message: &str) -> Reply {
    Reply::Bytes(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string().into_bytes())
}

/// A fake target on a socket in a fresh directory; `reply` answers each
/// request with the number of get_stats calls before it.
fn fake_target(reply: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rpc.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let reply = Arc::new(reply);
    let stats_calls = Arc::new(Mutex::new(0usize));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let (reply, calls) = (reply.clone(), stats_calls.clone());
            std::thread::spawn(move || serve(stream.unwrap(), &*reply, &calls));
        }
    });
    (dir, path)
}

fn serve(mut stream: UnixStream, reply: &dyn Fn(&Value, usize) -> Reply, calls: &Mutex<usize>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let request = loop {
            let mut values = serde_json::Deserializer::from_slice(&buffer).into_iter::<Value>();
            if let Some(Ok(value)) = values.next() {
                let used = values.byte_offset();
                buffer.drain(..used);
                break value;
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let n = {
            let mut calls = calls.lock().unwrap();
            let n = *calls;
            if request["method"] == "bdev_hhc_get_stats" {
                *calls += 1;
            }
            n
        };
        match reply(&request, n) {
            Reply::Bytes(bytes) => {
                if stream.write_all(&bytes).is_err() {
                    return;
                }
            }
            Reply::Close => return,
        }
    }
}

/// `hhc stats` with a 60 s --timeout: a hang guard only (the fake target
/// answers at once), so that a busy machine fails no test.
fn hhc_stats(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hhc")).arg("stats").arg("--socket").arg(socket).args(["--timeout", "60"]).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Exit code 2 with `expected` in the one-line message, and no panic.
fn assert_fails_with(output: &Output, expected: &str) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "stderr: {message}");
    assert!(message.starts_with("hhc: ") && message.contains(expected), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(output.stdout.is_empty(), "{}", stdout(output));
}

/// get_stats of hhc0 answers the `fixtures` in turn (the last one again
/// after them); any other name is unknown.
fn stats_target(fixtures: &'static [&'static str]) -> (tempfile::TempDir, PathBuf) {
    fake_target(move |request, n| match request["method"].as_str() {
        Some("bdev_hhc_get_stats") if request["params"]["name"] == "hhc0" => {
            result(&request["id"], fixture(fixtures[n.min(fixtures.len() - 1)]))
        }
        Some("bdev_hhc_get_stats") => {
            let name = request["params"]["name"].as_str().unwrap_or_default();
            error(&request["id"], -19, &format!("name: no HHC bdev named '{name}'"))
        }
        Some("bdev_hhc_get_bdevs") => result(&request["id"], fixture("get_bdevs.json")),
        _ => error(&request["id"], -32601, "Method not found"),
    })
}

#[test]
fn one_report_of_a_named_bdev() {
    let (_dir, socket) = stats_target(&["get_stats_running_2.json"]);
    let output = hhc_stats(&socket, &["--name", "hhc0"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in ["hhc0  state running  policy hhc", "read hit ratio", "dirty", "segments in use", "flush latency (us)", "mirror healthy"] {
        assert!(text.contains(expected), "no '{expected}' in\n{text}");
    }
    assert!(!text.contains("==") && !text.contains("per second"), "one report, no rates:\n{text}");
}

#[test]
fn refreshes_show_rates_from_the_second_report_on() {
    let (_dir, socket) = stats_target(&["get_stats_running_1.json", "get_stats_running_2.json"]);
    let output = hhc_stats(&socket, &["--name", "hhc0", "-i", "0.2", "--count", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.matches("== hhc stats ").count(), 2, "{text}");
    let (first, second) = text.split_once("report 2 of 2").unwrap();
    assert!(first.contains("rates from the next refresh") && !first.contains("per second"), "{first}");
    // The window is the target's: 1654 ms between the two answers.
    assert!(second.contains("over the last 1.7 s") && second.contains("per second"), "{second}");
    assert!(!text.contains("\x1b["), "stdout is no terminal: no screen clearing");
}

#[test]
fn without_a_name_every_listed_bdev_is_shown_and_vanished_ones_skipped() {
    let (_dir, socket) = fake_target(|request, _| match request["method"].as_str() {
        Some("bdev_hhc_get_bdevs") => result(&request["id"], json!([{"name": "gone"}, {"name": "hhc0"}, {"name": "hhc1"}])),
        Some("bdev_hhc_get_stats") if request["params"]["name"] == "gone" => error(&request["id"], -19, "no HHC bdev named 'gone'"),
        Some("bdev_hhc_get_stats") if request["params"]["name"] == "hhc0" => result(&request["id"], fixture("get_stats_running_2.json")),
        _ => result(&request["id"], fixture("get_stats_recovering.json")).rename("hhc1"),
    });
    let output = hhc_stats(&socket, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("hhc0  state running") && text.contains("hhc1  state recovering"), "{text}");
    assert!(text.contains("blocks replayed") && !text.contains("gone"), "{text}");
}

#[test]
fn no_bdevs_at_all() {
    let (_dir, socket) = fake_target(|request, _| result(&request["id"], json!([])));
    let output = hhc_stats(&socket, &[]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), "no HHC bdevs\n");
}

#[test]
fn json_prints_the_answers_as_they_are() {
    let (_dir, socket) = stats_target(&["get_stats_running_1.json", "get_stats_running_2.json"]);
    let output = hhc_stats(&socket, &["--name", "hhc0", "--json", "-i", "0.1", "--count", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(serde_json::from_str::<Value>(lines[1]).unwrap(), fixture("get_stats_running_2.json"));
    assert!(lines[0].starts_with(r#"{"name":"hhc0","state":"running","policy":"hhc""#), "the target's key order: {}", lines[0]);
}

#[test]
fn an_unknown_bdev_fails_with_the_rpcs_message() {
    let (_dir, socket) = stats_target(&["get_stats_running_2.json"]);
    assert_fails_with(&hhc_stats(&socket, &["--name", "nope"]), "bdev_hhc_get_stats: name: no HHC bdev named 'nope' (error -19)");
}

#[test]
fn garbage_a_closed_connection_and_malformed_stats_fail_cleanly() {
    let (_dir, socket) = fake_target(|_, _| Reply::Bytes(b"<html>not json</html>".to_vec()));
    assert_fails_with(&hhc_stats(&socket, &["--name", "hhc0"]), "is not JSON");
    let (_dir, socket) = fake_target(|_, _| Reply::Close);
    assert_fails_with(&hhc_stats(&socket, &["--name", "hhc0"]), "closed the connection without answering");
    let (_dir, socket) = fake_target(|request, _| result(&request["id"], json!(42)));
    assert_fails_with(&hhc_stats(&socket, &["--name", "hhc0"]), "malformed stats: the stats are not a JSON object");
    let (_dir, socket) = fake_target(|request, _| result(&request["id"], json!({"name": "hhc0"})));
    assert_fails_with(&hhc_stats(&socket, &["--name", "hhc0"]), "the stats have no state");
    let (_dir, socket) = fake_target(|request, _| result(&request["id"], json!({"bdevs": 1})));
    assert_fails_with(&hhc_stats(&socket, &[]), "bdev_hhc_get_bdevs answered no list of named bdevs");
}

#[test]
fn a_missing_or_dead_socket_and_bad_flags_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    assert_fails_with(&hhc_stats(&dir.path().join("none.sock"), &[]), "no such socket");
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    assert_fails_with(&hhc_stats(&stale, &[]), "cannot connect");
    assert_fails_with(&hhc_stats(&stale, &["--count", "3"]), "--count 3 needs -i");
    assert_fails_with(&hhc_stats(&stale, &["-i", "0"]), "-i 0: give a positive number");
}

trait Rename {
    fn rename(self, name: &str) -> Reply;
}

impl Rename for Reply {
    /// The same answer with the stats' name replaced.
    fn rename(self, name: &str) -> Reply {
        let Reply::Bytes(bytes) = self else { return self };
        let mut answer: Value = serde_json::from_slice(&bytes).unwrap();
        answer["result"]["name"] = json!(name);
        Reply::Bytes(answer.to_string().into_bytes())
    }
}
