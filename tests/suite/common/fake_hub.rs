//! A fake Hugging Face Hub on 127.0.0.1: a small HTTP/1.1 server thread that answers as the
//! Hub does. `HEAD/GET /<org>/<name>/resolve/main/<file>` gives `X-Repo-Commit`, an `ETag` and
//! `Content-Length`; an LFS file (`.gguf`, `.safetensors`) redirects to `/cdn/<sha256>` with
//! `X-Linked-Etag` and `X-Linked-Size`, as the Hub sends its big files to a CDN. Bytes come
//! with range support (206). Every request is logged, and behaviours break it on purpose: a
//! token to demand, a connection cut in the middle, ranges ignored, a server that stops
//! answering.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

/// Ways to misbehave; the default answers everything well.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// The repositories need `Authorization: Bearer <token>`: 401 without one, 403 with another.
    pub token: Option<String>,
    /// The next GET of a file's bytes sends this many, then closes the connection.
    pub cut_after: Option<usize>,
    /// Answer range requests with the whole file (200).
    pub ignore_range: bool,
    /// Accept requests and never answer them (until `stall_for` has passed).
    pub stall: bool,
    /// GETs of bytes send this many bytes, then fall silent.
    pub stall_body_after: Option<usize>,
    /// LFS files redirect to a path on the Hub's own host, as some mirrors do.
    pub relative_redirects: bool,
}

/// What a fake server holds: its repositories, what it saw, how it misbehaves.
#[derive(Default)]
pub struct Shared {
    pub repos: HashMap<String, Vec<(String, Vec<u8>)>>,
    pub log: Vec<Logged>,
    pub behaviour: Behaviour,
}

/// A fake server's state, shared by its threads and the test, which reaches it through the
/// server (the fake Hub and the fake ModelScope both deref to it).
#[derive(Clone, Default)]
pub struct Serving(Arc<Mutex<Shared>>);

impl Serving {
    /// What the server's threads lock.
    pub fn state(&self) -> &Mutex<Shared> {
        &self.0
    }

    /// Adds repository `id` with these files.
    pub fn repo(&self, id: &str, files: Vec<(String, Vec<u8>)>) -> &Self {
        self.0.lock().unwrap().repos.insert(id.to_owned(), files);
        self
    }

    pub fn behave(&self, behaviour: Behaviour) {
        self.0.lock().unwrap().behaviour = behaviour;
    }

    pub fn log(&self) -> Vec<Logged> {
        self.0.lock().unwrap().log.clone()
    }

    pub fn requests(&self) -> usize {
        self.0.lock().unwrap().log.len()
    }
}

pub struct FakeHub {
    /// `http://127.0.0.1:<port>`, for `HF_ENDPOINT`.
    pub url: String,
    serving: Serving,
}

impl std::ops::Deref for FakeHub {
    type Target = Serving;

    fn deref(&self) -> &Serving {
        &self.serving
    }
}

/// How long a stalled answer stays silent: far beyond the timeouts the tests give the client.
const STALL: Duration = Duration::from_secs(3);

impl FakeHub {
    /// Listens on two ports: the Hub's, and the CDN's that LFS files redirect to (another
    /// origin, as on the real Hub, where the token must not follow).
    pub fn start() -> Self {
        let serving = Serving::default();
        let bind = || TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        let (hub, cdn) = (bind(), bind());
        let url_of = |l: &TcpListener| format!("http://{}", l.local_addr().expect("bound"));
        let (url, cdn_url) = (url_of(&hub), url_of(&cdn));
        for listener in [hub, cdn] {
            let (serving, cdn_url) = (serving.clone(), cdn_url.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let (serving, cdn_url) = (serving.clone(), cdn_url.clone());
                    std::thread::spawn(move || {
                        // A client that hangs up early is not the server's failure.
                        let _ = serve(stream, serving.state(), &cdn_url);
                    });
                }
            });
        }
        Self { url, serving }
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn is_lfs(file: &str) -> bool {
    file.ends_with(".gguf") || file.ends_with(".safetensors")
}

/// A git-blob-like ETag for small files: not a sha256, so not checked as one.
fn small_etag(bytes: &[u8]) -> String {
    sha256_hex(bytes)[..40].to_owned()
}

pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }
}

/// The request line and the headers a fake server looks at.
pub fn read_request(stream: &TcpStream) -> std::io::Result<Logged> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    Ok(Logged {
        method,
        path,
        range: headers.get("range").cloned(),
        authorization: headers.get("authorization").cloned(),
    })
}

fn serve(stream: TcpStream, shared: &Mutex<Shared>, base: &str) -> std::io::Result<()> {
    let logged = read_request(&stream)?;
    let (method, path) = (logged.method.clone(), logged.path.clone());
    let (answer, behaviour) = {
        let mut shared = shared.lock().unwrap();
        shared.log.push(logged.clone());
        let behaviour = shared.behaviour.clone();
        if shared.behaviour.cut_after.is_some() && method == "GET" && is_bytes(&shared, &path) {
            // The cut happens once.
            shared.behaviour.cut_after = None;
        }
        (answer(&shared, &logged, base), behaviour)
    };
    if behaviour.stall {
        std::thread::sleep(STALL);
        return Ok(());
    }
    write_answer(stream, &method, answer, &behaviour)
}

/// Whether a GET of `path` sends a file's bytes (not a redirect or an error).
fn is_bytes(shared: &Shared, path: &str) -> bool {
    path.starts_with("/cdn/")
        || split_resolve(path).is_some_and(|(id, file)| {
            !is_lfs(&file)
                && shared
                    .repos
                    .get(&id)
                    .is_some_and(|files| files.iter().any(|(f, _)| *f == file))
        })
}

/// `/org/name/resolve/main/file` → (`org/name`, `file`).
fn split_resolve(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix('/')?;
    let (id_part, file) = rest.split_once("/resolve/main/")?;
    Some((id_part.to_owned(), file.replace("%20", " ")))
}

fn answer(shared: &Shared, request: &Logged, base: &str) -> Answer {
    if let Some(sha) = request.path.strip_prefix("/cdn/") {
        let found = shared
            .repos
            .values()
            .flatten()
            .find(|(_, bytes)| sha256_hex(bytes) == sha);
        return match found {
            Some((_, bytes)) => bytes_answer(bytes, request, &shared.behaviour),
            None => Answer::new(404),
        };
    }
    let Some((id, file)) = split_resolve(&request.path) else {
        return Answer::new(404);
    };
    let Some(files) = shared.repos.get(&id) else {
        return Answer::new(404).header("X-Error-Code", "RepoNotFound");
    };
    if let Some(token) = &shared.behaviour.token {
        match &request.authorization {
            None => return Answer::new(401).header("X-Error-Code", "GatedRepo"),
            Some(auth) if *auth != format!("Bearer {token}") => return Answer::new(403),
            Some(_) => {}
        }
    }
    let Some((_, bytes)) = files.iter().find(|(f, _)| *f == file) else {
        return Answer::new(404)
            .header("X-Error-Code", "EntryNotFound")
            .header("X-Repo-Commit", COMMIT);
    };
    if is_lfs(&file) {
        let sha = sha256_hex(bytes);
        let base = if shared.behaviour.relative_redirects {
            ""
        } else {
            base
        };
        return Answer::new(302)
            .header("Location", format!("{base}/cdn/{sha}"))
            .header("X-Repo-Commit", COMMIT)
            .header("X-Linked-Etag", format!("\"{sha}\""))
            .header("X-Linked-Size", bytes.len().to_string())
            .header("ETag", format!("\"{}\"", small_etag(sha.as_bytes())));
    }
    bytes_answer(bytes, request, &shared.behaviour)
        .header("X-Repo-Commit", COMMIT)
        .header("ETag", format!("\"{}\"", small_etag(bytes)))
}

/// The bytes from where the request's `Range` starts (206), or all of them (200).
pub fn bytes_answer(bytes: &[u8], request: &Logged, behaviour: &Behaviour) -> Answer {
    let start = request
        .range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok())
        .filter(|_| !behaviour.ignore_range);
    match start {
        Some(start) if start >= bytes.len() => Answer::new(416),
        Some(start) => Answer {
            body: bytes[start..].to_vec(),
            ..Answer::new(206)
        }
        .header(
            "Content-Range",
            format!("bytes {start}-{}/{}", bytes.len() - 1, bytes.len()),
        ),
        None => Answer {
            body: bytes.to_vec(),
            ..Answer::new(200)
        },
    }
}

/// Writes `answer`, cutting or stalling its bytes as `behaviour` asks.
pub fn write_answer(
    mut stream: TcpStream,
    method: &str,
    answer: Answer,
    behaviour: &Behaviour,
) -> std::io::Result<()> {
    let reason = match answer.status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Other",
    };
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", answer.status);
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        answer.body.len()
    ));
    stream.write_all(head.as_bytes())?;
    if method == "HEAD" {
        return Ok(());
    }
    let sends_bytes = matches!(answer.status, 200 | 206);
    match (behaviour.cut_after, behaviour.stall_body_after) {
        (Some(cut), _) if sends_bytes && cut < answer.body.len() => {
            stream.write_all(&answer.body[..cut])?;
            stream.flush()?;
            // Closing with bytes still owed: the client sees the connection break off.
            stream.shutdown(std::net::Shutdown::Both)
        }
        (_, Some(after)) if sends_bytes && after < answer.body.len() => {
            stream.write_all(&answer.body[..after])?;
            stream.flush()?;
            std::thread::sleep(STALL);
            Ok(())
        }
        _ => stream.write_all(&answer.body),
    }
}
