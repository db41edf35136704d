//! The real `samplab` binary, as a user runs it.

use crate::common;
use crate::common::{samplab, stderr, stdout};

use samplab::model::Activations;
use std::process::{Command, Output};

#[test]
fn presets_validate_accepts_the_builtins_and_names_the_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "temperature: 0.7\ntop_k: -5\n").unwrap();
    let typo = dir.path().join("typo.yaml");
    std::fs::write(&typo, "top_pp: 0.9\n").unwrap();

    let builtins: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/presets"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let args: Vec<&str> = ["presets", "validate"]
        .into_iter()
        .chain(builtins.iter().map(String::as_str))
        .collect();
    let ok = samplab(&args);
    assert!(ok.status.success(), "{}", stderr(&ok));

    let out = samplab(&[
        "presets",
        "validate",
        bad.to_str().unwrap(),
        typo.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("bad.yaml") && message.contains("`top_k`") && message.contains("-5"),
        "{message}"
    );
    assert!(
        message.contains("typo.yaml")
            && message.contains("`top_pp`")
            && message.contains("did you mean `top_p`"),
        "{message}"
    );
}

#[test]
fn presets_list_shows_the_historical_presets_and_the_saved_ones() {
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("presets")).unwrap();
    std::fs::write(config.path().join("presets/mine.yaml"), "top_k: 7\n").unwrap();
    std::fs::write(config.path().join("presets/broken.yaml"), "top_k: many\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["presets", "list"])
        .env("SAMPLAB_CONFIG_DIR", config.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("divine-intellect:\n  temperature: 1.31"),
        "{text}"
    );
    assert!(text.contains("mine:\n  top_k: 7"), "{text}");
    assert!(text.contains("broken: error:"), "{text}");
    assert!(text.contains("`top_k`"), "{text}");
}

/// Issue 34: `.json` presets were validated but never listed.
#[test]
fn presets_list_shows_json_presets_and_notes_one_a_yaml_shadows() {
    let config = tempfile::tempdir().unwrap();
    let dir = config.path().join("presets");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pasted.json"), r#"{"top_p": 0.5}"#).unwrap();
    std::fs::write(dir.join("mine.yaml"), "top_k: 7\n").unwrap();
    std::fs::write(dir.join("mine.json"), r#"{"top_k": 9}"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["presets", "list"])
        .env("SAMPLAB_CONFIG_DIR", config.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("pasted:\n  top_p: 0.5"), "{text}");
    assert!(text.contains("mine:\n  top_k: 7"), "{text}");
    assert!(
        text.contains("mine.json (shadowed by mine.yaml, which the name loads):\n  top_k: 9"),
        "{text}"
    );
}

#[test]
fn export_writes_each_format_and_rejects_a_bad_preset() {
    let preset = concat!(env!("CARGO_MANIFEST_DIR"), "/presets/balanced.yaml");
    let vllm = samplab(&["export", "--format", "vllm", preset]);
    assert!(vllm.status.success(), "{}", stderr(&vllm));
    let text = stdout(&vllm);
    assert!(
        text.contains("SamplingParams(") && text.contains("top_k=40"),
        "{text}"
    );
    for format in ["transformers", "openai", "llamacpp"] {
        let out = samplab(&["export", "--format", format, preset]);
        assert!(out.status.success(), "{format}: {}", stderr(&out));
        assert!(stdout(&out).contains("0.7"), "{format}: {}", stdout(&out));
    }

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "min_p: 2\n").unwrap();
    let out = samplab(&["export", "--format", "vllm", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`min_p`"), "{}", stderr(&out));
    let out = samplab(&["export", "--format", "nope", preset]);
    assert!(!out.status.success());
}

#[test]
fn sample_prints_json_jsonl_and_plain_text() {
    let Some(model) = common::test_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let base = ["sample", "--model", model, "--prompt", "Once upon a time"];
    let with = |extra: &[&str]| samplab(&[&base[..], extra].concat());

    let out = with(&[
        "--set",
        "temperature=0",
        "--set",
        "max_tokens=12",
        "--set",
        "num_samples=2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let response: samplab::response::SampleResponse = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(response.prompt_token_ids, [1, 403, 407, 261, 378]);
    let prompt = response
        .prompt
        .as_ref()
        .expect("the response keeps its prompt");
    assert_eq!(
        (prompt.text.as_str(), prompt.chat),
        ("Once upon a time", false)
    );
    assert_eq!(prompt.rendered, None);
    assert_eq!(response.trajectories.len(), 2);
    assert!(
        response.trajectories[0]
            .text
            .starts_with(", there was a little girl")
    );

    let out = with(&["--set", "max_tokens=5", "--set", "seed=3", "--jsonl"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let events: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|&&k| k == "token").count(),
        5,
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"done"));
    assert!(kinds.contains(&"started") && kinds.contains(&"finished"));

    let out = with(&[
        "--preset",
        "greedy",
        "--set",
        "max_tokens=8",
        "--set",
        "stop=[\"girl\"]",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("Once upon a time, there was a little \n"),
        "{text}"
    );
    assert!(text.contains("stop \"girl\""), "{text}");
}

#[test]
fn sample_rejects_bad_input_with_a_message() {
    let model = common::test_model();
    let model = model
        .as_deref()
        .and_then(|p| p.to_str())
        .unwrap_or("stories260K.gguf");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--model", model, "--prompt", "x", "--set", "top_p=7"],
            "`top_p`",
        ),
        (
            &["--model", model, "--prompt", "x", "--set", "temprature=1"],
            "did you mean `temperature`",
        ),
        (
            &["--model", model, "--prompt", "x", "--set", "top_k"],
            "key=value",
        ),
        (
            &["--model", model, "--prompt", "x", "--preset", "warm"],
            "no preset named `warm`",
        ),
        (
            &["--model", "/nonexistent/model.gguf", "--prompt", "x"],
            "does not exist",
        ),
    ];
    for (args, expected) in cases {
        let out = samplab(&[&["sample"][..], args].concat());
        assert!(!out.status.success(), "{args:?} should fail");
        let message = stderr(&out);
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(!message.contains("panicked"), "{message}");
    }

    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake.gguf");
    std::fs::write(&fake, "this is not a model").unwrap();
    let out = samplab(&["sample", "--model", fake.to_str().unwrap(), "--prompt", "x"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("fake.gguf"), "{}", stderr(&out));
}

#[test]
fn bench_reports_prefill_and_decode_rates_as_json() {
    let Some(model) = common::test_model() else {
        return;
    };
    let out = samplab(&[
        "bench",
        "--model",
        model.to_str().unwrap(),
        "--samples",
        "1,3",
        "--tokens",
        "4",
        "--prompt-tokens",
        "16",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["prefill_tok_per_s"].as_f64().unwrap() > 0.0);
    let decode = report["decode"].as_array().unwrap();
    assert_eq!(decode.len(), 2);
    assert_eq!(decode[1]["samples"], 3);
    let per_sample = decode[1]["tok_per_s"].as_f64().unwrap();
    let aggregate = decode[1]["aggregate_tok_per_s"].as_f64().unwrap();
    assert!((aggregate - 3.0 * per_sample).abs() < 1e-6 * aggregate);
    assert!(report["weight_bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        report["device"], "cpu",
        "a build without GPU features runs on the CPU"
    );
    let kernels = report["kernels"].as_array().unwrap();
    assert!(!kernels.is_empty());
    assert!(
        kernels
            .iter()
            .all(|k| k["weight_type"].is_string() && k["kernel"].is_string())
    );

    let out = samplab(&[
        "bench",
        "--model",
        model.to_str().unwrap(),
        "--samples",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--samples"), "{}", stderr(&out));
}

/// `--activations` is checked, and the bench reports which arithmetic each weight type ran,
/// the machine's read bandwidth with each decode figure's share of it, and, where the
/// activations are rounded (`auto` means 16bit on a CPU with VNNI), the error that costs.
#[test]
fn activation_precision_is_checked_and_reported_by_the_bench() {
    let out = samplab(&["sample", "--prompt", "Once", "--activations", "8bit"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("write auto (the default: 16bit where the CPU has it, else exact)"),
        "{}",
        stderr(&out)
    );
    let Some(model) = common::real_model() else {
        return;
    };
    let model = model.to_str().expect("a UTF-8 path");
    let vnni = Activations::SixteenBit.check().is_ok();
    let rounded = ("avx512-vnni, 16-bit activations", true);
    let exact = ("f32 activations", false);
    for (precision, (kernel, rounds)) in [
        ("exact", exact),
        ("16bit", rounded),
        ("auto", if vnni { rounded } else { exact }),
    ] {
        let out = samplab(&[
            "bench",
            "--model",
            model,
            "--activations",
            precision,
            "--samples",
            "1",
            "--tokens",
            "1",
            "--prompt-tokens",
            "3",
            "--json",
        ]);
        if precision == "16bit" && !vnni {
            // A CPU without VNNI refuses, saying what to pass instead.
            assert!(!out.status.success());
            assert!(
                stderr(&out).contains("pass --activations exact"),
                "{}",
                stderr(&out)
            );
            eprintln!("skipped: this CPU has no 16-bit path");
            continue;
        }
        assert!(out.status.success(), "{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let q4_1 = report["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["weight_type"] == "q4_1")
            .expect("a q4_1 row");
        let name = q4_1["kernel"].as_str().unwrap();
        assert!(name.ends_with(kernel), "{precision}: {name}");

        let limit = report["read_gb_per_s"]
            .as_f64()
            .expect("a CPU run probes memory");
        let decode = &report["decode"][0];
        let share = decode["of_read_limit"].as_f64().unwrap();
        let weights = decode["weight_gb_per_s"].as_f64().unwrap();
        assert!(
            limit > 0.0 && (share - weights / limit).abs() < 1e-9,
            "{report}"
        );
        // Linux lists its caches; the largest is far larger than nothing.
        if cfg!(target_os = "linux") {
            let cache = report["last_level_cache_bytes"].as_u64();
            assert!(cache.is_some_and(|b| b >= 64 << 10), "{report}");
        }

        let error = &report["error_against_exact"];
        if rounds {
            assert_eq!(error["tokens"], 2, "{precision}: {error}");
            let mean = error["mean_abs_logprob"].as_f64().unwrap();
            assert!((0.0..0.05).contains(&mean), "{precision}: {mean}");
        } else {
            assert!(error.is_null(), "{precision}: {error}");
        }

        // The `loaded` event says which path the probabilities come from.
        let out = samplab(&[
            "sample",
            "--model",
            model,
            "--prompt",
            "Once",
            "--set",
            "max_tokens=1",
            "--jsonl",
            "--activations",
            precision,
        ]);
        let loaded = loaded_event(&out);
        let path = if rounds { "16bit" } else { "exact" };
        assert_eq!(loaded["activations"], path, "{precision}");
    }
}

/// The `loaded` event of a successful `sample --jsonl` run.
fn loaded_event(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .find(|event: &serde_json::Value| event["event"] == "loaded")
        .expect("a loaded event")
}

#[test]
fn device_choice_is_checked_and_shown_in_the_loaded_event() {
    let out = samplab(&[
        "sample",
        "--prompt",
        "Once",
        "--device",
        "cpu",
        "--jsonl",
        "--set",
        "max_tokens=2",
    ]);
    assert_eq!(loaded_event(&out)["device"], "cpu");

    let out = samplab(&["sample", "--prompt", "Once", "--device", "tpu"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("write cpu, cuda, cuda:N"),
        "{}",
        stderr(&out)
    );
    if !cfg!(feature = "cuda") {
        for command in [
            &["sample", "--prompt", "Once"][..],
            &["bench", "--synthetic", "smollm2-135m"],
        ] {
            let out = samplab(&[command, &["--device", "cuda:1"]].concat());
            assert!(!out.status.success());
            let error = stderr(&out);
            assert!(error.contains("built without cuda support"), "{error}");
            assert!(
                error.contains("--features cuda") && error.contains("--device cpu"),
                "{error}"
            );
        }
    }
}

#[test]
fn sample_without_a_model_streams_the_built_in_one() {
    let out = samplab(&[
        "sample",
        "--prompt",
        "Once upon a time",
        "--set",
        "temperature=0",
        "--set",
        "max_tokens=24",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let story = text.split("\n── ").next().unwrap();
    assert!(
        story.starts_with("Once upon a time") && story.len() > "Once upon a time".len() + 24,
        "{text}"
    );
    assert!(text.contains("── length · 24 tokens"), "{text}");
}

#[test]
fn the_playground_checks_its_preset_before_taking_the_terminal() {
    let output = samplab(&["--preset", "no-such-preset"]);
    assert!(
        stderr(&output).contains("no-such-preset"),
        "{}",
        stderr(&output)
    );
    assert!(!output.status.success());
    let output = samplab(&["--model", "m.gguf", "--preset", "no-such-preset"]);
    assert!(
        stderr(&output).contains("no-such-preset"),
        "{}",
        stderr(&output)
    );
    assert!(!output.status.success());
}

/// Issue 14 item 7: `--chat` on a model without a template is not ignored silently: the model
/// gets the raw prompt and stderr says so; a conversation it cannot render is an error.
/// Issue 34: a long prompt had to fit on the command line.
#[test]
fn sample_reads_the_prompt_from_a_file_or_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prompt.txt");
    std::fs::write(&file, "Once upon a time\n").unwrap();
    let args = ["sample", "--set", "max_tokens=3", "--json", "--prompt-file"];
    let prompt_of = |out: &Output| {
        assert!(out.status.success(), "{}", stderr(out));
        let response: samplab::response::SampleResponse =
            serde_json::from_slice(&out.stdout).unwrap();
        response.prompt.unwrap().text
    };
    let out = samplab(&[&args[..], &[file.to_str().unwrap()]].concat());
    assert_eq!(prompt_of(&out), "Once upon a time", "the last newline goes");

    let mut child = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([&args[..], &["-"]].concat())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all("Two lines,\nfrom a pipe".as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(prompt_of(&out), "Two lines,\nfrom a pipe");

    let missing = dir.path().join("none.txt");
    let out = samplab(&["sample", "--prompt-file", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "samplab: the prompt file {} does not exist",
            missing.display()
        )
    );
    let latin1 = dir.path().join("latin1.txt");
    std::fs::write(&latin1, b"caf\xe9").unwrap();
    let out = samplab(&["sample", "--prompt-file", latin1.to_str().unwrap()]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("latin1.txt is not UTF-8 text (byte 3 is not valid UTF-8)"),
        "{message}"
    );
    let out = samplab(&["sample", "--prompt", "x", "--prompt-file", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sample_chat_on_a_model_without_a_template_warns_and_sends_the_raw_prompt() {
    let Some(model) = common::test_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let out = samplab(&[
        "sample",
        "--model",
        model,
        "--prompt",
        "Hi",
        "--chat",
        "--set",
        "max_tokens=2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("has no chat template: it gets the prompt as raw text"),
        "{message}"
    );
    let response: samplab::response::SampleResponse = serde_json::from_slice(&out.stdout).unwrap();
    let prompt = response.prompt.unwrap();
    assert!(!prompt.chat && prompt.rendered.is_none());

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversation.yaml");
    std::fs::write(&file, "- {role: user, content: Hi}\n").unwrap();
    let out = samplab(&[
        "sample",
        "--model",
        model,
        "--messages",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("has no chat template to render the conversation"),
        "{message}"
    );
}

/// Issue 18: `--messages` with several models: each renders the conversation with its own
/// template, and scores the other's samples after it.
#[test]
fn sample_messages_with_two_models_cross_scores_the_conversation() {
    let Some(model) = common::real_model() else {
        eprintln!("skipped: no SmolLM2 model (set SAMPLAB_REAL_MODEL)");
        return;
    };
    let model = model.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conversation.yaml");
    std::fs::write(
        &file,
        "- {role: system, content: Answer in one word.}\n- {role: user, content: Hi}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let out = samplab(&[
        "sample",
        "--model",
        model,
        "--model",
        model,
        "--messages",
        file,
        "--set",
        "max_tokens=3",
        "--set",
        "temperature=0",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let responses: Vec<samplab::response::SampleResponse> =
        serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(responses.len(), 2);
    for response in &responses {
        let prompt = response.prompt.as_ref().unwrap();
        assert_eq!(
            prompt.messages.len(),
            2,
            "the response keeps the conversation"
        );
        assert!(
            prompt
                .rendered
                .as_deref()
                .unwrap()
                .contains("Answer in one word.")
        );
        let trajectory = &response.trajectories[0];
        let scores = trajectory
            .cross_scores
            .as_ref()
            .expect("scored by the other");
        assert_eq!(scores.len(), 1);
        assert!(!scores[0].retokenized && !scores[0].foreign_prompt);
        // The same model under the same rendering finds exactly its own logprobs.
        let own = common::mean_logprob(&trajectory.logprobs);
        assert!(
            (scores[0].mean_logprob - own).abs() < 1e-3,
            "{} vs {own}",
            scores[0].mean_logprob
        );
    }
}

#[test]
fn the_playground_checks_themes_and_user_presets_before_taking_the_terminal() {
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("themes")).unwrap();
    std::fs::write(config.path().join("themes/broken.yaml"), "border: blu\n").unwrap();
    std::fs::create_dir_all(config.path().join("presets")).unwrap();
    std::fs::write(config.path().join("presets/mine.yaml"), "min_p: 0.1\n").unwrap();
    let play = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_samplab"))
            .env("SAMPLAB_CONFIG_DIR", config.path())
            .args(["--model", "m.gguf"])
            .args(args)
            .output()
            .expect("the samplab binary runs")
    };

    let out = play(&["--preset", "nope"]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("no preset named `nope`") && message.contains("are mine"),
        "{message}"
    );

    let out = play(&["--theme", "neon"]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("theme neon: no theme of that name")
            && message.contains("viridis")
            && message.contains("themes"),
        "{message}"
    );

    let out = play(&["--preset", "mine", "--theme", "broken"]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("broken.yaml: `border`: unknown colour `blu`"),
        "{message}"
    );
}

#[test]
fn export_takes_preset_names_preset_and_set_like_sample() {
    let by_name = samplab(&["export", "--format", "vllm", "greedy"]);
    assert!(by_name.status.success(), "{}", stderr(&by_name));
    assert!(
        stdout(&by_name).contains("temperature=0"),
        "{}",
        stdout(&by_name)
    );

    let flags = samplab(&[
        "export", "--format", "vllm", "--preset", "balanced", "--set", "top_k=5",
    ]);
    assert!(flags.status.success(), "{}", stderr(&flags));
    let text = stdout(&flags);
    assert!(
        text.contains("top_k=5") && text.contains("top_p=0.9"),
        "{text}"
    );

    let bad_set = samplab(&["export", "--format", "vllm", "--set", "top_k=-5"]);
    assert!(!bad_set.status.success());
    assert!(
        stderr(&bad_set).contains("--set top_k=-5"),
        "{}",
        stderr(&bad_set)
    );

    let missing = samplab(&["export", "--format", "vllm", "nope"]);
    assert!(!missing.status.success());
    let error = stderr(&missing);
    assert!(error.contains("no preset named `nope`"), "{error}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "min_p: 2\n").unwrap();
    let out = samplab(&["export", "--format", "vllm", bad.to_str().unwrap()]);
    let error = stderr(&out);
    assert_eq!(error.matches("`min_p`").count(), 1, "said once: {error}");
}

#[test]
fn export_names_the_built_in_model_by_its_cached_directory() {
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([
            "export",
            "--format",
            "vllm",
            "greedy",
            "--model",
            "samplab-tiny",
        ])
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let dir = std::fs::read_dir(cache.path().join("samplab/models"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        dir.join("config.json").is_file(),
        "the files are there to load"
    );
    assert!(
        text.contains(&format!("LLM(model=\"{}\")", dir.display())),
        "{text}"
    );
}

#[test]
fn sample_names_the_stop_token_by_its_text_as_the_playground_does() {
    let out = samplab(&[
        "sample",
        "--prompt",
        "Once upon a time",
        "--set",
        "max_tokens=400",
        "--set",
        "seed=1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("── stop </s> · "), "{text}");
    assert!(!text.contains("<token"), "{text}");
}

#[test]
fn escape_sequences_in_files_reach_stderr_escaped() {
    use candle_core::quantized::gguf_file::{self, Value};
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("hostile.gguf");
    let arch = Value::String("llama\x1b]0;PWNED\x07\x1b[2J".to_owned());
    let mut file = std::fs::File::create(&model).unwrap();
    gguf_file::write(&mut file, &[("general.architecture", &arch)], &[]).unwrap();
    let preset = dir.path().join("hostile.yaml");
    std::fs::write(&preset, "\"temp\\e[2J\": 1\n").unwrap();
    let runs = [
        samplab(&[
            "sample",
            "--model",
            model.to_str().unwrap(),
            "--prompt",
            "x",
        ]),
        samplab(&["presets", "validate", preset.to_str().unwrap()]),
    ];
    for output in runs {
        let err = stderr(&output);
        assert!(!output.status.success());
        assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
        assert!(err.contains("\\u{1b}"), "{err}");
    }
}

/// Issue 18: `--messages FILE` renders a whole conversation (a system message, earlier turns)
/// through the model's template; a bad file says what a good one looks like.
#[test]
fn messages_render_a_whole_conversation_through_the_template() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "role: user\n").unwrap();
    let out = samplab(&["sample", "--messages", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("must be a list of messages"),
        "{}",
        stderr(&out)
    );
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "[]\n").unwrap();
    let out = samplab(&["sample", "--messages", empty.to_str().unwrap()]);
    assert!(stderr(&out).contains("has no messages"), "{}", stderr(&out));

    let Some(model) = common::real_model() else {
        eprintln!("skipped the rendering half: no SmolLM2 model (set SAMPLAB_REAL_MODEL)");
        return;
    };
    let file = dir.path().join("conversation.yaml");
    std::fs::write(
        &file,
        "- {role: system, content: You answer in French.}\n\
         - {role: user, content: Hello}\n\
         - {role: assistant, content: Bonjour}\n\
         - {role: user, content: Thanks}\n",
    )
    .unwrap();
    let out = samplab(&[
        "sample",
        "--model",
        model.to_str().unwrap(),
        "--messages",
        file.to_str().unwrap(),
        "--set",
        "max_tokens=1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let response: samplab::response::SampleResponse = serde_json::from_slice(&out.stdout).unwrap();
    let prompt = response.prompt.unwrap();
    assert_eq!(
        prompt.text, "Thanks",
        "the last user message stands for the prompt"
    );
    let rendered = prompt.rendered.unwrap();
    assert!(
        rendered.starts_with("<|im_start|>system\nYou answer in French.<|im_end|>")
            && rendered.contains("<|im_start|>assistant\nBonjour<|im_end|>")
            && rendered.ends_with("<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n"),
        "{rendered:?}"
    );
}

/// `samplab sample ... | head`: a reader that stops early ends the run quietly, as it ends
/// any Unix tool's.
#[test]
fn a_reader_that_stops_early_ends_sample_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["sample", "--prompt", "Once upon a time", "--jsonl"])
        .args(["--set", "max_tokens=8"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the samplab binary runs");
    // The reader is gone before the first line is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("pipe"), "{}", stderr(&out));
}

/// The playground without a terminal (`samplab </dev/null >out`) says what it needs and exits
/// with an error, instead of panicking.
#[test]
fn the_playground_without_a_terminal_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the samplab binary runs");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("needs a terminal") && !said.contains("panicked"),
        "{said}"
    );
}

/// Issue 34: `--set` in the playground is checked as `sample` checks it, before the terminal
/// is taken (so a bad one needs no terminal to be refused), and refused beside `--preset model`,
/// whose defaults would replace it once the model loads.
#[test]
fn the_playgrounds_set_is_checked_before_the_terminal_is_taken() {
    let playground = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("the samplab binary runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        stderr(&out)
    };
    let said = playground(&["--set", "temperature=hot"]);
    assert!(said.contains("--set temperature=hot:"), "{said}");
    let said = playground(&["--set", "temprature=0.5"]);
    assert!(said.contains("temperature"), "a suggestion: {said}");
    let said = playground(&["--preset", "model", "--set", "temperature=0.5"]);
    assert!(
        said.contains("--set cannot go with --preset model"),
        "{said}"
    );
    // A good one gets as far as the terminal.
    let said = playground(&["--set", "temperature=0.5"]);
    assert!(said.contains("needs a terminal"), "{said}");
}

#[test]
fn sweep_runs_every_cell_on_the_same_seeds_and_each_cell_equals_a_sample_run() {
    let Some(model) = common::test_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let base = [
        "--model",
        model,
        "--prompt",
        "Once upon a time",
        "--set",
        "max_tokens=12",
        "--set",
        "num_samples=3",
        "--set",
        "seed=11",
    ];
    let args: Vec<&str> = ["sweep"]
        .into_iter()
        .chain(base)
        .chain([
            "--grid",
            "temperature=0,1.5",
            "--grid",
            "top_k=5,40",
            "--json",
        ])
        .collect();
    let out = samplab(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let sweep: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let cells = sweep["cells"].as_array().unwrap();
    let grid: Vec<String> = cells.iter().map(|c| c["grid"].to_string()).collect();
    assert_eq!(
        grid,
        [
            r#"{"temperature":0.0,"top_k":5}"#,
            r#"{"temperature":0.0,"top_k":40}"#,
            r#"{"temperature":1.5,"top_k":5}"#,
            r#"{"temperature":1.5,"top_k":40}"#,
        ],
        "every combination, the first grid slowest"
    );
    assert_eq!(sweep["seed"], 11);
    // Greedy samples are one group whatever top_k; hot ones differ.
    assert_eq!(
        cells[0]["stats"]["identical"],
        serde_json::json!([[0, 1, 2]])
    );
    assert_eq!(cells[0]["first"], cells[1]["first"]);
    assert_ne!(
        cells[3]["stats"]["identical"],
        serde_json::json!([[0, 1, 2]])
    );
    // A cell is the run `sample` makes with its parameters.
    let args: Vec<&str> = ["sample"]
        .into_iter()
        .chain(base)
        .chain(["--set", "temperature=1.5", "--set", "top_k=40", "--json"])
        .collect();
    let one = samplab(&args);
    assert!(one.status.success(), "{}", stderr(&one));
    let response: serde_json::Value = serde_json::from_str(&stdout(&one)).unwrap();
    assert_eq!(response["trajectories"][0]["text"], cells[3]["first"]);
    assert_eq!(response["stats"], cells[3]["stats"]);

    let csv = samplab(&[
        "sweep",
        "--model",
        model,
        "--prompt",
        "Once",
        "--grid",
        "min_p=0,0.2",
        "--csv",
    ]);
    let text = stdout(&csv);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "a header and a row per cell:\n{text}");
    assert!(lines[0].starts_with("min_p,distinct_1,"), "{}", lines[0]);
    assert!(lines[2].starts_with("0.2,"), "{}", lines[2]);

    let bad = samplab(&[
        "sweep",
        "--model",
        model,
        "--prompt",
        "x",
        "--grid",
        "top_p=0.5,7",
    ]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--grid top_p=7"), "{}", stderr(&bad));
}
