//! What the playground shows and how it exits when something fails: a model that cannot load,
//! a run that fails.

use crate::common;

use common::tui::{NoEngine, find, render, row, started, state_sized};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use samplab::engine::Event;
use samplab::tui::{
    Action, App, DialogAction, Effect, Ending, Focus, KeyMap, ModelId, Overlay, State, Theme,
    update,
};

fn load_failed(message: &str) -> Action {
    Action::Engine(
        ModelId(0),
        Event::LoadFailed {
            message: message.into(),
        },
    )
}

#[test]
fn a_model_that_cannot_load_is_said_in_the_sample_area_and_ends_as_a_failure() {
    let mut state = state_sized(80, 24);
    state.comparison.compare(&["missing.gguf".to_owned()], None);
    let mut app = App::new(state, vec![NoEngine], KeyMap::default());
    assert_eq!(app.ending(), Ending::Quit);
    app.dispatch(load_failed("model path missing.gguf does not exist"));
    let buffer = render(&app.state, &Theme::dark());
    let screen: Vec<String> = (0..24).map(|y| row(&buffer, y)).collect();
    for part in [
        "cannot load model missing.gguf",
        "does not exist.",
        "q quits.",
    ] {
        assert!(
            find(&buffer, part).is_some(),
            "{part}:\n{}",
            screen.join("\n")
        );
    }
    assert!(find(&buffer, "samples appear here").is_none());
    assert_eq!(
        app.ending(),
        Ending::Failed(
            "cannot load model missing.gguf: model path missing.gguf does not exist".into()
        )
    );
}

/// Issue 34: a model added after one failed kept the failed one's "model failed" beside it,
/// and quitting still reported the old failure.
#[test]
fn a_model_added_after_a_failed_load_replaces_the_failed_one() {
    let mut s = state_sized(120, 30);
    s.comparison.compare(&["missing.gguf".to_owned()], None);
    update(
        &mut s,
        load_failed("model path missing.gguf does not exist"),
    );
    let bar = row(&render(&s, &Theme::dark()), 29);
    assert!(bar.contains("cannot load model missing.gguf"), "{bar}");

    update(&mut s, Action::Dialog(DialogAction::OpenModels));
    for c in "samplab-tiny".chars() {
        update(&mut s, Action::InsertChar(c));
    }
    let effects = update(&mut s, Action::Dialog(DialogAction::AddModel));
    assert_eq!(
        effects,
        [
            Effect::RemoveEngine(ModelId(0)),
            Effect::AddEngine {
                id: ModelId(1),
                spec: "samplab-tiny".into(),
                backend: None,
            }
        ]
    );
    let specs: Vec<&str> = s
        .comparison
        .models
        .iter()
        .map(|m| m.spec.as_str())
        .collect();
    assert_eq!(specs, ["samplab-tiny"]);
    assert_eq!(s.comparison.sides.len(), 1);
    assert_eq!(s.failure(), None, "quitting now is no failure");
    let screen = render(&s, &Theme::dark());
    let bar = row(&screen, 29);
    assert!(
        !bar.contains("missing.gguf") && bar.contains("loading"),
        "the new model's load replaces the failure:\n{bar}"
    );
    assert!(find(&screen, "cannot load model").is_none());
    let effects = update(&mut s, Action::Engine(ModelId(1), common::tui::loaded()));
    assert!(
        matches!(&effects[..], [Effect::Run(ModelId(1), _)]),
        "{effects:?}"
    );
}

fn run_error(run_id: u64, message: &str) -> Action {
    Action::Engine(
        ModelId(0),
        Event::Error {
            run_id,
            message: message.into(),
        },
    )
}

/// A state at 80 columns whose model is loaded and whose first run (id 1) is in flight.
fn running() -> State {
    let mut s = state_sized(80, 24);
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loaded {
                model: "samplab-tiny".into(),
                device: "cpu".into(),
                defaults: None,
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
    s
}

#[test]
fn the_newest_error_takes_the_status_bar_before_hints_and_timings() {
    let mut s = running();
    // Outside the prompt, where `l` opens the log and `q` quits.
    s.focus = Focus::Params;
    s.comparison.models[0].prefill_ms = Some(64.0);
    s.comparison.models[0].tok_per_s = Some(114.0);
    let bar = row(&render(&s, &Theme::dark()), 23);
    assert!(
        bar.contains("preset default") && bar.contains("q quit"),
        "at 80 columns the preset and the hints fit, the timings make room:\n{bar}"
    );
    let message = "the prompt holds 300 tokens; the context holds 256: shorten it";
    update(&mut s, run_error(1, message));
    let bar = row(&render(&s, &Theme::dark()), 23);
    assert!(bar.contains(&format!("l log error: {message}")), "{bar}");

    let long = "x".repeat(120);
    update(&mut s, run_error(1, &long));
    let bar = row(&render(&s, &Theme::dark()), 23);
    assert!(
        bar.trim_end().ends_with('…'),
        "cut where it does not fit:\n{bar}"
    );
}

#[test]
fn l_lists_every_error_and_notice_newest_first() {
    let mut s = running();
    update(&mut s, run_error(1, "out of memory"));
    update(&mut s, Action::CycleTheme);
    assert_eq!(s.status.error.as_deref(), Some("out of memory"));
    update(&mut s, Action::OpenMessages);
    assert_eq!(s.overlay, Some(Overlay::Messages));
    let buffer = render(&s, &Theme::dark());
    let (_, theme_at) = find(&buffer, "• theme").expect("the notice is listed");
    let (_, error_at) = find(&buffer, "• out of memory").expect("the error is listed");
    assert!(theme_at < error_at, "newest first");
    let keys = KeyMap::default();
    let l = KeyEvent::new(KeyCode::Char('l'), KeyModifiers::NONE);
    assert_eq!(keys.action(&s.modes(), l), Some(Action::CloseOverlay));
}

#[test]
fn columns_of_an_earlier_run_are_marked_stale_and_of_a_failed_run_failed() {
    let mut s = running();
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    let title = |s: &State| {
        let buffer = render(s, &Theme::dark());
        let (_, y) = find(&buffer, "#0 seed 42").expect("the column's title");
        row(&buffer, y)
    };
    assert!(!title(&s).contains("stale"), "{}", title(&s));
    s.focus = Focus::Params;
    update(
        &mut s,
        Action::NudgeParam {
            steps: 1,
            coarse: false,
        },
    );
    assert!(title(&s).contains("#0 seed 42 stale"), "{}", title(&s));
    update(&mut s, Action::DebounceElapsed);
    update(
        &mut s,
        run_error(2, "the prompt holds 300 tokens; the context holds 256"),
    );
    assert!(title(&s).contains("#0 seed 42 run failed"), "{}", title(&s));
}

#[test]
fn quitting_after_a_failed_run_ends_as_a_failure_until_a_run_succeeds() {
    let mut app = App::new(running(), vec![NoEngine], KeyMap::default());
    app.dispatch(run_error(1, "out of memory"));
    assert_eq!(
        app.ending(),
        Ending::Failed("the last run failed: out of memory".into())
    );
    app.dispatch(Action::Rerun);
    assert_eq!(
        app.ending(),
        Ending::Quit,
        "a new run replaced the failed one"
    );
}
