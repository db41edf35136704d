//! One full frame of the playground: 8 columns of 512 tokens each at 200x50, the columns focused
//! so that the cursor and the inspector are drawn too; then the same with two of the columns
//! branches (one stepping) and an alternative highlighted. The budget is 4 ms.

use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use samplab::engine::{Alternative, Event, TokenEvent};
use samplab::params::SamplingParams;
use samplab::presets::Preset;
use samplab::tui::{
    Action, BranchAction, Focus, KeyMap, ModelId, ParamsState, State, Theme, draw, update,
};
use std::hint::black_box;

const SAMPLES: u32 = 8;
const TOKENS: usize = 512;
const WORDS: [&str; 8] = [
    " the", " little", " girl", " named", " Lily", ".", " She", "\n",
];

fn token(run_id: u64, sample: u32, i: usize) -> Event {
    let prob = ((i * 37 + sample as usize * 11) % 100) as f32 / 100.0 + 0.005;
    let top = (0..10)
        .map(|k| Alternative {
            id: k,
            text: WORDS[k as usize % WORDS.len()].to_owned(),
            logprob: -(k as f32) - 0.5,
            prob: if k < 5 { 0.2 } else { 0.0 },
        })
        .collect();
    Event::Token {
        run_id,
        token: TokenEvent {
            sample,
            id: 3,
            text: WORDS[(i * 5 + sample as usize) % WORDS.len()].to_owned(),
            logprob: prob.ln(),
            prob,
            reported_prob: prob,
            rank: 2,
            top,
            entropy: Some((i % 7) as f32 * 0.5),
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

/// Streams `columns` columns of `TOKENS` tokens each as run `run_id`.
fn stream(state: &mut State, run_id: u64, columns: u32) {
    let started = Event::Started {
        run_id,
        prompt_token_ids: vec![1, 403],
        seeds: (0..u64::from(columns)).collect(),
        prefill_ms: 3.0,
        prefill_tokens: 3,
    };
    update(state, Action::Engine(ModelId(0), started));
    for i in 0..TOKENS {
        for sample in 0..columns {
            update(state, Action::Engine(ModelId(0), token(run_id, sample, i)));
        }
    }
}

fn streamed(samples: u32) -> State {
    let mut params = ParamsState::new(Preset::built_in("default", SamplingParams::default()), 1);
    params.params.num_samples = samples;
    let mut state = State::new("Once upon a time", params, Rect::new(0, 0, 200, 50));
    let loaded = Event::Loaded {
        model: "stories260K".into(),
        device: "cpu".into(),
        defaults: None,
        chat_template: false,
        vocab: 0,
        vocab_size: Some(512),
        special_tokens: Vec::new(),
        warnings: Vec::new(),
        activations: None,
        backend: None,
    };
    update(&mut state, Action::Engine(ModelId(0), loaded));
    stream(&mut state, 1, samples);
    // The playground starts in the prompt; the cursor and the inspector need the columns.
    state.focus = Focus::Columns;
    update(&mut state, Action::StepToken(-3));
    state
}

/// Six samples, a branch of one of them and a stepping branch of that branch.
fn branched() -> State {
    let mut state = streamed(SAMPLES - 2);
    update(&mut state, Action::Branch(BranchAction::Pick(2)));
    update(&mut state, Action::Branch(BranchAction::Take));
    stream(&mut state, 2, SAMPLES - 1);
    update(&mut state, Action::StepToken(-40));
    update(&mut state, Action::Branch(BranchAction::ToggleStep));
    stream(&mut state, 3, SAMPLES);
    update(&mut state, Action::StepToken(-3));
    update(&mut state, Action::Branch(BranchAction::Pick(1)));
    assert!(state.columns.columns.iter().any(|c| c.stepping));
    state
}

fn bench(c: &mut Criterion) {
    let theme = Theme::dark();
    let keymap = KeyMap::default();
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).expect("a test terminal");
    for (name, state) in [
        ("draw_8x512_200x50", streamed(SAMPLES)),
        ("draw_8x512_branches_200x50", branched()),
    ] {
        assert_eq!(state.columns.columns.len(), SAMPLES as usize, "{name}");
        c.bench_function(name, |b| {
            b.iter(|| {
                terminal
                    .draw(|frame| draw(frame, black_box(&state), &theme, &keymap))
                    .expect("drawing to a test backend");
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
