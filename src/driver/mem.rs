//! In-memory devices: one byte vector per role, synchronous completion, a
//! per-role failure switch and a history of every command, for tests.

use super::{DriverError, SyncDevices};
use crate::io::{DeviceIo, DeviceRole, IoKind, IoMachine, IoStatus};
use std::collections::{HashMap, HashSet};

/// One executed command, as the device saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRecord {
    pub device: DeviceRole,
    pub kind: IoKind,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub status: IoStatus,
}

#[derive(Default)]
pub struct MemDevices {
    devices: HashMap<DeviceRole, Vec<u8>>,
    failing: HashSet<DeviceRole>,
    history: Vec<IoRecord>,
}

impl MemDevices {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a device holding `contents`; its size is fixed from now on.
    pub fn insert(&mut self, role: DeviceRole, contents: Vec<u8>) {
        self.devices.insert(role, contents);
    }

    pub fn device(&self, role: DeviceRole) -> Option<&[u8]> {
        self.devices.get(&role).map(Vec::as_slice)
    }

    pub fn device_mut(&mut self, role: DeviceRole) -> Option<&mut Vec<u8>> {
        self.devices.get_mut(&role)
    }

    /// While set, every command to `role` completes with `IoStatus::Error`.
    pub fn set_failing(&mut self, role: DeviceRole, failing: bool) {
        if failing {
            self.failing.insert(role);
        } else {
            self.failing.remove(&role);
        }
    }

    pub fn history(&self) -> &[IoRecord] {
        &self.history
    }

    pub fn pump<M: IoMachine + ?Sized>(&mut self, machine: &mut M) -> Result<u64, DriverError> {
        super::pump(self, machine)
    }

    fn carry_out(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
        if self.failing.contains(&io.device) {
            return IoStatus::Error;
        }
        let Some(device) = self.devices.get_mut(&io.device) else {
            return IoStatus::DeviceLost;
        };
        let start = io.offset_bytes as usize;
        let Some(range) = start.checked_add(data.len()).filter(|&end| end <= device.len()).map(|end| start..end) else {
            return IoStatus::Error;
        };
        match io.kind {
            IoKind::Read => data.copy_from_slice(&device[range]),
            IoKind::Write => device[range].copy_from_slice(data),
            IoKind::Flush => {}
        }
        IoStatus::Ok
    }
}

impl SyncDevices for MemDevices {
    fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
        let status = self.carry_out(io, data);
        self.history.push(IoRecord {
            device: io.device,
            kind: io.kind,
            offset_bytes: io.offset_bytes,
            len_bytes: io.len_bytes,
            status,
        });
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoBuffer;
    use crate::io::Nanos;

    /// Issues a fixed list of commands on region 0 and records the statuses.
    struct Script {
        commands: Vec<DeviceIo>,
        statuses: Vec<IoStatus>,
        memory: Vec<u8>,
    }

    impl IoMachine for Script {
        fn poll_io(&mut self) -> Option<DeviceIo> {
            (!self.commands.is_empty()).then(|| self.commands.remove(0))
        }
        fn handle_io_completion(&mut self, _now: Nanos, _id: u64, status: IoStatus) {
            self.statuses.push(status);
        }
        fn io_memory_mut(&mut self, _region: u32) -> &mut [u8] {
            &mut self.memory
        }
    }

    fn io(device: DeviceRole, kind: IoKind, offset_bytes: u64, len_bytes: u64, buffer_offset: u32) -> DeviceIo {
        let buffer = IoBuffer::Engine { region: 0, offset_bytes: buffer_offset };
        DeviceIo { id: 0, device, kind, offset_bytes, len_bytes, buffer }
    }

    #[test]
    fn reads_writes_and_failures() {
        let mut devices = MemDevices::new();
        devices.insert(DeviceRole::Backing, vec![0; 16]);
        devices.insert(DeviceRole::Log(0), vec![7; 16]);
        devices.set_failing(DeviceRole::Log(0), true);
        let mut script = Script {
            commands: vec![
                io(DeviceRole::Backing, IoKind::Write, 4, 4, 0),
                io(DeviceRole::Backing, IoKind::Read, 6, 4, 4),
                io(DeviceRole::Backing, IoKind::Write, 14, 4, 0),
                io(DeviceRole::Log(0), IoKind::Read, 0, 4, 0),
                io(DeviceRole::Cache, IoKind::Read, 0, 4, 0),
            ],
            statuses: Vec::new(),
            memory: vec![1, 2, 3, 4, 0, 0, 0, 0],
        };
        assert_eq!(devices.pump(&mut script), Ok(5));
        assert_eq!(
            script.statuses,
            vec![IoStatus::Ok, IoStatus::Ok, IoStatus::Error, IoStatus::Error, IoStatus::DeviceLost]
        );
        assert_eq!(devices.device(DeviceRole::Backing).unwrap()[4..8], [1, 2, 3, 4]);
        assert_eq!(script.memory[4..], [3, 4, 0, 0]);
        assert_eq!(devices.history().len(), 5);
    }

    #[test]
    fn request_buffers_and_bad_ranges_are_driver_errors() {
        let mut devices = MemDevices::new();
        devices.insert(DeviceRole::Backing, vec![0; 16]);
        let request = DeviceIo {
            buffer: IoBuffer::Request { request: 1, offset_bytes: 0 },
            ..io(DeviceRole::Backing, IoKind::Write, 0, 4, 0)
        };
        let out_of_range = io(DeviceRole::Backing, IoKind::Write, 0, 4, 6);
        for command in [request, out_of_range] {
            let mut script = Script { commands: vec![command], statuses: Vec::new(), memory: vec![0; 8] };
            assert!(devices.pump(&mut script).is_err());
            assert!(script.statuses.is_empty());
        }
    }
}
