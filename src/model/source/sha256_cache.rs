//! A model file's sha256, computed once: the digest is kept beside the file as
//! `<file>.sha256.json`, with the size and modification time it was computed for, so that a
//! changed file is hashed again. Where the file's folder is read-only (its permissions say so,
//! which is respected even by root, or a write fails) it is kept in samplab's cache directory
//! instead, named after the file's full path.

use super::cache::cache_dir;
use super::cancel::Cancel;
use super::sha256::{self, Hashing};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// What a cache entry holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    size: u64,
    /// The file's modification time, in nanoseconds since 1970.
    modified_ns: u64,
    sha256: String,
}

/// The sha256 of the file at `path`, from a cache entry that still matches its size and
/// modification time, else read whole (and the entry written for next time).
pub fn file_sha256(path: &Path, cancel: &Cancel) -> Result<String, Hashing> {
    file_sha256_in(path, cancel, fallback_entry)
}

/// [`file_sha256`] with the fallback entry's place given by `fallback` (a test's directory).
fn file_sha256_in(
    path: &Path,
    cancel: &Cancel,
    fallback: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<String, Hashing> {
    let meta = std::fs::metadata(path).map_err(Hashing::Io)?;
    // Taken before reading, so that a file changed while it is read is hashed again next time.
    let modified_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok());
    let beside = beside_entry(path);
    let fallback = fallback(path);
    let places = || beside.iter().chain(fallback.iter());
    if let Some(modified_ns) = modified_ns {
        let wanted = |entry: &Entry| entry.size == meta.len() && entry.modified_ns == modified_ns;
        if let Some(entry) = places().filter_map(|p| read_entry(p)).find(wanted) {
            return Ok(entry.sha256);
        }
    }
    let digest = sha256::of_reader(
        &mut crate::regular_file::open(path).map_err(Hashing::Io)?,
        cancel,
    )?;
    if let Some(modified_ns) = modified_ns {
        let entry = Entry {
            size: meta.len(),
            modified_ns,
            sha256: digest.clone(),
        };
        let writable_beside = beside.filter(|p| folder_writable(p));
        // A cache that cannot be written costs a hash at the next start, nothing more.
        let _ = writable_beside
            .iter()
            .chain(fallback.iter())
            .find(|p| write_entry(p, &entry));
    }
    Ok(digest)
}

/// `<file>.sha256.json` beside the file.
fn beside_entry(path: &Path) -> Option<PathBuf> {
    let mut name = path.file_name()?.to_owned();
    name.push(ENTRY_SUFFIX);
    Some(path.with_file_name(name))
}

/// How the name of an entry kept beside its file ends.
const ENTRY_SUFFIX: &str = ".sha256.json";

/// Whether a file named `name` is an entry kept beside a model file, or one being written (a
/// hidden temporary file): not part of the model, so a listing of its files leaves it out.
pub(super) fn is_entry(name: &str) -> bool {
    name.ends_with(ENTRY_SUFFIX) || crate::atomic_file::is_temporary(name)
}

/// `<cache>/sha256/<file name>-<hash of the full path>.json`.
fn fallback_entry(path: &Path) -> Option<PathBuf> {
    let full = std::fs::canonicalize(path).ok()?;
    let name = full.file_name()?.to_string_lossy().into_owned();
    let key = sha256::of_bytes(full.as_os_str().as_encoded_bytes());
    Some(
        cache_dir("sha256")
            .ok()?
            .join(format!("{name}-{}.json", &key[..16])),
    )
}

/// Whether the folder an entry goes in is meant to be written: a folder whose permissions
/// grant no write (shared, read-only models) is left alone even where root could write it.
fn folder_writable(entry: &Path) -> bool {
    let folder = match entry.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::metadata(folder).is_ok_and(|m| !m.permissions().readonly())
}

fn read_entry(path: &Path) -> Option<Entry> {
    let text = crate::regular_file::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_entry(path: &Path, entry: &Entry) -> bool {
    let Ok(json) = serde_json::to_string(entry) else {
        return false;
    };
    crate::atomic_file::write(path, true, |f| writeln!(f, "{json}")).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(model file, fallback folder)` in a fresh directory.
    fn model_file(bytes: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("models/m.gguf");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, bytes).unwrap();
        let fallback = dir.path().join("cache");
        std::fs::create_dir_all(&fallback).unwrap();
        (dir, file, fallback)
    }

    fn hash(file: &Path, fallback: &Path) -> String {
        let fallback = fallback.join("m.json");
        file_sha256_in(file, &Cancel::default(), |_| Some(fallback.clone())).unwrap()
    }

    #[test]
    fn the_digest_is_kept_beside_the_file_and_reused() {
        let (_dir, file, fallback) = model_file(b"abc");
        let abc = sha256::of_bytes(b"abc");
        assert_eq!(hash(&file, &fallback), abc);
        let beside = beside_entry(&file).unwrap();
        let entry = read_entry(&beside).expect("an entry beside the file");
        assert_eq!((entry.size, entry.sha256.as_str()), (3, abc.as_str()));
        assert!(!fallback.join("m.json").exists());
        // A cached digest is used as it is: an entry that says otherwise is believed.
        let forged = Entry {
            sha256: "f".repeat(64),
            ..entry
        };
        assert!(write_entry(&beside, &forged));
        assert_eq!(hash(&file, &fallback), "f".repeat(64));
    }

    #[test]
    fn a_changed_file_is_hashed_again() {
        let (_dir, file, fallback) = model_file(b"abc");
        hash(&file, &fallback);
        std::fs::write(&file, b"abcd").unwrap();
        assert_eq!(hash(&file, &fallback), sha256::of_bytes(b"abcd"));
        let entry = read_entry(&beside_entry(&file).unwrap()).unwrap();
        assert_eq!(entry.size, 4);
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_folder_sends_the_digest_to_the_cache() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, file, fallback) = model_file(b"abc");
        let folder = file.parent().unwrap().to_owned();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
        let digest = hash(&file, &fallback);
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(digest, sha256::of_bytes(b"abc"));
        assert!(!beside_entry(&file).unwrap().exists());
        let entry = read_entry(&fallback.join("m.json")).expect("an entry in the cache");
        assert_eq!(entry.sha256, digest);
    }

    #[test]
    fn a_damaged_entry_is_replaced() {
        let (_dir, file, fallback) = model_file(b"abc");
        std::fs::write(beside_entry(&file).unwrap(), "{not json").unwrap();
        assert_eq!(hash(&file, &fallback), sha256::of_bytes(b"abc"));
        assert!(read_entry(&beside_entry(&file).unwrap()).is_some());
    }
}
