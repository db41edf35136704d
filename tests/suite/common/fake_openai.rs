//! A fake OpenAI-compatible server on 127.0.0.1: `GET /v1/models` lists one or more models,
//! and each `POST` to `/v1/completions` or `/v1/chat/completions` takes the next scripted reply:
//! a stream of chunks (ended by `[DONE]`, or cut), a status with an error body, a stall, or
//! bytes that are not JSON. Every request is logged with its body and `Authorization`.

use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer to a POST.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `data:` chunks (JSON text), then `[DONE]`.
    Stream(Vec<String>),
    /// The chunks, then the connection closes: no `[DONE]`, no finish reason.
    Cut(Vec<String>),
    Status(u16, String),
    /// A JSON answer, not streamed.
    Json(String),
    /// Headers, then silence for longer than any test's timeout.
    Stall,
    /// A chunk that is not JSON.
    Garbage,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Shared {
    replies: VecDeque<Reply>,
    /// Answered when the script has run out.
    fallback: Option<Reply>,
    log: Vec<Logged>,
}

pub struct FakeOpenAi {
    /// `http://127.0.0.1:<port>/v1`.
    pub base: String,
    shared: Arc<Mutex<Shared>>,
}

/// How long a stalled answer stays silent.
const STALL: Duration = Duration::from_secs(3);

impl FakeOpenAi {
    /// Serves `models` as `(id, owned_by)`; POSTs answer `fallback` once `replies` ran out.
    pub fn start(models: &[(&str, &str)], replies: Vec<Reply>, fallback: Option<Reply>) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            replies: replies.into(),
            fallback,
            log: Vec::new(),
        }));
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        let base = format!("http://{}/v1", listener.local_addr().expect("bound"));
        let listing = serde_json::json!({
            "object": "list",
            "data": models
                .iter()
                .map(|(id, owner)| serde_json::json!({"id": id, "object": "model", "owned_by": owner}))
                .collect::<Vec<_>>(),
        })
        .to_string();
        let serving = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (shared, listing) = (Arc::clone(&serving), listing.clone());
                std::thread::spawn(move || {
                    // A client that hangs up early is not the server's failure.
                    let _ = serve(stream, &shared, &listing);
                });
            }
        });
        Self { base, shared }
    }

    pub fn log(&self) -> Vec<Logged> {
        self.shared.lock().unwrap().log.clone()
    }

    /// The bodies of the POSTs, in order.
    pub fn posts(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|l| l.method == "POST")
            .filter_map(|l| l.body)
            .collect()
    }
}

fn serve(stream: TcpStream, shared: &Mutex<Shared>, listing: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let (mut length, mut authorization) = (0, None);
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body = serde_json::from_slice(&body).ok();
    let reply = {
        let mut shared = shared.lock().unwrap();
        shared.log.push(Logged {
            method: method.clone(),
            path: path.clone(),
            body,
            authorization,
        });
        match method.as_str() {
            "POST" => shared
                .replies
                .pop_front()
                .or_else(|| shared.fallback.clone()),
            _ => None,
        }
    };
    match (method.as_str(), path.as_str(), reply) {
        ("GET", "/v1/models", _) => respond(&mut writer, 200, "application/json", listing),
        ("POST", _, Some(reply)) => stream_reply(&mut writer, reply),
        _ => respond(
            &mut writer,
            404,
            "application/json",
            r#"{"detail":"Not Found"}"#,
        ),
    }
}

fn respond(writer: &mut TcpStream, status: u16, kind: &str, body: &str) -> std::io::Result<()> {
    write!(
        writer,
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn stream_reply(writer: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let chunks = |writer: &mut TcpStream, chunks: &[String]| -> std::io::Result<()> {
        for chunk in chunks {
            write!(writer, "data: {chunk}\n\n")?;
            writer.flush()?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    };
    match reply {
        Reply::Stream(list) => {
            writer.write_all(head.as_bytes())?;
            chunks(writer, &list)?;
            writer.write_all(b"data: [DONE]\n\n")
        }
        Reply::Cut(list) => {
            writer.write_all(head.as_bytes())?;
            chunks(writer, &list)
        }
        Reply::Status(status, body) => respond(writer, status, "application/json", &body),
        Reply::Json(body) => respond(writer, 200, "application/json", &body),
        Reply::Stall => {
            writer.write_all(head.as_bytes())?;
            writer.flush()?;
            std::thread::sleep(STALL);
            Ok(())
        }
        Reply::Garbage => {
            writer.write_all(head.as_bytes())?;
            writer.write_all(b"data: {not json\n\n")
        }
    }
}
