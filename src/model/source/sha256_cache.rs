//! A model file's sha256, computed once: the digest is kept in samplab's cache directory,
//! named after the file's full path, with the size and modification time it was computed for,
//! so that a changed file is hashed again. Nothing is written beside the user's files.

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
    file_sha256_in(path, cancel, cache_entry)
}

/// [`file_sha256`] with the entry's place given by `entry_of` (a test's directory).
fn file_sha256_in(
    path: &Path,
    cancel: &Cancel,
    entry_of: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<String, Hashing> {
    let meta = std::fs::metadata(path).map_err(Hashing::Io)?;
    // Taken before reading, so that a file changed while it is read is hashed again next time.
    let modified_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok());
    let entry_path = entry_of(path);
    if let (Some(modified_ns), Some(entry)) =
        (modified_ns, entry_path.as_deref().and_then(read_entry))
        && entry.size == meta.len()
        && entry.modified_ns == modified_ns
    {
        return Ok(entry.sha256);
    }
    let digest = sha256::of_reader(
        &mut crate::regular_file::open(path).map_err(Hashing::Io)?,
        cancel,
    )?;
    if let (Some(modified_ns), Some(entry_path)) = (modified_ns, entry_path) {
        let entry = Entry {
            size: meta.len(),
            modified_ns,
            sha256: digest.clone(),
        };
        // A cache that cannot be written costs a hash at the next start, nothing more.
        write_entry(&entry_path, &entry);
    }
    Ok(digest)
}

/// How the name of an entry that samplab once kept beside its model file ends.
const OLD_ENTRY_SUFFIX: &str = ".sha256.json";

/// Whether a file named `name` is an entry an older samplab kept beside a model file, or a
/// file being written (a hidden temporary file): not part of the model, so a listing of its
/// files leaves it out. Old entries are neither read nor removed: they are the user's files now.
pub(super) fn is_entry(name: &str) -> bool {
    name.ends_with(OLD_ENTRY_SUFFIX) || crate::atomic_file::is_temporary(name)
}

/// `<cache>/sha256/<file name>-<hash of the full path>.json`.
fn cache_entry(path: &Path) -> Option<PathBuf> {
    let full = std::fs::canonicalize(path).ok()?;
    let name = full.file_name()?.to_string_lossy().into_owned();
    let key = sha256::of_bytes(full.as_os_str().as_encoded_bytes());
    Some(
        cache_dir("sha256")
            .ok()?
            .join(format!("{name}-{}.json", &key[..16])),
    )
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

    /// `(model file, cache entry)` in a fresh directory: the model alone in `models/`.
    fn model_file(bytes: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("models/m.gguf");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, bytes).unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        (dir, file, cache.join("m.json"))
    }

    fn hash(file: &Path, entry: &Path) -> String {
        file_sha256_in(file, &Cancel::default(), |_| Some(entry.to_owned())).unwrap()
    }

    fn names_in(folder: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_digest_is_kept_in_the_cache_not_beside_the_file_and_reused() {
        let (_dir, file, entry_path) = model_file(b"abc");
        let abc = sha256::of_bytes(b"abc");
        assert_eq!(hash(&file, &entry_path), abc);
        assert_eq!(names_in(file.parent().unwrap()), ["m.gguf"]);
        let entry = read_entry(&entry_path).expect("an entry in the cache");
        assert_eq!((entry.size, entry.sha256.as_str()), (3, abc.as_str()));
        // A cached digest is used as it is: an entry that says otherwise is believed.
        let forged = Entry {
            sha256: "f".repeat(64),
            ..entry
        };
        assert!(write_entry(&entry_path, &forged));
        assert_eq!(hash(&file, &entry_path), "f".repeat(64));
    }

    #[test]
    fn an_entry_an_older_samplab_left_beside_the_file_is_neither_read_nor_removed() {
        let (_dir, file, entry_path) = model_file(b"abc");
        let old = file.with_file_name("m.gguf.sha256.json");
        let forged = format!(
            r#"{{"size":3,"modified_ns":{},"sha256":"{}"}}"#,
            std::fs::metadata(&file)
                .unwrap()
                .modified()
                .unwrap()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
            "f".repeat(64)
        );
        std::fs::write(&old, &forged).unwrap();
        assert_eq!(hash(&file, &entry_path), sha256::of_bytes(b"abc"));
        assert_eq!(std::fs::read_to_string(&old).unwrap(), forged);
    }

    #[test]
    fn a_changed_file_is_hashed_again() {
        let (_dir, file, entry_path) = model_file(b"abc");
        hash(&file, &entry_path);
        std::fs::write(&file, b"abcd").unwrap();
        assert_eq!(hash(&file, &entry_path), sha256::of_bytes(b"abcd"));
        assert_eq!(read_entry(&entry_path).unwrap().size, 4);
    }

    #[test]
    fn a_damaged_entry_is_replaced() {
        let (_dir, file, entry_path) = model_file(b"abc");
        std::fs::write(&entry_path, "{not json").unwrap();
        assert_eq!(hash(&file, &entry_path), sha256::of_bytes(b"abc"));
        assert!(read_entry(&entry_path).is_some());
    }
}
