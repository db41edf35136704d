//! The one table of parameters: each row declares a field of [`SamplingParams`], its default,
//! its [`Field`] variant and its [`FieldSpec`]. Adding a parameter is adding a row here (and its
//! stage to the samplers); everything else reads the table.

use super::engine::{Engine, Engines, Stages};
use super::field::{Bounds, FieldSpec, Knob, Names, OffBelowOne};
use super::logit_bias::LogitBias;
use super::reporting::{LogprobsMode, RepetitionDetection};
use super::structured::{Schema, StructuredOutputs};
use super::token_texts::TokenTexts;
use super::{MAX_LOGPROBS, MAX_SAMPLES, ParamError, typed};
use serde::Serialize;
use serde_yaml_ng::Value;

/// The largest count the doubling knobs reach by nudging; typing goes further.
const DOUBLING_MAX: u32 = 1 << 16;

const VLLM_AND_LLAMA_CPP: Engines = Engines::VLLM.with(Engines::LLAMA_CPP);
const VLLM_AND_TRANSFORMERS: Engines = Engines::VLLM.with(Engines::TRANSFORMERS);
const LLAMA_CPP_AND_TRANSFORMERS: Engines = Engines::LLAMA_CPP.with(Engines::TRANSFORMERS);

/// A row with the defaults most rows share.
const fn spec(label: &'static str, engines: Engines, knob: Knob) -> FieldSpec {
    FieldSpec {
        label,
        help: "",
        engines,
        exported: None,
        knob,
        bounds: None,
        valid: "",
        off: None,
        names: Names::NONE,
        off_below_one: None,
    }
}

const fn decimal(fine: f64, coarse: f64, lo: f64, hi: f64) -> Knob {
    Knob::Decimal {
        fine,
        coarse,
        limit: (lo, hi),
        slider: (lo, hi),
    }
}

const fn count(coarse: i64, lo: i64, hi: i64) -> Knob {
    Knob::Count {
        coarse,
        limit: (lo, hi),
        log: false,
    }
}

macro_rules! params_table {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $name:ident: $ty:ty = $default:expr,
        $spec:expr;
    )*) => {
        /// Sampling parameters for one run, with the engines' names and samplab's defaults
        /// (vLLM's where vLLM has the parameter, llama.cpp's where only it does).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        pub struct SamplingParams {
            $( $(#[doc = $doc])* pub $name: $ty, )*
        }

        impl Default for SamplingParams {
            fn default() -> Self {
                Self { $( $name: $default, )* }
            }
        }

        /// A parameter, one variant per row of the table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Field {
            $( $variant, )*
        }

        impl Field {
            /// Every parameter, in the order the panel and help list them.
            pub const ALL: &[Field] = &[ $( Field::$variant, )* ];

            /// The name YAML, `--set` and the engines use.
            pub fn name(self) -> &'static str {
                match self {
                    $( Field::$variant => stringify!($name), )*
                }
            }

            pub fn spec(self) -> FieldSpec {
                match self {
                    $( Field::$variant => FieldSpec {
                        help: concat!($($doc),*).trim_ascii(),
                        ..$spec
                    }, )*
                }
            }
        }

        impl SamplingParams {
            /// The field's value as YAML would write it (`0.7`, not the f32's widening).
            pub fn get(&self, field: Field) -> Value {
                match field {
                    $( Field::$variant => yaml_value(&self.$name), )*
                }
            }

            /// Sets one field from a parsed value, checking its type (not its range: see
            /// `validate`).
            pub fn set_field(&mut self, field: Field, value: Value) -> Result<(), ParamError> {
                match field {
                    $( Field::$variant => self.$name = typed(field, value)?, )*
                }
                Ok(())
            }
        }
    };
}

/// Through YAML text, so that an f32 comes back as the decimal it prints as.
fn yaml_value<T: Serialize>(value: &T) -> Value {
    serde_yaml_ng::to_string(value)
        .ok()
        .and_then(|text| serde_yaml_ng::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

params_table! {
    /// Tokens to generate per sample; null runs until EOS or the end of the context.
    MaxTokens max_tokens: Option<u32> = None, FieldSpec {
        names: Names::NONE.engines("max_tokens").transformers("max_new_tokens").flag("-n"),
        bounds: Some(Bounds::at_least(1.0)),
        valid: "must be >= 1, or null to run until EOS",
        off: Some("null"),
        ..spec("max_tokens", Engines::ALL, Knob::Doubling { max: DOUBLING_MAX, vocab: false })
    };
    /// Sample i uses seed + i; null draws one at random when the run starts.
    Seed seed: Option<u64> = None, FieldSpec {
        names: Names::NONE.vllm("seed").twinkle("seed").flag("-s"),
        valid: "must be a whole number >= 0, or null for a random one, which is what -1 means \
                in llama.cpp",
        ..spec("seed", Engines::ALL, Knob::Seed)
    };
    /// Stop strings and stop token ids: "\n\n", #13.
    Stop stop: Option<TokenTexts> = None, FieldSpec {
        names: Names::NONE.vllm("stop").twinkle("stop").transformers("stop_strings").flag("-r"),
        off: Some("null"),
        ..spec("stop", Engines::ALL, Knob::TokenList)
    };
    /// Keep the matched stop string in the text.
    IncludeStopStrInOutput include_stop_str_in_output: bool = false, FieldSpec {
        names: Names::NONE.vllm("include_stop_str_in_output"),
        off: Some("false"),
        ..spec("incl_stop", Engines::ALL, Knob::Toggle)
    };
    /// Divides the logits; below 1e-5 is greedy (argmax).
    Temperature temperature: f32 = 1.0, FieldSpec {
        names: Names::all("temperature").engines("temperature").flag("--temp"),
        bounds: Some(Bounds::at_least(0.0)),
        valid: "must be a finite number >= 0 (below 1e-5 is greedy)",
        ..spec("temperature", Engines::ALL, Knob::Decimal {
            fine: 0.05, coarse: 0.5, limit: (0.0, 5.0), slider: (0.0, 2.0),
        })
    };
    /// Keeps the k most likely tokens; -1 (or 0) keeps all.
    TopK top_k: i32 = -1, FieldSpec {
        names: Names::local("top_k").engines("top_k").flag("--top-k"),
        off_below_one: Some(OffBelowOne { vllm: -1, others: 0 }),
        bounds: Some(Bounds::at_least(-1.0)),
        valid: "must be -1 (off), 0 (read as off) or >= 1",
        off: Some("-1"),
        ..spec("top_k", Engines::ALL, Knob::Doubling { max: DOUBLING_MAX, vocab: true })
    };
    /// Keeps the most likely tokens that together hold this much probability; 1 is off.
    TopP top_p: f32 = 1.0, FieldSpec {
        names: Names::all("top_p").engines("top_p").flag("--top-p"),
        bounds: Some(Bounds::above_to(0.0, 1.0)),
        off: Some("1.0"),
        ..spec("top_p", Engines::ALL, decimal(0.01, 0.1, 0.01, 1.0))
    };
    /// Drops tokens less likely than min_p times the most likely one; 0 is off.
    MinP min_p: f32 = 0.0, FieldSpec {
        names: Names::local("min_p").transformers("min_p").flag("--min-p"),
        bounds: Some(Bounds::closed(0.0, 1.0)),
        off: Some("0.0"),
        ..spec("min_p", Engines::ALL, decimal(0.01, 0.1, 0.0, 1.0))
    };
    /// Divides positive logits of seen tokens and multiplies negative ones; 1 is off.
    RepetitionPenalty repetition_penalty: f32 = 1.0, FieldSpec {
        names: Names::NONE
            .vllm("repetition_penalty")
            .llama_server("repeat_penalty")
            .llama_cpp_python("repeat_penalty").engines("repetition_penalty").flag("--repeat-penalty"),
        bounds: Some(Bounds::above(0.0)),
        off: Some("1.0"),
        ..spec("rep_penalty", Engines::ALL, Knob::Decimal {
            fine: 0.01, coarse: 0.1, limit: (0.01, 3.0), slider: (1.0, 2.0),
        })
    };
    /// Parallel samples (vLLM's n), each with its own seed.
    NumSamples num_samples: u32 = 1, FieldSpec {
        names: Names::NONE.vllm("n").transformers("num_return_sequences"),
        bounds: Some(Bounds::closed(1.0, MAX_SAMPLES as f64)),
        ..spec("samples", Engines::ALL, Knob::Count {
            coarse: 4, limit: (1, MAX_SAMPLES as i64), log: true,
        })
    };
    /// Alternatives reported per generated token; 0 reports the chosen token only.
    Logprobs logprobs: Option<u32> = None, FieldSpec {
        names: Names::NONE.vllm("logprobs"),
        bounds: Some(Bounds::closed(0.0, MAX_LOGPROBS as f64)),
        off: Some("null"),
        ..spec("logprobs", Engines::ALL, count(5, 0, MAX_LOGPROBS as i64))
    };
    /// Tokens whose raw logprob is reported at every step: strings (their first token) and
    /// ids, as `stop` takes them: " Yes", " No", #13.
    Watch watch: Option<TokenTexts> = None, FieldSpec {
        names: Names::NONE.vllm("logprob_token_ids"),
        off: Some("null"),
        exported: Some(Engines::VLLM),
        ..spec("watch", Engines::ALL, Knob::TokenList)
    };
    /// Alternatives reported per prompt token.
    PromptLogprobs prompt_logprobs: Option<u32> = None, FieldSpec {
        names: Names::NONE.vllm("prompt_logprobs"),
        bounds: Some(Bounds::closed(0.0, MAX_LOGPROBS as f64)),
        off: Some("null"),
        ..spec("prompt_lp", Engines::ALL, count(5, 0, MAX_LOGPROBS as i64))
    };
    /// Which numbers logprobs report (vLLM's engine argument): raw_logprobs, processed_logprobs
    /// (after penalties, temperature and filters), raw_logits or processed_logits.
    LogprobsMode logprobs_mode: LogprobsMode = LogprobsMode::RawLogprobs, FieldSpec {
        // A report samplab gives under every profile; only vLLM's export can ask for it.
        exported: Some(Engines::VLLM),
        ..spec("lp_mode", Engines::ALL, Knob::Choice(LogprobsMode::NAMES))
    };
    /// Whose samplers, order and formulas: vllm, transformers or llama.cpp.
    Engine engine: Engine = Engine::Vllm,
        spec("engine", Engines::ALL, Knob::Choice(&["vllm", "transformers", "llama.cpp"]));
    /// llama.cpp's chain order by stage name, as its --samplers; null is its default order.
    Samplers samplers: Option<Stages> = None, FieldSpec {
        names: Names::NONE.llama_server("samplers").flag("--samplers"),
        off: Some("null"),
        ..spec("samplers", Engines::LLAMA_CPP, Knob::Text)
    };
    /// Subtracts this from the logit of every token already generated; 0 is off.
    PresencePenalty presence_penalty: f32 = 0.0, FieldSpec {
        names: Names::all("presence_penalty").flag("--presence-penalty"),
        bounds: Some(Bounds::closed(-2.0, 2.0)),
        off: Some("0.0"),
        ..spec("presence", VLLM_AND_LLAMA_CPP, decimal(0.05, 0.5, -2.0, 2.0))
    };
    /// Subtracts this times its count from the logit of every generated token; 0 is off.
    FrequencyPenalty frequency_penalty: f32 = 0.0, FieldSpec {
        names: Names::all("frequency_penalty").flag("--frequency-penalty"),
        bounds: Some(Bounds::closed(-2.0, 2.0)),
        off: Some("0.0"),
        ..spec("frequency", VLLM_AND_LLAMA_CPP, decimal(0.05, 0.5, -2.0, 2.0))
    };
    /// Window of the penalties in tokens (prompt included): -1 the whole context, 0 off.
    RepeatLastN repeat_last_n: i32 = 64, FieldSpec {
        names: Names::NONE.llama_server("repeat_last_n").flag("--repeat-last-n"),
        bounds: Some(Bounds::at_least(-1.0)),
        valid: "must be -1 (the whole context), 0 (penalties off) or >= 1",
        off: Some("0"),
        ..spec("repeat_n", Engines::LLAMA_CPP, Knob::Doubling { max: DOUBLING_MAX, vocab: false })
    };
    /// EOS and stop token ids cannot be drawn before this many tokens.
    MinTokens min_tokens: u32 = 0, FieldSpec {
        names: Names::NONE.vllm("min_tokens").llama_cpp_python("min_tokens").transformers("min_new_tokens"),
        valid: "must be >= 0; 0 is off",
        off: Some("0"),
        ..spec("min_tokens", VLLM_AND_TRANSFORMERS, Knob::Doubling { max: DOUBLING_MAX, vocab: false })
    };
    /// EOS does not end a sample (it may still be drawn).
    IgnoreEos ignore_eos: bool = false, FieldSpec {
        names: Names::NONE.vllm("ignore_eos").llama_server("ignore_eos").flag("--ignore-eos"),
        off: Some("false"),
        ..spec("ignore_eos", VLLM_AND_LLAMA_CPP, Knob::Toggle)
    };
    /// Ends a sample whose tokens end in a pattern repeated min_count times, as vLLM's n-gram
    /// check: {max_pattern_size: 8, min_count: 3}, min_pattern_size 0 read as 1.
    RepetitionDetection repetition_detection: Option<RepetitionDetection> = None, FieldSpec {
        names: Names::NONE.vllm("repetition_detection"),
        off: Some("null"),
        // samplab detects under every profile; only vLLM's export can ask for it.
        exported: Some(Engines::VLLM),
        ..spec("rep_detect", Engines::ALL, Knob::Text)
    };
    /// Token id -> bias added to its logit, clamped to [-100, 100]: {13: -100}.
    LogitBias logit_bias: Option<LogitBias> = None, FieldSpec {
        names: Names::NONE.vllm("logit_bias").transformers("sequence_bias").flag("-l"),
        off: Some("null"),
        ..spec("logit_bias", Engines::ALL, Knob::Text)
    };
    /// Words that may not be generated (their last token is banned after the rest).
    BadWords bad_words: Option<Vec<String>> = None, FieldSpec {
        names: Names::NONE.vllm("bad_words").transformers("bad_words_ids"),
        off: Some("null"),
        ..spec("bad_words", VLLM_AND_TRANSFORMERS, Knob::Text)
    };
    /// Only these token ids may be drawn.
    AllowedTokenIds allowed_token_ids: Option<Vec<u32>> = None, FieldSpec {
        names: Names::NONE.vllm("allowed_token_ids"),
        off: Some("null"),
        ..spec("allowed_ids", Engines::VLLM, Knob::Text)
    };
    /// The output must satisfy a constraint, as vLLM's structured outputs: {json: a schema or
    /// its file}, {regex: …}, {choice: [a, b]}, {grammar: GBNF or Lark}, {json_object: true}.
    StructuredOutputs structured_outputs: Option<StructuredOutputs> = None, FieldSpec {
        names: Names::NONE.vllm("structured_outputs"),
        off: Some("null"),
        ..spec("structured", Engines::ALL, Knob::Text)
    };
    /// The output must follow this GBNF grammar (llama.cpp's --grammar).
    Grammar grammar: Option<String> = None, FieldSpec {
        names: Names::NONE.flag("--grammar"),
        off: Some("null"),
        // Every engine's export carries it: vLLM's as structured_outputs.grammar (GBNF).
        exported: Some(Engines::ALL),
        ..spec("grammar", Engines::LLAMA_CPP, Knob::Text)
    };
    /// The output must be JSON that this schema (or the file it names) accepts (llama.cpp's
    /// --json-schema).
    JsonSchema json_schema: Option<Schema> = None, FieldSpec {
        names: Names::NONE.flag("--json-schema"),
        off: Some("null"),
        // Every engine's export carries it: vLLM's as structured_outputs.json.
        exported: Some(Engines::ALL),
        ..spec("json_schema", Engines::LLAMA_CPP, Knob::Text)
    };
    /// Keeps the tokens whose surprise is closest to the entropy, up to this mass; 1 is off.
    TypicalP typical_p: f32 = 1.0, FieldSpec {
        names: Names::NONE.llama_server("typical_p").transformers("typical_p").flag("--typical"),
        bounds: Some(Bounds::above_to(0.0, 1.0)),
        off: Some("1.0"),
        ..spec("typical_p", LLAMA_CPP_AND_TRANSFORMERS, decimal(0.01, 0.1, 0.01, 1.0))
    };
    /// Keeps the likeliest tokens while the entropy they hold stays within top_h times that of
    /// the 100 likeliest (transformers' top-h); null is off.
    TopH top_h: Option<f32> = None, FieldSpec {
        bounds: Some(Bounds::above_to(0.0, 1.0)),
        valid: "must be in (0, 1], or null for off",
        off: Some("null"),
        names: Names::NONE.transformers("top_h"),
        ..spec("top_h", Engines::TRANSFORMERS, decimal(0.05, 0.2, 0.05, 1.0))
    };
    /// Keeps logits within n standard deviations of the largest; -1 (or 0) is off.
    TopNSigma top_n_sigma: f32 = -1.0, FieldSpec {
        names: Names::NONE.llama_server("top_n_sigma").flag("--top-nsigma"),
        bounds: Some(Bounds::at_least(-1.0)),
        valid: "must be a finite number >= -1; <= 0 is off",
        off: Some("-1.0"),
        ..spec("top_n_sigma", Engines::LLAMA_CPP, decimal(0.1, 1.0, -1.0, 10.0))
    };
    /// Chance per step that XTC removes the likeliest tokens above its threshold; 0 is off.
    XtcProbability xtc_probability: f32 = 0.0, FieldSpec {
        names: Names::NONE.llama_server("xtc_probability").flag("--xtc-probability"),
        bounds: Some(Bounds::closed(0.0, 1.0)),
        off: Some("0.0"),
        ..spec("xtc_prob", Engines::LLAMA_CPP, decimal(0.05, 0.25, 0.0, 1.0))
    };
    /// XTC removes all but the least likely of the tokens at least this likely; > 0.5 is off.
    XtcThreshold xtc_threshold: f32 = 0.1, FieldSpec {
        names: Names::NONE.llama_server("xtc_threshold").flag("--xtc-threshold"),
        bounds: Some(Bounds::closed(0.0, 1.0)),
        valid: "must be in [0, 1]; above 0.5 XTC never acts",
        ..spec("xtc_thresh", Engines::LLAMA_CPP, decimal(0.01, 0.1, 0.0, 1.0))
    };
    /// DRY: penalty scale for tokens that would extend a repeated sequence; 0 is off.
    DryMultiplier dry_multiplier: f32 = 0.0, FieldSpec {
        names: Names::NONE.llama_server("dry_multiplier").flag("--dry-multiplier"),
        bounds: Some(Bounds::at_least(0.0)),
        off: Some("0.0"),
        ..spec("dry_mult", Engines::LLAMA_CPP, decimal(0.05, 0.5, 0.0, 5.0))
    };
    /// DRY: the penalty grows as base^(length - allowed_length).
    DryBase dry_base: f32 = 1.75, FieldSpec {
        names: Names::NONE.llama_server("dry_base").flag("--dry-base"),
        bounds: Some(Bounds::at_least(1.0)),
        ..spec("dry_base", Engines::LLAMA_CPP, decimal(0.05, 0.25, 1.0, 4.0))
    };
    /// DRY: repeats up to this long are free.
    DryAllowedLength dry_allowed_length: u32 = 2, FieldSpec {
        names: Names::NONE.llama_server("dry_allowed_length").flag("--dry-allowed-length"),
        bounds: Some(Bounds::at_least(1.0)),
        ..spec("dry_len", Engines::LLAMA_CPP, count(4, 1, 64))
    };
    /// DRY: how many recent tokens it scans: -1 the whole context, 0 off.
    DryPenaltyLastN dry_penalty_last_n: i32 = -1, FieldSpec {
        names: Names::NONE.llama_server("dry_penalty_last_n").flag("--dry-penalty-last-n"),
        bounds: Some(Bounds::at_least(-1.0)),
        valid: "must be -1 (the whole context), 0 (off) or >= 1",
        off: Some("0"),
        ..spec("dry_last_n", Engines::LLAMA_CPP, Knob::Doubling { max: DOUBLING_MAX, vocab: false })
    };
    /// DRY: strings that end a repeated sequence.
    DrySequenceBreakers dry_sequence_breakers: Vec<String> = ["\n", ":", "\"", "*"]
        .map(str::to_owned).to_vec(), FieldSpec {
        names: Names::NONE.llama_server("dry_sequence_breakers").flag("--dry-sequence-breaker"),
        ..spec("dry_break", Engines::LLAMA_CPP, Knob::Text)
    };
    /// Mirostat 1 or 2 replaces the chain by temperature + mirostat; 0 is off.
    Mirostat mirostat: u32 = 0, FieldSpec {
        names: Names::NONE.llama_server("mirostat").llama_cpp_python("mirostat_mode").flag("--mirostat"),
        bounds: Some(Bounds::closed(0.0, 2.0)),
        valid: "must be 0 (off), 1 or 2",
        off: Some("0"),
        ..spec("mirostat", Engines::LLAMA_CPP, count(1, 0, 2))
    };
    /// Mirostat: the target surprise in bits.
    MirostatTau mirostat_tau: f32 = 5.0, FieldSpec {
        names: Names::NONE.llama_server("mirostat_tau").llama_cpp_python("mirostat_tau").flag("--mirostat-ent"),
        bounds: Some(Bounds::at_least(0.0)),
        ..spec("miro_tau", Engines::LLAMA_CPP, decimal(0.5, 2.0, 0.0, 20.0))
    };
    /// Mirostat: how fast it corrects towards tau.
    MirostatEta mirostat_eta: f32 = 0.1, FieldSpec {
        names: Names::NONE.llama_server("mirostat_eta").llama_cpp_python("mirostat_eta").flag("--mirostat-lr"),
        bounds: Some(Bounds::at_least(0.0)),
        ..spec("miro_eta", Engines::LLAMA_CPP, decimal(0.01, 0.1, 0.0, 1.0))
    };
    /// adaptive-p: the probability the chosen tokens should average; each draw favours tokens
    /// near a target moved by how far the recent average missed it. Negative (-1) is off.
    AdaptiveTarget adaptive_target: f32 = -1.0, FieldSpec {
        names: Names::NONE.llama_server("adaptive_target").flag("--adaptive-target"),
        bounds: Some(Bounds::closed(-1.0, 1.0)),
        valid: "must be in [0, 1], or negative (down to -1) for off",
        off: Some("-1.0"),
        ..spec("adapt_p", Engines::LLAMA_CPP, decimal(0.05, 0.25, 0.0, 1.0))
    };
    /// adaptive-p: how slowly its average forgets; it spans about 1 / (1 - decay) tokens.
    AdaptiveDecay adaptive_decay: f32 = 0.9, FieldSpec {
        names: Names::NONE.llama_server("adaptive_decay").flag("--adaptive-decay"),
        bounds: Some(Bounds::closed(0.0, 0.99)),
        valid: "must be in [0, 0.99]",
        ..spec("adapt_decay", Engines::LLAMA_CPP, decimal(0.01, 0.1, 0.0, 0.99))
    };
    /// Dynamic temperature: temperature ± this, by the entropy; 0 is off.
    DynatempRange dynatemp_range: f32 = 0.0, FieldSpec {
        names: Names::NONE.llama_server("dynatemp_range").flag("--dynatemp-range"),
        bounds: Some(Bounds::at_least(0.0)),
        off: Some("0.0"),
        ..spec("dyn_range", Engines::LLAMA_CPP, decimal(0.05, 0.5, 0.0, 2.0))
    };
    /// Dynamic temperature: the exponent on the normalised entropy.
    DynatempExponent dynatemp_exponent: f32 = 1.0, FieldSpec {
        names: Names::NONE.llama_server("dynatemp_exponent").flag("--dynatemp-exp"),
        bounds: Some(Bounds::at_least(0.0)),
        ..spec("dyn_exp", Engines::LLAMA_CPP, decimal(0.05, 0.5, 0.0, 5.0))
    };
    /// Filters keep at least this many tokens (llama.cpp's min_keep); 0 is none.
    MinKeep min_keep: u32 = 0, FieldSpec {
        names: Names::NONE.llama_server("min_keep").flag("--min-keep"),
        valid: "must be >= 0; 0 is none",
        off: Some("0"),
        ..spec("min_keep", Engines::LLAMA_CPP, count(4, 0, 64))
    };
}
