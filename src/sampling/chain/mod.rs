//! Each engine's chain as a list of [`Step`]s, run on a candidate [`Pool`]: llama.cpp and
//! transformers sample through it, and every engine's per-stage trace comes from it. A chain
//! that ends in vLLM's filters (or in greedy's argmax) samples through a faster path built from
//! the same list: its logit processors on plain logits, then the filters as one cut (the tests
//! hold it equal to the pool).
//!
//! The list starts as the whole vocabulary held densely (index = id); the first stage that cuts
//! it lists the survivors. top_k and min_p cut a dense pool without listing it, so that the common
//! chains touch the vocabulary once or twice per step.

mod adaptive;
mod pool;
mod stage_trace;
mod stages;

pub(super) use adaptive::{Memory as AdaptiveMemory, learn};
pub(super) use pool::{Cand, Pool};
pub use stage_trace::StageTrace;

use super::adjust::{self, Logits};
use super::history::SampleState;
use super::token_lists::TokenLists;
use crate::params::{Engine, SamplingParams, Stage};

/// What a chain step needs besides the params and the logits.
pub(super) struct StepInput<'a> {
    pub state: &'a mut SampleState,
    pub tokens: &'a TokenLists,
    pub scratch: &'a mut Vec<(u32, u32)>,
}

/// One stage of some engine's chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// Structured outputs: the tokens the constraint refuses at this step removed.
    Constraint,
    AllowedIds,
    BadWords,
    /// EOS and the stop token ids banned while fewer than `min_tokens` are out.
    MinTokens,
    LogitBias,
    /// llama.cpp's ignore_eos: EOS banned outright.
    BanEos,
    Penalties,
    Dry,
    TopNSigma,
    /// `ties`: every token tied with the k-th stays (vLLM, transformers).
    TopK {
        ties: bool,
    },
    TypicalLlamaCpp,
    TypicalTransformers,
    /// transformers' top-h: the likeliest tokens within an entropy budget.
    TopH,
    /// The shortest top prefix reaching the mass (llama.cpp, vLLM).
    TopP,
    TopPTransformers,
    MinP,
    Xtc,
    /// llama.cpp's temperature, dynamic with `dynatemp_range`.
    Temperature,
    /// The argmax: greedy decoding in vLLM and transformers.
    Greedy,
    Mirostat,
    /// llama.cpp's adaptive-p: reshapes the distribution around its aim before the draw.
    AdaptiveP,
}

impl Step {
    /// The name the inspector shows.
    pub fn name(self) -> &'static str {
        match self {
            Step::Constraint => "constraint",
            Step::AllowedIds => "allowed_ids",
            Step::BadWords => "bad_words",
            Step::MinTokens => "min_tokens",
            Step::LogitBias => "logit_bias",
            Step::BanEos => "ignore_eos",
            Step::Penalties => "penalties",
            Step::Dry => "DRY",
            Step::TopNSigma => "top_n_sigma",
            Step::TopK { .. } => "top_k",
            Step::TypicalLlamaCpp | Step::TypicalTransformers => "typical_p",
            Step::TopH => "top_h",
            Step::TopP | Step::TopPTransformers => "top_p",
            Step::MinP => "min_p",
            Step::Xtc => "XTC",
            Step::Temperature => "temperature",
            Step::Greedy => "greedy",
            Step::Mirostat => "mirostat",
            Step::AdaptiveP => "adaptive_p",
        }
    }

    /// The llama.cpp stage that does what this step does (in its own engine's formula).
    fn stage(self) -> Option<Stage> {
        let as_llama_cpp = match self {
            Step::TopK { .. } => Step::TopK { ties: false },
            Step::TypicalTransformers => Step::TypicalLlamaCpp,
            Step::TopPTransformers => Step::TopP,
            step => step,
        };
        LLAMA_CPP_STAGES
            .iter()
            .find(|&&(_, step)| step == as_llama_cpp)
            .map(|&(stage, _)| stage)
    }

    /// A logit processor: a stage that moves logits, reading the sample only.
    pub(super) fn is_processor(self) -> bool {
        matches!(
            self,
            Step::Constraint
                | Step::AllowedIds
                | Step::BadWords
                | Step::MinTokens
                | Step::LogitBias
                | Step::BanEos
                | Step::Penalties
                | Step::Dry
        )
    }

    /// Runs a logit processor (a stage that moves logits, reading the sample only) on a pool
    /// or on plain logits; `false`, doing nothing, for a stage that filters, scales or draws.
    pub(super) fn adjust(
        self,
        logits: &mut (impl Logits + ?Sized),
        params: &SamplingParams,
        state: &SampleState,
        tokens: &TokenLists,
        scratch: &mut Vec<(u32, u32)>,
    ) -> bool {
        match self {
            Step::Constraint => {
                if let Some(mask) = state.mask() {
                    logits.keep_masked(mask);
                }
            }
            Step::AllowedIds => {
                if let Some(allowed) = &params.allowed_token_ids {
                    logits.keep_only(allowed);
                }
            }
            Step::BadWords => adjust::bad_words(logits, &tokens.bad_words, state),
            Step::MinTokens => {
                if (state.output().len() as u64) < u64::from(params.min_tokens) {
                    let stops = params.stop.iter().flat_map(|s| s.token_ids());
                    adjust::ban(logits, tokens.eos_ids.iter().copied().chain(stops));
                }
            }
            Step::LogitBias => adjust::logit_bias(logits, params),
            Step::BanEos => {
                if params.ignore_eos {
                    adjust::ban(logits, tokens.eos_ids.iter().copied());
                }
            }
            Step::Penalties => adjust::penalties(logits, params, state, scratch),
            Step::Dry => adjust::dry(logits, params, state, &tokens.breakers),
            _ => return false,
        }
        true
    }

    fn apply(self, pool: &mut Pool, params: &SamplingParams, input: &mut StepInput) {
        if self.adjust(pool, params, input.state, input.tokens, input.scratch) {
            return;
        }
        let min_keep = match params.engine {
            Engine::LlamaCpp => params.min_keep as usize,
            Engine::Vllm | Engine::Transformers => 0,
        };
        let state = &mut *input.state;
        match self {
            Step::TopNSigma => stages::top_n_sigma(pool, params.top_n_sigma),
            Step::TopK { ties } => {
                if let Some(k) = params.top_k_limit() {
                    pool.top_k_ties(k.min(pool.len()), ties);
                }
            }
            Step::TypicalLlamaCpp => stages::typical_llama(pool, params.typical_p, min_keep),
            Step::TypicalTransformers => stages::typical_transformers(pool, params.typical_p),
            Step::TopH => stages::top_h(pool, params.top_h),
            Step::TopP => stages::top_p_llama(pool, params.top_p, min_keep),
            Step::TopPTransformers => stages::top_p_transformers(pool, params.top_p),
            Step::MinP => stages::min_p(pool, params.min_p, min_keep),
            Step::Xtc => stages::xtc(pool, params, min_keep, &mut state.coin),
            Step::Temperature => stages::dynamic_temperature(pool, params),
            Step::Greedy => pool.top_k(1),
            Step::Mirostat => {
                pool.temperature(params.temperature);
                let mu = *state.mu.get_or_insert(2.0 * params.mirostat_tau);
                stages::mirostat(pool, params, mu);
            }
            Step::AdaptiveP => {
                let (target, decay) = (params.adaptive_target, params.adaptive_decay);
                let memory = *state
                    .adaptive
                    .get_or_insert_with(|| AdaptiveMemory::start(target, decay));
                adaptive::reshape(pool, target, memory);
            }
            // `adjust` ran every processor (`is_processor`) above.
            _ => unreachable!("a logit processor runs through `adjust`"),
        }
    }
}

/// vLLM's logit processors in its order. The structured-output mask comes first: vLLM applies
/// it to the model's logits before the sampler sees them.
const VLLM_PROCESSORS: [Step; 6] = [
    Step::Constraint,
    Step::AllowedIds,
    Step::BadWords,
    Step::MinTokens,
    Step::LogitBias,
    Step::Penalties,
];

/// vLLM's filters after its processors, in its order (each a no-op when off).
pub(super) const VLLM_FILTERS: [Step; 4] = [
    Step::Temperature,
    Step::MinP,
    Step::TopK { ties: true },
    Step::TopP,
];

/// transformers' logits processors in its order. A constraint is a logits processor the caller
/// passes to generate(), which runs after the built-in ones.
const TRANSFORMERS_PROCESSORS: [Step; 5] = [
    Step::LogitBias,
    Step::Penalties,
    Step::BadWords,
    Step::MinTokens,
    Step::Constraint,
];

/// transformers' logits warpers in its order, after its processors.
const TRANSFORMERS_WARPERS: [Step; 6] = [
    Step::Temperature,
    Step::TopH,
    Step::TopK { ties: true },
    Step::TopPTransformers,
    Step::MinP,
    Step::TypicalTransformers,
];

/// Each llama.cpp sampler stage and the step that runs it in llama.cpp's chain.
const LLAMA_CPP_STAGES: [(Stage, Step); 10] = [
    (Stage::Penalties, Step::Penalties),
    (Stage::Dry, Step::Dry),
    (Stage::TopNSigma, Step::TopNSigma),
    (Stage::TopK, Step::TopK { ties: false }),
    (Stage::TypicalP, Step::TypicalLlamaCpp),
    (Stage::TopP, Step::TopP),
    (Stage::MinP, Step::MinP),
    (Stage::Xtc, Step::Xtc),
    (Stage::Temperature, Step::Temperature),
    (Stage::AdaptiveP, Step::AdaptiveP),
];

/// A sampling engine's order (vLLM's or transformers', sampling rather than greedy) in
/// llama.cpp's stage names: the `--samplers` that asks llama.cpp for it. The stages llama.cpp
/// lacks (bad words, min_tokens, ...) are left out; llama.cpp's own order is its `samplers`.
pub fn order_as_llama_cpp_stages(engine: Engine) -> Vec<Stage> {
    let steps: Vec<Step> = match engine {
        Engine::Vllm => [&VLLM_PROCESSORS[..], &VLLM_FILTERS].concat(),
        Engine::Transformers => [&TRANSFORMERS_PROCESSORS[..], &TRANSFORMERS_WARPERS].concat(),
        Engine::LlamaCpp => return Stage::LLAMA_CPP_DEFAULT.to_vec(),
    };
    steps.into_iter().filter_map(Step::stage).collect()
}

/// The engine's chain for `params`, in the order it runs.
pub(super) fn steps(params: &SamplingParams) -> Vec<Step> {
    match params.engine {
        Engine::Vllm => {
            let mut steps = VLLM_PROCESSORS.to_vec();
            if params.is_greedy() {
                steps.push(Step::Greedy);
            } else {
                steps.extend(VLLM_FILTERS);
            }
            steps
        }
        Engine::Transformers => {
            let mut steps = TRANSFORMERS_PROCESSORS.to_vec();
            if params.is_greedy() {
                steps.push(Step::Greedy);
            } else {
                steps.extend(TRANSFORMERS_WARPERS);
            }
            steps
        }
        Engine::LlamaCpp => {
            let mut steps = vec![Step::LogitBias, Step::BanEos];
            if params.mirostat != 0 {
                steps.push(Step::Mirostat);
                return steps;
            }
            steps.extend(params.llama_cpp_order().into_iter().filter_map(|stage| {
                LLAMA_CPP_STAGES
                    .iter()
                    .find(|&&(s, _)| s == stage)
                    .map(|&(_, step)| step)
            }));
            steps
        }
    }
}

/// llama.cpp's chain when its draw broke the grammar: the grammar first, then the chain again
/// (`common_sampler_sample`'s resampling); also how its trace shows a constraint.
pub(super) fn grammar_first(params: &SamplingParams) -> Vec<Step> {
    let mut steps = steps(params);
    if params.engine == Engine::LlamaCpp {
        steps.insert(0, Step::Constraint);
    }
    steps
}

/// The stages of the chain of `params` by name, in the order they run, as the trace shows them
/// (llama.cpp's grammar first, since a refused draw resamples through it); the constraint
/// only where `params` have one.
pub fn stage_names(params: &SamplingParams) -> Vec<&'static str> {
    grammar_first(params)
        .into_iter()
        .filter(|&step| step != Step::Constraint || params.constraint().is_some())
        .map(Step::name)
        .collect()
}

/// Runs `steps` (a chain of `params`) and draws with `u`, or takes `forced` (a token the user
/// picked): the chosen token's id, the pool then holding the final distribution in draw order.
/// Mirostat learns from the chosen token, unless a forced one was filtered out (its surprise
/// is infinite), here as llama.cpp moves mu within its draw; adaptive-p learns once the step's
/// token is settled ([`learn`]), as llama.cpp's accept does.
pub(super) fn run(
    pool: &mut Pool,
    params: &SamplingParams,
    steps: &[Step],
    mut input: StepInput,
    u: f64,
    forced: Option<u32>,
) -> Option<u32> {
    for &step in steps {
        step.apply(pool, params, &mut input);
    }
    pool.finish();
    let chosen = match forced {
        Some(id) => pool.cands.iter().position(|c| c.id == id && c.p > 0.0),
        None => Some(pool.draw(u)?),
    };
    if steps.contains(&Step::Mirostat)
        && let (Some(mu), Some(chosen)) = (input.state.mu, chosen)
    {
        let surprise = -pool.cands[chosen].p.log2();
        input.state.mu = Some(mu - params.mirostat_eta * (surprise - params.mirostat_tau));
    }
    forced.or_else(|| chosen.map(|c| pool.cands[c].id))
}

/// Runs the chain of `params` stage by stage on the pool, recording `ids` after the model and
/// after each stage (XTC's coin is drawn as in a run, so the state must be the run's).
pub(super) fn trace(
    pool: &mut Pool,
    params: &SamplingParams,
    mut input: StepInput,
    ids: &[u32],
) -> Vec<StageTrace> {
    let mut traces = vec![StageTrace::new("model", pool.snapshot(ids))];
    let constrained = input.state.mask().is_some();
    for step in grammar_first(params) {
        if step == Step::Constraint && !constrained {
            continue;
        }
        step.apply(pool, params, &mut input);
        traces.push(StageTrace::new(step.name(), pool.snapshot(ids)));
    }
    traces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(engine: Engine) -> String {
        let stages = order_as_llama_cpp_stages(engine);
        stages
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(";")
    }

    #[test]
    fn each_engine_order_reads_as_llama_cpp_stages() {
        assert_eq!(
            names(Engine::Vllm),
            "penalties;temperature;min_p;top_k;top_p"
        );
        assert_eq!(
            names(Engine::Transformers),
            "penalties;temperature;top_k;top_p;min_p;typ_p"
        );
        let default = Stage::LLAMA_CPP_DEFAULT.map(|s| s.name()).join(";");
        assert_eq!(names(Engine::LlamaCpp), default);
    }
}
