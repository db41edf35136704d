//! Watched tokens: the `watch` items resolved to token ids once per run, and their raw
//! logprobs along the prompt; the sampler reports them at each generated step.

use crate::model::text::token_text;
use crate::params::{SamplingParams, TokenText};
use crate::response::Watched;
use crate::sampling::{log_normalizer, logprob_of};
use indexmap::IndexMap;
use tokenizers::Tokenizer;

/// The `watch` items as tokens, or `None` without `watch`; an item that makes no token is an
/// error that names it.
pub fn resolve(
    tokenizer: &Tokenizer,
    params: &SamplingParams,
) -> anyhow::Result<Option<Vec<Watched>>> {
    let Some(watch) = params.watch.as_ref().filter(|w| !w.is_empty()) else {
        return Ok(None);
    };
    watch
        .0
        .iter()
        .map(|item| {
            let (id, tokens) = match item {
                TokenText::Token(id) => (*id, 1),
                TokenText::Text(text) => token_of(tokenizer, text).ok_or_else(|| {
                    anyhow::anyhow!(
                        "watch {text:?} makes no token in this model's vocabulary; give a string \
                         that does, or a token id"
                    )
                })?,
            };
            Ok(Watched {
                name: item.name(),
                id,
                first_of: (tokens > 1).then_some(tokens),
            })
        })
        .collect::<anyhow::Result<_>>()
        .map(Some)
}

/// The token `text` names and how many tokens it makes: the one token it encodes to; else
/// the token shown with exactly this text (a SentencePiece tokenizer encodes " the" as a
/// space and "the", while its token "▁the" is shown as " the"); else its first token.
fn token_of(tokenizer: &Tokenizer, text: &str) -> Option<(u32, usize)> {
    let ids = tokenizer.encode(text, false).ok()?.get_ids().to_vec();
    if ids.len() == 1 {
        return Some((ids[0], 1));
    }
    let vocab = tokenizer.get_vocab_size(true) as u32;
    (0..vocab)
        .find(|&id| token_text(tokenizer, id) == text)
        .map(|id| (id, 1))
        .or_else(|| Some((*ids.first()?, ids.len())))
}

/// One empty series per watched token, for a sample to fill.
pub fn series<T>(watch: &[Watched]) -> IndexMap<String, Vec<T>> {
    watch.iter().map(|w| (w.name.clone(), Vec::new())).collect()
}

/// Each watched token's raw logprob at every prompt position: none at the first, then from
/// the logits of the position before (`rows[i]` predicts token `i + 1`).
pub fn along_prompt(
    rows: &[Vec<f32>],
    watch: &[Watched],
) -> anyhow::Result<IndexMap<String, Vec<Option<f32>>>> {
    let mut out: IndexMap<String, Vec<Option<f32>>> =
        watch.iter().map(|w| (w.name.clone(), vec![None])).collect();
    for row in rows {
        let log_norm = log_normalizer(row)?.log_norm;
        for (w, values) in watch.iter().zip(out.values_mut()) {
            values.push(Some(logprob_of(row, log_norm, w.id)));
        }
    }
    Ok(out)
}
