//! `bdev_hhc_create` parameters: checks that need no device, the engine
//! `Config` built from them and the base bdevs' facts, and the JSON that
//! re-emits the create call. Every error names the parameter at fault.
//!
//! (Its last third is tests: each refusal, and the create call re-emitted.)

use super::json::{self, JsonObject};
use crate::config::{Config, ConfigError, CutoffPolicy, Options, Policy, BACKING_STRIPE_BYTES_MAX};
use crate::format::{OWNER_BYTES_MAX, UNIT_BYTES};

/// First line of the owner record (format version of the record itself).
const OWNER_RECORD_HEADER: &str = "hhc-spdk-create 1";
/// Longest bdev name accepted (bytes).
pub const NAME_BYTES_MAX: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateParams {
    pub name: String,
    pub backing: String,
    /// Empty: no cache, requests go straight to the backing bdev (policy
    /// passthrough without logs only; what `bdev_hhc_recover` makes).
    pub cache: String,
    /// The log mirror slots in order; an empty name is a slot without a
    /// mirror (one detached: `bdev_hhc_attach_log` fills it), kept so that
    /// the others keep their places in the log.
    pub logs: Vec<String>,
    pub policy: Policy,
    /// The cores the bdev's owner thread may run on (an SPDK cpumask, made
    /// into a thread of the module's); None: the thread of the create call.
    pub cpumask: Option<String>,
    pub block_size: Option<u32>,
    pub segment_size: Option<u32>,
    pub buffer_count: Option<u32>,
    /// Bytes of log left after a barrier part (`Config::barrier_gap_bytes`;
    /// 0: never a gap). Not a layout: each part records its own gap, so a
    /// re-open may change it; the owner record and `save_config` keep it.
    pub barrier_gap: Option<u32>,
    /// The backing RAID's stripe in bytes (`Config::backing_stripe_bytes`),
    /// for a backing bdev that declares none (bdev_iscsi) or only one
    /// member's chunk (SPDK's RAID bdevs); None: what the bdev declares.
    /// Not a layout either: a re-open may change it.
    pub backing_stripe: Option<u32>,
    /// Milliseconds a log mirror may leave a command unanswered before it
    /// counts as failed (`Config::mirror_timeout_ns`; 0: never); None: the
    /// engine's 10 s. Not a layout either.
    pub log_timeout: Option<u32>,
    /// The options `bdev_hhc_set_options` changes later.
    pub options: OptionParams,
    /// Replay the log that the log bdevs hold (written by another host,
    /// now gone) onto the backing bdev before formatting (a takeover). Of
    /// this one create call only: the owner record and `save_config` leave
    /// it out, and the node forgets it once the replay is done.
    pub takeover: bool,
}

/// The options an operator changes online (`bdev_hhc_set_options`), as
/// given: None where left out. `bdev_hhc_create` takes the same keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OptionParams {
    pub dirty_threshold: Option<u32>,
    pub writeback_parallelism: Option<u32>,
    pub idle_after_ms: Option<u32>,
    pub seq_cutoff_threshold: Option<u64>,
    pub seq_cutoff_policy: Option<CutoffPolicy>,
}

impl OptionParams {
    /// `seq_cutoff_policy` as given; an unknown name is refused.
    pub fn new(
        dirty_threshold: Option<u32>,
        writeback_parallelism: Option<u32>,
        idle_after_ms: Option<u32>,
        seq_cutoff_threshold: Option<u64>,
        seq_cutoff_policy: Option<&str>,
    ) -> Result<OptionParams, ConfigError> {
        let seq_cutoff_policy = seq_cutoff_policy.map(str::parse).transpose()?;
        let params = OptionParams { dirty_threshold, writeback_parallelism, idle_after_ms, seq_cutoff_threshold, seq_cutoff_policy };
        // Range checks that need no engine (the engine checks the rest).
        params.apply(Config::default().options())?;
        Ok(params)
    }

    /// `options` with the given values in place of theirs, checked.
    pub fn apply(&self, options: Options) -> Result<Options, ConfigError> {
        let dirty_threshold_percent = match self.dirty_threshold {
            Some(t) if t > 100 => return Err(ConfigError::invalid(format!("dirty_threshold {t} must be 1..100 percent"))),
            Some(t) => t as u8,
            None => options.dirty_threshold_percent,
        };
        let merged = Options {
            dirty_threshold_percent,
            writeback_parallelism: self.writeback_parallelism.unwrap_or(options.writeback_parallelism),
            idle_after_ns: self.idle_after_ms.map_or(options.idle_after_ns, |ms| ms as u64 * 1_000_000),
            seq_cutoff_policy: self.seq_cutoff_policy.unwrap_or(options.seq_cutoff_policy),
            seq_cutoff_threshold_bytes: self.seq_cutoff_threshold.unwrap_or(options.seq_cutoff_threshold_bytes),
        };
        merged.validate().map_err(|e| ConfigError { message: e.message.replace("idle_after ", "idle_after_ms: "), ..e })?;
        Ok(merged)
    }

    /// The values `saved` holds where these leave them out: what a create
    /// call that gives no options over a warm cache keeps from its owner
    /// record. Empty when it gives every one the record holds.
    pub fn kept_from(&self, saved: &OptionParams) -> OptionParams {
        OptionParams {
            dirty_threshold: saved.dirty_threshold.filter(|_| self.dirty_threshold.is_none()),
            writeback_parallelism: saved.writeback_parallelism.filter(|_| self.writeback_parallelism.is_none()),
            idle_after_ms: saved.idle_after_ms.filter(|_| self.idle_after_ms.is_none()),
            seq_cutoff_threshold: saved.seq_cutoff_threshold.filter(|_| self.seq_cutoff_threshold.is_none()),
            seq_cutoff_policy: saved.seq_cutoff_policy.filter(|_| self.seq_cutoff_policy.is_none()),
        }
    }

    /// The given values as `key value, ...` (for the log).
    pub fn describe(&self) -> String {
        self.given().into_iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    }

    /// The values in force as the parameters that bring them back.
    pub fn of(options: Options) -> OptionParams {
        OptionParams {
            dirty_threshold: Some(options.dirty_threshold_percent as u32),
            writeback_parallelism: Some(options.writeback_parallelism),
            idle_after_ms: Some((options.idle_after_ns / 1_000_000).min(u32::MAX as u64) as u32),
            seq_cutoff_threshold: Some(options.seq_cutoff_threshold_bytes),
            seq_cutoff_policy: Some(options.seq_cutoff_policy),
        }
    }

    /// Given values by key, as text (the owner record, the JSON).
    fn given(&self) -> Vec<(&'static str, String)> {
        let numbers = [
            ("dirty_threshold", self.dirty_threshold.map(u64::from)),
            ("writeback_parallelism", self.writeback_parallelism.map(u64::from)),
            ("idle_after_ms", self.idle_after_ms.map(u64::from)),
            ("seq_cutoff_threshold", self.seq_cutoff_threshold),
        ];
        let mut given: Vec<(&'static str, String)> =
            numbers.into_iter().filter_map(|(key, value)| value.map(|v| (key, v.to_string()))).collect();
        if let Some(policy) = self.seq_cutoff_policy {
            given.push(("seq_cutoff_policy", policy.name().to_string()));
        }
        given
    }

    /// The options as a JSON object's members (numbers, the policy a string).
    pub fn add_to(&self, mut object: JsonObject) -> JsonObject {
        for (key, value) in self.given() {
            object = match key {
                "seq_cutoff_policy" => object.string(key, &value),
                _ => object.raw(key, &value),
            };
        }
        object
    }
}

/// What the module learns about a base bdev after opening it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseFacts {
    pub block_size: u32,
    pub blocks_count: u64,
    pub supports_flush: bool,
    /// The bdev's optimal I/O boundary (a RAID's stripe), 0 if none.
    pub stripe_blocks: u32,
}

impl BaseFacts {
    pub fn bytes(&self) -> u64 {
        self.block_size as u64 * self.blocks_count
    }

    /// The stripe write-back aligns to: the bdev's boundary when it is a
    /// whole number of cache blocks the engine can align to, else none.
    pub fn stripe_bytes(&self, cache_block_size: u32) -> u32 {
        let bytes = self.stripe_blocks as u64 * self.block_size as u64;
        let usable = bytes.is_multiple_of(cache_block_size as u64) && bytes <= BACKING_STRIPE_BYTES_MAX as u64;
        if usable { bytes as u32 } else { 0 }
    }
}

impl CreateParams {
    /// `policy` None means the default, `hhc`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        backing: String,
        cache: String,
        logs: Vec<String>,
        policy: Option<&str>,
        block_size: Option<u32>,
        segment_size: Option<u32>,
        buffer_count: Option<u32>,
        options: OptionParams,
    ) -> Result<CreateParams, ConfigError> {
        let policy = policy.map_or(Ok(Policy::Hhc), str::parse)?;
        let params = CreateParams {
            name,
            backing,
            cache,
            logs,
            policy,
            cpumask: None,
            block_size,
            segment_size,
            buffer_count,
            barrier_gap: None,
            backing_stripe: None,
            log_timeout: None,
            options,
            takeover: false,
        };
        params.check_names()?;
        Ok(params)
    }

    /// With the owner thread's cores (`cpumask`), checked for what SPDK's
    /// cpumask syntax may hold ("0x2", "[1,3-4]"); whether it names a core
    /// of this application is checked when the thread is made.
    pub fn with_cpumask(self, cpumask: Option<&str>) -> Result<CreateParams, ConfigError> {
        if let Some(mask) = cpumask {
            let allowed = |c: char| c.is_ascii_hexdigit() || "xX[],-".contains(c);
            if mask.is_empty() || mask.len() > 64 || !mask.chars().all(allowed) {
                let shown: String = mask.chars().take(64).collect();
                return Err(ConfigError::invalid(format!("cpumask: {shown:?} is not a CPU mask (e.g. 0x2 or [1,3])")));
            }
        }
        Ok(CreateParams { cpumask: cpumask.map(str::to_string), ..self })
    }

    /// With the gap after barrier parts; `config` checks it against the
    /// block size, as every number that depends on another.
    pub fn with_barrier_gap(self, barrier_gap: Option<u32>) -> CreateParams {
        CreateParams { barrier_gap, ..self }
    }

    /// With the backing RAID's stripe, checked by `config` as the gap is.
    pub fn with_backing_stripe(self, backing_stripe: Option<u32>) -> CreateParams {
        CreateParams { backing_stripe, ..self }
    }

    /// With the log mirrors' command timeout in milliseconds.
    pub fn with_log_timeout(self, log_timeout: Option<u32>) -> CreateParams {
        CreateParams { log_timeout, ..self }
    }

    /// A takeover (`takeover`): it needs a cache bdev to format and the log
    /// bdevs holding the log to replay.
    pub fn with_takeover(self, takeover: bool) -> Result<CreateParams, ConfigError> {
        if takeover && self.is_direct() {
            return Err(ConfigError::invalid("takeover: needs a cache bdev (cache), formatted once the log is replayed"));
        }
        if takeover && self.logs.iter().all(String::is_empty) {
            return Err(ConfigError::invalid("takeover: give the log bdevs that hold the volume's log (logs)"));
        }
        Ok(CreateParams { takeover, ..self })
    }

    /// No cache bdev: a passthrough straight to the backing bdev.
    pub fn is_direct(&self) -> bool {
        self.cache.is_empty()
    }

    fn check_names(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError::invalid("name must not be empty"));
        }
        check_name("name", &self.name)?;
        if self.is_direct() && (self.policy != Policy::Passthrough || !self.logs.is_empty()) {
            return Err(ConfigError::invalid("cache must name a bdev (only policy passthrough without logs goes without one)"));
        }
        let mut roles: Vec<(&str, &str)> = vec![("backing", &self.backing)];
        if !self.is_direct() {
            roles.push(("cache", &self.cache));
        }
        roles.extend(self.logs.iter().filter(|l| !l.is_empty()).map(|l| ("logs", l.as_str())));
        if roles.len() == 1 + usize::from(!self.is_direct()) && !self.logs.is_empty() {
            return Err(ConfigError::invalid(
                "logs must name a bdev in at least one slot (an empty name is a slot without a mirror)",
            ));
        }
        for (index, (role, bdev)) in roles.iter().enumerate() {
            if bdev.is_empty() {
                return Err(ConfigError::invalid(format!("{role} must name a bdev")));
            }
            check_name(role, bdev)?;
            if *bdev == self.name {
                return Err(ConfigError::invalid(format!("{role} bdev '{bdev}' is the name of the HHC bdev itself")));
            }
            if let Some((other, _)) = roles[..index].iter().find(|(_, b)| b == bdev) {
                if other == role {
                    return Err(ConfigError::invalid(format!("{role}: bdev '{bdev}' is given twice")));
                }
                return Err(ConfigError::invalid(format!("bdev '{bdev}' is given both as {other} and as {role}")));
            }
        }
        if self.policy.uses_log() && self.logs.is_empty() {
            return Err(ConfigError::invalid("logs: policy hhc needs at least one log bdev"));
        }
        Ok(())
    }

    /// Log mirror slots without a bdev (bit i: slot i).
    pub fn absent_mirrors(&self) -> u16 {
        self.logs.iter().enumerate().filter(|(i, l)| l.is_empty() && *i < 16).fold(0, |mask, (i, _)| mask | 1 << i)
    }

    /// The engine configuration for these base bdevs (`logs` in order; the
    /// facts of an empty slot are not looked at). The instance id is a
    /// placeholder until the cache device is probed.
    pub fn config(&self, backing: BaseFacts, cache: BaseFacts, logs: &[BaseFacts]) -> Result<Config, ConfigError> {
        let defaults = Config::default();
        let block_size = self.block_size.unwrap_or(defaults.block_size);
        let options = self.options.apply(defaults.options())?;
        let named_logs = || self.logs.iter().zip(logs).filter(|(name, _)| !name.is_empty());
        let mut config = Config {
            policy: self.policy,
            block_size,
            cache_device_bytes: cache.bytes(),
            log_device_bytes: named_logs().map(|(_, facts)| facts.bytes()).min().unwrap_or(0),
            mirrors_count: u8::try_from(self.logs.len()).map_err(|_| ConfigError::invalid("logs: too many log bdevs"))?,
            mirrors_absent: self.absent_mirrors(),
            backing_device_bytes: backing.bytes(),
            backing_stripe_bytes: self.backing_stripe.unwrap_or_else(|| backing.stripe_bytes(block_size)),
            segment_bytes: self.segment_size.unwrap_or(defaults.segment_bytes),
            barrier_gap_bytes: self.barrier_gap.unwrap_or(defaults.barrier_gap_bytes),
            log_buffers_count: self.buffer_count.unwrap_or(defaults.log_buffers_count),
            mirror_timeout_ns: self.log_timeout.map_or(defaults.mirror_timeout_ns, |ms| ms as u64 * 1_000_000),
            backing_has_flush: backing.supports_flush,
            // Too long to keep (very long names): the bdev is not examinable.
            owner_record: Some(self.owner_record()).filter(|r| r.len() <= OWNER_BYTES_MAX).unwrap_or_default(),
            ..defaults
        };
        config.set_options(options);
        // The parameters first: a block_size of 0 is the caller's error, not
        // the backing bdev's.
        config.validate()?;
        check_base_block_size("backing", &self.backing, backing, block_size)?;
        check_base_block_size("cache", &self.cache, cache, UNIT_BYTES as u32)?;
        for (name, facts) in named_logs() {
            check_base_block_size("logs", name, *facts, UNIT_BYTES as u32)?;
        }
        Ok(config)
    }

    /// The configuration of a passthrough without a cache: only the block
    /// size and the backing bdev matter.
    pub fn direct_config(&self, backing: BaseFacts) -> Result<Config, ConfigError> {
        let defaults = Config::default();
        let block_size = self.block_size.unwrap_or(defaults.block_size);
        if !block_size.is_power_of_two() || !(UNIT_BYTES as u32..=65536).contains(&block_size) {
            return Err(ConfigError::invalid(format!("block_size {block_size} must be a power of two from 4096 to 65536")));
        }
        check_base_block_size("backing", &self.backing, backing, block_size)?;
        Ok(Config {
            policy: Policy::Passthrough,
            block_size,
            backing_device_bytes: backing.bytes(),
            backing_has_flush: backing.supports_flush,
            mirrors_count: 0,
            ..defaults
        })
    }

    /// The create parameters as the cache superblock's owner record, one
    /// `key=value` line each, so that examine can assemble the bdev again.
    pub fn owner_record(&self) -> Vec<u8> {
        let mut text = format!("{OWNER_RECORD_HEADER}\nname={}\nbacking={}\ncache={}\nlogs={}\npolicy={}\n", self.name, self.backing, self.cache, self.logs.join(","), self.policy.name());
        if let Some(mask) = &self.cpumask {
            text += &format!("cpumask={mask}\n");
        }
        for (key, value) in self.optional_numbers() {
            if let Some(value) = value {
                text += &format!("{key}={value}\n");
            }
        }
        for (key, value) in self.options.given() {
            text += &format!("{key}={value}\n");
        }
        text.into_bytes()
    }

    /// Parameters back from an owner record: `Ok(None)` if the record is
    /// not one of ours (another program formatted the cache, or nothing
    /// recorded it), an error naming the fault if it is ours but does not
    /// hold valid parameters. The bytes come from a device: hostile input.
    pub fn from_owner_record(record: &[u8]) -> Result<Option<CreateParams>, ConfigError> {
        let Some(body) = record.strip_prefix(OWNER_RECORD_HEADER.as_bytes()).and_then(|r| r.strip_prefix(b"\n")) else {
            return Ok(None);
        };
        let invalid = |what: String| ConfigError::invalid(format!("owner record: {what}"));
        let text = std::str::from_utf8(body).map_err(|e| invalid(format!("not UTF-8 ({e})")))?;
        let mut fields = std::collections::HashMap::new();
        for line in text.lines() {
            let (key, value) = line.split_once('=').ok_or_else(|| invalid(format!("line {line:?} is not key=value")))?;
            fields.insert(key, value);
        }
        let text_of = |key: &str| fields.get(key).map(|v| v.to_string()).ok_or_else(|| invalid(format!("no {key}")));
        let number = |key: &str| {
            fields.get(key).map(|v| v.parse::<u32>().map_err(|_| invalid(format!("{key}={v:?} is not a number")))).transpose()
        };
        let number64 = |key: &str| {
            fields.get(key).map(|v| v.parse::<u64>().map_err(|_| invalid(format!("{key}={v:?} is not a number")))).transpose()
        };
        let options = OptionParams::new(
            number("dirty_threshold")?,
            number("writeback_parallelism")?,
            number("idle_after_ms")?,
            number64("seq_cutoff_threshold")?,
            fields.get("seq_cutoff_policy").copied(),
        )
        .map_err(|e| e.prefixed("owner record: "))?;
        let barrier_gap = number("barrier_gap")?;
        let backing_stripe = number("backing_stripe")?;
        let log_timeout = number("log_timeout_ms")?;
        let logs = text_of("logs")?;
        let logs = if logs.is_empty() { Vec::new() } else { logs.split(',').map(str::to_string).collect() };
        CreateParams::new(
            text_of("name")?,
            text_of("backing")?,
            text_of("cache")?,
            logs,
            fields.get("policy").copied(),
            number("block_size")?,
            number("segment_size")?,
            number("buffer_count")?,
            options,
        )
        .and_then(|params| params.with_cpumask(fields.get("cpumask").copied()))
        .map(|params| Some(params.with_barrier_gap(barrier_gap).with_backing_stripe(backing_stripe).with_log_timeout(log_timeout)))
        .map_err(|e| e.prefixed("owner record: "))
    }

    fn optional_numbers(&self) -> [(&'static str, Option<u32>); 6] {
        [
            ("block_size", self.block_size),
            ("segment_size", self.segment_size),
            ("buffer_count", self.buffer_count),
            ("barrier_gap", self.barrier_gap),
            ("backing_stripe", self.backing_stripe),
            ("log_timeout_ms", self.log_timeout),
        ]
    }

    /// The `params` object of a `bdev_hhc_create` call that recreates this bdev.
    pub fn to_json(&self) -> String {
        let mut object = JsonObject::new()
            .string("name", &self.name)
            .string("backing", &self.backing);
        if !self.is_direct() {
            object = object.string("cache", &self.cache);
        }
        object = object
            .raw("logs", &json::array(self.logs.iter().map(|l| json::string(l))))
            .string("policy", self.policy.name());
        if let Some(mask) = &self.cpumask {
            object = object.string("cpumask", mask);
        }
        for (key, value) in self.optional_numbers() {
            if let Some(value) = value {
                object = object.number(key, value as u64);
            }
        }
        self.options.add_to(object).finish()
    }
}

/// What `bdev_hhc_recover` is asked to do with a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoverMode {
    Passthrough,
    Cache,
    Replay,
}

/// The `mode` of `bdev_hhc_recover` and whether it takes `cache`.
pub fn recover_mode(mode: &str, cache: Option<&str>) -> Result<RecoverMode, ConfigError> {
    let mode = match mode {
        "passthrough" => RecoverMode::Passthrough,
        "cache" => RecoverMode::Cache,
        "replay" => RecoverMode::Replay,
        other => {
            let other: String = other.chars().take(64).collect();
            return Err(ConfigError::invalid(format!("mode: unknown mode '{other}'; passthrough, cache or replay")));
        }
    };
    match (mode, cache) {
        (RecoverMode::Cache, None) => Err(ConfigError::invalid("cache: mode cache needs the fresh cache bdev")),
        (RecoverMode::Passthrough | RecoverMode::Replay, Some(_)) => {
            Err(ConfigError::invalid("cache: only mode cache takes a cache bdev"))
        }
        _ => Ok(mode),
    }
}

/// A bdev name becomes a C string and a log line: no NUL or other control
/// character, and a length any SPDK component takes.
pub fn check_name(role: &str, name: &str) -> Result<(), ConfigError> {
    if name.len() > NAME_BYTES_MAX {
        return Err(ConfigError::invalid(format!("{role}: a bdev name of {} bytes; at most {NAME_BYTES_MAX}", name.len())));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(ConfigError::invalid(format!("{role}: bdev name {name:?} holds the control character {c:?}")));
    }
    Ok(())
}

/// Device commands address bytes in units of `unit_bytes`; the base bdev's
/// blocks must tile them.
pub fn check_base_block_size(role: &str, name: &str, facts: BaseFacts, unit_bytes: u32) -> Result<(), ConfigError> {
    if !facts.block_size.is_power_of_two() || facts.block_size > unit_bytes.min(UNIT_BYTES as u32) {
        return Err(ConfigError::invalid(format!(
            "{role} bdev '{name}' has block size {} bytes; HHC needs a power of two of at most {} bytes",
            facts.block_size,
            UNIT_BYTES
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(policy: &str, logs: &[&str]) -> Result<CreateParams, ConfigError> {
        CreateParams::new(
            "hhc0".into(),
            "back".into(),
            "ssd".into(),
            logs.iter().map(|s| s.to_string()).collect(),
            Some(policy),
            None,
            None,
            None,
            OptionParams::default(),
        )
    }

    fn no_cache(policy: &str, logs: &[&str]) -> Result<CreateParams, ConfigError> {
        params(policy, logs).map(|p| CreateParams { cache: String::new(), ..p }).and_then(|p| {
            p.check_names()?;
            Ok(p)
        })
    }

    #[test]
    fn a_passthrough_without_cache_records_no_cache() {
        let p = no_cache("passthrough", &[]).unwrap();
        assert!(p.is_direct());
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert!(value.get("cache").is_none(), "{value}");
        assert_eq!((value["backing"].as_str(), value["policy"].as_str()), (Some("back"), Some("passthrough")));
    }

    fn facts(mib: u64) -> BaseFacts {
        BaseFacts { block_size: 512, blocks_count: mib << 11, supports_flush: true, stripe_blocks: 0 }
    }

    #[test]
    fn good_parameters_give_a_valid_config() {
        let p = params("hhc", &["hdd0", "hdd1"]).unwrap();
        let config = p.config(facts(1024), facts(64), &[facts(128), facts(96)]).unwrap();
        assert_eq!(config.mirrors_count, 2);
        assert_eq!(config.log_device_bytes, 96 << 20, "the smallest mirror sets the layout");
        assert_eq!(config.backing_device_bytes, 1 << 30);
        assert_eq!(config.policy, Policy::Hhc);
    }

    #[test]
    fn every_bad_parameter_is_named() {
        let cases: Vec<(Result<CreateParams, ConfigError>, &str)> = vec![
            (params("lru", &["hdd0"]), "unknown policy 'lru'"),
            (params("hhc", &[]), "logs"),
            (params("wb", &["ssd"]), "given both as cache and as logs"),
            (params("wb", &["hhc0"]), "name of the HHC bdev"),
            (params("wb", &[""]), "logs must name a bdev in at least one slot"),
            (params("wb", &["hdd0", "hdd0"]), "logs: bdev 'hdd0' is given twice"),
            (no_cache("wb", &[]), "cache must name a bdev"),
            (no_cache("passthrough", &["hdd0"]), "only policy passthrough without logs"),
            (
                OptionParams::new(Some(101), None, None, None, None)
                    .and_then(|o| CreateParams::new("x".into(), "a".into(), "b".into(), vec![], Some("wt"), None, None, None, o)),
                "dirty_threshold 101",
            ),
        ];
        for (result, expected) in cases {
            let error = result.expect_err(expected).message;
            assert!(error.contains(expected), "{error:?} should mention {expected:?}");
        }
        let p = params("hhc", &["hdd0"]).unwrap();
        let odd = BaseFacts { block_size: 520, ..facts(64) };
        assert!(p.config(facts(1024), odd, &[facts(64)]).unwrap_err().message.contains("cache bdev 'ssd' has block size 520"));
        let big = BaseFacts { block_size: 8192, ..facts(64) };
        assert!(p.config(facts(1024), facts(64), &[big]).unwrap_err().message.contains("logs bdev 'hdd0'"));
        assert!(p.config(facts(1024), facts(64), &[facts(1)]).unwrap_err().message.contains("log device"));
        let p = CreateParams { block_size: Some(3000), ..p };
        assert!(p.config(facts(1024), facts(64), &[facts(64)]).unwrap_err().message.contains("block_size 3000"));
        // Named as the parameter's fault, before any base bdev's block size.
        let p = CreateParams { block_size: Some(0), ..p };
        assert!(p.config(facts(1024), facts(64), &[facts(64)]).unwrap_err().message.contains("block_size 0 must be"));
    }

    /// The gap reaches the engine as given (0: never), the default when left
    /// out; one that is not whole blocks, or beyond the largest segment, is
    /// refused naming it.
    #[test]
    fn the_barrier_gap_reaches_the_config_and_bad_ones_are_refused() {
        let gap = |bytes| params("hhc", &["hdd0"]).unwrap().with_barrier_gap(bytes).config(facts(1024), facts(64), &[facts(64)]);
        assert_eq!(gap(None).unwrap().barrier_gap_bytes, crate::config::BARRIER_GAP_BYTES_DEFAULT);
        assert_eq!(gap(Some(0)).unwrap().barrier_gap_bytes, 0);
        assert_eq!(gap(Some(1 << 20)).unwrap().barrier_gap_bytes, 1 << 20);
        assert_eq!(gap(Some(crate::config::BARRIER_GAP_BYTES_MAX)).unwrap().barrier_gap_bytes, 64 << 20);
        for bad in [512, 4096 + 1, 6144, (64 << 20) + 4096, u32::MAX - 4095] {
            let error = gap(Some(bad)).expect_err("a bad gap").message;
            assert!(error.starts_with(&format!("barrier_gap {bad} bytes must be a multiple of block_size 4096")), "{error}");
        }
        let bigger_blocks = CreateParams { block_size: Some(8192), ..params("hhc", &["hdd0"]).unwrap() };
        let error = bigger_blocks.with_barrier_gap(Some(4096)).config(facts(1024), facts(64), &[facts(64)]).unwrap_err().message;
        assert!(error.contains("barrier_gap 4096 bytes must be a multiple of block_size 8192"), "{error}");
    }

    #[test]
    fn write_back_aligns_to_the_backing_bdevs_boundary_when_it_can() {
        let p = params("hhc", &["hdd0"]).unwrap();
        let striped = |blocks| BaseFacts { stripe_blocks: blocks, ..facts(1024) };
        let stripe = |backing| p.config(backing, facts(64), &[facts(64)]).unwrap().backing_stripe_bytes;
        // 512-byte blocks: 512 of them are a 256 KiB stripe.
        assert_eq!(stripe(striped(512)), 256 << 10);
        assert_eq!(stripe(striped(0)), 0);
        // Not a whole number of 4 KiB cache blocks, or beyond the staging size.
        assert_eq!(stripe(striped(12)), 0);
        assert_eq!(stripe(striped(4096)), 0);
    }

    /// A stripe given at create time (a RAID behind bdev_iscsi, which
    /// declares none) wins over what the backing bdev declares, 0 included;
    /// one that is not whole blocks or beyond the staging size is refused.
    #[test]
    fn a_given_backing_stripe_wins_over_the_declared_one_and_bad_ones_are_refused() {
        let declared = BaseFacts { stripe_blocks: 128, ..facts(1024) };
        let stripe = |bytes| params("hhc", &["hdd0"]).unwrap().with_backing_stripe(bytes).config(declared, facts(64), &[facts(64)]);
        assert_eq!(stripe(None).unwrap().backing_stripe_bytes, 64 << 10);
        assert_eq!(stripe(Some(256 << 10)).unwrap().backing_stripe_bytes, 256 << 10);
        assert_eq!(stripe(Some(0)).unwrap().backing_stripe_bytes, 0);
        assert_eq!(stripe(Some(crate::config::BACKING_STRIPE_BYTES_MAX)).unwrap().backing_stripe_bytes, 1 << 20);
        for bad in [512, 6144, (1 << 20) + 4096, u32::MAX - 4095] {
            let error = stripe(Some(bad)).expect_err("a bad stripe").message;
            assert!(error.starts_with(&format!("backing_stripe {bad} bytes must be a multiple of block_size 4096")), "{error}");
        }
        let p = params("hhc", &["hdd0"]).unwrap().with_backing_stripe(Some(256 << 10));
        let record = p.owner_record();
        assert!(String::from_utf8(record.clone()).unwrap().contains("\nbacking_stripe=262144\n"));
        assert_eq!(CreateParams::from_owner_record(&record), Ok(Some(p.clone())));
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(value["backing_stripe"], 256 << 10);
    }

    #[test]
    fn the_log_timeout_reaches_the_config_the_record_and_save_config() {
        let timeout = |ms| params("hhc", &["hdd0"]).unwrap().with_log_timeout(ms).config(facts(1024), facts(64), &[facts(64)]);
        assert_eq!(timeout(None).unwrap().mirror_timeout_ns, crate::config::MIRROR_TIMEOUT_NS_DEFAULT);
        assert_eq!(timeout(Some(0)).unwrap().mirror_timeout_ns, 0);
        assert_eq!(timeout(Some(2500)).unwrap().mirror_timeout_ns, 2_500_000_000);
        let p = params("hhc", &["hdd0"]).unwrap().with_log_timeout(Some(2500));
        let record = p.owner_record();
        assert!(String::from_utf8(record.clone()).unwrap().contains("\nlog_timeout_ms=2500\n"));
        assert_eq!(CreateParams::from_owner_record(&record), Ok(Some(p.clone())));
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(value["log_timeout_ms"], 2500);
        let unset: serde_json::Value = serde_json::from_str(&params("hhc", &["hdd0"]).unwrap().to_json()).unwrap();
        assert!(unset.get("log_timeout_ms").is_none(), "left out, the default stays the engine's");
    }

    #[test]
    fn owner_record_round_trips_and_rejects_foreign_records() {
        let options = OptionParams::new(Some(100), Some(16), Some(20), Some(1 << 20), Some("always")).unwrap();
        let p = CreateParams { options, ..params("hhc", &["hdd0", "hdd1"]).unwrap() }.with_barrier_gap(Some(0));
        let record = p.owner_record();
        assert!(String::from_utf8(record.clone()).unwrap().contains("\nbarrier_gap=0\n"), "0 (never) is kept, not left out");
        assert!(record.len() <= OWNER_BYTES_MAX);
        assert_eq!(CreateParams::from_owner_record(&record), Ok(Some(p.clone())));
        assert_eq!(CreateParams::from_owner_record(b""), Ok(None));
        assert_eq!(CreateParams::from_owner_record(b"hhc-spdk-create 2\nname=x"), Ok(None));
        let no_cache = String::from_utf8(record).unwrap().replace("cache=ssd\n", "");
        assert!(CreateParams::from_owner_record(no_cache.as_bytes()).unwrap_err().message.contains("no cache"));
        let bad_policy = String::from_utf8(p.owner_record()).unwrap().replace("policy=hhc", "policy=lru");
        assert!(CreateParams::from_owner_record(bad_policy.as_bytes()).unwrap_err().message.contains("unknown policy"));
    }

    /// A takeover needs a cache and a log to replay, and is of the one
    /// create call: neither the owner record nor the JSON keeps it.
    #[test]
    fn a_takeover_needs_a_cache_and_logs_and_is_never_saved() {
        let p = params("hhc", &["peer0"]).unwrap().with_takeover(true).unwrap();
        assert!(p.takeover);
        let restored = CreateParams::from_owner_record(&p.owner_record()).unwrap().unwrap();
        assert_eq!(restored, CreateParams { takeover: false, ..p.clone() });
        assert!(!p.to_json().contains("takeover"), "{}", p.to_json());
        let no_logs = params("wt", &[]).unwrap().with_takeover(true).unwrap_err();
        assert!(no_logs.message.contains("give the log bdevs"), "{}", no_logs.message);
        let no_cache = no_cache("passthrough", &[]).unwrap().with_takeover(true).unwrap_err();
        assert!(no_cache.message.contains("needs a cache bdev"), "{}", no_cache.message);
    }

    /// A detached mirror's slot is an empty name: it keeps the other
    /// mirrors' indexes, goes through the owner record and the JSON, takes
    /// no facts and sets its bit among the absent mirrors; a create call of
    /// only empty slots is refused.
    #[test]
    fn an_empty_log_slot_is_a_slot_without_a_mirror() {
        let p = params("hhc", &["", "hdd1"]).unwrap();
        assert_eq!(p.absent_mirrors(), 0b01);
        assert_eq!(CreateParams::from_owner_record(&p.owner_record()), Ok(Some(p.clone())));
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(value["logs"], serde_json::json!(["", "hdd1"]));
        let none = BaseFacts { block_size: 0, blocks_count: 0, supports_flush: false, stripe_blocks: 0 };
        let config = p.config(facts(1024), facts(64), &[none, facts(96)]).unwrap();
        assert_eq!((config.mirrors_count, config.mirrors_absent, config.log_device_bytes), (2, 0b01, 96 << 20));
        let two = params("wb", &["hdd0", "", "hdd2", ""]).unwrap();
        assert_eq!(two.absent_mirrors(), 0b1010);
        for only_empty in [params("hhc", &[""]), params("wb", &["", ""])] {
            let error = only_empty.expect_err("no mirror at all").message;
            assert!(error.contains("logs must name a bdev in at least one slot"), "{error}");
        }
        assert!(params("wb", &["hdd0", "", "hdd0"]).unwrap_err().message.contains("given twice"));
    }

    #[test]
    fn the_owner_cpumask_is_checked_and_kept() {
        let p = params("hhc", &["hdd0"]).unwrap().with_cpumask(Some("0x2")).unwrap();
        assert_eq!(CreateParams::from_owner_record(&p.owner_record()), Ok(Some(p.clone())));
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(value["cpumask"], "0x2");
        assert!(params("hhc", &["hdd0"]).unwrap().with_cpumask(Some("[1,3-4]")).is_ok());
        for bad in ["", "0x2 ", "core1", &"f".repeat(65)] {
            let error = params("hhc", &["hdd0"]).unwrap().with_cpumask(Some(bad)).unwrap_err().message;
            assert!(error.starts_with("cpumask: ") && error.contains("is not a CPU mask"), "{error}");
        }
        let none = params("hhc", &["hdd0"]).unwrap();
        assert!(!String::from_utf8(none.owner_record()).unwrap().contains("cpumask"));
        let hostile = String::from_utf8(none.owner_record()).unwrap() + "cpumask=0x2\u{1b}\n";
        assert!(CreateParams::from_owner_record(hostile.as_bytes()).unwrap_err().message.contains("cpumask"));
    }

    #[test]
    fn hostile_owner_records_are_refused() {
        let good = String::from_utf8(params("hhc", &["hdd0"]).unwrap().owner_record()).unwrap();
        let long = format!("logs={}", "x".repeat(300));
        let mut not_utf8 = good.clone().into_bytes();
        not_utf8.extend_from_slice(b"x=\xff\n");
        let cases: [(Vec<u8>, &str); 7] = [
            (good.replace("name=hhc0", "name=hh\0c0").into(), "name: bdev name \"hh\\0c0\" holds the control character"),
            (good.replace("backing=back", "backing=ba\u{1b}ck").into(), "backing: bdev name"),
            (good.replace("logs=hdd0", &long).into(), "logs: a bdev name of 300 bytes"),
            (good.replace("policy=hhc", "policy=hhc\nblock_size=4k").into(), "block_size=\"4k\" is not a number"),
            (good.replace("policy=hhc", "policy=hhc\nbarrier_gap=-1").into(), "barrier_gap=\"-1\" is not a number"),
            (good.replace("policy=hhc", "policy").into(), "is not key=value"),
            (not_utf8, "not UTF-8"),
        ];
        for (hostile, expected) in cases {
            let error = CreateParams::from_owner_record(&hostile).expect_err(expected).message;
            assert!(error.starts_with("owner record: ") && error.contains(expected), "{error:?} should mention {expected:?}");
        }
        let nul_in_rpc =
            CreateParams::new("a\0".into(), "b".into(), "c".into(), vec![], Some("wt"), None, None, None, OptionParams::default());
        assert!(nul_in_rpc.unwrap_err().message.contains("control character"));
    }

    #[test]
    fn options_are_checked_and_overlay_what_is_in_force() {
        let bad: [(Result<OptionParams, ConfigError>, &str); 6] = [
            (OptionParams::new(Some(0), None, None, None, None), "dirty_threshold 0"),
            (OptionParams::new(None, Some(0), None, None, None), "writeback_parallelism 0"),
            (OptionParams::new(None, None, Some(0), None, None), "idle_after_ms: 0"),
            (OptionParams::new(None, None, None, Some(4096), None), "seq_cutoff_threshold 4096"),
            (OptionParams::new(None, None, None, Some(u64::MAX - 1), None), "seq_cutoff_threshold"),
            (OptionParams::new(None, None, None, None, Some("sometimes")), "unknown seq_cutoff_policy 'sometimes'"),
        ];
        for (result, expected) in bad {
            let error = result.expect_err(expected).message;
            assert!(error.contains(expected), "{error:?} should mention {expected:?}");
        }
        let now = Config::default().options();
        let change = OptionParams::new(None, Some(4), None, None, Some("never")).unwrap();
        let merged = change.apply(now).unwrap();
        assert_eq!(merged, Options { writeback_parallelism: 4, seq_cutoff_policy: CutoffPolicy::Never, ..now });
        assert_eq!(OptionParams::of(merged).apply(Config::default().options()).unwrap(), merged, "of() brings them back");
        let p = CreateParams { options: change, ..params("wb", &[]).unwrap() };
        let config = p.config(facts(1024), facts(64), &[]).unwrap();
        assert_eq!(config.options(), merged, "create takes the options too");
    }

    #[test]
    fn recover_modes_and_their_cache() {
        assert_eq!(recover_mode("passthrough", None), Ok(RecoverMode::Passthrough));
        assert_eq!(recover_mode("replay", None), Ok(RecoverMode::Replay));
        assert_eq!(recover_mode("cache", Some("ssd2")), Ok(RecoverMode::Cache));
        assert!(recover_mode("cache", None).unwrap_err().message.contains("needs the fresh cache bdev"));
        assert!(recover_mode("passthrough", Some("x")).unwrap_err().message.contains("only mode cache"));
        assert!(recover_mode("Cache", None).unwrap_err().message.contains("unknown mode 'Cache'"));
        assert!(recover_mode(&"x".repeat(1000), None).unwrap_err().message.len() < 200);
    }

    #[test]
    fn json_round_trips_the_create_call() {
        let p = CreateParams { segment_size: Some(1 << 19), ..params("wb-flush", &["h\"0"]).unwrap() };
        let value: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert!(value.get("barrier_gap").is_none(), "left out, the default stays the engine's");
        let gapped: serde_json::Value = serde_json::from_str(&p.clone().with_barrier_gap(Some(1 << 20)).to_json()).unwrap();
        assert_eq!(gapped["barrier_gap"], 1 << 20);
        assert_eq!(value["policy"], "wb-flush");
        assert_eq!(value["logs"][0], "h\"0");
        assert_eq!(value["segment_size"], 1 << 19);
        assert!(value.get("block_size").is_none(), "left-out parameters stay out");
        let options = OptionParams::new(Some(40), None, None, Some(8 << 20), Some("always")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&CreateParams { options, ..p }.to_json()).unwrap();
        assert_eq!((value["dirty_threshold"].as_u64(), value["seq_cutoff_threshold"].as_u64()), (Some(40), Some(8 << 20)));
        assert_eq!(value["seq_cutoff_policy"], "always");
        assert!(value.get("idle_after_ms").is_none());
    }

    #[test]
    fn options_left_out_are_kept_from_the_owner_record() {
        let saved = OptionParams::new(Some(60), Some(32), Some(600000), None, Some("always")).unwrap();
        let given = OptionParams::new(Some(40), None, None, None, None).unwrap();
        let kept = given.kept_from(&saved);
        assert_eq!(kept, OptionParams::new(None, Some(32), Some(600000), None, Some("always")).unwrap());
        assert_eq!(kept.describe(), "writeback_parallelism 32, idle_after_ms 600000, seq_cutoff_policy always");
        assert_eq!(saved.kept_from(&saved), OptionParams::default());
        assert_eq!(OptionParams::default().kept_from(&OptionParams::default()), OptionParams::default());
    }
}
