//! `w` in the export dialog: the last finished run as pretty SampleResponse JSON, samplab's or
//! twinkle's (an array of them, one per side, when models or parameter sets are compared, as
//! `samplab sample` prints them), in a new file named after the run and the time, so that
//! nothing a user kept is ever overwritten.

use crate::atomic_file;
use crate::engine::RunId;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// More runs than anyone saves in one second.
const MAX_ATTEMPTS: u32 = 100;

/// Writes `json` and a newline to `dir/samplab-<run>-<unix time>.json`, or `…-2.json` and on
/// if that exists.
pub fn write(dir: &Path, run_id: RunId, unix_time: u64, json: &str) -> io::Result<PathBuf> {
    let json = format!("{json}\n");
    for attempt in 1..=MAX_ATTEMPTS {
        let suffix = if attempt == 1 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let path = dir.join(format!("samplab-{run_id}-{unix_time}{suffix}.json"));
        match atomic_file::write(&path, false, |f| f.write_all(json.as_bytes())) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            result => return result.map(|()| path),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "samplab-{run_id}-{unix_time}.json and {MAX_ATTEMPTS} numbered names after it exist"
        ),
    ))
}
