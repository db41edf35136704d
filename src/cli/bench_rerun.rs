//! `samplab bench --rerun`: what a re-run after a change costs next to a full run, and whether
//! it equals a fresh run of the changed parameters.

use super::sample::{apply_sets, params_from_flags};
use clap::Args;
use samplab::engine::LoadedModel;
use samplab::params::SamplingParams;
use samplab::response::{SampleResponse, Timings};
use serde::Serialize;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Instant;

/// Plain prose (about 400 tokens in common vocabularies), repeated for longer prompts.
const PROSE: &str = "The old lighthouse keeper climbed the spiral stairs every evening, counting \
    the steps as his father had taught him. From the top he could see the harbour, the fishing \
    boats coming home with their nets, and the long line of hills where the sun went down. He \
    wrote in his logbook the colour of the sky, the direction of the wind, and the names of the \
    ships that passed. In the spring a girl from the village began to visit him. She wanted to \
    know why the lamp turned, how the lens was cleaned, and whether he was ever lonely in the \
    winter, when the storms kept the boats in the harbour for weeks. He showed her the brass \
    gears and the oil cans, the cloth he used for the glass, and the little stove where he \
    boiled water for tea. He told her that the sea was never the same two days running, that \
    the gulls knew a storm was coming before the barometer did, and that the worst nights were \
    not the loud ones but the foggy ones, when the horn sounded every half minute until dawn. \
    She came back the next week with a notebook of her own, and soon she was writing down the \
    weather beside him, in neat handwriting that was better than his. By the end of the summer \
    she could light the lamp by herself, and she had started to ask about the ships: where they \
    came from, what they carried, and who waited for them in the ports on the other side of the \
    water. The keeper did not know most of the answers, so they made them up together, one ship \
    at a time, and wrote the stories in the back of the logbook where nobody official would ever \
    look. Years later, when the light was automated and the keeper had moved to a small house in \
    the village, the logbooks were sent to a museum in the city. ";

/// `bench`'s flags for measuring re-runs.
#[derive(Args)]
pub struct RerunArgs {
    /// With `--rerun`: the base parameters' preset (a built-in name or a file).
    #[arg(long, requires = "reruns")]
    preset: Option<String>,
    /// With `--rerun`: a base parameter as key=value, value in YAML.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "reruns")]
    sets: Vec<String>,
    /// Measure a re-run after this change of the base parameters instead of raw speed:
    /// key=value of any parameter, or prompt_edit=N to replace the prompt's last N tokens.
    #[arg(long = "rerun", value_name = "KEY=VALUE")]
    pub(super) reruns: Vec<String>,
}

/// The run `bench`'s other flags describe: the base run a re-run is measured against.
pub struct RunShape {
    pub samples: usize,
    pub tokens: usize,
    pub prompt_tokens: usize,
    pub json: bool,
}

/// The change a `--rerun` names besides the parameters: the prompt's last tokens replaced.
const PROMPT_EDIT: &str = "prompt_edit";

#[derive(Serialize)]
struct Report {
    model: String,
    prompt_tokens: usize,
    params: SamplingParams,
    full_run_ms: f64,
    /// Bytes of logits the replay store kept after the full run, and per kept step.
    replay_bytes: usize,
    replay_bytes_per_step: usize,
    reruns: Vec<Rerun>,
}

#[derive(Serialize)]
struct Rerun {
    change: String,
    rerun_ms: f64,
    /// The re-run's time over the full run's.
    fraction_of_full_run: f64,
    /// The re-run's time over what its prefill and decoded tokens alone cost at the full run's
    /// rates (1.0 when replaying and bookkeeping cost nothing); `None` when it computed nothing.
    over_work_alone: Option<f64>,
    tokens_replayed: u32,
    tokens_decoded: u32,
    prefill_tokens: usize,
    identical_to_fresh_run: bool,
}

pub fn run(model: &mut LoadedModel, args: &RerunArgs, shape: RunShape) -> anyhow::Result<ExitCode> {
    let mut base = params_from_flags(args.preset.as_deref(), &[])?;
    base.num_samples = shape.samples as u32;
    base.max_tokens = Some(shape.tokens as u32);
    let mut base = apply_sets(base, &args.sets)?;
    base.seed.get_or_insert(1);
    base.validate()?;
    let prompt = prompt_ids(model, shape.prompt_tokens)?;

    // The first run also pays for warming caches and threads; the second is what a user waits.
    fresh_run(model, &prompt, &base)?;
    let (full_run_ms, full) = fresh_run(model, &prompt, &base)?;
    let replay_bytes = model.replay.used();
    let mut reruns = Vec::new();
    for change in &args.reruns {
        let (params, edited) = apply_change(&base, &prompt, change, model.backend.vocab_size())?;
        fresh_run(model, &prompt, &base)?;
        let start = Instant::now();
        let rerun = run_once(model, &edited, &params)?;
        let rerun_ms = start.elapsed().as_secs_f64() * 1e3;
        let (_, fresh) = fresh_run(model, &edited, &params)?;
        reruns.push(Rerun {
            change: change.clone(),
            rerun_ms,
            fraction_of_full_run: rerun_ms / full_run_ms,
            over_work_alone: over_work_alone(rerun_ms, &rerun.timings, &full.timings),
            tokens_replayed: rerun.timings.tokens_replayed,
            tokens_decoded: rerun.timings.tokens_decoded,
            prefill_tokens: rerun.timings.prefill_tokens,
            identical_to_fresh_run: same_samples(&rerun, &fresh),
        });
    }
    let report = Report {
        model: model.name.clone(),
        prompt_tokens: prompt.len(),
        params: base,
        full_run_ms,
        replay_bytes,
        replay_bytes_per_step: model.backend.vocab_size() * size_of::<f32>(),
        reruns,
    };
    let mut out = std::io::stdout().lock();
    if shape.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        print_table(&mut out, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `rerun_ms` over the time the full run took for as many prefilled positions and decoded
/// tokens as the re-run computed.
fn over_work_alone(rerun_ms: f64, rerun: &Timings, full: &Timings) -> Option<f64> {
    let per_position = full.prefill_ms / full.prefill_tokens.max(1) as f64;
    let per_token = full.decode_ms / f64::from(full.tokens_decoded.max(1));
    let work =
        rerun.prefill_tokens as f64 * per_position + f64::from(rerun.tokens_decoded) * per_token;
    (work > 0.0).then(|| rerun_ms / work)
}

/// The prose prompt cut to `tokens` tokens (fewer where the context must leave room).
fn prompt_ids(model: &LoadedModel, tokens: usize) -> anyhow::Result<Vec<u32>> {
    let mut text = String::new();
    let mut ids = model.encode(&text)?;
    while ids.len() < tokens {
        text.push_str(PROSE);
        ids = model.encode(&text)?;
    }
    let room = model.backend.context_length().saturating_sub(1);
    ids.truncate(tokens.min(room / 2).max(1));
    Ok(ids)
}

/// The base parameters with `change` applied (`key=value`), or the prompt with its last N
/// tokens replaced (`prompt_edit=N`).
fn apply_change(
    base: &SamplingParams,
    prompt: &[u32],
    change: &str,
    vocab: usize,
) -> anyhow::Result<(SamplingParams, Vec<u32>)> {
    let Some(count) = change
        .strip_prefix(PROMPT_EDIT)
        .and_then(|c| c.strip_prefix('='))
    else {
        let mut params = base.clone();
        params
            .set_assignment(change)
            .map_err(|e| anyhow::anyhow!("--rerun {change}: {e}"))?;
        return Ok((params, prompt.to_vec()));
    };
    let count: usize = count
        .parse()
        .ok()
        .filter(|&n| n >= 1 && n < prompt.len())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--rerun {change}: {PROMPT_EDIT} takes a number of tokens from 1 to {}",
                prompt.len() - 1
            )
        })?;
    let mut edited = prompt.to_vec();
    let start = prompt.len() - count;
    for (i, id) in edited[start..].iter_mut().enumerate() {
        *id = prompt[(start + i) / 2] % vocab as u32;
    }
    Ok((base.clone(), edited))
}

/// A run with nothing kept from before: prompt cache and replay store forgotten.
fn fresh_run(
    model: &mut LoadedModel,
    prompt: &[u32],
    params: &SamplingParams,
) -> anyhow::Result<(f64, SampleResponse)> {
    model.replay.clear();
    model.backend.reset();
    let start = Instant::now();
    let response = run_once(model, prompt, params)?;
    Ok((start.elapsed().as_secs_f64() * 1e3, response))
}

fn run_once(
    model: &mut LoadedModel,
    prompt: &[u32],
    params: &SamplingParams,
) -> anyhow::Result<SampleResponse> {
    let seed = params.seed.unwrap_or(1);
    model.run_ids(
        0,
        prompt.to_vec(),
        params,
        &[],
        seed,
        &mut || false,
        &mut |_| {},
    )
}

/// Every sample's tokens, logprobs (to the bit), text and stop.
fn same_samples(a: &SampleResponse, b: &SampleResponse) -> bool {
    a.trajectories.len() == b.trajectories.len()
        && a.trajectories.iter().zip(&b.trajectories).all(|(x, y)| {
            x.token_ids == y.token_ids
                && x.text == y.text
                && x.stop_reason == y.stop_reason
                && x.logprobs.len() == y.logprobs.len()
                && x.logprobs
                    .iter()
                    .zip(&y.logprobs)
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}

fn print_table(out: &mut impl Write, report: &Report) -> io::Result<()> {
    writeln!(
        out,
        "model {} · prompt {} tokens · {} samples x {} tokens · full run {:.0} ms",
        report.model,
        report.prompt_tokens,
        report.params.num_samples,
        report.params.max_tokens.unwrap_or_default(),
        report.full_run_ms
    )?;
    writeln!(
        out,
        "replay store {:.1} MiB ({} KiB per kept step)",
        report.replay_bytes as f64 / (1 << 20) as f64,
        report.replay_bytes_per_step / 1024
    )?;
    writeln!(
        out,
        "change                  re-run ms  of full  of work  replayed  decoded  prefill  exact"
    )?;
    for r in &report.reruns {
        writeln!(
            out,
            "{:<22} {:>10.1} {:>7.1}% {:>8} {:>9} {:>8} {:>8}  {}",
            r.change,
            r.rerun_ms,
            r.fraction_of_full_run * 100.0,
            r.over_work_alone
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}x")),
            r.tokens_replayed,
            r.tokens_decoded,
            r.prefill_tokens,
            if r.identical_to_fresh_run {
                "yes"
            } else {
                "NO"
            }
        )?;
    }
    Ok(())
}
