//! The engine's device commands: where each goes out (the lane of the
//! thread inside the node for the buffers of its own requests, else the
//! owner's channels, queued for the owner when another thread is inside)
//! and what comes back, with the request buffers they borrow.

use super::base::Timing;
use super::io_tag::{EngineTag, IoTag};
use super::iov::region_iovec;
use super::node::Core;
use super::request::LaneDone;
use crate::io::{DeviceIo, DeviceRole, IoBuffer, IoId, IoStatus};

impl Core {
    /// Starts a device command: on the lane of the thread inside when it
    /// uses the buffer of a request of that thread, else on the owner's
    /// channels, queued for the owner if the thread inside is not it.
    pub(super) fn submit_engine_io(&mut self, io: DeviceIo) {
        if !self.on_owner {
            if self.submit_on_lane(&io) {
                return;
            }
            self.node().shared.push_for_owner(io);
            return;
        }
        self.iov_scratch.clear();
        let mut scratch = std::mem::take(&mut self.iov_scratch);
        let lender = match io.buffer {
            IoBuffer::None => None,
            IoBuffer::Engine { region, offset_bytes } => {
                let memory = self.engine.as_mut().expect("engine").io_memory_mut(region);
                scratch.push(region_iovec(memory, offset_bytes as u64, io.len_bytes));
                None
            }
            IoBuffer::Request { request, offset_bytes } => {
                let key = request as u32;
                let complete = self.requests.lend(key, offset_bytes, io.len_bytes, &mut scratch);
                assert!(complete, "{io:?} reaches past its request's buffer");
                Some(key)
            }
        };
        let tag = IoTag::engine(io.id, lender, None);
        self.engine_ios += 1;
        if let Err(status) = self.bases.submit(io.device, io.kind, io.offset_bytes, io.len_bytes, &scratch, tag) {
            self.engine_ios -= 1;
            self.release_lender(lender);
            self.immediate.push_back((io.id, status));
        }
        self.iov_scratch = scratch;
    }

    /// The lane path of `submit_engine_io`: true when the command was
    /// started there or completed at once.
    fn submit_on_lane(&mut self, io: &DeviceIo) -> bool {
        let IoBuffer::Request { request, offset_bytes } = io.buffer else { return false };
        let key = request as u32;
        let channel = self.requests.channel_of(key);
        let lane = channel.lane;
        if lane.is_null() || channel.thread != self.requests.current || !matches!(io.device, DeviceRole::Backing | DeviceRole::Cache) {
            return false;
        }
        self.iov_scratch.clear();
        let mut scratch = std::mem::take(&mut self.iov_scratch);
        let complete = self.requests.lend(key, offset_bytes, io.len_bytes, &mut scratch);
        assert!(complete, "{io:?} reaches past its request's buffer");
        let tag = IoTag::engine(io.id, Some(key), Some(io.device));
        // SAFETY: the lane is the calling thread's (its channel's thread is current).
        let started = unsafe { self.bases.submit_lane(lane, io, &scratch, tag) };
        self.iov_scratch = scratch;
        match started {
            Ok(true) => {
                self.engine_ios += 1;
                true
            }
            Ok(false) => {
                self.requests.release(key);
                false
            }
            Err(status) => {
                self.requests.release(key);
                self.immediate.push_back((io.id, status));
                true
            }
        }
    }

    /// A lane command came back (on its thread, or queued from there):
    /// an engine command like any other, its base named by its tag.
    pub(super) fn lane_io_done(&mut self, done: LaneDone) {
        let IoTag::Engine(EngineTag { lane: Some(role), .. }) = done.tag else {
            panic!("lane completion tagged {:?}", done.tag);
        };
        self.device_io_done(role, done.tag, done.status, done.timing);
    }

    fn release_lender(&mut self, lender: Option<u32>) {
        if let Some(key) = lender {
            self.requests.release(key);
        }
    }

    pub(super) fn device_io_done(&mut self, role: DeviceRole, tag: IoTag, status: i32, timing: Timing) {
        let io_status = self.bases.done(role, status, timing);
        match tag {
            IoTag::Probe => self.probe_done(io_status),
            IoTag::Recovery(id) => {
                if let Some(recovery) = self.recovery.as_mut() {
                    recovery.io_done(id, io_status);
                }
            }
            IoTag::Engine(EngineTag { id, lender, .. }) => {
                self.engine_ios -= 1;
                self.release_lender(lender);
                self.engine_io_done(IoId::from(id), io_status);
            }
        }
    }

    pub(super) fn engine_io_done(&mut self, id: IoId, status: IoStatus) {
        if let Some(direct) = self.direct.as_mut() {
            return direct.handle_io_completion(id, status);
        }
        let Some(engine) = self.engine.as_mut() else { return };
        // A failed engine keeps its commands: each completion ends the share
        // of the request it served, which then fails (`Engine::drain_failed`).
        engine.handle_io_completion(self.now, id, status);
    }
}
