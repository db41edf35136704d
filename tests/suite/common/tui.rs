//! Helpers for the playground's tests: states, engine events and drawing on `TestBackend`.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use samplab::engine::{Event, Request, RunId, ScoreRequest, TokenEvent, TraceRequest};
use samplab::params::SamplingParams;
use samplab::presets::Preset;
use samplab::response::{SampleResponse, StopMatched, StopReason, Timings, Trajectory};
use samplab::tui::{EngineHandle, KeyMap, ParamsState, State, Theme, draw};

pub fn state_sized(width: u16, height: u16) -> State {
    let params = ParamsState::new(Preset::built_in("default", SamplingParams::default()), 1);
    State::new("Once", params, Rect::new(0, 0, width, height))
}

pub fn loaded() -> Event {
    loaded_with_template(false)
}

pub fn loaded_with_template(chat_template: bool) -> Event {
    Event::Loaded {
        model: "fake".into(),
        device: "cpu".into(),
        defaults: None,
        chat_template,
        vocab: 0,
        vocab_size: Some(1024),
        special_tokens: Vec::new(),
        warnings: Vec::new(),
        activations: None,
        backend: None,
    }
}

pub fn token(run_id: RunId, sample: u32, text: &str, prob: f32) -> Event {
    Event::Token {
        run_id,
        token: TokenEvent {
            sample,
            id: 5,
            text: text.into(),
            logprob: prob.ln(),
            prob,
            reported_prob: prob,
            rank: 1,
            top: Vec::new(),
            entropy: None,
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

pub fn started(run_id: RunId, seeds: Vec<u64>) -> Event {
    Event::Started {
        run_id,
        prompt_token_ids: vec![0, 2],
        seeds,
        prefill_ms: 3.0,
        prefill_tokens: 3,
    }
}

pub fn finished(
    run_id: RunId,
    sample: u32,
    reason: StopReason,
    matched: Option<StopMatched>,
) -> Event {
    Event::Finished {
        run_id,
        sample,
        reason,
        matched,
        stop_token: None,
        tail: String::new(),
        replayed: 0,
        decoded: 1,
    }
}

pub fn done(run_id: RunId, reasons: &[StopReason]) -> Event {
    let trajectories = reasons
        .iter()
        .enumerate()
        .map(|(i, &stop_reason)| Trajectory {
            stop_reason,
            ..Trajectory::empty(i as u32, 42 + i as u64, None)
        })
        .collect();
    Event::Done {
        run_id,
        response: Box::new(SampleResponse {
            timings: Timings {
                prefill_ms: 3.0,
                decode_ms: 10.0,
                decode_tok_per_s: 812.0,
                tokens_decoded: reasons.len() as u32,
                ..Timings::default()
            },
            ..response(trajectories)
        }),
    }
}

/// A response of a fake model holding `trajectories`, with their statistics.
pub fn response(trajectories: Vec<Trajectory>) -> SampleResponse {
    SampleResponse {
        model: "fake".into(),
        prompt: None,
        params: SamplingParams::default(),
        prompt_token_ids: vec![0, 2],
        prompt_logprobs: None,
        prompt_top_logprobs: None,
        stats: samplab::response::RunStats::of(&trajectories),
        watch: None,
        prompt_watched: None,
        trajectories,
        timings: Timings::default(),
        provenance: None,
    }
}

/// Presses `code` (no modifiers) through the default key map; a key bound to nothing here
/// fails the test.
pub fn press_key(state: &mut State, code: crossterm::event::KeyCode) {
    let key = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
    let action = KeyMap::default()
        .action(&state.modes(), key)
        .unwrap_or_else(|| panic!("{code:?} is bound in {:?}", state.modes()));
    samplab::tui::update(state, action);
}

pub fn render(state: &State, theme: &Theme) -> Buffer {
    let mut terminal =
        Terminal::new(TestBackend::new(state.size.width, state.size.height)).unwrap();
    terminal
        .draw(|frame| draw(frame, state, theme, &KeyMap::default()))
        .unwrap();
    terminal.backend().buffer().clone()
}

pub fn row(buffer: &Buffer, y: u16) -> String {
    (0..buffer.area.width)
        .map(|x| buffer[(x, y)].symbol())
        .collect()
}

pub fn find(buffer: &Buffer, text: &str) -> Option<(u16, u16)> {
    (0..buffer.area.height).find_map(|y| {
        let line: Vec<&str> = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        let chars: Vec<&str> = text.chars().map(|_| "").collect();
        (0..line.len().saturating_sub(chars.len() - 1)).find_map(|x| {
            text.chars()
                .enumerate()
                .all(|(i, c)| line[x + i] == c.to_string())
                .then_some((x as u16, y))
        })
    })
}

/// The text inside the params panel (or the inspector in its place), its rows joined and
/// runs of spaces made one, so that wrapped text reads as it was written.
pub fn panel_text(s: &State) -> String {
    let buffer = render(s, &Theme::plain());
    let panel = samplab::tui::areas(s.size).params;
    let rows: Vec<String> = (panel.y + 1..panel.y + panel.height - 1)
        .map(|y| {
            (panel.x + 1..panel.x + panel.width - 1)
                .map(|x| buffer[(x, y)].symbol())
                .collect()
        })
        .collect();
    one_spaced(&rows.join(" "))
}

pub fn one_spaced(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An engine for tests that drive the app without caring what it is asked.
pub struct NoEngine;

impl EngineHandle for NoEngine {
    fn run(&self, _: Request) {}
    fn cancel(&self, _: RunId) {}
    fn score(&self, _: ScoreRequest) {}
    fn trace(&self, _: TraceRequest) {}
}
