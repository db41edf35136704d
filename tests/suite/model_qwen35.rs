//! Qwen3.5's Gated DeltaNet layers keep a recurrent state instead of keys and values: it cannot
//! be cut back to any position, only to the snapshots it kept. Everything that goes back
//! (replays, branches, prompt edits, batches) must still equal a fresh run to the bit.

use crate::common;
use crate::model_families::{altered, folder, load_error};
use crate::replay::stories_branches;
use candle_core::Device;
use candle_core::quantized::gguf_file::Value;
use proptest::prelude::*;
use samplab::engine::score::common_prefix;
use samplab::engine::{Branch, LoadedModel};
use samplab::model::{Model, Snapshots};
use samplab::params::SamplingParams;
use samplab::response::{BranchOrigin, SampleResponse};

fn model(snapshots: Snapshots) -> Model {
    let mut model = Model::load(&folder("qwen35").join("model.q8_0.gguf"), &Device::Cpu).unwrap();
    model.set_snapshots(snapshots);
    model
}

fn bits(rows: &[Vec<f32>]) -> Vec<Vec<u32>> {
    rows.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

const PROMPT: [u32; 9] = [2, 260, 262, 264, 261, 263, 265, 10, 40];

/// Rows decoded side by side equal rows decoded alone, and a prompt run in pieces equals it
/// run at once: the recurrence runs token by token, each row on its own.
#[test]
fn batched_rows_and_split_prompts_equal_single_runs() {
    let model = model(Snapshots::NONE);
    let next = [263u32, 10, 40, 266, 70];
    let single: Vec<Vec<Vec<u32>>> = next
        .iter()
        .map(|&t| {
            let mut session = model.session();
            session.prefill(&PROMPT, false).unwrap();
            bits(&session.decode_step(&[t]).unwrap())
        })
        .collect();
    let mut session = model.session();
    session.prefill(&PROMPT, false).unwrap();
    session.fork(next.len()).unwrap();
    let batch = bits(&session.decode_step(&next).unwrap());
    for (i, row) in batch.iter().enumerate() {
        assert_eq!(row, &single[i][0], "row {i}");
    }
    let whole = bits(&model.session().prefill(&PROMPT, true).unwrap());
    let mut pieces = model.session();
    let mut split = pieces.prefill(&PROMPT[..4], true).unwrap();
    split.extend(pieces.prefill(&PROMPT[4..], true).unwrap());
    assert_eq!(bits(&split), whole);
}

/// Decodes `tokens` one by one after the prompt, returning each step's logits.
fn decode_all(session: &mut samplab::model::Session<&Model>, tokens: &[u32]) -> Vec<Vec<u32>> {
    tokens
        .iter()
        .map(|&t| bits(&session.decode_step(&[t]).unwrap())[0].clone())
        .collect()
}

/// A state is cut back only to a snapshot (every 4 positions here, thinned to the latest three
/// spacings' worth) or to nothing; from a snapshot it goes on exactly as before.
#[test]
fn a_recurrent_state_goes_back_to_its_snapshots_and_on_exactly() {
    let model = model(Snapshots { every: 4, cap: 3 });
    let tokens: Vec<u32> = (0..30).map(|i| 260 + (i * 7 % 9)).collect();
    let mut session = model.session();
    session.prefill(&PROMPT, false).unwrap();
    let first = decode_all(&mut session, &tokens);
    let held = session.position();
    assert_eq!(held, PROMPT.len() + tokens.len());
    let cuts = session.cuts();
    // Past three snapshots the spacing doubled until three were left: 8, 16, 24, 32 -> 16, 32.
    let kept: Vec<usize> = (1..held).filter(|&p| cuts.allows(p)).collect();
    assert!(!kept.is_empty() && kept.len() <= 3, "{kept:?}");
    assert!(kept.iter().all(|p| p % 4 == 0), "{kept:?}");
    let between = kept[kept.len() - 1] + 1;
    let err = session.truncate(between).unwrap_err().to_string();
    assert!(err.contains("can go back to"), "{err}");
    for &cut in kept.iter().rev() {
        let mut again = model.session();
        again.prefill(&PROMPT, false).unwrap();
        decode_all(&mut again, &tokens);
        again.truncate(cut).unwrap();
        let from = cut - PROMPT.len();
        assert_eq!(
            decode_all(&mut again, &tokens[from..]),
            first[from..],
            "from {cut}"
        );
    }
    // Without snapshots only a fresh start is left.
    let bare_model = self::model(Snapshots::NONE);
    let mut bare = bare_model.session();
    bare.prefill(&PROMPT, false).unwrap();
    decode_all(&mut bare, &tokens[..5]);
    let cuts = bare.cuts();
    assert_eq!(cuts.nearest(bare.position() - 1), 0);
    bare.truncate(0).unwrap();
    bare.prefill(&PROMPT, false).unwrap();
    assert_eq!(decode_all(&mut bare, &tokens), first);
}

fn run(
    model: &mut LoadedModel,
    prompt: &str,
    params: &SamplingParams,
    branches: &[Branch],
) -> SampleResponse {
    stories_branches(model, prompt, params, branches, None)
}

fn fresh(model: &mut LoadedModel, prompt: &str, params: &SamplingParams) -> SampleResponse {
    model.replay.clear();
    model.backend.reset();
    run(model, prompt, params, &[])
}

fn assert_same(got: &SampleResponse, want: &SampleResponse, context: &str) {
    assert_eq!(got.trajectories.len(), want.trajectories.len(), "{context}");
    for (a, b) in got.trajectories.iter().zip(&want.trajectories) {
        assert_eq!(a.token_ids, b.token_ids, "{context}");
        let (x, y): (Vec<u32>, Vec<u32>) = (
            a.logprobs.iter().map(|v| v.to_bits()).collect(),
            b.logprobs.iter().map(|v| v.to_bits()).collect(),
        );
        assert_eq!(x, y, "{context}");
    }
}

/// Twelve tokens: the fixture's vocabulary spells each character as a byte.
const TEXT: &str = "the cat sat";

/// Through the engine: re-runs after changes and prompt edits equal fresh runs, and go on from
/// the kept snapshots rather than from the prompt.
#[test]
fn re_runs_and_prompt_edits_equal_fresh_runs_from_the_snapshots() {
    let mut model = common::loaded_fixture("qwen35");
    let base = SamplingParams::from_yaml(
        "temperature: 1.2\nseed: 3\nmax_tokens: 40\nnum_samples: 3\nlogprobs: 1",
    )
    .unwrap();
    let first = run(&mut model, TEXT, &base, &[]);
    let prompt_len = first.prompt_token_ids.len();
    assert!(
        prompt_len < 32,
        "{prompt_len} tokens: the first snapshot falls in the samples"
    );
    let mut changed = base.clone();
    changed.set_assignment("top_k=6").unwrap();
    let rerun = run(&mut model, TEXT, &changed, &[]);
    assert_same(&rerun, &fresh(&mut model, TEXT, &changed), "top_k=6");
    // The base again: its samples' own kept steps replay, the rest decodes from a snapshot.
    run(&mut model, TEXT, &base, &[]);
    let again = run(&mut model, TEXT, &base, &[]);
    assert_same(&again, &first, "the base again");
    assert_eq!(again.timings.tokens_decoded, 0);

    let short = SamplingParams {
        max_tokens: Some(12),
        ..base.clone()
    };
    let long = format!("{TEXT} on the mat, and then it ran");
    run(&mut model, &long, &short, &[]);
    let edited = format!("{long}!");
    let rerun = run(&mut model, &edited, &short, &[]);
    let total = rerun.prompt_token_ids.len();
    assert!(
        total > 33,
        "{total} tokens: past the prompt's first snapshot"
    );
    let shared = common_prefix(&rerun.prompt_token_ids, &model.encode(&long).unwrap());
    assert!(
        (rerun.timings.prefill_tokens as usize) < total
            && rerun.timings.prefill_tokens as usize >= total - shared,
        "prefilled {} of {total}, {shared} shared",
        rerun.timings.prefill_tokens
    );
    assert_same(
        &rerun,
        &fresh(&mut model, &edited, &base),
        "an edited prompt",
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]

    /// Random chains of knob changes, branches and prompt edits: each run equals a fresh run.
    #[test]
    fn random_chains_of_changes_equal_fresh_runs(
        steps in proptest::collection::vec((0u8..4, 0u32..6), 1..4),
    ) {
        let mut model = common::loaded_fixture("qwen35");
        let mut params = SamplingParams::from_yaml(
            "temperature: 1.0\nseed: 7\nmax_tokens: 30\nnum_samples: 2",
        )
        .unwrap();
        let mut prompt = TEXT.to_owned();
        run(&mut model, &prompt, &params, &[]);
        for (kind, amount) in steps {
            let mut branches = Vec::new();
            match kind {
                0 => params.set_assignment(&format!("top_k={}", 3 + amount)).unwrap(),
                1 => params.set_assignment(&format!("temperature={}", 0.6 + 0.2 * f64::from(amount))).unwrap(),
                2 => prompt.push_str([" the", " cat", " mat", " ran", " dog", " on"][amount as usize]),
                _ => {
                    // Sample 0's first tokens, the last of them swapped for another.
                    let sample = run(&mut model, &prompt, &params, &[]);
                    let tokens = &sample.trajectories[0].token_ids;
                    let mut path = tokens[..(amount as usize + 1).min(tokens.len())].to_vec();
                    if let Some(last) = path.last_mut() {
                        *last = 260 + (*last + 1) % 9;
                    }
                    branches.push(Branch {
                        sample: 0,
                        origin: BranchOrigin { parent: 0, at: path.len() as u32 - 1 },
                        path,
                        then: None,
                    });
                }
            }
            let rerun = run(&mut model, &prompt, &params, &branches);
            let mut clean = common::loaded_fixture("qwen35");
            let want = run(&mut clean, &prompt, &params, &branches);
            assert_same(&rerun, &want, &format!("{kind} {amount}"));
        }
    }
}

#[test]
fn files_with_missing_recurrent_tensors_or_impossible_shapes_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let u32 = |n| Some(Value::U32(n));
    for (key, value, said) in [
        (
            "qwen35.ssm.conv_kernel",
            u32(0),
            "`qwen35.ssm.conv_kernel` is 0",
        ),
        (
            "qwen35.ssm.group_count",
            u32(3),
            "is not a multiple of `qwen35.ssm.group_count` (3)",
        ),
        (
            "qwen35.ssm.inner_size",
            u32(30),
            "`qwen35.ssm.inner_size` is 30",
        ),
        (
            "qwen35.ssm.state_size",
            None,
            "`qwen35.ssm.state_size` is missing",
        ),
        (
            "qwen35.full_attention_interval",
            u32(0),
            "`qwen35.full_attention_interval` is 0",
        ),
    ] {
        let err = load_error(&altered("qwen35", dir.path(), &[(key, value)], ""));
        assert!(err.contains(said), "{key}: {err}");
    }
    for tensor in [
        "blk.1.ssm_a",
        "blk.3.ssm_conv1d.weight",
        "blk.2.attn_q_norm.weight",
    ] {
        let err = load_error(&altered("qwen35", dir.path(), &[], tensor));
        assert!(
            err.contains(tensor) && err.contains("qwen35 model"),
            "{tensor}: {err}"
        );
    }
}

/// Multi-token-prediction blocks after the trunk are counted by `block_count` but not run: the
/// model is the trunk alone (its logits are not the whole file's), with a warning; a file of
/// nothing but such blocks is refused.
#[test]
fn next_n_blocks_after_the_trunk_are_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let key = "qwen35.nextn_predict_layers";
    // The fixture's last layer (full attention) read as a next-n block.
    let path = altered("qwen35", dir.path(), &[(key, Some(Value::U32(1)))], "");
    let trunk = Model::load(&path, &Device::Cpu).unwrap();
    assert_eq!(trunk.config().num_layers, 5);
    assert!(
        trunk
            .config()
            .warnings
            .iter()
            .any(|w| w.contains("multi-token-prediction")),
        "{:?}",
        trunk.config().warnings
    );
    let full = Model::load(&folder("qwen35").join("model.gguf"), &Device::Cpu).unwrap();
    assert_eq!(full.config().num_layers, 6);
    let ours = trunk.session().prefill(&PROMPT, false).unwrap();
    assert_ne!(
        bits(&ours),
        bits(&full.session().prefill(&PROMPT, false).unwrap())
    );
    let err = load_error(&altered(
        "qwen35",
        dir.path(),
        &[(key, Some(Value::U32(6)))],
        "",
    ));
    assert!(
        err.contains("`qwen35.nextn_predict_layers` is 6 of 6 blocks"),
        "{err}"
    );
}
