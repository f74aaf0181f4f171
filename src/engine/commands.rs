//! The engine's device commands: those in flight, each with the `Op` its
//! completion continues, those waiting for the driver to take them, and
//! how long each log mirror has left one unanswered (mirror_timeout.rs).
//! Every room puts its commands here.

use super::mirror_timeout::MirrorCommands;
use super::Op;
use crate::io::{DeviceIo, IoId, Nanos};
use crate::queue::Rewind;
use crate::slab::Slab;
use std::collections::VecDeque;

pub(super) struct DeviceCommands {
    in_flight: Slab<Op>,
    /// Commands in flight at most (`Engine::new`): what the table and the
    /// output queue are sized for.
    capacity: usize,
    out: VecDeque<DeviceIo>,
    mirrors: MirrorCommands,
}

impl DeviceCommands {
    pub fn with_capacity(capacity: usize) -> Self {
        DeviceCommands {
            in_flight: Slab::with_capacity(capacity),
            capacity,
            out: VecDeque::with_capacity(capacity),
            mirrors: MirrorCommands::default(),
        }
    }

    /// Starts `io` (its id is given here), whose completion continues
    /// `op`; `timed`: the log mirror whose answer is timed, and now.
    pub fn submit(&mut self, op: Op, io: DeviceIo, timed: Option<(u8, Nanos)>) -> IoId {
        debug_assert!(
            self.in_flight.len() < self.capacity,
            "{} device commands in flight: more than the engine was sized for",
            self.in_flight.len()
        );
        let id = self.in_flight.insert(op) as IoId;
        if let Some((mirror, now)) = timed {
            self.mirrors.issued(id, mirror, now);
        }
        self.out.push_back(DeviceIo { id, ..io });
        id
    }

    /// Command `id` completed: the `Op` it continues, or None for one
    /// abandoned when its mirror timed out.
    pub fn complete(&mut self, id: IoId) -> Option<Op> {
        let op = self.in_flight.remove(id as u32).unwrap_or_else(|| panic!("completion for unknown I/O {id}"));
        if matches!(op, Op::Abandoned) {
            return None;
        }
        if op.log_mirror().is_some() {
            self.mirrors.done(id);
        }
        Some(op)
    }

    /// The first log mirror with a command issued at or before `before`,
    /// and its commands in flight, each left in the table as abandoned:
    /// the device still has it, and its buffer.
    pub fn abandon_overdue_mirror(&mut self, before: Nanos) -> Option<(u8, Vec<(IoId, Op)>)> {
        let mirror = self.mirrors.overdue(before)?;
        let ids = self.mirrors.take_mirror(mirror);
        let commands = ids
            .into_iter()
            .map(|id| (id, std::mem::replace(self.in_flight.get_mut(id as u32).expect("a mirror command in flight"), Op::Abandoned)))
            .collect();
        Some((mirror, commands))
    }

    pub fn get(&self, id: IoId) -> Option<&Op> {
        self.in_flight.get(u32::try_from(id).ok()?)
    }

    pub fn in_flight(&self) -> impl Iterator<Item = &Op> {
        self.in_flight.keys().filter_map(|key| self.in_flight.get(key))
    }

    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// The next command for the driver.
    pub fn next_out(&mut self) -> Option<DeviceIo> {
        self.out.pop_front_rewound()
    }
}
