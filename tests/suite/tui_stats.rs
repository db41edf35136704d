//! The run's statistics in the playground: the entropy sparkline on each column's bottom
//! edge, the mark where a sample parts from the first, the statistics overlay (`i`), and the
//! watched tokens in the inspector.

use crate::common::tui::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use samplab::engine::{Event, TokenEvent};
use samplab::params::SamplingParams;
use samplab::response::{StopReason, Trajectory};
use samplab::tui::{Action, Focus, KeyMap, ModelId, Overlay, State, Theme, update};

/// Three samples: #0 and #2 the same (ids 10 11 12), #1 parting at token 1 and ended by
/// `repetition_detection`; entropies 4, 2 and 0 nats.
const SAMPLES: [[u32; 3]; 3] = [[10, 11, 12], [10, 20, 21], [10, 11, 12]];
const ENTROPY: [f32; 3] = [4.0, 2.0, 0.0];

fn token(sample: u32, id: u32, entropy: f32) -> Action {
    Action::Engine(
        ModelId(0),
        Event::Token {
            run_id: 1,
            token: TokenEvent {
                sample,
                id,
                text: format!(" w{id}"),
                logprob: -1.0,
                prob: 0.4,
                reported_prob: (-1.0f32).exp(),
                rank: 1,
                top: Vec::new(),
                entropy: Some(entropy),
                // Two watched tokens: " Yes" as likely as the entropy is high, #13 never.
                watched: vec![(entropy / 4.0).ln(), f32::NEG_INFINITY],
                constraint: None,
                channel: None,
            },
        },
    )
}

fn finished_run() -> State {
    let mut s = state_sized(120, 30);
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    update(
        &mut s,
        Action::Engine(ModelId(0), started(1, vec![42, 43, 44])),
    );
    let mut trajectories = Vec::new();
    for (sample, ids) in SAMPLES.iter().enumerate() {
        for (&id, &h) in ids.iter().zip(&ENTROPY) {
            update(&mut s, token(sample as u32, id, h));
        }
        trajectories.push(Trajectory {
            token_ids: ids.to_vec(),
            logprobs: vec![-1.0; 3],
            stop_reason: match sample {
                1 => StopReason::RepetitionDetected,
                _ => StopReason::Length,
            },
            entropy: Some(ENTROPY.to_vec()),
            kept_entropy: Some(vec![1.0, 0.5, 0.0]),
            watched: None,
            ..Trajectory::empty(sample as u32, 42 + sample as u64, None)
        });
    }
    let response = response(trajectories);
    let done = Event::Done {
        run_id: 1,
        response: Box::new(response),
    };
    update(&mut s, Action::Engine(ModelId(0), done));
    s
}

#[test]
fn a_sample_that_parts_from_the_first_says_where_and_its_edge_draws_its_entropy() {
    let s = finished_run();
    let parts: Vec<Option<usize>> = s.columns.columns.iter().map(|c| c.parts).collect();
    assert_eq!(parts, [None, Some(1), None]);
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "≠#0@2").expect("the footer of #1 says where it parts");
    let (first_x, _) = find(&buffer, "#1 seed 43").expect("#1's title");
    assert!((first_x..first_x + 40).contains(&x), "in #1's own footer");
    // The bottom edge under the footer: 4 nats fills a cell, 2 half of it, 0 is the border.
    let edge = row(&buffer, y + 1);
    assert_eq!(
        edge.matches("█▄─").count(),
        3,
        "each column's edge:\n{edge}"
    );
}

#[test]
fn the_cursor_token_is_lit_on_the_sparkline() {
    let mut s = finished_run();
    s.focus = Focus::Columns;
    update(&mut s, Action::FirstToken);
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "█▄─").unwrap();
    let lit = |x: u16| {
        buffer[(x, y)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED)
    };
    assert!(lit(x), "the cursor's cell");
    assert!(!lit(x + 1));
}

#[test]
fn i_shows_the_runs_statistics_and_closes_again() {
    let mut s = finished_run();
    s.focus = Focus::Params;
    let keys = KeyMap::default();
    let i = KeyEvent::new(KeyCode::Char('i'), KeyModifiers::NONE);
    let open = keys.action(&s.modes(), i).expect("i is bound outside text");
    update(&mut s, open);
    assert_eq!(s.overlay, Some(Overlay::Stats));
    let buffer = render(&s, &Theme::dark());
    for line in [
        "3 samples  length mean 3.0  min 3  max 3",
        "distinct n-grams  1: 0.56  2: 0.67  3: 0.67",
        "ended  length 2 · repetition_detected 1",
        "identical  #0 = #2",
        "parts from #0  #1@2  #2 same",
        "mean logprob -1.000  perplexity 2.72",
        "mean entropy  raw 2.00 nats  kept 0.50 nats",
    ] {
        assert!(find(&buffer, line).is_some(), "{line:?} is shown");
    }
    assert_eq!(keys.action(&s.modes(), i), Some(Action::CloseOverlay));
}

#[test]
fn the_inspector_lists_the_watched_tokens_at_the_cursor_with_their_chart_along_the_sample() {
    let mut s = finished_run();
    s.comparison.sides[0].run_params =
        Some(SamplingParams::from_yaml("watch: [\" Yes\", 13]").unwrap());
    s.focus = Focus::Columns;
    update(&mut s, Action::FirstToken);
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "watched").is_some(), "a heading");
    let (_, y) = find(&buffer, "\" Yes\"").expect("the string is quoted");
    let line = row(&buffer, y);
    assert!(
        line.contains("   0.00 1.000 █▄─"),
        "at token 0 (4 nats): p 1, then 0.5, 0:\n{line}"
    );
    let (_, y) = find(&buffer, "#13").expect("the id is named");
    assert!(
        row(&buffer, y).contains("   -inf 0.000 ───"),
        "{}",
        row(&buffer, y)
    );

    s.comparison.sides[0].run_params = Some(SamplingParams::default());
    assert!(
        find(&render(&s, &Theme::dark()), "watched").is_none(),
        "nothing watched, no list"
    );
}
