//! What the module reports about a node: `bdev_hhc_get_bdevs`, the bdev's
//! `dump_info_json` (driver-specific info in `bdev_get_bdevs`) and
//! `write_config_json` (the create call that `save_config` records). An
//! HHC bdev that lost its cache has no bdev, so it shows only here (with its
//! `recovery`) and in `bdev_hhc_get_stats`, and `save_config` leaves it out.

use super::base::Base;
use super::errno::Error;
use super::json::{self, JsonObject};
use super::node::{Core, Node};
use super::params::CreateParams;
use super::recovery::progress_json;
use super::rpc::{text, Rpc};
use super::{forward, registry, sys};
use std::ffi::{c_char, CStr};

impl Core {
    fn info_json(&self) -> String {
        let base = |b: &Base| JsonObject::new().string("name", &b.name).string("health", b.health()).finish();
        let mut object = JsonObject::new()
            .string("name", &self.params.name)
            .string("policy", self.policy().name())
            .string("state", self.phase.name())
            .number("block_size", self.config.block_size as u64)
            .number("backing_stripe_bytes", self.config.backing_stripe_bytes as u64)
            .number("barrier_gap_bytes", self.config.barrier_gap_bytes as u64)
            .number("log_timeout_ms", self.config.mirror_timeout_ns / 1_000_000)
            .raw("backing", &base(self.bases.backing()))
            .raw("cache", &self.bases.cache().map_or_else(|| "null".to_string(), base))
            .raw("logs", &json::array(self.bases.logs().iter().map(base)));
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
            object = object.raw("recovery", &progress_json(&progress));
        }
        if let Some(engine) = &self.engine {
            let fields = self.engine_fields(engine);
            let stats = fields.into_iter().fold(JsonObject::new(), |o, (name, value)| o.number(name, value));
            object = object.raw("stats", &stats.finish());
        }
        object.finish()
    }
}

/// The node's info on its owner thread, or None while its owner is inside it.
fn node_info(node: &Node) -> Option<String> {
    node.core.try_enter(|core| core.info_json())
}

impl Core {
    /// Shows the node to other threads as it is now (`Node::published`):
    /// after every operator RPC and, from the poller, at least once a second.
    pub(super) fn publish(&mut self) {
        self.note_protection();
        let info = self.info_json();
        let params = (!self.phase.is_record()).then(|| self.saved_params());
        // SAFETY: the node owns this core and outlives it.
        let node = unsafe { &*self.node };
        let mut published = node.published.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        published.info = Some(info);
        if let Some(params) = params {
            published.params = params;
        }
        drop(published);
        self.published_at_ns = self.now;
    }

    /// The create call that brings the bdev back as it is now: its create
    /// parameters with the log mirrors attached since (an empty name for a
    /// detached mirror's slot), the policy it has been switched to and the
    /// options in force. `save_config` emits it; the cache device's owner
    /// record holds it (`sync_owner_record`).
    pub(super) fn saved_params(&self) -> CreateParams {
        CreateParams { policy: self.policy_wanted(), ..self.params.clone() }
    }
}

/// The create call that brings the bdev back: from its owner, or as the
/// owner last published it when called on another thread.
fn config_json(node: &Node) -> String {
    let current = node.core.try_enter(|core| core.saved_params());
    let params = current.unwrap_or_else(|| node.published_params());
    JsonObject::new().string("method", "bdev_hhc_create").raw("params", &params.to_json()).finish()
}

/// The node's info for `bdev_get_bdevs`: from its owner, or as the owner
/// last published it when called on another thread.
fn dump_info(node: &Node) -> Option<String> {
    node_info(node).or_else(|| node.published.lock().ok().and_then(|p| p.info.clone()))
}

/// bdev_hhc_get_bdevs.
///
/// # Safety
/// `name` is NULL or a C string valid for this call; `rpc` is a pending request.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_get_bdevs(name: *const c_char, rpc: *mut sys::hhc_glue_rpc) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let wanted = unsafe { text(name) };
    let names = registry::names().into_iter().filter(|name| wanted.as_ref().is_none_or(|w| w == name)).collect();
    // Each from its owner thread, one after the other.
    forward::gather(names, node_info, move |infos| match wanted {
        Some(w) if infos.is_empty() => rpc.reply_error(&Error::NoDevice(format!("no HHC bdev named '{w}'"))),
        _ => rpc.reply_json(&json::array(infos)),
    });
}

/// # Safety
/// `json` is the writer C handed over for this call.
unsafe fn write_json(json: *mut sys::hhc_glue_json, name: Option<&CStr>, text: &str) {
    let name = name.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: json is valid for this call; text outlives it.
    unsafe { sys::hhc_glue_json_write_raw(json, name, text.as_ptr().cast(), text.len()) }
}

/// # Safety
/// `rs_node` is a registered node and `json` a writer valid for this call.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_dump_info(rs_node: *mut std::ffi::c_void, json: *mut sys::hhc_glue_json) {
    // SAFETY: the bdev (and so its node) is registered during this call.
    let node = unsafe { &*(rs_node as *const Node) };
    let info = dump_info(node).unwrap_or_else(|| "{\"state\":\"busy\"}".to_string());
    // SAFETY: the function's contract.
    unsafe { write_json(json, Some(c"hhc"), &info) };
}

/// # Safety
/// As for `hhc_rs_node_dump_info`.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_node_write_config(rs_node: *mut std::ffi::c_void, json: *mut sys::hhc_glue_json) {
    // SAFETY: as in hhc_rs_node_dump_info.
    let node = unsafe { &*(rs_node as *const Node) };
    // SAFETY: the function's contract.
    unsafe { write_json(json, None, &config_json(node)) };
}
