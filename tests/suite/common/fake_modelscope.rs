//! A fake ModelScope on 127.0.0.1, speaking the two routes of its HTTP API that downloads use:
//! `GET /api/v1/models/<org>/<name>/repo/files?Revision=master&Recursive=True` lists the files
//! (`{"Code":200,"Data":{"Files":[{"Path","Name","Size","Sha256","Type"}]}}`), and
//! `GET /api/v1/models/<org>/<name>/repo?Revision=master&FilePath=<file>` sends one file's
//! bytes, with range support. It misbehaves as the fake Hub does (see its [`Behaviour`]): a
//! token to demand, a connection cut in the middle once.

use super::fake_hub::{
    Answer, Behaviour, Logged, bytes_answer, read_request, sha256_hex, write_answer,
};
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Shared {
    repos: HashMap<String, Vec<(String, Vec<u8>)>>,
    log: Vec<Logged>,
    behaviour: Behaviour,
}

pub struct FakeModelScope {
    /// `http://127.0.0.1:<port>`, for `MODELSCOPE_DOMAIN`.
    pub url: String,
    shared: Arc<Mutex<Shared>>,
}

impl FakeModelScope {
    pub fn start() -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let serving = Arc::clone(&shared);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&serving);
                // A client that hangs up early is not the server's failure.
                std::thread::spawn(move || drop(serve(stream, &shared)));
            }
        });
        Self { url, shared }
    }

    /// Adds repository `id` with these files.
    pub fn repo(&self, id: &str, files: Vec<(String, Vec<u8>)>) -> &Self {
        self.shared
            .lock()
            .unwrap()
            .repos
            .insert(id.to_owned(), files);
        self
    }

    pub fn behave(&self, behaviour: Behaviour) {
        self.shared.lock().unwrap().behaviour = behaviour;
    }

    pub fn log(&self) -> Vec<Logged> {
        self.shared.lock().unwrap().log.clone()
    }
}

/// The route a request asks for.
enum Route {
    List(String),
    File(String, String),
}

fn route(path: &str) -> Option<Route> {
    let rest = path.strip_prefix("/api/v1/models/")?;
    let (head, query) = rest.split_once('?')?;
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
            .map(|v| v.replace("%20", " ").replace("%2F", "/"))
    };
    if param("Revision").as_deref() != Some("master") {
        return None;
    }
    if let Some(id) = head.strip_suffix("/repo/files") {
        return Some(Route::List(id.to_owned()));
    }
    let id = head.strip_suffix("/repo")?;
    Some(Route::File(id.to_owned(), param("FilePath")?))
}

fn serve(stream: TcpStream, shared: &Mutex<Shared>) -> std::io::Result<()> {
    let request = read_request(&stream)?;
    let (answer, behaviour) = {
        let mut shared = shared.lock().unwrap();
        shared.log.push(request.clone());
        let mut behaviour = shared.behaviour.clone();
        let answer = answer(&shared, &request);
        if matches!(route(&request.path), Some(Route::File(..))) {
            // The cut happens once, and only to a file's bytes.
            shared.behaviour.cut_after = None;
        } else {
            behaviour.cut_after = None;
        }
        (answer, behaviour)
    };
    write_answer(stream, &request.method, answer, &behaviour)
}

fn answer(shared: &Shared, request: &Logged) -> Answer {
    let Some(route) = route(&request.path) else {
        return Answer::new(404);
    };
    let id = match &route {
        Route::List(id) | Route::File(id, _) => id,
    };
    let Some(files) = shared.repos.get(id) else {
        return json(
            404,
            format!(r#"{{"Code":10010205,"Message":"model {id} not exists"}}"#),
        );
    };
    if let Some(token) = &shared.behaviour.token {
        match &request.authorization {
            None => {
                return json(
                    401,
                    r#"{"Code":10010201,"Message":"login required"}"#.into(),
                );
            }
            Some(auth) if *auth != format!("Bearer {token}") => {
                return json(403, r#"{"Code":10010202,"Message":"no access"}"#.into());
            }
            Some(_) => {}
        }
    }
    match route {
        Route::List(_) => {
            let listed: Vec<serde_json::Value> = files
                .iter()
                .map(|(path, bytes)| {
                    serde_json::json!({
                        "Path": path,
                        "Name": path.rsplit('/').next(),
                        "Size": bytes.len(),
                        "Sha256": sha256_hex(bytes),
                        "Type": "blob",
                        "Revision": "master",
                    })
                })
                .collect();
            let body = serde_json::json!({"Code": 200, "Data": {"Files": listed}, "Success": true});
            json(200, body.to_string())
        }
        Route::File(_, file) => match files.iter().find(|(f, _)| *f == file) {
            Some((_, bytes)) => bytes_answer(bytes, request, &shared.behaviour),
            None => json(
                404,
                r#"{"Code":10010205,"Message":"file not exists"}"#.into(),
            ),
        },
    }
}

fn json(status: u16, body: String) -> Answer {
    Answer {
        body: body.into_bytes(),
        ..Answer::new(status)
    }
    .header("Content-Type", "application/json")
}
