//! Routes the `log` crate to the SPDK log component `hhc` (debug and trace
//! lines appear with `--logflag hhc`).

use super::sys;
use std::ffi::CString;

struct SpdkLogger;

static LOGGER: SpdkLogger = SpdkLogger;

impl log::Log for SpdkLogger {
    fn enabled(&self, _metadata: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let level = match record.level() {
            log::Level::Error => sys::hhc_glue_log_level::HHC_GLUE_LOG_ERROR,
            log::Level::Warn => sys::hhc_glue_log_level::HHC_GLUE_LOG_WARN,
            log::Level::Info => sys::hhc_glue_log_level::HHC_GLUE_LOG_INFO,
            log::Level::Debug | log::Level::Trace => sys::hhc_glue_log_level::HHC_GLUE_LOG_DEBUG,
        };
        let text = record.args().to_string().replace('\0', " ");
        let message = CString::new(text).expect("NUL bytes were replaced");
        // SAFETY: message is a valid NUL-terminated string for the call.
        unsafe { sys::hhc_glue_log(level, message.as_ptr()) }
    }

    fn flush(&self) {}
}

/// Installs the logger once; a host process that set its own keeps it.
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}
