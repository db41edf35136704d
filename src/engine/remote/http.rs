//! HTTP to the server: JSON requests, streamed answers, the API key, timeouts, and retries of
//! the answers that say "later" (429, 5xx) before anything streamed. Every failure becomes a
//! message that says what went wrong and what would fix it.

use super::spec::RemoteSpec;
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read};
use std::time::Duration;

/// Names the API key; `OPENAI_API_KEY` is read when it is unset.
pub const KEY_VAR: &str = "SAMPLAB_API_KEY";
/// Names the seconds to wait for the first token (and for each one after).
pub const TIMEOUT_VAR: &str = "SAMPLAB_REMOTE_TIMEOUT";

/// How to talk to a server.
#[derive(Clone)]
pub struct Settings {
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    /// The longest wait for the answer to begin and for each chunk after it.
    pub read_timeout: Duration,
    /// Tries after the first when the server answers 429 or 5xx.
    pub retries: u32,
    /// The first wait before trying again; each later one doubles it.
    pub backoff: Duration,
}

impl std::fmt::Debug for Settings {
    // The key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .field("read_timeout", &self.read_timeout)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The key from `SAMPLAB_API_KEY` or `OPENAI_API_KEY`, the timeout from
    /// `SAMPLAB_REMOTE_TIMEOUT` (seconds, 120 without it); 10 s to connect, 3 retries.
    pub fn from_env() -> anyhow::Result<Settings> {
        let api_key = [KEY_VAR, "OPENAI_API_KEY"]
            .into_iter()
            .find_map(|var| std::env::var(var).ok().filter(|k| !k.trim().is_empty()));
        let read_timeout = match std::env::var(TIMEOUT_VAR) {
            Ok(value) => match value.trim().parse::<f64>() {
                Ok(seconds) if seconds > 0.0 && seconds.is_finite() => {
                    Duration::from_secs_f64(seconds)
                }
                _ => anyhow::bail!(
                    "{TIMEOUT_VAR}={value} is not a number of seconds: write e.g. 30 or 0.5"
                ),
            },
            Err(_) => Duration::from_secs(120),
        };
        Ok(Settings {
            api_key,
            connect_timeout: Duration::from_secs(10),
            read_timeout,
            retries: 3,
            backoff: Duration::from_millis(500),
        })
    }
}

/// A server and how to talk to it.
#[derive(Debug, Clone)]
pub struct Client {
    pub spec: RemoteSpec,
    agent: ureq::Agent,
    settings: Settings,
}

impl Client {
    pub fn new(spec: RemoteSpec, settings: Settings) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(settings.connect_timeout)
            .timeout_read(settings.read_timeout)
            .build();
        Client {
            spec,
            agent,
            settings,
        }
    }

    /// `GET url` as JSON.
    pub fn get_json(&self, url: &str) -> anyhow::Result<Value> {
        let response = self.send(url, None)?;
        parse_json(url, response.into_reader())
    }

    /// `GET url` as JSON, `None` when the server has no such path (a probe).
    pub fn probe(&self, url: &str) -> Option<Value> {
        let response = self.request("GET", url).call().ok()?;
        parse_json(url, response.into_reader()).ok()
    }

    /// `POST url` with `body`, its answer to be read as it streams.
    pub fn post_stream(&self, url: &str, body: &Value) -> anyhow::Result<Box<dyn BufRead + Send>> {
        let response = self.send(url, Some(body))?;
        Ok(Box::new(BufReader::new(response.into_reader())))
    }

    /// `POST url` with `body`, its answer as JSON.
    pub fn post_json(&self, url: &str, body: &Value) -> anyhow::Result<Value> {
        let response = self.send(url, Some(body))?;
        parse_json(url, response.into_reader())
    }

    fn request(&self, method: &str, url: &str) -> ureq::Request {
        let request = self
            .agent
            .request(method, url)
            .set("Accept", "application/json, text/event-stream");
        match &self.settings.api_key {
            Some(key) => request.set("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }

    /// Sends, trying again after 429 and 5xx (and after a refused connection, which a
    /// restarting server gives) with a doubling wait, up to the retries allowed.
    fn send(&self, url: &str, body: Option<&Value>) -> anyhow::Result<ureq::Response> {
        let mut wait = self.settings.backoff;
        let mut tries = 0;
        loop {
            let sent = match body {
                Some(body) => self
                    .request("POST", url)
                    .set("Content-Type", "application/json")
                    .send_string(&body.to_string()),
                None => self.request("GET", url).call(),
            };
            let again = match &sent {
                Err(ureq::Error::Status(status, _)) => *status == 429 || *status >= 500,
                _ => false,
            };
            if !again || tries >= self.settings.retries {
                return sent.map_err(|e| self.describe(url, e, tries));
            }
            std::thread::sleep(wait);
            wait *= 2;
            tries += 1;
        }
    }

    /// What a failed request means, in words.
    fn describe(&self, url: &str, error: ureq::Error, retried: u32) -> anyhow::Error {
        let base = &self.spec.base;
        match error {
            ureq::Error::Status(status, response) => {
                let said = server_message(response);
                let tried = if retried > 0 {
                    format!(" (after {} tries)", retried + 1)
                } else {
                    String::new()
                };
                let hint = match status {
                    401 | 403 if self.settings.api_key.is_none() => {
                        format!("the server wants an API key: set {KEY_VAR} (or OPENAI_API_KEY)")
                    }
                    401 | 403 => format!(
                        "the server refused the API key: check {KEY_VAR} (or OPENAI_API_KEY)"
                    ),
                    404 => format!(
                        "no such path or model: the base must be the API's (…/v1), and the \
                         model one that GET {} lists",
                        self.spec.url("models")
                    ),
                    429 => "the server is rate-limiting: wait, or run fewer samples".to_owned(),
                    s if s >= 500 => "the server failed: see its log".to_owned(),
                    _ => "the server did not accept the request".to_owned(),
                };
                anyhow::anyhow!("{url} answered {status}{tried}: {said}; {hint}")
            }
            ureq::Error::Transport(t) => {
                use ureq::ErrorKind as K;
                let io_kind = io_source(&t).map(io::Error::kind);
                match t.kind() {
                    K::Dns => anyhow::anyhow!(
                        "cannot reach {base}: its host name does not resolve; check the URL"
                    ),
                    K::ConnectionFailed if io_kind == Some(io::ErrorKind::ConnectionRefused) => {
                        anyhow::anyhow!(
                            "cannot reach {base}: connection refused; is the server running on \
                             that port?"
                        )
                    }
                    K::ConnectionFailed => anyhow::anyhow!(
                        "cannot reach {base}: no connection within {} s ({t})",
                        self.settings.connect_timeout.as_secs()
                    ),
                    K::Io if is_timeout(io_kind) => self.timed_out(),
                    _ => anyhow::anyhow!("cannot talk to {base}: {t}"),
                }
            }
        }
    }

    /// A server that took longer than the read timeout to answer.
    pub fn timed_out(&self) -> anyhow::Error {
        anyhow::anyhow!(
            "{} sent nothing for {} s: it may be busy or stuck; raise {TIMEOUT_VAR} (seconds) to \
             wait longer",
            self.spec.base,
            self.settings.read_timeout.as_secs_f64()
        )
    }
}

/// Whether an I/O error is a read timeout.
pub fn is_timeout(kind: Option<io::ErrorKind>) -> bool {
    matches!(
        kind,
        Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
    )
}

fn io_source(t: &ureq::Transport) -> Option<&io::Error> {
    std::error::Error::source(t).and_then(|e| e.downcast_ref::<io::Error>())
}

fn parse_json(url: &str, reader: impl Read) -> anyhow::Result<Value> {
    serde_json::from_reader(reader).map_err(|e| {
        anyhow::anyhow!("{url} did not answer in JSON ({e}); is it an OpenAI-compatible API?")
    })
}

/// What the server said in its error body: OpenAI's `error.message`, FastAPI's `detail`, or
/// the start of the text.
fn server_message(response: ureq::Response) -> String {
    let mut text = String::new();
    let _ = response.into_reader().take(4096).read_to_string(&mut text);
    let json: Option<Value> = serde_json::from_str(&text).ok();
    let said = json.as_ref().and_then(|json| {
        json.pointer("/error/message")
            .or_else(|| json.get("message"))
            .or_else(|| json.get("detail"))
            .or_else(|| json.get("error"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
    });
    let said = said.unwrap_or(text);
    // One line in the status bar: tracebacks and pretty-printed JSON are folded.
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = said.chars().take(300).collect();
    let cut = crate::terminal_text::escape_controls(&cut).into_owned();
    if cut.is_empty() {
        "no message".to_owned()
    } else {
        cut
    }
}
