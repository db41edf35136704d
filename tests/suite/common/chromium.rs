//! A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! NUL-separated JSON on the browser's file descriptors 3 and 4), to load a page, move the
//! mouse like a person and read what the page shows, collecting every error it reports.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Longer than any of our pages takes to load on a slow, busy machine.
const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Browser {
    child: Child,
    commands: ChildStdin,
    replies: Receiver<Value>,
    next_id: u64,
    /// The page's session, once attached.
    session: Option<String>,
    /// Events seen while waiting for replies, oldest first.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

/// `$SAMPLAB_CHROMIUM`, else `chromium` (Debian's name).
fn binary() -> String {
    std::env::var("SAMPLAB_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned())
}

impl Browser {
    /// A fresh headless browser with an empty profile; `None` when Chromium is not installed
    /// and the test may be skipped, which `SAMPLAB_REQUIRE_TEST_MODEL=1` (CI) forbids.
    pub fn start() -> Option<Self> {
        let binary = binary();
        if Command::new(&binary).arg("--version").output().is_err() {
            assert!(
                std::env::var("SAMPLAB_REQUIRE_TEST_MODEL").as_deref() != Ok("1"),
                "{binary} is not installed; CI must install it (apt-get install chromium), or \
                 SAMPLAB_CHROMIUM name another Chromium"
            );
            eprintln!("skipping: {binary} is not installed (apt-get install chromium)");
            return None;
        }
        let profile = tempfile::tempdir().expect("a temporary directory");
        // The shell hands the browser our stdin as fd 3 (commands) and our stdout as fd 4
        // (replies), which --remote-debugging-pipe reads and writes.
        let script = format!(
            "exec \"$0\" --headless --disable-gpu --no-sandbox --remote-debugging-pipe \
             --no-first-run --no-default-browser-check --disable-extensions \
             --window-size=1400,900 --user-data-dir='{}' about:blank \
             3<&0 4>&1 </dev/null >/dev/null",
            profile.path().display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script, &binary])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh starts");
        let commands = child.stdin.take().expect("a piped stdin");
        let mut output = BufReader::new(child.stdout.take().expect("a piped stdout"));
        let (sender, replies) = channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while output.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|&mut byte| byte == 0);
                if let Ok(value) = serde_json::from_slice(&message)
                    && sender.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        Some(Self {
            child,
            commands,
            replies,
            next_id: 0,
            session: None,
            events: Vec::new(),
            _profile: profile,
        })
    }

    /// Sends `method` (to the page once attached, else to the browser) and waits for its
    /// result; a protocol error fails the test.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON");
        bytes.push(0);
        self.commands
            .write_all(&bytes)
            .and_then(|()| self.commands.flush())
            .expect("the browser reads its pipe");
        let reply = self.wait(|m| m["id"] == id, method);
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// The next message `wanted` accepts, keeping the events read on the way.
    fn wait(&mut self, wanted: impl Fn(&Value) -> bool, what: &str) -> Value {
        if let Some(i) = self.events.iter().position(&wanted) {
            return self.events.remove(i);
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(message) if wanted(&message) => return message,
                Ok(message) => self.events.push(message),
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {what} in {TIMEOUT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the browser quit during {what}"),
            }
        }
    }

    /// Opens `page` in a new tab that reports its errors, and waits for its load event;
    /// returns the time the page itself measured from the start of navigation to the end of
    /// its load event.
    pub fn open(&mut self, page: &Path) -> Duration {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = attached["sessionId"].as_str().map(str::to_owned);
        for domain in ["Runtime.enable", "Page.enable", "Log.enable"] {
            self.call(domain, json!({}));
        }
        let url = format!(
            "file://{}",
            page.canonicalize().expect("the page exists").display()
        );
        self.call("Page.navigate", json!({"url": url}));
        self.wait(|m| m["method"] == "Page.loadEventFired", "the page's load");
        let ms = self.eval("performance.getEntriesByType('navigation')[0].loadEventEnd");
        Duration::from_secs_f64(ms.as_f64().expect("a time in ms") / 1e3)
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        let reply = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(
            reply.get("exceptionDetails").is_none(),
            "{expression} threw: {reply}"
        );
        reply["result"]["value"].clone()
    }

    /// Moves the mouse onto the element `selector` names, scrolled into view: onto the middle
    /// of its first box (a wrapped token has one per line, and the middle of them all may be
    /// another token).
    pub fn hover(&mut self, selector: &str) {
        let selector = serde_json::to_string(selector).expect("JSON");
        let rect = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector}); \
             e.scrollIntoView({{block: 'center'}}); const r = e.getClientRects()[0]; \
             return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        ));
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": rect[0], "y": rect[1]}),
        );
    }

    /// Every uncaught exception, console error and browser-logged error (a blocked fetch, a
    /// refused script) the page reported so far.
    pub fn errors(&mut self) -> Vec<String> {
        // A round trip, so that events sent before it have arrived.
        self.eval("0");
        self.events
            .iter()
            .filter_map(|event| {
                let params = &event["params"];
                match event["method"].as_str()? {
                    "Runtime.exceptionThrown" => Some(params["exceptionDetails"].to_string()),
                    "Runtime.consoleAPICalled" if params["type"] == "error" => {
                        Some(params["args"].to_string())
                    }
                    "Log.entryAdded" if params["entry"]["level"] == "error" => {
                        Some(params["entry"]["text"].to_string())
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

impl Drop for Browser {
    /// Closes the browser as a person would, so that it takes its helper processes along;
    /// kills it if it does not go.
    fn drop(&mut self) {
        let close = json!({"id": 0, "method": "Browser.close"}).to_string() + "\0";
        let _ = self.commands.write_all(close.as_bytes());
        let _ = self.commands.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
