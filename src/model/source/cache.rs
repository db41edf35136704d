//! samplab's own cache directory, for files it writes once and reuses: synthetic benchmark
//! models and the embedded default model.

use std::ffi::OsString;
use std::path::PathBuf;

/// `$XDG_CACHE_HOME/samplab/<sub>` or `~/.cache/samplab/<sub>`, created if missing.
pub fn cache_dir(sub: &str) -> std::io::Result<PathBuf> {
    let base = cache_base(
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
    .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither XDG_CACHE_HOME nor HOME is an absolute path: set one to choose a cache directory",
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

/// The XDG rule: an empty or relative `XDG_CACHE_HOME` is ignored (it would write into the
/// working directory), and so is a relative `HOME`.
fn cache_base(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    xdg.and_then(absolute)
        .or_else(|| home.and_then(absolute).map(|h| h.join(".cache")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_relative_xdg_cache_home_is_ignored() {
        let base = |xdg: Option<&str>, home: Option<&str>| {
            cache_base(xdg.map(OsString::from), home.map(OsString::from))
        };
        assert_eq!(base(Some("/xdg"), Some("/home/u")), Some("/xdg".into()));
        assert_eq!(
            base(Some(""), Some("/home/u")),
            Some("/home/u/.cache".into())
        );
        assert_eq!(
            base(Some("rel"), Some("/home/u")),
            Some("/home/u/.cache".into())
        );
        assert_eq!(base(None, Some("/home/u")), Some("/home/u/.cache".into()));
        assert_eq!(base(Some(""), Some("")), None);
        assert_eq!(base(None, None), None);
    }
}
