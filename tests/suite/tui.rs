//! The playground without a terminal: pure `update` for every action, views on `TestBackend`,
//! and the whole loop driven by injected keys and a fake engine.

use crate::common;

use common::tui::{
    done, find, finished, loaded, loaded_with_template, one_spaced, panel_text, press_key, render,
    row, started, state_sized, token,
};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use samplab::engine::{Event, Prompt, Request, RunId, ScoreRequest, TraceRequest};
use samplab::model::Activations;
use samplab::params::{Field, LogprobsMode, SamplingParams};
use samplab::presets::Preset;
use samplab::response::{StopMatched, StopReason};
use samplab::tui::{
    Action, App, Effect, EngineHandle, Focus, HelpPage, KeyMap, ListMove, Mode, ModelId, Overlay,
    ParamsState, State, TextBuffer, Theme, areas, update, value_text,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

fn state() -> State {
    state_sized(80, 24)
}

fn select(state: &mut State, field: &str) {
    state.focus = Focus::Params;
    state.comparison.params.selected = Field::ALL.iter().position(|f| f.name() == field).unwrap();
}

/// A state whose model is ready and whose first run (id 1) is in flight, with the prompt
/// focused so that typed characters are the change that re-runs.
fn running() -> State {
    let mut s = state();
    s.focus = Focus::Prompt;
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded()));
    assert!(matches!(&effects[..], [Effect::Run(_, r)] if r.run_id == 1));
    s
}

fn nudge(steps: i32, coarse: bool) -> Action {
    Action::NudgeParam { steps, coarse }
}

fn type_text(s: &mut State, text: &str) {
    for c in text.chars() {
        update(s, Action::InsertChar(c));
    }
}

// ---- update ----

#[test]
fn nudge_moves_the_selected_field_and_schedules_a_rerun() {
    let mut s = running();
    select(&mut s, "temperature");
    let effects = update(&mut s, nudge(1, false));
    assert_eq!(s.comparison.params.params.temperature, 1.05);
    assert_eq!(
        effects,
        [Effect::Cancel(ModelId(0), 1), Effect::ScheduleRun]
    );
    assert!(s.comparison.params.modified());
    let effects = update(&mut s, nudge(-1, false));
    assert_eq!(s.comparison.params.params.temperature, 1.0);
    assert_eq!(effects, [Effect::ScheduleRun], "run 1 is already cancelled");
}

#[test]
fn coarse_nudge_takes_the_big_step() {
    let mut s = state();
    select(&mut s, "temperature");
    update(&mut s, nudge(1, true));
    assert_eq!(s.comparison.params.params.temperature, 1.5);
    select(&mut s, "num_samples");
    update(&mut s, nudge(1, true));
    assert_eq!(s.comparison.params.params.num_samples, 5);
}

#[test]
fn top_k_and_max_tokens_move_on_log_scales_through_off() {
    let mut s = state();
    select(&mut s, "top_k");
    let mut seen = Vec::new();
    for _ in 0..3 {
        update(&mut s, nudge(1, false));
        seen.push(s.comparison.params.params.top_k);
    }
    assert_eq!(seen, [1, 2, 4]);
    update(&mut s, nudge(-3, false));
    assert_eq!(s.comparison.params.params.top_k, -1);
    update(&mut s, nudge(1, true));
    assert_eq!(s.comparison.params.params.top_k, 8);

    select(&mut s, "max_tokens");
    assert_eq!(s.comparison.params.params.max_tokens, Some(128));
    update(&mut s, nudge(1, false));
    assert_eq!(s.comparison.params.params.max_tokens, Some(256));
    update(&mut s, nudge(-1, true));
    assert_eq!(s.comparison.params.params.max_tokens, Some(16));
    s.comparison.params.params.max_tokens = Some(1);
    update(&mut s, nudge(-1, false));
    assert_eq!(s.comparison.params.params.max_tokens, None);
    update(&mut s, nudge(1, false));
    assert_eq!(s.comparison.params.params.max_tokens, Some(1));
}

#[test]
fn typed_valid_value_applies_and_reruns() {
    let mut s = state();
    select(&mut s, "top_p");
    update(&mut s, Action::EditParam);
    assert_eq!(
        s.comparison.params.editor.as_ref().unwrap().buffer.text,
        "1"
    );
    for _ in 0..3 {
        update(&mut s, Action::DeleteBack);
    }
    type_text(&mut s, "0.5");
    let effects = update(&mut s, Action::CommitEdit);
    assert_eq!(s.comparison.params.params.top_p, 0.5);
    assert!(s.comparison.params.editor.is_none());
    assert_eq!(effects, [Effect::ScheduleRun]);
}

#[test]
fn typed_invalid_value_keeps_the_old_one_and_says_why() {
    let mut s = state();
    select(&mut s, "top_p");
    update(&mut s, Action::EditParam);
    update(&mut s, Action::Paste("\n".into()));
    update(&mut s, Action::CursorHome);
    update(&mut s, Action::DeleteForward);
    update(&mut s, Action::DeleteForward);
    update(&mut s, Action::DeleteForward);
    update(&mut s, Action::DeleteForward);
    assert_eq!(s.comparison.params.editor.as_ref().unwrap().buffer.text, "");
    type_text(&mut s, "2");
    let effects = update(&mut s, Action::CommitEdit);
    assert!(effects.is_empty());
    assert_eq!(s.comparison.params.params.top_p, 1.0);
    let error = s
        .comparison
        .params
        .editor
        .as_ref()
        .unwrap()
        .error
        .clone()
        .unwrap();
    assert!(
        error.contains("top_p") && error.contains("(0, 1]"),
        "{error}"
    );
    // Typing again clears the message; Esc leaves without changing anything.
    update(&mut s, Action::DeleteBack);
    assert_eq!(s.comparison.params.editor.as_ref().unwrap().error, None);
    update(&mut s, Action::CancelEdit);
    assert!(s.comparison.params.editor.is_none());
    assert_eq!(s.comparison.params.params.top_p, 1.0);
}

#[test]
fn enter_toggles_bools_and_empty_text_turns_an_option_off() {
    let mut s = state();
    select(&mut s, "include_stop_str_in_output");
    update(&mut s, Action::EditParam);
    assert!(s.comparison.params.params.include_stop_str_in_output);
    assert!(s.comparison.params.editor.is_none());

    select(&mut s, "seed");
    update(&mut s, Action::EditParam);
    while update(&mut s, Action::DeleteBack).is_empty()
        && !s
            .comparison
            .params
            .editor
            .as_ref()
            .unwrap()
            .buffer
            .text
            .is_empty()
    {}
    update(&mut s, Action::CommitEdit);
    assert_eq!(s.comparison.params.params.seed, None);

    select(&mut s, "logprobs");
    update(&mut s, nudge(1, false));
    assert_eq!(s.comparison.params.params.logprobs, Some(0));
    update(&mut s, Action::TurnOffParam);
    assert_eq!(s.comparison.params.params.logprobs, None);
}

#[test]
fn stop_strings_are_typed_as_yaml() {
    let mut s = state();
    select(&mut s, "stop");
    update(&mut s, Action::EditParam);
    update(&mut s, Action::Paste(r#"["\n\n"]"#.into()));
    update(&mut s, Action::CommitEdit);
    assert_eq!(
        value_text(&s.comparison.params.params, Field::Stop),
        r#""\n\n""#
    );
}

#[test]
fn stop_lists_take_escapes_and_token_ids_and_a_typo_keeps_the_old_value() {
    let mut s = state();
    select(&mut s, "stop");
    update(&mut s, Action::EditParam);
    for c in r#""\n\n", #13, The End"#.chars() {
        update(&mut s, Action::InsertChar(c));
    }
    let effects = update(&mut s, Action::CommitEdit);
    assert!(effects.contains(&Effect::ScheduleRun), "{effects:?}");
    let stop = s.comparison.params.params.stop.clone().unwrap();
    assert_eq!(stop.strings().collect::<Vec<_>>(), ["\n\n", "The End"]);
    assert_eq!(stop.token_ids().collect::<Vec<_>>(), [13]);

    update(&mut s, Action::EditParam);
    assert_eq!(
        s.comparison.params.editor.as_ref().unwrap().buffer.text,
        r#""\n\n", #13, "The End""#
    );
    update(&mut s, Action::InsertChar(','));
    assert!(update(&mut s, Action::CommitEdit).is_empty());
    let editor = s
        .comparison
        .params
        .editor
        .as_ref()
        .expect("the editor stays open");
    assert!(
        editor
            .error
            .as_deref()
            .unwrap()
            .contains("missing after the last comma")
    );
    assert_eq!(s.comparison.params.params.stop, Some(stop));
}

#[test]
fn backspace_resets_the_field_to_the_preset_value() {
    let mut s = state();
    select(&mut s, "temperature");
    update(&mut s, nudge(-3, false));
    assert!(s.comparison.params.modified());
    update(&mut s, Action::EditParam);
    assert_eq!(
        s.comparison.params.editor.as_ref().unwrap().buffer.text,
        "0.85"
    );
    update(&mut s, Action::CancelEdit);
    let effects = update(&mut s, Action::ResetParam);
    assert_eq!(s.comparison.params.params.temperature, 1.0);
    assert!(!s.comparison.params.modified());
    assert_eq!(effects, [Effect::ScheduleRun]);
    assert!(
        update(&mut s, Action::ResetParam).is_empty(),
        "nothing left to reset"
    );
}

#[test]
fn r_rolls_a_new_fixed_seed() {
    let mut s = state();
    let before = s.comparison.params.params.seed.unwrap();
    let effects = update(&mut s, Action::RollSeed);
    let after = s.comparison.params.params.seed.unwrap();
    assert_ne!(before, after);
    assert!(after < 1_000_000);
    assert_eq!(effects, [Effect::ScheduleRun]);
}

#[test]
fn tab_cycles_focus_and_closes_the_editor() {
    let mut s = state();
    assert_eq!(s.focus, Focus::Prompt);
    update(&mut s, Action::FocusNext);
    assert_eq!(s.focus, Focus::Params);
    update(&mut s, Action::EditParam);
    update(&mut s, Action::FocusNext);
    assert_eq!(s.focus, Focus::Columns);
    assert!(s.comparison.params.editor.is_none());
    update(&mut s, Action::FocusNext);
    assert_eq!(s.focus, Focus::Prompt);
    update(&mut s, Action::FocusPrev);
    assert_eq!(s.focus, Focus::Columns);
}

/// Issue 34: the playground opened on the params, so that a first `q` or `s` typed as a
/// prompt quit or saved.
#[test]
fn a_new_playground_starts_in_the_prompt_and_the_first_keys_are_text() {
    let mut s = state();
    assert_eq!(s.focus, Focus::Prompt);
    let keys = KeyMap::default();
    for c in ['q', 's', 'p'] {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(keys.action(&s.modes(), key), Some(Action::InsertChar(c)));
    }
    let esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE);
    let leave = keys.action(&s.modes(), esc).unwrap();
    update(&mut s, leave);
    assert_eq!(s.focus, Focus::Params, "Esc leaves the prompt");
    let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    assert_eq!(keys.action(&s.modes(), q), Some(Action::Quit));
}

/// Issue 34: an empty prompt on a model without BOS opened on an error about the prompt.
#[test]
fn an_empty_prompt_the_model_cannot_start_from_asks_for_a_prompt_not_an_error() {
    let mut s = state();
    while !s.prompt.text().is_empty() {
        update(&mut s, Action::DeleteBack);
    }
    let screen = render(&s, &Theme::dark());
    let prompt = areas(s.size).prompt;
    assert_eq!(
        find(&screen, "type a prompt"),
        Some((prompt.x + 1, prompt.y + 1)),
        "the empty box says what to do"
    );
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded()));
    let [Effect::Run(_, request)] = &effects[..] else {
        panic!("{effects:?}");
    };
    let id = request.run_id;
    let prompted = Event::Prompted {
        run_id: id,
        rendered: None,
        tokens: Vec::new(),
    };
    update(&mut s, Action::Engine(ModelId(0), prompted));
    let error = Event::Error {
        run_id: id,
        message: "the prompt is empty and the model adds no BOS token: type some text".into(),
    };
    update(&mut s, Action::Engine(ModelId(0), error));
    assert_eq!(s.status.error, None);
    assert_eq!(s.failure(), None, "quitting now is no failure");
    let screen = render(&s, &Theme::dark());
    assert!(find(&screen, "type a prompt: the model needs text").is_some());
    assert!(find(&screen, "error").is_none(), "{}", row(&screen, 23));

    let effects = update(&mut s, Action::InsertChar('A'));
    assert!(effects.contains(&Effect::ScheduleRun));
    let screen = render(&s, &Theme::dark());
    assert!(
        find(&screen, "│A ").is_some(),
        "the text replaces the placeholder"
    );
}

#[test]
fn prompt_edits_and_pastes_rerun() {
    let mut s = running();
    let effects = update(&mut s, Action::InsertChar('!'));
    assert_eq!(
        effects,
        [Effect::Cancel(ModelId(0), 1), Effect::ScheduleRun]
    );
    update(&mut s, Action::InsertNewline);
    update(&mut s, Action::Paste("a\r\nb".into()));
    assert_eq!(s.prompt.text(), "Once!\na\nb");
    update(&mut s, Action::CursorUp);
    update(&mut s, Action::CursorHome);
    update(&mut s, Action::DeleteBack);
    assert_eq!(s.prompt.text(), "Once!a\nb");
    assert!(
        update(&mut s, Action::CursorLeft).is_empty(),
        "moving is no change"
    );
    // Outside the prompt, typed characters go nowhere.
    s.focus = Focus::Columns;
    assert!(update(&mut s, Action::InsertChar('x')).is_empty());
    assert_eq!(s.prompt.text(), "Once!a\nb");
}

/// Issue 34: the prompt box had no undo and no clear (a 3 KB paste took 3,300 Backspaces).
#[test]
fn ctrl_z_takes_back_the_prompts_last_edits_and_ctrl_u_clears_it() {
    let mut s = running();
    let keys = KeyMap::default();
    let ctrl = |s: &State, c| {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        keys.action(&s.modes(), key).unwrap()
    };
    type_text(&mut s, " upon");
    update(&mut s, Action::Paste(" a time".into()));
    let clear = ctrl(&s, 'u');
    assert_eq!(clear, Action::ClearText);
    let effects = update(&mut s, clear);
    assert_eq!(s.prompt.text(), "");
    assert!(effects.contains(&Effect::ScheduleRun), "a change re-runs");
    let undo = ctrl(&s, 'z');
    let mut texts = Vec::new();
    for _ in 0..3 {
        assert!(update(&mut s, undo.clone()).contains(&Effect::ScheduleRun));
        texts.push(s.prompt.text().to_owned());
    }
    assert_eq!(texts, ["Once upon a time", "Once upon", "Once"]);
    assert!(update(&mut s, undo).is_empty(), "nothing left to undo");

    // Ctrl+U empties a value being typed too.
    select(&mut s, "temperature");
    update(&mut s, Action::EditParam);
    let clear = ctrl(&s, 'u');
    update(&mut s, clear);
    assert_eq!(s.comparison.params.editor.as_ref().unwrap().buffer.text, "");
}

/// Issue 34: the prompt wrapped mid-word; a long one scrolls to keep the cursor in view.
#[test]
fn the_prompt_wraps_between_words_and_scrolls_to_the_cursor() {
    let mut s = state_sized(80, 24);
    let words: Vec<String> = (0..60).map(|i| format!("word{i}")).collect();
    update(&mut s, Action::ClearText);
    update(&mut s, Action::Paste(words.join(" ")));
    let inner = areas(s.size)
        .prompt
        .inner(ratatui::layout::Margin::new(1, 1));
    let rows = |s: &State| {
        let buffer = render(s, &Theme::dark());
        (inner.y..inner.y + inner.height)
            .map(|y| {
                (inner.x..inner.x + inner.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<String>>()
    };
    let shown = rows(&s);
    for row in &shown {
        for word in row.split_whitespace() {
            assert!(
                words.iter().any(|w| w == word),
                "{word:?} is cut: {shown:?}"
            );
        }
    }
    assert!(
        shown.last().unwrap().contains("word59"),
        "the cursor's row: {shown:?}"
    );
    for _ in 0..30 {
        update(&mut s, Action::CursorLeft);
    }
    update(&mut s, Action::CursorHome);
    let shown = rows(&s);
    assert!(
        shown[0].starts_with("word0 word1 "),
        "back at the start: {shown:?}"
    );
}

#[test]
fn quit_cancels_the_run_and_quits() {
    let mut s = running();
    assert_eq!(
        update(&mut s, Action::Quit),
        [Effect::Cancel(ModelId(0), 1), Effect::Quit]
    );
    let mut idle = state();
    assert_eq!(update(&mut idle, Action::Quit), [Effect::Quit]);
}

#[test]
fn help_opens_and_closes() {
    let mut s = state();
    update(&mut s, Action::OpenHelp);
    assert!(matches!(s.overlay, Some(Overlay::Help(_))));
    update(&mut s, Action::TurnHelpPage(1));
    update(&mut s, Action::TurnHelpPage(1));
    update(&mut s, Action::TurnHelpPage(-1));
    // Opened from the prompt box, turned one page on.
    assert_eq!(
        s.overlay,
        Some(Overlay::Help(HelpPage {
            from: Mode::Prompt,
            turned: 1
        }))
    );
    update(&mut s, Action::CloseOverlay);
    assert_eq!(s.overlay, None);
}

/// Issue 34: the playground opens at 4 samples x 128 tokens where `samplab sample` takes 1
/// until EOS; the help says so, shorter where the box is narrow.
#[test]
fn help_says_why_the_first_run_differs_from_samplab_samples() {
    for (width, height, note) in [
        (
            200,
            50,
            "to compare them side by side (samplab sample: 1, until EOS)",
        ),
        (80, 24, "opens at 4 x 128 tokens"),
    ] {
        let mut s = state_sized(width, height);
        update(&mut s, Action::OpenHelp);
        let screen = render(&s, &Theme::dark());
        let (_, y) = find(&screen, note).unwrap_or_else(|| panic!("{width}x{height}: {note}"));
        let (_, top) = find(&screen, " keys ").expect("the help box");
        assert!(y > top, "on the box's bottom edge");
    }
}

#[test]
fn debounce_starts_a_new_run_with_a_new_id() {
    let mut s = running();
    select(&mut s, "temperature");
    update(&mut s, nudge(-2, false));
    let effects = update(&mut s, Action::DebounceElapsed);
    let [Effect::Run(_, request)] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(request.run_id, 2);
    assert_eq!(request.prompt, Prompt::raw("Once"));
    assert_eq!(request.params.temperature, 0.9);
    assert!(
        update(&mut s, Action::DebounceElapsed).is_empty(),
        "nothing owed"
    );
    let effects = update(&mut s, Action::Rerun);
    assert!(
        matches!(&effects[..], [Effect::Cancel(ModelId(0), 2), Effect::Run(_, r)] if r.run_id == 3)
    );
}

#[test]
fn nothing_runs_before_the_model_is_ready() {
    let mut s = state();
    assert!(update(&mut s, Action::DebounceElapsed).is_empty());
    assert!(update(&mut s, Action::Rerun).is_empty());
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loading {
                progress: 0.5,
                message: "weights".into(),
                download: None,
            },
        ),
    );
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded()));
    assert!(matches!(&effects[..], [Effect::Run(_, r)] if r.run_id == 1));
    let mut failed = state();
    update(
        &mut failed,
        Action::Engine(
            ModelId(0),
            Event::LoadFailed {
                message: "no such file".into(),
            },
        ),
    );
    assert!(update(&mut failed, Action::Rerun).is_empty());
}

#[test]
fn events_of_a_stale_run_are_dropped() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    update(&mut s, Action::Engine(ModelId(0), token(1, 0, "Hi", 0.5)));
    update(&mut s, Action::InsertChar('!'));
    update(&mut s, Action::DebounceElapsed);
    let before = s.clone();
    for event in [
        token(1, 0, " there", 0.5),
        started(1, vec![7, 8]),
        finished(1, 0, StopReason::Length, None),
        done(1, &[StopReason::Abort]),
        Event::Error {
            run_id: 1,
            message: "late".into(),
        },
    ] {
        update(&mut s, Action::Engine(ModelId(0), event));
    }
    assert_eq!(s, before);
    assert_eq!(
        s.columns.columns[0].footer(80),
        "■ abort 1 tok lp -0.69 ppl 2.00"
    );
}

#[test]
fn a_replayed_sample_footer_counts_replayed_and_decoded_tokens() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    for text in ["a", "b", "c"] {
        update(&mut s, Action::Engine(ModelId(0), token(1, 0, text, 0.5)));
    }
    let mut event = finished(1, 0, StopReason::Length, None);
    if let Event::Finished {
        replayed, decoded, ..
    } = &mut event
    {
        (*replayed, *decoded) = (2, 1);
    }
    update(&mut s, Action::Engine(ModelId(0), event));
    assert_eq!(
        s.columns.columns[0].footer(80),
        "■ length 3 tok ↺2+1 lp -0.69 ppl 2.00"
    );
}

#[test]
fn a_run_that_only_replayed_shows_no_speed() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    let mut event = done(1, &[StopReason::Length]);
    if let Event::Done { response, .. } = &mut event {
        response.timings.tokens_decoded = 0;
        response.timings.decode_tok_per_s = 0.0;
    }
    update(&mut s, Action::Engine(ModelId(0), event));
    assert_eq!(s.comparison.models[0].tok_per_s, None);
}

#[test]
fn finished_and_done_fill_the_footers() {
    let mut s = running();
    update(
        &mut s,
        Action::Engine(ModelId(0), started(1, vec![42, 43, 44])),
    );
    update(&mut s, Action::Engine(ModelId(0), token(1, 0, "a", 0.5)));
    update(&mut s, Action::Engine(ModelId(0), token(1, 1, "b", 1.0)));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            finished(
                1,
                0,
                StopReason::Stop,
                Some(StopMatched::Text("\n\n".into())),
            ),
        ),
    );
    let mut eos = finished(1, 1, StopReason::Stop, Some(StopMatched::Token(2)));
    if let Event::Finished { stop_token, .. } = &mut eos {
        *stop_token = Some("</s>".into());
    }
    update(&mut s, Action::Engine(ModelId(0), eos));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            done(1, &[StopReason::Stop, StopReason::Stop, StopReason::Length]),
        ),
    );
    let footers: Vec<String> = s.columns.columns.iter().map(|c| c.footer(80)).collect();
    assert_eq!(footers[0], "■ stop \"\\n\\n\" 1 tok lp -0.69 ppl 2.00");
    assert_eq!(footers[1], "■ stop </s> 1 tok lp 0.00 ppl 1.00");
    // Sample 2 ended before the first token where sample 0 went on: it parts at 0.
    assert_eq!(footers[2], "■ length 0 tok ≠#0@1");
    assert_eq!(s.comparison.models[0].tok_per_s, Some(812.0));
    assert!(!s.comparison.sides[0].active);
    assert!(
        update(&mut s, Action::InsertChar('x')) == [Effect::ScheduleRun],
        "a finished run needs no cancel"
    );
}

#[test]
fn run_errors_mark_the_columns_and_the_status() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Error {
                run_id: 1,
                message: "out of memory".into(),
            },
        ),
    );
    assert_eq!(s.columns.columns[0].finish.as_deref(), Some("error"));
    assert_eq!(s.status.error.as_deref(), Some("out of memory"));
}

#[test]
fn resize_rewraps_the_columns() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    for _ in 0..30 {
        update(
            &mut s,
            Action::Engine(ModelId(0), token(1, 0, " word", 0.5)),
        );
    }
    let narrow = s.columns.columns[0].text.lines.len();
    update(
        &mut s,
        Action::Resize {
            width: 200,
            height: 50,
        },
    );
    assert!(s.columns.columns[0].text.lines.len() < narrow);
}

// ---- views ----

/// A run with two samples on screen: tokens, one finished with a stop string.
fn streamed(width: u16, height: u16) -> State {
    let mut s = state_sized(width, height);
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    select(&mut s, "temperature");
    s.comparison.params.params.temperature = 0.8;
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42, 43])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, "Hello", 0.3)),
    );
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, " world", 0.9)),
    );
    update(&mut s, Action::Engine(ModelId(0), token(1, 1, "Bye", 0.05)));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            finished(
                1,
                0,
                StopReason::Stop,
                Some(StopMatched::Text("\n\n".into())),
            ),
        ),
    );
    s
}

#[test]
fn views_show_sliders_tokens_and_footers() {
    let theme = Theme::dark();
    for (w, h) in [(80, 24), (200, 50)] {
        let s = streamed(w, h);
        let buffer = render(&s, &theme);
        let params = areas(Rect::new(0, 0, w, h)).params;
        let (_, y) = find(&buffer, "temperature").expect("temperature row");
        let right = params.x + params.width - 2;
        let value: String = (right - 3..=right)
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        assert_eq!(value, "0.80", "{w}x{h}: {}", row(&buffer, y));
        assert!(row(&buffer, y).contains('▮'), "the slider is drawn");

        let (x, y) = find(&buffer, "Hello").expect("token text");
        for dx in 0..5 {
            assert_eq!(
                buffer[(x + dx, y)].bg,
                theme.token_style(0.3).bg.unwrap(),
                "{w}x{h}"
            );
        }
        let (x, y) = find(&buffer, "world").unwrap();
        assert_eq!(buffer[(x, y)].bg, theme.token_style(0.9).bg.unwrap());
        assert_ne!(theme.token_style(0.3).bg, theme.token_style(0.9).bg);

        assert!(find(&buffer, "#0 seed 42").is_some());
        assert!(find(&buffer, "#1 seed 43").is_some());
        assert!(
            find(&buffer, "■ stop \"\\n\\n\" 2 tok").is_some(),
            "footer at {w}x{h}"
        );
        assert!(find(&buffer, "… 1 tok").is_some());
        assert!(find(&buffer, "model fake (cpu)").is_some());
        assert!(find(&buffer, "prefill 3 ms").is_some());
        assert!(
            find(&buffer, "preset default*").is_some(),
            "temperature differs"
        );
        assert!(find(&buffer, "? help").is_some());
    }
}

/// Issue 34: off read three ways (`top_k off`, `top_p 1.00`, `top_n_sigma -1.00`).
#[test]
fn every_parameter_at_its_off_value_reads_off_in_the_panel() {
    let mut s = state_sized(200, 60);
    s.comparison.params.params.engine = samplab::params::Engine::LlamaCpp;
    let buffer = render(&s, &Theme::dark());
    let panel = areas(s.size).params;
    let value = |label: &str| {
        (panel.y..panel.y + panel.height).find_map(|y| {
            let text: String = (panel.x + 1..panel.x + panel.width - 1)
                .map(|x| buffer[(x, y)].symbol())
                .collect();
            let rest = text.strip_prefix(&format!("{label:<11}"))?;
            rest.split_whitespace().last().map(str::to_owned)
        })
    };
    for label in [
        "top_k",
        "top_p",
        "min_p",
        "rep_penalty",
        "typical_p",
        "top_n_sigma",
        "presence",
        "frequency",
        "xtc_prob",
        "dry_mult",
        "dyn_range",
        "mirostat",
        "adapt_p",
        "min_keep",
        "stop",
        "logprobs",
    ] {
        assert_eq!(value(label).as_deref(), Some("off"), "{label}");
    }
    assert_eq!(value("repeat_n").as_deref(), Some("64"), "not off");
    assert_eq!(value("temperature").as_deref(), Some("1.00"), "has no off");
}

/// Issue 51: a bad regex showed "`structured_outputs.regex` is not", and a broken stop list
/// nothing at all; neither reached the message log.
#[test]
fn a_refused_value_is_shown_whole_and_kept_in_the_log() {
    for (field, typed) in [
        ("structured_outputs", "regex: \"(unclosed\""),
        ("stop", "\"never closed, #12"),
        ("stop", "[\"a\", "),
    ] {
        let mut s = state_sized(100, 30);
        select(&mut s, field);
        update(&mut s, Action::EditParam);
        update(&mut s, Action::ClearText);
        type_text(&mut s, typed);
        update(&mut s, Action::CommitEdit);
        let error = s
            .comparison
            .params
            .editor
            .as_ref()
            .and_then(|e| e.error.clone())
            .unwrap_or_else(|| panic!("{field}: {typed} is refused"));
        let shown = panel_text(&s);
        assert!(
            shown.contains(&one_spaced(&error)),
            "{field}: the whole reason, {error:?}, in {shown:?}"
        );
        assert!(
            s.status.log.iter().any(|m| m.text == error),
            "{field}: in the log: {:?}",
            s.status.log
        );
        // Enter again on the same text keeps one entry.
        update(&mut s, Action::CommitEdit);
        assert_eq!(s.status.log.iter().filter(|m| m.text == error).count(), 1);
    }
}

/// Issue 51: help longer than the panel's width was cut at its edge.
#[test]
fn a_parameters_help_wraps_in_the_panel() {
    let field = *Field::ALL
        .iter()
        .filter(|f| f.spec().engines.has(samplab::params::Engine::Vllm))
        .max_by_key(|f| f.spec().help.len())
        .unwrap();
    let help = field.spec().help;
    let mut s = state_sized(100, 30);
    select(&mut s, field.name());
    assert!(
        help.len() > usize::from(areas(s.size).params.width),
        "{help}"
    );
    let shown = panel_text(&s);
    assert!(shown.contains(&one_spaced(help)), "{help:?} in {shown:?}");
}

/// Issue 51: the params panel kept its width on a large terminal.
#[test]
fn the_params_panel_and_its_sliders_grow_with_the_terminal() {
    let slider = |w, h| {
        let s = streamed(w, h);
        let buffer = render(&s, &Theme::plain());
        let (_, y) = find(&buffer, "temperature").unwrap();
        row(&buffer, y)
            .chars()
            .filter(|c| "▮▯".contains(*c))
            .count()
    };
    assert!(slider(160, 45) > slider(100, 30));
}

#[test]
fn no_color_draws_tokens_without_colour() {
    let buffer = render(&streamed(80, 24), &Theme::plain());
    let (x, y) = find(&buffer, "Hello").unwrap();
    assert_eq!(buffer[(x, y)].bg, ratatui::style::Color::Reset);
}

#[test]
fn editor_errors_loading_and_help_are_drawn() {
    let mut s = state();
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loading {
                progress: 0.5,
                message: "weights".into(),
                download: None,
            },
        ),
    );
    select(&mut s, "top_p");
    update(&mut s, Action::EditParam);
    // The value opens selected: typing replaces it.
    type_text(&mut s, "19");
    update(&mut s, Action::CommitEdit);
    let buffer = render(&s, &Theme::dark());
    assert!(
        find(&buffer, "top_p       19 ").is_some(),
        "the typed text stays in the editor"
    );
    assert!(find(&buffer, "`top_p` = 19 is invalid").is_some());
    assert!(find(&buffer, "loading ▮▮▮▮▮▯▯▯▯▯ 50% weights").is_some());

    update(&mut s, Action::CancelEdit);
    update(&mut s, Action::OpenHelp);
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "Shift+←/Shift+→").is_some());
    assert!(find(&buffer, "roll seed").is_some());
}

#[test]
fn tiny_and_empty_terminals_do_not_panic() {
    for (w, h) in [(10, 5), (1, 1), (3, 2), (24, 6)] {
        let mut s = streamed(w, h);
        update(
            &mut s,
            Action::Resize {
                width: w,
                height: h,
            },
        );
        render(&s, &Theme::dark());
        update(&mut s, Action::EditParam);
        update(&mut s, Action::OpenHelp);
        render(&s, &Theme::dark());
        let mut many = state_sized(w, h);
        update(&mut many, Action::Engine(ModelId(0), loaded()));
        update(
            &mut many,
            Action::Engine(ModelId(0), started(1, (0..64).collect())),
        );
        update(
            &mut many,
            Action::Engine(ModelId(0), token(1, 63, "x", 0.5)),
        );
        render(&many, &Theme::plain());
    }
}

// ---- the whole loop ----

/// Answers each run at once with one token per sample, then stops it for `length`.
#[derive(Clone)]
struct FakeEngine {
    events: UnboundedSender<(ModelId, Event)>,
    requests: Arc<Mutex<Vec<Request>>>,
    cancels: Arc<Mutex<Vec<RunId>>>,
}

impl EngineHandle for FakeEngine {
    fn run(&self, request: Request) {
        let id = request.run_id;
        let n = request.params.num_samples;
        let seed = request.params.seed.unwrap_or(0);
        let mut events = vec![started(id, (0..u64::from(n)).map(|i| seed + i).collect())];
        for i in 0..n {
            events.push(token(id, i, &format!("T{id}"), 0.5));
            events.push(finished(id, i, StopReason::Length, None));
        }
        events.push(done(id, &vec![StopReason::Length; n as usize]));
        for event in events {
            self.events.send((ModelId(0), event)).unwrap();
        }
        self.requests.lock().unwrap().push(request);
    }

    fn cancel(&self, run_id: RunId) {
        self.cancels.lock().unwrap().push(run_id);
    }

    fn score(&self, _: ScoreRequest) {}
    fn trace(&self, _: TraceRequest) {}
}

fn key(code: KeyCode) -> std::io::Result<TermEvent> {
    Ok(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

#[tokio::test]
async fn keys_and_engine_events_drive_the_app_headless() {
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let engine = FakeEngine {
        events: events_tx.clone(),
        requests: Arc::default(),
        cancels: Arc::default(),
    };
    let mut app = App::new(state(), vec![engine.clone()], KeyMap::default());
    let (keys, input) = futures::channel::mpsc::unbounded();
    let task = tokio::spawn(async move {
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        app.run(&mut terminal, input, &mut events).await.unwrap();
        (app, terminal)
    });
    events_tx.send((ModelId(0), loaded())).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for k in [KeyCode::Tab, KeyCode::Right, KeyCode::Right] {
        keys.unbounded_send(key(k)).unwrap();
    }
    keys.unbounded_send(Ok(TermEvent::Paste("ignored outside the prompt".into())))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    keys.unbounded_send(key(KeyCode::Char('q'))).unwrap();
    let (app, terminal) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();

    assert!(app.should_quit());
    let requests = engine.requests.lock().unwrap().clone();
    let ids: Vec<RunId> = requests.iter().map(|r| r.run_id).collect();
    assert_eq!(ids, [1, 2], "two quick nudges make one debounced run");
    assert_eq!(requests[1].params.temperature, 1.1);
    assert_eq!(requests[1].prompt, Prompt::raw("Once"));
    let buffer = terminal.backend().buffer();
    assert!(find(buffer, "T2").is_some(), "the second run is on screen");
    assert!(find(buffer, "■ length 1 tok").is_some());
    assert!(find(buffer, "812 tok/s").is_some());
}

#[test]
fn the_model_preset_takes_the_defaults_the_model_ships_with() {
    let params = ParamsState::new(Preset::built_in("model", SamplingParams::default()), 1);
    let mut s = State::new("Once", params, Rect::new(0, 0, 80, 24));
    let defaults = SamplingParams::from_yaml("temperature: 0.3\ntop_p: 0.8").unwrap();
    let effects = update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loaded {
                model: "fake".into(),
                device: "cpu".into(),
                defaults: Some(defaults),
                chat_template: false,
                vocab: 0,
                vocab_size: Some(1024),
                special_tokens: Vec::new(),
                warnings: Vec::new(),
                activations: None,
                backend: None,
            },
        ),
    );
    let [Effect::Run(_, request)] = &effects[..] else {
        panic!("the first run starts: {effects:?}");
    };
    assert_eq!(
        (request.params.temperature, request.params.top_p),
        (0.3, 0.8)
    );
    assert_eq!(s.comparison.params.preset_name, "model");
    assert!(
        !s.comparison.params.modified(),
        "the defaults are the baseline, not a modification"
    );

    let mut other = state();
    update(
        &mut other,
        Action::Engine(
            ModelId(0),
            Event::Loaded {
                model: "fake".into(),
                device: "cpu".into(),
                defaults: Some(SamplingParams::from_yaml("temperature: 0.3").unwrap()),
                chat_template: false,
                vocab: 0,
                vocab_size: Some(1024),
                special_tokens: Vec::new(),
                warnings: Vec::new(),
                activations: None,
                backend: None,
            },
        ),
    );
    assert_eq!(
        other.comparison.params.params.temperature, 1.0,
        "another preset ignores them"
    );
}

#[test]
fn m_switches_the_prompt_to_the_chat_template_and_reruns() {
    let mut s = state();
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), loaded_with_template(true)),
    );
    assert!(matches!(&effects[..], [Effect::Run(_, r)] if !r.prompt.is_chat()));
    let effects = update(&mut s, Action::ToggleChat);
    assert!(s.comparison.models[0].chat);
    assert!(effects.contains(&Effect::ScheduleRun), "{effects:?}");
    let effects = update(&mut s, Action::DebounceElapsed);
    assert!(
        matches!(&effects[..], [Effect::Run(_, r)] if r.prompt.is_chat()),
        "{effects:?}"
    );
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(title.contains("prompt · chat template"), "{title}");

    update(&mut s, Action::ToggleChat);
    assert!(!s.comparison.models[0].chat);
    let title = row(&render(&s, &Theme::plain()), 0);
    assert!(title.contains("prompt · raw (m: chat)"), "{title}");
}

#[test]
fn a_model_without_a_template_keeps_the_prompt_raw_and_says_why() {
    let mut s = state();
    s.comparison.models[0].chat = true;
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), loaded_with_template(false)),
    );
    assert!(
        !s.comparison.models[0].chat,
        "chat mode asked for before the load is dropped"
    );
    assert!(matches!(&effects[..], [Effect::Run(_, r)] if !r.prompt.is_chat()));
    assert!(
        s.status
            .error
            .as_deref()
            .unwrap()
            .contains("no chat template")
    );

    s.status.error = None;
    let effects = update(&mut s, Action::ToggleChat);
    assert!(effects.is_empty(), "nothing re-runs: {effects:?}");
    assert!(!s.comparison.models[0].chat);
    assert!(
        s.status
            .error
            .as_deref()
            .unwrap()
            .contains("no chat template")
    );
}

/// Issue 34: long lists had no Home/End/PgUp/PgDn; they come from the key map, which the
/// help lists.
#[test]
fn home_end_and_pages_move_through_the_parameters() {
    let mut s = state();
    select(&mut s, "max_tokens");
    let keys = KeyMap::default();
    let press = |s: &mut State, code| {
        press_key(s, code);
        s.comparison.params.selected
    };
    let screen = render(&s, &Theme::dark());
    let panel = areas(s.size).params;
    // The rows between the borders, less the help under them (at most a third).
    let inside = usize::from(panel.height) - 2;
    let last = Field::ALL.len() - 1;
    let page = press(&mut s, KeyCode::PageDown);
    assert!(
        (inside - inside / 3..inside).contains(&page),
        "{page} of {inside}"
    );
    assert_eq!(press(&mut s, KeyCode::PageDown), (2 * page).min(last));
    assert_eq!(press(&mut s, KeyCode::PageUp), (2 * page).min(last) - page);
    assert_eq!(press(&mut s, KeyCode::End), last);
    assert_eq!(
        press(&mut s, KeyCode::PageDown),
        last,
        "pages stop at the end"
    );
    let bottom = render(&s, &Theme::dark());
    assert!(find(&bottom, "min_keep").is_some(), "the last row in view");
    assert_eq!(press(&mut s, KeyCode::Home), 0);
    assert!(find(&screen, "max_tokens").is_some());
    let help: Vec<(String, &str)> = keys.describe(samplab::tui::Mode::List);
    assert_eq!(
        help,
        [
            ("↑/↓".to_owned(), "select"),
            ("PgUp/PgDn/Home/End".to_owned(), "jump")
        ]
    );
}

#[test]
fn up_and_down_stop_at_the_first_and_last_parameter() {
    let mut s = state();
    let (first, last) = (Field::ALL[0], Field::ALL[Field::ALL.len() - 1]);
    select(&mut s, first.name());
    update(&mut s, Action::Select(ListMove::Step(-1)));
    assert_eq!(
        s.comparison.params.field(),
        first,
        "↑ on the first row stays there"
    );
    select(&mut s, last.name());
    update(&mut s, Action::Select(ListMove::Step(1)));
    assert_eq!(
        s.comparison.params.field(),
        last,
        "↓ on the last row stays there"
    );
}

#[test]
fn a_footer_names_the_stop_token_by_its_text() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    update(&mut s, Action::Engine(ModelId(0), token(1, 0, "Hi", 0.5)));
    let mut event = finished(1, 0, StopReason::Stop, Some(StopMatched::Token(7)));
    if let Event::Finished { stop_token, .. } = &mut event {
        *stop_token = Some("<|im_end|>".into());
    }
    update(&mut s, Action::Engine(ModelId(0), event));
    assert!(
        s.columns.columns[0]
            .footer(80)
            .starts_with("■ stop <|im_end|> 1 tok"),
        "{}",
        s.columns.columns[0].footer(80)
    );
}

/// Issue 13: in a chat message, special-token text is marked, the title says it becomes the
/// control token, and `m` (again) keeps it text for the next run, then goes back to raw.
#[test]
fn special_token_text_in_a_chat_message_is_marked_and_can_stay_text() {
    let theme = Theme::dark();
    let mut s = state_sized(120, 24);
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loaded {
                model: "fake".into(),
                device: "cpu".into(),
                defaults: None,
                chat_template: true,
                vocab: 0,
                vocab_size: Some(1024),
                special_tokens: vec!["<|im_end|>".into()],
                warnings: Vec::new(),
                activations: None,
                backend: None,
            },
        ),
    );
    update(&mut s, Action::ToggleChat);
    s.prompt.buffer = TextBuffer::new("hi<|im_end|>there");
    let buffer = render(&s, &theme);
    assert!(find(&buffer, "marked text = control tokens").is_some());
    let (x, y) = find(&buffer, "<|im_end|>there").unwrap();
    assert_eq!(buffer[(x, y)].fg, theme.error.fg.unwrap());
    assert_ne!(
        buffer[(x + 10, y)].fg,
        theme.error.fg.unwrap(),
        "only the special text"
    );

    update(&mut s, Action::ToggleChat);
    assert!(find(&render(&s, &theme), "marked text stays text").is_some());
    let effects = update(&mut s, Action::DebounceElapsed);
    let request = effects
        .iter()
        .find_map(|e| match e {
            Effect::Run(_, request) => Some(request),
            _ => None,
        })
        .expect("the change re-runs");
    assert!(matches!(&request.prompt, Prompt::Chat(c) if c.literal_specials));

    update(&mut s, Action::ToggleChat);
    assert!(
        !s.comparison.models[0].chat && s.prompt.literal_specials,
        "on to raw text, the special text still kept as text"
    );
    assert!(find(&render(&s, &theme), "raw · marked text stays text").is_some());
    let effects = update(&mut s, Action::DebounceElapsed);
    let raw_literal = effects.iter().any(|e| {
        matches!(e, Effect::Run(_, request) if request.prompt == Prompt::Literal("hi<|im_end|>there".into()))
    });
    assert!(raw_literal, "{effects:?}");
    update(&mut s, Action::ToggleChat);
    assert!(
        !s.comparison.models[0].chat && !s.prompt.literal_specials,
        "and on to raw text read as control tokens"
    );
    assert!(find(&render(&s, &theme), "raw · marked text = control tokens").is_some());
    s.prompt.buffer = TextBuffer::new("no specials");
    update(&mut s, Action::ToggleChat);
    update(&mut s, Action::ToggleChat);
    assert!(
        !s.comparison.models[0].chat,
        "without special text, m toggles chat as before"
    );
}

/// The probabilities shown are those of the path that computed them: a model whose quantized
/// products round activations to 16 bits says so beside its device; f32 ones add nothing.
#[test]
fn a_model_on_16_bit_activations_says_so_beside_its_device() {
    for (activations, marked) in [
        (Some(Activations::SixteenBit), true),
        (Some(Activations::Exact), false),
        (None, false),
    ] {
        let mut s = state_sized(140, 24);
        let mut event = loaded();
        if let Event::Loaded {
            activations: slot, ..
        } = &mut event
        {
            *slot = activations;
        }
        update(&mut s, Action::Engine(ModelId(0), event));
        let screen = render(&s, &Theme::dark());
        assert!(find(&screen, "(cpu").is_some(), "{activations:?}");
        assert_eq!(
            find(&screen, "cpu, 16-bit activations").is_some(),
            marked,
            "{activations:?}"
        );
    }
}

/// `h` colours tokens by the probability the logprobs report, by default the model's raw one,
/// and says so in the column titles; `h` again goes back to the processed probability they
/// were drawn with.
#[test]
fn h_switches_the_heatmap_between_kept_and_raw_probability() {
    let theme = Theme::dark();
    let mut s = streamed(120, 30);
    // " world" was drawn with p 0.9 where the model alone gave it 0.05.
    s.columns.columns[0].tokens[1].logprob = 0.05f32.ln();
    s.columns.columns[0].tokens[1].reported_prob = 0.05;
    let (x, y) = find(&render(&s, &theme), "world").unwrap();
    assert_eq!(
        render(&s, &theme)[(x, y)].bg,
        theme.token_style(0.9).bg.unwrap()
    );
    // The key works where the columns have the focus; the view is read without the cursor.
    let press_h = |s: &mut State| {
        let focus = s.focus;
        s.focus = Focus::Columns;
        common::tui::press_key(s, KeyCode::Char('h'));
        s.focus = focus;
    };
    press_h(&mut s);
    let buffer = render(&s, &theme);
    assert!(find(&buffer, "raw p").is_some(), "the titles say raw p");
    assert_eq!(buffer[(x, y)].bg, theme.token_style(0.05).bg.unwrap());
    press_h(&mut s);
    assert_eq!(
        render(&s, &theme)[(x, y)].bg,
        theme.token_style(0.9).bg.unwrap()
    );
}

/// Under a processed `logprobs_mode` the logprobs report what the token was drawn with (for
/// greedy, vLLM's distribution after the penalties alone): `h` colours by that and the column
/// titles and the legend call it processed p.
#[test]
fn h_follows_logprobs_mode() {
    let theme = Theme::dark();
    let mut s = state_sized(200, 40);
    s.comparison.params.params.logprobs_mode = LogprobsMode::ProcessedLogprobs;
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, "Hello", 1.0)),
    );
    s.columns.columns[0].tokens[0].reported_prob = 0.3;
    let (x, y) = find(&render(&s, &theme), "Hello").unwrap();
    s.focus = Focus::Columns;
    common::tui::press_key(&mut s, KeyCode::Char('h'));
    let buffer = render(&s, &theme);
    assert_eq!(buffer[(x, y)].bg, theme.token_style(0.3).bg.unwrap());
    assert!(find(&buffer, "processed p ").is_some(), "the title says so");
    assert!(
        row(&buffer, 39).contains("processed p  0  .25"),
        "{}",
        row(&buffer, 39)
    );
}

/// vLLM's `repetition_detected` ends a column as any stop does, named in its footer.
#[test]
fn a_sample_repetition_detection_ended_says_so_in_its_footer() {
    let mut s = streamed(120, 30);
    let ended = finished(1, 1, StopReason::RepetitionDetected, None);
    update(&mut s, Action::Engine(ModelId(0), ended));
    let buffer = render(&s, &Theme::dark());
    assert!(
        find(&buffer, "■ repetition_detected 1 tok").is_some(),
        "{}",
        (0..30)
            .map(|y| row(&buffer, y))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Issue 34: the status bar says what the colours mean where it has room, and the inspector's
/// edge always: each gradient stop's value on its own colour, for the probability that colours
/// the tokens.
#[test]
fn the_heatmap_legend_is_on_the_status_bar_and_the_inspector() {
    let theme = Theme::dark();
    let mut s = streamed(200, 40);
    let buffer = render(&s, &theme);
    let status_row = row(&buffer, 39);
    assert!(
        status_row.contains("kept p  0  .25  .5  .75  1 "),
        "{status_row}"
    );
    let (x, y) = find(&buffer, " .25 ").unwrap();
    assert_eq!(y, 39);
    assert_eq!(buffer[(x + 1, y)].bg, theme.token_style(0.25).bg.unwrap());
    s.focus = Focus::Columns;
    common::tui::press_key(&mut s, KeyCode::Char('h'));
    assert!(row(&render(&s, &theme), 39).contains("raw p  0  .25"));
    // Before any sample there is nothing to explain.
    let idle = state_sized(200, 40);
    assert!(!row(&render(&idle, &theme), 39).contains("kept p"));

    // At 80x24 the status bar keeps its timings; the inspector's bottom edge has the legend.
    let mut s = streamed(80, 24);
    assert!(!row(&render(&s, &theme), 23).contains("kept p"));
    s.focus = Focus::Columns;
    let buffer = render(&s, &theme);
    let (x, y) = find(&buffer, " kept p  0  .25  .5  .75  1 ").expect("on the inspector");
    assert!(x >= areas(s.size).params.x && y == 22, "its bottom edge");
}

/// Issue 34: without colours the legend names the weights that stand for them, in those
/// weights.
#[test]
fn without_colours_the_legend_names_bold_and_italic() {
    let theme = Theme::plain();
    let s = streamed(200, 40);
    let buffer = render(&s, &theme);
    let (x, y) = find(&buffer, "kept p bold <0.1 italic <0.5").expect("the legend");
    assert_eq!(y, 39);
    let bold = buffer[(x + 7, y)].modifier;
    assert!(bold.contains(Modifier::BOLD), "{bold:?}");
    let italic = buffer[(x + 17, y)].modifier;
    assert!(italic.contains(Modifier::ITALIC), "{italic:?}");
}
