//! `w`, in the playground or its export dialog: the last finished run as pretty
//! SampleResponse JSON, samplab's or twinkle's (an array of them, one per side, when models or
//! parameter sets are compared, as `samplab sample` prints them), to the path the user gives or
//! in a new file named after the run and the time, so that nothing a user kept is overwritten
//! without a yes.

use crate::atomic_file;
use crate::engine::RunId;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// More runs than anyone saves in one second.
const MAX_ATTEMPTS: u32 = 100;

/// Writes `json` and a newline to `dir/samplab-<run>-<unix time>.json`, or `…-2.json` and on
/// if that exists.
pub fn write(dir: &Path, run_id: RunId, unix_time: u64, json: &str) -> io::Result<PathBuf> {
    for attempt in 1..=MAX_ATTEMPTS {
        let suffix = if attempt == 1 {
            String::new()
        } else {
            format!("-{attempt}")
        };
        let path = dir.join(format!("samplab-{run_id}-{unix_time}{suffix}.json"));
        match write_to(&path, false, json) {
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

/// Writes `json` and a newline to `path`; an existing file fails with `AlreadyExists` unless
/// `overwrite`, and is never left half written.
pub fn write_to(path: &Path, overwrite: bool, json: &str) -> io::Result<()> {
    atomic_file::write(path, overwrite, |f| writeln!(f, "{json}"))
}
