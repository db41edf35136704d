//! A token's text as the columns, the inspector and the responses show it.

use tokenizers::Tokenizer;

/// A token's own text for display: SentencePiece's "▁the" shows as " the", byte-level BPE's
/// "Ġthe" as " the", and a byte-fallback piece stays `<0xE2>` (alone it is no character).
pub fn token_text(tokenizer: &Tokenizer, id: u32) -> String {
    let Some(piece) = tokenizer.id_to_token(id) else {
        return format!("<{id}>");
    };
    if byte_fallback(&piece).is_some() {
        piece
    } else if piece.contains('\u{2581}') {
        piece.replace('\u{2581}', " ")
    } else {
        tokenizer.decode(&[id], false).unwrap_or(piece)
    }
}

/// The byte a SentencePiece byte-fallback piece (`<0x0A>`) stands for.
pub fn byte_fallback(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

#[cfg(test)]
mod tests {
    use super::{byte_fallback, token_text};
    use tokenizers::Tokenizer;

    fn tokenizer(vocab: &str, decoder: &str) -> Tokenizer {
        super::super::unmerged_bpe(vocab, decoder, "[]")
    }

    #[test]
    fn pieces_show_as_the_text_they_stand_for() {
        let byte_level = tokenizer(
            r#"{"Ġthe":0,"Ċ":1,"x":2}"#,
            r#"{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}"#,
        );
        assert_eq!(token_text(&byte_level, 0), " the");
        assert_eq!(token_text(&byte_level, 1), "\n");
        assert_eq!(token_text(&byte_level, 2), "x");
        assert_eq!(token_text(&byte_level, 99), "<99>");

        let sentencepiece = tokenizer(r#"{"▁the":0,"<0xE2>":1}"#, "null");
        assert_eq!(token_text(&sentencepiece, 0), " the");
        assert_eq!(token_text(&sentencepiece, 1), "<0xE2>");
    }

    #[test]
    fn byte_fallback_pieces_are_their_byte() {
        assert_eq!(byte_fallback("<0x0A>"), Some(b'\n'));
        assert_eq!(byte_fallback("<0xE2>"), Some(0xE2));
        assert_eq!(byte_fallback("<0xZZ>"), None);
        assert_eq!(byte_fallback("<0x123>"), None);
        assert_eq!(byte_fallback("hello"), None);
    }
}
