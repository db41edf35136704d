//! One full frame of the playground: 8 columns of 512 tokens each at 200x50, the columns focused
//! so that the cursor and the inspector are drawn too. The budget is 4 ms.

use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use samplab::engine::{Alternative, Event, TokenEvent};
use samplab::params::SamplingParams;
use samplab::presets::Preset;
use samplab::tui::action::Action;
use samplab::tui::keymap::KeyMap;
use samplab::tui::params::ParamsState;
use samplab::tui::state::State;
use samplab::tui::theme::Theme;
use samplab::tui::update::update;
use samplab::tui::view;
use std::hint::black_box;

const SAMPLES: u32 = 8;
const TOKENS: usize = 512;
const WORDS: [&str; 8] = [
    " the", " little", " girl", " named", " Lily", ".", " She", "\n",
];

fn token(sample: u32, i: usize) -> Event {
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
        run_id: 1,
        token: TokenEvent {
            sample,
            id: 3,
            text: WORDS[(i * 5 + sample as usize) % WORDS.len()].to_owned(),
            logprob: prob.ln(),
            prob,
            rank: 2,
            top,
        },
    }
}

fn streamed() -> State {
    let params = ParamsState::new(Preset::built_in("default", SamplingParams::default()), 1);
    let mut state = State::new("Once upon a time", params, Rect::new(0, 0, 200, 50));
    let events = [
        Event::Loaded {
            model: "stories260K".into(),
            device: "cpu".into(),
            defaults: None,
            chat_template: false,
            vocab: 0,
            vocab_size: 512,
            special_tokens: Vec::new(),
            warnings: Vec::new(),
        },
        Event::Started {
            run_id: 1,
            prompt_token_ids: vec![1, 403],
            seeds: (0..u64::from(SAMPLES)).collect(),
            prefill_ms: 3.0,
            prefill_tokens: 3,
        },
    ];
    for event in events {
        update(&mut state, Action::Engine(0, event));
    }
    for i in 0..TOKENS {
        for sample in 0..SAMPLES {
            update(&mut state, Action::Engine(0, token(sample, i)));
        }
    }
    update(&mut state, Action::FocusNext);
    update(&mut state, Action::StepToken(-3));
    state
}

fn bench(c: &mut Criterion) {
    let state = streamed();
    let theme = Theme::dark();
    let keymap = KeyMap::default();
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).expect("a test terminal");
    c.bench_function("draw_8x512_200x50", |b| {
        b.iter(|| {
            terminal
                .draw(|frame| view::draw(frame, black_box(&state), &theme, &keymap))
                .expect("drawing to a test backend");
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
