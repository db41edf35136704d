//! Issue 18: a conversation compared across models. Each model renders the conversation with
//! its own chat template and scores the other models' samples after that rendering; a model
//! without a template scores them after the sampling model's rendering, and says so.

use crate::common;

use common::fake_model::FakeModel;
use samplab::engine::{LoadedModel, Prompt, ReplayStore, Request, ScoreRequest};
use samplab::model::text::chat_template::{ChatTemplate, Message};
use samplab::params::SamplingParams;
use samplab::response::SampleResponse;

const CHATML: &str = "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + \
                      '<|im_end|>\n' }}{% endfor %}{{ '<|im_start|>assistant\n' }}";

/// Another format for the same conversation: roles and contents on one line each.
const PLAIN: &str = "{% for m in messages %}{{ m.role + ' ' + m.content + '\n' }}{% endfor %}\
                     {{ 'assistant ' }}";

/// Characters as tokens, two specials, BOS for raw prompts; the fake backend's logits hash the
/// whole history, so a score tells which prefix it was computed after.
fn model(name: &str, template: Option<&str>) -> LoadedModel {
    let tokenizer = common::chat_char_tokenizer();
    let vocab = tokenizer.get_vocab_size(true);
    LoadedModel {
        name: name.into(),
        device: "cpu".into(),
        backend: Box::new(FakeModel::new(vocab, 4096)),
        tokenizer,
        eos_ids: vec![],
        defaults: None,
        chat_template: template.map(|source| ChatTemplate::new(source.to_owned(), [].into())),
        templates: Default::default(),
        replay: ReplayStore::new(0),
        warnings: Vec::new(),
        activations: None,
        structured: Default::default(),
        record_traces: false,
        origin: Default::default(),
        encoder: None,
    }
}

fn conversation() -> Prompt {
    Prompt::chat(vec![
        Message::new("system", "be brief"),
        Message::new("user", "hi"),
        Message::new("assistant", "hello"),
        Message::new("user", "a story"),
    ])
}

fn sample(model: &mut LoadedModel, prompt: &Prompt) -> SampleResponse {
    let request = Request {
        run_id: 1,
        prompt: prompt.clone(),
        lane: 0,
        params: SamplingParams::from_yaml("max_tokens: 6\nseed: 3\nnum_samples: 2").unwrap(),
        branches: Vec::new(),
    };
    model.run(&request, &mut || false, &mut |_| {}).unwrap()
}

/// The mean raw logprob of `ids[start..]` under the fake backend, computed by hand.
fn mean_logprob(vocab: usize, ids: &[u32], start: usize) -> f64 {
    let fake = FakeModel::new(vocab, 4096);
    let sum: f64 = (start..ids.len())
        .map(|at| {
            let logits = fake.logits(&ids[..at]);
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let total: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
            f64::from(logits[ids[at] as usize] - max) - total.ln()
        })
        .sum();
    sum / (ids.len() - start) as f64
}

#[test]
fn a_conversation_is_scored_after_the_scoring_models_own_rendering() {
    let prompt = conversation();
    let mut a = model("a", Some(CHATML));
    let mut b = model("b", Some(PLAIN));
    let response = sample(&mut a, &prompt);
    assert!(
        response
            .prompt
            .as_ref()
            .unwrap()
            .rendered
            .as_deref()
            .unwrap()
            .starts_with("<|im_start|>system\nbe brief"),
        "{:?}",
        response.prompt
    );
    let vocab = b.vocab_fingerprint();
    assert_eq!(vocab, a.vocab_fingerprint(), "the same vocabulary");
    let request = ScoreRequest::new(1, vocab, &prompt, &response);
    let scores = b.score(&request, vocab, &mut || false).unwrap();

    let (b_prompt, rendered) = b.encode_prompt(&prompt).unwrap();
    assert_eq!(
        rendered.as_deref(),
        Some("system be brief\nuser hi\nassistant hello\nuser a story\nassistant ")
    );
    let size = b.backend.vocab_size();
    assert_eq!(scores.len(), 2);
    for (score, trajectory) in scores.iter().zip(&response.trajectories) {
        let ids = [&b_prompt[..], &trajectory.token_ids[..]].concat();
        let want = mean_logprob(size, &ids, b_prompt.len());
        assert!(
            (score.mean_logprob - want).abs() < 1e-4,
            "after b's own rendering: {} vs {want}",
            score.mean_logprob
        );
        let after_a = [&response.prompt_token_ids[..], &trajectory.token_ids[..]].concat();
        let not_want = mean_logprob(size, &after_a, response.prompt_token_ids.len());
        assert!(
            (score.mean_logprob - not_want).abs() > 1e-4,
            "not after a's"
        );
        assert!(!score.retokenized && !score.foreign_prompt);
        assert_eq!(score.tokens, trajectory.token_ids.len());
    }

    // Another vocabulary: b's rendering and the sample's text, tokenized again by b.
    let scores = b.score(&request, vocab ^ 1, &mut || false).unwrap();
    assert!(scores.iter().all(|s| s.retokenized && !s.foreign_prompt));
}

#[test]
fn a_model_without_a_template_scores_after_the_sampling_models_rendering() {
    let prompt = conversation();
    let mut a = model("a", Some(CHATML));
    let mut base = model("base", None);
    let response = sample(&mut a, &prompt);
    let vocab = base.vocab_fingerprint();
    let request = ScoreRequest::new(1, vocab, &prompt, &response);
    let scores = base.score(&request, vocab, &mut || false).unwrap();
    let size = base.backend.vocab_size();
    for (score, trajectory) in scores.iter().zip(&response.trajectories) {
        let ids = [&response.prompt_token_ids[..], &trajectory.token_ids[..]].concat();
        let want = mean_logprob(size, &ids, response.prompt_token_ids.len());
        assert!((score.mean_logprob - want).abs() < 1e-4);
        assert!(
            score.foreign_prompt,
            "the score says whose rendering it followed"
        );
    }
    let json = serde_json::to_value(&scores[0]).unwrap();
    assert_eq!(json["foreign_prompt"], true);

    // With another vocabulary the sampling model's rendered text is tokenized again.
    let scores = base.score(&request, vocab ^ 1, &mut || false).unwrap();
    assert!(scores.iter().all(|s| s.retokenized && s.foreign_prompt));

    // A raw prompt is scored as raw text, as before, and says nothing of templates.
    let raw = Prompt::raw("a story");
    let response = sample(&mut base, &raw);
    let request = ScoreRequest::new(1, vocab, &raw, &response);
    let scores = a.score(&request, vocab, &mut || false).unwrap();
    assert!(scores.iter().all(|s| !s.foreign_prompt && !s.retokenized));
    let json = serde_json::to_value(&scores[0]).unwrap();
    assert!(json.get("foreign_prompt").is_none(), "{json}");
}

#[test]
fn the_response_keeps_the_conversation_and_the_prompted_event_marks_special_tokens() {
    let prompt = conversation();
    let mut a = model("a", Some(CHATML));
    let mut events = Vec::new();
    let request = Request {
        run_id: 4,
        prompt: prompt.clone(),
        lane: 0,
        params: SamplingParams::from_yaml("max_tokens: 2").unwrap(),
        branches: Vec::new(),
    };
    let response = a
        .run(&request, &mut || false, &mut |e| events.push(e))
        .unwrap();
    let kept = response.prompt.unwrap();
    assert_eq!(kept.text, "a story");
    assert_eq!(kept.messages, prompt.messages());
    let json = serde_json::to_value(&kept).unwrap();
    assert_eq!(json["messages"][0]["role"], "system");

    let Some(samplab::engine::Event::Prompted {
        run_id,
        rendered,
        tokens,
    }) = events.first()
    else {
        panic!("the first event says what the model sees: {events:?}");
    };
    assert_eq!(*run_id, 4);
    assert_eq!(rendered.as_deref(), kept.rendered.as_deref());
    let ids: Vec<u32> = tokens
        .iter()
        .map(|t| t.id.expect("a local model names each id"))
        .collect();
    assert_eq!(ids, response.prompt_token_ids);
    let specials: Vec<&str> = tokens
        .iter()
        .filter(|t| t.special)
        .map(|t| t.text.as_str())
        .collect();
    assert_eq!(
        specials.len(),
        2 * 4 + 1,
        "each turn's two markers and the generation's"
    );
    assert!(specials.iter().all(|s| s.starts_with("<|im_")));
    let text: String = tokens.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(Some(text.as_str()), rendered.as_deref());
}
