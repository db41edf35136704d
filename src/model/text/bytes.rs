//! The bytes each token stands for, read from its vocabulary piece rather than by decoding, so
//! that a byte-fallback token (`<0xE2>`) or a byte-level piece holding part of a character is
//! still its own bytes: what structured outputs match grammars against, and what lines two
//! tokenizations of one text up byte by byte.

use super::byte_fallback;
use std::collections::HashMap;
use tokenizers::Tokenizer;

/// A tokenizer's pieces read as bytes: byte-level BPE's pieces mapped back through GPT-2's byte
/// alphabet, SentencePiece's `▁` as a space and `<0xNN>` as the byte.
pub struct PieceBytes {
    /// The alphabet read backwards, for a byte-level vocabulary.
    byte_of: Option<HashMap<char, u8>>,
}

impl PieceBytes {
    pub fn new(tokenizer: &Tokenizer) -> Self {
        let byte_of = decodes_byte_level(tokenizer).then(|| {
            byte_alphabet()
                .into_iter()
                .enumerate()
                .map(|(byte, c)| (c, byte as u8))
                .collect()
        });
        Self { byte_of }
    }

    /// The bytes of vocabulary piece `id` (added tokens are the caller's to read); `None` for
    /// an id without a piece.
    pub fn of(&self, tokenizer: &Tokenizer, id: u32) -> Option<Vec<u8>> {
        let piece = tokenizer.id_to_token(id)?;
        if let Some(byte_of) = &self.byte_of {
            let mapped: Option<Vec<u8>> = piece.chars().map(|c| byte_of.get(&c).copied()).collect();
            return Some(mapped.unwrap_or_else(|| piece.into_bytes()));
        }
        Some(match byte_fallback(&piece) {
            Some(byte) => vec![byte],
            None => piece.replace('\u{2581}', " ").into_bytes(),
        })
    }
}

/// How special tokens (`<|im_end|>`, `</s>`) count among a text's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Specials {
    /// As no bytes: a sample's text is decoded without them.
    Skipped,
    /// As their own text: a rendered prompt spells them out, and encoding reads them back.
    Spelled,
}

/// The bytes each of `ids` adds to the text they spell; an id the tokenizer does not know adds
/// none.
pub fn text_bytes(tokenizer: &Tokenizer, ids: &[u32], specials: Specials) -> Vec<Vec<u8>> {
    let pieces = PieceBytes::new(tokenizer);
    let added = tokenizer.get_added_tokens_decoder();
    ids.iter()
        .map(|&id| match added.get(&id) {
            Some(token) if token.special && specials == Specials::Skipped => Vec::new(),
            Some(token) => token.content.clone().into_bytes(),
            None => pieces.of(tokenizer, id).unwrap_or_default(),
        })
        .collect()
}

/// Whether the tokenizer's decoder reads pieces through GPT-2's byte alphabet.
fn decodes_byte_level(tokenizer: &Tokenizer) -> bool {
    let Some(Ok(decoder)) = tokenizer.get_decoder().map(serde_json::to_value) else {
        return false;
    };
    decoder["type"] == "ByteLevel"
        || decoder["decoders"]
            .as_array()
            .is_some_and(|all| all.iter().any(|d| d["type"] == "ByteLevel"))
}

/// GPT-2's byte alphabet: byte b is `alphabet[b]`. Printable Latin-1 bytes stand for
/// themselves; the rest are moved, in order, to U+0100 onwards.
fn byte_alphabet() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut alphabet = ['\0'; 256];
    let mut moved = 0x100;
    for b in 0..=255u8 {
        alphabet[b as usize] = if printable(b) {
            char::from(b)
        } else {
            moved += 1;
            char::from_u32(moved - 1).expect("U+0100..U+0143 are characters")
        };
    }
    alphabet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_a_bijection_that_keeps_printable_bytes() {
        let alphabet = byte_alphabet();
        let mut seen: Vec<char> = alphabet.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(alphabet[b'a' as usize], 'a');
        assert_eq!(alphabet[b' ' as usize], '\u{120}', "a space is GPT-2's Ġ");
        assert_eq!(
            alphabet[b'\n' as usize], '\u{10A}',
            "a newline is GPT-2's Ċ"
        );
    }

    fn tokenizer(vocab: &str, decoder: &str) -> Tokenizer {
        let end = r#"[{"id":9,"content":"<|end|>","single_word":false,"lstrip":false,
            "rstrip":false,"normalized":false,"special":true}]"#;
        super::super::unmerged_bpe(vocab, decoder, end)
    }

    #[test]
    fn pieces_are_the_bytes_they_stand_for_and_specials_count_as_asked() {
        let byte_level = tokenizer(
            r#"{"Ġthe":0,"Ã":1,"©":2,"<|end|>":9}"#,
            r#"{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}"#,
        );
        // "é" is 0xC3 0xA9, which GPT-2's alphabet writes as "Ã©": two tokens, a byte each.
        assert_eq!(
            text_bytes(&byte_level, &[0, 1, 2, 9, 77], Specials::Skipped),
            [b" the".to_vec(), vec![0xC3], vec![0xA9], vec![], vec![]]
        );
        assert_eq!(
            text_bytes(&byte_level, &[9], Specials::Spelled),
            [b"<|end|>".to_vec()]
        );

        let sentencepiece = tokenizer(r#"{"▁the":0,"<0xE2>":1,"<|end|>":9}"#, "null");
        assert_eq!(
            text_bytes(&sentencepiece, &[0, 1], Specials::Skipped),
            [b" the".to_vec(), vec![0xE2]]
        );
    }
}
