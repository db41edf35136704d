//! Where ModelScope is, where its cache is and the token, as its Python SDK reads them: kept
//! apart from the fetch (`super::modelscope`) because the Hub's settings hold them, and the
//! fetch uses the Hub's client.

use std::path::PathBuf;

pub const DEFAULT_DOMAIN: &str = "https://www.modelscope.cn";

/// Where ModelScope is and where its cache is; offline mode, timeouts, retries and cancel are
/// the `HubSettings`' own, so one switch and one cancel cover both sites.
#[derive(Clone)]
pub struct ModelScopeSettings {
    /// `$MODELSCOPE_CACHE`, holding `models/` (and older SDKs' `hub/models/`).
    pub cache_dir: PathBuf,
    /// `https://host`, without a trailing `/`.
    pub domain: String,
    pub token: Option<String>,
}

/// The token is never printed, not even by `{:?}`.
impl std::fmt::Debug for ModelScopeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelScopeSettings")
            .field("cache_dir", &self.cache_dir)
            .field("domain", &self.domain)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl ModelScopeSettings {
    /// ModelScope at its usual address, no token, with the cache at `cache_dir`.
    pub fn new(cache_dir: PathBuf) -> Self {
        Self {
            cache_dir,
            domain: DEFAULT_DOMAIN.to_owned(),
            token: None,
        }
    }

    /// MODELSCOPE_CACHE (else `~/.cache/modelscope`), MODELSCOPE_ENDPOINT (else the older
    /// MODELSCOPE_DOMAIN; a bare host, as the SDK takes it, or a URL) and MODELSCOPE_API_TOKEN,
    /// read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let cache_dir = var("MODELSCOPE_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                directories::BaseDirs::new()
                    .map(|b| b.home_dir().join(".cache"))
                    .unwrap_or_default()
                    .join("modelscope")
            });
        let domain = var("MODELSCOPE_ENDPOINT")
            .or_else(|| var("MODELSCOPE_DOMAIN"))
            .map(|d| d.trim().trim_end_matches('/').to_owned())
            .filter(|d| !d.is_empty())
            .map(|d| {
                if d.starts_with("http://") || d.starts_with("https://") {
                    d
                } else {
                    format!("https://{d}")
                }
            })
            .unwrap_or_else(|| DEFAULT_DOMAIN.to_owned());
        let token = var("MODELSCOPE_API_TOKEN")
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        Self {
            domain,
            token,
            ..Self::new(cache_dir)
        }
    }
}
