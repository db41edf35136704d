//! Files of Hugging Face Hub repositories, fetched into the standard HF cache the way Python's
//! huggingface_hub fetches them, so that each reuses the other's downloads.
//!
//! `HF_ENDPOINT` picks the Hub or a mirror, `HF_HOME` (or `HF_HUB_CACHE`) the cache,
//! `HF_HUB_OFFLINE` keeps to the cache and `HF_TOKEN` opens gated and private repositories.
//! A download goes to `blobs/<etag>.incomplete`, resumes from there with a range request after
//! a cut connection, a stall or a cancel, and becomes the blob only once its size (and, for an
//! LFS file, its sha256) is checked.

pub(super) mod cache;
pub(super) mod client;
pub mod progress;

pub use cache::{Lookup, RepoCache};
pub use progress::Transfer;

use super::cancel::Cancel;
use super::modelscope_settings::ModelScopeSettings;
use std::path::PathBuf;

use std::time::Duration;

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// How to reach the Hub and where its cache is; [`HubSettings::from_env`] reads the variables
/// Python's huggingface_hub reads. Tests build their own rather than change the environment.
#[derive(Clone)]
pub struct HubSettings {
    /// The hub cache (`$HF_HOME/hub`), holding `models--org--name` folders.
    pub cache_dir: PathBuf,
    /// The Hub or a mirror, without a trailing `/`.
    pub endpoint: String,
    pub offline: bool,
    pub token: Option<String>,
    pub timeouts: Timeouts,
    /// Further attempts after a connection breaks off in the middle of a file.
    pub retries: u32,
    /// How often the progress callback hears of a download under way.
    pub progress_interval: Duration,
    /// Set to stop a download; what arrived stays for the next try.
    pub cancel: Cancel,
    /// ModelScope for `ms://` ids; it shares the switches above but not endpoint, token or cache.
    pub modelscope: ModelScopeSettings,
}

/// How long to wait before a server counts as unreachable or stalled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    /// For the metadata request (huggingface_hub's `HF_HUB_ETAG_TIMEOUT`).
    pub metadata: Duration,
    /// Between two reads of a file's bytes (`HF_HUB_DOWNLOAD_TIMEOUT`).
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            metadata: Duration::from_secs(10),
            read: Duration::from_secs(10),
        }
    }
}

/// The token is never printed, not even by `{:?}`.
impl std::fmt::Debug for HubSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSettings")
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("timeouts", &self.timeouts)
            .field("retries", &self.retries)
            .field("modelscope", &self.modelscope)
            .finish_non_exhaustive()
    }
}

impl HubSettings {
    /// The Hub at its usual address, online, no token, with the cache at `cache_dir` and
    /// ModelScope's beside it (`../modelscope`), so that settings made for a temporary folder
    /// stay inside it.
    pub fn new(cache_dir: PathBuf) -> Self {
        Self {
            modelscope: ModelScopeSettings::new(cache_dir.with_file_name("modelscope")),
            cache_dir,
            endpoint: DEFAULT_ENDPOINT.to_owned(),
            offline: false,
            token: None,
            timeouts: Timeouts::default(),
            retries: 5,
            progress_interval: Duration::from_millis(100),
            cancel: Cancel::default(),
        }
    }

    /// HF_HOME (else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`), HF_HUB_CACHE,
    /// HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN (else the token file `huggingface-cli login`
    /// writes), HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT; and ModelScope's own
    /// (see [`ModelScopeSettings::from_vars`]). HF_HUB_OFFLINE keeps both to their caches.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// As [`Self::from_env`], reading variables through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| directories::BaseDirs::new().map(|b| b.home_dir().join(".cache")))
                .unwrap_or_default()
                .join("huggingface")
        });
        let cache_dir = var("HF_HUB_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join("hub"));
        let endpoint = var("HF_ENDPOINT")
            .map(|e| e.trim().trim_end_matches('/').to_owned())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(
                v.trim().to_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        let token_file = var("HF_TOKEN_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join("token"));
        let token = var("HF_TOKEN")
            .or_else(|| std::fs::read_to_string(token_file).ok())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        let seconds = |name: &str, default: Duration| {
            var(name)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| *s > 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .unwrap_or(default)
        };
        let defaults = Timeouts::default();
        Self {
            modelscope: ModelScopeSettings::from_vars(&var),
            endpoint,
            offline,
            token,
            timeouts: Timeouts {
                connect: defaults.connect,
                metadata: seconds("HF_HUB_ETAG_TIMEOUT", defaults.metadata),
                read: seconds("HF_HUB_DOWNLOAD_TIMEOUT", defaults.read),
            },
            ..Self::new(cache_dir)
        }
    }
}

/// Why a file could not be fetched, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "{endpoint} refused `{id}` without a token (401): the repository is gated or private, or \
         does not exist. Set HF_TOKEN to a token with access (huggingface.co/settings/tokens), \
         after accepting the model's terms on its page if it is gated"
    )]
    NeedsToken { id: String, endpoint: String },
    #[error(
        "{endpoint} refused the token in HF_TOKEN for `{id}` ({status}): the repository is gated \
         or private, or does not exist. Set HF_TOKEN to a token with access to it, after \
         accepting the model's terms on its page if it is gated"
    )]
    TokenRefused {
        id: String,
        endpoint: String,
        status: u16,
    },
    #[error("there is no repository `{id}` on {endpoint} (404): check the model id")]
    RepoNotFound { id: String, endpoint: String },
    #[error("the repository `{id}` has no file `{file}` (404): check the file name")]
    FileNotFound { id: String, file: String },
    #[error(
        "{endpoint} has neither `{file}` in `{id}` nor, it seems, the repository `{id}` (404): \
         check the model id and the file name"
    )]
    NotFound {
        id: String,
        file: String,
        endpoint: String,
    },
    #[error(
        "cannot reach {endpoint} ({reason}): check your network or HF_ENDPOINT; models already \
         in the cache load without the network with HF_HUB_OFFLINE=1"
    )]
    Unreachable { endpoint: String, reason: String },
    #[error(
        "{endpoint} stopped answering (nothing for {:.1} s) while fetching `{file}` of `{id}`: \
         try again later, a download resumes where it stopped (HF_HUB_ETAG_TIMEOUT and \
         HF_HUB_DOWNLOAD_TIMEOUT set the wait in seconds)",
        waited.as_secs_f64()
    )]
    Stalled {
        id: String,
        file: String,
        endpoint: String,
        waited: Duration,
    },
    #[error(
        "the connection to {endpoint} broke off {attempts} times while fetching `{file}` of \
         `{id}` ({reason}); what arrived is kept and the next try resumes from there"
    )]
    Interrupted {
        id: String,
        file: String,
        endpoint: String,
        attempts: u32,
        reason: String,
    },
    #[error(
        "the download of `{file}` was cancelled; what arrived is kept in the cache and the next \
         try resumes from there"
    )]
    Cancelled { file: String },
    #[error("{endpoint} answered {status} for `{file}` of `{id}`{detail}")]
    Status {
        id: String,
        file: String,
        endpoint: String,
        status: u16,
        detail: String,
    },
    #[error(
        "`{file}` of `{id}` arrived damaged twice ({what}); it was deleted: try again, or check \
         HF_ENDPOINT"
    )]
    Corrupt {
        id: String,
        file: String,
        what: String,
    },
    #[error("{endpoint} is not a Hugging Face Hub or mirror: {what}")]
    NotAHub { endpoint: String, what: String },
    #[error("cannot write the Hugging Face cache at {}: {source}", path.display())]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{file}` is not a file name in a repository")]
    BadFileName { file: String },
}

/// One file of the `main` revision of model repository `id`: from the cache when it holds it
/// (no request at all), downloaded otherwise. `observe` hears of the download as it goes: byte
/// counts that only grow and end at the file's size.
///
/// Offline, a file that is not cached is [`HubError::FileNotFound`] when an earlier run saw it
/// missing and `Ok(None)` otherwise, for the caller to say what to do.
pub fn fetch(
    hub: &HubSettings,
    id: &str,
    file: &str,
    observe: &mut dyn FnMut(&Transfer),
) -> Result<Option<PathBuf>, HubError> {
    if !cache::is_safe_file(file) {
        return Err(HubError::BadFileName {
            file: file.to_owned(),
        });
    }
    let repo = RepoCache::new(&hub.cache_dir, id);
    match repo.lookup(file) {
        Lookup::Present(path) => return Ok(Some(path)),
        Lookup::Absent => {
            return Err(HubError::FileNotFound {
                id: id.to_owned(),
                file: file.to_owned(),
            });
        }
        Lookup::Unknown if hub.offline => return Ok(None),
        Lookup::Unknown => {}
    }
    client::Client::new(hub, id)
        .download(&repo, file, observe)
        .map(Some)
}
