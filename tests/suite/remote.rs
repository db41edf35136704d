//! Remote engines (issue 12) against a fake OpenAI-compatible server: what samplab sends each
//! kind of server, how it reads the completions and chat stream shapes, and every failure a
//! server or the network can cause.
//!
//! The chunk shapes are those of the servers' OpenAI APIs: llama-cpp-python's (recorded from
//! `llama_cpp.server` 0.3.36 serving SmolLM2), and vLLM's (`vllm/entrypoints/openai/
//! protocol.py`: legacy `logprobs` maps with `stop_reason` on completions, `logprobs.content`
//! lists on chat).

use crate::common::fake_openai::{FakeOpenAi, Reply};
use samplab::engine::remote::http::Settings;
use samplab::engine::remote::{RemoteSpec, connect};
use samplab::engine::{Event, Prompt, Request, Runner};
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use samplab::response::{SampleResponse, StopMatched, StopReason};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A completions chunk in the legacy shape: one token with its alternatives.
fn completion(text: &str, logprob: f32, top: &[(&str, f32)], finish: Option<&str>) -> String {
    let top: serde_json::Map<String, Value> = top
        .iter()
        .map(|(t, lp)| ((*t).to_owned(), json!(lp)))
        .collect();
    json!({
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{
            "text": text, "index": 0,
            "logprobs": {"tokens": [text], "text_offset": [0], "token_logprobs": [logprob],
                         "top_logprobs": [top]},
            "finish_reason": finish,
        }],
    })
    .to_string()
}

/// The last chunk: no token, a finish reason (and vLLM's `stop_reason`).
fn finish(reason: &str, stop_reason: Value) -> String {
    json!({"choices": [{"text": "", "index": 0, "logprobs": null, "finish_reason": reason,
                        "stop_reason": stop_reason}]})
    .to_string()
}

/// A chat chunk: `delta.content` with `logprobs.content`.
fn chat(text: &str, logprob: f32, top: &[(&str, f32)]) -> String {
    let top: Vec<Value> = top
        .iter()
        .map(|(t, lp)| json!({"token": t, "logprob": lp, "bytes": t.as_bytes()}))
        .collect();
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": text},
                     "logprobs": {"content": [{"token": text, "logprob": logprob,
                                               "bytes": text.as_bytes(), "top_logprobs": top}]},
                     "finish_reason": null}],
    })
    .to_string()
}

/// A chat chunk of reasoning the server split from the answer: `field` (llama.cpp's and older
/// vLLM's `reasoning_content`, newer vLLM's `reasoning`) with `logprobs.content`.
fn reasoning(field: &str, text: &str, logprob: f32) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {field: text},
                     "logprobs": {"content": [{"token": text, "logprob": logprob,
                                               "bytes": text.as_bytes(), "top_logprobs": []}]},
                     "finish_reason": null}],
    })
    .to_string()
}

/// Three tokens, then `length`.
fn greedy_story() -> Vec<String> {
    vec![
        completion(",", -0.07, &[(",", -0.07), (" in", -4.1)], None),
        completion(" the", -1.81, &[(" the", -1.81), (" a", -2.15)], None),
        completion(
            " city",
            -2.82,
            &[(" city", -2.82), (" company", -3.3)],
            None,
        ),
        finish("length", Value::Null),
    ]
}

fn settings(key: Option<&str>) -> Settings {
    Settings {
        api_key: key.map(str::to_owned),
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_millis(500),
        retries: 2,
        backoff: Duration::from_millis(10),
    }
}

fn request(prompt: Prompt, yaml: &str) -> Request {
    Request {
        run_id: 7,
        prompt,
        lane: 0,
        params: SamplingParams::from_yaml(yaml).unwrap(),
        branches: Vec::new(),
    }
}

/// Connects to `base` and runs `request`; the result and every event.
fn run_at(
    base: &str,
    key: Option<&str>,
    request: &Request,
) -> (anyhow::Result<SampleResponse>, Vec<Event>) {
    let spec = RemoteSpec::parse(base)
        .expect("a URL")
        .expect("a usable URL");
    let mut events = Vec::new();
    let result = connect(spec, settings(key), &mut |_| {})
        .and_then(|mut model| model.run(request, &mut || false, &mut |e| events.push(e)));
    (result, events)
}

fn error_of(result: anyhow::Result<SampleResponse>) -> String {
    format!("{:#}", result.expect_err("the run fails"))
}

#[test]
fn a_raw_prompt_streams_from_completions_with_a_seed_per_sample() {
    let server = FakeOpenAi::start(
        &[("smollm2", "me")],
        Vec::new(),
        Some(Reply::Stream(greedy_story())),
    );
    let request = request(
        Prompt::raw("Once upon a time"),
        "temperature: 0\nmax_tokens: 3\nlogprobs: 1\nnum_samples: 2\nseed: 40",
    );
    let (result, events) = run_at(&server.base, Some("sk-secret"), &request);
    let response = result.unwrap();
    assert_eq!(response.trajectories.len(), 2);
    for t in &response.trajectories {
        assert_eq!(t.text, ", the city");
        assert_eq!(t.logprobs, [-0.07, -1.81, -2.82]);
        assert_eq!(t.stop_reason, StopReason::Length);
        let tops = t.top_logprobs.as_ref().unwrap();
        assert_eq!(tops.len(), 3);
        assert_eq!(tops[1].len(), 1, "logprobs 1 keeps one alternative");
        assert_eq!(tops[1][0].1, " the");
    }
    assert_eq!(response.trajectories[0].seed, 40);
    assert_eq!(response.trajectories[1].seed, 41);

    let posts = server.posts();
    assert_eq!(posts.len(), 2, "one request per sample");
    let mut seeds: Vec<u64> = posts.iter().map(|b| b["seed"].as_u64().unwrap()).collect();
    seeds.sort_unstable();
    assert_eq!(seeds, [40, 41]);
    let body = &posts[0];
    assert_eq!(body["prompt"], "Once upon a time");
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "smollm2");
    assert_eq!(body["logprobs"], 5, "alternatives for the inspector");
    assert_eq!(body["top_k"], 0, "llama.cpp's top_k off");
    assert_eq!(
        body["repeat_penalty"], 1.0,
        "llama-cpp-python's 1.1 is overridden"
    );
    let log = server.log();
    let post = log.iter().find(|l| l.method == "POST").unwrap();
    assert_eq!(post.path, "/v1/completions");
    assert_eq!(post.authorization.as_deref(), Some("Bearer sk-secret"));
    let json = serde_json::to_string(&response).unwrap();
    assert!(!json.contains("sk-secret"), "the key is never written out");

    // Events: started before the first token, tokens with alternatives, a finish per sample.
    let started = events
        .iter()
        .position(|e| matches!(e, Event::Started { .. }))
        .unwrap();
    let first_token = events
        .iter()
        .position(|e| matches!(e, Event::Token { .. }))
        .unwrap();
    assert!(started < first_token);
    let Event::Token { token, .. } = &events[first_token] else {
        unreachable!()
    };
    assert_eq!((token.text.as_str(), token.rank), (",", 1));
    assert_eq!(token.top.len(), 2);
    let finished = events
        .iter()
        .filter(|e| matches!(e, Event::Finished { .. }))
        .count();
    assert_eq!(finished, 2);
}

#[test]
fn a_conversation_goes_to_chat_completions_and_vllm_gets_its_own_fields() {
    let stream = vec![
        chat("Hi", -0.1, &[("Hi", -0.1), ("Hello", -2.5)]),
        chat("!", -0.3, &[("!", -0.3), (".", -1.4)]),
        finish("stop", json!("\n\n")),
    ];
    let server = FakeOpenAi::start(
        &[("Qwen/Qwen2.5-7B", "vllm"), ("other", "vllm")],
        Vec::new(),
        Some(Reply::Stream(stream)),
    );
    let request = request(
        Prompt::chat(vec![
            Message::new("system", "Be brief."),
            Message::new("user", "Hey"),
        ]),
        "top_k: 5\nrepetition_penalty: 1.2\nstop: [\"\\n\\n\", 13]\nmax_tokens: 8",
    );
    let base = format!("{}#Qwen/Qwen2.5-7B", server.base);
    let (result, _) = run_at(&base, None, &request);
    let response = result.unwrap();
    let t = &response.trajectories[0];
    assert_eq!(t.text, "Hi!");
    assert_eq!(t.stop_reason, StopReason::Stop);
    assert_eq!(t.stop_matched, Some(StopMatched::Text("\n\n".into())));
    let body = &server.posts()[0];
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hey"}])
    );
    assert_eq!(
        (body["logprobs"].clone(), body["top_logprobs"].clone()),
        (json!(true), json!(5))
    );
    assert_eq!(body["top_k"], 5);
    assert_eq!(body["repetition_penalty"], 1.2);
    assert_eq!(body["stop"], json!(["\n\n"]));
    assert_eq!(body["stop_token_ids"], json!([13]));
    let chat_post = server
        .log()
        .into_iter()
        .find(|l| l.method == "POST")
        .unwrap();
    assert_eq!(chat_post.path, "/v1/chat/completions");
}

/// A reasoning model's reasoning is told from its answer as the local engine tells gpt-oss's
/// channels: from the delta field a server splits it into, or from harmony's own tokens where
/// a server passes them on in the text; a plain reply has no channels.
#[test]
fn served_reasoning_is_the_analysis_channel_and_the_answer_after_it_final() {
    use samplab::response::channels::Channel::{Analysis, Final};
    let chat_request = request(
        Prompt::chat(vec![Message::new("user", "Hey")]),
        "max_tokens: 8",
    );
    let events_channels = |events: &[Event]| -> Vec<_> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Token { token, .. } => Some(token.channel),
                _ => None,
            })
            .collect()
    };
    for field in ["reasoning_content", "reasoning"] {
        let stream = vec![
            reasoning(field, "Think", -0.2),
            reasoning(field, " hard", -0.4),
            chat("Yes", -0.1, &[("Yes", -0.1)]),
            chat(".", -0.3, &[(".", -0.3)]),
            finish("stop", Value::Null),
        ];
        let server = FakeOpenAi::start(&[("m", "vllm")], Vec::new(), Some(Reply::Stream(stream)));
        let (result, events) = run_at(&server.base, None, &chat_request);
        let t = &result.unwrap().trajectories[0];
        let want = vec![Some(Analysis), Some(Analysis), Some(Final), Some(Final)];
        assert_eq!(t.channels.as_ref(), Some(&want), "{field}");
        assert_eq!(events_channels(&events), want, "{field}");
        assert_eq!(
            t.text, "Think hardYes.",
            "{field}: the reasoning's text is kept"
        );
    }
    // A reasoning message, then the answer's header and its first token.
    let reply = "<|channel|> analysis <|message|> Hm <|end|> <|start|> assistant <|channel|> final";
    let pieces: Vec<&str> = reply.split(' ').chain(["<|message|>", "Yes"]).collect();
    let mut stream: Vec<String> = pieces
        .iter()
        .map(|p| completion(p, -0.5, &[(p, -0.5)], None))
        .collect();
    stream.push(finish("length", Value::Null));
    let server = FakeOpenAi::start(
        &[("gpt-oss", "llamacpp")],
        Vec::new(),
        Some(Reply::Stream(stream)),
    );
    let raw = request(
        Prompt::raw("<|start|>user<|message|>Hey<|end|>"),
        "max_tokens: 11",
    );
    let (result, events) = run_at(&server.base, None, &raw);
    let mut want = vec![None; pieces.len()];
    (want[3], want[10]) = (Some(Analysis), Some(Final));
    let t = &result.unwrap().trajectories[0];
    assert_eq!(t.channels.as_ref(), Some(&want));
    assert_eq!(events_channels(&events), want);
    // vLLM naming tokens by id (`token:42`): a reasoning chunk's text stands in for the piece's.
    let by_id =
        reasoning("reasoning", "Hm", -0.2).replace("\"token\":\"Hm\"", "\"token\":\"token:42\"");
    let server = FakeOpenAi::start(
        &[("m", "vllm")],
        Vec::new(),
        Some(Reply::Stream(vec![by_id, finish("length", Value::Null)])),
    );
    let t = &run_at(&server.base, None, &chat_request)
        .0
        .unwrap()
        .trajectories[0];
    assert_eq!(
        (t.token_ids.as_slice(), t.text.as_str()),
        ([42].as_slice(), "Hm")
    );
    assert_eq!(t.channels, Some(vec![Some(Analysis)]));
    // Reasoning without logprobs is passed over, not refused: the answer's tokens still come.
    let bare = json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Hm"},
                                   "logprobs": null, "finish_reason": null}]})
    .to_string();
    let server = FakeOpenAi::start(
        &[("m", "vllm")],
        Vec::new(),
        Some(Reply::Stream(vec![
            bare,
            chat("Yes", -0.1, &[]),
            finish("stop", Value::Null),
        ])),
    );
    let t = &run_at(&server.base, None, &chat_request)
        .0
        .unwrap()
        .trajectories[0];
    assert_eq!(t.text, "Yes");
    assert_eq!(t.channels, Some(vec![Some(Final)]));
    let plain = FakeOpenAi::start(
        &[("m", "vllm")],
        Vec::new(),
        Some(Reply::Stream(greedy_story())),
    );
    let (result, events) = run_at(&plain.base, None, &raw);
    assert_eq!(result.unwrap().trajectories[0].channels, None);
    assert!(events_channels(&events).iter().all(Option::is_none));
}

/// A run's constraint reaches each server in that server's own field; one the server has no
/// place for is not sent, and the run announces it as not applied before it starts.
#[test]
fn the_constraint_goes_in_each_servers_own_field_or_is_announced_not_applied() {
    let choice = "max_tokens: 3\nstructured_outputs: {choice: [\"yes\", \"no\"]}";
    let gbnf = json!(r#"root ::= "yes" | "no""#);
    let cases = [
        (
            "vllm",
            choice,
            Some(("structured_outputs", json!({"choice": ["yes", "no"]}))),
        ),
        ("llamacpp", choice, Some(("grammar", gbnf.clone()))),
        ("me", choice, Some(("grammar", gbnf))),
        ("openai", choice, None),
        (
            "openai",
            "max_tokens: 3\nstructured_outputs: {json_object: true}",
            Some(("response_format", json!({"type": "json_object"}))),
        ),
        (
            "llamacpp",
            "max_tokens: 3\nstructured_outputs: {regex: '[0-9]+'}",
            None,
        ),
        (
            "me",
            "engine: llama.cpp\nmax_tokens: 3\njson_schema: {type: object}",
            None,
        ),
    ];
    for (owner, yaml, sent) in cases {
        let server = FakeOpenAi::start(
            &[("m", owner)],
            Vec::new(),
            Some(Reply::Stream(greedy_story())),
        );
        let (result, events) = run_at(&server.base, None, &request(Prompt::raw("Once"), yaml));
        result.unwrap();
        let body = &server.posts()[0];
        let constraint_fields = [
            "structured_outputs",
            "response_format",
            "grammar",
            "json_schema",
        ];
        let announced = events.iter().find_map(|e| match e {
            Event::Served { ignored, .. } => Some(ignored.iter().map(|f| f.name()).collect()),
            _ => None,
        });
        let announced: Vec<&str> = announced.unwrap_or_default();
        match sent {
            Some((name, value)) => {
                assert_eq!(body[name], value, "{owner}: {yaml}");
                for other in constraint_fields.iter().filter(|&&f| f != name) {
                    assert!(body.get(other).is_none(), "{owner}: {other} in {body}");
                }
                assert!(announced.is_empty(), "{owner}: {yaml}: {announced:?}");
            }
            None => {
                for field in constraint_fields {
                    assert!(body.get(field).is_none(), "{owner}: {field} in {body}");
                }
                let field = yaml.lines().last().unwrap().split(':').next().unwrap();
                assert!(announced.contains(&field), "{owner}: {yaml}: {announced:?}");
            }
        }
    }
}

#[test]
fn the_server_must_name_its_model_or_serve_only_one() {
    let server = FakeOpenAi::start(&[("a", "vllm"), ("b", "vllm")], Vec::new(), None);
    let request = request(Prompt::raw("x"), "max_tokens: 1");
    let (result, _) = run_at(&server.base, None, &request);
    let message = error_of(result);
    assert!(
        message.contains("serves 2 models") && message.contains("#a"),
        "{message}"
    );
    let (result, _) = run_at(&format!("{}#c", server.base), None, &request);
    let message = error_of(result);
    assert!(
        message.contains("no model `c`") && message.contains("a, b"),
        "{message}"
    );
}

#[test]
fn refused_unresolvable_and_unauthorised_servers_say_what_to_do() {
    let request = request(Prompt::raw("x"), "max_tokens: 1");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (result, _) = run_at(&format!("http://{closed}/v1"), None, &request);
    let message = error_of(result);
    assert!(message.contains("connection refused"), "{message}");
    let (result, _) = run_at("http://no-such-host.invalid/v1", None, &request);
    let message = error_of(result);
    assert!(message.contains("does not resolve"), "{message}");

    for (key, want) in [
        (None, "wants an API key"),
        (Some("wrong"), "refused the API key"),
    ] {
        let server = FakeOpenAi::start(
            &[("m", "openai")],
            Vec::new(),
            Some(Reply::Status(
                401,
                r#"{"error":{"message":"Incorrect API key"}}"#.into(),
            )),
        );
        let (result, _) = run_at(&server.base, key, &request);
        let message = error_of(result);
        assert!(
            message.contains("401")
                && message.contains("Incorrect API key")
                && message.contains(want),
            "{message}"
        );
    }
    let server = FakeOpenAi::start(
        &[("m", "openai")],
        Vec::new(),
        Some(Reply::Status(404, r#"{"detail":"Not Found"}"#.into())),
    );
    let (result, _) = run_at(&server.base, None, &request);
    assert!(error_of(result).contains("the base must be the API's"));
}

#[test]
fn busy_answers_are_retried_with_backoff_until_the_limit() {
    let busy = || Reply::Status(503, r#"{"error":{"message":"overloaded"}}"#.into());
    let server = FakeOpenAi::start(
        &[("m", "me")],
        vec![busy(), Reply::Status(429, "{}".into())],
        Some(Reply::Stream(greedy_story())),
    );
    let request = request(Prompt::raw("x"), "max_tokens: 3");
    let (result, _) = run_at(&server.base, None, &request);
    assert_eq!(result.unwrap().trajectories[0].text, ", the city");
    assert_eq!(server.posts().len(), 3, "two busy answers, then the stream");

    let server = FakeOpenAi::start(&[("m", "me")], Vec::new(), Some(busy()));
    let (result, _) = run_at(&server.base, None, &request);
    let message = error_of(result);
    assert!(
        message.contains("503 (after 3 tries)") && message.contains("overloaded"),
        "{message}"
    );
    assert_eq!(server.posts().len(), 3);
}

#[test]
fn a_cut_stream_keeps_its_tokens_and_ends_the_sample_as_an_error() {
    let server = FakeOpenAi::start(
        &[("m", "me")],
        Vec::new(),
        Some(Reply::Cut(greedy_story()[..2].to_vec())),
    );
    let request = request(Prompt::raw("x"), "max_tokens: 3");
    let (result, events) = run_at(&server.base, None, &request);
    let message = error_of(result);
    assert!(message.contains("connection was cut"), "{message}");
    let tokens = events
        .iter()
        .filter(|e| matches!(e, Event::Token { .. }))
        .count();
    assert_eq!(tokens, 2, "the tokens that came are shown");
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Finished {
            reason: StopReason::Error,
            ..
        }
    )));
}

#[test]
fn a_stalled_server_times_out_and_garbage_is_called_malformed() {
    let request = request(Prompt::raw("x"), "max_tokens: 3");
    let server = FakeOpenAi::start(&[("m", "me")], Vec::new(), Some(Reply::Stall));
    let start = Instant::now();
    let (result, _) = run_at(&server.base, None, &request);
    let message = error_of(result);
    assert!(
        message.contains("sent nothing for 0.5 s") && message.contains("SAMPLAB_REMOTE_TIMEOUT"),
        "{message}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "the timeout, not the stall, ended it"
    );

    let server = FakeOpenAi::start(&[("m", "me")], Vec::new(), Some(Reply::Garbage));
    let (result, _) = run_at(&server.base, None, &request);
    let message = error_of(result);
    assert!(
        message.contains("malformed") && message.contains("not JSON"),
        "{message}"
    );

    let no_logprobs = json!({"choices": [{"text": "hi", "index": 0, "finish_reason": null}]});
    let server = FakeOpenAi::start(
        &[("m", "openai")],
        Vec::new(),
        Some(Reply::Stream(vec![no_logprobs.to_string()])),
    );
    let (result, _) = run_at(&server.base, None, &request);
    assert!(error_of(result).contains("without logprobs"));
}

#[test]
fn a_new_run_cancels_the_streams_at_once() {
    let long: Vec<String> = (0..400)
        .map(|i| completion(&format!(" w{i}"), -1.0, &[], None))
        .collect();
    let server = FakeOpenAi::start(&[("m", "me")], Vec::new(), Some(Reply::Stream(long)));
    let spec = RemoteSpec::parse(&server.base).unwrap().unwrap();
    let mut model = connect(spec, settings(None), &mut |_| {}).unwrap();
    let request = request(Prompt::raw("x"), "max_tokens: 400\nnum_samples: 2");
    let tokens = std::cell::Cell::new(0);
    let start = Instant::now();
    let response = model
        .run(&request, &mut || tokens.get() >= 3, &mut |e| {
            if matches!(e, Event::Token { .. }) {
                tokens.set(tokens.get() + 1);
            }
        })
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "400 chunks take 2 s to stream"
    );
    assert!(
        response
            .trajectories
            .iter()
            .all(|t| t.stop_reason == StopReason::Abort)
    );
}

/// llama-cpp-python's OpenAI server on a free port of 127.0.0.1, stopped on drop.
pub(crate) struct LlamaServer {
    child: std::process::Child,
    pub(crate) base: String,
}

impl LlamaServer {
    /// `None` (the test skips, saying why) without the Python or the model, outside CI.
    pub(crate) fn start() -> Option<(LlamaServer, std::path::PathBuf)> {
        let model = crate::common::real_model()?;
        let python = crate::common::llama_cpp_python()?;
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = std::process::Command::new(python)
            .args([
                "-m",
                "llama_cpp.server",
                "--host",
                "127.0.0.1",
                "--n_threads",
                "2",
            ])
            .args(["--n_ctx", "512", "--port", &port.to_string(), "--model"])
            .arg(&model)
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("the server starts");
        let server = LlamaServer {
            child,
            base: format!("http://127.0.0.1:{port}/v1"),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while ureq::get(&format!("{}/models", server.base))
            .call()
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "the server did not answer in 2 minutes:\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Some((server, model))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn samplab_json(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"))
        .arg("sample")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "samplab sample {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The issue's goal, against a real llama-cpp-python server on the real SmolLM2 Q4_1 file: the
/// server's greedy tokens and logprobs with 5 alternatives each, in samplab's response shape;
/// then the server and the local file side by side, the local model scoring the server's text.
#[test]
fn a_real_llama_cpp_python_server_gives_its_greedy_tokens_and_compares_with_the_local_model() {
    let Some((server, model)) = LlamaServer::start() else {
        return;
    };
    let prompt = "Once upon a time";
    let json = samplab_json(&[
        "--model",
        &server.base,
        "--prompt",
        prompt,
        "--set",
        "temperature=0",
        "--set",
        "max_tokens=32",
        "--set",
        "logprobs=5",
        "--json",
    ]);
    let sample = &json["trajectories"][0];
    // The server's own answer to the same request, not streamed.
    let answer = ureq::post(&format!("{}/completions", server.base))
        .set("Content-Type", "application/json")
        .send_string(
            &json!({"prompt": prompt, "max_tokens": 32, "temperature": 0, "logprobs": 5,
                    "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "top_p": 1.0})
            .to_string(),
        )
        .unwrap();
    let direct: Value = serde_json::from_reader(answer.into_reader()).unwrap();
    let choice = &direct["choices"][0];
    assert_eq!(sample["text"], choice["text"], "the server's greedy text");
    let ours: Vec<f64> = sample["logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let theirs: Vec<f64> = choice["logprobs"]["token_logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(ours.len(), 32);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!((a - b).abs() < 1e-4, "token {i}: {a} vs the server's {b}");
    }
    for tops in sample["top_logprobs"].as_array().unwrap() {
        assert_eq!(tops.as_array().unwrap().len(), 5, "five alternatives each");
    }

    // Several samples, each its own request with its own seed, one after another (this server
    // drops a stream when the next request comes); the same seed gives the same columns.
    let sampled = |_: u32| {
        samplab_json(&[
            "--model",
            &server.base,
            "--prompt",
            prompt,
            "--set",
            "temperature=0.9",
            "--set",
            "max_tokens=12",
            "--set",
            "num_samples=3",
            "--set",
            "seed=7",
            "--json",
        ])
    };
    let (first, again) = (sampled(0), sampled(1));
    let texts = |json: &Value| -> Vec<String> {
        json["trajectories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_ne!(t["stop_reason"], "error", "{t}");
                t["text"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(texts(&first).len(), 3);
    assert_eq!(
        texts(&first),
        texts(&again),
        "seeds make the columns reproducible"
    );
    assert_eq!(
        first["model"], "SmolLM2-135M-Instruct.Q4_1",
        "named after its file"
    );

    let both = samplab_json(&[
        "--model",
        &server.base,
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        prompt,
        "--set",
        "temperature=0",
        "--set",
        "max_tokens=16",
        "--json",
    ]);
    let remote = &both[0]["trajectories"][0];
    let local = &both[1]["trajectories"][0];
    assert_eq!(
        remote["text"], local["text"],
        "the same greedy text, served and local"
    );
    let score = &remote["cross_scores"][0];
    assert_eq!(
        score["retokenized"], true,
        "the served text is tokenized again"
    );
    let mean = |t: &Value| {
        let lps = t["logprobs"].as_array().unwrap();
        lps.iter().map(|v| v.as_f64().unwrap()).sum::<f64>() / lps.len() as f64
    };
    let scored = score["mean_logprob"].as_f64().unwrap();
    assert!(
        (scored - mean(local)).abs() < 0.05,
        "local {} vs scored {scored}",
        mean(local)
    );
}

/// A vLLM server scores another model's sample: prompt and sample tokenized by its `/tokenize`,
/// sent back as ids with `prompt_logprobs: 0`, the sample's positions averaged.
#[test]
fn a_vllm_server_scores_samples_through_prompt_logprobs() {
    use samplab::engine::{ScoreRequest, ScoreSample};
    let completion = json!({"choices": [{"index": 0, "text": "x", "finish_reason": "length",
        "prompt_logprobs": [null, {"5": {"logprob": -3.0, "rank": 4, "decoded_token": " a"}},
                            {"6": {"logprob": -1.0, "rank": 1, "decoded_token": " b"}},
                            {"7": {"logprob": -2.0, "rank": 2, "decoded_token": " c"}}]}]});
    let server = FakeOpenAi::start(
        &[("m", "vllm")],
        vec![
            Reply::Json(r#"{"tokens": [1, 5], "count": 2}"#.into()),
            Reply::Json(r#"{"tokens": [6, 7], "count": 2}"#.into()),
            Reply::Json(completion.to_string()),
        ],
        None,
    );
    let spec = RemoteSpec::parse(&server.base).unwrap().unwrap();
    let mut model = connect(spec, settings(None), &mut |_| {}).unwrap();
    let request = ScoreRequest {
        run_id: 3,
        vocab: 1,
        prompt: Prompt::raw("Once a"),
        rendered: None,
        prompt_token_ids: vec![9, 9],
        samples: vec![ScoreSample {
            index: 0,
            text: " b c".into(),
            token_ids: vec![100, 101],
        }],
        feed: None,
    };
    let scores = model.score(&request, 2, &mut || false).unwrap();
    assert_eq!(scores.len(), 1);
    assert_eq!((scores[0].tokens, scores[0].mean_logprob), (2, -1.5));
    assert!(scores[0].retokenized);
    let log = server.log();
    let paths: Vec<&str> = log
        .iter()
        .filter(|l| l.method == "POST")
        .map(|l| l.path.as_str())
        .collect();
    assert_eq!(paths, ["/tokenize", "/tokenize", "/v1/completions"]);
    let posts = server.posts();
    assert_eq!(
        posts[1]["add_special_tokens"], false,
        "the sample's text adds no BOS"
    );
    assert_eq!(posts[2]["prompt"], json!([1, 5, 6, 7]));
    assert_eq!(posts[2]["prompt_logprobs"], 0);

    let other = FakeOpenAi::start(&[("m", "me")], Vec::new(), None);
    let spec = RemoteSpec::parse(&other.base).unwrap().unwrap();
    let mut model = connect(spec, settings(None), &mut |_| {}).unwrap();
    let message = model
        .score(&request, 2, &mut || false)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("llama-cpp-python returns no prompt logprobs"),
        "{message}"
    );
}

/// `samplab sample` on a served model: the server's answer in the usual JSON, a warning naming
/// the parameters the server has no place for, and a non-zero exit when the server fails.
#[test]
fn samplab_sample_names_what_a_server_ignores_and_fails_with_the_server() {
    let server = FakeOpenAi::start(
        &[("gpt-x", "openai")],
        Vec::new(),
        Some(Reply::Stream(greedy_story())),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([
            "sample",
            "--model",
            &server.base,
            "--prompt",
            "Once",
            "--json",
        ])
        .args(["--set", "top_k=5", "--set", "max_tokens=3"])
        .env("SAMPLAB_API_KEY", "sk-test")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("OpenAI-compatible has no place for top_k: not applied"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-test"));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model"], "gpt-x");
    assert_eq!(json["trajectories"][0]["text"], ", the city");
    assert!(
        server.posts()[0].get("top_k").is_none(),
        "not sent to OpenAI"
    );

    let failing = FakeOpenAi::start(
        &[("m", "me")],
        Vec::new(),
        Some(Reply::Status(500, r#"{"detail":"boom"}"#.into())),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["sample", "--model", &failing.base, "--prompt", "Once"])
        .env("SAMPLAB_REMOTE_TIMEOUT", "2")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("answered 500") && stderr.contains("boom"),
        "{stderr}"
    );
}

/// A GBNF grammar reaches a real llama-cpp-python server as its `grammar` field, which the
/// server applies: every sample of a choice spelled as a grammar is one of its strings.
#[test]
fn a_real_llama_cpp_python_server_applies_a_grammar() {
    let Some((server, _)) = LlamaServer::start() else {
        return;
    };
    let json = samplab_json(&[
        "--model",
        &server.base,
        "--prompt",
        "Is the sky blue? Answer:",
        "--set",
        "engine=llama.cpp",
        "--set",
        r#"grammar=root ::= " yes" | " no" | " maybe""#,
        "--set",
        "num_samples=3",
        "--set",
        "max_tokens=16",
        "--json",
    ]);
    for sample in json["trajectories"].as_array().unwrap() {
        let text = sample["text"].as_str().unwrap();
        assert!([" yes", " no", " maybe"].contains(&text), "{text:?}");
    }
}

#[test]
fn a_served_run_names_its_server_and_model_and_is_not_replayed() {
    let server = FakeOpenAi::start(
        &[("smollm2", "me")],
        Vec::new(),
        Some(Reply::Stream(greedy_story())),
    );
    let request = request(
        Prompt::raw("Once"),
        "max_tokens: 3\nnum_samples: 2\nseed: 40",
    );
    let response = run_at(&server.base, None, &request).0.unwrap();
    let provenance = response.provenance.as_ref().expect("a provenance");
    assert_eq!(provenance.model.source, format!("{}#smollm2", server.base));
    assert_eq!(provenance.model.served_model.as_deref(), Some("smollm2"));
    assert!(
        provenance
            .model
            .server
            .as_deref()
            .is_some_and(|s| s.starts_with("llama-cpp-python at 127.0.0.1:")),
        "{provenance:?}"
    );
    assert!(provenance.model.files.is_empty() && provenance.kernels.is_empty());
    assert!(provenance.chain.is_empty(), "the server's chain is its own");
    assert_eq!(provenance.seeds, [40, 41]);
    let refusal = samplab::engine::reproduce::request_of(&response).unwrap_err();
    assert!(
        refusal.contains("served model")
            && refusal.contains(&format!("--model {}#smollm2 --set seed=40", server.base)),
        "{refusal}"
    );
}
