//! The tokenizer of samplab-tiny, laid out like Llama's: ids 0-2 are `<unk>`, `<s>`, `</s>`,
//! ids 3-258 the byte tokens `<0x00>`..`<0xFF>` that any character outside the vocabulary falls
//! back to, then pieces learnt by BPE on the corpus. Words carry a leading `▁`; punctuation and
//! runs of newlines are pieces of their own, so that a prompt ending in a word tokenizes as
//! the corpus did and a paragraph break is one token.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BPE, BpeTrainer};
use tokenizers::normalizers::replace::Replace;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::sequence::Sequence as PreTokenizerSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{
    AddedToken, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
    SplitDelimiterBehavior, Tokenizer, Trainer,
};

pub const UNK: &str = "<unk>";
pub const BOS: &str = "<s>";
pub const EOS: &str = "</s>";
pub const BOS_ID: u32 = 1;
pub const EOS_ID: u32 = 2;
const WORD_START: char = '▁';

/// Trains a tokenizer of exactly `vocab_size` pieces on `texts`.
pub fn train(texts: &[String], vocab_size: usize) -> anyhow::Result<Tokenizer> {
    let specials: Vec<AddedToken> = [UNK, BOS, EOS]
        .map(str::to_owned)
        .into_iter()
        .chain((0..=255u8).map(|b| format!("<0x{b:02X}>")))
        .map(|t| AddedToken::from(t, true))
        .collect();
    let mut trainer = BpeTrainer::builder()
        .vocab_size(vocab_size)
        .special_tokens(specials)
        .show_progress(false)
        .build();
    let pre_tokenizer = pre_tokenizer()?;
    trainer
        .feed(texts.iter(), |text| {
            let mut pieces = PreTokenizedString::from(text);
            pre_tokenizer.pre_tokenize(&mut pieces)?;
            Ok(pieces
                .get_splits(OffsetReferential::Original, OffsetType::Byte)
                .into_iter()
                .map(|(piece, _, _)| piece.to_owned())
                .collect())
        })
        .map_err(anyhow::Error::msg)?;
    let mut model = BPE::builder()
        .unk_token(UNK.to_owned())
        .byte_fallback(true)
        .fuse_unk(true)
        .build()
        .map_err(anyhow::Error::msg)?;
    trainer.train(&mut model).map_err(anyhow::Error::msg)?;

    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    tokenizer.with_decoder(Some(DecoderSequence::new(vec![
        Replace::new(WORD_START.to_string(), " ")
            .map_err(anyhow::Error::msg)?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
        Strip::new(' ', 1, 0).into(),
    ])));
    tokenizer.with_post_processor(Some(
        TemplateProcessing::builder()
            .try_single(format!("{BOS} $A"))
            .and_then(|b| b.try_pair(format!("{BOS} $A {BOS}:1 $B:1")))
            .map_err(anyhow::Error::msg)?
            .special_tokens(vec![(BOS, BOS_ID)])
            .build()?,
    ));
    tokenizer
        .add_special_tokens([UNK, BOS, EOS].map(|t| AddedToken::from(t, true)))
        .map_err(anyhow::Error::msg)?;
    let actual = tokenizer.get_vocab_size(true);
    anyhow::ensure!(
        actual == vocab_size,
        "the corpus yields {actual} pieces, fewer than the {vocab_size} asked for: ask for fewer"
    );
    Ok(tokenizer)
}

/// SentencePiece's word marking (`▁` for each space, one before the first word), then
/// punctuation and newline runs split off.
fn pre_tokenizer() -> anyhow::Result<PreTokenizerSequence> {
    let split = Split::new(
        SplitPattern::Regex("\n+|[.,!?;:\"]".to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(anyhow::Error::msg)?;
    Ok(PreTokenizerSequence::new(vec![
        Metaspace::new(WORD_START, PrependScheme::First, true).into(),
        split.into(),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{PARAGRAPH_BREAK, Stories};

    fn trained() -> (Tokenizer, Vec<String>) {
        let mut stories = Stories::new(11);
        let texts: Vec<String> = (0..300).map(|_| stories.story()).collect();
        (train(&texts, 512).unwrap(), texts)
    }

    fn decode(tokenizer: &Tokenizer, ids: &[u32]) -> String {
        tokenizer.decode(ids, true).unwrap()
    }

    #[test]
    fn llama_layout_with_bos_added_and_text_round_tripping() {
        let (tokenizer, texts) = trained();
        assert_eq!(tokenizer.get_vocab_size(true), 512);
        for (id, token) in [(0, UNK), (1, BOS), (2, EOS), (3, "<0x00>"), (258, "<0xFF>")] {
            assert_eq!(tokenizer.token_to_id(token), Some(id), "{token}");
        }
        for text in &texts[..20] {
            let ids = tokenizer
                .encode(text.as_str(), true)
                .unwrap()
                .get_ids()
                .to_vec();
            assert_eq!(ids[0], BOS_ID);
            assert!(
                ids[1..].iter().all(|&id| id > 258),
                "a corpus story needs no byte token"
            );
            assert_eq!(&decode(&tokenizer, &ids), text);
        }
    }

    #[test]
    fn unseen_characters_fall_back_to_bytes_and_decode_back() {
        let (tokenizer, _) = trained();
        let text = "Lily paid 5 € for a 🎈.";
        let encoding = tokenizer.encode(text, false).unwrap();
        let tokens = encoding.get_tokens();
        for byte in ["<0xE2>", "<0x82>", "<0xAC>"] {
            assert!(tokens.iter().any(|t| t == byte), "{tokens:?}");
        }
        assert!(!encoding.get_ids().contains(&0), "no <unk>: {tokens:?}");
        assert_eq!(decode(&tokenizer, encoding.get_ids()), text);
    }

    #[test]
    fn a_paragraph_break_is_one_token_and_a_prompt_ends_on_a_word() {
        let (tokenizer, _) = trained();
        let tokens = |text: &str| tokenizer.encode(text, false).unwrap().get_tokens().to_vec();
        let story = tokens(&format!("He smiled.{PARAGRAPH_BREAK}One day, Tom ran."));
        assert!(story.contains(&PARAGRAPH_BREAK.to_owned()), "{story:?}");
        let prompt = tokens("Once upon a time");
        let sentence = tokens("Once upon a time, there was a cat.");
        assert_eq!(sentence[..prompt.len()], prompt[..]);
    }
}
