//! JSON-RPC requests: their C strings in, their answers out. An `Rpc` is a
//! request waiting for its answer; the answer consumes it, so each request
//! is answered exactly once.

use super::errno::Error;
use super::sys;
use std::ffi::{c_char, CStr, CString};

/// Copies a C string; NULL becomes None.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string valid for this call.
pub unsafe fn text(ptr: *const c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned())
}

pub struct Rpc(*mut sys::hhc_glue_rpc);

// SAFETY: a request may be answered from any SPDK thread (SPDK's JSON-RPC
// server queues answers under a lock); an Rpc is moved, never shared, and
// answered once.
unsafe impl Send for Rpc {}

impl Rpc {
    /// # Safety
    /// `raw` is a JSON-RPC request C handed over, not answered yet, and
    /// answered by nobody else.
    pub unsafe fn new(raw: *mut sys::hhc_glue_rpc) -> Option<Rpc> {
        (!raw.is_null()).then_some(Rpc(raw))
    }

    /// Answers with `text`, which must be a JSON value.
    pub fn reply_json(self, text: &str) {
        // SAFETY: self.0 is pending (Rpc::new) and answered once: self is consumed.
        unsafe { sys::hhc_glue_rpc_reply_raw(self.0, text.as_ptr().cast(), text.len()) }
    }

    pub fn reply_error(self, error: &Error) {
        let message = CString::new(error.message().replace('\0', " ")).unwrap_or_default();
        // SAFETY: as in reply_json; message outlives the call.
        unsafe { sys::hhc_glue_rpc_reply_error(self.0, error.code(), message.as_ptr()) }
    }

    /// Hands the request to C, which answers it.
    pub fn into_raw(self) -> *mut sys::hhc_glue_rpc {
        self.0
    }

    pub fn reply(self, result: Result<&str, &Error>) {
        match result {
            Ok(text) => self.reply_json(text),
            Err(error) => self.reply_error(error),
        }
    }
}
