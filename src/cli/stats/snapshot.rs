//! One `bdev_hhc_get_stats` answer, checked and typed (docs/rpc.md,
//! "bdev_hhc_get_stats"). Only `name` and `state` are required: a record of a
//! lost cache or a passthrough without a cache answers without some groups.
//! Keys this view does not know are kept, to be shown, not refused.

use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub role: String,
    pub name: String,
    pub health: String,
    /// Log mirrors only: `healthy`, `syncing` or `failed`.
    pub mirror: Option<String>,
    pub segments_behind: Option<u64>,
    /// Its commands' latencies since the last reset, by kind (`read`,
    /// `write`, `flush`), in the answer's order.
    pub latency: Vec<(String, Latency)>,
    /// I/O errors since the last reset.
    pub errors: Option<u64>,
}

/// Whether flushed writes survive the loss of the cache bdev now.
#[derive(Clone, Debug, PartialEq)]
pub struct Protection {
    pub cache_loss_protected: bool,
    /// `protected`, `reduced`, `degraded` or `unprotected`.
    pub state: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub name: String,
    pub state: String,
    pub policy: Option<String>,
    pub policy_target: Option<String>,
    pub failure: Option<String>,
    pub protection: Option<Protection>,
    /// What creating the bdev found allowed but likely a mistake.
    pub warnings: Vec<String>,
    /// The options in force, as answered (`key`, value).
    pub options: Vec<(String, Value)>,
    pub flush_all_in_progress: Option<bool>,
    pub flush_all_blocks_remaining: Option<u64>,
    pub flush_latency: Option<Latency>,
    pub since_reset_ms: Option<u64>,
    /// Monotonic since the last reset, in the answer's order.
    pub counters: Vec<(String, u64)>,
    /// How things are now.
    pub gauges: Vec<(String, u64)>,
    /// (in use, total)
    pub base_io_contexts: Option<(u64, u64)>,
    pub devices: Vec<Device>,
    /// The replay of a lost cache's log, as answered (`key`, value).
    pub recovery: Option<Vec<(String, Value)>>,
    /// Top-level keys this view does not know.
    pub other: Vec<(String, Value)>,
}

/// Top-level keys read into the fields above; `rates` too, which the view
/// leaves out: the target's window starts at anyone's previous get_stats,
/// so the view computes its own between its refreshes.
const KNOWN_KEYS: [&str; 18] = [
    "name",
    "protection",
    "warnings",
    "state",
    "policy",
    "policy_target",
    "failure",
    "options",
    "flush_all_in_progress",
    "flush_all_blocks_remaining",
    "flush_latency_us",
    "since_reset_ms",
    "counters",
    "gauges",
    "rates",
    "base_io_contexts",
    "devices",
    "recovery",
];

impl Snapshot {
    /// The answer `value`, or what is wrong with it.
    pub fn parse(value: &Value) -> Result<Snapshot, String> {
        let object = value.as_object().ok_or_else(|| format!("the stats are not a JSON object: {}", short(value)))?;
        let fields = Fields(object);
        Ok(Snapshot {
            name: fields.string("name")?.ok_or("the stats have no name")?,
            state: fields.string("state")?.ok_or("the stats have no state")?,
            policy: fields.string("policy")?,
            policy_target: fields.string("policy_target")?,
            failure: fields.string("failure")?,
            protection: fields.object("protection")?.map(protection).transpose()?,
            warnings: warnings(object.get("warnings"))?,
            options: fields.object("options")?.map(entries).unwrap_or_default(),
            flush_all_in_progress: fields.boolean("flush_all_in_progress")?,
            flush_all_blocks_remaining: fields.number("flush_all_blocks_remaining")?,
            flush_latency: fields.object("flush_latency_us")?.map(latency).transpose()?,
            since_reset_ms: fields.number("since_reset_ms")?,
            counters: fields.object("counters")?.map(|o| numbers("counters", o)).transpose()?.unwrap_or_default(),
            gauges: fields.object("gauges")?.map(|o| numbers("gauges", o)).transpose()?.unwrap_or_default(),
            base_io_contexts: fields.object("base_io_contexts")?.map(contexts).transpose()?,
            devices: devices(object.get("devices"))?,
            recovery: fields.object("recovery")?.map(entries),
            other: object.iter().filter(|(k, _)| !KNOWN_KEYS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }

    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    pub fn gauge(&self, name: &str) -> Option<u64> {
        self.gauges.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }
}

/// A value for a message, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// Typed access to an object's optional keys; null counts as absent.
struct Fields<'a>(&'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn typed<T>(&self, key: &str, kind: &str, cast: impl Fn(&'a Value) -> Option<T>) -> Result<Option<T>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => cast(value).map(Some).ok_or_else(|| format!("{key} is not {kind}: {}", short(value))),
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, String> {
        self.typed(key, "a string", |v| v.as_str().map(str::to_string))
    }

    fn number(&self, key: &str) -> Result<Option<u64>, String> {
        self.typed(key, "an unsigned integer", Value::as_u64)
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        self.typed(key, "a boolean", Value::as_bool)
    }

    fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, String> {
        self.typed(key, "an object", Value::as_object)
    }
}

fn entries(object: &Map<String, Value>) -> Vec<(String, Value)> {
    object.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn numbers(group: &str, object: &Map<String, Value>) -> Result<Vec<(String, u64)>, String> {
    object
        .iter()
        .map(|(k, v)| v.as_u64().map(|n| (k.clone(), n)).ok_or_else(|| format!("{group}.{k} is not an unsigned integer: {}", short(v))))
        .collect()
}

fn required(fields: &Fields, group: &str, key: &str) -> Result<u64, String> {
    fields.number(key).map_err(|e| format!("{group}.{e}"))?.ok_or_else(|| format!("{group} has no {key}"))
}

fn latency(object: &Map<String, Value>) -> Result<Latency, String> {
    latency_of("flush_latency_us", object)
}

/// The `{count, p50, p99, max}` object at `key`.
fn latency_of(key: &str, object: &Map<String, Value>) -> Result<Latency, String> {
    let fields = Fields(object);
    let get = |field| required(&fields, key, field);
    Ok(Latency { count: get("count")?, p50_us: get("p50")?, p99_us: get("p99")?, max_us: get("max")? })
}

fn warnings(value: Option<&Value>) -> Result<Vec<String>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let list = value.as_array().ok_or_else(|| format!("warnings is not an array: {}", short(value)))?;
    list.iter().map(|w| w.as_str().map(str::to_string).ok_or_else(|| format!("a warning is not a string: {}", short(w)))).collect()
}

fn protection(object: &Map<String, Value>) -> Result<Protection, String> {
    let fields = Fields(object);
    let text = |key| fields.string(key).map_err(|e| format!("protection.{e}"))?.ok_or_else(|| format!("protection has no {key}"));
    Ok(Protection {
        cache_loss_protected: fields
            .boolean("cache_loss_protected")
            .map_err(|e| format!("protection.{e}"))?
            .ok_or("protection has no cache_loss_protected")?,
        state: text("state")?,
        reason: text("reason")?,
    })
}

fn contexts(object: &Map<String, Value>) -> Result<(u64, u64), String> {
    let fields = Fields(object);
    Ok((required(&fields, "base_io_contexts", "in_use")?, required(&fields, "base_io_contexts", "total")?))
}

fn devices(value: Option<&Value>) -> Result<Vec<Device>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let list = value.as_array().ok_or_else(|| format!("devices is not an array: {}", short(value)))?;
    list.iter()
        .map(|device| {
            let object = device.as_object().ok_or_else(|| format!("a device is not an object: {}", short(device)))?;
            let fields = Fields(object);
            let text = |key| fields.string(key).map_err(|e| format!("device {e}"))?.ok_or_else(|| format!("a device has no {key}"));
            let mut latency = Vec::new();
            for kind in ["read", "write", "flush"] {
                let key = format!("{kind}_latency_us");
                if let Some(object) = fields.object(&key).map_err(|e| format!("device {e}"))? {
                    latency.push((kind.to_string(), latency_of(&format!("device {key}"), object)?));
                }
            }
            Ok(Device {
                role: text("role")?,
                name: text("name")?,
                health: text("health")?,
                mirror: fields.string("mirror").map_err(|e| format!("device {e}"))?,
                segments_behind: fields.number("segments_behind").map_err(|e| format!("device {e}"))?,
                latency,
                errors: fields.number("errors").map_err(|e| format!("device {e}"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn a_running_bdev_reads_whole() {
        let s = Snapshot::parse(&fixture("get_stats_running_2.json")).unwrap();
        assert_eq!((s.name.as_str(), s.state.as_str(), s.policy.as_deref()), ("hhc0", "running", Some("hhc")));
        assert_eq!(s.policy_target, None);
        assert_eq!(s.counter("writes"), Some(2048));
        assert_eq!(s.gauge("cache_blocks"), Some(8126));
        assert_eq!(s.counter("cache_blocks"), None);
        assert_eq!(s.flush_latency.as_ref().map(|l| l.count), Some(128));
        assert_eq!(s.base_io_contexts.map(|(_, total)| total), Some(24096));
        assert_eq!(s.devices.iter().map(|d| d.role.as_str()).collect::<Vec<_>>(), ["backing", "cache", "log0"]);
        assert_eq!(s.devices[2].mirror.as_deref(), Some("healthy"));
        let log = &s.devices[2];
        assert_eq!(log.latency.iter().map(|(kind, _)| kind.as_str()).collect::<Vec<_>>(), ["read", "write", "flush"]);
        assert_eq!((log.latency[1].1.count, log.errors), (166, Some(0)));
        assert_eq!(s.counters.first().map(|(n, _)| n.as_str()), Some("reads"), "the answer's order is kept");
        assert!(s.recovery.is_none() && s.other.is_empty());
    }

    #[test]
    fn a_record_has_its_recovery_and_unknown_keys_are_kept() {
        let mut value = fixture("get_stats_recovering.json");
        value["temperature"] = json!({"ssd": 41});
        let s = Snapshot::parse(&value).unwrap();
        assert_eq!(s.state, "recovering");
        let recovery = s.recovery.unwrap();
        assert!(recovery.iter().any(|(k, v)| k == "stage" && v == "replaying"));
        assert_eq!(s.other, vec![("temperature".to_string(), json!({"ssd": 41}))]);
    }

    #[test]
    fn only_name_and_state_are_required() {
        let s = Snapshot::parse(&json!({"name": "h", "state": "starting", "policy_target": null})).unwrap();
        assert!(s.counters.is_empty() && s.devices.is_empty() && s.flush_latency.is_none());
        assert!(Snapshot::parse(&json!({"state": "running"})).unwrap_err().contains("no name"));
    }

    #[test]
    fn wrong_types_are_named() {
        let wrong = |patch: Value| {
            let mut value = fixture("get_stats_running_1.json");
            for (k, v) in patch.as_object().unwrap() {
                value[k] = v.clone();
            }
            Snapshot::parse(&value).unwrap_err()
        };
        assert!(wrong(json!({"counters": {"reads": -1}})).contains("counters.reads"));
        assert!(wrong(json!({"gauges": [1]})).contains("gauges is not an object"));
        assert!(wrong(json!({"flush_latency_us": {"count": 1}})).contains("flush_latency_us has no p50"));
        assert!(wrong(json!({"devices": [{"role": "cache"}]})).contains("a device has no name"));
        let no_p99 = json!({"devices": [{"role": "cache", "name": "ssd", "health": "ok",
            "write_latency_us": {"count": 1, "p50": 2, "max": 3}}]});
        assert!(wrong(no_p99).contains("device write_latency_us has no p99"));
        assert!(wrong(json!({"state": 3})).contains("state is not a string"));
        assert!(Snapshot::parse(&json!([1, 2])).unwrap_err().contains("not a JSON object"));
    }
}
