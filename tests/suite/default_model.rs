//! samplab-tiny, the model built into the binary: it loads with no file and no network, and
//! every sampling knob visibly acts on it.

// Only the lexicon and word splitter are needed here, not the story generator.
#[allow(dead_code)]
#[path = "../../examples/train_default_model/corpus.rs"]
mod corpus;

use samplab::engine::load::load_model;
use samplab::engine::{Prompt, Request};
use samplab::model::device::DeviceChoice;
use samplab::model::source::HubSettings;
use samplab::model::source::embedded;
use samplab::params::SamplingParams;
use samplab::response::{SampleResponse, StopMatched, StopReason};
use std::collections::BTreeSet;

const PROMPT: &str = "Once upon a time";

fn sample(params: SamplingParams) -> SampleResponse {
    let mut model = load_model(
        embedded::NAME,
        &HubSettings::from_env(),
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .expect("the embedded model loads");
    let request = Request {
        run_id: 1,
        prompt: Prompt::raw(PROMPT),
        lane: 0,
        params,
        branches: Vec::new(),
    };
    model.run(&request, &mut || false, &mut |_| {}).unwrap()
}

fn params(temperature: f32, num_samples: u32, max_tokens: Option<u32>) -> SamplingParams {
    SamplingParams {
        temperature,
        num_samples,
        max_tokens,
        seed: Some(7),
        ..SamplingParams::default()
    }
}

fn texts(response: &SampleResponse) -> Vec<&str> {
    response
        .trajectories
        .iter()
        .map(|t| t.text.as_str())
        .collect()
}

#[test]
fn loads_by_name_with_bos_eos_and_its_shipped_defaults() {
    let model = load_model(
        embedded::NAME,
        &HubSettings::from_env(),
        DeviceChoice::Cpu,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(model.name, embedded::NAME);
    assert_eq!(model.eos_ids, [2]);
    assert_eq!(model.encode(PROMPT).unwrap()[0], 1, "BOS comes first");
    let defaults = model
        .defaults
        .expect("generation_config.json has valid defaults");
    assert!(defaults.temperature > 0.0 && defaults.temperature < 1.0);
    assert!(defaults.top_p < 1.0);
}

#[test]
fn greedy_samples_are_identical_and_tell_a_story_in_corpus_words() {
    let response = sample(params(0.0, 4, Some(160)));
    let texts = texts(&response);
    assert!(texts.iter().all(|t| *t == texts[0]), "{texts:#?}");
    let story = texts[0];
    assert!(
        response.trajectories[0].token_ids.len() >= 100,
        "only {} tokens: {story}",
        response.trajectories[0].token_ids.len()
    );
    assert!(story.contains("\n\n"), "no paragraph break: {story}");
    let lexicon = corpus::lexicon();
    let unknown: Vec<String> = corpus::words(story)
        .filter(|w| !lexicon.contains(w))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?} in {story}");
}

#[test]
fn samples_at_temperature_one_differ() {
    let response = sample(params(1.0, 4, Some(48)));
    let distinct: BTreeSet<&str> = texts(&response).into_iter().collect();
    assert_eq!(distinct.len(), 4, "{distinct:#?}");
}

#[test]
fn a_story_ends_with_eos_and_a_paragraph_break_is_a_stop_string() {
    let response = sample(params(0.0, 1, None));
    let whole = &response.trajectories[0];
    assert_eq!(whole.stop_reason, StopReason::Stop, "{}", whole.text);
    assert_eq!(whole.stop_matched, Some(StopMatched::Token(2)));

    let mut first_paragraph = params(0.0, 1, None);
    first_paragraph.set_assignment(r#"stop="\n\n""#).unwrap();
    let response = sample(first_paragraph);
    let cut = &response.trajectories[0];
    assert_eq!(cut.stop_matched, Some(StopMatched::Text("\n\n".to_owned())));
    assert_eq!(whole.text.split("\n\n").next(), Some(cut.text.as_str()));
}
