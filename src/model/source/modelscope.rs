//! Files of ModelScope model repositories (`ms://org/name`, as twinkle names models), fetched
//! with ModelScope's own HTTP API into the cache its Python SDK (modelscope >= 1.38, through
//! modelscope_hub) reads and writes, so that each reuses the other's downloads:
//!
//! ```text
//! <MODELSCOPE_CACHE>/models/<org>--<name>/snapshots/master/<file>   where new downloads go
//! <MODELSCOPE_CACHE>/models/<org>/<name, each `.` as `___`>/<file>  older SDKs' folder: used
//! <MODELSCOPE_CACHE>/hub/models/<org>/<name___>/<file>              instead when it holds files
//! <target>.incomplete                                               a download under way
//! <MODELSCOPE_CACHE>/.samplab_no_exist/<org>/<name>/<file>  samplab's own: the listing lacked it
//! ```
//!
//! `GET <domain>/api/v1/models/<org>/<name>/repo/files?Revision=master&Recursive=True` lists
//! each file's `Path`, `Size` and `Sha256`; `GET .../repo?Revision=master&FilePath=<file>`
//! gives its bytes, resumed with a range request by the Hub client's download, which also
//! brings progress, retries, timeouts and cancel. A file takes its name only once its size and
//! sha256 match the listing; a file already there is used without a request.

use super::hub::client::{Client, Remote};
use super::hub::{HubError, HubSettings, Transfer, cache::is_safe_file};
pub use super::modelscope_settings::{DEFAULT_DOMAIN, ModelScopeSettings};
use std::path::PathBuf;
use std::time::Duration;

/// The prefix that marks a ModelScope id.
pub const PREFIX: &str = "ms://";
const REVISION: &str = "master";
/// samplab's markers of files a repository lacks, outside the SDK's folders, so that a model
/// whose optional files are missing loads again without asking (the Hub cache's `.no_exist`).
const NO_EXIST: &str = ".samplab_no_exist";

impl ModelScopeSettings {
    /// The folder the SDK keeps repository `org/name`'s files in: an older SDK's, when it
    /// holds files, else the snapshot of `master`.
    pub fn model_dir(&self, id: &str) -> PathBuf {
        let models = self.cache_dir.join("models");
        let older = [
            models.join(safe_id(id)),
            self.cache_dir.join("hub/models").join(safe_id(id)),
        ];
        let holds_files = |dir: &PathBuf| {
            std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
        };
        older.into_iter().find(holds_files).unwrap_or_else(|| {
            models
                .join(id.replace('/', "--"))
                .join("snapshots")
                .join(REVISION)
        })
    }

    fn absent_marker(&self, id: &str, file: &str) -> PathBuf {
        self.cache_dir.join(NO_EXIST).join(safe_id(id)).join(file)
    }
}

/// `org/name` as older SDKs name its folder: each `.` of the name becomes `___`.
fn safe_id(id: &str) -> String {
    let (org, name) = id.split_once('/').unwrap_or(("", id));
    format!("{org}/{}", name.replace('.', "___"))
}

/// Why a ModelScope file could not be fetched, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ModelScopeError {
    #[error(
        "{domain} refused `{PREFIX}{id}` without a token ({status}): the repository is private \
         or does not exist. Set MODELSCOPE_API_TOKEN to an access token with access to it \
         (modelscope.cn/my/myaccesstoken)"
    )]
    NeedsToken {
        id: String,
        domain: String,
        status: u16,
    },
    #[error(
        "{domain} refused the token in MODELSCOPE_API_TOKEN for `{PREFIX}{id}` ({status}): the \
         repository is private or does not exist. Set MODELSCOPE_API_TOKEN to a token with \
         access to it"
    )]
    TokenRefused {
        id: String,
        domain: String,
        status: u16,
    },
    #[error("there is no repository `{PREFIX}{id}` on {domain} (404): check the model id")]
    RepoNotFound { id: String, domain: String },
    #[error("the repository `{PREFIX}{id}` has no file `{file}` (404): check the file name")]
    FileNotFound { id: String, file: String },
    #[error(
        "cannot reach {domain} ({reason}): check your network or MODELSCOPE_ENDPOINT; models \
         already in the ModelScope cache load without the network"
    )]
    Unreachable { domain: String, reason: String },
    #[error(
        "{domain} stopped answering (nothing for {:.1} s) while fetching `{file}` of \
         `{PREFIX}{id}`: try again later, a download resumes where it stopped",
        waited.as_secs_f64()
    )]
    Stalled {
        id: String,
        file: String,
        domain: String,
        waited: Duration,
    },
    #[error(
        "`{file}` of `{PREFIX}{id}` arrived damaged twice ({what}); it was deleted: try again, \
         or check MODELSCOPE_ENDPOINT"
    )]
    Corrupt {
        id: String,
        file: String,
        what: String,
    },
    #[error("{domain} is not a ModelScope server: {what}")]
    NotModelScope { domain: String, what: String },
    #[error(
        "cannot write the ModelScope cache at {}: {source}; set MODELSCOPE_CACHE to a writable \
         directory",
        path.display()
    )]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
    /// What is worded alike for both sites: a cut, a cancel, another status, a bad file name.
    #[error(transparent)]
    Download(HubError),
}

/// One file of the `master` revision of ModelScope repository `id`: from the cache when it
/// holds it (no request at all), downloaded otherwise; offline, `Ok(None)` when not cached.
pub fn fetch(
    hub: &HubSettings,
    id: &str,
    file: &str,
    observe: &mut dyn FnMut(&Transfer),
) -> Result<Option<PathBuf>, ModelScopeError> {
    let site = &hub.modelscope;
    if !is_safe_file(file) {
        return Err(ModelScopeError::Download(HubError::BadFileName {
            file: file.to_owned(),
        }));
    }
    let path = site.model_dir(id).join(file);
    if path.is_file() {
        return Ok(Some(path));
    }
    let absent = site.absent_marker(id, file);
    if absent.is_file() {
        return Err(ModelScopeError::FileNotFound {
            id: id.to_owned(),
            file: file.to_owned(),
        });
    }
    if hub.offline {
        return Ok(None);
    }
    // The Hub client, pointed at ModelScope: its endpoint, token and cache.
    let transport = HubSettings {
        endpoint: site.domain.clone(),
        token: site.token.clone(),
        cache_dir: site.cache_dir.clone(),
        ..hub.clone()
    };
    let client = Client::modelscope(&transport, id);
    let remote = listed(&client, &transport, id, file).inspect_err(|e| {
        if matches!(e, ModelScopeError::FileNotFound { .. }) {
            // Only saves a request next time: a failure changes nothing now.
            let _ = absent
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&absent, b""));
        }
    })?;
    let mut partial = path.clone().into_os_string();
    partial.push(".incomplete");
    let partial = PathBuf::from(partial);
    client
        .fetch_into(&path, &partial, file, &remote, observe)
        .map_err(|e| from_download(e, id, &site.domain))?;
    Ok(Some(path))
}

/// Where `file` is, from the repository's listing, with the size and hash it must have.
fn listed(
    client: &Client,
    transport: &HubSettings,
    id: &str,
    file: &str,
) -> Result<Remote, ModelScopeError> {
    let domain = &transport.endpoint;
    let url = format!("{domain}/api/v1/models/{id}/repo/files?Revision={REVISION}&Recursive=True");
    let not_modelscope = |what: String| ModelScopeError::NotModelScope {
        domain: domain.clone(),
        what,
    };
    let response = match client.get_api(&url).map_err(|e| *e) {
        Ok(response) => response,
        Err(ureq::Error::Status(status, _)) => {
            let (id, domain) = (id.to_owned(), domain.clone());
            return Err(match status {
                401 | 403 if transport.token.is_none() => {
                    ModelScopeError::NeedsToken { id, domain, status }
                }
                401 | 403 => ModelScopeError::TokenRefused { id, domain, status },
                404 => ModelScopeError::RepoNotFound { id, domain },
                _ => ModelScopeError::Download(HubError::Status {
                    id,
                    file: file.to_owned(),
                    endpoint: domain,
                    status,
                    detail: " while listing the repository's files".to_owned(),
                }),
            });
        }
        Err(ureq::Error::Transport(t)) => {
            let e = client.transport_error(file, &t, transport.timeouts.metadata);
            return Err(from_download(e, id, domain));
        }
    };
    let body: serde_json::Value = response
        .into_string()
        .map_err(|e| not_modelscope(format!("its file listing did not arrive whole ({e})")))
        .and_then(|text| {
            serde_json::from_str(&text)
                .map_err(|e| not_modelscope(format!("its file listing is not JSON ({e})")))
        })?;
    let files = body["Data"]["Files"]
        .as_array()
        .ok_or_else(|| not_modelscope("its file listing has no Data.Files".to_owned()))?;
    let entry = files
        .iter()
        .find(|f| f["Path"].as_str() == Some(file) && f["Type"].as_str() != Some("tree"))
        .ok_or_else(|| ModelScopeError::FileNotFound {
            id: id.to_owned(),
            file: file.to_owned(),
        })?;
    let sha256 = entry["Sha256"]
        .as_str()
        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_lowercase);
    Ok(Remote {
        url: format!(
            "{domain}/api/v1/models/{id}/repo?Revision={REVISION}&FilePath={}",
            super::hub::client::encode_path(file)
        ),
        size: entry["Size"].as_u64(),
        sha256,
    })
}

/// The Hub client's errors in ModelScope's words, where the advice differs.
fn from_download(e: HubError, id: &str, domain: &str) -> ModelScopeError {
    let (id, domain) = (id.to_owned(), domain.to_owned());
    match e {
        HubError::NeedsToken { .. } => ModelScopeError::NeedsToken {
            id,
            domain,
            status: 401,
        },
        HubError::TokenRefused { status, .. } => {
            ModelScopeError::TokenRefused { id, domain, status }
        }
        HubError::RepoNotFound { .. } => ModelScopeError::RepoNotFound { id, domain },
        HubError::FileNotFound { file, .. } | HubError::NotFound { file, .. } => {
            ModelScopeError::FileNotFound { id, file }
        }
        HubError::Unreachable { reason, .. } => ModelScopeError::Unreachable { domain, reason },
        HubError::Stalled { file, waited, .. } => ModelScopeError::Stalled {
            id,
            file,
            domain,
            waited,
        },
        HubError::Corrupt { file, what, .. } => ModelScopeError::Corrupt { id, file, what },
        HubError::NotAHub { what, .. } => ModelScopeError::NotModelScope { domain, what },
        HubError::Cache { path, source } => ModelScopeError::Cache { path, source },
        e @ (HubError::Interrupted { .. }
        | HubError::Cancelled { .. }
        | HubError::Status { .. }
        | HubError::BadFileName { .. }) => ModelScopeError::Download(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_from_the_variables_the_sdk_reads() {
        let read = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            ModelScopeSettings::from_vars(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        let set = read(&[
            ("MODELSCOPE_CACHE", "/tmp/ms"),
            ("MODELSCOPE_DOMAIN", "modelscope.ai/"),
            ("MODELSCOPE_API_TOKEN", " ms-secret \n"),
        ]);
        assert_eq!(set.cache_dir, PathBuf::from("/tmp/ms"));
        assert_eq!(set.domain, "https://modelscope.ai");
        assert_eq!(set.token.as_deref(), Some("ms-secret"));
        assert!(!format!("{set:?}").contains("ms-secret"));
        let local = read(&[("MODELSCOPE_DOMAIN", "http://127.0.0.1:8000")]);
        assert_eq!(local.domain, "http://127.0.0.1:8000");
        let default = read(&[]);
        assert_eq!(default.domain, DEFAULT_DOMAIN);
        assert!(default.cache_dir.ends_with(".cache/modelscope"));
        let newer = read(&[
            ("MODELSCOPE_ENDPOINT", "https://modelscope.ai"),
            ("MODELSCOPE_DOMAIN", "www.modelscope.cn"),
        ]);
        assert_eq!(newer.domain, "https://modelscope.ai");
        assert_eq!(default.token, None);
    }

    #[test]
    fn model_folders_are_found_as_the_sdk_finds_them() {
        let cache = tempfile::tempdir().unwrap();
        let set = ModelScopeSettings::new(cache.path().to_owned());
        let id = "Qwen/Qwen3.5-4B";
        let snapshot = cache
            .path()
            .join("models/Qwen--Qwen3.5-4B/snapshots/master");
        assert_eq!(set.model_dir(id), snapshot);
        // An older SDK's folder is used once it holds files, the plain one before `hub/`.
        let hub = cache.path().join("hub/models/Qwen/Qwen3___5-4B");
        std::fs::create_dir_all(&hub).unwrap();
        assert_eq!(set.model_dir(id), snapshot, "an empty folder is not used");
        std::fs::write(hub.join("config.json"), "{}").unwrap();
        assert_eq!(set.model_dir(id), hub);
        let plain = cache.path().join("models/Qwen/Qwen3___5-4B");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("config.json"), "{}").unwrap();
        assert_eq!(set.model_dir(id), plain);
    }
}
