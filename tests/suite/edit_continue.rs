//! Edit and continue on real tokenizers: the tokens whose text an edit leaves whole are kept as
//! sampled, the rest is tokenized so that it reads back exactly as typed (SentencePiece's leading
//! `▁` included), and a branch forced along them samples on after the edit.

use crate::common;

use samplab::engine::{Branch, Edit, EditRequest, LoadedModel, Prompt, Request};
use samplab::params::SamplingParams;
use samplab::response::{BranchOrigin, SampleResponse};
use samplab::sampling::detokenizer::Detokenizer;

fn run(model: &mut LoadedModel, prompt: &str, branches: Vec<Branch>) -> SampleResponse {
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw(prompt),
        lane: 0,
        params: SamplingParams::from_yaml("seed: 3\nmax_tokens: 24\nnum_samples: 1").unwrap(),
        branches,
    };
    model.run(&request, &mut || false, &mut |_| {}).unwrap()
}

/// What `ids` read as after `context`, as the columns stream it.
fn reads(model: &LoadedModel, context: &[u32], ids: &[u32]) -> String {
    let mut detokenizer = Detokenizer::new(&model.tokenizer, context);
    ids.iter().map(|&id| detokenizer.push(id)).collect()
}

/// Each token's text as the sample streamed it.
fn token_texts(model: &LoadedModel, response: &SampleResponse) -> Vec<String> {
    let mut detokenizer = Detokenizer::new(&model.tokenizer, &response.prompt_token_ids);
    response.trajectories[0]
        .token_ids
        .iter()
        .map(|&id| detokenizer.push(id))
        .collect()
}

fn edit(model: &mut LoadedModel, response: &SampleResponse, text: &str) -> Edit {
    let request = EditRequest {
        id: 9,
        prompt: response.prompt_token_ids.clone(),
        sample: response.trajectories[0].token_ids.clone(),
        text: text.to_owned(),
    };
    model.edit(&request).unwrap()
}

/// The checks every model passes: an edit inside a token (after the first) keeps the tokens
/// before it, forces text that reads back as typed, and a branch on it samples on after it; an
/// edit at the end keeps all; a cut where a token ends forces nothing.
fn edits_are_kept_tokenized_and_continued(model: &mut LoadedModel, prompt: &str) {
    let response = run(model, prompt, Vec::new());
    let texts = token_texts(model, &response);
    let sample = &response.trajectories[0].token_ids;
    let inside = (1..texts.len())
        .find(|&i| texts[i].chars().count() >= 2)
        .unwrap_or_else(|| panic!("a token of two characters: {texts:?}"));
    let head: String = texts[..inside].concat();
    // Inside that token: its first character stays, the rest is replaced.
    let first = texts[inside].chars().next().unwrap();
    let edited = format!("{head}{first}zq dragon");
    let Edit { kept, ids } = edit(model, &response, &edited);
    assert_eq!(kept, inside, "the token the edit begins inside is given up");
    let context = [&response.prompt_token_ids[..], &sample[..kept]].concat();
    assert_eq!(
        reads(model, &context, &ids),
        format!("{first}zq dragon"),
        "the forced tokens read back as typed"
    );

    let path: Vec<u32> = sample[..kept].iter().chain(&ids).copied().collect();
    let branch = Branch {
        sample: 0,
        origin: BranchOrigin {
            parent: 0,
            at: kept as u32,
        },
        path: path.clone(),
        then: None,
    };
    let continued = run(model, prompt, vec![branch]);
    let branch = &continued.trajectories[1];
    assert_eq!(branch.token_ids[..path.len()], path[..]);
    assert!(branch.token_ids.len() > path.len(), "it samples on");
    assert!(branch.text.starts_with(&edited), "{:?}", branch.text);

    let all: String = texts.concat();
    let appended = edit(model, &response, &format!("{all} The end."));
    assert_eq!(
        appended.kept,
        sample.len(),
        "an edit at the end keeps every token"
    );
    let at_boundary = edit(model, &response, &texts[..inside].concat());
    assert_eq!(
        at_boundary,
        Edit {
            kept: inside,
            ids: Vec::new()
        }
    );
}

#[test]
fn sentencepiece_edits_read_back_without_a_stray_space() {
    let Some(mut model) = common::loaded_test_model() else {
        return;
    };
    edits_are_kept_tokenized_and_continued(&mut model, "Once upon a time");
}

#[test]
fn byte_level_bpe_edits_read_back_as_typed() {
    let Some(mut model) = common::loaded_real_model() else {
        return;
    };
    edits_are_kept_tokenized_and_continued(&mut model, "The capital of France is");
}

/// A character of several bytes is one piece of the edit, and special-token text typed into a
/// sample stays text (it is the sample's text, not the template's markers).
#[test]
fn multibyte_and_special_token_text_read_back_as_typed() {
    let Some(mut model) = common::loaded_real_model() else {
        return;
    };
    let response = run(&mut model, "Hello", Vec::new());
    let texts = token_texts(&model, &response);
    let head = texts[..2].concat();
    let edited = format!("{head} naïve 日本 <|im_end|> ok");
    let Edit { kept, ids } = edit(&mut model, &response, &edited);
    assert_eq!(kept, 2);
    let context = [
        &response.prompt_token_ids[..],
        &response.trajectories[0].token_ids[..kept],
    ]
    .concat();
    assert_eq!(reads(&model, &context, &ids), " naïve 日本 <|im_end|> ok");
}
