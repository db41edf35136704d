//! Where samplab keeps what a user makes: `presets/` and `themes/` under one config directory.
//!
//! Only the binary's edge asks for it; everything below takes the directory as an argument, so
//! tests (and the tmux end-to-end run) never touch the real home.

use std::io;
use std::path::{Path, PathBuf};

/// Overrides the platform's config directory, e.g. for tests or a portable setup.
pub const CONFIG_DIR_ENV: &str = "SAMPLAB_CONFIG_DIR";

/// `$SAMPLAB_CONFIG_DIR` when set and non-empty, else the platform's config directory for
/// samplab (`~/.config/samplab` on Linux); `None` when the platform has no home to offer.
pub fn config_dir() -> Option<PathBuf> {
    match std::env::var_os(CONFIG_DIR_ENV) {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => directories::ProjectDirs::from("", "", "samplab").map(|d| d.config_dir().to_owned()),
    }
}

/// Where user themes live: `<config dir>/themes`.
pub fn themes_dir(config: &Path) -> PathBuf {
    config.join("themes")
}

/// The files a user keeps in `dir` (presets, themes) whose extension is one of `extensions`,
/// with their names (the file stem), sorted by name and then in the order of `extensions`;
/// hidden files (editors' temporaries) are skipped, and a missing directory has none.
pub fn user_files(dir: &Path, extensions: &[&str]) -> io::Result<Vec<(String, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        entries => entries?,
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let rank = path
            .extension()
            .and_then(|e| extensions.iter().position(|&x| e == x));
        if let Some(rank) = rank
            && !name.starts_with('.')
            && path.is_file()
        {
            found.push((name.to_owned(), rank, path));
        }
    }
    found.sort();
    Ok(found
        .into_iter()
        .map(|(name, _, path)| (name, path))
        .collect())
}
