//! The list of live HHC bdevs (nodes), and of those that lost their cache
//! and are records without a bdev: the RPCs and examine look nodes up here. Nodes are boxed and never move; a node is added when it starts and
//! removed on its owner thread before it is freed (lifecycle).

use super::node::Node;
use std::sync::{Mutex, MutexGuard};

/// Node addresses.
static NODES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn lock() -> MutexGuard<'static, Vec<usize>> {
    // Panics abort the process, so the lock is never poisoned; recover anyway.
    NODES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn add(node: *const Node) {
    lock().push(node as usize);
}

pub fn remove(node: *const Node) {
    lock().retain(|&a| a != node as usize);
}

/// The nodes registered now.
pub fn nodes() -> Vec<&'static Node> {
    let addresses = lock().clone();
    // SAFETY: a registered node is alive: it is removed (on its owner thread,
    // the thread the RPCs and examine run on) before the message that frees it.
    addresses.into_iter().map(|a| unsafe { &*(a as *const Node) }).collect()
}

pub fn find(name: &str) -> Option<&'static Node> {
    nodes().into_iter().find(|n| n.params.name == name)
}

pub fn contains(name: &str) -> bool {
    lock().iter().any(|&a| {
        // SAFETY: as in `nodes` (a node's name never changes).
        unsafe { &*(a as *const Node) }.params.name == name
    })
}

pub fn count() -> usize {
    lock().len()
}
