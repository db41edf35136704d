//! Edit and continue (mikupad's "edit the output and go on from there"): a sample's text as the
//! user edited it becomes a branch forced along the sample's own tokens as far as the text
//! stayed, then along the rest of the edited text as this model tokenizes it.
//!
//! The sample's tokens are never tokenized again: those whose text the edit left whole are kept
//! as they were sampled (so the branch replays their kept logits), and only the text after them
//! is tokenized. An edit that begins inside a token gives that token up: its unchanged head is
//! tokenized with the edit. An edit that ends inside a word forces the word's head as typed, and
//! the model continues after it, as mikupad's does (no token healing).

use crate::sampling::detokenizer::Detokenizer;
use tokenizers::Tokenizer;

/// Text after which the edited rest is tokenized, its own tokens then dropped: tokenizers that
/// start every text with a space marker (SentencePiece's `▁`) would read the rest alone as a
/// new word, and a newline merges with no letter in any common vocabulary.
const ANCHOR: &str = "\n";

/// How many of `sample`'s tokens the edit left whole, and the byte where the rest of `text`
/// starts. The tokens' texts are those the samples stream as (after `prompt`): the longest run
/// from the start that `text` still begins with, less tokens at its end without text of their
/// own (the first bytes of a character that the edit may have changed).
pub fn kept(tokenizer: &Tokenizer, prompt: &[u32], sample: &[u32], text: &str) -> (usize, usize) {
    let mut detokenizer = Detokenizer::new(tokenizer, prompt);
    let (mut kept, mut at) = (0, 0);
    let mut read = 0;
    for (i, &id) in sample.iter().enumerate() {
        let delta = detokenizer.push(id);
        if !text[read..].starts_with(&delta) {
            break;
        }
        read += delta.len();
        if !delta.is_empty() {
            (kept, at) = (i + 1, read);
        }
    }
    (kept, at)
}

/// Ways to tokenize `rest` with `encode` (no BOS, special-token text kept as text): after
/// [`ANCHOR`], whose tokens are dropped, and alone.
pub fn candidates(
    rest: &str,
    mut encode: impl FnMut(&str) -> tokenizers::Result<Vec<u32>>,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let failed = |e| anyhow::anyhow!("cannot tokenize the edit: {e}");
    let anchor = encode(ANCHOR).map_err(failed)?;
    let anchored = encode(&format!("{ANCHOR}{rest}")).map_err(failed)?;
    let mut candidates = Vec::new();
    if let Some(ids) = anchored.strip_prefix(anchor.as_slice()) {
        candidates.push(ids.to_vec());
    }
    candidates.push(encode(rest).map_err(failed)?);
    Ok(candidates)
}

/// The first of `candidates` whose tokens, after `context`, read back as exactly `rest`.
pub fn reading_back(
    tokenizer: &Tokenizer,
    context: &[u32],
    rest: &str,
    candidates: Vec<Vec<u32>>,
) -> anyhow::Result<Vec<u32>> {
    let reads = |ids: &[u32]| {
        let mut detokenizer = Detokenizer::new(tokenizer, context);
        ids.iter()
            .map(|&id| detokenizer.push(id))
            .collect::<String>()
    };
    let mut read = String::new();
    for ids in candidates {
        read = reads(&ids);
        if read == rest {
            return Ok(ids);
        }
    }
    anyhow::bail!(
        "the model's tokenizer reads the edit {rest:?} back as {read:?} (it normalises text); \
         the branch would not say what was typed"
    )
}
