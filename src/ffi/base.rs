//! The base bdevs of a node: backing, cache, then the log mirrors in order,
//! each opened and claimed for module hhc. They start device I/O, count
//! what is outstanding, its errors and latency, and close once removed and
//! drained.

use super::errno::{self, Error};
use super::io_tag::IoTag;
use super::latency::DeviceLatency;
use super::params::BaseFacts;
use super::sys;
use crate::io::{DeviceIo, DeviceRole, IoKind, IoStatus};
use libc::iovec;
use std::ffi::{c_void, CString};

/// What a base bdev callback needs to find its node and role.
pub struct BaseCtx {
    pub node: *const c_void,
    pub role: DeviceRole,
}

/// How long a base I/O took, as C timed it, and its kind.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub kind: sys::hhc_glue_io_kind,
    pub latency_ns: u64,
}

impl Timing {
    /// The engine's kind of command; None for a RESET (never sent to a base).
    pub fn io_kind(self) -> Option<IoKind> {
        match self.kind {
            sys::hhc_glue_io_kind::HHC_GLUE_IO_READ => Some(IoKind::Read),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE => Some(IoKind::Write),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH => Some(IoKind::Flush),
            sys::hhc_glue_io_kind::HHC_GLUE_IO_RESET => None,
        }
    }
}

pub struct Base {
    pub name: String,
    glue: *mut sys::hhc_glue_base,
    /// C calls back with a pointer to this; it must live as long as the base.
    _ctx: Box<BaseCtx>,
    pub info: sys::hhc_glue_base_info,
    outstanding: u32,
    /// I/Os that completed with an error, since the node started.
    pub errors: u64,
    /// Its commands' latencies since the last stats reset.
    pub latency: DeviceLatency,
    pub removed: bool,
    /// Detached by `bdev_hhc_detach_log` (then also `removed`).
    pub detached: bool,
    closed: bool,
}

impl Base {
    /// Opens and claims bdev `name` in `role` for the node at `node`.
    pub fn open(node: *const c_void, role: DeviceRole, name: &str) -> Result<Base, Error> {
        let what = match role {
            DeviceRole::Log(_) => "logs".to_string(),
            other => other.to_string(),
        };
        let c_name = CString::new(name).map_err(|_| Error::InvalidParams(format!("{what}: bdev name {name:?} holds a NUL")))?;
        let ctx = Box::new(BaseCtx { node, role });
        let mut glue = std::ptr::null_mut();
        // SAFETY: valid C string; ctx stays boxed (stable address) inside Base
        // for as long as C may call back with it; glue is an out pointer.
        let rc = unsafe { sys::hhc_glue_base_open(c_name.as_ptr(), &*ctx as *const BaseCtx as *mut c_void, &mut glue) };
        if rc != 0 {
            let message = match Error::from_rc(rc, String::new()) {
                Error::NoDevice(_) => format!("{what}: no bdev named '{name}'"),
                Error::Claimed(_) | Error::Exists(_) => format!("{what}: bdev '{name}' is already claimed by another module"),
                _ => format!("{what}: cannot open bdev '{name}': {}", errno::describe(rc)),
            };
            return Err(Error::from_rc(rc, message));
        }
        let mut info = no_base_info();
        // SAFETY: glue is open; info is a valid out structure.
        unsafe { sys::hhc_glue_base_get_info(glue, &mut info) };
        Ok(Base {
            name: name.to_string(),
            glue,
            _ctx: ctx,
            info,
            outstanding: 0,
            errors: 0,
            latency: DeviceLatency::default(),
            removed: false,
            detached: false,
            closed: false,
        })
    }

    /// A log mirror slot without a bdev (an empty name at create): as a
    /// detached mirror's, closed, free for `bdev_hhc_attach_log`.
    pub fn absent(node: *const c_void, role: DeviceRole) -> Base {
        let info = no_base_info();
        let ctx = Box::new(BaseCtx { node, role });
        Base {
            name: String::new(),
            glue: std::ptr::null_mut(),
            _ctx: ctx,
            info,
            outstanding: 0,
            errors: 0,
            latency: DeviceLatency::default(),
            removed: true,
            detached: true,
            closed: true,
        }
    }

    /// The C base, for a lane's bypass (null for an absent mirror).
    pub fn glue(&self) -> *mut sys::hhc_glue_base {
        self.glue
    }

    pub fn facts(&self) -> BaseFacts {
        BaseFacts {
            block_size: self.info.block_size,
            blocks_count: self.info.blocks_count,
            supports_flush: self.info.supports_flush,
            stripe_blocks: self.info.optimal_io_boundary,
        }
    }

    /// Gets the calling thread's I/O channel, used for every I/O.
    fn get_channel(&mut self) -> Result<(), Error> {
        // SAFETY: glue is open and the caller is the owner thread.
        match unsafe { sys::hhc_glue_base_get_channel(self.glue) } {
            0 => Ok(()),
            rc => Err(Error::from_rc(rc, format!("cannot get an I/O channel for bdev '{}'", self.name))),
        }
    }

    /// Closes a base that was never used for I/O.
    pub fn close_now(&mut self) {
        debug_assert_eq!(self.outstanding, 0);
        self.close();
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            // SAFETY: glue is an open base; after this call C never names it again.
            unsafe { sys::hhc_glue_base_close(self.glue) }
        }
    }

    pub fn health(&self) -> &'static str {
        match (self.removed, self.closed) {
            (true, _) if self.detached => "detached",
            (true, _) => "removed",
            (false, true) => "closed",
            (false, false) => "ok",
        }
    }
}

/// The bases of one node, indexed by role, and the pool of per-I/O
/// contexts they share (null until `use_pool`).
pub struct Bases {
    bases: Vec<Base>,
    pool: *mut sys::hhc_glue_io_pool,
    pool_count: u32,
    /// A removed base drained off the owner thread: the owner closes it.
    close_pending: bool,
}

impl Default for Bases {
    fn default() -> Bases {
        Bases { bases: Vec::new(), pool: std::ptr::null_mut(), pool_count: 0, close_pending: false }
    }
}

/// Device commands a node has in flight outside its engine, at most: the
/// probe of the cache bdev (two units), and the recovery after the cache was
/// lost (its scan reads two superblock units per mirror, then one part at a
/// time; its replay `REPLAY_PARALLELISM` blocks plus a flush and superblock
/// writes), which runs only once the engine's commands have drained.
pub const COMMANDS_BESIDE_ENGINE: usize = 4 * crate::recovery::replay::REPLAY_PARALLELISM + 64;

/// A role's place among a node's bases (and in its per-base counters).
pub fn role_index(role: DeviceRole) -> usize {
    match role {
        DeviceRole::Backing => 0,
        DeviceRole::Cache => 1,
        DeviceRole::Log(i) => 2 + i as usize,
    }
}

impl Bases {
    /// Opens every role in order and gets the calling (owner) thread's
    /// channels; on error whatever was opened is closed again. A log mirror
    /// slot with an empty name stays without a bdev (`Base::absent`).
    pub fn open(node: *const c_void, roles: &[(DeviceRole, String)]) -> Result<Bases, Error> {
        let mut bases = Bases { bases: Vec::with_capacity(roles.len()), ..Bases::default() };
        let result = roles.iter().try_for_each(|(role, name)| {
            debug_assert_eq!(role_index(*role), bases.bases.len(), "roles in index order");
            let base = match role {
                DeviceRole::Log(_) if name.is_empty() => Base::absent(node, *role),
                _ => Base::open(node, *role, name)?,
            };
            bases.bases.push(base);
            Ok(())
        });
        let open = |base: &&mut Base| !base.closed;
        let result = result.and_then(|()| bases.bases.iter_mut().filter(open).try_for_each(Base::get_channel));
        match result {
            Ok(()) => Ok(bases),
            Err(error) => {
                bases.close_all();
                Err(error)
            }
        }
    }

    /// Allocates the per-I/O contexts, `count` of them, for every base now
    /// and to come; before the first I/O.
    pub fn use_pool(&mut self, count: usize) -> Result<(), Error> {
        debug_assert!(self.pool.is_null(), "one pool per node");
        let count = u32::try_from(count).map_err(|_| Error::TooLarge(format!("{count} device commands in flight")))?;
        // SAFETY: plain allocation; null when out of memory.
        let pool = unsafe { sys::hhc_glue_io_pool_create(count) };
        if pool.is_null() {
            return Err(Error::NoMemory(format!("cannot allocate {count} base I/O contexts")));
        }
        self.pool = pool;
        self.pool_count = count;
        for base in self.bases.iter().filter(|b| !b.closed) {
            // SAFETY: the pool is live; the base is open and has no I/O yet.
            unsafe { sys::hhc_glue_base_use_pool(base.glue, pool) };
        }
        Ok(())
    }

    /// Base I/O contexts in use now and allocated (for the stats).
    pub fn io_contexts(&self) -> (u32, u32) {
        if self.pool.is_null() {
            return (0, 0);
        }
        // SAFETY: the node's reference keeps the pool alive.
        (unsafe { sys::hhc_glue_io_pool_in_use(self.pool) }, self.pool_count)
    }

    pub fn get(&self, role: DeviceRole) -> &Base {
        &self.bases[role_index(role)]
    }

    pub fn backing(&self) -> &Base {
        &self.bases[0]
    }

    /// None for a passthrough without a cache.
    pub fn cache(&self) -> Option<&Base> {
        self.bases.get(1)
    }

    pub fn logs(&self) -> &[Base] {
        self.bases.get(2..).unwrap_or(&[])
    }

    pub fn all(&self) -> &[Base] {
        &self.bases
    }

    /// A stats reset: every base's latencies start again from none.
    pub fn clear_latency(&mut self) {
        self.bases.iter_mut().for_each(|b| b.latency.clear());
    }

    /// Starts one I/O on a base bdev; Err carries the status to report
    /// instead when it cannot start.
    pub fn submit(
        &mut self,
        role: DeviceRole,
        kind: IoKind,
        offset_bytes: u64,
        len_bytes: u64,
        iovs: &[iovec],
        tag: IoTag,
    ) -> Result<(), IoStatus> {
        let Some(base) = self.bases.get_mut(role_index(role)) else { return Err(IoStatus::DeviceLost) };
        if base.removed || base.closed {
            return Err(IoStatus::DeviceLost);
        }
        if kind == IoKind::Flush && !base.info.supports_flush {
            // Without FLUSH a completed write is durable (io.rs, IoKind::Flush).
            return Err(IoStatus::Ok);
        }
        let glue_kind = match kind {
            IoKind::Read => sys::hhc_glue_io_kind::HHC_GLUE_IO_READ,
            IoKind::Write => sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE,
            IoKind::Flush => sys::hhc_glue_io_kind::HHC_GLUE_IO_FLUSH,
        };
        // SAFETY: base.glue is open (not closed); iovs point into engine
        // memory or an outstanding request's buffers, both valid until this
        // I/O completes; C copies the iovec array itself.
        let rc = unsafe {
            sys::hhc_glue_base_submit(base.glue, glue_kind, offset_bytes, len_bytes, iovs.as_ptr(), iovs.len() as i32, tag.pack())
        };
        if rc != 0 {
            // The pool holds as many contexts as the engine has commands.
            debug_assert_ne!(rc, -libc::ENOMEM, "every base I/O context in use: the pool is smaller than the engine's bound");
            log::error!("cannot start {kind:?} on {role} bdev {}: {}", base.name, errno::describe(rc));
            return Err(IoStatus::Error);
        }
        base.outstanding += 1;
        Ok(())
    }

    /// Starts one command on the calling thread's lane (the backing or
    /// cache bdev only; `tag` names which). Ok(false):
    /// not started (no lane context or channel, the base gone), to be
    /// started on the owner's channels instead; Err: the status to report.
    ///
    /// # Safety
    /// `lane` is the calling thread's live lane.
    pub unsafe fn submit_lane(&mut self, lane: *mut sys::hhc_glue_lane, io: &DeviceIo, iovs: &[iovec], tag: IoTag) -> Result<bool, IoStatus> {
        let (role, kind) = (io.device, io.kind);
        let slot = match role {
            DeviceRole::Backing => 0,
            DeviceRole::Cache => 1,
            DeviceRole::Log(_) => return Ok(false),
        };
        let Some(base) = self.bases.get_mut(role_index(role)) else { return Ok(false) };
        if base.removed || base.closed || kind == IoKind::Flush {
            return Ok(false);
        }
        let glue_kind = match kind {
            IoKind::Read => sys::hhc_glue_io_kind::HHC_GLUE_IO_READ,
            _ => sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE,
        };
        // SAFETY: the lane is the caller's; base.glue is open; iovs point
        // into an outstanding request's buffers, valid until this command
        // completes; C copies the iovec array itself.
        let rc = unsafe {
            sys::hhc_glue_lane_submit(lane, slot, base.glue, glue_kind, io.offset_bytes, io.len_bytes, iovs.as_ptr(), iovs.len() as i32, tag.pack())
        };
        match rc {
            0 => {
                base.outstanding += 1;
                Ok(true)
            }
            rc if rc == -libc::EAGAIN => Ok(false),
            rc => {
                log::error!("cannot start {kind:?} on {role} bdev {}: {}", base.name, errno::describe(rc));
                Err(IoStatus::Error)
            }
        }
    }

    /// A base I/O came back with `status` (0 or a negative errno) after
    /// `timing`. A removed base that drains is closed by the owner's next
    /// `close_drained`.
    pub fn done(&mut self, role: DeviceRole, status: i32, timing: Timing) -> IoStatus {
        let base = &mut self.bases[role_index(role)];
        base.outstanding -= 1;
        base.errors += u64::from(status != 0);
        if let Some(kind) = timing.io_kind() {
            base.latency.record(kind, timing.latency_ns);
        }
        let io_status = match (status, base.removed) {
            (0, _) => IoStatus::Ok,
            (_, true) => IoStatus::DeviceLost,
            (_, false) => IoStatus::Error,
        };
        self.close_pending |= base.removed && base.outstanding == 0;
        io_status
    }

    /// On the owner thread, after each pass of its loop: closes the removed
    /// bases that drained, but the backing bdev while `hold_backing`.
    pub fn close_drained(&mut self, hold_backing: bool) {
        if !std::mem::take(&mut self.close_pending) {
            return;
        }
        for (index, base) in self.bases.iter_mut().enumerate().filter(|(_, b)| b.removed && b.outstanding == 0 && !b.closed) {
            if index == 0 && hold_backing {
                self.close_pending = true;
            } else {
                base.close();
            }
        }
    }

    /// The bdev went away: closed as soon as its last I/O is back; the
    /// backing bdev by `close_drained` (a bypass route may name it).
    pub fn removed(&mut self, role: DeviceRole) -> &Base {
        let base = &mut self.bases[role_index(role)];
        base.removed = true;
        if base.outstanding == 0 && role != DeviceRole::Backing {
            base.close();
        }
        self.close_pending |= base.outstanding == 0 && !base.closed;
        base
    }

    /// A log mirror detached by the operator: closed once drained, like a
    /// removed one.
    pub fn detach(&mut self, role: DeviceRole) {
        self.bases[role_index(role)].detached = true;
        self.removed(role);
    }

    /// Whether `role`'s base is closed: its slot may take a new bdev.
    pub fn slot_free(&self, role: DeviceRole) -> bool {
        self.bases[role_index(role)].closed
    }

    /// Puts `base` (opened for `role`) where a closed base was, with the
    /// owner thread's channel; on error it is closed again.
    pub fn replace(&mut self, role: DeviceRole, mut base: Base) -> Result<(), Error> {
        debug_assert!(self.slot_free(role), "replacing an open base");
        if let Err(error) = base.get_channel() {
            base.close();
            return Err(error);
        }
        if !self.pool.is_null() {
            // SAFETY: the pool is live; the base is open and has no I/O yet.
            unsafe { sys::hhc_glue_base_use_pool(base.glue, self.pool) };
        }
        self.bases[role_index(role)] = base;
        Ok(())
    }

    /// Closes every base; C finishes closing one once its last I/O is back
    /// and never calls about it again.
    pub fn close_all(&mut self) {
        self.bases.iter_mut().for_each(Base::close);
        if !self.pool.is_null() {
            // SAFETY: the node's reference, given up once; a base still
            // draining holds its own.
            unsafe { sys::hhc_glue_io_pool_put(self.pool) };
            self.pool = std::ptr::null_mut();
        }
    }
}

/// The facts of a base not (or no longer) opened: filled in by
/// `hhc_glue_base_get_info` once it is.
fn no_base_info() -> sys::hhc_glue_base_info {
    sys::hhc_glue_base_info {
        block_size: 0,
        blocks_count: 0,
        required_alignment_log2: 0,
        supports_flush: false,
        volatile_write_cache: false,
        optimal_io_boundary: 0,
    }
}
