//! What a JSON-schema constraint adds to one sample's step, on one core: computing the mask,
//! applying it to the logits, weighing what it refused and following the drawn token, measured
//! as one vLLM sampling step with the constraint (`json`) against the same step without it
//! (`plain`), at every position of a document the schema accepts. The budget is 0.3 ms at SmolLM2's 49,152 tokens and 1 ms at Gemma 3's 262,144. The real models'
//! tokenizers are used (the files the tests use: `$SAMPLAB_REAL_MODEL`, `$SAMPLAB_GEMMA_MODEL`
//! or their default places); a missing one is skipped with a line saying so.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use samplab::engine::LoadedModel;
use samplab::params::SamplingParams;
use samplab::sampling::{Constraint, SampleState, Sampler, Vocabulary, log_normalizer};
use std::hint::black_box;
use std::path::PathBuf;

/// A schema with the usual parts: strings, numbers, an enum, an array and a nested object.
const SCHEMA: &str = "{json: {type: object, properties: {name: {type: string}, age: {type: \
    integer}, mood: {enum: [happy, sad, calm]}, tags: {type: array, items: {type: string}}, \
    home: {type: object, properties: {city: {type: string}, zip: {type: string}}, required: \
    [city]}}, required: [name, age, mood, tags, home]}}";

/// A document the schema accepts: the bench steps through its tokens.
const DOCUMENT: &str = r#"{"name": "Ada Lovelace", "age": 36, "mood": "calm", "tags": ["mathematician", "writer"], "home": {"city": "London", "zip": "W1"}}"#;

fn models() -> Vec<(&'static str, Option<PathBuf>)> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pick = |var: &str, default: PathBuf| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or(Some(default))
            .filter(|p| p.exists())
    };
    vec![
        (
            "smollm2_49152",
            pick(
                "SAMPLAB_REAL_MODEL",
                manifest
                    .join("../shared/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
            ),
        ),
        (
            "gemma3_262144",
            pick(
                "SAMPLAB_GEMMA_MODEL",
                home.join(".cache/samplab/gemma3-270m/gemma-3-270m-q4_k_m.gguf"),
            ),
        ),
    ]
}

fn load(path: &std::path::Path) -> LoadedModel {
    let hub = samplab::model::source::HubSettings {
        offline: true,
        ..samplab::model::source::HubSettings::new(std::env::temp_dir())
    };
    let spec = path.to_str().expect("a UTF-8 path");
    samplab::engine::load::load_model(
        spec,
        &hub,
        samplab::model::device::DeviceChoice::Cpu,
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{spec} loads: {e:#}"))
}

fn bench(c: &mut Criterion) {
    let params = SamplingParams::from_yaml(&format!("{{structured_outputs: {SCHEMA}}}")).unwrap();
    let (field, spec) = params.constraint().unwrap();
    let mut group = c.benchmark_group("constraint_step");
    for (name, path) in models() {
        let Some(path) = path else {
            println!("constraint_step/{name}: skipped, the model file is not there");
            continue;
        };
        let model = load(&path);
        let vocab = model.backend.vocab_size();
        let vocabulary = Vocabulary::new(&model.tokenizer, &model.eos_ids, vocab).unwrap();
        let constraint = Constraint::compile(&spec, field, &vocabulary).unwrap();
        let tokens = model
            .tokenizer
            .encode(DOCUMENT, false)
            .unwrap()
            .get_ids()
            .to_vec();
        // The model's own logits after a prompt that asks for the document.
        let mut model = model;
        let prompt = model.encode("A person, described as JSON: ").unwrap();
        let prefill = model.backend.prefill(&prompt, prompt.len() - 1).unwrap();
        let logits = prefill.logits.last().unwrap().clone();
        let norm = log_normalizer(&logits).unwrap();
        // One state per position of the document, so each step is measured where it falls.
        let mut states = Vec::new();
        let mut state = SampleState::new(0, 0, &[], vocab).constrained(Some(&constraint));
        for &token in &tokens {
            states.push(state.clone());
            state.accept(token);
        }
        let plain = SampleState::new(0, 0, &[], vocab);
        let mut sampler = Sampler::new(&SamplingParams::default()).unwrap();
        for (kind, constrained) in [("plain", false), ("json", true)] {
            let mut at = 0;
            group.bench_function(format!("{name}/{kind}"), |b| {
                b.iter_batched(
                    || {
                        at = (at + 1) % states.len();
                        match constrained {
                            true => states[at].clone(),
                            false => plain.clone(),
                        }
                    },
                    |mut state| {
                        black_box(
                            sampler
                                .sample_normalized(&logits, norm, &mut state)
                                .unwrap(),
                        );
                        state
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
