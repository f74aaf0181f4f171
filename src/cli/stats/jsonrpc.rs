//! A JSON-RPC 2.0 client for an SPDK target's Unix socket: one request at a
//! time on one connection. SPDK frames nothing (no newline after an
//! answer), so an answer ends where one complete JSON value has been parsed.

use serde_json::{json, Value};
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Why a call got no result.
#[derive(Debug)]
pub enum RpcError {
    /// No connection: the socket is missing, refused or did not accept in time.
    Connect(String),
    /// The connection failed, timed out or closed before a whole answer.
    Transport(String),
    /// Bytes that are not a JSON-RPC answer to the request.
    Malformed(String),
    /// The target answered with an error object.
    Remote { method: String, code: i64, message: String },
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            RpcError::Connect(message) | RpcError::Transport(message) | RpcError::Malformed(message) => {
                f.write_str(message)
            }
            RpcError::Remote { method, code, message } => write!(f, "{method}: {message} (error {code})"),
        }
    }
}

pub struct RpcClient {
    stream: UnixStream,
    path: PathBuf,
    timeout: Duration,
    next_id: u64,
    /// Bytes read past the end of the last answer.
    pending: Vec<u8>,
}

impl RpcClient {
    /// Connects to the socket at `path`; `timeout` bounds the connect and
    /// every call.
    pub fn connect(path: &Path, timeout: Duration) -> Result<RpcClient, RpcError> {
        let shown = path.display().to_string();
        if !path.exists() {
            return Err(RpcError::Connect(format!("{shown}: no such socket (is the SPDK target running? its -r option)")));
        }
        // A Unix socket connect blocks only while the listener's backlog is
        // full; the standard library has no timeout for it, so a thread
        // connects and this one waits for it at most `timeout`.
        let (sender, receiver) = mpsc::channel();
        let owned = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = sender.send(UnixStream::connect(owned));
        });
        let stream = match receiver.recv_timeout(timeout) {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(RpcError::Connect(format!("{shown}: cannot connect: {error}"))),
            Err(_) => return Err(RpcError::Connect(format!("{shown}: no connection within {timeout:?}"))),
        };
        stream.set_write_timeout(Some(timeout)).map_err(|e| RpcError::Connect(format!("{shown}: {e}")))?;
        Ok(RpcClient { stream, path: path.to_path_buf(), timeout, next_id: 1, pending: Vec::new() })
    }

    /// Calls `method` and returns its result, or the error object's message.
    pub fn call(&mut self, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = json!({"jsonrpc": "2.0", "method": method, "id": id});
        if let Some(params) = params {
            request["params"] = params;
        }
        let shown = self.path.display().to_string();
        let bytes = serde_json::to_vec(&request).expect("a JSON value serializes");
        self.stream
            .write_all(&bytes)
            .map_err(|e| RpcError::Transport(format!("{shown}: sending {method}: {e}")))?;
        let answer = self.read_value(method)?;
        answer_result(method, id, answer)
    }

    /// Reads until one whole JSON value is buffered, within the timeout.
    fn read_value(&mut self, method: &str) -> Result<Value, RpcError> {
        let shown = self.path.display().to_string();
        let deadline = Instant::now() + self.timeout;
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Some(value) = self.take_value(method)? {
                return Ok(value);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RpcError::Transport(format!("{shown}: no answer to {method} within {:?}", self.timeout)));
            }
            self.stream.set_read_timeout(Some(left)).map_err(|e| RpcError::Transport(format!("{shown}: {e}")))?;
            match self.stream.read(&mut chunk) {
                Ok(0) if self.pending.is_empty() => {
                    return Err(RpcError::Transport(format!("{shown}: the target closed the connection without answering {method}")))
                }
                Ok(0) => {
                    return Err(RpcError::Malformed(format!(
                        "{shown}: the target closed the connection in the middle of its answer to {method} ({} bytes)",
                        self.pending.len()
                    )))
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(RpcError::Transport(format!("{shown}: no answer to {method} within {:?}", self.timeout)))
                }
                Err(e) => return Err(RpcError::Transport(format!("{shown}: reading the answer to {method}: {e}"))),
            }
        }
    }

    /// The first whole value of the buffer (removed from it); None while it
    /// is incomplete.
    fn take_value(&mut self, method: &str) -> Result<Option<Value>, RpcError> {
        let mut values = serde_json::Deserializer::from_slice(&self.pending).into_iter::<Value>();
        match values.next() {
            None => Ok(None),
            Some(Ok(value)) => {
                let used = values.byte_offset();
                self.pending.drain(..used);
                Ok(Some(value))
            }
            Some(Err(error)) if error.is_eof() => Ok(None),
            Some(Err(error)) => {
                let start = String::from_utf8_lossy(&self.pending[..self.pending.len().min(60)]).into_owned();
                Err(RpcError::Malformed(format!("the answer to {method} is not JSON ({error}): {start:?}")))
            }
        }
    }
}

/// The `result` of a JSON-RPC answer to request `id`, or its error.
fn answer_result(method: &str, id: u64, mut answer: Value) -> Result<Value, RpcError> {
    let malformed = |why: &str| RpcError::Malformed(format!("the answer to {method} is not a JSON-RPC answer: {why}"));
    let Some(object) = answer.as_object_mut() else { return Err(malformed("not an object")) };
    if object.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(malformed(&format!("its id is {}, the request's {id}", object.get("id").unwrap_or(&Value::Null))));
    }
    if let Some(error) = object.get("error") {
        let code = error.get("code").and_then(Value::as_i64);
        let message = error.get("message").and_then(Value::as_str);
        let (Some(code), Some(message)) = (code, message) else {
            return Err(malformed(&format!("an error without code and message: {error}")));
        };
        return Err(RpcError::Remote { method: method.to_string(), code, message: message.to_string() });
    }
    object.remove("result").ok_or_else(|| malformed("neither result nor error"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A socket whose server thread reads one request, checks its method
    /// and params, and writes `answer(id)` in `pieces` chunks, then closes.
    fn serve_once(answer: impl Fn(u64) -> Vec<u8> + Send + 'static, pieces: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpc.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut chunk = [0u8; 4096];
            let value: Value = loop {
                let n = stream.read(&mut chunk).unwrap();
                request.extend_from_slice(&chunk[..n]);
                if let Ok(value) = serde_json::from_slice(&request) {
                    break value;
                }
            };
            assert_eq!(value["method"], "bdev_hhc_get_stats");
            assert_eq!(value["params"]["name"], "hhc0");
            let bytes = answer(value["id"].as_u64().unwrap());
            let size = bytes.len().div_ceil(pieces.max(1));
            for piece in bytes.chunks(size.max(1)) {
                stream.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        (dir, path)
    }

    /// The timeout of calls that are answered: a hang guard only, so that a
    /// busy machine, slow to run the fake target, fails no test.
    const HANG_GUARD: Duration = Duration::from_secs(60);

    fn call(path: &Path) -> Result<Value, RpcError> {
        let mut client = RpcClient::connect(path, HANG_GUARD)?;
        client.call("bdev_hhc_get_stats", Some(json!({"name": "hhc0"})))
    }

    #[test]
    fn an_answer_in_pieces_without_a_newline_is_read_whole() {
        let (_dir, path) =
            serve_once(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"name":"hhc0","n":[1,2,3]}}}}"#).into_bytes(), 7);
        let result = call(&path).unwrap();
        assert_eq!(result, json!({"name": "hhc0", "n": [1, 2, 3]}));
    }

    #[test]
    fn an_error_object_gives_its_message_and_code() {
        let (_dir, path) = serve_once(
            |id| {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-19,"message":"name: no HHC bdev named 'hhc0'"}}}}"#)
                    .into_bytes()
            },
            1,
        );
        let error = call(&path).unwrap_err();
        assert!(matches!(error, RpcError::Remote { code: -19, .. }), "{error:?}");
        assert_eq!(error.to_string(), "bdev_hhc_get_stats: name: no HHC bdev named 'hhc0' (error -19)");
    }

    #[test]
    fn garbage_is_malformed() {
        let (_dir, path) = serve_once(|_| b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), 1);
        let error = call(&path).unwrap_err();
        assert!(matches!(error, RpcError::Malformed(_)), "{error:?}");
        assert!(error.to_string().contains("not JSON"), "{error}");
    }

    #[test]
    fn an_answer_to_another_request_is_malformed() {
        let (_dir, path) = serve_once(|id| format!(r#"{{"jsonrpc":"2.0","id":{},"result":1}}"#, id + 1).into_bytes(), 1);
        let error = call(&path).unwrap_err();
        assert!(error.to_string().contains("its id is"), "{error}");
    }

    #[test]
    fn a_close_before_or_during_the_answer_is_an_error() {
        let (_dir, path) = serve_once(|_| Vec::new(), 1);
        let error = call(&path).unwrap_err();
        assert!(error.to_string().contains("closed the connection without answering"), "{error}");
        let (_dir, path) = serve_once(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"na"#).into_bytes(), 1);
        let error = call(&path).unwrap_err();
        assert!(matches!(error, RpcError::Malformed(_)) && error.to_string().contains("in the middle"), "{error}");
    }

    #[test]
    fn a_silent_target_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpc.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
        let timeout = Duration::from_millis(200);
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let started = Instant::now();
            // Connected without a hurry; the call's own timeout is the one tested.
            let outcome = RpcClient::connect(&path, HANG_GUARD).and_then(|mut client| {
                client.timeout = timeout;
                client.call("bdev_hhc_get_stats", None)
            });
            let _ = sender.send((outcome, started.elapsed()));
        });
        // The call must end by itself; a busy machine only makes it later.
        // HANG_GUARD is no measure of the timeout, only of a call that never ends.
        let (outcome, waited) = receiver.recv_timeout(HANG_GUARD).expect("the call never timed out");
        let error = outcome.unwrap_err();
        assert!(error.to_string().contains("no answer to bdev_hhc_get_stats within 200ms"), "{error}");
        assert!(waited >= timeout, "gave up after {waited:?}, before its timeout");
        drop(held.join());
    }

    #[test]
    fn a_missing_or_refusing_socket_is_a_connect_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.sock");
        let error = RpcClient::connect(&missing, HANG_GUARD).err().unwrap();
        assert!(error.to_string().contains("no such socket"), "{error}");
        // A socket file nobody listens on any more.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        let error = RpcClient::connect(&stale, HANG_GUARD).err().unwrap();
        assert!(matches!(error, RpcError::Connect(_)) && error.to_string().contains("cannot connect"), "{error}");
    }
}
