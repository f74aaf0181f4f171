//! The cache device's owner record (format/owner_record.rs): written at
//! format (both copies), found again at a warm start, and rewritten when
//! its owner asks (`Engine::set_owner_record`) — the SPDK module when a log
//! mirror is attached or detached, so that examine assembles the bdev with
//! the devices it has now. A rewrite goes to the copy that does not hold
//! the newest valid record, then the cache device is flushed: a crash
//! anywhere in between leaves the previous record or the new one. One
//! write at a time; a record asked for meanwhile waits and the newest wins.

use super::{ControlError, Engine, EngineState, Op};
use crate::format::{OwnerRecord, CACHE_OWNER_RECORD_UNIT, OWNER_BYTES_MAX, UNIT_BYTES};
use crate::io::{DeviceRole, IoBuffer, IoKind, IoStatus, Nanos};

#[derive(Clone, Debug, Default)]
pub(super) struct OwnerRecords {
    /// The newest record asked for (what `Engine::owner_record` answers).
    wanted: Vec<u8>,
    /// The newest record known valid on the device: its bytes, write_seq
    /// and copy. None: no valid copy of this instance (a start-up that
    /// found none, or a format whose writes are not done).
    durable: Option<(Vec<u8>, u64, usize)>,
    /// The rewrite in flight: its bytes, write_seq, copy, and whether its
    /// write is done (the flush is then in flight).
    in_flight: Option<(Vec<u8>, u64, usize, bool)>,
    /// A record whose write failed: not tried again until it is asked for
    /// again (or another one is).
    failed: Option<Vec<u8>>,
    /// `settled()` and whether a write is due, computed when the fields
    /// above change (`refresh`): the engine asks after every input, and a
    /// `memcmp` call there took half of `hhc bench`'s time.
    settled: bool,
    due: bool,
}

impl OwnerRecords {
    /// No record asked for and none on the device.
    pub fn empty() -> OwnerRecords {
        OwnerRecords::default().refreshed()
    }

    /// After a format that wrote `record` as write_seq 1 in copy 0 and 0 in
    /// copy 1 (once the format's writes are durable, which the engine is
    /// not `Ready` before).
    pub fn formatted(record: Vec<u8>) -> OwnerRecords {
        OwnerRecords { wanted: record.clone(), durable: Some((record, 1, 0)), ..OwnerRecords::default() }.refreshed()
    }

    /// After a warm start read both copies (`units`, the two units in order).
    pub fn found(units: &[u8], instance_id: u64) -> OwnerRecords {
        match OwnerRecord::newest(units, instance_id) {
            Some((copy, record)) => OwnerRecords {
                wanted: record.owner.clone(),
                durable: Some((record.owner, record.write_seq, copy)),
                ..OwnerRecords::default()
            }
            .refreshed(),
            None => OwnerRecords::empty(),
        }
    }

    fn refreshed(mut self) -> OwnerRecords {
        self.refresh();
        self
    }

    /// Recomputes `settled` and `due`; called after every change.
    fn refresh(&mut self) {
        self.settled =
            self.in_flight.is_none() && self.durable.as_ref().is_some_and(|(bytes, _, _)| *bytes == self.wanted);
        self.due = self.in_flight.is_none() && self.failed.as_ref() != Some(&self.wanted) && !self.settled;
    }

    /// Every record asked for is written and flushed.
    fn settled(&self) -> bool {
        self.settled
    }
}

impl Engine {
    /// The owner record: the newest one asked for (`set_owner_record`), or
    /// the one the format wrote or the warm start found (empty if none).
    pub fn owner_record(&self) -> &[u8] {
        &self.owner_records.wanted
    }

    /// Whether every owner record asked for is durable on the cache device.
    pub fn owner_record_durable(&self) -> bool {
        self.owner_records.settled()
    }

    /// Replaces the owner record on the cache device: answers at once, the
    /// write follows (and waits for one in flight); the same record again
    /// changes nothing, unless its write failed (then it is tried again).
    pub fn set_owner_record(&mut self, now: Nanos, record: Vec<u8>) -> Result<(), ControlError> {
        self.now = now;
        if *self.state() != EngineState::Ready {
            return Err(ControlError::NotReady);
        }
        if record.len() > OWNER_BYTES_MAX {
            return Err(ControlError::OwnerRecordTooLong { len: record.len() });
        }
        self.owner_records.failed = None;
        self.owner_records.wanted = record;
        self.owner_records.refresh();
        self.run_background();
        Ok(())
    }

    /// Starts the write of the newest record asked for, if it is not on the
    /// device yet and nothing else is being written.
    pub(super) fn progress_owner_record(&mut self) {
        let records = &self.owner_records;
        if !records.due {
            return;
        }
        let (write_seq, copy) = match &records.durable {
            Some((_, seq, copy)) => (seq + 1, 1 - copy),
            None => (1, 0),
        };
        let record = OwnerRecord { instance_id: self.config.instance_id, write_seq, owner: records.wanted.clone() };
        let region = self.regions.owner;
        record.encode(&mut self.region(region)[..UNIT_BYTES]);
        self.owner_records.in_flight = Some((record.owner, write_seq, copy, false));
        self.owner_records.refresh();
        let offset = CACHE_OWNER_RECORD_UNIT[copy] * UNIT_BYTES as u64;
        let buffer = IoBuffer::Engine { region, offset_bytes: 0 };
        self.submit(Op::OwnerRecordWrite, DeviceRole::Cache, IoKind::Write, offset, UNIT_BYTES as u64, buffer);
    }

    pub(super) fn owner_record_write_done(&mut self, status: IoStatus) {
        let Some(in_flight) = self.owner_records.in_flight.as_mut() else { return };
        if status != IoStatus::Ok {
            return self.owner_record_failed(status);
        }
        in_flight.3 = true;
        self.submit(Op::OwnerRecordFlush, DeviceRole::Cache, IoKind::Flush, 0, 0, IoBuffer::None);
    }

    pub(super) fn owner_record_flush_done(&mut self, status: IoStatus) {
        if status != IoStatus::Ok {
            return self.owner_record_failed(status);
        }
        let Some((bytes, write_seq, copy, _)) = self.owner_records.in_flight.take() else { return };
        log::info!("hhc: owner record written (copy {copy}, write_seq {write_seq}, {} bytes)", bytes.len());
        self.owner_records.durable = Some((bytes, write_seq, copy));
        self.owner_records.refresh();
    }

    /// The copy written may be torn: the next write goes to the same copy,
    /// and the other, which holds the newest valid record, stays as it is.
    fn owner_record_failed(&mut self, status: IoStatus) {
        log::warn!("hhc: writing the owner record to the cache device failed ({status:?}); the previous one stays");
        self.owner_records.failed = self.owner_records.in_flight.take().map(|(bytes, ..)| bytes);
        self.owner_records.refresh();
    }
}
