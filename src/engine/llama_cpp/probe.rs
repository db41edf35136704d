//! llama.cpp aborts the whole process on some malformed files that samplab's checks let by (a
//! hyperparameter its asserts refuse, a tensor shape it did not expect). So a file is first
//! loaded, and one token run, in a child process: `samplab llama-probe FILE`. A file that
//! ends the child with a signal, or hangs it, is refused with what llama.cpp said, and this
//! process never loads it.
//!
//! The child is the binary `SAMPLAB_LLAMA_PROBE` names; the CLI sets it to itself. Where it
//! is unset (samplab used as a library), files go to llama.cpp unprobed.

use super::PROBE_VAR;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The subcommand the child runs.
const PROBE_COMMAND: &str = "llama-probe";

/// How long a probe may take before it counts as a hang: loading and one token of the
/// largest models people run on a CPU take well under this.
const PATIENCE: Duration = Duration::from_secs(300);

/// Loads `path` in a child process first, where one is named; refuses it if the child fails.
pub fn probe(path: &Path) -> anyhow::Result<()> {
    let Some(exe) = std::env::var_os(PROBE_VAR) else {
        return Ok(());
    };
    let said = tempfile::tempfile()?;
    let mut child = Command::new(exe)
        .arg(PROBE_COMMAND)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(said.try_clone()?)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start the llama.cpp probe ({PROBE_VAR}): {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if status.is_some_and(|s| s.success()) {
        return Ok(());
    }
    let how = match status {
        None => format!("did not finish in {} s", PATIENCE.as_secs()),
        Some(status) => match std::os::unix::process::ExitStatusExt::signal(&status) {
            Some(signal) => format!("crashed (signal {signal})"),
            None => format!("failed ({status})"),
        },
    };
    anyhow::bail!(
        "llama.cpp {how} loading {} in a test process, so samplab will not load it: the file \
         is malformed in a way samplab's checks do not catch, or llama.cpp does not run it{}",
        path.display(),
        last_lines(said)
    )
}

/// The end of what the child wrote: llama.cpp's own reason, usually its last line.
fn last_lines(mut file: std::fs::File) -> String {
    use std::io::{Read, Seek};
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(1 << 20).read_to_string(&mut text);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    match tail.is_empty() {
        true => String::new(),
        false => format!(
            " (llama.cpp said: {})",
            crate::terminal_text::escape_controls(&tail.join(" | "))
        ),
    }
}
