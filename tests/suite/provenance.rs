//! Provenance and `samplab replay` (issue 32, item 5): every response says what ran it, and a
//! results file runs again to the same tokens, or says where and why not.

use crate::common;
use samplab::engine::reproduce::{Difference, first_difference, request_of};
use samplab::engine::{Branch, Prompt, Request};
use samplab::params::SamplingParams;
use samplab::response::results_file;
use samplab::response::{BranchOrigin, SampleResponse, StopReason};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary with its cache in `cache` (so that sha256 entries land where the test looks).
fn samplab(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("the samplab binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A temporary folder, and stories260K copied into `<folder>/model/`.
fn copied_test_model() -> Option<(tempfile::TempDir, PathBuf)> {
    let original = common::test_model()?;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model/stories260K.gguf");
    std::fs::create_dir_all(model.parent().unwrap()).unwrap();
    std::fs::copy(&original, &model).unwrap();
    Some((dir, model))
}

/// `samplab sample --json` of `model` with `extra` flags, written to `<dir>/run.json`.
fn results_file(dir: &Path, model: &Path, extra: &[&str]) -> (PathBuf, Value) {
    let mut args = vec!["sample", "--model", model.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = samplab(dir, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let path = dir.join("run.json");
    std::fs::write(&path, &out.stdout).unwrap();
    (path, serde_json::from_slice(&out.stdout).unwrap())
}

/// `samplab replay` of `value` written to `<dir>/<name>`.
fn replay(dir: &Path, name: &str, value: &Value, extra: &[&str]) -> Output {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    let mut args = vec!["replay", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    samplab(dir, &args)
}

const STORY: [&str; 6] = [
    "--prompt",
    "Once upon a time",
    "--set",
    "num_samples=3",
    "--set",
    "max_tokens=24",
];

/// A run of two tokens.
const BRIEF: [&str; 4] = ["--prompt", "Once", "--set", "max_tokens=2"];

#[test]
fn a_response_names_its_model_file_by_sha256_kept_in_samplabs_cache_not_beside_it() {
    let Some((dir, model)) = copied_test_model() else {
        return;
    };
    let (_, run) = results_file(dir.path(), &model, &STORY);
    let provenance = &run["provenance"];
    assert_eq!(provenance["samplab"], env!("CARGO_PKG_VERSION"));
    let full = std::fs::canonicalize(&model).unwrap();
    assert_eq!(provenance["model"]["source"], full.to_str().unwrap());
    let bytes = std::fs::read(&model).unwrap();
    assert_eq!(
        provenance["model"]["files"],
        json!([{"name": "stories260K.gguf", "size": bytes.len(), "sha256": sha256_hex(&bytes)}])
    );
    assert_eq!(provenance["engine"], "vllm");
    let chain: Vec<&str> = provenance["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        chain.ends_with(&["penalties", "temperature", "min_p", "top_k", "top_p"]),
        "vLLM's order: {chain:?}"
    );
    assert_eq!(provenance["device"], "cpu");
    assert!(
        provenance["kernels"][0]["kernel"].is_string(),
        "{provenance}"
    );
    let seeds: Vec<&Value> = run["trajectories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["seed"])
        .collect();
    assert_eq!(provenance["seeds"], json!(seeds));

    let folder = model.parent().unwrap();
    let names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["stories260K.gguf"],
        "nothing written beside the model"
    );
    let cached: Vec<PathBuf> = std::fs::read_dir(dir.path().join("samplab/sha256"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let mut entry: Value = serde_json::from_slice(&std::fs::read(&cached[0]).unwrap()).unwrap();
    assert_eq!(entry["sha256"], sha256_hex(&bytes));
    assert_eq!(entry["size"], bytes.len());

    // The next run takes the digest from the cache (an entry that says otherwise is believed).
    entry["sha256"] = json!("f".repeat(64));
    std::fs::write(&cached[0], entry.to_string()).unwrap();
    let (_, again) = results_file(dir.path(), &model, &BRIEF);
    assert_eq!(
        again["provenance"]["model"]["files"][0]["sha256"],
        "f".repeat(64)
    );
}

#[test]
fn replay_accepts_an_untouched_file_and_names_the_first_changed_token() {
    let Some((dir, model)) = copied_test_model() else {
        return;
    };
    let (path, run) = results_file(dir.path(), &model, &STORY);
    let out = samplab(dir.path(), &["replay", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("3 samples") && said.contains("every token equals"),
        "{said}"
    );

    let mut changed = run.clone();
    let id = &mut changed["trajectories"][1]["token_ids"][4];
    let original = id.as_u64().unwrap();
    *id = json!(original + 1);
    let out = replay(dir.path(), "changed.json", &changed, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!(
            "sample 1 differs at token 4: the file has #{}",
            original + 1
        )) && said.contains(&format!("the replay #{original}")),
        "{said}"
    );

    // A sample cut short in the file (every per-token list of it, as a results file keeps
    // them even): the replay goes on where the file ended.
    let mut shorter = run.clone();
    let sample = shorter["trajectories"][2].as_object_mut().unwrap();
    let tokens = sample["token_ids"].as_array().unwrap().len();
    let kept = tokens - 3;
    for list in sample.values_mut().filter_map(|v| v.as_array_mut()) {
        if list.len() == tokens {
            list.truncate(kept);
        }
    }
    let out = replay(dir.path(), "shorter.json", &shorter, &[]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!(
            "sample 2 differs at token {kept}: the file has nothing (it ended)"
        )),
        "{said}"
    );
}

#[test]
fn replay_refuses_a_results_file_of_another_model_by_name() {
    let Some((dir, model)) = copied_test_model() else {
        return;
    };
    let (path, run) = results_file(dir.path(), &model, &STORY);
    let out = samplab(
        dir.path(),
        &["replay", path.to_str().unwrap(), "--model", "samplab-tiny"],
    );
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    let sha = run["provenance"]["model"]["files"][0]["sha256"]
        .as_str()
        .unwrap();
    assert!(
        said.contains(&format!("the run read stories260K.gguf (sha256 {sha}"))
            && said.contains("which the model here lacks")
            && said.contains("replay needs the very model the run used"),
        "{said}"
    );

    // The same file name with another digest: the file at the path is not the run's model.
    let mut other = run.clone();
    other["provenance"]["model"]["files"][0]["sha256"] = json!("0".repeat(64));
    let out = replay(dir.path(), "other.json", &other, &[]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!(
            "the run read stories260K.gguf (sha256 {}",
            "0".repeat(64)
        )) && said.contains(&format!("the model here is stories260K.gguf (sha256 {sha}")),
        "{said}"
    );

    // A model that moved is found with --model, and checked.
    let moved = dir.path().join("moved.gguf");
    std::fs::rename(&model, &moved).unwrap();
    let out = samplab(dir.path(), &["replay", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("pass --model"),
        "{}",
        text(&out.stderr)
    );
    let out = samplab(
        dir.path(),
        &[
            "replay",
            path.to_str().unwrap(),
            "--model",
            moved.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn replay_refuses_a_truncated_file_and_files_it_cannot_read_whole() {
    let Some((dir, model)) = copied_test_model() else {
        return;
    };
    let (path, run) = results_file(dir.path(), &model, &STORY);
    let whole = std::fs::read_to_string(&path).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = samplab(dir.path(), &["replay", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stderr);
    assert!(
        said.contains("cut.json ends early") && said.contains("cut off"),
        "{said}"
    );

    let refusal = |value: &Value| {
        let text = serde_json::to_string(value).unwrap();
        results_file::parse(&text, "f.json")
            .and_then(|runs| results_file::require_provenance(&runs, "f.json"))
            .expect_err("refused")
            .to_string()
    };
    let mut old = run.clone();
    old.as_object_mut().unwrap().remove("provenance");
    let said = refusal(&old);
    assert!(
        said.contains("has no `provenance`") && said.contains("older than provenance"),
        "{said}"
    );
    let mut newer = run.clone();
    newer["provenance"]["samplab"] = json!("9.9.9");
    newer["trajectories"][0]["reasoning"] = json!("a field of a later samplab");
    let said = refusal(&newer);
    assert!(
        said.contains("written by samplab 9.9.9") && said.contains("unknown field `reasoning`"),
        "{said}"
    );
    let mut lacking = run.clone();
    lacking["provenance"]
        .as_object_mut()
        .unwrap()
        .remove("seeds");
    assert!(refusal(&lacking).contains("missing field `seeds`"));
    let (_, twinkle) = results_file(
        dir.path(),
        &model,
        &[&BRIEF[..], &["--shape", "twinkle"]].concat(),
    );
    assert!(refusal(&twinkle).contains("twinkle's shape"));
    assert!(refusal(&json!([])).contains("not a SampleResponse"));
    assert!(refusal(&json!([run, 3])).contains("run 2 (of 2) of f.json is not a SampleResponse"));
    let missing = samplab(dir.path(), &["replay", "/nowhere/run.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("cannot read the results file /nowhere/run.json"));
}

/// A run's response as a results file holds it, read back.
fn read_back(response: &SampleResponse) -> SampleResponse {
    let text = serde_json::to_string(response).unwrap();
    results_file::parse(&text, "run.json")
        .unwrap()
        .pop()
        .unwrap()
}

#[test]
fn a_replay_leaves_branches_out_and_refuses_runs_it_cannot_make_again() {
    let Some(mut model) = common::loaded_test_model() else {
        return;
    };
    let params = SamplingParams::from_yaml("num_samples: 2\nmax_tokens: 12\nseed: 5").unwrap();
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw("Once upon a time"),
        lane: 0,
        params,
        branches: vec![Branch {
            sample: 1,
            origin: BranchOrigin { parent: 1, at: 0 },
            path: vec![13],
            then: None,
        }],
    };
    let response = model.run(&request, &mut || false, &mut |_| {}).unwrap();
    let file = read_back(&response);
    let again = request_of(&file).unwrap();
    assert!(again.branches.is_empty(), "branches are picks, not draws");
    assert_eq!(again.params.seed, Some(5));
    let rerun = model.run(&again, &mut || false, &mut |_| {}).unwrap();
    assert_eq!(first_difference(&file, &rerun), None);

    let mut edited = file.clone();
    edited.prompt_token_ids[1] += 1;
    assert!(matches!(
        first_difference(&edited, &rerun),
        Some(Difference::Prompt { at: 1, .. })
    ));
    let mut reseeded = file.clone();
    reseeded.trajectories[1].seed = 99;
    assert_eq!(
        first_difference(&reseeded, &rerun),
        Some(Difference::Seed {
            sample: 1,
            file: 99,
            rerun: 6
        })
    );
    let said = request_of(&reseeded).unwrap_err();
    assert!(said.contains("the file was edited"), "{said}");

    let mut aborted = file.clone();
    aborted.trajectories[0].stop_reason = StopReason::Abort;
    let said = request_of(&aborted).unwrap_err();
    assert!(said.contains("sample 0 ended with `abort`"), "{said}");
    let mut given_ids = file.clone();
    given_ids.prompt = None;
    assert!(
        request_of(&given_ids)
            .unwrap_err()
            .contains("no prompt text")
    );
}

#[test]
fn replay_runs_chat_prompts_and_literal_specials_again_on_smollm2() {
    let Some(model) = common::real_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let messages = dir.path().join("messages.yaml");
    std::fs::write(
        &messages,
        "- {role: system, content: Answer in one word.}\n- {role: user, content: Name a colour.}\n",
    )
    .unwrap();
    let runs: [&[&str]; 2] = [
        &["--messages", messages.to_str().unwrap()],
        &["--prompt", "Hi <|im_end|> there", "--literal-specials"],
    ];
    for extra in runs {
        let mut args = vec!["--set", "num_samples=2", "--set", "max_tokens=10"];
        args.extend_from_slice(extra);
        let (path, run) = results_file(dir.path(), &model, &args);
        assert!(run["provenance"]["activations"].is_string(), "{run}");
        let out = samplab(dir.path(), &["replay", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}
