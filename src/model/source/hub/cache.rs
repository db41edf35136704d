//! huggingface_hub's cache layout, so that Python tools and samplab share their downloads:
//!
//! ```text
//! <cache>/models--org--name/
//!   refs/main                      the commit `main` pointed at when last asked
//!   blobs/<etag>                   each file's bytes once, named by its ETag (an LFS file's sha256)
//!   blobs/<etag>.incomplete        a download under way or cut off, resumed from where it stops
//!   snapshots/<commit>/<file>      a relative symlink to ../../blobs/<etag> (a copy where links fail)
//!   .no_exist/<commit>/<file>      an empty marker: the commit has no such file
//! ```
//!
//! A snapshot entry appears only once its blob is complete and verified, so whatever the cache
//! shows is whole.

use std::io;
use std::path::{Path, PathBuf};

/// The revision samplab asks for.
pub const REVISION: &str = "main";

/// One repository's folder in the cache.
#[derive(Debug, Clone)]
pub struct RepoCache {
    pub dir: PathBuf,
}

/// What the cache knows about one file of the current revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Complete, at this path (in a snapshot).
    Present(PathBuf),
    /// The revision has no such file (a 404 seen before).
    Absent,
    /// Not known: ask the Hub.
    Unknown,
}

impl RepoCache {
    /// `org/name` lives in `models--org--name`.
    pub fn new(cache_dir: &Path, id: &str) -> Self {
        Self {
            dir: cache_dir.join(format!("models--{}", id.replace('/', "--"))),
        }
    }

    /// The commit `refs/main` names, if it names one.
    pub fn commit(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join("refs").join(REVISION)).ok()?;
        let commit = text.trim();
        is_safe_name(commit).then(|| commit.to_owned())
    }

    pub fn lookup(&self, file: &str) -> Lookup {
        let Some(commit) = self.commit() else {
            return Lookup::Unknown;
        };
        let path = self.snapshot_path(&commit, file);
        if path.is_file() {
            Lookup::Present(path)
        } else if self.no_exist_path(&commit, file).is_file() {
            Lookup::Absent
        } else {
            Lookup::Unknown
        }
    }

    pub fn snapshot_path(&self, commit: &str, file: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit).join(file)
    }

    fn no_exist_path(&self, commit: &str, file: &str) -> PathBuf {
        self.dir.join(".no_exist").join(commit).join(file)
    }

    pub fn blob_path(&self, etag: &str) -> PathBuf {
        self.dir.join("blobs").join(etag)
    }

    pub fn incomplete_path(&self, etag: &str) -> PathBuf {
        self.dir.join("blobs").join(format!("{etag}.incomplete"))
    }

    /// Points `refs/main` at `commit` (written whole, never half).
    pub fn set_commit(&self, commit: &str) -> io::Result<()> {
        if self.commit().as_deref() == Some(commit) {
            return Ok(());
        }
        let refs = self.dir.join("refs");
        std::fs::create_dir_all(&refs)?;
        crate::atomic_file::write(&refs.join(REVISION), true, |f| {
            io::Write::write_all(f, commit.as_bytes())
        })
    }

    /// Remembers that `commit` has no `file`, so that the next run does not ask again.
    pub fn mark_absent(&self, commit: &str, file: &str) -> io::Result<()> {
        let path = self.no_exist_path(commit, file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, b"")
    }

    /// Makes `snapshots/<commit>/<file>` point at the complete blob `etag`.
    pub fn link(&self, commit: &str, file: &str, etag: &str) -> io::Result<PathBuf> {
        let pointer = self.snapshot_path(commit, file);
        if let Some(parent) = pointer.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::remove_file(&pointer) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let blob = self.blob_path(etag);
        #[cfg(unix)]
        {
            // snapshots/<commit>/a/b.bin -> ../../../blobs/<etag>: one `..` per folder level.
            let depth = file.matches('/').count() + 2;
            let target = Path::new(&"../".repeat(depth)).join("blobs").join(etag);
            if std::os::unix::fs::symlink(&target, &pointer).is_ok() {
                return Ok(pointer);
            }
        }
        // Where links cannot be made, a copy (as huggingface_hub does on Windows).
        copy_whole(&blob, &pointer)?;
        Ok(pointer)
    }
}

/// Copies through a temporary file, so that the pointer is whole or absent.
fn copy_whole(from: &Path, to: &Path) -> io::Result<()> {
    crate::atomic_file::write(to, true, |file| {
        let mut source = std::fs::File::open(from)?;
        io::copy(&mut source, file).map(|_| ())
    })
}

/// An ETag or commit usable as one file name: no separators, no `..`, nothing odd.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A file path inside a repository that cannot leave the snapshot folder.
pub fn is_safe_file(file: &str) -> bool {
    !file.is_empty()
        && !file.starts_with('/')
        && !file.contains('\\')
        && file
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_file_is_found_through_refs_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let repo = RepoCache::new(dir.path(), "org/tiny");
        assert_eq!(repo.lookup("config.json"), Lookup::Unknown);
        std::fs::create_dir_all(repo.dir.join("blobs")).unwrap();
        std::fs::write(repo.blob_path("e1"), "{}").unwrap();
        repo.set_commit("c1").unwrap();
        let path = repo.link("c1", "sub/config.json", "e1").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
        assert_eq!(repo.lookup("sub/config.json"), Lookup::Present(path));
        repo.mark_absent("c1", "gone.json").unwrap();
        assert_eq!(repo.lookup("gone.json"), Lookup::Absent);
        assert_eq!(repo.lookup("other.json"), Lookup::Unknown);
    }

    #[test]
    fn names_that_could_leave_the_cache_are_refused() {
        assert!(is_safe_name("0123abcd"));
        assert!(!is_safe_name("../x") && !is_safe_name("") && !is_safe_name("a/b"));
        assert!(is_safe_file("a/b.gguf"));
        assert!(!is_safe_file("../a") && !is_safe_file("/etc/passwd") && !is_safe_file("a//b"));
    }
}
