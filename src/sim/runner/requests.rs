//! The requests of one seed: the workload's requesters woken in virtual
//! time, the periodic flush, each request submitted to the target with the
//! oracle told, and each completion checked (a read against the oracle, an
//! error against the faults that explain it).

use super::{Event, Origin, Outstanding, Sim, READ_POISON};
use super::memory::contract;
use crate::io::{Machine, Request, RequestCompletion, RequestError, RequestKind};
use crate::sim::oracle::Violation;
use crate::sim::pattern::{decode_block, fill_block};
use crate::sim::workload::Op;
use crate::simcore::TargetFactory;

impl<F: TargetFactory> Sim<'_, F> {
    pub(super) fn resume_workload(&mut self) {
        self.recovering = false;
        for requester in 0..self.workload.requesters_count() {
            self.wake_later(requester);
        }
        if let Some(period) = self.plan.workload.periodic_flush_ns {
            if !self.events.iter().any(|e| *e == Event::PeriodicFlush) {
                self.push_event(self.now + period, Event::PeriodicFlush);
            }
        }
        for fault in std::mem::take(&mut self.deferred_faults) {
            let at = self.now + self.prng.between(0, 1_000_000);
            self.push_event(at, Event::Fault(fault));
        }
    }

    pub(super) fn wake_later(&mut self, requester: usize) {
        if !self.wake_pending[requester] {
            self.wake_pending[requester] = true;
            let at = self.now + self.workload.think_ns();
            self.push_event(at, Event::Wake(requester));
        }
    }

    pub(super) fn wake(&mut self, requester: usize) -> Result<(), Violation> {
        self.wake_pending[requester] = false;
        if self.recovering || self.ended || self.ops_submitted >= self.spec.ops || !self.workload.has_room(requester) {
            return Ok(());
        }
        let op = self.workload.next_op();
        self.workload.started(requester);
        self.submit(op, Origin::Requester(requester));
        self.wake_later(requester);
        Ok(())
    }

    pub(super) fn periodic_flush(&mut self) -> Result<(), Violation> {
        if self.recovering || self.ended || self.ops_submitted >= self.spec.ops {
            return Ok(());
        }
        self.submit(Op::Flush, Origin::PeriodicFlush);
        let period = self.plan.workload.periodic_flush_ns.expect("periodic flush without a period");
        self.push_event(self.now + period, Event::PeriodicFlush);
        Ok(())
    }

    pub(super) fn submit(&mut self, op: Op, origin: Origin) {
        let id = self.next_request;
        self.next_request += 1;
        let block_bytes = self.plan.config.block_size as usize;
        let (request, data, write, read_tick) = match op {
            Op::Write { lba, blocks_count } => {
                let write = self.oracle.submit_write(lba, blocks_count);
                let mut data = vec![0u8; blocks_count as usize * block_bytes];
                for (i, block) in data.chunks_exact_mut(block_bytes).enumerate() {
                    fill_block(lba + i as u64, write, block);
                }
                (Request { id, kind: RequestKind::Write, lba, blocks_count }, data, Some(write), 0)
            }
            Op::Read { lba, blocks_count } => {
                let tick = self.oracle.submit_read();
                let data = vec![READ_POISON; blocks_count as usize * block_bytes];
                (Request { id, kind: RequestKind::Read, lba, blocks_count }, data, None, tick)
            }
            Op::Flush => {
                self.oracle.submit_flush(id);
                (Request { id, kind: RequestKind::Flush, lba: 0, blocks_count: 0 }, Vec::new(), None, 0)
            }
        };
        let now = self.now;
        let payload: Option<&dyn crate::io::RequestData> = if write.is_some() { Some(&data) } else { None };
        self.target.as_mut().expect("request without a target").handle_request(now, request, payload);
        self.trace(|| format!("submit {request:?} write {write:?}"));
        self.requests.insert(id, Outstanding { request, submitted_at: now, data, origin, write, read_tick });
        if origin != Origin::Verifier {
            self.count_submitted();
        }
    }

    fn count_submitted(&mut self) {
        self.ops_submitted += 1;
        self.figures.requests += 1;
        while let Some(planned) = self.plan.faults.get(self.next_fault).filter(|f| f.at_op <= self.ops_submitted) {
            let (at, fault) = (self.now + planned.delay_ns, planned.fault);
            self.next_fault += 1;
            self.push_event(at, Event::Fault(fault));
        }
    }

    pub(super) fn on_completion(&mut self, completion: RequestCompletion) -> Result<(), Violation> {
        let Some(out) = self.requests.remove(&completion.id) else {
            return Err(contract(format!("completion of request {}, which is not outstanding", completion.id), self.now));
        };
        self.finished.insert(completion.id, (out.request.kind, self.now));
        self.trace(|| format!("complete {:?} {:?} {:?}", out.request, out.write, completion.result));
        if let Err(error) = completion.result {
            self.check_error_is_explained(&out, error)?;
        }
        let ok = completion.result.is_ok();
        match out.request.kind {
            RequestKind::Write => self.oracle.complete_write(out.write.unwrap(), ok),
            RequestKind::Flush => {
                self.oracle.complete_flush(completion.id, ok);
                self.figures.flushes += ok as u64;
            }
            RequestKind::Read => {
                if ok && out.origin != Origin::Verifier {
                    self.check_read(&out)?;
                }
                self.oracle.end_read(out.read_tick);
            }
        }
        match out.origin {
            Origin::Requester(r) => {
                self.workload.finished(r);
                self.wake_later(r);
            }
            Origin::PeriodicFlush => {}
            Origin::Verifier => self.verified_read_done(out, ok)?,
        }
        Ok(())
    }

    /// Invariant 5 from the other side: an engine that fails requests for no
    /// reason would make every durability check vacuous.
    fn check_error_is_explained(&mut self, out: &Outstanding, error: RequestError) -> Result<(), Violation> {
        self.figures.request_errors += 1;
        if self.devices.any_failure() && error != RequestError::OutOfRange {
            return Ok(());
        }
        let found = format!("{:?} request {} failed with {error:?} though no device failed", out.request.kind, out.request.id);
        Err(self.violation("5 (errors)", Some(out.request.lba), "success", &found, "request completion"))
    }

    fn check_read(&mut self, out: &Outstanding) -> Result<(), Violation> {
        let block_bytes = self.plan.config.block_size as usize;
        for (i, block) in out.data.chunks_exact(block_bytes).enumerate() {
            let lba = out.request.lba + i as u64;
            let found = decode_block(lba, block);
            self.oracle.check_read(lba, found, out.read_tick).map_err(|mut v| {
                v.context = format!("{}, at {} ns", v.context, self.now);
                v
            })?;
        }
        self.figures.blocks_checked += out.request.blocks_count as u64;
        Ok(())
    }
}
