//! Log mirror commands nobody answers. A mirror that leaves a command
//! unanswered for `Config::mirror_timeout_ns` — a peer host that hangs with
//! its connection up, whose NVMe-oF initiator fails nothing — counts as
//! failed, as one whose commands fail does: each of its commands in flight
//! completes at once as failed, so a barrier waits only for the other
//! mirrors. The command itself is still with the device, and its buffer
//! with it: it stays in the table as `Op::Abandoned` (its id not reused)
//! until its completion comes, which is then dropped; whatever it writes
//! lands on a mirror no longer counted, which must be attached again (and
//! re-synced) to count.

use super::{Engine, EngineState, Op};
use crate::io::{IoId, IoStatus, Nanos};
use std::collections::VecDeque;

/// The log mirror commands in flight, oldest first, with when each was
/// issued: the oldest alone tells whether any is overdue.
#[derive(Default)]
pub(super) struct MirrorCommands {
    issued: VecDeque<Issued>,
}

#[derive(Clone, Copy, Debug)]
struct Issued {
    id: IoId,
    mirror: u8,
    at: Nanos,
}

impl MirrorCommands {
    pub fn issued(&mut self, id: IoId, mirror: u8, now: Nanos) {
        self.issued.push_back(Issued { id, mirror, at: now });
    }

    pub fn done(&mut self, id: IoId) {
        if let Some(i) = self.issued.iter().position(|issued| issued.id == id) {
            self.issued.remove(i);
        }
    }

    /// The mirror of the oldest command if it was issued at or before `before`.
    pub fn overdue(&self, before: Nanos) -> Option<u8> {
        self.issued.front().filter(|issued| issued.at <= before).map(|issued| issued.mirror)
    }

    /// Forgets `mirror`'s commands: their ids, oldest first.
    pub fn take_mirror(&mut self, mirror: u8) -> Vec<IoId> {
        let ids = self.issued.iter().filter(|issued| issued.mirror == mirror).map(|issued| issued.id).collect();
        self.issued.retain(|issued| issued.mirror != mirror);
        ids
    }
}

impl Op {
    /// The log mirror a command of the running engine goes to.
    pub(super) fn log_mirror(&self) -> Option<u8> {
        match *self {
            Op::SegmentWrite { mirror, .. }
            | Op::SegmentFlush { mirror, .. }
            | Op::SuperblockWrite { mirror }
            | Op::SuperblockFlush { mirror } => Some(mirror),
            _ => None,
        }
    }
}

impl Engine {
    /// Fails every mirror with a command in flight for longer than the
    /// timeout (0: never), completing its commands as failed.
    pub(super) fn fail_unanswering_mirrors(&mut self) {
        let timeout = self.config.mirror_timeout_ns;
        if timeout == 0 || self.state != EngineState::Ready || self.now < timeout {
            return;
        }
        while let Some((mirror, commands)) = self.commands.abandon_overdue_mirror(self.now - timeout) {
            log::warn!("hhc: log mirror {mirror} left a command unanswered for {} ms; it counts as failed", timeout / 1_000_000);
            for (id, op) in commands {
                self.complete_op(id, op, IoStatus::Error);
            }
        }
    }
}
