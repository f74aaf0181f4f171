//! Drivers that carry out the device commands of an `IoMachine` synchronously:
//! plain files for the offline tools (`file`), memory for tests (`mem`).
//! Each completes a command before the machine emits the next one, so the
//! pump is a plain loop; SPDK and the simulators have drivers of their own.

pub mod file;
pub mod mem;

use crate::io::{DeviceIo, IoBuffer, IoMachine, IoStatus, Nanos};
use std::fmt;

/// A set of devices that executes one command at a time.
pub trait SyncDevices {
    /// Carries out `io` on `data` (the resolved buffer, empty for a flush).
    fn execute(&mut self, io: &DeviceIo, data: &mut [u8]) -> IoStatus;
}

/// A command this driver cannot carry out; a bug in the machine or a
/// machine used with the wrong driver, never a device failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverError {
    /// Request buffers belong to bdev requests, which these drivers never see.
    UnsupportedBuffer(DeviceIo),
    /// The engine buffer does not hold `len_bytes` at `offset_bytes`.
    BufferOutOfRange(DeviceIo),
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::UnsupportedBuffer(io) => write!(f, "unsupported buffer in device command {io:?}"),
            DriverError::BufferOutOfRange(io) => write!(f, "buffer out of range in device command {io:?}"),
        }
    }
}

impl std::error::Error for DriverError {}

/// Executes the next command `machine` emits and hands back its completion.
/// Returns `Ok(false)` when the machine has nothing to issue, which for a
/// synchronously driven machine means it is finished.
pub fn step<M: IoMachine + ?Sized>(
    devices: &mut dyn SyncDevices,
    machine: &mut M,
    now: Nanos,
) -> Result<bool, DriverError> {
    let Some(io) = machine.poll_io() else {
        return Ok(false);
    };
    let status = devices.execute(&io, resolve_buffer(machine, &io)?);
    machine.handle_io_completion(now, io.id, status);
    Ok(true)
}

/// Runs `machine` until it issues nothing more; returns the commands executed.
/// Machines pumped this way do not use time, so every completion carries 0.
pub fn pump<M: IoMachine + ?Sized>(devices: &mut dyn SyncDevices, machine: &mut M) -> Result<u64, DriverError> {
    let mut commands_count = 0;
    while step(devices, machine, 0)? {
        commands_count += 1;
    }
    Ok(commands_count)
}

fn resolve_buffer<'m, M: IoMachine + ?Sized>(machine: &'m mut M, io: &DeviceIo) -> Result<&'m mut [u8], DriverError> {
    match io.buffer {
        IoBuffer::None if io.len_bytes == 0 => Ok(&mut []),
        IoBuffer::None | IoBuffer::Request { .. } => Err(DriverError::UnsupportedBuffer(*io)),
        IoBuffer::Engine { region, offset_bytes } => {
            let start = offset_bytes as usize;
            let end = usize::try_from(io.len_bytes).ok().and_then(|len| start.checked_add(len));
            let memory = machine.io_memory_mut(region);
            end.and_then(|end| memory.get_mut(start..end)).ok_or(DriverError::BufferOutOfRange(*io))
        }
    }
}
pub mod harness;
