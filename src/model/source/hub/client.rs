//! The HTTP side, as huggingface_hub speaks it: a HEAD on `<endpoint>/<id>/resolve/main/<file>`
//! (following relative redirects only) gives the commit (`X-Repo-Commit`), the ETag
//! (`X-Linked-Etag` for LFS files, else `ETag`), the size (`X-Linked-Size`, else
//! `Content-Length`) and, in an absolute redirect, where the bytes are; a GET with `Range`
//! fetches them, picking up where an earlier try stopped.

use super::cache::{self, REVISION, RepoCache};
use super::progress::{Meter, Transfer};
use super::{HubError, HubSettings};
use crate::model::source::sha256::{self, Hashing};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::time::Duration;

pub(in crate::model::source) struct Client<'a> {
    hub: &'a HubSettings,
    id: &'a str,
    /// ModelScope's downloads also read the token from an `m_session_id` cookie.
    session_cookie: bool,
    /// For HEAD: no redirects followed by ureq (relative ones are followed here).
    meta: ureq::Agent,
    /// For the bytes: follows the CDN's redirects, never carrying the token along.
    data: ureq::Agent,
}

/// What the HEAD said about one file.
struct Metadata {
    commit: String,
    etag: String,
    remote: Remote,
}

/// Where one file's bytes are and what they must add up to.
pub(in crate::model::source) struct Remote {
    pub url: String,
    pub size: Option<u64>,
    /// Checked once the bytes are in, when known.
    pub sha256: Option<String>,
}

/// How one GET ended when it did not end well.
enum Attempt {
    /// The connection broke off; another try resumes.
    Cut(String),
    Fatal(HubError),
}

const LOCK_POLL: Duration = Duration::from_millis(200);
/// How soon a cancel stops a download whose server has fallen silent.
const CANCEL_POLL: Duration = Duration::from_millis(100);
const CHUNK: usize = 256 * 1024;

impl<'a> Client<'a> {
    pub(in crate::model::source) fn new(hub: &'a HubSettings, id: &'a str) -> Self {
        let agent = |read: Duration, redirects: u32| {
            ureq::AgentBuilder::new()
                .timeout_connect(hub.timeouts.connect)
                .timeout_read(read)
                .timeout_write(read)
                .redirects(redirects)
                .user_agent(concat!("samplab/", env!("CARGO_PKG_VERSION")))
                .build()
        };
        Self {
            hub,
            id,
            meta: agent(hub.timeouts.metadata, 0),
            data: agent(hub.timeouts.read, 5),
            session_cookie: false,
        }
    }

    /// As [`Self::new`], for a ModelScope server: `hub.endpoint` is its domain and `hub.token`
    /// its token, sent in both forms ModelScope reads.
    pub(in crate::model::source) fn modelscope(hub: &'a HubSettings, id: &'a str) -> Self {
        Self {
            session_cookie: true,
            ..Self::new(hub, id)
        }
    }

    /// A GET of an API answer on the endpoint (a listing), with the metadata timeout.
    pub(in crate::model::source) fn get_api(
        &self,
        url: &str,
    ) -> Result<ureq::Response, Box<ureq::Error>> {
        self.request(&self.meta, "GET", url)
            .call()
            .map_err(Box::new)
    }

    /// Fetches `file` into `repo`'s cache and links it into the snapshot of its commit.
    pub(super) fn download(
        &self,
        repo: &RepoCache,
        file: &str,
        observe: &mut dyn FnMut(&Transfer),
    ) -> Result<PathBuf, HubError> {
        let meta = self.metadata(repo, file)?;
        let blob = repo.blob_path(&meta.etag);
        if blob.is_file() {
            // Another file or revision brought these bytes already.
            let size = std::fs::metadata(&blob).map_or(0, |m| m.len());
            observe(&Transfer {
                file: file.to_owned(),
                done: size,
                total: meta.remote.size.unwrap_or(size),
                bytes_per_second: None,
            });
        } else {
            let partial = repo.incomplete_path(&meta.etag);
            self.fetch_into(&blob, &partial, file, &meta.remote, observe)?;
        }
        let path = repo
            .link(&meta.commit, file, &meta.etag)
            .map_err(|e| self.cache_error(&repo.snapshot_path(&meta.commit, file), e))?;
        repo.set_commit(&meta.commit)
            .map_err(|e| self.cache_error(&repo.dir.join("refs"), e))?;
        Ok(path)
    }

    fn resolve_url(&self, file: &str) -> String {
        format!(
            "{}/{}/resolve/{REVISION}/{}",
            self.hub.endpoint,
            self.id,
            encode_path(file)
        )
    }

    /// A request that sends the token only to the endpoint itself.
    fn request(&self, agent: &ureq::Agent, method: &str, url: &str) -> ureq::Request {
        let request = agent
            .request(method, url)
            .set("Accept-Encoding", "identity");
        match &self.hub.token {
            Some(token) if same_origin(url, &self.hub.endpoint) => {
                let request = request.set("Authorization", &format!("Bearer {token}"));
                if self.session_cookie {
                    request.set("Cookie", &format!("m_session_id={token}"))
                } else {
                    request
                }
            }
            _ => request,
        }
    }

    /// The HEAD, following relative redirects (a renamed repository, a mirror's own paths);
    /// the `X-Repo-Commit` and `X-Linked-*` headers of a redirect count for the answer after it.
    fn metadata(&self, repo: &RepoCache, file: &str) -> Result<Metadata, HubError> {
        let mut url = self.resolve_url(file);
        let (mut commit, mut linked_etag, mut linked_size) = (None, None, None);
        for _ in 0..5 {
            let response = match self.request(&self.meta, "HEAD", &url).call() {
                Ok(response) => response,
                Err(ureq::Error::Status(status, response)) => {
                    return Err(self.status_error(repo, file, status, &response));
                }
                Err(ureq::Error::Transport(t)) => {
                    return Err(self.transport_error(file, &t, self.hub.timeouts.metadata));
                }
            };
            let header = |name: &str| response.header(name).map(str::to_owned);
            commit = commit.or_else(|| header("X-Repo-Commit"));
            linked_etag = linked_etag.or_else(|| header("X-Linked-Etag"));
            linked_size = linked_size.or_else(|| header("X-Linked-Size"));
            let redirect = (300..400).contains(&response.status());
            let mut download_url = url.clone();
            if redirect {
                let Some(location) = header("Location") else {
                    return Err(
                        self.not_a_hub(format!("a redirect without a Location for `{file}`"))
                    );
                };
                if location.starts_with('/') {
                    url = format!("{}{location}", origin(&self.hub.endpoint));
                    continue;
                }
                download_url = location;
            }
            let commit = commit.filter(|c| cache::is_safe_name(c)).ok_or_else(|| {
                self.not_a_hub(format!("no valid X-Repo-Commit header for `{file}`"))
            })?;
            let etag = linked_etag
                .or_else(|| header("ETag"))
                .map(|e| normalise_etag(&e))
                .filter(|e| cache::is_safe_name(e))
                .ok_or_else(|| self.not_a_hub(format!("no valid ETag header for `{file}`")))?;
            // A redirect's own Content-Length is that of its (empty) body, not the file's.
            let size = linked_size
                .or_else(|| header("Content-Length").filter(|_| !redirect))
                .and_then(|s| s.trim().parse().ok());
            // An LFS file's ETag is its sha256.
            let sha256 = is_sha256(&etag).then(|| etag.clone());
            return Ok(Metadata {
                commit,
                etag,
                remote: Remote {
                    url: download_url,
                    size,
                    sha256,
                },
            });
        }
        Err(self.not_a_hub(format!("too many redirects for `{file}`")))
    }

    /// Downloads `file` into `partial`, resuming what is there, and renames it to `blob` once
    /// size and hash check out.
    pub(in crate::model::source) fn fetch_into(
        &self,
        blob: &Path,
        partial: &Path,
        file: &str,
        meta: &Remote,
        observe: &mut dyn FnMut(&Transfer),
    ) -> Result<(), HubError> {
        let cache_error = |e| self.cache_error(partial, e);
        if let Some(parent) = partial.parent() {
            std::fs::create_dir_all(parent).map_err(cache_error)?;
        }
        let mut out = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(partial)
            .map_err(cache_error)?;
        // Another samplab (or Python) writing the same blob: wait for it rather than interleave.
        loop {
            match out.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    if self.hub.cancel.is_cancelled() {
                        return Err(HubError::Cancelled {
                            file: file.to_owned(),
                        });
                    }
                    std::thread::sleep(LOCK_POLL);
                }
                // A file system without locks: go ahead as huggingface_hub does.
                Err(std::fs::TryLockError::Error(_)) => break,
            }
        }
        if blob.is_file() {
            // Another process finished it while this one waited; an empty part is ours.
            if out.metadata().is_ok_and(|m| m.len() == 0) {
                let _ = std::fs::remove_file(partial);
            }
            return Ok(());
        }
        let mut meter = Meter::new(self.hub.progress_interval);
        let total = meta.size.unwrap_or(0);
        let mut report = |done: u64, last: bool, meter: &mut Meter| {
            if meter.note(done, last) {
                observe(&Transfer {
                    file: file.to_owned(),
                    done,
                    total,
                    bytes_per_second: meter.rate(),
                });
            }
        };
        let sha256 = meta.sha256.as_deref();
        let (mut cuts, mut damaged) = (0, false);
        loop {
            let attempt = self.get_into(
                &mut out,
                file,
                meta,
                &mut |done, meter| report(done, false, meter),
                &mut meter,
            );
            match attempt {
                Ok(()) => {}
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Cut(reason)) => {
                    cuts += 1;
                    if cuts > self.hub.retries {
                        return Err(HubError::Interrupted {
                            id: self.id.to_owned(),
                            file: file.to_owned(),
                            endpoint: self.hub.endpoint.clone(),
                            attempts: cuts,
                            reason,
                        });
                    }
                    continue;
                }
            }
            let len = out.metadata().map_err(cache_error)?.len();
            let problem = match (meta.size, sha256) {
                (Some(size), _) if len != size => Some(format!("{len} bytes of {size}")),
                (_, Some(expected)) => {
                    out.seek(SeekFrom::Start(0)).map_err(cache_error)?;
                    let actual =
                        sha256::of_reader(&mut out, &self.hub.cancel).map_err(|e| match e {
                            Hashing::Cancelled => HubError::Cancelled {
                                file: file.to_owned(),
                            },
                            Hashing::Io(e) => cache_error(e),
                        })?;
                    (actual != expected).then(|| format!("sha256 {actual}, not {expected}"))
                }
                _ => None,
            };
            let Some(problem) = problem else {
                report(len, true, &mut meter);
                break;
            };
            // Bytes that cannot be the file: start again once, then give up.
            out.set_len(0).map_err(cache_error)?;
            if damaged {
                drop(out);
                let _ = std::fs::remove_file(partial);
                return Err(HubError::Corrupt {
                    id: self.id.to_owned(),
                    file: file.to_owned(),
                    what: problem,
                });
            }
            damaged = true;
        }
        out.sync_all().map_err(cache_error)?;
        std::fs::rename(partial, blob).map_err(|e| self.cache_error(blob, e))
    }

    /// One GET from where `out` ends to the end of the file.
    fn get_into(
        &self,
        out: &mut File,
        file: &str,
        meta: &Remote,
        report: &mut dyn FnMut(u64, &mut Meter),
        meter: &mut Meter,
    ) -> Result<(), Attempt> {
        let fatal = |e| Attempt::Fatal(self.cache_error(Path::new(file), e));
        let mut start = out.metadata().map_err(fatal)?.len();
        if meta.size.is_some_and(|size| start > size) {
            out.set_len(0).map_err(fatal)?;
            start = 0;
        }
        if meta.size == Some(start) && start > 0 {
            return Ok(());
        }
        let mut request = self.request(&self.data, "GET", &meta.url);
        if start > 0 {
            request = request.set("Range", &format!("bytes={start}-"));
        }
        let response = match request.call() {
            Ok(response) => response,
            Err(ureq::Error::Status(416, _)) => {
                out.set_len(0).map_err(fatal)?;
                return Err(Attempt::Cut("the server refused to resume".to_owned()));
            }
            Err(ureq::Error::Status(status, response)) => {
                let repo = RepoCache::new(&self.hub.cache_dir, self.id);
                return Err(Attempt::Fatal(
                    self.status_error(&repo, file, status, &response),
                ));
            }
            Err(ureq::Error::Transport(t)) => {
                let e = self.transport_error(file, &t, self.hub.timeouts.read);
                return Err(match e {
                    HubError::Unreachable { reason, .. } if t.kind() == ureq::ErrorKind::Io => {
                        Attempt::Cut(reason)
                    }
                    e => Attempt::Fatal(e),
                });
            }
        };
        let offset = match response.status() {
            206 => {
                let from = response
                    .header("Content-Range")
                    .and_then(range_start)
                    .unwrap_or(u64::MAX);
                if from != start {
                    out.set_len(0).map_err(fatal)?;
                    return Err(Attempt::Cut(format!(
                        "asked for bytes from {start}, got them from {from}"
                    )));
                }
                start
            }
            // The server sent the whole file: start over.
            _ => 0,
        };
        out.set_len(offset).map_err(fatal)?;
        out.seek(SeekFrom::Start(offset)).map_err(fatal)?;
        meter.restart();
        report(offset, meter);
        let chunks = read_ahead(response.into_reader());
        let mut done = offset;
        loop {
            if self.hub.cancel.is_cancelled() {
                let _ = out.flush();
                return Err(Attempt::Fatal(HubError::Cancelled {
                    file: file.to_owned(),
                }));
            }
            let chunk = match chunks.recv_timeout(CANCEL_POLL) {
                Ok(Ok(chunk)) => chunk,
                Err(RecvTimeoutError::Timeout) => continue,
                // Ended early without an error: resume as after a cut.
                Ok(Err(None)) if meta.size.is_some_and(|size| done < size) => {
                    return Err(Attempt::Cut(format!("it ended after {done} bytes")));
                }
                Ok(Err(None)) => return Ok(()),
                Ok(Err(Some(e))) if timed_out(&e) => {
                    return Err(Attempt::Fatal(self.stalled(file, self.hub.timeouts.read)));
                }
                Ok(Err(Some(e))) => return Err(Attempt::Cut(e.to_string())),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Attempt::Cut("the reader stopped".to_owned()));
                }
            };
            out.write_all(&chunk).map_err(fatal)?;
            done += chunk.len() as u64;
            report(done, meter);
        }
    }

    fn status_error(
        &self,
        repo: &RepoCache,
        file: &str,
        status: u16,
        response: &ureq::Response,
    ) -> HubError {
        let (id, endpoint) = (self.id.to_owned(), self.hub.endpoint.clone());
        let code = response.header("X-Error-Code").unwrap_or("");
        match status {
            401 | 403 if self.hub.token.is_none() => HubError::NeedsToken { id, endpoint },
            401 | 403 => HubError::TokenRefused {
                id,
                endpoint,
                status,
            },
            404 if code == "RepoNotFound" => HubError::RepoNotFound { id, endpoint },
            404 => {
                // The repository exists: remember the file is missing, so as not to ask again.
                let commit = response
                    .header("X-Repo-Commit")
                    .filter(|c| cache::is_safe_name(c))
                    .map(str::to_owned)
                    .or_else(|| repo.commit());
                if code.is_empty() && commit.is_none() {
                    return HubError::NotFound {
                        id,
                        file: file.to_owned(),
                        endpoint,
                    };
                }
                if let Some(commit) = commit {
                    // Only saves a request next time: a failure changes nothing now.
                    let _ = repo
                        .mark_absent(&commit, file)
                        .and_then(|()| repo.set_commit(&commit));
                }
                HubError::FileNotFound {
                    id,
                    file: file.to_owned(),
                }
            }
            _ => {
                let detail = response
                    .header("X-Error-Message")
                    .map(|m| format!(": {}", m.chars().take(200).collect::<String>()))
                    .unwrap_or_default();
                HubError::Status {
                    id,
                    file: file.to_owned(),
                    endpoint,
                    status,
                    detail,
                }
            }
        }
    }

    pub(in crate::model::source) fn transport_error(
        &self,
        file: &str,
        t: &ureq::Transport,
        waited: Duration,
    ) -> HubError {
        use ureq::ErrorKind as K;
        let endpoint = self.hub.endpoint.clone();
        let io_kind = io_source(t).map(io::Error::kind);
        match t.kind() {
            K::InvalidUrl | K::UnknownScheme => self.not_a_hub(format!(
                "its address does not parse ({t}); check HF_ENDPOINT"
            )),
            K::Dns => HubError::Unreachable {
                endpoint,
                reason: "its name does not resolve".to_owned(),
            },
            K::ConnectionFailed => HubError::Unreachable {
                endpoint,
                reason: match io_kind {
                    Some(io::ErrorKind::ConnectionRefused) => "connection refused".to_owned(),
                    Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
                        "no answer to the connection".to_owned()
                    }
                    _ => t.to_string(),
                },
            },
            K::Io
                if matches!(
                    io_kind,
                    Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
                ) =>
            {
                self.stalled(file, waited)
            }
            K::BadStatus | K::BadHeader => {
                self.not_a_hub(format!("it does not answer in HTTP ({t})"))
            }
            _ => HubError::Unreachable {
                endpoint,
                reason: t.to_string(),
            },
        }
    }

    fn stalled(&self, file: &str, waited: Duration) -> HubError {
        HubError::Stalled {
            id: self.id.to_owned(),
            file: file.to_owned(),
            endpoint: self.hub.endpoint.clone(),
            waited,
        }
    }

    fn not_a_hub(&self, what: String) -> HubError {
        HubError::NotAHub {
            endpoint: self.hub.endpoint.clone(),
            what,
        }
    }

    fn cache_error(&self, path: &Path, source: io::Error) -> HubError {
        HubError::Cache {
            path: path.to_owned(),
            source,
        }
    }
}

/// A chunk of the body, or how it ended: `None` at its end, else the error.
type Chunk = Result<Vec<u8>, Option<io::Error>>;

/// Reads `body` on a thread of its own, so that a cancel is seen within [`CANCEL_POLL`] even
/// while the server is silent; a reader left behind ends with its read's timeout.
fn read_ahead(mut body: Box<dyn Read + Send + Sync>) -> Receiver<Chunk> {
    let (chunks, receiver) = sync_channel(4);
    let spawned = std::thread::Builder::new()
        .name("samplab-download".into())
        .spawn(move || {
            loop {
                let mut buffer = vec![0; CHUNK];
                let chunk = match body.read(&mut buffer) {
                    Ok(0) => Err(None),
                    Ok(n) => {
                        buffer.truncate(n);
                        Ok(buffer)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(Some(e)),
                };
                let last = chunk.is_err();
                if chunks.send(chunk).is_err() || last {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        // No thread: the receiver hears the error at once.
        let (chunks, receiver) = sync_channel(1);
        let _ = chunks.send(Err(Some(e)));
        return receiver;
    }
    receiver
}

fn io_source(t: &ureq::Transport) -> Option<&io::Error> {
    let mut source = std::error::Error::source(t);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io);
        }
        source = e.source();
    }
    None
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// `W/"abc"` and `"abc"` are both `abc`.
fn normalise_etag(etag: &str) -> String {
    etag.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_owned()
}

/// An LFS file's ETag is its sha256.
fn is_sha256(etag: &str) -> bool {
    etag.len() == 64 && etag.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `bytes 100-199/200` starts at 100.
fn range_start(header: &str) -> Option<u64> {
    let range = header.trim().strip_prefix("bytes")?.trim_start();
    range.split('-').next()?.trim().parse().ok()
}

/// Percent-encodes a repository path, keeping its `/`.
pub(in crate::model::source) fn encode_path(file: &str) -> String {
    let mut out = String::with_capacity(file.len());
    for byte in file.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `https://host:port` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

fn same_origin(url: &str, endpoint: &str) -> bool {
    origin(url).eq_ignore_ascii_case(origin(endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_urls_are_read_as_the_hub_writes_them() {
        assert_eq!(normalise_etag("W/\"abc\""), "abc");
        assert_eq!(normalise_etag("\"abc\""), "abc");
        assert!(is_sha256(&"a".repeat(64)));
        assert!(!is_sha256("0123abcd"));
        assert_eq!(range_start("bytes 100-199/200"), Some(100));
        assert_eq!(range_start("items 1-2"), None);
        assert_eq!(encode_path("a b/c+d.gguf"), "a%20b/c%2Bd.gguf");
        assert_eq!(origin("https://hf.co/org/x"), "https://hf.co");
        assert_eq!(origin("http://127.0.0.1:9"), "http://127.0.0.1:9");
        assert!(same_origin("https://HF.co/a", "https://hf.co"));
        assert!(!same_origin("https://cdn.hf.co/a", "https://hf.co"));
    }
}
