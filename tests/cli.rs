//! The real `samplab` binary, as a user runs it.

mod common;

use std::process::{Command, Output};

fn samplab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(args)
        .output()
        .expect("the samplab binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

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
fn presets_list_shows_the_historical_presets() {
    let out = samplab(&["presets", "list"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("divine-intellect:\n  temperature: 1.31"),
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
