//! samplab-tiny, the model built into the binary so that samplab runs with no file and no
//! network (trained by `examples/train_default_model`). Its files are written once into the
//! cache directory and then loaded like any Hugging Face model directory, by the same code.

use super::cache::cache_dir;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The `--model` value that selects the embedded model (unless a path of that name exists).
pub const NAME: &str = "samplab-tiny";

macro_rules! model_file {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/models/samplab-tiny/",
                $name
            ))
            .as_slice(),
        )
    };
}

pub(super) const FILES: [(&str, &[u8]); 4] = [
    model_file!("config.json"),
    model_file!("generation_config.json"),
    model_file!("model.safetensors"),
    model_file!("tokenizer.json"),
];

/// Whether `spec` names the embedded model rather than a file.
pub fn is_embedded(spec: &str) -> bool {
    spec == NAME && !Path::new(spec).exists()
}

/// The model directory, written into the cache on first use.
pub fn materialise() -> std::io::Result<PathBuf> {
    materialise_in(&cache_dir("models")?)
}

/// Writes the files into `root/samplab-tiny-<hash>`, keyed by their content so that a newer
/// binary never reads an older model. They are written into a private directory that is then
/// renamed into place: a crash or a concurrent first run never leaves a half-written model.
/// A copy whose files differ from ours (a disk error, an edit) is replaced; private
/// directories left by killed processes are swept.
fn materialise_in(root: &Path) -> std::io::Result<PathBuf> {
    let key = format!("{NAME}-{:016x}", content_hash());
    let dir = root.join(&key);
    crate::atomic_file::sweep_stale(root, |name| {
        name.starts_with(&format!(".{NAME}-")) && name.ends_with(".partial")
    });
    if dir.is_dir() {
        if is_intact(&dir) {
            return Ok(dir);
        }
        std::fs::remove_dir_all(&dir)?;
    }
    static ATTEMPT: AtomicU64 = AtomicU64::new(0);
    let attempt = ATTEMPT.fetch_add(1, Ordering::Relaxed);
    let partial = root.join(format!(".{key}.{}-{attempt}.partial", std::process::id()));
    // Left by a crashed process whose id this one reuses.
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    let written = write_files(&partial).and_then(|()| std::fs::rename(&partial, &dir));
    match written {
        Ok(()) => Ok(dir),
        // Another process finished first; its copy is identical.
        Err(_) if dir.is_dir() => {
            std::fs::remove_dir_all(&partial)?;
            Ok(dir)
        }
        Err(e) => {
            // A full disk must not leave half a model behind.
            let _ = std::fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

fn write_files(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    FILES
        .iter()
        .try_for_each(|(name, bytes)| std::fs::write(dir.join(name), bytes))
}

/// Whether every file in `dir` holds exactly our bytes (3 MB to read, once per start).
fn is_intact(dir: &Path) -> bool {
    FILES
        .iter()
        .all(|(name, bytes)| std::fs::read(dir.join(name)).is_ok_and(|found| found == *bytes))
}

/// FNV-1a over every file's name and bytes: stable across Rust releases, unlike `DefaultHasher`.
fn content_hash() -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, bytes) in FILES {
        for &byte in name.as_bytes().iter().chain([0u8].iter()).chain(bytes) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(PRIME);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_written_once_whole_and_reused() {
        let root = tempfile::tempdir().unwrap();
        let dir = materialise_in(root.path()).unwrap();
        for (name, bytes) in FILES {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
        }
        std::fs::write(dir.join("marker"), "kept").unwrap();
        assert_eq!(materialise_in(root.path()).unwrap(), dir);
        assert!(
            dir.join("marker").is_file(),
            "a second run rewrote the directory"
        );
        let leftovers: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| name != dir.file_name().unwrap())
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_crashed_run_leaves_no_model_and_concurrent_runs_agree() {
        let root = tempfile::tempdir().unwrap();
        let key = format!("{NAME}-{:016x}", content_hash());
        let stale = root.path().join(format!(".{key}.1-0.partial"));
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("config.json"), "{").unwrap();
        let dirs: Vec<PathBuf> = std::thread::scope(|scope| {
            let runs: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| materialise_in(root.path())))
                .collect();
            runs.into_iter()
                .map(|r| r.join().unwrap().unwrap())
                .collect()
        });
        assert!(dirs.iter().all(|d| *d == dirs[0]), "{dirs:?}");
        let config = std::fs::read(dirs[0].join("config.json")).unwrap();
        assert_eq!(config, FILES[0].1);
    }

    #[test]
    fn a_corrupt_cached_copy_is_rewritten() {
        let root = tempfile::tempdir().unwrap();
        let dir = materialise_in(root.path()).unwrap();
        let weights = dir.join("model.safetensors");
        let mut bytes = std::fs::read(&weights).unwrap();
        bytes[1000] ^= 0xff;
        std::fs::write(&weights, &bytes).unwrap();
        std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
        assert_eq!(materialise_in(root.path()).unwrap(), dir);
        for (name, bytes) in FILES {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
        }
    }

    #[test]
    fn a_failed_write_leaves_no_partial_directory() {
        let root = tempfile::tempdir().unwrap();
        let key = format!("{NAME}-{:016x}", content_hash());
        // A file where the model directory goes: the rename fails, as on a full disk.
        std::fs::write(root.path().join(&key), "in the way").unwrap();
        assert!(materialise_in(root.path()).is_err());
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [key]);
    }

    #[test]
    fn a_local_path_named_like_the_model_wins() {
        assert!(is_embedded(NAME));
        assert!(!is_embedded("samplab-tiny.gguf"));
    }
}
