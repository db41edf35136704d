//! A fake ModelScope on 127.0.0.1, speaking the two routes of its HTTP API that downloads use:
//! `GET /api/v1/models/<org>/<name>/repo/files?Revision=master&Recursive=True` lists the files
//! (`{"Code":200,"Data":{"Files":[{"Path","Name","Size","Sha256","Type"}]}}`), and
//! `GET /api/v1/models/<org>/<name>/repo?Revision=master&FilePath=<file>` sends one file's
//! bytes, with range support. It misbehaves as the fake Hub does (see its [`super::fake_hub::Behaviour`]): a
//! token to demand, a connection cut in the middle once.

use super::fake_hub::{
    Answer, Logged, Serving, Shared, bytes_answer, read_request, sha256_hex, write_answer,
};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;

pub struct FakeModelScope {
    /// `http://127.0.0.1:<port>`, for `MODELSCOPE_DOMAIN`.
    pub url: String,
    serving: Serving,
}

impl std::ops::Deref for FakeModelScope {
    type Target = Serving;

    fn deref(&self) -> &Serving {
        &self.serving
    }
}

impl FakeModelScope {
    pub fn start() -> Self {
        let serving = Serving::default();
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let threads = serving.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let serving = threads.clone();
                // A client that hangs up early is not the server's failure.
                std::thread::spawn(move || drop(serve(stream, serving.state())));
            }
        });
        Self { url, serving }
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
