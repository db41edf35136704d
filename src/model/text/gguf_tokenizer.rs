//! A `tokenizers::Tokenizer` built from GGUF metadata (`tokenizer.ggml.*`) that gives the token
//! ids llama.cpp gives for the same file, so that a GGUF needs no tokenizer.json beside it and
//! prompts, logprobs and stop ids line up with a llama.cpp run of the same model.
//!
//! Two vocabulary types are supported, the ones llama-family GGUFs carry:
//!
//! - `llama` (SentencePiece). llama.cpp prefixes the text with a space, turns spaces into `▁`
//!   and then repeatedly merges the adjacent pair whose concatenation is the highest-scoring
//!   vocabulary piece (ties to the leftmost pair), falling back to `<0xNN>` byte tokens for
//!   characters outside the vocabulary. A BPE model reproduces that when its merge list holds,
//!   for every piece, each split into two vocabulary pieces, ranked by the piece's score: BPE
//!   also applies the best-ranked adjacent merge first with ties to the left, so the two agree
//!   whenever distinct pieces that compete for the same characters have distinct scores. That
//!   holds for SentencePiece-BPE vocabularies (Llama 2's, Phi-3's, the tinyllamas'), whose
//!   scores are minus the merge order. Where two such pieces tie, llama.cpp picks by position
//!   and this tokenizer by token id, so ids can differ; a vocabulary without scores (all zero)
//!   is the extreme case.
//! - `gpt2` (byte-level BPE with `tokenizer.ggml.merges`), split into words first by the regex
//!   llama.cpp uses for `tokenizer.ggml.pre` (see `pre_tokenizer_for`).
//! - `gemma4` (BPE with merges over raw UTF-8, spaces as `▁`, `<0xNN>` byte tokens for the
//!   rest): split only into runs of newlines and runs of anything else; a run that is a token
//!   itself is taken whole. BOS is always added, as llama.cpp forces it.
//!
//! Token types follow llama.cpp: control and unknown tokens are special (never produced from
//! plain text, dropped by `decode(.., skip_special_tokens = true)`), user-defined tokens are cut
//! out of the text before the model sees it, byte and unused tokens are ordinary pieces.

use std::collections::{HashMap, HashSet};

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreTokenizerSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::{SpecialToken, TemplateProcessing};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
    Tokenizer,
};

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
const KEY_SCORES: &str = "tokenizer.ggml.scores";
const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const KEY_MERGES: &str = "tokenizer.ggml.merges";
const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";
const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";
const KEY_EOT: &str = "tokenizer.ggml.eot_token_id";
const KEY_EOM: &str = "tokenizer.ggml.eom_token_id";
const KEY_UNK: &str = "tokenizer.ggml.unknown_token_id";
const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const KEY_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const KEY_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// SentencePiece's word-boundary marker, which stands for a space inside pieces.
const SPACE_MARKER: &str = "\u{2581}";

/// Token texts that llama.cpp treats as end of generation whatever the metadata says, because
/// many converted models name only their base EOS (e.g. `<|im_end|>` in chat models). llama.cpp
/// also makes them control tokens whatever their type, so plain text never produces them.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// GPT-2's word split, also llama.cpp's choice for several `pre` names.
const GPT2_REGEX: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's split with its case-insensitive contractions spelled out, as llama.cpp has it.
const LLAMA3_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split: Llama 3's with single digits.
const QWEN2_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's split: Qwen2's with combining marks kept inside words.
const QWEN35_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TYPE_NORMAL: i128 = 1;
const TYPE_UNKNOWN: i128 = 2;
const TYPE_CONTROL: i128 = 3;
const TYPE_USER_DEFINED: i128 = 4;

/// A tokenizer rebuilt from a GGUF file, with the special-token facts the engine needs.
#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    /// Encodes like llama.cpp; `encode(text, true)` adds BOS/EOS as the file asks.
    pub tokenizer: Tokenizer,
    pub bos_id: Option<u32>,
    /// Every token that ends generation: EOS, EOT, EOM and llama.cpp's end-of-turn texts.
    pub eos_ids: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    /// The Jinja chat template (`tokenizer.chat_template`), if the file has one.
    pub chat_template: Option<String>,
    /// Named templates (`tokenizer.chat_template.NAME`, e.g. `tool_use`), in key order.
    pub named_chat_templates: Vec<(String, String)>,
    /// A byte-level vocabulary's `tokenizer.ggml.pre` that samplab does not know, so that its
    /// ids may not be llama.cpp's (see [`knows_pre_tokenizer`]).
    pub unknown_pre: Option<String>,
}

impl GgufTokenizer {
    /// Token ids of a prompt, with BOS (and EOS) added as the GGUF asks, like llama.cpp's
    /// `llama_tokenize(.., add_special = true, parse_special = false)`.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, GgufTokenizerError> {
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(GgufTokenizerError::Encode)?;
        Ok(encoding.get_ids().to_vec())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GgufTokenizerError {
    #[error("the GGUF metadata has no `{key}`, which the tokenizer needs")]
    MissingKey { key: &'static str },
    #[error("the GGUF metadata `{key}` should be {expected}, but it is {found}")]
    WrongType {
        key: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error(
        "unsupported tokenizer model `{0}` in `tokenizer.ggml.model`; supported: llama, gpt2, gemma4"
    )]
    UnsupportedModel(String),
    #[error("`{key}` has {len} entries but `tokenizer.ggml.tokens` has {tokens}")]
    TooShort {
        key: &'static str,
        len: usize,
        tokens: usize,
    },
    #[error("`tokenizer.ggml.tokens` holds {text:?} twice, as ids {first} and {second}")]
    DuplicateToken {
        text: String,
        first: u32,
        second: u32,
    },
    #[error("`{key}` is {id}, outside the vocabulary of {vocab_size} tokens")]
    TokenIdOutOfRange {
        key: &'static str,
        id: i128,
        vocab_size: usize,
    },
    #[error("`{flag}` is true but the file names no such token (`{id_key}`)")]
    MissingSpecialToken {
        flag: &'static str,
        id_key: &'static str,
    },
    #[error(
        "`{KEY_MERGES}` has no usable merge ({given} given): a BPE vocabulary needs \
         merges of two tokens whose joined text is a token too"
    )]
    NoMerges { given: usize },
    #[error("building the tokenizer failed: {0}")]
    Build(#[source] tokenizers::Error),
    #[error("tokenizing failed: {0}")]
    Encode(#[source] tokenizers::Error),
}

/// Builds the tokenizer that llama.cpp would use for this GGUF file.
pub fn tokenizer_from_gguf(content: &Content) -> Result<GgufTokenizer, GgufTokenizerError> {
    let md = &content.metadata;
    let model = string(md, KEY_MODEL)?.ok_or(GgufTokenizerError::MissingKey { key: KEY_MODEL })?;
    let kind = match model {
        "llama" => VocabKind::Spm,
        "gpt2" => VocabKind::Bpe,
        "gemma4" => VocabKind::Gemma4,
        other => return Err(GgufTokenizerError::UnsupportedModel(other.to_owned())),
    };
    let tokens = tokens(md)?;
    let n = tokens.len();
    let types = token_types(md, n)?;

    // llama.cpp's defaults when the file is silent: SentencePiece vocabularies count on
    // <unk>=0, <s>=1, </s>=2; byte-level ones name their tokens.
    let default_id = |id: u32| (kind == VocabKind::Spm && (id as usize) < n).then_some(id);
    let bos_id = token_id(md, KEY_BOS, n)?.or(default_id(1));
    let eos_id = token_id(md, KEY_EOS, n)?.or(default_id(2));
    let unk_id = token_id(md, KEY_UNK, n)?.or(default_id(0));
    let eot_id = token_id(md, KEY_EOT, n)?;
    let eom_id = token_id(md, KEY_EOM, n)?;

    let pre = string(md, KEY_PRE)?;
    let add_bos = boolean(md, KEY_ADD_BOS)?
        .unwrap_or(kind == VocabKind::Spm || pre.is_some_and(|p| LLAMA3_PRES.contains(&p)))
        || kind == VocabKind::Gemma4;
    let add_eos = boolean(md, KEY_ADD_EOS)?.unwrap_or(false);
    if add_bos && bos_id.is_none() {
        return Err(GgufTokenizerError::MissingSpecialToken {
            flag: KEY_ADD_BOS,
            id_key: KEY_BOS,
        });
    }
    if add_eos && eos_id.is_none() {
        return Err(GgufTokenizerError::MissingSpecialToken {
            flag: KEY_ADD_EOS,
            id_key: KEY_EOS,
        });
    }

    let mut tokenizer = match kind {
        VocabKind::Spm => {
            let scores = scores(md, n)?;
            let add_space_prefix = boolean(md, KEY_ADD_SPACE_PREFIX)?.unwrap_or(true);
            let unk = unk_id.map(|id| tokens[id as usize].clone());
            spm_tokenizer(&tokens, &scores, unk, add_space_prefix)?
        }
        VocabKind::Bpe => {
            let merges = merges(md)?;
            bpe_tokenizer(&tokens, merges, pre)?
        }
        VocabKind::Gemma4 => gemma4_tokenizer(&tokens, merges(md)?)?,
    };

    let is_eog_text = |text: &str| EOG_TEXTS.contains(&text);
    let mut added = Vec::new();
    for (text, ty) in tokens.iter().zip(&types) {
        if *ty == TYPE_CONTROL || *ty == TYPE_UNKNOWN || is_eog_text(text) {
            added.push(AddedToken::from(text.clone(), true));
        } else if *ty == TYPE_USER_DEFINED {
            added.push(AddedToken::from(text.clone(), false).normalized(false));
        }
    }
    tokenizer
        .add_tokens(added)
        .map_err(GgufTokenizerError::Build)?;
    tokenizer.set_encode_special_tokens(true);
    tokenizer.with_post_processor(template(
        &tokens,
        add_bos.then_some(bos_id).flatten(),
        add_eos.then_some(eos_id).flatten(),
    )?);

    let mut eos_ids: Vec<u32> = [eos_id, eot_id, eom_id].into_iter().flatten().collect();
    for (id, text) in (0u32..).zip(&tokens) {
        if is_eog_text(text) && !eos_ids.contains(&id) {
            eos_ids.push(id);
        }
    }
    keep_harmony_messages_going(&mut eos_ids, &tokens);

    Ok(GgufTokenizer {
        tokenizer,
        bos_id,
        eos_ids,
        add_bos,
        add_eos,
        chat_template: string(md, KEY_CHAT_TEMPLATE)?.map(str::to_owned),
        named_chat_templates: named_chat_templates(md),
        unknown_pre: pre
            .filter(|&p| kind == VocabKind::Bpe && !knows_pre_tokenizer(Some(p)))
            .map(str::to_owned),
    })
}

/// In gpt-oss's harmony format `<|end|>` closes one message of a reply (the reasoning before
/// the answer), which `<|return|>` or `<|call|>` ends: where those are ends too, llama.cpp
/// takes `<|end|>` off its end-of-generation tokens, and so do we.
fn keep_harmony_messages_going(eos_ids: &mut Vec<u32>, tokens: &[String]) {
    let ends = |texts: &[&str]| {
        eos_ids
            .iter()
            .any(|&id| texts.contains(&tokens[id as usize].as_str()))
    };
    if ends(&["<|call|>", "<|calls|>"]) && ends(&["<|return|>", "<|flush|>"]) {
        eos_ids.retain(|&id| tokens[id as usize] != "<|end|>");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VocabKind {
    Spm,
    Bpe,
    Gemma4,
}

/// `pre` names that llama.cpp splits with the Llama 3 regex; they also add BOS by default and
/// take a whole word from the vocabulary before trying merges.
const LLAMA3_PRES: &[&str] = &[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
];

/// The SentencePiece vocabulary as a score-ranked BPE (see the module docs for why that is
/// llama.cpp's algorithm).
fn spm_tokenizer(
    tokens: &[String],
    scores: &[f32],
    unk: Option<String>,
    add_space_prefix: bool,
) -> Result<Tokenizer, GgufTokenizerError> {
    let vocab: Vocab = (0u32..)
        .zip(tokens)
        .map(|(id, t)| (t.clone(), id))
        .collect();
    // A split can only be two pieces if both halves have a piece's length; checking that first
    // keeps a long piece linear instead of hashing a prefix and a suffix at every character
    // (quadratic: a 1 MiB piece took 40 s).
    let lengths: HashSet<usize> = tokens.iter().map(String::len).collect();
    let mut candidates: Vec<(f32, u32, String, String)> = Vec::new();
    for (id, piece) in (0u32..).zip(tokens) {
        for (split, _) in piece.char_indices().skip(1) {
            if !(lengths.contains(&split) && lengths.contains(&(piece.len() - split))) {
                continue;
            }
            let (left, right) = piece.split_at(split);
            if vocab.contains_key(left) && vocab.contains_key(right) {
                candidates.push((scores[id as usize], id, left.to_owned(), right.to_owned()));
            }
        }
    }
    // Highest score first; equal scores by id, llama.cpp's position tie-break being
    // out of reach of a fixed merge order.
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let merges = candidates.into_iter().map(|(_, _, l, r)| (l, r)).collect();

    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(unk);
    }
    let model = builder.build().map_err(GgufTokenizerError::Build)?;

    let mut tokenizer = Tokenizer::new(model);
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new(SPACE_MARKER, " ")
            .map_err(GgufTokenizerError::Build)?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    let space_to_marker: NormalizerWrapper = Replace::new(" ", SPACE_MARKER)
        .map_err(GgufTokenizerError::Build)?
        .into();
    if add_space_prefix {
        tokenizer
            .with_normalizer(Some(NormalizerSequence::new(vec![
                Prepend::new(SPACE_MARKER.to_owned()).into(),
                space_to_marker,
            ])))
            .map_err(GgufTokenizerError::Build)?;
        decoders.push(Strip::new(' ', 1, 0).into());
    } else {
        tokenizer
            .with_normalizer(Some(space_to_marker))
            .map_err(GgufTokenizerError::Build)?;
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}

/// The byte-level BPE of a `gpt2` vocabulary with the word split llama.cpp uses for `pre`.
fn bpe_tokenizer(
    tokens: &[String],
    merges: &[Value],
    pre: Option<&str>,
) -> Result<Tokenizer, GgufTokenizerError> {
    let vocab = vocab(tokens);
    let pairs = merge_pairs(&vocab, merges)?;
    let ignore_merges = pre.is_some_and(|p| LLAMA3_PRES.contains(&p));
    let model = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(GgufTokenizerError::Build)?;

    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer_for(pre)?));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    Ok(tokenizer)
}

/// Gemma 4's BPE: merges over raw UTF-8 after spaces become `▁`, within runs of newlines and
/// runs of other text; a run that is a token is taken whole (llama.cpp does so for newline
/// runs, and merges rebuild any other run that is a token); `<0xNN>` for what no token spells.
fn gemma4_tokenizer(tokens: &[String], merges: &[Value]) -> Result<Tokenizer, GgufTokenizerError> {
    let vocab = vocab(tokens);
    let pairs = merge_pairs(&vocab, merges)?;
    let model = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .ignore_merges(true)
        .byte_fallback(true)
        .build()
        .map_err(GgufTokenizerError::Build)?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer
        .with_normalizer(Some(
            Replace::new(" ", SPACE_MARKER).map_err(GgufTokenizerError::Build)?,
        ))
        .map_err(GgufTokenizerError::Build)?;
    let runs = Split::new(
        SplitPattern::Regex(r"[^\n]+|\n+".to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(GgufTokenizerError::Build)?;
    tokenizer.with_pre_tokenizer(Some(runs));
    tokenizer.with_decoder(Some(DecoderSequence::new(vec![
        Replace::new(SPACE_MARKER, " ")
            .map_err(GgufTokenizerError::Build)?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ])));
    Ok(tokenizer)
}

fn vocab(tokens: &[String]) -> Vocab {
    (0u32..)
        .zip(tokens)
        .map(|(id, t)| (t.clone(), id))
        .collect()
}

/// `tokenizer.ggml.merges` as pairs of tokens whose joined text is a token too.
fn merge_pairs(
    vocab: &Vocab,
    merges: &[Value],
) -> Result<Vec<(String, String)>, GgufTokenizerError> {
    let mut pairs = Vec::with_capacity(merges.len());
    for merge in merges {
        let Value::String(merge) = merge else {
            return Err(wrong_element(KEY_MERGES, "an array of strings", merge));
        };
        // Like llama.cpp, split at the first space after the first byte (a merge's left part
        // may itself be a space). A merge whose parts or result are not tokens cannot live in
        // a BPE model and is skipped; llama.cpp would apply it and spell the result out as
        // byte tokens, but well-formed files have none.
        let Some(split) = merge.bytes().skip(1).position(|b| b == b' ').map(|i| i + 1) else {
            continue;
        };
        let (left, right) = (&merge[..split], &merge[split + 1..]);
        if vocab.contains_key(left)
            && vocab.contains_key(right)
            && vocab.contains_key(&format!("{left}{right}"))
        {
            pairs.push((left.to_owned(), right.to_owned()));
        }
    }
    if pairs.is_empty() {
        return Err(GgufTokenizerError::NoMerges {
            given: merges.len(),
        });
    }
    Ok(pairs)
}

/// The word split llama.cpp applies for a `tokenizer.ggml.pre` name, then the byte-to-unicode
/// mapping. Covered: the Llama 3 family (`llama-bpe`, `llama3`, ...), the Qwen2 family
/// (`qwen2`, `deepseek-r1-qwen`, `megrez`, `stablelm2`), `qwen35`, `falcon`,
/// `deepseek-coder`, the digit-splitting GPT-2 family (`smollm`, `starcoder`, `refact`,
/// `command-r`, ...) and llama.cpp's `default` (also used when the key is absent). Everything
/// else gets GPT-2's regex: right for `gpt-2`, `phi-2`, `mpt`, `olmo` and the like, a guess for
/// names llama.cpp splits otherwise (`deepseek-llm`, `gpt-4o`, `tekken`, ...) or refuses.
/// Whether samplab splits text before merging as llama.cpp does for this `tokenizer.ggml.pre`;
/// a type it does not know is split as GPT-2 splits, which may give other ids than llama.cpp.
pub fn knows_pre_tokenizer(pre: Option<&str>) -> bool {
    pre_regexes(pre).is_some()
}

fn pre_tokenizer_for(pre: Option<&str>) -> Result<PreTokenizerWrapper, GgufTokenizerError> {
    let regexes = pre_regexes(pre).unwrap_or(&[GPT2_REGEX]);
    let mut steps: Vec<PreTokenizerWrapper> = Vec::with_capacity(regexes.len() + 1);
    for regex in regexes {
        let pattern = SplitPattern::Regex((*regex).to_owned());
        let split = Split::new(pattern, SplitDelimiterBehavior::Isolated, false)
            .map_err(GgufTokenizerError::Build)?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, true, false).into());
    Ok(PreTokenizerSequence::new(steps).into())
}

/// The regexes llama.cpp splits text with before merging, by `tokenizer.ggml.pre`; `None` for
/// a type samplab does not know.
fn pre_regexes(pre: Option<&str>) -> Option<&'static [&'static str]> {
    let regexes: &'static [&'static str] = match pre {
        Some(p) if LLAMA3_PRES.contains(&p) => &[LLAMA3_REGEX],
        Some("qwen2" | "deepseek-r1-qwen" | "megrez" | "stablelm2") => &[QWEN2_REGEX],
        Some("qwen35") => &[QWEN35_REGEX],
        Some("falcon") => &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_REGEX, "[0-9][0-9][0-9]"],
        Some("deepseek-coder") => &[
            r"[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            r"[\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+",
            r"\p{N}",
        ],
        Some(
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b",
        ) => &[r"\p{N}", GPT2_REGEX],
        None | Some("default") => &[
            r"[\p{P}\$\+<=>\^~\|]+",
            GPT2_REGEX,
            r"\p{N}+",
            "[0-9][0-9][0-9]",
        ],
        Some(_) => return None,
    };
    Some(regexes)
}

/// Prepends BOS / appends EOS on `encode(.., add_special_tokens = true)`.
fn template(
    tokens: &[String],
    bos: Option<u32>,
    eos: Option<u32>,
) -> Result<Option<TemplateProcessing>, GgufTokenizerError> {
    if bos.is_none() && eos.is_none() {
        return Ok(None);
    }
    let build_err = |e: String| GgufTokenizerError::Build(e.into());
    let mut single = Vec::new();
    let mut pair = Vec::new();
    let mut specials = Vec::new();
    if let Some(id) = bos {
        single.push("[BOS]");
        pair.push("[BOS]");
        specials.push(
            SpecialToken::new("[BOS]".into(), vec![id], vec![tokens[id as usize].clone()])
                .map_err(GgufTokenizerError::Build)?,
        );
    }
    single.push("$A");
    pair.extend(["$A", "$B:1"]);
    if let Some(id) = eos {
        single.push("[EOS]");
        pair.push("[EOS]:1");
        specials.push(
            SpecialToken::new("[EOS]".into(), vec![id], vec![tokens[id as usize].clone()])
                .map_err(GgufTokenizerError::Build)?,
        );
    }
    TemplateProcessing::builder()
        .try_single(single)
        .map_err(build_err)?
        .try_pair(pair)
        .map_err(build_err)?
        .special_tokens(specials)
        .build()
        .map(Some)
        .map_err(|e| GgufTokenizerError::Build(e.into()))
}

fn tokens(md: &HashMap<String, Value>) -> Result<Vec<String>, GgufTokenizerError> {
    let values = array(md, KEY_TOKENS, "an array of strings")?
        .ok_or(GgufTokenizerError::MissingKey { key: KEY_TOKENS })?;
    let mut tokens = Vec::with_capacity(values.len());
    for (id, value) in (0u32..).zip(values) {
        let Value::String(text) = value else {
            return Err(wrong_element(KEY_TOKENS, "an array of strings", value));
        };
        // llama.cpp renames empty tokens so that every id keeps a distinct text.
        let text = if text.is_empty() {
            format!("[EMPTY_{id}]")
        } else {
            text.clone()
        };
        tokens.push(text);
    }
    let mut seen: HashMap<&str, u32> = HashMap::with_capacity(tokens.len());
    for (id, text) in (0u32..).zip(&tokens) {
        if let Some(first) = seen.insert(text, id) {
            return Err(GgufTokenizerError::DuplicateToken {
                text: text.clone(),
                first,
                second: id,
            });
        }
    }
    Ok(tokens)
}

fn scores(md: &HashMap<String, Value>, n: usize) -> Result<Vec<f32>, GgufTokenizerError> {
    const EXPECTED: &str = "an array of numbers";
    let Some(values) = array(md, KEY_SCORES, EXPECTED)? else {
        return Ok(vec![0.0; n]);
    };
    check_len(KEY_SCORES, values.len(), n)?;
    values[..n]
        .iter()
        .map(|v| match v {
            Value::F32(x) => Ok(*x),
            Value::F64(x) => Ok(*x as f32),
            Value::I32(x) => Ok(*x as f32),
            other => Err(wrong_element(KEY_SCORES, EXPECTED, other)),
        })
        .collect()
}

fn token_types(md: &HashMap<String, Value>, n: usize) -> Result<Vec<i128>, GgufTokenizerError> {
    const EXPECTED: &str = "an array of integers";
    let Some(values) = array(md, KEY_TOKEN_TYPE, EXPECTED)? else {
        return Ok(vec![TYPE_NORMAL; n]);
    };
    check_len(KEY_TOKEN_TYPE, values.len(), n)?;
    values[..n]
        .iter()
        .map(|v| integer(v).ok_or_else(|| wrong_element(KEY_TOKEN_TYPE, EXPECTED, v)))
        .collect()
}

fn merges(md: &HashMap<String, Value>) -> Result<&[Value], GgufTokenizerError> {
    array(md, KEY_MERGES, "an array of strings")?
        .map(Vec::as_slice)
        .ok_or(GgufTokenizerError::MissingKey { key: KEY_MERGES })
}

/// `tokenizer.chat_template.NAME` keys whose values are strings, sorted by name.
fn named_chat_templates(md: &HashMap<String, Value>) -> Vec<(String, String)> {
    let prefix = format!("{KEY_CHAT_TEMPLATE}.");
    let mut named: Vec<(String, String)> = md
        .iter()
        .filter_map(|(key, value)| match value {
            Value::String(source) => Some((key.strip_prefix(&prefix)?.to_owned(), source.clone())),
            _ => None,
        })
        .collect();
    named.sort();
    named
}

fn check_len(key: &'static str, len: usize, tokens: usize) -> Result<(), GgufTokenizerError> {
    if len < tokens {
        return Err(GgufTokenizerError::TooShort { key, len, tokens });
    }
    Ok(())
}

fn array<'a>(
    md: &'a HashMap<String, Value>,
    key: &'static str,
    expected: &'static str,
) -> Result<Option<&'a Vec<Value>>, GgufTokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::Array(values)) => Ok(Some(values)),
        Some(other) => Err(wrong_type(key, expected, other)),
    }
}

fn string<'a>(
    md: &'a HashMap<String, Value>,
    key: &'static str,
) -> Result<Option<&'a str>, GgufTokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(key, "a string", other)),
    }
}

fn boolean(
    md: &HashMap<String, Value>,
    key: &'static str,
) -> Result<Option<bool>, GgufTokenizerError> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(key, "a bool", other)),
    }
}

/// A token id; GGUF says u32, but any integer type is read so that odd converters still load.
fn token_id(
    md: &HashMap<String, Value>,
    key: &'static str,
    vocab_size: usize,
) -> Result<Option<u32>, GgufTokenizerError> {
    let Some(value) = md.get(key) else {
        return Ok(None);
    };
    let id = integer(value).ok_or_else(|| wrong_type(key, "an unsigned integer", value))?;
    match u32::try_from(id) {
        Ok(id) if (id as usize) < vocab_size => Ok(Some(id)),
        _ => Err(GgufTokenizerError::TokenIdOutOfRange {
            key,
            id,
            vocab_size,
        }),
    }
}

fn integer(value: &Value) -> Option<i128> {
    Some(match *value {
        Value::U8(x) => x.into(),
        Value::I8(x) => x.into(),
        Value::U16(x) => x.into(),
        Value::I16(x) => x.into(),
        Value::U32(x) => x.into(),
        Value::I32(x) => x.into(),
        Value::U64(x) => x.into(),
        Value::I64(x) => x.into(),
        _ => return None,
    })
}

fn wrong_type(key: &'static str, expected: &'static str, found: &Value) -> GgufTokenizerError {
    GgufTokenizerError::WrongType {
        key,
        expected,
        found: format!("{:?}", found.value_type()),
    }
}

fn wrong_element(key: &'static str, expected: &'static str, found: &Value) -> GgufTokenizerError {
    GgufTokenizerError::WrongType {
        key,
        expected,
        found: format!("an array holding {:?}", found.value_type()),
    }
}
