//! Errors at the FFI boundary and the code each becomes: a negative errno
//! (or JSON-RPC "invalid params") for an RPC answer, a negative errno for a
//! bdev I/O completion. This is the one place that picks those numbers.

use crate::config::{ConfigError, ConfigErrorKind};
use crate::engine::{FailKind, FailReason};
use crate::io::RequestError;

/// JSON-RPC "invalid params".
const JSONRPC_INVALID_PARAMS: i32 = -32602;

/// Why an operation of the module failed; the text names the parameter or
/// device at fault and goes to the RPC caller or the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A parameter (from an RPC or from a device's owner record) is wrong.
    InvalidParams(String),
    /// The name is taken.
    Exists(String),
    /// The HHC bdev is being created or deleted.
    Busy(String),
    /// No such bdev.
    NoDevice(String),
    /// The bdev is claimed by another module.
    Claimed(String),
    /// A device failed commands the HHC bdev cannot do without.
    Failed(String),
    /// A device is too small for its role.
    NoSpace(String),
    /// A device or count beyond what the formats address.
    TooLarge(String),
    /// This build cannot do it.
    Unsupported(String),
    /// Memory for the node could not be allocated.
    NoMemory(String),
    /// SPDK returned this negative errno.
    Os(i32, String),
}

impl Error {
    /// A negative errno from SPDK, by kind.
    pub fn from_rc(rc: i32, message: String) -> Error {
        match -rc {
            libc::ENODEV => Error::NoDevice(message),
            libc::EPERM => Error::Claimed(message),
            libc::EEXIST => Error::Exists(message),
            libc::EBUSY => Error::Busy(message),
            _ => Error::Os(rc, message),
        }
    }

    /// The code of the JSON-RPC error answer.
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidParams(_) => JSONRPC_INVALID_PARAMS,
            Error::Exists(_) => -libc::EEXIST,
            Error::Busy(_) => -libc::EBUSY,
            Error::NoDevice(_) => -libc::ENODEV,
            Error::Claimed(_) => -libc::EPERM,
            Error::Failed(_) => -libc::EIO,
            Error::NoSpace(_) => -libc::ENOSPC,
            Error::TooLarge(_) => -libc::EFBIG,
            Error::Unsupported(_) => -libc::EOPNOTSUPP,
            Error::NoMemory(_) => -libc::ENOMEM,
            Error::Os(rc, _) => *rc,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::InvalidParams(m)
            | Error::Exists(m)
            | Error::Busy(m)
            | Error::NoDevice(m)
            | Error::Claimed(m)
            | Error::Failed(m)
            | Error::NoSpace(m)
            | Error::TooLarge(m)
            | Error::Unsupported(m)
            | Error::NoMemory(m)
            | Error::Os(_, m) => m,
        }
    }
}

impl Error {
    /// The same kind of error, said with `message`.
    pub fn with_message(&self, message: String) -> Error {
        match self {
            Error::InvalidParams(_) => Error::InvalidParams(message),
            Error::Exists(_) => Error::Exists(message),
            Error::Busy(_) => Error::Busy(message),
            Error::NoDevice(_) => Error::NoDevice(message),
            Error::Claimed(_) => Error::Claimed(message),
            Error::Failed(_) => Error::Failed(message),
            Error::NoSpace(_) => Error::NoSpace(message),
            Error::TooLarge(_) => Error::TooLarge(message),
            Error::Unsupported(_) => Error::Unsupported(message),
            Error::NoMemory(_) => Error::NoMemory(message),
            Error::Os(rc, _) => Error::Os(*rc, message),
        }
    }
}

/// An engine failure by kind: a device gone is ENODEV, a device error EIO,
/// a cache device holding something else than an HHC cache it can open
/// invalid parameters.
impl From<&FailReason> for Error {
    fn from(reason: &FailReason) -> Error {
        let detail = reason.detail.clone();
        match reason.kind {
            FailKind::DeviceLost => Error::NoDevice(detail),
            FailKind::DeviceError => Error::Failed(detail),
            FailKind::Format => Error::InvalidParams(detail),
        }
    }
}

/// A creation parameter that cannot work, by kind.
impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Error {
        let message = error.message;
        match error.kind {
            ConfigErrorKind::Invalid => Error::InvalidParams(message),
            ConfigErrorKind::TooSmall => Error::NoSpace(message),
            ConfigErrorKind::TooLarge => Error::TooLarge(message),
            ConfigErrorKind::Unsupported => Error::Unsupported(message),
        }
    }
}

/// Status of a bdev I/O the engine completed.
pub fn request_status(result: Result<(), RequestError>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(RequestError::Io) => -libc::EIO,
        Err(RequestError::OutOfRange) => -libc::EINVAL,
        Err(RequestError::NotReady) => -libc::ENODEV,
        // The bdev layer queues it and sends it again (SPDK_BDEV_IO_STATUS_NOMEM).
        Err(RequestError::Busy) => -libc::ENOMEM,
    }
}

/// Status of a bdev I/O refused before it reached the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The HHC bdev is not serving (starting, stopping, failed).
    NotReady,
    /// More blocks than one engine request carries.
    TooLong,
    /// A queue is full; the bdev layer retries the I/O later.
    Full,
}

impl Refusal {
    pub fn status(self) -> i32 {
        match self {
            Refusal::NotReady => -libc::ENODEV,
            Refusal::TooLong => -libc::EINVAL,
            Refusal::Full => -libc::ENOMEM,
        }
    }
}

/// The text of an errno for a log line.
pub fn describe(rc: i32) -> String {
    format!("errno {}", -rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdk_codes_keep_their_kind_and_number() {
        for rc in [-libc::ENODEV, -libc::EPERM, -libc::EEXIST, -libc::EBUSY, -libc::ENOSPC] {
            assert_eq!(Error::from_rc(rc, String::new()).code(), rc);
        }
        assert_eq!(Error::from(ConfigError::invalid("x")), Error::InvalidParams("x".into()));
        let kinds = [
            (ConfigError::invalid("x"), JSONRPC_INVALID_PARAMS),
            (ConfigError::too_small("x"), -libc::ENOSPC),
            (ConfigError::too_large("x"), -libc::EFBIG),
            (ConfigError::unsupported("x"), -libc::EOPNOTSUPP),
        ];
        for (error, code) in kinds {
            let error = Error::from(error.prefixed("about: "));
            assert_eq!((error.code(), error.message()), (code, "about: x"));
        }
        assert_eq!(Error::InvalidParams(String::new()).code(), JSONRPC_INVALID_PARAMS);
        assert_eq!(request_status(Err(RequestError::NotReady)), Refusal::NotReady.status());
    }
}
