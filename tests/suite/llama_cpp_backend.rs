//! The llama.cpp backend against llama.cpp itself (the library called directly, the oracle for
//! this backend), on random-weight models of architectures samplab's engine lacks, written by
//! the tests: `auto` takes llama.cpp for them and says so, their logprobs and greedy tokens are
//! llama.cpp's own, re-runs equal fresh runs on this backend, and samplab's llama.cpp sampler
//! chain draws as llama.cpp's own does.

use crate::llama_fixtures::{write_gemma2, write_lfm2, write_lfm2_with_pre};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use samplab::engine::load::load_model_with;
use samplab::engine::{BackendChoice, BackendKind, Branch, LoadedModel, Prompt, Request};
use samplab::model::Activations;
use samplab::model::device::DeviceChoice;
use samplab::model::source::HubSettings;
use samplab::params::SamplingParams;
use samplab::response::BranchOrigin;
use samplab::response::SampleResponse;
use samplab::sampling::{SampleState, Sampler};
use std::num::NonZeroU32;
use std::path::Path;

const PROMPT: &str = "hello world, this is a test of the backend";

fn load(path: &Path, backend: BackendChoice) -> LoadedModel {
    load_model_with(
        path.to_str().unwrap(),
        &HubSettings::from_env(),
        DeviceChoice::Cpu,
        Activations::Exact,
        backend,
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()))
}

fn params(yaml: &str) -> SamplingParams {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn run(model: &mut LoadedModel, prompt: &str, params: SamplingParams) -> SampleResponse {
    run_branches(model, prompt, params, Vec::new())
}

fn run_branches(
    model: &mut LoadedModel,
    prompt: &str,
    params: SamplingParams,
    branches: Vec<Branch>,
) -> SampleResponse {
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw(prompt),
        lane: 0,
        params,
        branches,
    };
    model
        .run(&request, &mut || false, &mut |_| {})
        .unwrap_or_else(|e| panic!("the run finishes: {e:#}"))
}

fn tokens(response: &SampleResponse) -> Vec<Vec<u32>> {
    response
        .trajectories
        .iter()
        .map(|t| t.token_ids.clone())
        .collect()
}

/// llama.cpp called directly: a context of its own defaults with one sequence.
struct Oracle {
    model: LlamaModel,
}

impl Oracle {
    fn new(path: &Path) -> Self {
        let backend = samplab::engine::llama_cpp::llama_backend().unwrap();
        let params = LlamaModelParams::default().with_n_gpu_layers(0);
        Self {
            model: LlamaModel::load_from_file(backend, path, &params).unwrap(),
        }
    }

    /// llama.cpp's own ids for `text`, BOS added as the model wants, special tokens parsed.
    fn encode(&self, text: &str) -> Vec<u32> {
        let tokens = self.model.vocab().tokenize(text.as_bytes(), true, true);
        tokens.into_iter().map(|t| t.0 as u32).collect()
    }

    /// The logits after every position of `ids`, run as one batch.
    fn logits(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        let backend = samplab::engine::llama_cpp::llama_backend().unwrap();
        let params = LlamaContextParams::default().with_n_ctx(NonZeroU32::new(512));
        let mut context = self.model.new_context(backend, params).unwrap();
        let mut batch = LlamaBatch::new(512, 1);
        for (i, &id) in ids.iter().enumerate() {
            batch
                .add(LlamaToken::new(id as i32), i as i32, &[0], true)
                .unwrap();
        }
        context.decode(&mut batch).unwrap();
        (0..ids.len())
            .map(|i| context.get_logits_ith(i as i32).to_vec())
            .collect()
    }

    /// `steps` greedy tokens after `ids`, one decode call a token.
    fn greedy(&self, ids: &[u32], steps: usize) -> Vec<u32> {
        let backend = samplab::engine::llama_cpp::llama_backend().unwrap();
        let params = LlamaContextParams::default().with_n_ctx(NonZeroU32::new(512));
        let mut context = self.model.new_context(backend, params).unwrap();
        let mut batch = LlamaBatch::new(512, 1);
        for (i, &id) in ids.iter().enumerate() {
            let last = i + 1 == ids.len();
            batch
                .add(LlamaToken::new(id as i32), i as i32, &[0], last)
                .unwrap();
        }
        context.decode(&mut batch).unwrap();
        let mut out = Vec::new();
        let mut index = ids.len() as i32 - 1;
        for step in 0..steps {
            let next = crate::common::argmax(context.get_logits_ith(index));
            out.push(next);
            batch.clear();
            let pos = (ids.len() + step) as i32;
            batch
                .add(LlamaToken::new(next as i32), pos, &[0], true)
                .unwrap();
            context.decode(&mut batch).unwrap();
            index = 0;
        }
        out
    }
}

/// Writes the fixture of `arch` into a new directory.
fn fixture(arch: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{arch}.gguf"));
    match arch {
        "gemma2" => write_gemma2(&path),
        "lfm2" => write_lfm2(&path),
        other => panic!("no fixture for {other}"),
    }
    (dir, path)
}

/// The real binary's `sample --model model` with `args` (and the variable `env`, if any), as a
/// user runs it.
fn sample_cli(model: &Path, args: &[&str], env: Option<(&str, &str)>) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_samplab"));
    command
        .args(["sample", "--model", model.to_str().unwrap()])
        .args(args);
    if let Some((key, value)) = env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// [`sample_cli`] on the llama.cpp backend: the exit code and what it said on stderr.
fn sample_on_llama_cpp(
    model: &Path,
    args: &[&str],
    env: Option<(&str, &str)>,
) -> (Option<i32>, String) {
    let args = [&["--backend", "llama.cpp"], args].concat();
    let output = sample_cli(model, &args, env);
    (output.status.code(), crate::common::stderr(&output))
}

fn auto_takes_llama_cpp_and_matches_llama_cpp_itself(arch: &str) {
    let (_dir, path) = fixture(arch);
    let mut model = load(&path, BackendChoice::Auto);
    assert_eq!(model.backend.kind(), BackendKind::LlamaCpp);
    assert!(
        model
            .warnings
            .iter()
            .any(|w| w.contains(&format!("does not run `{arch}`")) && w.contains("llama.cpp")),
        "{:?}",
        model.warnings
    );
    let response = run(
        &mut model,
        PROMPT,
        params("temperature: 0\nmax_tokens: 12\nprompt_logprobs: 0\nseed: 1\nnum_samples: 1"),
    );
    let ids = response.prompt_token_ids.clone();
    assert!(ids.len() > 4, "{ids:?}");
    let oracle = Oracle::new(&path);
    let logits = oracle.logits(&ids);
    let ours = response.prompt_logprobs.as_ref().unwrap();
    let mut worst = 0f32;
    for i in 1..ids.len() {
        let want = crate::common::log_softmax(&logits[i - 1])[ids[i] as usize];
        let got = ours[i].unwrap();
        worst = worst.max((got - want).abs());
    }
    assert!(
        worst < 1e-5,
        "{arch}: prompt logprobs {worst} from llama.cpp's"
    );
    let made = response.trajectories[0].token_ids.len();
    assert!(made >= 4, "{arch}: only {made} greedy tokens to compare");
    let greedy = oracle.greedy(&ids, made);
    // The run may stop early at EOS; the tokens it made are llama.cpp's greedy ones.
    assert_eq!(response.trajectories[0].token_ids, greedy, "{arch}");
}

#[test]
fn gemma2_samples_through_auto_on_llama_cpp_as_llama_cpp_computes_it() {
    auto_takes_llama_cpp_and_matches_llama_cpp_itself("gemma2");
}

#[test]
fn lfm2_hybrid_samples_through_auto_on_llama_cpp_as_llama_cpp_computes_it() {
    auto_takes_llama_cpp_and_matches_llama_cpp_itself("lfm2");
}

/// Re-runs after a change (replayed from what the last run kept, decoding from the first
/// changed token) and prompt edits (the prompt cache cut where they differ) equal fresh runs.
fn reruns_equal_fresh_runs(arch: &str) {
    let (_dir, path) = fixture(arch);
    let base = "num_samples: 4\nmax_tokens: 16\nseed: 5\ntemperature: 1.0";
    let changed = [
        format!("{base}\ntop_k: 40"),
        base.replace("temperature: 1.0", "temperature: 0.8"),
        base.replace("max_tokens: 16", "max_tokens: 24"),
    ];
    let mut live = load(&path, BackendKind::LlamaCpp.into());
    run(&mut live, PROMPT, params(base));
    for yaml in &changed {
        let rerun = run(&mut live, PROMPT, params(yaml));
        let mut fresh_model = load(&path, BackendKind::LlamaCpp.into());
        let fresh = run(&mut fresh_model, PROMPT, params(yaml));
        assert_eq!(tokens(&rerun), tokens(&fresh), "{arch}: after `{yaml}`");
    }
    // A branch from sample 1's third token, forced to another token: the live model copies
    // sample 1's parked row (a fork), the fresh one computes it.
    let ran = run(&mut live, PROMPT, params(base));
    let parent = &ran.trajectories[1].token_ids;
    let mut forced = parent[..3].to_vec();
    forced.push((parent[3] + 1) % live.backend.vocab_size() as u32);
    let branch = Branch {
        sample: 1,
        origin: BranchOrigin { parent: 1, at: 3 },
        path: forced,
        then: None,
    };
    let forked = run_branches(&mut live, PROMPT, params(base), vec![branch.clone()]);
    let mut fresh_model = load(&path, BackendKind::LlamaCpp.into());
    let fresh = run_branches(&mut fresh_model, PROMPT, params(base), vec![branch]);
    assert_eq!(tokens(&forked), tokens(&fresh), "{arch}: a branch");
    // A prompt that shares the last one's start, then one cut in the middle.
    for prompt in [format!("{PROMPT} and more"), "hello world, it".to_owned()] {
        let rerun = run(&mut live, &prompt, params(base));
        let mut fresh_model = load(&path, BackendKind::LlamaCpp.into());
        let fresh = run(&mut fresh_model, &prompt, params(base));
        assert_eq!(tokens(&rerun), tokens(&fresh), "{arch}: prompt `{prompt}`");
    }
}

#[test]
fn reruns_and_prompt_edits_equal_fresh_runs_on_llama_cpp() {
    reruns_equal_fresh_runs("gemma2");
}

#[test]
fn reruns_and_prompt_edits_equal_fresh_runs_on_a_hybrid_model_on_llama_cpp() {
    reruns_equal_fresh_runs("lfm2");
}

/// Total variation between samplab's processed distribution and llama.cpp's draws.
fn tv_against_draws(ours: &[(u32, f64)], draws: &[u32]) -> f64 {
    let mut ids: Vec<u32> = ours
        .iter()
        .map(|t| t.0)
        .chain(draws.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let n = draws.len() as f64;
    ids.iter()
        .map(|&id| {
            let p = ours.iter().find(|t| t.0 == id).map_or(0.0, |t| t.1);
            let q = draws.iter().filter(|&&d| d == id).count() as f64 / n;
            (p - q).abs()
        })
        .sum::<f64>()
        / 2.0
}

#[test]
fn the_llama_cpp_profile_draws_first_tokens_as_llama_cpps_own_chain_does() {
    let (_dir, path) = fixture("gemma2");
    let mut model = load(&path, BackendKind::LlamaCpp.into());
    let ids = model.encode(PROMPT).unwrap();
    let logits = {
        let backend = model.backend.as_mut();
        backend.reset();
        backend
            .prefill(&ids, ids.len() - 1)
            .unwrap()
            .logits
            .remove(0)
    };
    for (k, p, min_p, t) in [
        (40, 0.95, 0.05, 0.8),
        (20, 0.9, 0.0, 1.3),
        (0, 1.0, 0.1, 1.0),
    ] {
        let yaml = format!(
            "engine: llama.cpp\ntop_k: {k}\ntop_p: {p}\nmin_p: {min_p}\ntemperature: {t}\nrepetition_penalty: 1.0"
        );
        let state = SampleState::new(1, 0, &ids, logits.len());
        let ours: Vec<(u32, f64)> = Sampler::new(&params(&yaml))
            .unwrap()
            .distribution(&logits, &state)
            .unwrap()
            .into_iter()
            .map(|t| (t.id, f64::from(t.prob)))
            .collect();
        let draws: Vec<u32> = (0..4000u32)
            .map(|seed| {
                let mut chain = LlamaSampler::chain_simple([
                    LlamaSampler::top_k(k),
                    LlamaSampler::top_p(p as f32, 1),
                    LlamaSampler::min_p(min_p as f32, 1),
                    LlamaSampler::temp(t as f32),
                    LlamaSampler::dist(seed),
                ]);
                let mut array = LlamaTokenDataArray::from_iter(
                    logits.iter().enumerate().map(|(id, &logit)| {
                        llama_cpp_2::token::data::LlamaTokenData::new(
                            LlamaToken::new(id as i32),
                            logit,
                            0.0,
                        )
                    }),
                    false,
                );
                array.apply_sampler(&mut chain);
                array.selected_token().unwrap().0 as u32
            })
            .collect();
        let tv = tv_against_draws(&ours, &draws);
        assert!(tv < 0.05, "{yaml}: total variation {tv}");
    }
}

/// Mutated copies of a file llama.cpp runs, through the real binary on `--backend llama.cpp`:
/// each is refused or sampled, and none crashes or hangs samplab (a file that gets past
/// samplab's checks and aborts llama.cpp ends the probe's child process, not samplab's).
#[test]
fn hostile_files_through_llama_cpp_neither_crash_nor_hang_samplab() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, path) = fixture("gemma2");
    let clean = std::fs::read(&path).unwrap();
    // The header: the metadata and the tensor table, before the weights.
    let header = 2600.min(clean.len());
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut refused, mut sampled) = (0, 0);
    for case in 0..24 {
        let mut bytes = clean.clone();
        for _ in 0..1 + next() % 3 {
            let at = (next() as usize) % header;
            bytes[at] = [0, 0xff, 0x20, next() as u8][(next() % 4) as usize];
        }
        let hostile = dir.path().join(format!("hostile-{case}.gguf"));
        std::fs::write(&hostile, &bytes).unwrap();
        let args = [
            "--backend",
            "llama.cpp",
            "--prompt",
            "hello",
            "--set",
            "max_tokens=4",
        ];
        let output = sample_cli(&hostile, &args, None);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.signal(),
            None,
            "case {case} crashed: {stderr}"
        );
        assert!(
            !stderr.contains("panicked"),
            "case {case} panicked: {stderr}"
        );
        match output.status.code() {
            Some(0) => sampled += 1,
            Some(1) => {
                assert!(
                    stderr.contains("hostile-"),
                    "case {case} names no file: {stderr}"
                );
                refused += 1;
            }
            other => panic!("case {case} exited with {other:?}: {stderr}"),
        }
    }
    println!("hostile files through llama.cpp: {refused} refused, {sampled} sampled");
    assert!(
        refused > 0,
        "no mutation was refused: the cases test nothing"
    );
}

/// A byte-level vocabulary whose pre-tokenizer samplab does not know is tokenized by llama.cpp,
/// and the notice says so; one it knows keeps samplab's tokenizer, with the same ids.
#[test]
fn prompts_of_a_pre_tokenizer_samplab_lacks_are_tokenized_by_llama_cpp() {
    let text = "Hello, world! 123 <|endoftext|> tokens";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lfm2-pre.gguf");
    write_lfm2_with_pre(&path, Some("glm4"));
    let model = load(&path, BackendKind::LlamaCpp.into());
    assert!(
        model
            .warnings
            .iter()
            .any(|w| w.contains("pre-tokenizer `glm4`") && w.contains("tokenized by llama.cpp")),
        "{:?}",
        model.warnings
    );
    assert!(model.encoder.is_some());
    let oracle = Oracle::new(&path);
    assert_eq!(model.encode(text).unwrap(), oracle.encode(text));

    let (_dir, known) = fixture("lfm2");
    let model = load(&known, BackendKind::LlamaCpp.into());
    assert!(model.encoder.is_none(), "{:?}", model.warnings);
    let oracle = Oracle::new(&known);
    assert_eq!(model.encode(text).unwrap(), oracle.encode(text));
}

/// llama.cpp's log stays off the terminal unless `--verbose` asks for it on stderr; the
/// playground, which draws on the terminal, refuses the flag and says where the log is.
#[test]
fn llama_cpps_log_reaches_stderr_only_under_verbose() {
    let (_dir, path) = fixture("gemma2");
    let sample = |verbose: bool| {
        let mut args = vec!["--prompt", "hello", "--set", "max_tokens=2"];
        if verbose {
            args.push("--verbose");
        }
        let (code, said) = sample_on_llama_cpp(&path, &args, None);
        assert_eq!(code, Some(0), "{said}");
        said
    };
    let quiet = sample(false);
    assert!(!quiet.contains("llama_model_loader"), "{quiet}");
    let verbose = sample(true);
    assert!(
        verbose.contains("llama.cpp: ") && verbose.contains("llama_model_loader"),
        "{verbose}"
    );
    let played = crate::common::samplab(&["--verbose", "--model", path.to_str().unwrap()]);
    let said = crate::common::stderr(&played);
    assert!(
        !played.status.success() && said.contains("notices (`l`)"),
        "{said}"
    );
}

/// A GGUF that neither backend runs gets one error naming its architecture and each backend's
/// reason.
#[test]
fn a_file_neither_backend_runs_is_refused_with_both_reasons() {
    let (dir, path) = fixture("gemma2");
    let bytes = std::fs::read(&path).unwrap();
    // Every `gemma2` (the architecture and its keys' prefix) becomes an architecture no one has.
    let mut out = bytes.clone();
    for at in 0..bytes.len().saturating_sub(6) {
        if &bytes[at..at + 6] == b"gemma2" {
            out[at..at + 6].copy_from_slice(b"gemmaz");
        }
    }
    let unknown = dir.path().join("unknown.gguf");
    std::fs::write(&unknown, &out).unwrap();
    let output = sample_cli(&unknown, &["--prompt", "hello"], None);
    let said = crate::common::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("no backend runs")
            && said.contains("does not run `gemmaz`")
            && said.contains("llama.cpp"),
        "{said}"
    );
}

/// llama.cpp's context holds the prompt and every sample together: a run that outgrows it ends
/// with an error that says so and what to change, and a bad size is refused by name.
#[test]
fn a_run_that_outgrows_llama_cpps_context_says_how_to_make_room() {
    let (_dir, path) = fixture("gemma2");
    let run = |context: &str| {
        let args = [
            "--prompt",
            PROMPT,
            "--set",
            "num_samples=8",
            "--set",
            "max_tokens=40",
        ];
        let args = [&args[..], &["--set", "seed=1", "--set", "stop=[]"]].concat();
        sample_on_llama_cpp(&path, &args, Some(("SAMPLAB_LLAMA_CTX", context)))
    };
    let (code, said) = run("96");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("context is full") && said.contains("SAMPLAB_LLAMA_CTX"),
        "{said}"
    );
    let (code, said) = run("lots");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("SAMPLAB_LLAMA_CTX is `lots`"), "{said}");
    let (code, said) = run("4096");
    assert_eq!(code, Some(0), "{said}");
}

/// The probe's verdict decides: a child that crashes (as llama.cpp aborts) or fails keeps the
/// file from samplab's process, with how it ended and its last words; one that succeeds lets
/// the file through.
#[test]
fn a_file_whose_probe_crashes_is_refused_with_the_childs_last_words() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = fixture("gemma2");
    let probe = |name: &str, body: &str| {
        let script = dir.path().join(name);
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let args = ["--prompt", "hello", "--set", "max_tokens=2"];
        sample_on_llama_cpp(
            &path,
            &args,
            Some(("SAMPLAB_LLAMA_PROBE", script.to_str().unwrap())),
        )
    };
    let (code, said) = probe(
        "aborts.sh",
        "echo 'GGML_ASSERT(n_head > 0) failed' >&2; kill -ABRT $$",
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("crashed (signal 6)") && said.contains("GGML_ASSERT(n_head > 0) failed"),
        "{said}"
    );
    let (code, said) = probe("fails.sh", "echo 'unknown model architecture' >&2; exit 3");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("failed") && said.contains("unknown model architecture"),
        "{said}"
    );
    let (code, said) = probe("passes.sh", "exit 0");
    assert_eq!(code, Some(0), "{said}");
}
