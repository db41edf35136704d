//! Opening files that a user, a model directory or a download names, refusing anything that is
//! not a regular file: opening a FIFO for reading blocks until a writer comes (forever, if none
//! does), and a character device can stream without end.

use std::fs::File;
use std::io;
use std::path::Path;

/// `Ok` for a regular file (or a link to one); an `InvalidInput` error that says what it is
/// instead for a FIFO, socket or device. A missing path keeps its `NotFound`.
pub fn check(path: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(());
    }
    let what = if meta.is_dir() {
        "a directory"
    } else {
        "a FIFO, socket or device"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file"),
    ))
}

/// [`File::open`] for regular files only.
pub fn open(path: &Path) -> io::Result<File> {
    check(path)?;
    File::open(path)
}

/// [`std::fs::read_to_string`] for regular files only.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    check(path)?;
    std::fs::read_to_string(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_open_and_directories_and_missing_paths_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "text").unwrap();
        assert_eq!(read_to_string(&file).unwrap(), "text");
        let err = read_to_string(dir.path()).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        let missing = read_to_string(&dir.path().join("none")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("model.gguf");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
        let err = open(&fifo).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("FIFO"), "{err}");
    }
}
