//! samplab's own cache directory, for files it writes once and reuses: synthetic benchmark
//! models and the embedded default model.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/samplab/<sub>` or `~/.cache/samplab/<sub>`, created if missing.
pub fn cache_dir(sub: &str) -> std::io::Result<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither XDG_CACHE_HOME nor HOME is set: set one to choose a cache directory",
            )
        })?;
    let dir = base.join("samplab").join(sub);
    std::fs::create_dir_all(&dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create the cache directory {}: {e}", dir.display()),
        )
    })?;
    Ok(dir)
}
