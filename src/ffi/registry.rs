//! The list of live HHC bdevs (nodes), and of those that lost their cache
//! and are records without a bdev: by name, with the thread that owns each.
//! Nodes are boxed and never move; a node is added when it starts and
//! removed on its owner thread before it is freed (lifecycle). Only the
//! owner thread may hold a reference to a node (`find`); any thread may
//! ask who owns one (`owner_of`) and send it work (forward.rs).

use super::node::Node;
use super::owner::Thread;
use std::sync::{Mutex, MutexGuard};

struct Entry {
    address: usize,
    name: String,
    owner: Thread,
}

// SAFETY: an entry's thread handle is only compared and sent messages to
// (owner.rs), from any thread; its node address is dereferenced only on
// that thread (`find`).
unsafe impl Send for Entry {}

static NODES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn lock() -> MutexGuard<'static, Vec<Entry>> {
    // Panics abort the process, so the lock is never poisoned; recover anyway.
    NODES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// On the node's owner thread.
pub fn add(node: &Node) {
    let entry = Entry { address: node as *const Node as usize, name: node.name.clone(), owner: node.core.owner() };
    lock().push(entry);
}

/// On the node's owner thread.
pub fn remove(node: *const Node) {
    lock().retain(|e| e.address != node as usize);
}

/// The nodes the calling thread owns.
pub fn nodes() -> Vec<&'static Node> {
    let here = Thread::current();
    let addresses: Vec<usize> = lock().iter().filter(|e| e.owner == here).map(|e| e.address).collect();
    // SAFETY: a registered node is alive: it is removed on its owner thread
    // (this one) before the message that frees it, which this thread runs
    // only after the caller returns.
    addresses.into_iter().map(|a| unsafe { &*(a as *const Node) }).collect()
}

/// The node named `name` if the calling thread owns it.
pub fn find(name: &str) -> Option<&'static Node> {
    let here = Thread::current();
    let address = lock().iter().find(|e| e.name == name && e.owner == here).map(|e| e.address)?;
    // SAFETY: as in `nodes`.
    Some(unsafe { &*(address as *const Node) })
}

/// The thread that owns HHC bdev `name`, if there is one.
pub fn owner_of(name: &str) -> Option<Thread> {
    lock().iter().find(|e| e.name == name).map(|e| e.owner)
}

/// Every HHC bdev's name, in the order they started.
pub fn names() -> Vec<String> {
    lock().iter().map(|e| e.name.clone()).collect()
}

pub fn contains(name: &str) -> bool {
    lock().iter().any(|e| e.name == name)
}

pub fn count() -> usize {
    lock().len()
}
