//! The GGUF tokenizer against llama.cpp: the stories260K SentencePiece vocabulary, a tiny
//! byte-level BPE vocabulary written here, and malformed metadata.

use crate::common;

use std::collections::HashMap;
use std::fs::File;
use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value, VersionedMagic};
use samplab::model::text::gguf_tokenizer::{
    GgufTokenizer, GgufTokenizerError, tokenizer_from_gguf,
};

fn stories() -> Option<GgufTokenizer> {
    let path = common::test_model()?;
    let mut file = File::open(path).expect("open the test model");
    let content = Content::read(&mut file).expect("read the GGUF metadata");
    Some(tokenizer_from_gguf(&content).expect("build the tokenizer"))
}

/// llama.cpp's ids for stories260K.gguf, produced with llama-cpp-python 0.3.36:
/// `Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=True, special=False)`.
const STORIES_ORACLE: &[(&str, &[u32])] = &[
    ("Once upon a time", &[1, 403, 407, 261, 378]),
    ("", &[1]),
    (" ", &[1, 410, 410]),
    ("  ", &[1, 410, 410, 410]),
    ("a", &[1, 261]),
    (" a", &[1, 410, 261]),
    ("a ", &[1, 261, 410]),
    ("  leading", &[1, 410, 410, 278, 411, 380, 299]),
    ("trailing  ", &[1, 259, 420, 412, 290, 299, 410, 410]),
    (
        "double  space",
        &[1, 279, 277, 430, 305, 410, 262, 427, 412, 331],
    ),
    ("Hello world", &[1, 346, 306, 414, 263, 304, 341]),
    ("hello\nworld", &[1, 281, 306, 414, 13, 424, 304, 341]),
    ("\n", &[1, 410, 13]),
    ("\n\n", &[1, 410, 13, 13]),
    (
        "line one\nline two\n",
        &[
            1, 278, 271, 411, 353, 411, 13, 421, 271, 411, 259, 424, 414, 13,
        ],
    ),
    ("tab\there", &[1, 259, 412, 430, 12, 260, 276]),
    ("12345", &[1, 410, 475, 479, 472, 484, 480]),
    ("3.14159", &[1, 410, 472, 426, 475, 484, 475, 480, 483]),
    ("1, 2, 3", &[1, 410, 475, 432, 410, 479, 432, 410, 472]),
    (
        "I'm sure it's Tom's",
        &[
            1, 359, 439, 423, 262, 425, 276, 312, 439, 419, 274, 287, 439, 419,
        ],
    ),
    (
        "Wait... what?!",
        &[
            1, 410, 448, 412, 275, 426, 426, 426, 263, 415, 294, 450, 443,
        ],
    ),
    (
        "(parens) [brackets] {braces}",
        &[
            1, 410, 489, 427, 412, 276, 416, 419, 488, 410, 508, 430, 420, 412, 340, 316, 419, 509,
            410, 126, 430, 420, 412, 331, 419, 128,
        ],
    ),
    (
        "e-mail: a@b.c",
        &[1, 344, 464, 423, 412, 290, 467, 261, 67, 430, 426, 429],
    ),
    (
        "#hashtag $100 50%",
        &[
            1, 410, 38, 415, 412, 419, 415, 413, 412, 428, 410, 494, 475, 477, 477, 410, 480, 477,
            501,
        ],
    ),
    ("é", &[1, 410, 485]),
    ("café", &[1, 280, 412, 431, 485]),
    (
        "naïve résumé",
        &[1, 297, 412, 198, 178, 360, 352, 485, 419, 425, 423, 485],
    ),
    ("€", &[1, 410, 503]),
    ("😀", &[1, 410, 243, 162, 155, 131]),
    ("é€😀", &[1, 410, 485, 503, 243, 162, 155, 131]),
    (
        "日本語",
        &[1, 410, 233, 154, 168, 233, 159, 175, 235, 173, 161],
    ),
    (
        "Ünïcödé",
        &[1, 410, 198, 159, 416, 198, 178, 429, 198, 185, 418, 485],
    ),
    ("The END.", &[1, 291, 410, 459, 458, 455, 426]),
    (
        "ALL CAPS TEXT",
        &[
            1, 410, 447, 438, 438, 410, 457, 447, 460, 437, 274, 459, 478, 434,
        ],
    ),
    ("a\u{a0}b", &[1, 261, 498, 430]),
    ("x\r\ny", &[1, 410, 444, 16, 13, 422]),
    ("<s>", &[1, 410, 504, 419, 505]),
    ("</s>", &[1, 410, 504, 492, 419, 505]),
    ("<unk>", &[1, 410, 504, 379, 433, 505]),
    (
        "<s> hi </s>",
        &[1, 410, 504, 419, 505, 270, 417, 410, 504, 492, 419, 505],
    ),
    ("<0x0A>", &[1, 410, 504, 477, 444, 477, 447, 505]),
    (
        "Lily and Ben went to the park.",
        &[
            1, 317, 269, 368, 302, 263, 377, 267, 265, 282, 295, 433, 426,
        ],
    ),
    (
        "She said, \"Let's play!\"",
        &[1, 338, 336, 432, 313, 438, 316, 439, 419, 337, 443, 436],
    ),
    (
        "once upon a time there was a little girl named Lily",
        &[
            1, 353, 331, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317,
        ],
    ),
    ("   ", &[1, 410, 410, 410, 410]),
    (
        "a  b   c    d",
        &[1, 261, 410, 268, 410, 410, 280, 410, 410, 410, 279],
    ),
    (
        "supercalifragilisticexpialidocious",
        &[
            1, 262, 425, 427, 285, 429, 412, 421, 417, 431, 420, 412, 428, 290, 293, 413, 417, 331,
            444, 427, 417, 412, 421, 292, 414, 429, 417, 277, 419,
        ],
    ),
    (
        "don't can't won't",
        &[
            1, 279, 289, 439, 413, 280, 303, 439, 413, 263, 289, 439, 413,
        ],
    ),
];

#[test]
fn once_upon_a_time_matches_llama_cpp() {
    let Some(tok) = stories() else { return };
    assert_eq!(
        tok.encode_prompt("Once upon a time").unwrap(),
        [1, 403, 407, 261, 378]
    );
    let reference = common::reference().unwrap();
    let expected: Vec<u32> =
        serde_json::from_value(reference["prompts"]["Once upon a time"]["prompt_tokens"].clone())
            .unwrap();
    assert_eq!(tok.encode_prompt("Once upon a time").unwrap(), expected);
}

#[test]
fn tricky_texts_match_llama_cpp() {
    let Some(tok) = stories() else { return };
    for (text, expected) in STORIES_ORACLE {
        assert_eq!(&tok.encode_prompt(text).unwrap(), expected, "text {text:?}");
    }
}

#[test]
fn greedy_tokens_decode_to_the_reference_text() {
    let Some(tok) = stories() else { return };
    let reference = common::reference().unwrap();
    let prompt = &reference["prompts"]["Once upon a time"];
    let ids: Vec<u32> = serde_json::from_value(prompt["greedy_tokens"].clone()).unwrap();
    let text = tok.tokenizer.decode(&ids, true).unwrap();
    assert_eq!(text, prompt["greedy_text"].as_str().unwrap());
}

#[test]
fn decoding_gives_back_the_text() {
    let Some(tok) = stories() else { return };
    for (text, ids) in STORIES_ORACLE {
        assert_eq!(&tok.tokenizer.decode(ids, true).unwrap(), text);
    }
}

#[test]
fn control_tokens_come_only_from_metadata_and_vanish_on_decode() {
    let Some(tok) = stories() else { return };
    assert_eq!(tok.bos_id, Some(1));
    assert_eq!(tok.eos_ids, [2]);
    assert!(tok.add_bos);
    assert!(!tok.add_eos);
    let ids = tok.tokenizer.encode("<s> hi </s>", false).unwrap();
    assert!(!ids.get_ids().iter().any(|&id| id == 1 || id == 2));
    assert_eq!(tok.tokenizer.decode(&[1, 403, 2], true).unwrap(), "Once");
    assert_eq!(
        tok.tokenizer.decode(&[1, 403, 2], false).unwrap(),
        "<s> Once</s>"
    );
    assert_eq!(
        tok.tokenizer.encode("Once", false).unwrap().get_ids(),
        [403]
    );
}

/// GPT-2's printable stand-in for byte `b`, so that every byte has a one-character token.
fn byte_char(b: u8) -> char {
    let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable {
        return char::from(b);
    }
    let shifted = (0..b)
        .filter(|&c| !matches!(c, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF))
        .count();
    char::from_u32(256 + shifted as u32).unwrap()
}

const CONTROL: u32 = 265;
const USER_DEFINED: u32 = 266;
const DOG: u32 = 267;

/// A byte-level BPE vocabulary: id b is byte b, then merges and special tokens. " dog" is a
/// token that no merge reaches, which only a `pre` with llama.cpp's ignore_merges finds. The
/// `llama.*` keys are there so that llama.cpp loads the file: the frozen ids in
/// `tiny_bpe_matches_llama_cpp` come from writing these bytes to `{pre}.gguf` and running
/// llama-cpp-python 0.3.36, `Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=True,
/// special=False)`.
fn tiny_bpe(pre: &str) -> Content {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    tokens.extend(
        [
            "Ġt",
            "he",
            "Ġthe",
            "at",
            "Ġc",
            "Ġcat",
            "12",
            "123",
            "ĊĊ",
            "<|endoftext|>",
            "<tool>",
            "Ġdog",
        ]
        .map(String::from),
    );
    let mut types = vec![1i32; tokens.len()];
    types[CONTROL as usize] = 3;
    types[USER_DEFINED as usize] = 4;
    let merges = [
        "Ġ t", "h e", "Ġt he", "a t", "Ġ c", "Ġc at", "1 2", "12 3", "Ċ Ċ",
    ];
    let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.context_length", Value::U32(64)),
        ("llama.embedding_length", Value::U32(8)),
        ("llama.block_count", Value::U32(1)),
        ("llama.feed_forward_length", Value::U32(16)),
        ("llama.attention.head_count", Value::U32(2)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String(pre.into())),
        ("tokenizer.ggml.tokens", strings(tokens)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.merges",
            strings(merges.map(String::from).to_vec()),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(CONTROL)),
        ("tokenizer.ggml.eos_token_id", Value::U32(CONTROL)),
    ];
    let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &refs, &[]).unwrap();
    bytes.set_position(0);
    Content::read(&mut bytes).unwrap()
}

/// Texts for the tiny vocabulary.
const BPE_TEXTS: &[&str] = &[
    "the cat",
    " the cat",
    "the  cat\n\nthe",
    "12345",
    " dog",
    "a<tool>b <|endoftext|>",
    "é😀",
    "",
];

#[test]
fn tiny_bpe_matches_llama_cpp() {
    let oracle: &[(&str, &[&[u32]])] = &[
        (
            "llama-bpe",
            &[
                &[265, 116, 257, 261],
                &[265, 258, 261],
                &[265, 116, 257, 32, 261, 264, 116, 257],
                &[265, 263, 52, 53],
                &[265, 267],
                &[
                    265, 97, 266, 98, 32, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116,
                    124, 62,
                ],
                &[265, 195, 169, 240, 159, 152, 128],
                &[265],
            ],
        ),
        (
            "qwen2",
            &[
                &[116, 257, 261],
                &[258, 261],
                &[116, 257, 32, 261, 264, 116, 257],
                &[49, 50, 51, 52, 53],
                &[32, 100, 111, 103],
                &[
                    97, 266, 98, 32, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62,
                ],
                &[195, 169, 240, 159, 152, 128],
                &[],
            ],
        ),
        (
            "gpt-2",
            &[
                &[116, 257, 261],
                &[258, 261],
                &[116, 257, 32, 261, 10, 10, 116, 257],
                &[263, 52, 53],
                &[32, 100, 111, 103],
                &[
                    97, 266, 98, 32, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62,
                ],
                &[195, 169, 240, 159, 152, 128],
                &[],
            ],
        ),
        (
            "smollm",
            &[
                &[116, 257, 261],
                &[258, 261],
                &[116, 257, 32, 261, 10, 10, 116, 257],
                &[49, 50, 51, 52, 53],
                &[32, 100, 111, 103],
                &[
                    97, 266, 98, 32, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62,
                ],
                &[195, 169, 240, 159, 152, 128],
                &[],
            ],
        ),
        (
            "default",
            &[
                &[116, 257, 261],
                &[258, 261],
                &[116, 257, 32, 261, 10, 10, 116, 257],
                &[263, 52, 53],
                &[32, 100, 111, 103],
                &[
                    97, 266, 98, 32, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62,
                ],
                &[195, 169, 240, 159, 152, 128],
                &[],
            ],
        ),
    ];
    for (pre, expected) in oracle {
        let tok = tokenizer_from_gguf(&tiny_bpe(pre)).unwrap();
        for (text, ids) in BPE_TEXTS.iter().zip(*expected) {
            assert_eq!(
                &tok.encode_prompt(text).unwrap(),
                ids,
                "pre {pre}, text {text:?}"
            );
            let plain = tok.tokenizer.encode(*text, false).unwrap();
            assert_eq!(tok.tokenizer.decode(plain.get_ids(), false).unwrap(), *text);
        }
    }
}

#[test]
fn bpe_special_tokens_follow_the_metadata() {
    let tok = tokenizer_from_gguf(&tiny_bpe("llama-bpe")).unwrap();
    assert!(tok.add_bos, "llama.cpp adds BOS for llama-bpe");
    assert_eq!(tok.bos_id, Some(CONTROL));
    assert_eq!(tok.eos_ids, [CONTROL]);
    let gpt2 = tokenizer_from_gguf(&tiny_bpe("gpt-2")).unwrap();
    assert!(!gpt2.add_bos, "llama.cpp adds no BOS for gpt-2");
    let ids = gpt2.tokenizer.encode("<tool><|endoftext|>", false).unwrap();
    assert_eq!(ids.get_ids()[0], USER_DEFINED);
    assert!(!ids.get_ids().contains(&CONTROL));
    assert_eq!(
        gpt2.tokenizer
            .decode(&[116, 257, CONTROL, 261], true)
            .unwrap(),
        "the cat"
    );
    assert_eq!(gpt2.tokenizer.decode(&[DOG], true).unwrap(), " dog");
}

fn content(metadata: Vec<(&str, Value)>) -> Content {
    Content {
        magic: VersionedMagic::GgufV3,
        metadata: metadata
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    }
}

fn spm(extra: Vec<(&str, Value)>) -> Content {
    let tokens = ["<unk>", "<s>", "</s>", "▁", "a", "▁a"];
    let mut metadata = vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| Value::String((*t).into())).collect()),
        ),
    ];
    for (key, value) in extra {
        metadata.retain(|(k, _)| *k != key);
        metadata.push((key, value));
    }
    content(metadata)
}

fn error(content: Content) -> String {
    tokenizer_from_gguf(&content).unwrap_err().to_string()
}

#[test]
fn minimal_spm_metadata_uses_llama_cpp_defaults() {
    let tok = tokenizer_from_gguf(&spm(vec![])).unwrap();
    assert_eq!(tok.bos_id, Some(1));
    assert_eq!(tok.eos_ids, [2]);
    assert!(tok.add_bos);
    assert_eq!(tok.encode_prompt("a").unwrap(), [1, 5]);
}

#[test]
fn malformed_metadata_is_an_error_that_names_the_key() {
    assert!(matches!(
        tokenizer_from_gguf(&content(vec![])),
        Err(GgufTokenizerError::MissingKey {
            key: "tokenizer.ggml.model"
        })
    ));

    let unsupported = error(spm(vec![(
        "tokenizer.ggml.model",
        Value::String("bert".into()),
    )]));
    assert!(unsupported.contains("`bert`") && unsupported.contains("llama, gpt2"));

    let no_tokens = error(content(vec![(
        "tokenizer.ggml.model",
        Value::String("llama".into()),
    )]));
    assert!(no_tokens.contains("tokenizer.ggml.tokens"), "{no_tokens}");

    let not_array = error(spm(vec![("tokenizer.ggml.tokens", Value::U32(3))]));
    assert!(not_array.contains("tokenizer.ggml.tokens") && not_array.contains("U32"));

    let bad_element = error(spm(vec![(
        "tokenizer.ggml.tokens",
        Value::Array(vec![Value::String("a".into()), Value::U8(1)]),
    )]));
    assert!(bad_element.contains("array holding U8"), "{bad_element}");

    let duplicate = error(spm(vec![(
        "tokenizer.ggml.tokens",
        Value::Array(vec![Value::String("a".into()), Value::String("a".into())]),
    )]));
    assert!(duplicate.contains("ids 0 and 1"), "{duplicate}");

    let short = error(spm(vec![(
        "tokenizer.ggml.scores",
        Value::Array(vec![Value::F32(0.0)]),
    )]));
    assert!(
        short.contains("tokenizer.ggml.scores") && short.contains("1 entries"),
        "{short}"
    );

    let bad_score = error(spm(vec![(
        "tokenizer.ggml.scores",
        Value::Array(vec![Value::String("x".into()); 6]),
    )]));
    assert!(bad_score.contains("tokenizer.ggml.scores"), "{bad_score}");

    let out_of_range = error(spm(vec![("tokenizer.ggml.bos_token_id", Value::U32(99))]));
    assert!(out_of_range.contains("bos_token_id") && out_of_range.contains("99"));

    let negative = error(spm(vec![("tokenizer.ggml.eos_token_id", Value::I32(-1))]));
    assert!(
        negative.contains("eos_token_id") && negative.contains("-1"),
        "{negative}"
    );

    let wrong_flag = error(spm(vec![("tokenizer.ggml.add_bos_token", Value::U8(1))]));
    assert!(wrong_flag.contains("add_bos_token") && wrong_flag.contains("a bool"));

    let no_merges = error(spm(vec![(
        "tokenizer.ggml.model",
        Value::String("gpt2".into()),
    )]));
    assert!(no_merges.contains("tokenizer.ggml.merges"), "{no_merges}");

    let bos_needed = error(spm(vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.merges", Value::Array(vec![])),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
    ]));
    assert!(bos_needed.contains("bos_token_id"), "{bos_needed}");
}

#[test]
fn a_one_mib_token_loads_in_linear_time() {
    let long = "a".repeat(1 << 20);
    let tokens = ["<unk>", "<s>", "</s>", "▁", "a", "▁a", long.as_str()];
    let start = std::time::Instant::now();
    let tok = tokenizer_from_gguf(&spm(vec![(
        "tokenizer.ggml.tokens",
        Value::Array(tokens.iter().map(|t| Value::String((*t).into())).collect()),
    )]))
    .unwrap();
    assert_eq!(tok.encode_prompt("a").unwrap(), [1, 5]);
    // Quadratic, this took 40 s in release; linear, well under a second.
    let guard = std::time::Duration::from_secs(10);
    assert!(start.elapsed() < guard, "{:?}", start.elapsed());
}

#[test]
fn a_byte_level_vocabulary_without_usable_merges_is_refused() {
    for merges in [vec![], vec![Value::String("x y".into())]] {
        let given = merges.len();
        let err = error(spm(vec![
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            ("tokenizer.ggml.merges", Value::Array(merges)),
        ]));
        assert!(
            err.contains("tokenizer.ggml.merges") && err.contains(&format!("({given} given)")),
            "{err}"
        );
    }
}

#[test]
fn chat_template_and_end_of_turn_tokens_are_read() {
    let tokens = ["<unk>", "<s>", "</s>", "<|im_end|>", "▁a"];
    let tok = tokenizer_from_gguf(&spm(vec![
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| Value::String((*t).into())).collect()),
        ),
        ("tokenizer.ggml.eot_token_id", Value::U32(1)),
        (
            "tokenizer.chat_template",
            Value::String("{{ messages }}".into()),
        ),
        (
            "tokenizer.chat_template.tool_use",
            Value::String("{{ tools }}".into()),
        ),
        ("tokenizer.chat_template.rag", Value::U32(7)),
    ]))
    .unwrap();
    assert_eq!(tok.eos_ids, [2, 1, 3]);
    assert_eq!(tok.chat_template.as_deref(), Some("{{ messages }}"));
    // Named templates (llama.cpp's `tokenizer.chat_template.NAME`), strings only.
    assert_eq!(
        tok.named_chat_templates,
        [("tool_use".to_owned(), "{{ tools }}".to_owned())]
    );
    assert_eq!(tok.tokenizer.decode(&[4, 3], true).unwrap(), "a");
    let ids = tok.tokenizer.encode("<|im_end|>", false).unwrap();
    assert!(
        !ids.get_ids().contains(&3),
        "end-of-turn texts are control tokens, as in llama.cpp"
    );
}

/// gpt-oss's `<|end|>` closes the reasoning before the answer: with `<|return|>` and
/// `<|call|>` (or `<|calls|>` and `<|flush|>`) among the ends, llama.cpp does not end there,
/// and neither do we; alone it still ends a reply, as Phi-3's does.
#[test]
fn harmony_ends_at_return_or_call_and_not_at_the_end_of_a_message() {
    let eos_of = |tokens: &[&str]| {
        let tokens = Value::Array(tokens.iter().map(|t| Value::String((*t).into())).collect());
        tokenizer_from_gguf(&spm(vec![("tokenizer.ggml.tokens", tokens)]))
            .unwrap()
            .eos_ids
    };
    let harmony = ["<unk>", "<s>", "</s>", "<|return|>", "<|end|>", "<|call|>"];
    assert_eq!(eos_of(&harmony), [2, 3, 5]);
    let flush = ["<unk>", "<s>", "</s>", "<|calls|>", "<|end|>", "<|flush|>"];
    assert_eq!(eos_of(&flush), [2, 3, 5]);
    let phi3 = ["<unk>", "<s>", "</s>", "<|end|>", "<|return|>"];
    assert_eq!(eos_of(&phi3), [2, 3, 4]);
}

/// A raw prompt's special-token text becomes the control token, as llama.cpp tokenizes it with
/// `parse_special = true` (llama-server's and vLLM's raw prompts); `Prompt::Literal` keeps it
/// text, as `parse_special = false` does. On the real SmolLM2 and Gemma 3, against
/// tests/fixtures/special_tokens.json (scripts/special_token_reference.py).
#[test]
fn raw_prompts_parse_special_tokens_as_llama_cpp_does_and_literal_ones_keep_them_text() {
    use samplab::engine::Prompt;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/special_tokens.json"
    ))
    .unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (family, model) in [
        ("smollm2", common::loaded_real_model()),
        ("gemma3", common::loaded_gemma()),
    ] {
        let Some(mut model) = model else { continue };
        let cases = reference[family].as_object().unwrap();
        assert!(!cases.is_empty());
        for (text, ids) in cases {
            let parsed = model.encode_prompt(&Prompt::raw(text)).unwrap().0;
            assert_eq!(parsed, common::ids(&ids["parsed"]), "{family} {text:?}");
            let literal = model
                .encode_prompt(&Prompt::Literal(text.clone()))
                .unwrap()
                .0;
            assert_eq!(
                literal,
                common::ids(&ids["literal"]),
                "{family} literal {text:?}"
            );
            // The prompt view marks the control tokens of the parsed prompt only.
            let specials = |ids: &[u32]| {
                model
                    .prompt_tokens(ids)
                    .iter()
                    .filter(|t| t.special)
                    .count()
            };
            if parsed != literal {
                assert!(specials(&parsed) > specials(&literal), "{family} {text:?}");
            }
        }
    }
}
