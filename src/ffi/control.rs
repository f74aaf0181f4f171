//! The operator RPCs: `bdev_hhc_get_stats`, `bdev_hhc_reset_stats`,
//! `bdev_hhc_set_policy`, `bdev_hhc_set_options`, `bdev_hhc_flush_all`, `bdev_hhc_attach_log` and
//! `bdev_hhc_detach_log`. Each answers at once: a policy switch, a
//! flush_all or a mirror's re-sync goes on in the background and shows its
//! progress in the stats.

use super::errno::Error;
use super::json::{self, JsonObject};
use super::node::{Core, Phase};
use super::owner::now_ns;
use super::base::{role_index, Base};
use super::create::decode_options;
use super::params::{check_base_block_size, check_name, CreateParams, OptionParams};
use super::report::{latency_json, stat_fields, Protection};
use super::rpc::{text, Rpc};
use super::{forward, sys};
use crate::config::{ConfigError, Options, Policy};
use crate::engine::{ControlError, Engine, EngineState, MirrorState};
use crate::format::{OWNER_BYTES_MAX, UNIT_BYTES};
use crate::io::{DeviceRole, RequestKind};
use std::ffi::c_char;

/// Counter names of each base's I/O errors, by role index (backing, cache,
/// then the log mirrors; HHC_GLUE_MAX_LOGS of those).
const BASE_ERRORS: [&str; 10] = [
    "backing_errors",
    "cache_errors",
    "log0_errors",
    "log1_errors",
    "log2_errors",
    "log3_errors",
    "log4_errors",
    "log5_errors",
    "log6_errors",
    "log7_errors",
];

fn policy_json(policy: Option<Policy>) -> String {
    policy.map_or_else(|| "null".to_string(), |p| json::string(p.name()))
}

/// The options in force as the object `set_options` answers and
/// `get_stats` shows under `options`.
fn options_json(options: Options) -> String {
    OptionParams::of(options).add_to(JsonObject::new()).finish()
}

impl Core {
    /// The policy in force: the engine's once it runs (a switch changes it).
    pub(super) fn policy(&self) -> Policy {
        self.engine.as_ref().map_or(self.config.policy, Engine::policy)
    }

    /// The policy a switch leads to, while one goes on or waits (for the
    /// bdev to run, or for the requests sent past the engine to be back).
    pub(super) fn policy_target(&self) -> Option<Policy> {
        self.policy_on_start.or_else(|| self.engine.as_ref().and_then(Engine::policy_target))
    }

    /// The policy in force or, while a switch goes on or waits for the
    /// bdev to run, the one it leads to.
    pub(super) fn policy_wanted(&self) -> Policy {
        let target = self.engine.as_ref().and_then(Engine::policy_target);
        self.policy_on_start.or(target).unwrap_or_else(|| self.policy())
    }

    /// A create call for this bdev named another policy (a saved config
    /// after a switch, examine having assembled the bdev under the policy it
    /// was created with): switched to once the bdev runs.
    pub(super) fn want_policy(&mut self, policy: Policy) {
        if self.policy_wanted() == policy {
            return;
        }
        log::info!("{}: policy {policy} asked for by a create call", self.params.name);
        self.policy_on_start = Some(policy);
        self.start_wanted_policy();
    }

    /// Starts the switch `want_policy` or `set_policy` asked for, if the
    /// bdev runs and no request sent past the engine is out.
    pub(super) fn start_wanted_policy(&mut self) {
        let Some(policy) = self.policy_on_start else { return };
        let name = self.params.name.clone();
        if self.running_engine().is_err() || !self.bypass_drained() {
            return;
        }
        self.policy_on_start = None;
        let engine = self.engine.as_mut().expect("running engine");
        match engine.set_policy(now_ns(), policy) {
            Ok(()) => log::info!("{name}: policy switch to {policy} started"),
            Err(error) => log::warn!("{name}: cannot switch to policy {policy}: {error}"),
        }
    }

    /// A create call for this bdev gave options (a saved config): set once
    /// the bdev runs.
    pub(super) fn want_options(&mut self, options: &OptionParams) {
        if *options == OptionParams::default() {
            return;
        }
        self.options_on_start = Some(options.clone());
        self.start_wanted_options();
    }

    /// A warm start from a create call that left options out: those the
    /// cache bdev's owner record holds (set by `set_options`, or by the
    /// create call that made the cache) are kept, not reset to their
    /// defaults. Before `sync_owner_record` rewrites the record.
    pub(super) fn keep_saved_options(&mut self) {
        let Some(engine) = self.engine.as_ref() else { return };
        let Ok(Some(saved)) = CreateParams::from_owner_record(engine.owner_record()) else { return };
        let mut kept = self.params.options.kept_from(&saved.options);
        if kept == OptionParams::default() {
            return;
        }
        let name = self.params.name.clone();
        log::info!(
            "{name}: options the create call left out are kept from the owner record of cache bdev {}: {}",
            self.params.cache,
            kept.describe()
        );
        if let Err(error) = self.set_options(&kept) {
            // writeback_parallelism above what this start sized the engine for.
            kept.writeback_parallelism = None;
            log::warn!("{name}: cannot keep every saved option ({}); keeping the others", error.message());
            if let Err(error) = self.set_options(&kept) {
                log::warn!("{name}: cannot keep the saved options: {}", error.message());
            }
        }
    }

    /// Sets the options `want_options` asked for, if the bdev runs.
    pub(super) fn start_wanted_options(&mut self) {
        let Some(options) = self.options_on_start.clone() else { return };
        if self.running_engine().is_err() {
            return;
        }
        self.options_on_start = None;
        if let Err(error) = self.set_options(&options) {
            log::warn!("{}: cannot set the options a create call asked for: {}", self.params.name, error.message());
        }
    }

    /// Changes the options given, all or none; `save_config` records them.
    fn set_options(&mut self, change: &OptionParams) -> Result<String, Error> {
        let name = self.params.name.clone();
        let engine = self.running_engine()?;
        let options = change.apply(engine.config().options())?;
        engine.set_options(now_ns(), options)?;
        let in_force = engine.config().options();
        self.params.options = OptionParams::of(in_force);
        log::info!("{name}: options set: {}", options_json(in_force));
        Ok(options_json(in_force))
    }

    fn not_running(&self) -> Error {
        let name = &self.params.name;
        if self.direct.is_some() {
            return Error::Busy(format!(
                "name: HHC bdev '{name}' is a passthrough over its backing bdev without a cache; re-create it with a cache for this"
            ));
        }
        if self.phase.is_record() {
            return Error::Busy(format!(
                "name: HHC bdev '{name}' lost its cache bdev (state {}); see its recovery in bdev_hhc_get_stats, then bdev_hhc_recover",
                self.phase.name()
            ));
        }
        Error::Busy(format!("name: HHC bdev '{name}' is not running (state {})", self.phase.name()))
    }

    /// The engine, if it serves requests.
    fn running_engine(&mut self) -> Result<&mut Engine, Error> {
        let ready = self.phase == Phase::Running && self.engine.as_ref().is_some_and(|e| *e.state() == EngineState::Ready);
        if !ready {
            return Err(self.not_running());
        }
        Ok(self.engine.as_mut().expect("running engine"))
    }

    /// The engine's counters and gauges, with the requests sent past it
    /// (bypass.rs): they are the bdev's requests all the same.
    pub(super) fn engine_fields(&self, engine: &Engine) -> Vec<(&'static str, u64)> {
        let mut fields = stat_fields(&engine.stats());
        let bypass = &self.node().shared.bypass;
        for (name, value) in fields.iter_mut() {
            *value += match *name {
                "reads" => bypass.count(RequestKind::Read),
                "writes" => bypass.count(RequestKind::Write),
                "flushes" => bypass.count(RequestKind::Flush),
                _ => 0,
            };
        }
        fields
    }

    /// Every counter and gauge: the engine's, flush_all's and each base's errors.
    fn counter_fields(&self, engine: &Engine) -> Vec<(&'static str, u64)> {
        let mut fields = self.engine_fields(engine);
        let progress = engine.flush_all_progress();
        fields.push(("flush_alls_completed", progress.completed));
        fields.push(("flush_all_errors", progress.errors));
        fields.extend(self.base_error_fields());
        fields
    }

    /// Each base's I/O errors (the backing's with those of the requests
    /// sent to it past the engine), by counter name.
    fn base_error_fields(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let bypass = &self.node().shared.bypass;
        let bypass_errors = |role| if role == 0 { bypass.errors() } else { 0 };
        BASE_ERRORS.iter().zip(self.bases.all()).enumerate().map(move |(i, (&name, base))| (name, base.errors + bypass_errors(i)))
    }

    /// Whether flushed writes survive the loss of the cache bdev now; None
    /// for a record (its `recovery` says what became of them) or a node
    /// that has no engine yet.
    pub(super) fn protection(&self) -> Option<Protection> {
        if self.phase.is_record() {
            return None;
        }
        if self.direct.is_some() {
            return Some(Protection::of(Policy::Passthrough, false, &[]));
        }
        let engine = self.engine.as_ref()?;
        Some(Protection::of(engine.policy(), true, &engine.mirror_states()))
    }

    /// Logs a change of `protection`: loudly (an error) when flushed writes
    /// stop being protected against the loss of the cache bdev.
    pub(super) fn note_protection(&mut self) {
        let Some(now) = self.protection() else { return };
        let before = self.protection_state.replace(now.state);
        if before == Some(now.state) || matches!(self.phase, Phase::Stopping | Phase::Failed | Phase::Done) {
            return;
        }
        let name = &self.params.name;
        match (before, now.cache_loss_protected) {
            (_, false) if now.state == "degraded" => log::error!(
                "{name}: DEGRADED: flushed writes are no longer protected against the loss of the cache bdev: {}",
                now.reason
            ),
            (Some(_), true) => log::info!("{name}: protection {}: {}", now.state, now.reason),
            _ => {}
        }
    }

    /// Each base bdev: its role, name, health, and since the last reset its
    /// commands' latencies and I/O errors (`counters`: the raw totals of
    /// `counter_fields`); a log mirror's state.
    fn devices_json(&self, counters: &[(&'static str, u64)]) -> String {
        let mirrors = self.engine.as_ref().map(Engine::mirror_states).unwrap_or_default();
        let since_reset = |name: &str| {
            let total = counters.iter().find(|(n, _)| *n == name).map_or(0, |&(_, v)| v);
            self.baseline.since_reset(name, total)
        };
        let device = |role: DeviceRole| {
            let base = self.bases.get(role);
            let mut latency = base.latency.clone();
            if role == DeviceRole::Backing {
                latency.merge(&self.node().shared.bypass.latency());
            }
            let mut object =
                JsonObject::new().string("role", &role.to_string()).string("name", &base.name).string("health", base.health());
            object = latency.add_to(object, base.info.supports_flush).number("errors", since_reset(BASE_ERRORS[role_index(role)]));
            if role == DeviceRole::Backing && self.engine.is_some() {
                object = object.number("writeback_errors", since_reset("writeback_errors"));
            }
            let DeviceRole::Log(i) = role else { return object.finish() };
            let Some(&mirror) = mirrors.get(i as usize) else { return object.finish() };
            let behind = match mirror {
                MirrorState::Syncing { segments_behind } => segments_behind,
                _ => 0,
            };
            object.number("index", i as u64).string("mirror", mirror.name()).number("segments_behind", behind).finish()
        };
        let mut roles = vec![DeviceRole::Backing];
        if self.bases.cache().is_some() {
            roles.push(DeviceRole::Cache);
        }
        roles.extend((0..self.bases.logs().len() as u8).map(DeviceRole::Log));
        json::array(roles.into_iter().map(device))
    }

    fn get_stats(&mut self) -> Result<String, Error> {
        let mut object = JsonObject::new()
            .string("name", &self.params.name)
            .string("state", self.phase.name())
            .string("policy", self.policy().name())
            .raw("policy_target", &policy_json(self.policy_target()));
        if let Some(protection) = self.protection() {
            object = object.raw("protection", &protection.json());
        }
        if !self.warnings.is_empty() {
            object = object.raw("warnings", &json::array(self.warnings.iter().map(|w| json::string(w))));
        }
        if let Some(reason) = &self.failure {
            object = object.string("failure", reason);
        }
        if let Some(progress) = self.recovery_now() {
            object = object.raw("recovery", &super::recovery::progress_json(&progress));
        }
        let counters = match &self.engine {
            Some(engine) => self.counter_fields(engine),
            None => self.base_error_fields().collect(),
        };
        let devices = self.devices_json(&counters);
        if let Some(engine) = &self.engine {
            let progress = engine.flush_all_progress();
            object = object
                .boolean("flush_all_in_progress", progress.in_progress)
                .number("flush_all_blocks_remaining", progress.blocks_remaining)
                .raw("flush_latency_us", &latency_json(&self.requests.flush_latency))
                .raw("options", &options_json(engine.config().options()));
            object = self.baseline.report(now_ns(), counters, object);
        }
        let (in_use, total) = self.bases.io_contexts();
        let contexts = JsonObject::new().number("in_use", in_use.into()).number("total", total.into()).finish();
        Ok(object.raw("base_io_contexts", &contexts).raw("devices", &devices).finish())
    }

    fn reset_stats(&mut self) -> Result<String, Error> {
        let Some(engine) = self.engine.as_ref().filter(|_| !self.phase.is_record()) else { return Err(self.not_running()) };
        let fields = self.counter_fields(engine);
        self.baseline.reset(now_ns(), fields);
        self.requests.flush_latency.clear();
        self.bases.clear_latency();
        self.node().shared.bypass.reset_latency();
        log::info!("{}: stats reset", self.params.name);
        Ok("true".to_string())
    }

    fn set_policy(&mut self, policy: Option<&str>) -> Result<String, Error> {
        let about_policy = |e: ConfigError| Error::from(e.prefixed("policy: "));
        let policy: Policy = policy.unwrap_or_default().parse().map_err(about_policy)?;
        let name = self.params.name.clone();
        // (Without any log mirror the engine refuses it, saying so.)
        if policy.uses_log() && !self.bases.logs().is_empty() && self.healthy_log_mirrors().is_empty() {
            return Err(Error::InvalidParams(format!("policy: {policy} needs a healthy log mirror; attach one first")));
        }
        self.running_engine()?;
        if policy != Policy::Passthrough && !self.bypass_drained() {
            // Requests sent past the engine may still be out: it switches
            // once they are back (update_bypass).
            self.policy_on_start = Some(policy);
            log::info!("{name}: policy switch passthrough -> {policy} waits for the requests sent to the backing bdev directly");
            return Ok(JsonObject::new()
                .string("policy", self.policy().name())
                .raw("policy_target", &policy_json(Some(policy)))
                .boolean("complete", false)
                .finish());
        }
        let engine = self.running_engine()?;
        let from = engine.policy();
        engine.set_policy(now_ns(), policy).map_err(about_policy)?;
        let target = engine.policy_target();
        let how = if target.is_some() { "started (writing back every dirty block first)" } else { "done" };
        log::info!("{name}: policy switch {from} -> {policy} {how}");
        Ok(JsonObject::new()
            .string("policy", engine.policy().name())
            .raw("policy_target", &policy_json(target))
            .boolean("complete", target.is_none())
            .finish())
    }

    /// Makes the cache device's owner record, which examine assembles the
    /// bdev from at start-up, say what `save_config` says: after a log
    /// mirror was attached or detached, a policy or the options changed,
    /// or a create call asked for another policy. The engine writes it only
    /// if it changed, and alternates between its two copies.
    pub(super) fn sync_owner_record(&mut self) {
        if self.direct.is_some() || self.phase != Phase::Running {
            return;
        }
        let record = self.saved_params().owner_record();
        // Too long to keep (very long names): the bdev is not examinable.
        let record = if record.len() <= OWNER_BYTES_MAX { record } else { Vec::new() };
        let name = self.params.name.clone();
        let Some(engine) = self.engine.as_mut() else { return };
        if engine.owner_record() == record.as_slice() {
            return;
        }
        match engine.set_owner_record(now_ns(), record) {
            Ok(()) => log::info!("{name}: rewriting the owner record of its cache bdev (what examine assembles it from)"),
            Err(error) => log::warn!("{name}: cannot rewrite the owner record of its cache bdev: {error}"),
        }
    }

    /// Indexes of the log mirrors the engine counts healthy.
    fn healthy_log_mirrors(&self) -> Vec<u8> {
        let mirrors = self.engine.as_ref().map(Engine::mirror_states).unwrap_or_default();
        (0..mirrors.len() as u8).filter(|&i| mirrors[i as usize] == MirrorState::Healthy).collect()
    }

    /// A new log mirror in the first slot whose bdev is gone (removed or
    /// detached): the engine formats it and re-syncs it (`mirror` shows
    /// `syncing` until every live entry lies in segments written to it).
    /// The mirror count is fixed at creation.
    fn attach_log(&mut self, log: Option<&str>) -> Result<String, Error> {
        let log = log.unwrap_or_default();
        check_name("log", log)?;
        self.running_engine()?;
        if self.bases.all().iter().any(|b| b.name == log && !b.removed) || log == self.params.name {
            return Err(Error::InvalidParams(format!("log: bdev '{log}' is already a device of '{}'", self.params.name)));
        }
        let slots = self.bases.logs().len() as u8;
        let Some(index) = (0..slots).find(|&i| self.bases.slot_free(DeviceRole::Log(i))) else {
            let busy = self.bases.logs().iter().any(|b| b.removed);
            let why = if busy { "a removed log mirror still drains its I/O; try again" } else { "detach one first" };
            return Err(Error::Busy(format!("log: all {slots} log mirror slots of '{}' are in use ({why})", self.params.name)));
        };
        let role = DeviceRole::Log(index);
        let base = Base::open(self.node.cast(), role, log)?;
        let (facts, needed) = (base.facts(), self.config.log_device_bytes);
        let mut fits = check_base_block_size("log", log, facts, UNIT_BYTES as u32).map_err(Error::from);
        if fits.is_ok() && facts.bytes() < needed {
            fits = Err(Error::InvalidParams(format!("log: bdev '{log}' holds {} bytes; the log needs {needed}", facts.bytes())));
        }
        let mut base = base;
        if let Err(error) = fits {
            base.close_now();
            return Err(error);
        }
        self.bases.replace(role, base)?;
        self.params.logs[index as usize] = log.to_string();
        self.engine.as_mut().expect("running engine").handle_mirror_attached(now_ns(), index);
        log::info!("{}: log mirror {index} is bdev {log} now; re-syncing", self.params.name);
        Ok(JsonObject::new().number("index", index as u64).string("mirror", "syncing").finish())
    }

    /// Stops using a log mirror and releases its bdev. The last healthy
    /// mirror of a policy that logs is kept: switch the policy first.
    fn detach_log(&mut self, log: Option<&str>) -> Result<String, Error> {
        let log = log.unwrap_or_default();
        check_name("log", log)?;
        self.running_engine()?;
        let found = self.bases.logs().iter().position(|b| b.name == log && !b.removed);
        let Some(index) = found.map(|i| i as u8) else {
            return Err(Error::NoDevice(format!("log: '{}' has no attached log mirror '{log}'", self.params.name)));
        };
        let healthy = self.healthy_log_mirrors();
        let policy = self.policy_wanted();
        if policy.uses_log() && healthy.iter().all(|&i| i == index) {
            let message = format!("log: '{log}' is the last healthy log mirror under policy {policy}; switch the policy first");
            return Err(Error::Busy(message));
        }
        let role = DeviceRole::Log(index);
        self.engine.as_mut().expect("running engine").handle_device_removed(now_ns(), role);
        self.bases.detach(role);
        // The slot stays, empty: a create call brings it back so (the
        // other mirrors keep their indexes) without the bdev, which may go.
        self.params.logs[index as usize] = String::new();
        log::info!("{}: log mirror {index} (bdev {log}) detached", self.params.name);
        Ok("true".to_string())
    }

    fn flush_all(&mut self) -> Result<String, Error> {
        let not_running = self.not_running();
        let engine = self.running_engine()?;
        let progress = engine.flush_all(now_ns()).map_err(|_: ControlError| not_running)?;
        Ok(JsonObject::new()
            .boolean("in_progress", progress.in_progress)
            .number("blocks_remaining", progress.blocks_remaining)
            .finish())
    }
}

/// Runs operator RPC `op` on HHC bdev `name`'s owner thread and answers
/// `rpc` from there; `None` from `op` means the node was busy (its owner
/// inside it).
fn on_owner(name: String, rpc: Rpc, op: impl FnOnce(&mut Core) -> Result<String, Error> + Send + 'static) {
    forward::with_node(&name.clone(), move |found| {
        let node = match found {
            Ok(Some(node)) => node,
            Ok(None) => return rpc.reply_error(&Error::NoDevice(format!("name: no HHC bdev named '{name}'"))),
            Err(error) => return rpc.reply_error(&error),
        };
        let answer = node.core.try_enter(|core| {
            let answer = op(core);
            if answer.is_ok() {
                core.sync_owner_record();
            }
            answer
        });
        let answer = answer.unwrap_or_else(|| Err(Error::Busy(format!("name: HHC bdev '{name}' is busy; try again"))));
        // Carries out the device commands the engine was just asked for.
        node.run();
        node.core.try_enter(|core| core.publish());
        rpc.reply(answer.as_ref().map(String::as_str));
    });
}

/// bdev_hhc_get_stats, _reset_stats, _set_policy, _flush_all, _attach_log,
/// _detach_log: answered from the bdev's owner thread.
///
/// # Safety
/// `name` and `arg` are NULL or C strings valid for this call; `rpc` is a
/// pending request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_control(
    op: sys::hhc_glue_control,
    name: *const c_char,
    arg: *const c_char,
    rpc: *mut sys::hhc_glue_rpc,
) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let (name, arg) = unsafe { (text(name).unwrap_or_default(), text(arg)) };
    if let Err(error) = check_name("name", &name) {
        return rpc.reply_error(&error.into());
    }
    use sys::hhc_glue_control as Op;
    on_owner(name, rpc, move |core| match op {
        Op::HHC_GLUE_CONTROL_GET_STATS => core.get_stats(),
        Op::HHC_GLUE_CONTROL_RESET_STATS => core.reset_stats(),
        Op::HHC_GLUE_CONTROL_SET_POLICY => core.set_policy(arg.as_deref()),
        Op::HHC_GLUE_CONTROL_FLUSH_ALL => core.flush_all(),
        Op::HHC_GLUE_CONTROL_ATTACH_LOG => core.attach_log(arg.as_deref()),
        Op::HHC_GLUE_CONTROL_DETACH_LOG => core.detach_log(arg.as_deref()),
    });
}

/// bdev_hhc_set_options: answered from the bdev's owner thread.
///
/// # Safety
/// `name` is NULL or a C string and `options` points to options whose
/// policy is NULL or a C string, all valid for this call; `rpc` is a
/// pending request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_set_options(
    name: *const c_char,
    options: *const sys::hhc_glue_options,
    rpc: *mut sys::hhc_glue_rpc,
) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let name = unsafe { text(name) }.unwrap_or_default();
    // SAFETY: the function's contract (`options` is valid for the call).
    let change = match unsafe { decode_options(&*options) } {
        Ok(change) => change,
        Err(error) => return rpc.reply_error(&error),
    };
    if let Err(error) = check_name("name", &name) {
        return rpc.reply_error(&error.into());
    }
    on_owner(name, rpc, move |core| core.set_options(&change));
}
