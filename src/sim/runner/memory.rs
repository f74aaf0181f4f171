//! Where the bytes of a simulated device command come from (a request
//! buffer or machine memory), and how a command is carried out on the
//! simulated devices.

use super::{Devices, Outstanding};
use crate::sim::oracle::Violation;
use crate::simcore::CacheLossRecovery;
use crate::io::{DeviceIo, IoBuffer, IoKind, IoMachine, IoStatus, Nanos, RequestId, RequestKind};
use std::collections::BTreeMap;

/// Device I/O of whoever is being pumped: the target or a recovery machine.
pub(super) trait Memory {
    /// The bytes of `buffer` for a command of `len_bytes`, or why the
    /// command may not use them.
    fn bytes(&mut self, buffer: IoBuffer, len_bytes: u64, device_reads_into_it: bool) -> Result<&mut [u8], String>;
}

pub(super) struct TargetMemory<'a> {
    pub(super) target: &'a mut dyn IoMachine,
    pub(super) requests: &'a mut BTreeMap<RequestId, Outstanding>,
    /// Requests already completed: kind and completion time (for diagnostics).
    pub(super) finished: &'a BTreeMap<RequestId, (RequestKind, Nanos)>,
}

fn slice_at<'m>(memory: &'m mut [u8], offset_bytes: u64, len_bytes: u64, what: &str) -> Result<&'m mut [u8], String> {
    let end = offset_bytes.checked_add(len_bytes).filter(|end| *end <= memory.len() as u64);
    match end {
        Some(end) => Ok(&mut memory[offset_bytes as usize..end as usize]),
        None => Err(format!("{what}: bytes {offset_bytes}+{len_bytes} outside its {} bytes", memory.len())),
    }
}

impl Memory for TargetMemory<'_> {
    fn bytes(&mut self, buffer: IoBuffer, len_bytes: u64, device_reads_into_it: bool) -> Result<&mut [u8], String> {
        match buffer {
            IoBuffer::None => Err("data command without a buffer".into()),
            IoBuffer::Request { request, offset_bytes } => {
                let Some(out) = self.requests.get_mut(&request) else {
                    let when = match self.finished.get(&request) {
                        Some((kind, at)) => format!("{kind:?} request completed at {at} ns"),
                        None => "never submitted".to_string(),
                    };
                    return Err(format!("command uses the buffer of request {request}, which is not outstanding ({when})"));
                };
                if device_reads_into_it && out.request.kind != RequestKind::Read {
                    return Err(format!("device read into the data buffer of {:?} request {request}", out.request.kind));
                }
                slice_at(&mut out.data, offset_bytes, len_bytes, &format!("request {request} buffer"))
            }
            IoBuffer::Engine { region, offset_bytes } => {
                slice_at(self.target.io_memory_mut(region), offset_bytes as u64, len_bytes, &format!("engine region {region}"))
            }
        }
    }
}

pub(super) struct RecoveryMemory<'a>(pub(super) &'a mut dyn CacheLossRecovery);

impl Memory for RecoveryMemory<'_> {
    fn bytes(&mut self, buffer: IoBuffer, len_bytes: u64, _device_reads_into_it: bool) -> Result<&mut [u8], String> {
        match buffer {
            IoBuffer::Engine { region, offset_bytes } => {
                slice_at(self.0.io_memory_mut(region), offset_bytes as u64, len_bytes, &format!("recovery region {region}"))
            }
            other => Err(format!("recovery command with buffer {other:?}")),
        }
    }
}

pub(super) fn contract(message: String, now: Nanos) -> Violation {
    Violation {
        invariant: "contract (sans-IO boundary)",
        lba: None,
        expected: "a well-formed command or completion".into(),
        found: message,
        context: format!("at {now} ns"),
    }
}

pub(super) fn describe_io(io: &DeviceIo) -> String {
    format!("{:?} of {} bytes at byte {} of {}, I/O {}", io.kind, io.len_bytes, io.offset_bytes, io.device, io.id)
}

/// Carries out one device command at its completion time.
pub(super) fn perform(devices: &mut Devices, io: &DeviceIo, memory: &mut dyn Memory) -> Result<IoStatus, String> {
    let device = devices.get(io.device).ok_or_else(|| format!("command for absent device {}", io.device))?;
    if device.is_dead() {
        // A dead device moves no data, so the buffer may already be gone.
        return Ok(IoStatus::DeviceLost);
    }
    match io.kind {
        IoKind::Flush => Ok(device.complete_flush(io.id)),
        IoKind::Write => {
            let data = memory.bytes(io.buffer, io.len_bytes, false)?;
            Ok(device.complete_write(io.offset_bytes, data))
        }
        IoKind::Read => {
            let mut data = vec![0u8; io.len_bytes as usize];
            let status = device.complete_read(io.offset_bytes, &mut data);
            if status == IoStatus::Ok {
                memory.bytes(io.buffer, io.len_bytes, true)?.copy_from_slice(&data);
            }
            Ok(status)
        }
    }
}
