//! Plain files as devices, for the offline tools: one file per role,
//! positioned reads and writes, FLUSH = `sync_data`.

use super::{DriverError, SyncDevices};
use crate::io::{DeviceIo, DeviceRole, IoKind, IoMachine, IoStatus};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

#[derive(Default)]
pub struct FileDevices {
    files: HashMap<DeviceRole, File>,
    /// The most recent failure, kept so that a tool can say why a device failed.
    last_error: Option<(DeviceRole, io::Error)>,
}

impl FileDevices {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens `path` for `role`; `writable` also opens it for writing.
    pub fn open(&mut self, role: DeviceRole, path: &Path, writable: bool) -> io::Result<()> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        self.files.insert(role, file);
        Ok(())
    }

    pub fn insert(&mut self, role: DeviceRole, file: File) {
        self.files.insert(role, file);
    }

    /// Size of the device; seeking works for block devices, whose metadata length is 0.
    pub fn len_bytes(&mut self, role: DeviceRole) -> io::Result<u64> {
        let file =
            self.files.get_mut(&role).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such device"))?;
        file.seek(SeekFrom::End(0))
    }

    pub fn last_error(&self) -> Option<&(DeviceRole, io::Error)> {
        self.last_error.as_ref()
    }

    pub fn pump<M: IoMachine + ?Sized>(&mut self, machine: &mut M) -> Result<u64, DriverError> {
        super::pump(self, machine)
    }

    fn carry_out(file: &File, io: &DeviceIo, data: &mut [u8]) -> io::Result<()> {
        match io.kind {
            IoKind::Read => file.read_exact_at(data, io.offset_bytes),
            IoKind::Write => file.write_all_at(data, io.offset_bytes),
            IoKind::Flush => file.sync_data(),
        }
    }
}

impl SyncDevices for FileDevices {
    fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus {
        let Some(file) = self.files.get(&io.device) else {
            return IoStatus::DeviceLost;
        };
        match Self::carry_out(file, io, data) {
            Ok(()) => IoStatus::Ok,
            Err(error) => {
                self.last_error = Some((io.device, error));
                IoStatus::Error
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{IoBuffer, Nanos};

    struct CopyMachine {
        commands: Vec<DeviceIo>,
        statuses: Vec<IoStatus>,
        memory: Vec<u8>,
    }

    impl IoMachine for CopyMachine {
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

    fn command(device: DeviceRole, kind: IoKind, offset_bytes: u64, len_bytes: u64) -> DeviceIo {
        let buffer =
            if kind == IoKind::Flush { IoBuffer::None } else { IoBuffer::Engine { region: 0, offset_bytes: 0 } };
        DeviceIo { id: 0, device, kind, offset_bytes, len_bytes, buffer }
    }

    #[test]
    fn copies_between_files_and_reports_short_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (log, backing) = (dir.path().join("log"), dir.path().join("backing"));
        std::fs::write(&log, [9u8; 8]).unwrap();
        std::fs::write(&backing, [0u8; 8]).unwrap();
        let mut devices = FileDevices::new();
        devices.open(DeviceRole::Log(0), &log, false).unwrap();
        devices.open(DeviceRole::Backing, &backing, true).unwrap();
        let mut machine = CopyMachine {
            commands: vec![
                command(DeviceRole::Log(0), IoKind::Read, 4, 4),
                command(DeviceRole::Backing, IoKind::Write, 2, 4),
                command(DeviceRole::Backing, IoKind::Flush, 0, 0),
                command(DeviceRole::Log(0), IoKind::Read, 6, 4),
                command(DeviceRole::Log(0), IoKind::Write, 0, 4),
                command(DeviceRole::Cache, IoKind::Read, 0, 4),
            ],
            statuses: Vec::new(),
            memory: vec![0; 4],
        };
        assert_eq!(devices.pump(&mut machine), Ok(6));
        assert_eq!(
            machine.statuses,
            vec![IoStatus::Ok, IoStatus::Ok, IoStatus::Ok, IoStatus::Error, IoStatus::Error, IoStatus::DeviceLost]
        );
        assert_eq!(std::fs::read(&backing).unwrap(), [0, 0, 9, 9, 9, 9, 0, 0]);
        assert_eq!(devices.len_bytes(DeviceRole::Backing).unwrap(), 8);
        assert!(devices.last_error().is_some());
    }
}
