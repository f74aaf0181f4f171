//! SPDK threads, time, and the owner-thread cell of a node.
//!
//! A node belongs to the SPDK thread that created it: only that thread runs
//! its engine, touches its bases and answers for it. `OwnerCell` holds that
//! state without locks or borrow counting; what makes it sound is the
//! invariant that only the owner thread enters it (checked by a debug
//! assertion on the data path and by a real check where a non-owner thread
//! can arrive: RPCs and `dump_info`). Messages about a node (destruct, free)
//! are sent to its owner, never to whichever thread is current.

use super::sys;
use std::cell::{Cell, UnsafeCell};
use std::ffi::c_void;

/// An SPDK thread, opaque: only compared and sent messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread(*const c_void);

impl Thread {
    pub fn current() -> Thread {
        // SAFETY: asks SPDK for the calling thread; no arguments.
        Thread(unsafe { sys::hhc_glue_thread_current() })
    }

    /// Runs `f(arg)` on this thread from its message queue, never inside
    /// the caller. Err carries SPDK's negative errno.
    ///
    /// # Safety
    /// `arg` must still be what `f` expects when `f` runs on this thread.
    pub unsafe fn send(self, f: unsafe extern "C" fn(*mut c_void), arg: *mut c_void) -> Result<(), i32> {
        // SAFETY: self.0 came from hhc_glue_thread_current and threads outlive
        // the nodes they own; arg is the caller's promise.
        match unsafe { sys::hhc_glue_thread_send(self.0, Some(f), arg) } {
            0 => Ok(()),
            rc => Err(rc),
        }
    }
}

/// Monotonic time in nanoseconds (SPDK's tick counter).
pub fn now_ns() -> u64 {
    // SAFETY: reads the TSC through SPDK; no arguments.
    unsafe { sys::hhc_glue_now_ns() }
}

/// A value that only its owner thread touches, entered by one caller at a
/// time: a completion handed to the bdev layer may submit a new request at
/// once, which must not enter the value again (the caller already inside
/// picks the new work up).
pub struct OwnerCell<T> {
    owner: Thread,
    entered: Cell<bool>,
    value: UnsafeCell<T>,
}

impl<T> OwnerCell<T> {
    /// Owned by the calling thread.
    pub fn new(value: T) -> OwnerCell<T> {
        OwnerCell { owner: Thread::current(), entered: Cell::new(false), value: UnsafeCell::new(value) }
    }

    pub fn owner(&self) -> Thread {
        self.owner
    }

    pub fn on_owner_thread(&self) -> bool {
        Thread::current() == self.owner
    }

    /// Runs `f` with the value unless a caller up the stack is inside (then
    /// None). Only the owner thread may call this (the data path: a debug
    /// assertion checks it).
    pub fn enter<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        debug_assert!(self.on_owner_thread(), "a node entered off its owner thread");
        if self.entered.replace(true) {
            return None;
        }
        // SAFETY: only the owner thread gets here (the invariant above), and
        // `entered` makes this the only reference to the value until f returns.
        let result = f(unsafe { &mut *self.value.get() });
        self.entered.set(false);
        Some(result)
    }

    /// As `enter`, from any thread: None off the owner thread too.
    pub fn try_enter<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !self.on_owner_thread() {
            return None;
        }
        self.enter(f)
    }
}
