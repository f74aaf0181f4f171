//! Reaching a node on its owner thread. The RPCs run on the app thread; a
//! node may be owned by another (`cpumask` at create), and only its owner
//! may enter it or even hold a reference to it (the owner frees it). So an
//! RPC about a node looks up the node's owner by name, sends the work there
//! (spdk_thread_send_msg), and the work finds the node again by name on
//! that thread and answers the request from there, as SPDK's modules do
//! (its JSON-RPC server takes answers from any thread).

use super::errno::{self, Error};
use super::node::Node;
use super::owner::Thread;
use super::registry;
use std::collections::VecDeque;
use std::ffi::c_void;

/// What `with_node` hands its work: the node on its owner thread, None if
/// no HHC bdev has that name (or it went meanwhile), or why the owner
/// could not be reached.
pub type Found<'a> = Result<Option<&'a Node>, Error>;

type Work = Box<dyn FnOnce(Found) + Send>;

struct Visit {
    name: String,
    work: Work,
}

/// Runs `work` with HHC bdev `name`'s node on its owner thread: at once if
/// that is the calling thread (or there is no such bdev), else from a
/// message to it.
pub fn with_node(name: &str, work: impl FnOnce(Found) + Send + 'static) {
    let owner = registry::owner_of(name);
    match owner {
        Some(owner) if owner != Thread::current() => {
            let visit = Box::new(Visit { name: name.to_string(), work: Box::new(work) });
            let raw = Box::into_raw(visit);
            // SAFETY: visit_msg takes back the box it is given; owner threads
            // outlive their nodes and the module (owner.rs).
            if let Err(rc) = unsafe { owner.send(visit_msg, raw.cast()) } {
                // SAFETY: the message was not queued; the box is still ours.
                let visit = unsafe { Box::from_raw(raw) };
                (visit.work)(Err(unreachable(&visit.name, rc)));
            }
        }
        _ => work(Ok(registry::find(name))),
    }
}

fn unreachable(name: &str, rc: i32) -> Error {
    Error::from_rc(rc, format!("name: cannot reach the owner thread of HHC bdev '{name}': {}", errno::describe(rc)))
}

unsafe extern "C" fn visit_msg(arg: *mut c_void) {
    // SAFETY: arg is the box with_node sent, delivered once.
    let visit = unsafe { Box::from_raw(arg as *mut Visit) };
    // Found here only if it is still this thread's (registry::find).
    (visit.work)(Ok(registry::find(&visit.name)));
}

/// A walk over nodes, one owner thread after another, collecting what
/// `each` says of each node; `done` gets it all on the last thread.
struct Gather {
    pending: VecDeque<String>,
    found: Vec<String>,
    each: fn(&Node) -> Option<String>,
    done: Box<dyn FnOnce(Vec<String>) + Send>,
}

/// Calls `each` for the node of every name in `names` on its owner thread,
/// in order, then `done` with the answers (names gone meanwhile give none).
pub fn gather(names: Vec<String>, each: fn(&Node) -> Option<String>, done: impl FnOnce(Vec<String>) + Send + 'static) {
    let gather = Box::new(Gather { pending: names.into(), found: Vec::new(), each, done: Box::new(done) });
    gather_step(gather);
}

fn gather_step(mut gather: Box<Gather>) {
    let here = Thread::current();
    while let Some(name) = gather.pending.front() {
        match registry::owner_of(name) {
            Some(owner) if owner != here => {
                let raw = Box::into_raw(gather);
                // SAFETY: gather_msg takes back the box; owner threads outlive
                // their nodes and the module (owner.rs).
                let Err(rc) = (unsafe { owner.send(gather_msg, raw.cast()) }) else { return };
                // SAFETY: the message was not queued; the box is still ours.
                gather = unsafe { Box::from_raw(raw) };
                let name = gather.pending.pop_front().expect("front");
                log::warn!("cannot reach the owner thread of HHC bdev '{name}' ({}); left out", errno::describe(rc));
            }
            _ => {
                let name = gather.pending.pop_front().expect("front");
                if let Some(answer) = registry::find(&name).and_then(gather.each) {
                    gather.found.push(answer);
                }
            }
        }
    }
    let Gather { found, done, .. } = *gather;
    done(found);
}

unsafe extern "C" fn gather_msg(arg: *mut c_void) {
    // SAFETY: arg is the box gather_step sent, delivered once.
    gather_step(unsafe { Box::from_raw(arg as *mut Gather) });
}
