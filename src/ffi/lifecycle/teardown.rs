//! How a node ends: it fails (the create call, if waiting, is answered),
//! drains, and unregisters its bdev; the bdev's destruct stops the engine
//! cleanly and frees the node on its owner thread. A node that lost its
//! cache keeps a record instead (record.rs).

use super::super::errno::{self, Error};
use super::super::node::{Core, Node, Phase};
use super::super::owner::now_ns;
use super::super::{registry, sys};
use std::ffi::c_void;

/// The bdev's destruct, on whichever thread unregistered it: continues on
/// the owner thread, from a message, so the node is never entered twice.
///
/// # Safety
/// `node` is a registered node; the bdev layer calls destruct once.
pub unsafe fn destruct(node: *const Node) {
    // SAFETY: the node lives until free_node, which only finish_destruct
    // sends, after this message ran.
    let owner = unsafe { &*node }.core.owner();
    // SAFETY: destruct_msg gets the node back on its owner thread.
    let sent = unsafe { owner.send(destruct_msg, node as *mut c_void) };
    assert!(sent.is_ok(), "cannot send the destruct message to the owner thread");
}

unsafe extern "C" fn destruct_msg(arg: *mut c_void) {
    // SAFETY: see destruct.
    let node = unsafe { &*(arg as *const Node) };
    assert!(node.core.on_owner_thread(), "destruct message off the owner thread");
    node.core.enter(Core::begin_destruct).expect("messages run outside the node");
    node.run();
}

unsafe extern "C" fn free_node(arg: *mut c_void) {
    // SAFETY: arg came from Box::leak in start_node, and finish_destruct
    // (its only sender) runs once per node.
    let node = unsafe { Box::from_raw(arg as *mut Node) };
    assert!(node.core.on_owner_thread(), "free message off the owner thread");
    drop(node);
}


impl Core {
    /// The node fails with `error` (its kind answers a create RPC still
    /// waiting).
    pub(in crate::ffi) fn fail(&mut self, error: Error) {
        if matches!(self.phase, Phase::Failed | Phase::Done) || self.phase.is_record() {
            return;
        }
        let reason = error.message().to_string();
        log::error!("{}: {reason}", self.params.name);
        let creating = matches!(self.phase, Phase::Probing { .. } | Phase::Starting);
        if creating {
            self.reply(Err(&error.with_message(format!("cannot create '{}': {reason}", self.params.name))));
            // A bdev being registered now goes once registered (`registered`).
            if !self.bdev.is_registering() {
                self.bdev.release();
            }
        }
        self.failure = Some(reason);
        self.phase = Phase::Failed;
    }

    /// The cache bdev was removed: a failure then leaves a record, or a
    /// replay of the log.
    fn cache_lost(&self) -> bool {
        self.bases.cache().is_some_and(|cache| cache.removed)
    }

    pub(super) fn after_failure_drained(&mut self) {
        let cache_lost = self.cache_lost();
        if cache_lost && self.bdev.served_and_kept() {
            return self.keep_record();
        }
        let recoverable = cache_lost && self.policy().uses_log() && self.engine.is_some();
        if recoverable {
            self.start_recovery();
            if self.phase == Phase::Recovering {
                return;
            }
        }
        let policy = self.policy();
        if cache_lost && policy.is_write_back() && !policy.uses_log() {
            log::error!("{}: cache lost under policy {policy}: dirty data is gone", self.params.name);
        }
        self.phase = Phase::Done;
        self.unregister();
    }

    pub(super) fn unregister(&mut self) {
        if let Some(glue) = self.bdev.unregister() {
            // SAFETY: glue is the registered bdev; destruct follows asynchronously.
            unsafe { sys::hhc_glue_node_unregister(glue) }
        }
    }

    /// The bdev's destruct, on the owner thread.
    pub(in crate::ffi) fn begin_destruct(&mut self) {
        // Ending the destruct unregisters the io_device, which SPDK refuses
        // while an iteration over its channels runs: it waits for it.
        let waits = self.channels_updating();
        self.bdev.destruct(waits);
        if waits {
            return;
        }
        match self.phase {
            Phase::Running if self.direct.is_some() => {
                self.phase = Phase::Done;
                self.finish_destruct();
            }
            phase if phase.is_record() => self.bdev_gone(),
            Phase::Running => {
                self.engine.as_mut().expect("engine").shutdown(now_ns());
                self.phase = Phase::Stopping;
            }
            Phase::Done => self.finish_destruct(),
            _ => {}
        }
    }

    /// A record's bdev finished unregistering; the node stays.
    fn bdev_gone(&mut self) {
        let glue = self.bdev.destruct_done(true).expect("a record's bdev in its destruct");
        // SAFETY: glue is our registered bdev in its destruct; called once.
        unsafe { sys::hhc_glue_node_destruct_done(glue) };
        log::info!("{}: bdev unregistered; its record stays until bdev_hhc_recover or bdev_hhc_delete", self.params.name);
    }

    /// Closes everything, drops the node from the registry, ends the bdev's
    /// destruct and frees the node from a message to its owner thread, once
    /// no caller up the stack uses it.
    pub(in crate::ffi) fn finish_destruct(&mut self) {
        self.bases.close_all();
        if !self.poller.is_null() {
            // SAFETY: the poller was started for this node and is stopped once.
            unsafe { sys::hhc_glue_poller_stop(self.poller) };
            self.poller = std::ptr::null_mut();
        }
        registry::remove(self.node);
        if let Some(glue) = self.bdev.destruct_done(false) {
            // SAFETY: glue is our registered bdev in its destruct; called once.
            unsafe { sys::hhc_glue_node_destruct_done(glue) };
        }
        // SAFETY: free_node gets the node, which nothing uses after this
        // message: it is out of the registry, its poller stopped, its bdev gone.
        if let Err(rc) = unsafe { self.owner.send(free_node, self.node as *mut c_void) } {
            log::error!("cannot send the message that frees an HHC node ({}); leaking it", errno::describe(rc));
        }
    }
}
