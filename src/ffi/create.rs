//! How HHC bdevs come to be: the `bdev_hhc_create` RPC, and examine, which
//! assembles one from the create parameters recorded in its cache bdev's
//! superblock once its other bdevs are all there. Names from a device are
//! hostile input: every fault leaves the bdevs unclaimed and is logged.

use super::errno::Error;
use super::lifecycle::launch;
use super::node::{Node, Phase};
use super::params::{CreateParams, OptionParams};
use super::rpc::{text, Rpc};
use super::{forward, json, logger, registry, sys};
use crate::format::{CacheSuperblock, FormatError, OwnerRecord, CACHE_SUPERBLOCK_MAGIC, FORMAT_VERSION, UNIT_BYTES};
use std::ffi::{c_char, CString};
use std::sync::{Mutex, MutexGuard};

fn given(value: u32) -> Option<u32> {
    (value != sys::HHC_GLUE_UNSET).then_some(value)
}

/// # Safety
/// Every string of `raw` is NULL or valid for this call.
unsafe fn decode_params(raw: &sys::hhc_glue_create_params) -> Result<CreateParams, Error> {
    let logs_count = raw.logs_count.min(raw.logs.len());
    // SAFETY (all text calls): the caller's contract.
    let string = |ptr| unsafe { text(ptr) }.unwrap_or_default();
    let params = CreateParams::new(
        string(raw.name),
        string(raw.backing),
        string(raw.cache),
        raw.logs[..logs_count].iter().map(|&l| string(l)).collect(),
        unsafe { text(raw.policy) }.as_deref(),
        given(raw.block_size),
        given(raw.segment_size),
        given(raw.buffer_count),
        decode_options(&raw.options)?,
    )?
    .with_cpumask(unsafe { text(raw.cpumask) }.as_deref())?
    .with_barrier_gap(given(raw.barrier_gap))
    .with_backing_stripe(given(raw.backing_stripe))
    .with_log_timeout(given(raw.log_timeout_ms))
    .with_takeover(raw.takeover)?;
    Ok(params)
}

/// # Safety
/// `raw.seq_cutoff_policy` is NULL or a C string valid for this call.
pub(super) unsafe fn decode_options(raw: &sys::hhc_glue_options) -> Result<OptionParams, Error> {
    // SAFETY: the caller's contract.
    let policy = unsafe { text(raw.seq_cutoff_policy) };
    // HHC_GLUE_UNSET64 (bindgen types the macro i32: it is u64::MAX).
    let threshold = (raw.seq_cutoff_threshold != u64::MAX).then_some(raw.seq_cutoff_threshold);
    let options = OptionParams::new(
        given(raw.dirty_threshold),
        given(raw.writeback_parallelism),
        given(raw.idle_after_ms),
        threshold,
        policy.as_deref(),
    )?;
    Ok(options)
}

/// Whether a bdev of this name exists; a name no bdev can have does not.
fn bdev_exists(name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: valid C string for the call.
    unsafe { sys::hhc_glue_bdev_exists(name.as_ptr()) }
}

/// bdev_hhc_create.
///
/// # Safety
/// `raw` points to a decoded parameter block valid for this call; `rpc` is
/// a pending request, answered here or later by the node.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_create(raw: *const sys::hhc_glue_create_params, rpc: *mut sys::hhc_glue_rpc) {
    logger::install();
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let params = match unsafe { decode_params(&*raw) } {
        Ok(params) => params,
        Err(error) => return rpc.reply_error(&error),
    };
    if params.takeover && (registry::contains(&params.name) || bdev_exists(&params.name)) {
        let message = format!("name: a bdev named '{}' already exists; a takeover creates the HHC bdev anew", params.name);
        return rpc.reply_error(&Error::Exists(message));
    }
    if registry::contains(&params.name) {
        // On its owner thread, which alone may look at it.
        let name = params.name.clone();
        return forward::with_node(&name, move |found| match found {
            Ok(Some(node)) => create_existing(node, &params, rpc),
            Ok(None) => rpc.reply_error(&Error::Busy(format!("name: HHC bdev '{}' is being deleted; try again", params.name))),
            Err(error) => rpc.reply_error(&error),
        });
    }
    if bdev_exists(&params.name) {
        return rpc.reply_error(&Error::Exists(format!("name: a bdev named '{}' already exists", params.name)));
    }
    forget_pending(&params.name);
    launch(params, Some(rpc));
}

/// A create call for an HHC bdev that exists already (examine assembled it,
/// or a config is loaded twice), on its owner thread: the same devices make
/// it a success, answered once the bdev is registered, and switch it to the
/// call's policy; other devices are a name clash. Options the call gives
/// are set too.
fn create_existing(node: &Node, params: &CreateParams, rpc: Rpc) {
    // The devices it has now (log mirrors attached or detached since), as
    // its owner knows them; else those it was created with.
    let current = node.core.try_enter(|core| core.saved_params()).unwrap_or_else(|| node.published_params());
    let (a, b) = (&current, params);
    if (&a.backing, &a.cache, &a.logs) != (&b.backing, &b.cache, &b.logs) {
        let message = format!("name: an HHC bdev named '{}' already exists with other devices", params.name);
        return rpc.reply_error(&Error::Exists(message));
    }
    let mut rpc = Some(rpc);
    let phase = node.core.try_enter(|core| {
        if !matches!(core.phase, Phase::Stopping | Phase::Failed | Phase::Done) && !core.phase.is_record() {
            core.want_policy(b.policy);
            core.want_options(&b.options);
            core.sync_owner_record();
        }
        if matches!(core.phase, Phase::Probing { .. } | Phase::Starting) && core.rpc.is_none() {
            core.rpc = rpc.take();
        }
        core.phase
    });
    node.run();
    node.core.try_enter(|core| core.publish());
    let Some(rpc) = rpc else { return };
    if phase == Some(Phase::Running) {
        log::info!("{}: exists already with these devices", params.name);
        rpc.reply_json(&json::string(&params.name));
    } else if phase.is_some_and(Phase::is_record) {
        let message = format!("name: HHC bdev '{}' lost its cache bdev; see bdev_hhc_get_stats, then bdev_hhc_recover or bdev_hhc_delete", params.name);
        rpc.reply_error(&Error::Busy(message));
    } else {
        rpc.reply_error(&Error::Busy(format!("name: HHC bdev '{}' is being created or deleted", params.name)));
    }
}

// ---- examine: assembling an HHC bdev from its cache device ----

/// Create parameters found in the superblocks of examined cache bdevs whose
/// other devices have not all arrived yet.
static PENDING: Mutex<Vec<CreateParams>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<CreateParams>> {
    // Panics abort the process, so the lock is never poisoned; recover anyway.
    PENDING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn forget_pending(name: &str) {
    pending().retain(|p| p.name != name);
}

/// The first units of a newly registered bdev (`len` bytes: the cache
/// superblock and the owner record's copies): if it is an HHC cache device
/// whose owner record holds its create parameters, and the record names
/// this bdev as the cache, the HHC bdev is assembled as soon as its backing
/// and log bdevs are all there. A bdev under another one (a passthru or
/// model bdev stacked on the cache) shows the same units; only the bdev
/// the record names is assembled from.
///
/// # Safety
/// `name` is a C string and `unit` a buffer of `len` bytes, valid for this call.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_examine_disk(name: *const c_char, unit: *const u8, len: usize) {
    logger::install();
    // SAFETY: the function's contract.
    let Some(name) = (unsafe { text(name) }) else { return };
    // SAFETY: the function's contract.
    let units = unsafe { std::slice::from_raw_parts(unit, len) };
    let superblock = match CacheSuperblock::decode(units) {
        Ok(superblock) => superblock,
        Err(FormatError::UnsupportedVersion(version)) if units.starts_with(&CACHE_SUPERBLOCK_MAGIC.to_le_bytes()) => {
            log::warn!("examine: bdev {name} holds an HHC cache of format version {version}; this build reads version {FORMAT_VERSION}; not assembled, bdev left unclaimed (docs/format.md)");
            return;
        }
        Err(_) => return,
    };
    let id = superblock.instance_id;
    let record = OwnerRecord::newest(units.get(UNIT_BYTES..).unwrap_or_default(), id);
    let params = match record.map(|(_, record)| CreateParams::from_owner_record(&record.owner)) {
        Some(Ok(Some(params))) => params,
        None | Some(Ok(None)) => {
            log::info!("examine: bdev {name} holds an HHC cache (instance {id:#x}) without create parameters; use bdev_hhc_create");
            return;
        }
        Some(Err(error)) => {
            log::warn!("examine: bdev {name} holds an HHC cache (instance {id:#x}) whose {error}; not assembled, bdev left unclaimed; use bdev_hhc_create");
            return;
        }
    };
    if params.cache != name {
        log::info!(
            "examine: bdev {name} holds the HHC cache of '{}' (instance {id:#x}), whose record names bdev {} as its cache; not assembled from {name}",
            params.name,
            params.cache
        );
        return;
    }
    if registry::contains(&params.name) {
        return;
    }
    log::info!(
        "examine: bdev {name} is the cache of HHC bdev '{}' (backing {}, logs {}); assembling it once they are all present",
        params.name,
        params.backing,
        params.logs.iter().map(|l| if l.is_empty() { "(empty slot)" } else { l }).collect::<Vec<_>>().join(",")
    );
    let mut pending = pending();
    pending.retain(|p| p.name != params.name);
    pending.push(params);
    drop(pending);
    assemble_ready();
}

/// A bdev arrived: it may be the last device a recorded HHC bdev waits for.
///
/// # Safety
/// `name` is a C string valid for this call.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_examine_config(name: *const c_char) {
    // SAFETY: the function's contract.
    let Some(name) = (unsafe { text(name) }) else { return };
    let wanted = pending().iter().any(|p| p.backing == name || p.logs.contains(&name));
    if wanted {
        assemble_ready();
    }
}

fn assemble_ready() {
    let ready: Vec<CreateParams> = {
        let mut pending = pending();
        let (ready, waiting) = pending.drain(..).partition(|p: &CreateParams| {
            bdev_exists(&p.backing) && bdev_exists(&p.cache) && p.logs.iter().all(|l| l.is_empty() || bdev_exists(l))
        });
        *pending = waiting;
        ready
    };
    for params in ready {
        if bdev_exists(&params.name) || registry::contains(&params.name) {
            log::warn!("examine: a bdev named '{}' exists already; HHC bdev not assembled", params.name);
            continue;
        }
        log::info!("examine: assembling HHC bdev '{}'", params.name);
        launch(params, None);
    }
}

/// bdev_hhc_forget, once units 0..3 of the unused cache bdev `cache` were
/// read: whether to wipe them (its superblock and owner record), so that no
/// start assembles its HHC bdev again. Without `force` a cache holding an
/// HHC cache is refused: whether it holds dirty blocks (the only copy of
/// writes its backing bdev lacks) is known only once its HHC bdev is
/// assembled, and they are lost with the superblock.
///
/// # Safety
/// `cache` is a C string and `units` a buffer of `len` bytes, valid for
/// this call; `rpc` is a pending request, answered here unless true.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_forget_check(
    cache: *const c_char,
    units: *const u8,
    len: usize,
    force: bool,
    rpc: *mut sys::hhc_glue_rpc,
) -> bool {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return false };
    // SAFETY: the function's contract.
    let cache = unsafe { text(cache) }.unwrap_or_default();
    // SAFETY: the function's contract.
    let units = unsafe { std::slice::from_raw_parts(units, len) };
    let what = match CacheSuperblock::decode(units) {
        Ok(superblock) => {
            let id = superblock.instance_id;
            let record = OwnerRecord::newest(units.get(UNIT_BYTES..).unwrap_or_default(), id);
            match record.map(|(_, record)| CreateParams::from_owner_record(&record.owner)) {
                Some(Ok(Some(params))) => {
                    let what = format!("the HHC cache of '{}' (instance {id:#x}, backing {})", params.name, params.backing);
                    Some((what, Some(params.name)))
                }
                _ => Some((format!("an HHC cache (instance {id:#x}) without create parameters"), None)),
            }
        }
        Err(FormatError::UnsupportedVersion(version)) if units.starts_with(&CACHE_SUPERBLOCK_MAGIC.to_le_bytes()) => {
            Some((format!("an HHC cache of format version {version}"), None))
        }
        Err(_) => None,
    };
    let Some((what, name)) = what else {
        rpc.reply_error(&Error::NoDevice(format!("cache: bdev '{cache}' holds no HHC cache; nothing to forget")));
        return false;
    };
    if !force {
        let back = match &name {
            Some(name) => format!(
                "to keep them, bring '{name}' back (bdev_hhc_create over the same bdevs, or let examine assemble it), \
                 write them back (bdev_hhc_set_policy -p wt until complete) and delete it (bdev_hhc_delete); "
            ),
            None => String::new(),
        };
        rpc.reply_error(&Error::Busy(format!(
            "cache: bdev '{cache}' holds {what}; its dirty blocks, if it has any, are the only copy of writes its \
             backing bdev lacks and are lost when it forgets: {back}to drop them, pass force"
        )));
        return false;
    }
    if let Some(name) = &name {
        forget_pending(name);
    }
    log::warn!("forgetting {what} on cache bdev {cache} (forced): its superblock and owner record are wiped, dirty blocks dropped");
    // C wipes the units and answers through hhc_rs_forget_done.
    let _ = rpc.into_raw();
    true
}

/// The wipe of bdev_hhc_forget is done (`ok`) or failed.
///
/// # Safety
/// `cache` is a C string valid for this call; `rpc` a pending request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_forget_done(cache: *const c_char, ok: bool, rpc: *mut sys::hhc_glue_rpc) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let cache = unsafe { text(cache) }.unwrap_or_default();
    if ok {
        log::info!("cache bdev {cache} forgot its HHC bdev: no start assembles it again; bdev_hhc_create formats it anew");
        rpc.reply_json("true");
    } else {
        rpc.reply_error(&Error::Failed(format!("cache: wiping the HHC superblock of bdev '{cache}' failed")));
    }
}
