//! twinkle's shapes, checked by tests/twinkle/check.py, which restates twinkle's dataclasses and
//! loads the real binary's output into them strictly: `sample --json --shape twinkle`,
//! `export --format twinkle`, and presets written as twinkle writes its SamplingParams.

use crate::common;
use samplab::params::{SamplingParams, TokenText, TokenTexts};
use samplab::presets;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PROMPT: &str = "Lily went to the park";

fn samplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(args)
        .output()
        .expect("running samplab")
}

fn success(output: Output) -> Vec<u8> {
    assert!(
        output.status.success(),
        "samplab failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Runs check.py with `args` and `stdin`; `None` when python3 is not installed.
fn check(args: &[&str], stdin: &[u8]) -> Option<Vec<u8>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/twinkle/check.py");
    let Ok(mut child) = Command::new("python3")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipping: python3 is not installed");
        return None;
    };
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin)
        .expect("writing to check.py");
    let output = child.wait_with_output().expect("waiting for check.py");
    assert!(
        output.status.success(),
        "check.py {args:?} failed: {}\non:\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(stdin)
    );
    Some(output.stdout)
}

/// `sample --json --shape twinkle` with `extra` flags, checked as `samples` samples per model.
fn sample_checked(models: &[&str], extra: &[&str], samples: u32, logprobs: bool) -> Vec<u8> {
    let count = format!("num_samples={samples}");
    let mut args = vec!["sample", "--prompt", PROMPT, "--json", "--shape", "twinkle"];
    for model in models {
        args.extend(["--model", model]);
    }
    args.extend(["--set", "max_tokens=6", "--set", "seed=5", "--set", &count]);
    if logprobs {
        args.extend(["--set", "logprobs=0", "--set", "prompt_logprobs=0"]);
    }
    args.extend(extra);
    let json = success(samplab(&args));
    let model_count = models.len().max(1).to_string();
    let samples = samples.to_string();
    let mut check_args = vec![
        "response",
        "--prompt",
        PROMPT,
        "--samples",
        &samples,
        "--models",
        &model_count,
    ];
    if logprobs {
        check_args.extend(["--logprobs", "--prompt-logprobs"]);
    }
    check(&check_args, &json);
    json
}

#[test]
fn raw_samples_load_as_twinkle_responses_with_and_without_logprobs() {
    let json = sample_checked(&[], &[], 3, true);
    let value: Value = serde_json::from_slice(&json).unwrap();
    let logprobs = value["logprobs"].as_array().unwrap();
    assert_eq!(logprobs.len(), 3);
    assert!(logprobs.iter().all(|l| l.as_array().unwrap().len() <= 6));
    sample_checked(&[], &[], 2, false);
}

#[test]
fn several_models_give_one_twinkle_response_each() {
    let Some(stories) = common::test_model() else {
        return;
    };
    let value: Value = serde_json::from_slice(&sample_checked(
        &["samplab-tiny", stories.to_str().unwrap()],
        &[],
        2,
        true,
    ))
    .unwrap();
    assert!(
        value[1].get("cross_scores").is_none() && value[1]["trajectories"][0].is_object(),
        "{value}"
    );
}

/// samplab-tiny as a model directory with a chat template beside it.
fn tiny_with_template(dir: &Path) -> PathBuf {
    let model = dir.join("tiny-chat");
    std::fs::create_dir(&model).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samplab-tiny");
    for file in std::fs::read_dir(source).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, model.join(file.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        model.join("chat_template.jinja"),
        "<s>{% for m in messages %}{{ m['content'] }}{% endfor %}\
         {% if add_generation_prompt %}. The end.\n\n{% endif %}",
    )
    .unwrap();
    model
}

#[test]
fn chat_samples_hold_the_users_text_not_the_rendered_template() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_with_template(dir.path());
    let model = model.to_str().unwrap();
    sample_checked(&[model], &["--chat"], 2, true);
    sample_checked(&[model], &["--chat"], 1, false);
    // The template did frame the prompt: samplab's own shape shows its tokens.
    let prompt_ids = |chat: &[&str]| {
        let args = [
            &["sample", "--model", model, "--prompt", PROMPT][..],
            &["--set", "max_tokens=1", "--json"],
            chat,
        ]
        .concat();
        let value: Value = serde_json::from_slice(&success(samplab(&args))).unwrap();
        value["prompt_token_ids"].clone()
    };
    assert_ne!(prompt_ids(&["--chat"]), prompt_ids(&[]));
}

#[test]
fn shape_needs_json_not_jsonl_and_names_the_valid_shapes() {
    let out = samplab(&["sample", "--prompt", "x", "--json", "--shape", "nonsense"]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        message.contains("samplab") && message.contains("twinkle"),
        "{message}"
    );
    for without_json in [
        &["--shape", "twinkle"][..],
        &["--jsonl", "--shape", "twinkle"],
    ] {
        let out = samplab(&[&["sample", "--prompt", "x"][..], without_json].concat());
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(message.contains("--json"), "{message}");
    }
}

fn export_checked(params: &SamplingParams, expect: Value, expect_vllm: Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("p.yaml");
    std::fs::write(&preset, params.to_yaml()).unwrap();
    let code = success(samplab(&[
        "export",
        "--format",
        "twinkle",
        preset.to_str().unwrap(),
    ]));
    check(
        &[
            "export",
            "--expect",
            &expect.to_string(),
            "--expect-vllm",
            &expect_vllm.to_string(),
        ],
        &code,
    );
    String::from_utf8(code).unwrap()
}

#[test]
fn exported_code_builds_twinkles_sampling_params_from_its_own_fields() {
    let rich = SamplingParams {
        max_tokens: Some(64),
        seed: Some(42),
        stop: Some(TokenTexts(vec![
            TokenText::Text("\n\n".into()),
            TokenText::Token(13),
            TokenText::Text("it's \"done\"".into()),
        ])),
        temperature: 0.7,
        top_k: 40,
        top_p: 0.9,
        min_p: 0.05,
        repetition_penalty: 1.1,
        num_samples: 4,
        logprobs: Some(5),
        prompt_logprobs: Some(0),
        ..SamplingParams::default()
    };
    let code = export_checked(
        &rich,
        json!({"max_tokens": 64, "seed": 42, "stop": ["\n\n", "it's \"done\""],
               "temperature": 0.7, "top_k": 40, "top_p": 0.9, "repetition_penalty": 1.1}),
        json!({"num_samples": 4, "logprobs": true, "prompt_logprobs": 1}),
    );
    assert!(
        code.contains("# twinkle's SamplingParams has no min_p"),
        "{code}"
    );
    export_checked(
        &SamplingParams::default(),
        json!({}),
        json!({"num_samples": 1, "logprobs": false, "prompt_logprobs": 0}),
    );
    let ids = SamplingParams {
        stop: Some(TokenTexts(vec![TokenText::Token(13)])),
        temperature: 0.0,
        num_samples: 3,
        ..SamplingParams::default()
    };
    export_checked(
        &ids,
        json!({"stop": [13], "temperature": 0.0}),
        json!({"num_samples": 1, "logprobs": false, "prompt_logprobs": 0}),
    );
}

#[test]
fn presets_take_twinkles_sampling_params_mapping_unchanged() {
    let Some(stdout) = check(&["params"], b"") else {
        return;
    };
    let mappings: Vec<Value> = serde_json::from_slice(&stdout).unwrap();
    let expected = [
        SamplingParams::default(),
        SamplingParams {
            max_tokens: Some(64),
            seed: Some(7),
            stop: Some(TokenTexts(vec![
                TokenText::Text("\n\n".into()),
                TokenText::Text("The End".into()),
            ])),
            temperature: 0.7,
            top_k: 40,
            top_p: 0.9,
            repetition_penalty: 1.1,
            ..SamplingParams::default()
        },
        SamplingParams {
            stop: Some(TokenTexts(vec![TokenText::Text("\n\n".into())])),
            ..SamplingParams::default()
        },
        SamplingParams {
            stop: Some(TokenTexts(vec![TokenText::Token(13), TokenText::Token(2)])),
            temperature: 0.0,
            ..SamplingParams::default()
        },
    ];
    assert_eq!(mappings.len(), expected.len());
    let dir = tempfile::tempdir().unwrap();
    for (i, (mapping, expected)) in mappings.iter().zip(expected).enumerate() {
        let path = dir.path().join(format!("twinkle-{i}.json"));
        std::fs::write(&path, mapping.to_string()).unwrap();
        let preset = presets::load_file(&path).unwrap_or_else(|e| panic!("{mapping}: {e}"));
        assert_eq!(preset.params, expected, "{mapping}");
        success(samplab(&["presets", "validate", path.to_str().unwrap()]));
    }
}
