//! Issue 51: what a new user met on the command line — a panic on a closed pipe, errors that
//! named the wrong problem, output that glued a reply to its prompt, silent sweeps, loading
//! lines said twice.

use crate::common;
use crate::common::{samplab, stderr, stdout};
use samplab::model::Activations;
use std::process::{Command, Output, Stdio};

/// The binary with its standard output a pipe whose reader has already gone, as in
/// `samplab … | head -1` once head has its line; its cache in a folder of its own.
fn with_stdout_closed(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let cache = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(args)
        .env("XDG_CACHE_HOME", cache.path())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("the samplab binary runs")
}

/// `samplab sample --set <assignment>`'s error; it fails before any model loads.
fn set_error(assignment: &str) -> String {
    let out = samplab(&["sample", "--prompt", "x", "--set", assignment]);
    assert!(!out.status.success(), "{assignment} is refused");
    stderr(&out)
}

#[test]
fn every_command_ends_quietly_when_its_reader_has_gone() {
    let builtins: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/presets"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let validate: Vec<&str> = ["presets", "validate"]
        .into_iter()
        .chain(builtins.iter().map(String::as_str))
        .collect();
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["presets", "list"],
        validate,
        vec!["export", "--format", "llamacpp"],
    ];
    let model = common::test_model();
    let model = model.as_deref().and_then(|p| p.to_str());
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("run.json");
    if let Some(model) = model {
        let run = samplab(&[
            "sample",
            "--model",
            model,
            "--prompt",
            "Once",
            "--set",
            "max_tokens=3",
            "--json",
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        std::fs::write(&results, &run.stdout).unwrap();
        commands.extend([
            vec![
                "sample",
                "--model",
                model,
                "--prompt",
                "Once",
                "--set",
                "max_tokens=3",
            ],
            vec!["replay", results.to_str().unwrap()],
            vec![
                "sweep",
                "--model",
                model,
                "--prompt",
                "Once",
                "--set",
                "max_tokens=2",
                "--grid",
                "min_p=0,0.2",
                "--json",
            ],
            vec![
                "bench",
                "--model",
                model,
                "--samples",
                "1",
                "--tokens",
                "1",
                "--prompt-tokens",
                "3",
                "--activations",
                "exact",
            ],
        ]);
    }
    for args in commands {
        let out = with_stdout_closed(&args);
        let message = stderr(&out);
        assert!(
            !message.contains("panicked") && !message.contains("failed printing"),
            "{args:?}: {message}"
        );
        assert!(out.status.success(), "{args:?}: {:?} {message}", out.status);
    }
}

#[test]
fn a_whole_number_beyond_its_type_is_out_of_range_and_says_the_range() {
    let message = set_error("max_tokens=100000000000");
    assert!(
        message.contains("`max_tokens` = 100000000000 is out of range")
            && message.contains("1 to 4294967295")
            && !message.contains("wrong type"),
        "{message}"
    );
    let message = set_error("top_k=-3000000000");
    assert!(
        message.contains("out of range") && message.contains("-1 to 2147483647"),
        "{message}"
    );
}

#[test]
fn a_seed_of_minus_one_is_told_that_null_is_samplabs_random_seed() {
    let message = set_error("seed=-1");
    assert!(
        message.contains("`seed` = -1 is out of range")
            && message.contains("or null for a random one, which is what -1 means in llama.cpp"),
        "{message}"
    );
}

#[test]
fn a_mistyped_preset_name_gets_the_nearest_one() {
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config.path().join("presets")).unwrap();
    std::fs::write(config.path().join("presets/my-story.yaml"), "top_k: 7\n").unwrap();
    let run = |preset: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
            .args(["sample", "--prompt", "x", "--preset", preset])
            .env("SAMPLAB_CONFIG_DIR", config.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        stderr(&out)
    };
    let message = run("creatve");
    assert!(message.contains("(did you mean `creative`?)"), "{message}");
    let message = run("my-stroy");
    assert!(message.contains("(did you mean `my-story`?)"), "{message}");
    // Nothing near: no guess, and the names to choose from.
    let message = run("zzzzzzzzzzzzzz");
    assert!(!message.contains("did you mean"), "{message}");
    assert!(
        message.contains("built-ins are default, greedy") && message.contains("my-story"),
        "{message}"
    );
}

#[test]
fn a_missing_schema_file_is_named_as_not_found() {
    let message = set_error("structured_outputs={json: missing-schema.json}");
    assert!(
        message.contains("the schema file `missing-schema.json` was not found")
            && !message.contains("wrong type")
            && !message.contains("got a mapping"),
        "{message}"
    );
    let message = set_error("json_schema=missing-schema.json");
    assert!(
        message.contains("the schema file `missing-schema.json` was not found"),
        "{message}"
    );
    // The dotted key people try says how to write it.
    let message = set_error("structured_outputs.json=missing-schema.json");
    assert!(
        message.contains("structured_outputs={json: …}"),
        "{message}"
    );
}

#[test]
fn a_chat_reply_is_printed_apart_from_the_prompt_and_one_token_is_one_token() {
    let Some(model) = common::real_model() else {
        return;
    };
    let model = model.to_str().unwrap();
    let prompt = "Name a colour.";
    let args = |json: bool| {
        let mut args = vec![
            "sample",
            "--model",
            model,
            "--chat",
            "--prompt",
            prompt,
            "--set",
            "max_tokens=1",
            "--set",
            "temperature=0",
        ];
        if json {
            args.push("--json");
        }
        args
    };
    let response = samplab(&args(true));
    assert!(response.status.success(), "{}", stderr(&response));
    let response: serde_json::Value = serde_json::from_slice(&response.stdout).unwrap();
    let reply = response["trajectories"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let plain = samplab(&args(false));
    assert!(plain.status.success(), "{}", stderr(&plain));
    let text = stdout(&plain);
    assert!(
        text.starts_with(&format!("{reply}\n── length · 1 token · ")),
        "the reply alone, then its summary:\n{text}"
    );
}

#[test]
fn a_sweep_says_its_seed_and_each_finished_cell() {
    let Some(model) = common::test_model() else {
        return;
    };
    let out = samplab(&[
        "sweep",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "Once",
        "--set",
        "max_tokens=2",
        "--grid",
        "min_p=0,0.2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sweep: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let message = stderr(&out);
    assert!(
        message.contains(&format!("sweeping 2 cells with seed {}", sweep["seed"])),
        "{message}"
    );
    assert!(
        message.contains("cell 1/2 done: min_p=0.0\n")
            && message.contains("cell 2/2 done: min_p=0.2\n"),
        "{message}"
    );
}

#[test]
fn a_bench_shows_its_loading_steps_once() {
    // Rounded activations are what load the model a second time, for the exact reference.
    if Activations::SixteenBit.check().is_err() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args([
            "bench",
            "--synthetic",
            "smollm2-135m",
            "--qtype",
            "q4_0",
            "--activations",
            "16bit",
            "--samples",
            "1",
            "--tokens",
            "1",
            "--prompt-tokens",
            "3",
            "--json",
        ])
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let message = stderr(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["error_against_exact"].is_object(),
        "the exact reference loaded"
    );
    assert_eq!(
        message.lines().filter(|line| *line == "ready").count(),
        1,
        "{message}"
    );
}
