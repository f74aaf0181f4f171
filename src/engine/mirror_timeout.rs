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
use crate::io::{DeviceRole, IoId, IoStatus, Nanos};

/// The log mirror commands in flight, with when each was issued.
#[derive(Default)]
pub(super) struct MirrorCommands {
    issued: Vec<(IoId, u8, Nanos)>,
}

impl MirrorCommands {
    pub fn issued(&mut self, id: IoId, device: DeviceRole, now: Nanos) {
        if let DeviceRole::Log(mirror) = device {
            self.issued.push((id, mirror, now));
        }
    }

    pub fn done(&mut self, id: IoId) {
        if let Some(i) = self.issued.iter().position(|&(issued, _, _)| issued == id) {
            self.issued.swap_remove(i);
        }
    }

    /// A mirror with a command issued at or before `before`, if any.
    fn overdue(&self, before: Nanos) -> Option<u8> {
        self.issued.iter().find(|&&(_, _, at)| at <= before).map(|&(_, mirror, _)| mirror)
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
        while let Some(mirror) = self.mirror_commands.overdue(self.now - timeout) {
            log::warn!("hhc: log mirror {mirror} left a command unanswered for {} ms; it counts as failed", timeout / 1_000_000);
            let ids: Vec<IoId> =
                self.mirror_commands.issued.iter().filter(|&&(_, m, _)| m == mirror).map(|&(id, _, _)| id).collect();
            for id in ids {
                self.mirror_commands.done(id);
                let op = std::mem::replace(self.ops.get_mut(id as u32).expect("a mirror command in flight"), Op::Abandoned);
                self.complete_op(id, op, IoStatus::Error);
            }
        }
    }
}
