//! Writing a file so that readers see the old contents or the new, never half of either: the
//! bytes go to a temporary file in the same directory, are synced, and the file is then renamed
//! over (or, when overwriting is not allowed, linked to) the target name.

use std::fs::File;
use std::io;
use std::path::Path;
use std::time::Duration;

/// Writes `path` atomically with whatever `contents` writes. With `overwrite` false an existing
/// file makes this fail with `ErrorKind::AlreadyExists` and stays untouched, without a window in
/// which another writer could slip in between a check and the write. When `contents` or any
/// later step fails, the target keeps its old contents and no temporary file is left behind.
pub fn write(
    path: &Path,
    overwrite: bool,
    contents: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(TEMP_PREFIX).suffix(TEMP_SUFFIX);
    // Temporary files are private by default; the result should look like any file the user
    // creates (0666 less the umask), as `std::fs::write` would make it.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut temp = builder
        .tempfile_in(dir)
        .map_err(|e| in_directory(dir, e.kind()))?;
    contents(temp.as_file_mut())?;
    temp.as_file().sync_all()?;
    if overwrite {
        temp.persist(path).map_err(|e| e.error)?;
    } else {
        temp.persist_noclobber(path).map_err(|e| e.error)?;
    }
    sync_dir(dir)
}

/// Why no file could be made in `dir`, naming the directory: the temporary file's error names
/// a hidden name the user never typed.
fn in_directory(dir: &Path, kind: io::ErrorKind) -> io::Error {
    let why = match kind {
        io::ErrorKind::NotFound => format!("the directory {} does not exist", dir.display()),
        other => format!("cannot create a file in {}: {other}", dir.display()),
    };
    io::Error::new(kind, why)
}

/// Prefix and suffix of the temporary files [`write`] makes.
const TEMP_PREFIX: &str = ".samplab-";
const TEMP_SUFFIX: &str = ".tmp";
/// Far longer than any write of ours takes: an older temporary belongs to a killed process.
const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

/// Whether a file named `name` is one of [`write`]'s temporary files, being written or left
/// by a killed process.
pub fn is_temporary(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX)
}

/// Removes what a process killed mid-write left in `dir`: [`write`]'s temporary files, and other
/// files or directories whose name `is_leftover` accepts, once older than [`STALE_AFTER`] (a
/// younger one may be another process's write in progress). Errors are ignored: a leftover
/// that cannot be removed is harmless.
pub fn sweep_stale(dir: &Path, is_leftover: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(is_temporary(&name) || is_leftover(&name)) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_AFTER));
        if stale {
            let path = entry.path();
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        }
    }
}

/// Makes the rename itself durable: without it a crash can lose the new directory entry.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_new_files_and_replaces_old_ones_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        write(&path, false, |f| f.write_all(b"one")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");

        let err = write(&path, false, |f| f.write_all(b"two")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");

        write(&path, true, |f| f.write_all(b"three")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three");
        assert_eq!(entries(dir.path()), ["a.yaml"], "no temporary file is left");
    }

    #[cfg(unix)]
    #[test]
    fn files_get_the_usual_permissions_not_the_private_temporary_ones() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours");
        let usual = dir.path().join("usual");
        write(&ours, false, |f| f.write_all(b"x")).unwrap();
        std::fs::write(&usual, "x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode(&ours), mode(&usual));
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "old").unwrap();
        let err = write(&path, true, |f| {
            f.write_all(b"half of the new")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(entries(dir.path()), ["a.yaml"]);
    }

    #[test]
    fn stale_temporaries_of_killed_writers_are_swept_and_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let aged = |name: &str, age: Duration| {
            let path = dir.path().join(name);
            let file = File::create(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
        };
        let old = STALE_AFTER * 2;
        aged(".samplab-killed.tmp", old);
        aged(".samplab-writing.tmp", Duration::ZERO);
        aged(".other.partial", old);
        aged("mine.yaml", old);
        std::fs::create_dir(dir.path().join(".model.partial")).unwrap();
        std::fs::write(dir.path().join(".model.partial/config.json"), "{").unwrap();
        let dir_file = File::open(dir.path().join(".model.partial")).unwrap();
        dir_file
            .set_modified(std::time::SystemTime::now() - old)
            .unwrap();
        sweep_stale(dir.path(), |name| name == ".model.partial");
        assert_eq!(
            entries(dir.path()),
            [".other.partial", ".samplab-writing.tmp", "mine.yaml"]
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/a.yaml");
        let err = write(&path, true, |f| f.write_all(b"x")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let message = err.to_string();
        let dir = dir.path().join("no/such/dir");
        assert_eq!(
            message,
            format!("the directory {} does not exist", dir.display()),
            "the directory is named, not the hidden temporary file"
        );
    }
}
