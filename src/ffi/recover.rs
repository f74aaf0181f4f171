//! After the cache bdev was lost: `bdev_hhc_recover` brings the HHC bdev
//! back from its record, once the replay is done, as a passthrough over the
//! backing bdev or as a new instance on a fresh cache bdev (formatted, the
//! log mirrors too); or runs a failed replay again. `bdev_hhc_delete` drops
//! a record. A refusal changes nothing.

use super::base::Base;
use super::errno::Error;
use super::lifecycle::{open_node, start_node};
use super::forward;
use super::node::{Core, Node, Phase};
use super::params::{check_name, recover_mode, CreateParams, OptionParams, RecoverMode as Mode};
use super::rpc::{text, Rpc};
use super::{json, registry, sys};
use std::ffi::CString;
use crate::config::{ConfigError, Policy};
use crate::io::DeviceRole;
use std::ffi::c_char;

/// What a recover call leads to, decided inside the record.
enum Next {
    Answer(String),
    /// A new node to start in place of the record, answered once registered.
    Replace(Box<Node>),
    /// A passthrough made by mode passthrough goes back to a cache: its bdev
    /// is unregistered, then a node with these parameters (a fresh cache,
    /// the record's log mirrors and policy) starts under the same name.
    Unregister(CreateParams),
}

impl Core {
    fn recover(&mut self, mode: Mode, cache: Option<&str>) -> Result<Next, Error> {
        let name = self.params.name.clone();
        if !self.phase.is_record() && mode == Mode::Cache && self.direct.is_some() && self.phase == Phase::Running {
            return self.back_to_cache(cache);
        }
        if !self.phase.is_record() {
            let state = self.phase.name();
            return Err(Error::Busy(format!("name: HHC bdev '{name}' has not lost its cache (state {state})")));
        }
        let progress = self.recovery_now().expect("a record has a recovery");
        let error = progress.error.clone().unwrap_or_default();
        match (self.phase, mode) {
            (Phase::Recovering, _) => Err(Error::Busy(format!(
                "name: HHC bdev '{name}' is still replaying its log ({}, {} of {} blocks); try again once its recovery is done",
                progress.stage.name(),
                progress.blocks_replayed,
                progress.blocks_total
            ))),
            (Phase::Recovered, Mode::Replay) => Err(Error::Busy(format!(
                "mode: the log of '{name}' is replayed already; every flushed write is on backing bdev '{}'",
                self.params.backing
            ))),
            (Phase::RecoveryFailed, Mode::Replay) if self.engine.is_some() && self.policy().uses_log() => {
                self.start_recovery();
                log::info!("{name}: replay started again ({})", self.phase.name());
                Ok(Next::Answer(json::string(self.phase.name())))
            }
            (Phase::RecoveryFailed, _) => {
                let retry = if self.engine.is_some() && self.policy().uses_log() { "; mode replay runs the replay again" } else { "" };
                Err(Error::Busy(format!(
                    "name: the recovery of '{name}' failed ({error}); its flushed writes are not all on the backing bdev{retry}"
                )))
            }
            (Phase::Recovered, _) if self.bdev.glue().is_some() => {
                Err(Error::Busy(format!("name: HHC bdev '{name}' is still being unregistered; try again")))
            }
            (Phase::Recovered, mode) => self.replace(mode, cache),
            _ => unreachable!("is_record covers Recovering, Recovered and RecoveryFailed"),
        }
    }

    /// The create parameters of what comes back: the backing bdev alone,
    /// or it with the fresh cache and the log mirrors that survived.
    fn params_after(&self, mode: Mode, cache: Option<&str>) -> Result<CreateParams, ConfigError> {
        let p = &self.params;
        let (cache, logs, policy) = match mode {
            Mode::Passthrough => (String::new(), Vec::new(), Policy::Passthrough),
            _ => {
                let logs = self.bases.logs().iter().filter(|b| !b.removed).map(|b| b.name.clone()).collect();
                (cache.unwrap_or_default().to_string(), logs, self.policy_wanted())
            }
        };
        let block_size = Some(self.config.block_size);
        // Log and write-back options mean nothing without a cache.
        let numbers = match mode {
            Mode::Passthrough => (None, None, OptionParams::default()),
            _ => (p.segment_size, p.buffer_count, p.options.clone()),
        };
        let policy = Some(policy.name());
        let made = CreateParams::new(p.name.clone(), p.backing.clone(), cache, logs, policy, block_size, numbers.0, numbers.1, numbers.2);
        // Started on this thread, the record's owner (`hhc_rs_recover`).
        let (barrier_gap, backing_stripe, log_timeout) = match mode {
            Mode::Passthrough => (None, None, None),
            _ => (p.barrier_gap, p.backing_stripe, p.log_timeout),
        };
        made.and_then(|made| made.with_cpumask(p.cpumask.as_deref()))
            .map(|made| made.with_barrier_gap(barrier_gap).with_backing_stripe(backing_stripe).with_log_timeout(log_timeout))
    }

    /// Mode cache on the passthrough that mode passthrough made: the
    /// parameters it had as a record (its surviving log mirrors, policy and
    /// options) with the fresh cache bdev, every bdev checked first; the
    /// passthrough is unregistered only if they fit.
    fn back_to_cache(&mut self, cache: Option<&str>) -> Result<Next, Error> {
        let name = self.params.name.clone();
        let Some(prior) = self.before_passthrough.clone() else {
            return Err(Error::Busy(format!(
                "name: HHC bdev '{name}' runs without a cache, and not from a bdev_hhc_recover passthrough of this \
                 target: bdev_hhc_delete it and bdev_hhc_create it with a cache and log mirrors"
            )));
        };
        let cache = cache.unwrap_or_default();
        let made = CreateParams::new(
            prior.name.clone(),
            prior.backing.clone(),
            cache.to_string(),
            prior.logs.clone(),
            Some(prior.policy.name()),
            prior.block_size,
            prior.segment_size,
            prior.buffer_count,
            prior.options.clone(),
        )
        .and_then(|made| made.with_cpumask(prior.cpumask.as_deref()))
        .map(|made| made.with_barrier_gap(prior.barrier_gap).with_backing_stripe(prior.backing_stripe).with_log_timeout(prior.log_timeout))?;
        // Every bdev but the backing one (ours) opened, checked and closed.
        let mut bases = Vec::new();
        let opened = std::iter::once((DeviceRole::Cache, made.cache.clone()))
            .chain(made.logs.iter().enumerate().map(|(i, l)| (DeviceRole::Log(i as u8), l.clone())))
            .try_for_each(|(role, bdev)| Base::open(self.node.cast(), role, &bdev).map(|base| bases.push(base)));
        let fits = opened.and_then(|()| {
            let facts: Vec<_> = bases.iter().map(Base::facts).collect();
            made.config(self.bases.backing().facts(), facts[0], &facts[1..]).map(|_| ()).map_err(Error::from)
        });
        for base in &mut bases {
            base.close_now();
        }
        fits?;
        log::warn!("{name}: back from a passthrough to an HHC bdev over fresh cache bdev {cache}: the bdev is unregistered and registered again");
        Ok(Next::Unregister(made))
    }

    fn replace(&mut self, mode: Mode, cache: Option<&str>) -> Result<Next, Error> {
        let params = self.params_after(mode, cache)?;
        if mode == Mode::Cache {
            self.check_fresh_cache(&params)?;
        }
        // What mode cache on the passthrough brings back.
        let before = (mode == Mode::Passthrough).then(|| self.params_after(Mode::Cache, Some(&self.params.cache)).ok()).flatten();
        // The record's claims go first, so the new node can take the bdevs;
        // if it cannot, the record stays (its bases closed, reopened by a retry).
        self.bases.close_all();
        let node = open_node(params.clone())?;
        node.core
            .enter(|core| {
                core.phase = Phase::Probing { format_anyway: true };
                core.before_passthrough = before;
            })
            .expect("a new node is not entered");
        let how = if params.is_direct() { "a passthrough over its backing bdev".to_string() } else { format!("an HHC bdev over fresh cache bdev {}", params.cache) };
        log::warn!("{}: brought back as {how}", params.name);
        self.finish_destruct();
        Ok(Next::Replace(node))
    }

    /// The fresh cache bdev opened, checked against the record's other
    /// bdevs and closed again: a fault is reported with nothing changed.
    fn check_fresh_cache(&self, params: &CreateParams) -> Result<(), Error> {
        let mut base = Base::open(self.node.cast(), DeviceRole::Cache, &params.cache)?;
        let logs: Vec<_> = self.bases.logs().iter().filter(|b| !b.removed).map(Base::facts).collect();
        let fits = params.config(self.bases.backing().facts(), base.facts(), &logs);
        base.close_now();
        // (The messages name the cache bdev.)
        fits.map(|_| ()).map_err(Error::from)
    }
}

/// bdev_hhc_recover: answered from the record's owner thread.
///
/// # Safety
/// `name`, `mode` and `cache` are NULL or C strings valid for this call;
/// `rpc` is a pending request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_recover(
    name: *const c_char,
    mode_text: *const c_char,
    cache: *const c_char,
    rpc: *mut sys::hhc_glue_rpc,
) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let (name, mode_text, cache) = unsafe { (text(name).unwrap_or_default(), text(mode_text).unwrap_or_default(), text(cache)) };
    let checked = check_name("name", &name)
        .and_then(|()| cache.as_deref().map_or(Ok(()), |c| check_name("cache", c)))
        .map_err(Error::from)
        .and_then(|()| recover_mode(&mode_text, cache.as_deref()).map_err(Error::from));
    let mode = match checked {
        Ok(mode) => mode,
        Err(error) => return rpc.reply_error(&error),
    };
    forward::with_node(&name.clone(), move |found| {
        let node = match found {
            Ok(Some(node)) => node,
            Ok(None) => return rpc.reply_error(&Error::NoDevice(format!("name: no HHC bdev named '{name}'"))),
            Err(error) => return rpc.reply_error(&error),
        };
        let next = node.core.try_enter(|core| core.recover(mode, cache.as_deref()));
        let next = next.unwrap_or_else(|| Err(Error::Busy(format!("name: HHC bdev '{name}' is busy; try again"))));
        match next {
            Ok(Next::Answer(answer)) => {
                node.run();
                node.core.try_enter(|core| core.publish());
                rpc.reply_json(&answer)
            }
            // On this thread, the record's owner: the bdev keeps its owner.
            Ok(Next::Replace(new_node)) => start_node(new_node, Some(rpc)),
            Ok(Next::Unregister(params)) => unregister_then_start(params, rpc),
            Err(error) => rpc.reply_error(&error),
        }
    });
}

/// Unregisters the passthrough named `params.name`, then starts a node with
/// `params` (cache and log mirrors formatted) on this thread, its owner:
/// `rpc` is answered once it is registered, or with what failed.
fn unregister_then_start(params: CreateParams, rpc: Rpc) {
    let Ok(c_name) = CString::new(params.name.as_str()) else {
        return rpc.reply_error(&Error::InvalidParams(format!("name {:?} holds a NUL", params.name)));
    };
    let raw = Box::into_raw(Box::new((params, rpc)));
    // SAFETY: valid C string for the call; unregistered_msg takes back the box once.
    let rc = unsafe { sys::hhc_glue_bdev_unregister(c_name.as_ptr(), Some(unregistered), raw.cast()) };
    if rc != 0 {
        // SAFETY: not queued: the box is still ours.
        let (params, rpc) = *unsafe { Box::from_raw(raw) };
        rpc.reply_error(&Error::from_rc(rc, format!("name: cannot unregister '{}' ({})", params.name, super::errno::describe(rc))));
    }
}

unsafe extern "C" fn unregistered(arg: *mut std::ffi::c_void, rc: i32) {
    // SAFETY: the box unregister_then_start made, delivered once.
    let (params, rpc) = *unsafe { Box::from_raw(arg as *mut (CreateParams, Rpc)) };
    if rc != 0 {
        return rpc.reply_error(&Error::from_rc(rc, format!("name: unregistering '{}' failed ({})", params.name, super::errno::describe(rc))));
    }
    match open_node(params) {
        Ok(node) => {
            node.core.enter(|core| core.phase = Phase::Probing { format_anyway: true }).expect("a new node is not entered");
            start_node(node, Some(rpc));
        }
        Err(error) => rpc.reply_error(&error),
    }
}

/// bdev_hhc_delete, on the bdev's owner thread: a record (an HHC bdev that
/// lost its cache) is dropped here; any other goes through the bdev layer.
///
/// # Safety
/// `name` is NULL or a C string valid for this call; `rpc` is a pending
/// request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_delete(name: *const c_char, rpc: *mut sys::hhc_glue_rpc) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let name = unsafe { text(name) }.unwrap_or_default();
    forward::with_node(&name.clone(), move |found| {
        let node = match found {
            Ok(node) => node,
            Err(error) => return rpc.reply_error(&error),
        };
        let answer = node.and_then(|node| node.core.try_enter(|core| core.delete_record()).flatten());
        match answer {
            Some(answer) => rpc.reply(answer.as_ref().map(String::as_str)),
            None => {
                let Ok(c_name) = CString::new(name.as_str()) else {
                    return rpc.reply_error(&Error::NoDevice(format!("no HHC bdev named {name:?}")));
                };
                // SAFETY: valid C string for the call; C answers rpc (taken
                // out of the Rpc, so answered once).
                unsafe { sys::hhc_glue_bdev_delete(c_name.as_ptr(), rpc.into_raw()) }
            }
        }
    });
}

impl Core {
    /// Drops the record of a lost cache: None if the node is not one.
    fn delete_record(&mut self) -> Option<Result<String, Error>> {
        let name = self.params.name.clone();
        if !self.phase.is_record() {
            return None;
        }
        if self.phase == Phase::Recovering || self.bdev.glue().is_some() {
            let why = format!("name: HHC bdev '{name}' is still replaying its log or being unregistered; try again");
            return Some(Err(Error::Busy(why)));
        }
        log::info!("{name}: record of the lost cache dropped");
        self.finish_destruct();
        Some(Ok("true".to_string()))
    }
}

/// Module fini: records have no bdev for the bdev layer to tear down, so
/// their bases are released here.
pub fn drop_records() {
    for node in registry::nodes() {
        node.core.try_enter(|core| {
            if core.phase.is_record() && core.recovery.is_none() && core.bdev.glue().is_none() {
                core.finish_destruct();
            }
        });
    }
}
