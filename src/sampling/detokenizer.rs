//! Incremental, UTF-8-safe detokenisation of generated tokens.
//!
//! Decoding each token on its own gives the wrong text: a SentencePiece piece `▁word` loses its
//! space at the start of a string, and a byte-fallback token like `<0xE2>` is not text at all.
//! So each step decodes a short window of recent ids and emits what the new id added to it,
//! holding back while the text ends in U+FFFD (a character still missing bytes). This is the
//! technique of vLLM and text-generation-inference; the window keeps each step cheap.

use tokenizers::Tokenizer;

const REPLACEMENT: char = '\u{FFFD}';

/// Prompt tokens kept as context, so that the first generated token decodes as it would after
/// the whole prompt (its leading space, a decoder's start-of-text rules).
const CONTEXT_TOKENS: usize = 5;

/// The most ids decoded per step. Past it, bytes still waiting for their character are given up
/// as U+FFFD and tokens without text stop being kept as context, so that a degenerate stream
/// (invalid bytes, ids the tokenizer does not know) costs no more than a normal one.
const MAX_WINDOW: usize = 32;

/// Turns one sample's generated ids into text deltas, one id at a time.
///
/// The deltas add up to the text of the generated part of `decode(prompt + generated)`, with
/// special tokens skipped (vLLM's default), for any sequence of whole characters. Ids the
/// tokenizer does not know decode to no text. Bytes of a character that is still incomplete when
/// the sample ends are never emitted (as in vLLM): they are not text yet.
#[derive(Debug, Clone)]
pub struct Detokenizer<'t> {
    tokenizer: &'t Tokenizer,
    /// The ids decoded each step. It starts at a token whose text is already on screen, so that
    /// start-of-text effects (the Strip decoder removing a leading space) hit `shown` and each
    /// new decode alike and cancel out in the difference.
    window: Vec<u32>,
    /// `window[..read]` ended on a whole character the last time it was decoded.
    read: usize,
    /// The part of the window's decode that the caller has already been given.
    shown: String,
}

impl<'t> Detokenizer<'t> {
    /// `context` is the prompt: its text is never emitted, but it decides how the first
    /// generated token decodes (a leading `▁` is a space after a word, nothing at the start).
    pub fn new(tokenizer: &'t Tokenizer, context: &[u32]) -> Self {
        let mut start = context.len().saturating_sub(CONTEXT_TOKENS);
        let mut shown = decode(tokenizer, &context[start..]);
        // A window starting inside a character would turn it into U+FFFD (with ByteFallback,
        // its whole byte run), and one without text lets Strip eat the next token's space;
        // a character is at most 4 bytes, so 3 more tokens reach its start.
        for _ in 0..3 {
            if start == 0 || !(shown.is_empty() || shown.starts_with(REPLACEMENT)) {
                break;
            }
            start -= 1;
            shown = decode(tokenizer, &context[start..]);
        }
        let window = context[start..].to_vec();
        Self {
            tokenizer,
            read: window.len(),
            window,
            shown,
        }
    }

    /// The text `id` adds, possibly empty (an unfinished character, a special token).
    pub fn push(&mut self, id: u32) -> String {
        self.window.push(id);
        let text = decode(self.tokenizer, &self.window);
        let may_wait = self.window.len() < MAX_WINDOW;
        if text.ends_with(REPLACEMENT) && may_wait {
            // The last character may still be missing bytes; what precedes it is final.
            let stable = text.trim_end_matches(REPLACEMENT);
            let delta = unshown(&self.shown, stable).to_owned();
            if !delta.is_empty() {
                self.shown = stable.to_owned();
            }
            return delta;
        }
        let delta = unshown(&self.shown, &text).to_owned();
        let tail = decode(self.tokenizer, &self.window[self.read..]);
        if tail.is_empty() && may_wait {
            // The new tokens have no text of their own: keep the older ones as context.
            self.shown = text;
        } else {
            self.window.drain(..self.read);
            self.shown = tail;
        }
        self.read = self.window.len();
        delta
    }
}

/// A decoder error (none of the usual decoders has one) reads as no text rather than ending
/// the run.
fn decode(tokenizer: &Tokenizer, ids: &[u32]) -> String {
    tokenizer.decode(ids, true).unwrap_or_default()
}

/// `text` minus what is already on screen. Normally `shown` is a prefix of `text`; when a decoder
/// rewrites earlier text (ByteFallback turns a whole run of byte tokens into U+FFFD once it
/// proves invalid), what is on screen stands and only text past its length is new.
fn unshown<'a>(shown: &str, text: &'a str) -> &'a str {
    if let Some(rest) = text.strip_prefix(shown) {
        return rest;
    }
    let start = (shown.len()..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::unshown;

    #[test]
    fn unshown_is_the_new_suffix() {
        assert_eq!(unshown("ab", "abc"), "c");
        assert_eq!(unshown("", "abc"), "abc");
        assert_eq!(unshown("abc", "abc"), "");
    }

    #[test]
    fn rewritten_text_keeps_what_was_shown_and_cuts_on_a_char_boundary() {
        assert_eq!(unshown("A", "\u{FFFD}\u{FFFD}x"), "\u{FFFD}x");
        assert_eq!(unshown("abcdef", "xyz"), "");
    }
}
