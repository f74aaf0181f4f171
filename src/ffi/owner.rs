//! SPDK threads, time, and the cells that hold a node's state.
//!
//! A node belongs to the SPDK thread that created it (the thread of its
//! create call, or one the module made for its `cpumask`): that thread
//! opens and closes its bases, runs its timers and life cycle and answers
//! for it. Its engine is in a `NodeCell`: the owner enters it, and so does
//! a thread that submits a request or hears of its own device command, to
//! run the request there (lanes, request.rs) instead of waiting for the
//! owner's poller. `OwnerCell` holds what only the owner touches, without
//! locks or borrow counting. Messages about a node (destruct, free) are
//! sent to its owner, never to whichever thread is current.

use super::errno::Error;
use super::sys;
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;

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

impl Thread {
    /// The app thread: it runs the RPCs and is the only one that may
    /// register a bdev.
    pub fn app() -> Thread {
        // SAFETY: asks SPDK for the app thread; no arguments.
        Thread(unsafe { sys::hhc_glue_thread_app() })
    }

    /// "name (id N)", for messages.
    pub fn describe(self) -> String {
        let mut out = [0 as std::ffi::c_char; 96];
        // SAFETY: self.0 is a live SPDK thread (threads outlive the nodes
        // they own); out holds out.len() bytes and C writes a NUL-terminated
        // string within them.
        unsafe { sys::hhc_glue_thread_describe(self.0, out.as_mut_ptr(), out.len()) };
        // SAFETY: NUL-terminated by snprintf above.
        unsafe { std::ffi::CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned()
    }

    /// The thread that owns the HHC bdevs created with `cpumask`: made
    /// (named `hhc_owner_<cpumask>`) by the first of them, shared by the
    /// rest. These threads are never ended by the module, so a handle to
    /// one stays valid while the application runs (its reactors end them
    /// when it stops, after the bdev layer has torn every HHC bdev down).
    pub fn for_cpumask(cpumask: &str) -> Result<Thread, Error> {
        let mut threads = OWNER_THREADS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&(_, thread)) = threads.iter().find(|(mask, _)| mask == cpumask) {
            return Ok(Thread(thread as *const c_void));
        }
        let bad = |what: &str| Error::InvalidParams(format!("cpumask: {cpumask:?} {what}"));
        let name = CString::new(format!("hhc_owner_{cpumask}")).map_err(|_| bad("holds a NUL"))?;
        let mask = CString::new(cpumask).map_err(|_| bad("holds a NUL"))?;
        let mut thread = std::ptr::null();
        // SAFETY: valid C strings for the call; thread is an out pointer.
        match unsafe { sys::hhc_glue_thread_create(name.as_ptr(), mask.as_ptr(), &mut thread) } {
            0 => {}
            rc if rc == -libc::EINVAL => return Err(bad("is not a CPU mask (e.g. 0x2 or [1,3])")),
            rc if rc == -libc::EDOM => return Err(bad("names no core this application runs on")),
            rc => return Err(Error::from_rc(rc, format!("cpumask: cannot create a thread on {cpumask}"))),
        }
        threads.push((cpumask.to_string(), thread as usize));
        log::info!("owner thread {} created for cpumask {cpumask}", Thread(thread).describe());
        Ok(Thread(thread))
    }
}

/// The owner threads the module made, by the cpumask they were made for.
static OWNER_THREADS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

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
}

/// A node's state, entered by one thread at a time: its owner (which waits
/// its turn) or a request thread (which never waits: when the cell is busy
/// its work is queued for the thread inside, which looks again before it
/// leaves). Nobody holds it across a return to the reactor, so a wait is
/// short, and a thread finding itself inside further up its stack (a
/// completion handed to the bdev layer submitting again) is told so.
pub struct NodeCell<T: Entered> {
    owner: Thread,
    locked: AtomicBool,
    /// The SPDK thread inside, for telling a re-entry from a wait.
    holder: AtomicPtr<c_void>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached between a successful `acquire` and the
// matching `release`, which order every access (Acquire/Release).
unsafe impl<T: Entered> Sync for NodeCell<T> {}

/// A value told at every entry who entered it.
pub trait Entered {
    fn entered(&mut self, current: Thread, on_owner: bool);
}

impl<T: Entered> NodeCell<T> {
    /// Owned by the calling thread.
    pub fn new(value: T) -> NodeCell<T> {
        NodeCell {
            owner: Thread::current(),
            locked: AtomicBool::new(false),
            holder: AtomicPtr::new(std::ptr::null_mut()),
            value: UnsafeCell::new(value),
        }
    }

    pub fn owner(&self) -> Thread {
        self.owner
    }

    pub fn on_owner_thread(&self) -> bool {
        Thread::current() == self.owner
    }

    fn acquire(&self, current: Thread) -> bool {
        if self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        self.holder.store(current.0 as *mut c_void, Ordering::Relaxed);
        true
    }

    fn inside<R>(&self, current: Thread, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller acquired the cell, so this is the only
        // reference to the value until the release below.
        let value = unsafe { &mut *self.value.get() };
        value.entered(current, current == self.owner);
        let result = f(value);
        self.holder.store(std::ptr::null_mut(), Ordering::Relaxed);
        self.locked.store(false, Ordering::Release);
        result
    }

    /// From any thread: runs `f` if the cell is free, else None at once.
    pub fn try_run<R>(&self, current: Thread, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        self.acquire(current).then(|| self.inside(current, f))
    }

    /// On the owner thread: runs `f` once the cell is free (a request
    /// thread inside leaves soon), or None if this thread is inside
    /// already, further up its stack.
    pub fn enter<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let current = Thread::current();
        debug_assert!(current == self.owner, "a node entered off its owner thread");
        while !self.acquire(current) {
            if std::ptr::eq(self.holder.load(Ordering::Relaxed), current.0) {
                return None;
            }
            std::hint::spin_loop();
        }
        Some(self.inside(current, f))
    }

    /// As `enter`, from any thread: None off the owner thread too.
    pub fn try_enter<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !self.on_owner_thread() {
            return None;
        }
        self.enter(f)
    }
}
