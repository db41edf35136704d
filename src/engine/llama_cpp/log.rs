//! llama.cpp's log, caught: it writes to stderr, which the playground's screen is drawn on. Its
//! lines are kept here for the notice list (`l`) and, in the CLI, stderr under `--verbose`.

use std::collections::VecDeque;
use std::ffi::{CStr, c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, PoisonError};

/// How many lines are kept: a model's load writes a few hundred.
const KEPT: usize = 2000;

/// A line of llama.cpp's log and whether it was a warning or an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub warning: bool,
    pub text: String,
}

#[derive(Default)]
struct Log {
    lines: VecDeque<LogLine>,
    /// A line whose end has not come yet (llama.cpp writes some in pieces).
    partial: String,
    partial_warning: bool,
}

static LOG: Mutex<Log> = Mutex::new(Log {
    lines: VecDeque::new(),
    partial: String::new(),
    partial_warning: false,
});

/// Every line also goes to stderr (the CLI's `--verbose`; never the playground's).
static ECHO: AtomicBool = AtomicBool::new(false);

/// Writes every line of llama.cpp's log to stderr too, as it comes.
pub fn echo(on: bool) {
    ECHO.store(on, Ordering::Relaxed);
}

/// Routes llama.cpp's and ggml's log here, once per process.
pub fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| unsafe {
        // SAFETY: `receive` is a plain function that lives as long as the process and reads
        // only the text it is given, for the duration of the call.
        llama_cpp_sys_2::llama_log_set(Some(receive), std::ptr::null_mut());
    });
}

/// Takes the lines logged since the last call.
pub fn drain() -> Vec<LogLine> {
    let mut log = LOG.lock().unwrap_or_else(PoisonError::into_inner);
    log.lines.drain(..).collect()
}

unsafe extern "C" fn receive(
    level: llama_cpp_sys_2::ggml_log_level,
    text: *const c_char,
    _user: *mut c_void,
) {
    use llama_cpp_sys_2::{GGML_LOG_LEVEL_CONT, GGML_LOG_LEVEL_WARN};
    if text.is_null() {
        return;
    }
    // SAFETY: llama.cpp hands a NUL-terminated string valid during this call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let mut log = LOG.lock().unwrap_or_else(PoisonError::into_inner);
    if level != GGML_LOG_LEVEL_CONT {
        log.partial_warning = level >= GGML_LOG_LEVEL_WARN;
    }
    log.partial.push_str(&text);
    while let Some(end) = log.partial.find('\n') {
        let line: String = log.partial.drain(..=end).collect();
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            continue;
        }
        if log.lines.len() == KEPT {
            log.lines.pop_front();
        }
        let warning = log.partial_warning;
        if ECHO.load(Ordering::Relaxed) {
            eprintln!(
                "llama.cpp: {}",
                crate::terminal_text::escape_controls(&line)
            );
        }
        log.lines.push_back(LogLine {
            warning,
            text: line,
        });
    }
}
