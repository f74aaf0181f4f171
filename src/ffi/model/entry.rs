//! The `hhc_rs_model_*` functions spdk-glue/hhc_model.c calls: raw
//! pointers in, the `ModelDevice` of one model bdev behind them.

use super::ModelDevice;
use crate::ffi::errno::Error;
use crate::ffi::rpc::{text, Rpc};
use crate::ffi::sys;
use crate::io::IoKind;
use std::ffi::{c_char, c_void};

/// Copies `message` into the C buffer `error` of `error_len` bytes, cut and
/// NUL-terminated.
///
/// # Safety
/// `error` is NULL or writable for `error_len` bytes.
unsafe fn write_error(message: &str, error: *mut c_char, error_len: usize) {
    if error.is_null() || error_len == 0 {
        return;
    }
    let bytes = message.as_bytes();
    let len = bytes.len().min(error_len - 1);
    // SAFETY: the caller's contract; len + 1 <= error_len.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), error.cast::<u8>(), len);
        *error.add(len) = 0;
    }
}

/// A model of `kind` with `count` overrides, or NULL and a message in `error`.
///
/// # Safety
/// `kind` is a C string; `keys` and `values` hold `count` C strings and
/// numbers (or are NULL when `count` is 0); `error` as in `write_error`.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_new(
    kind: *const c_char,
    keys: *const *const c_char,
    values: *const f64,
    count: usize,
    error: *mut c_char,
    error_len: usize,
) -> *mut c_void {
    // SAFETY: the function's contract.
    let kind = unsafe { text(kind) }.unwrap_or_default();
    let overrides: Vec<(String, f64)> = (0..count)
        // SAFETY: the function's contract: count entries each.
        .map(|i| unsafe { (text(*keys.add(i)).unwrap_or_default(), *values.add(i)) })
        .collect();
    match ModelDevice::new(&kind, &overrides) {
        Ok(device) => Box::into_raw(Box::new(device)).cast(),
        Err(message) => {
            // SAFETY: the function's contract.
            unsafe { write_error(&message, error, error_len) };
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// `rs_model` came from hhc_rs_model_new and no I/O uses it any more.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_free(rs_model: *mut c_void) {
    if !rs_model.is_null() {
        // SAFETY: the function's contract.
        drop(unsafe { Box::from_raw(rs_model as *mut ModelDevice) });
    }
}

/// # Safety
/// `rs_model` is a live model.
unsafe fn device<'a>(rs_model: *mut c_void) -> &'a ModelDevice {
    // SAFETY: the caller's contract.
    unsafe { &*(rs_model as *const ModelDevice) }
}

/// # Safety
/// `rs_model` is a live model; `submit_ns` is writable.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_submit(
    rs_model: *mut c_void,
    kind: sys::hhc_glue_io_kind,
    offset_bytes: u64,
    len_bytes: u64,
    submit_ns: *mut u64,
) -> u64 {
    let kind = match kind {
        sys::hhc_glue_io_kind::HHC_GLUE_IO_READ => IoKind::Read,
        sys::hhc_glue_io_kind::HHC_GLUE_IO_WRITE => IoKind::Write,
        _ => IoKind::Flush,
    };
    // SAFETY: the function's contract.
    let (now, done) = unsafe { device(rs_model) }.submit(
        // SAFETY: a plain clock read.
        || unsafe { sys::hhc_glue_now_ns() },
        kind,
        offset_bytes,
        len_bytes,
    );
    // SAFETY: the function's contract.
    unsafe { *submit_ns = now };
    done
}

/// # Safety
/// `rs_model` is a live model.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_complete(rs_model: *mut c_void, submit_ns: u64, base_done_ns: u64, completed_ns: u64) {
    // SAFETY: the function's contract.
    unsafe { device(rs_model) }.complete(submit_ns, base_done_ns, completed_ns);
}

/// # Safety
/// `rs_model` is a live model.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_stripe_bytes(rs_model: *mut c_void) -> u64 {
    // SAFETY: the function's contract.
    unsafe { device(rs_model) }.stripe_bytes()
}

/// # Safety
/// `rs_model` is a live model.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_gathered(rs_model: *mut c_void, pieces: u32) {
    // SAFETY: the function's contract.
    unsafe { device(rs_model) }.gathered(pieces);
}

/// # Safety
/// `rs_model` is NULL (no such bdev) or a live model; `name` a C string;
/// `rpc` a request to answer.
#[no_mangle]
pub unsafe extern "C" fn hhc_rs_model_get_stats(rs_model: *mut c_void, name: *const c_char, rpc: *mut sys::hhc_glue_rpc) {
    // SAFETY: the function's contract.
    let Some(rpc) = (unsafe { Rpc::new(rpc) }) else { return };
    // SAFETY: the function's contract.
    let name = unsafe { text(name) }.unwrap_or_default();
    if rs_model.is_null() {
        rpc.reply_error(&Error::NoDevice(format!("no device-model bdev named '{name}'")));
        return;
    }
    // SAFETY: the function's contract.
    rpc.reply_json(&unsafe { device(rs_model) }.stats_json(&name));
}
