//! The playground comparing models (one side per `--model`) and parameter sets (A/B): each
//! side runs on its own engine and lane, other models score its samples, and the columns mark
//! where samples that share a seed part.

use crate::common;

use common::tui::{done, find, finished, render, row, started, state_sized, token};
use ratatui::style::Color;
use samplab::engine::Event;
use samplab::model::source::discover::Candidate;
use samplab::params::SamplingParams;
use samplab::presets::Preset;
use samplab::response::{CrossScore, PerToken, StopReason};
use samplab::tui::{
    Action, DialogAction, Effect, Focus, ListMove, ModelId, Outcome, Overlay, ParamsState, SetId,
    SideId, State, Theme, update,
};

fn loaded(name: &str, vocab: u64) -> Event {
    Event::Loaded {
        model: name.into(),
        device: "cpu".into(),
        defaults: None,
        chat_template: false,
        vocab,
        vocab_size: Some(1024),
        special_tokens: Vec::new(),
        warnings: Vec::new(),
        activations: None,
        backend: None,
    }
}

/// Two models, both loaded, each with its first run started; returns their run ids.
pub(crate) fn two_models() -> (State, u64, u64) {
    let mut s = state_sized(200, 50);
    s.comparison
        .compare(&["stories".into(), "tiny".into()], None);
    let first = update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    let [Effect::Run(ModelId(0), a)] = &first[..] else {
        panic!("only the loaded model runs: {first:?}");
    };
    let second = update(&mut s, Action::Engine(ModelId(1), loaded("tiny", 22)));
    let [Effect::Run(ModelId(1), b)] = &second[..] else {
        panic!("the second model runs once it is loaded, the first is not re-run: {second:?}");
    };
    assert_eq!(a.params, b.params, "the same params and seed on both");
    (s, a.run_id, b.run_id)
}

fn stream(s: &mut State, model: usize, run_id: u64, texts: &[&str]) {
    let model = ModelId(model);
    update(s, Action::Engine(model, started(run_id, vec![7])));
    for text in texts {
        update(s, Action::Engine(model, token(run_id, 0, text, 0.5)));
    }
    update(
        s,
        Action::Engine(model, finished(run_id, 0, StopReason::Length, None)),
    );
}

#[test]
fn each_model_fills_its_own_columns_and_the_status_bar_names_both() {
    let (mut s, a, b) = two_models();
    stream(&mut s, 1, b, &["B", "b"]);
    stream(&mut s, 0, a, &["A", "a"]);
    // A stale event of model 1 under model 0's run id is dropped.
    update(&mut s, Action::Engine(ModelId(1), token(a, 0, "X", 0.5)));

    let texts: Vec<(usize, String)> = s
        .columns
        .columns
        .iter()
        .map(|c| (c.side.0, c.token_text()))
        .collect();
    assert_eq!(texts, [(0, "Aa".to_owned()), (1, "Bb".to_owned())]);
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "stories · cpu · #0 seed 7").is_some());
    assert!(find(&screen, "tiny · cpu · #0 seed 7").is_some());
    let status = row(&screen, 49);
    assert!(
        status.contains("model stories (cpu)") && status.contains("model tiny (cpu)"),
        "{status}"
    );
}

#[test]
fn a_finished_run_is_sent_to_the_other_model_and_its_scores_reach_the_footer() {
    let (mut s, a, _) = two_models();
    stream(&mut s, 0, a, &["A", "a"]);
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    let [Effect::Score(ModelId(1), request)] = &effects[..] else {
        panic!("model 1 is asked to score run {a}: {effects:?}");
    };
    assert_eq!((request.run_id, request.vocab), (a, 11));

    let score = CrossScore {
        model: "tiny".into(),
        sample: 0,
        tokens: 3,
        mean_logprob: -2.0,
        perplexity: 2f64.exp(),
        retokenized: true,
        foreign_prompt: false,
        per_token: None,
    };
    update(
        &mut s,
        Action::Engine(
            ModelId(1),
            Event::Scored {
                run_id: a,
                scores: vec![score],
            },
        ),
    );
    let column = &s.columns.columns[0];
    assert_eq!(column.cross.len(), 1);
    assert!(
        column.footer(60).ends_with("⇄tiny 7.39*"),
        "{}",
        column.footer(60)
    );
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "⇄tiny 7.39*").is_some());
    assert!(
        find(&screen, "stories · cpu · 812 tok/s · #0 seed 7").is_some(),
        "the group header has the model's speed once a run finished"
    );
}

/// Two models on one seed, their samples parting at the third token, both runs done; with
/// the first run's id.
fn parted_runs() -> (State, u64) {
    let (mut s, a, b) = two_models();
    stream(&mut s, 0, a, &["Once", " upon", " a", " time"]);
    stream(&mut s, 1, b, &["Once", " upon", " the", " hill"]);
    update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    update(
        &mut s,
        Action::Engine(ModelId(1), done(b, &[StopReason::Length])),
    );
    (s, a)
}

#[test]
fn samples_sharing_a_seed_are_marked_where_they_part() {
    let (s, _) = parted_runs();

    let marks: Vec<Option<usize>> = s.columns.columns.iter().map(|c| c.diverge).collect();
    assert_eq!(marks, [Some(2), Some(2)], "both part at their third token");
    assert!(s.columns.columns[0].footer(80).contains("≠3"));
    let screen = render(&s, &Theme::dark());
    let (x, y) = find(&screen, " a time").expect("the first column's text");
    assert!(
        screen[(x + 1, y)]
            .modifier
            .contains(ratatui::style::Modifier::UNDERLINED),
        "the parting token is underlined"
    );
}

#[test]
fn a_narrow_column_shortens_its_stop_reason_and_keeps_its_marks() {
    let (mut s, a) = parted_runs();
    let score = CrossScore {
        model: "tiny".into(),
        sample: 0,
        tokens: 4,
        mean_logprob: -2.0,
        perplexity: 2f64.exp(),
        retokenized: true,
        foreign_prompt: false,
        per_token: None,
    };
    let scores = vec![score];
    update(
        &mut s,
        Action::Engine(ModelId(1), Event::Scored { run_id: a, scores }),
    );
    // (terminal width, the first column's footer): two columns of the narrowest width (22
    // cells inside), one column 18 cells inside, then 13.
    for (width, footer) in [
        (84, "■ 4 tok ≠3 ⇄tiny 7.39*"),
        (40, "■ ≠3 ⇄tiny 7.39*"),
        (30, "■ ≠3 ⇄7.39*"),
    ] {
        update(&mut s, Action::Resize { width, height: 40 });
        let screen = render(&s, &Theme::plain());
        let (x, y) = find(&screen, footer).unwrap_or_else(|| panic!("{width}: {footer}"));
        assert_eq!(x, 1, "{width}: in the first column, {}", row(&screen, y));
    }
}

#[test]
fn a_change_cancels_every_side_and_reruns_them_all() {
    let (mut s, a, b) = two_models();
    s.focus = Focus::Prompt;
    let effects = update(&mut s, Action::InsertChar('!'));
    assert!(
        effects.contains(&Effect::Cancel(ModelId(0), a)),
        "{effects:?}"
    );
    assert!(
        effects.contains(&Effect::Cancel(ModelId(1), b)),
        "{effects:?}"
    );
    let effects = update(&mut s, Action::DebounceElapsed);
    let models: Vec<usize> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(model, r) if r.prompt.text().ends_with('!') => Some(model.0),
            _ => None,
        })
        .collect();
    assert_eq!(models, [0, 1]);
}

#[test]
fn two_parameter_sets_run_in_two_lanes_and_b_switches_the_one_edited() {
    let mut s = state_sized(200, 50);
    let greedy = SamplingParams::from_yaml("temperature: 0\nseed: 3").unwrap();
    let params_b = ParamsState::new(Preset::built_in("greedy", greedy), 1);
    s.comparison.compare(&["stories".into()], Some(params_b));
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    let runs: Vec<(u32, f32, u64)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(ModelId(0), r) => Some((r.lane, r.params.temperature, r.run_id)),
            _ => None,
        })
        .collect();
    let [(0, 1.0, _), (1, 0.0, b)] = runs[..] else {
        panic!("set A in lane 0, set B in lane 1: {runs:?}");
    };
    stream(&mut s, 0, b, &["B"]);

    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "params A · default").is_some());
    let temperature_row = (0..50)
        .map(|y| row(&screen, y))
        .find(|r| r.contains("temperature"))
        .unwrap();
    assert!(
        temperature_row.contains("temperature≠"),
        "{temperature_row}"
    );

    update(&mut s, Action::SwitchParamSet);
    assert_eq!(
        s.comparison.params.params.temperature, 0.0,
        "B is edited now"
    );
    assert_eq!(s.comparison.set_params(SetId::A).params.temperature, 1.0);
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "params B · greedy").is_some());
    assert!(find(&screen, "B:greedy · cpu · #0 seed 7").is_some());
}

/// Issue 51: B's columns appeared only with its first token, narrowing A's under the reader's
/// eyes.
#[test]
fn a_b_columns_take_their_places_when_the_runs_are_sent() {
    let mut s = state_sized(200, 50);
    let greedy = SamplingParams::from_yaml("temperature: 0\nseed: 3").unwrap();
    let params_b = ParamsState::new(Preset::built_in("greedy", greedy), 1);
    s.comparison.compare(&["stories".into()], Some(params_b));
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    let runs: Vec<(u64, Option<u64>)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(_, r) => Some((r.run_id, r.params.seed)),
            _ => None,
        })
        .collect();
    let [(a, Some(seed_a)), (b, Some(3))] = runs[..] else {
        panic!("A and B run on their seeds: {runs:?}");
    };
    assert_eq!(
        s.columns.columns.len(),
        2,
        "both sides' columns, before any token"
    );
    let screen = render(&s, &Theme::plain());
    assert!(
        find(&screen, "#0 seed 3").is_some(),
        "B's column shows its seed"
    );

    update(&mut s, Action::Engine(ModelId(0), started(a, vec![seed_a])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(a, 0, &"word ".repeat(60), 0.5)),
    );
    let before: Vec<usize> = s.columns.columns.iter().map(|c| c.text.width()).collect();
    let lines = s.columns.columns[0].text.lines.len();
    update(&mut s, Action::Engine(ModelId(0), started(b, vec![3])));
    update(&mut s, Action::Engine(ModelId(0), token(b, 0, "B", 0.5)));
    let after: Vec<usize> = s.columns.columns.iter().map(|c| c.text.width()).collect();
    assert_eq!(after, before, "no column moved when B started");
    assert_eq!(
        s.columns.columns[0].text.lines.len(),
        lines,
        "A's text kept its wrapping"
    );
}

/// Issue 34: `r` in A/B rolled the edited set's seed only, so the sides no longer shared seeds.
#[test]
fn r_in_a_b_rolls_both_sets_seeds_and_says_so() {
    let mut s = state_sized(200, 50);
    let greedy = SamplingParams::from_yaml("temperature: 0\nseed: 3").unwrap();
    let params_b = ParamsState::new(Preset::built_in("greedy", greedy), 1);
    s.comparison.compare(&["stories".into()], Some(params_b));
    update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    s.focus = Focus::Params;
    let r = samplab::tui::KeyMap::default()
        .action(
            &s.modes(),
            crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char('r'),
                crossterm::event::KeyModifiers::NONE,
            ),
        )
        .unwrap();
    assert_eq!(r, Action::RollSeed);
    let before = s.comparison.params.params.seed;
    update(&mut s, r);
    let seed = s.comparison.params.params.seed;
    assert_ne!(seed, before);
    assert_eq!(s.comparison.set_params(SetId::B).params.seed, seed);
    let notice = format!("rolled seed {} for both sets, A and B", seed.unwrap());
    assert_eq!(s.status.notice.as_deref(), Some(notice.as_str()));
    let effects = update(&mut s, Action::DebounceElapsed);
    let seeds: Vec<Option<u64>> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(_, request) => Some(request.params.seed),
            _ => None,
        })
        .collect();
    assert_eq!(seeds, [seed, seed], "both sides run the new seed");
    assert!(find(&render(&s, &Theme::plain()), &notice).is_some());
}

#[test]
fn a_side_starting_later_rewraps_the_columns_already_shown() {
    let mut s = state_sized(200, 50);
    s.comparison
        .compare(&["stories".into(), "tiny".into()], None);
    let first = update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    let [Effect::Run(_, a)] = &first[..] else {
        panic!("{first:?}");
    };
    let a = a.run_id;
    // Model 0 streams alone first, model 1 still loading: its column is wrapped at the full
    // width.
    let long = "word ".repeat(60);
    update(&mut s, Action::Engine(ModelId(0), started(a, vec![7])));
    update(&mut s, Action::Engine(ModelId(0), token(a, 0, &long, 0.5)));
    let alone = s.columns.columns[0].text.width();
    let second = update(&mut s, Action::Engine(ModelId(1), loaded("tiny", 22)));
    let [Effect::Run(_, b)] = &second[..] else {
        panic!("{second:?}");
    };
    let b = b.run_id;
    update(&mut s, Action::Engine(ModelId(1), started(b, vec![7])));
    let beside = s.columns.columns[0].text.width();
    assert!(beside < alone, "{beside} < {alone}");
    assert_eq!(beside, s.columns.columns[1].text.width());
    let shown: String = s.columns.columns[0]
        .text
        .lines
        .iter()
        .flat_map(|l| l.iter().map(|seg| seg.text.as_str()))
        .collect();
    assert_eq!(shown, long, "nothing is lost to clipping");
}

/// Issue 51: beside each other, long model names pushed `#0 seed 7` out of the titles.
#[test]
fn side_by_side_titles_keep_the_sample_and_seed_and_shorten_the_model_name() {
    let mut s = state_sized(100, 30);
    let names = [
        "TinyLlama-1.1B-Chat-v1.0-Q4_K_M",
        "Qwen2.5-0.5B-Instruct-Q8_0",
    ];
    s.comparison.compare(&names.map(String::from), None);
    s.comparison.params.params.num_samples = 2;
    let mut runs = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let effects = update(&mut s, Action::Engine(ModelId(i), loaded(name, 11)));
        runs.extend(effects.iter().filter_map(|e| match e {
            Effect::Run(_, r) => Some(r.run_id),
            _ => None,
        }));
    }
    for (i, &run) in runs.iter().enumerate() {
        update(&mut s, Action::Engine(ModelId(i), started(run, vec![7, 8])));
    }
    let screen = render(&s, &Theme::plain());
    let titles: Vec<String> = (0..30)
        .map(|y| row(&screen, y))
        .filter(|r| r.contains("seed"))
        .collect();
    let text = titles.join("\n");
    for sample in ["#0 seed 7", "#1 seed 8"] {
        assert_eq!(
            text.matches(sample).count(),
            2,
            "{sample} on both sides:\n{text}"
        );
    }
    assert!(text.contains("TinyLlama-"), "the name, shortened:\n{text}");
    assert!(text.contains("…"), "{text}");
}

#[test]
fn a_model_that_loads_late_scores_the_runs_already_finished() {
    let mut s = state_sized(200, 50);
    s.comparison
        .compare(&["stories".into(), "tiny".into()], None);
    let effects = update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    let [Effect::Run(ModelId(0), a)] = &effects[..] else {
        panic!("{effects:?}");
    };
    let a = a.run_id;
    stream(&mut s, 0, a, &["A"]);
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    assert!(effects.is_empty(), "nobody to score yet: {effects:?}");
    let effects = update(&mut s, Action::Engine(ModelId(1), loaded("tiny", 22)));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Score(ModelId(1), r) if r.run_id == a && r.vocab == 11)),
        "{effects:?}"
    );
}

/// The vLLM code the export dialog copies.
fn exported(s: &mut State) -> String {
    update(s, Action::Dialog(DialogAction::OpenExport));
    let copied = update(s, Action::Dialog(DialogAction::CopyExport));
    update(s, Action::CloseOverlay);
    match &copied[..] {
        [Effect::Copy(snippet)] => snippet.clone(),
        _ => panic!("{copied:?}"),
    }
}

pub(crate) fn open_models(s: &mut State) {
    let effects = update(s, Action::Dialog(DialogAction::OpenModels));
    assert_eq!(effects, [Effect::DiscoverModels]);
    update(
        s,
        Action::Outcome(Outcome::ModelsFound(vec![Candidate {
            spec: "/models/small.gguf".into(),
            label: "small.gguf (local)".into(),
            size: Some(3_285_416),
        }])),
    );
}

#[test]
fn the_model_picker_adds_a_typed_or_found_model_which_runs_once_loaded() {
    let mut s = state_sized(200, 50);
    update(&mut s, Action::Engine(ModelId(0), loaded("stories", 11)));
    open_models(&mut s);
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "stories").is_some());
    assert!(find(&screen, "samplab-tiny (built in)").is_some());
    assert!(find(&screen, "small.gguf (local)").is_some());

    // Down past the loaded model and the built-in one, to the file found on disk.
    update(&mut s, Action::Select(ListMove::Step(2)));
    let effects = update(&mut s, Action::Dialog(DialogAction::AddModel));
    assert_eq!(
        effects,
        [Effect::AddEngine {
            id: ModelId(1),
            spec: "/models/small.gguf".into(),
            backend: None,
        }]
    );
    assert!(s.overlay.is_none());
    assert_eq!(s.comparison.sides.len(), 2);
    let effects = update(&mut s, Action::Engine(ModelId(1), loaded("small", 33)));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Run(ModelId(1), _))),
        "{effects:?}"
    );

    open_models(&mut s);
    for c in "org/name".chars() {
        update(&mut s, Action::InsertChar(c));
    }
    let effects = update(&mut s, Action::Dialog(DialogAction::AddModel));
    assert_eq!(
        effects,
        [Effect::AddEngine {
            id: ModelId(2),
            spec: "org/name".into(),
            backend: None,
        }]
    );
}

#[test]
fn removing_a_model_drops_its_columns_and_scores_and_keeps_the_last_one() {
    let (mut s, a, b) = two_models();
    assert!(exported(&mut s).contains(r#"LLM(model="stories")"#));
    stream(&mut s, 0, a, &["A"]);
    stream(&mut s, 1, b, &["B"]);
    open_models(&mut s);
    let effects = update(&mut s, Action::Dialog(DialogAction::RemoveModel));
    assert_eq!(
        effects,
        [
            Effect::Cancel(ModelId(0), a),
            Effect::RemoveEngine(ModelId(0))
        ]
    );
    assert_eq!(s.comparison.sides.len(), 1);
    assert_eq!(s.comparison.sides[0].model, ModelId(1));
    let sides: Vec<(usize, String)> = s
        .columns
        .columns
        .iter()
        .map(|c| (c.side.0, c.token_text()))
        .collect();
    assert_eq!(sides, [(0, "B".to_owned())], "model 1's column moved up");
    // Its events still find it under its id.
    update(&mut s, Action::Engine(ModelId(1), token(b, 0, "b", 0.5)));
    assert_eq!(s.columns.columns[0].token_text(), "Bb");
    let code = exported(&mut s);
    assert!(
        code.contains(r#"LLM(model="tiny")"#),
        "exported code loads a model still there: {code}"
    );
    open_models(&mut s);

    let effects = update(&mut s, Action::Dialog(DialogAction::RemoveModel));
    assert!(effects.is_empty());
    let Some(Overlay::Models(picker)) = &s.overlay else {
        panic!("the picker stays open");
    };
    assert!(
        picker
            .error
            .as_deref()
            .unwrap()
            .contains("last model stays")
    );
}

/// A model's download shows its bytes, rate and time left in the status bar and the picker;
/// Del on it cancels the download, even on the last model, which stays to say why.
#[test]
fn del_in_the_picker_cancels_the_download_of_the_last_model() {
    let mut s = state_sized(200, 50);
    let transfer = samplab::model::source::hub::Transfer {
        file: "tiny.gguf".into(),
        done: 1_000_000_000,
        total: 4_000_000_000,
        bytes_per_second: Some(10_000_000.0),
    };
    let step = samplab::model::source::LoadProgress::download(&transfer);
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loading {
                progress: step.fraction,
                message: step.message,
                download: Some(transfer),
            },
        ),
    );
    let figures = "downloading tiny.gguf 1.0 GB / 4.0 GB · 10.0 MB/s · 5 min 0 s left";
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, figures).is_some(), "{}", row(&screen, 49));
    open_models(&mut s);
    let screen = render(&s, &Theme::plain());
    assert!(
        find(&screen, &format!("loading 25% · {figures}")).is_some(),
        "the picker shows the whole download"
    );
    assert!(
        find(&screen, "3.3 MB").is_some(),
        "found models show their size"
    );
    let effects = update(&mut s, Action::Dialog(DialogAction::RemoveModel));
    assert_eq!(effects, [Effect::CancelLoad(ModelId(0))]);
    assert_eq!(s.comparison.models.len(), 1, "the last model stays");
    assert!(s.status.notice.as_deref().unwrap().contains("cancelling"));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::LoadFailed {
                message: "the download of `tiny.gguf` was cancelled".into(),
            },
        ),
    );
    // Once it has stopped there is nothing to cancel: Del refuses as for any last model.
    open_models(&mut s);
    assert!(update(&mut s, Action::Dialog(DialogAction::RemoveModel)).is_empty());
}

#[test]
fn w_writes_every_sides_finished_run() {
    let (mut s, a, b) = two_models();
    update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    update(
        &mut s,
        Action::Engine(ModelId(1), done(b, &[StopReason::Stop])),
    );
    update(&mut s, Action::Dialog(DialogAction::OpenExport));
    update(&mut s, Action::Dialog(DialogAction::WriteResults));
    let effects = update(&mut s, Action::Dialog(DialogAction::SubmitName));
    let [
        Effect::WriteResults {
            run_id, responses, ..
        },
    ] = &effects[..]
    else {
        panic!("{effects:?}");
    };
    assert_eq!(*run_id, a);
    let reasons: Vec<StopReason> = responses
        .iter()
        .map(|r| r.trajectories[0].stop_reason)
        .collect();
    assert_eq!(reasons, [StopReason::Length, StopReason::Stop]);
}

/// Issue 34: a long list of found models did not scroll, and had no PgUp/PgDn.
#[test]
fn the_model_picker_pages_through_many_models_and_keeps_the_selection_in_view() {
    let mut s = state_sized(100, 24);
    update(&mut s, Action::Dialog(DialogAction::OpenModels));
    let found = (0..40)
        .map(|i| Candidate {
            spec: format!("/models/m{i:02}.gguf"),
            label: format!("m{i:02}.gguf (local)"),
            size: None,
        })
        .collect();
    update(&mut s, Action::Outcome(Outcome::ModelsFound(found)));
    let keys = samplab::tui::KeyMap::default();
    let press = |s: &mut State, code| {
        let event = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
        let action = keys.action(&s.modes(), event).unwrap();
        update(s, action);
        match &s.overlay {
            Some(Overlay::Models(picker)) => picker.selected,
            other => panic!("{other:?}"),
        }
    };
    use crossterm::event::KeyCode;
    // 24 lines: 22 inside, less the input line and the error line.
    assert_eq!(press(&mut s, KeyCode::PageDown), 20);
    assert_eq!(press(&mut s, KeyCode::PageDown), 40);
    let screen = render(&s, &Theme::plain());
    assert!(
        find(&screen, "m38.gguf (local)").is_some(),
        "the selection in view"
    );
    assert!(find(&screen, "add: ").is_some(), "the input line stays");
    assert_eq!(press(&mut s, KeyCode::PageDown), 41, "the last one");
    assert_eq!(press(&mut s, KeyCode::Down), 0, "a step wraps round");
    let screen = render(&s, &Theme::plain());
    assert!(find(&screen, "samplab-tiny").is_some());
    assert!(find(&screen, "m38.gguf").is_none());
}

#[test]
fn the_model_picker_says_which_models_failed_or_are_still_loading() {
    let mut s = state_sized(200, 50);
    s.comparison
        .compare(&["missing.gguf".to_owned(), "big.gguf".to_owned()], None);
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::LoadFailed {
                message: "model path missing.gguf does not exist".into(),
            },
        ),
    );
    open_models(&mut s);
    let theme = Theme::dark();
    let screen = render(&s, &theme);
    let failed = find(&screen, " failed: model path missing.gguf does not exist")
        .unwrap_or_else(|| panic!("the failure is listed"));
    assert!(failed.1 < 49, "in the picker, not the status bar");
    assert_eq!(
        screen[failed].fg,
        theme.error.fg.unwrap(),
        "in the error colour"
    );
    assert!(find(&screen, "loading 0%").is_some());
    assert!(find(&screen, "loaded").is_none(), "no model has loaded");
}

#[test]
fn exports_name_the_built_in_model_by_its_files() {
    let mut s = state_sized(200, 50);
    s.comparison.compare(&["samplab-tiny".into()], None);
    s.export.builtin_model = Some("/cache/samplab/models/samplab-tiny-00ff".into());
    let code = exported(&mut s);
    assert!(
        code.contains(r#"LLM(model="/cache/samplab/models/samplab-tiny-00ff")"#),
        "{code}"
    );
    s.comparison.compare(&["org/name".into()], None);
    assert!(exported(&mut s).contains(r#"LLM(model="org/name")"#));
}

#[test]
fn k_colours_tokens_by_the_other_models_p_and_the_inspector_and_stats_show_the_figures() {
    let (mut s, a, _) = two_models();
    stream(&mut s, 0, a, &["A", "a"]);
    update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    let (first, second) = (-0.1f32, -2.9f32);
    let score = CrossScore {
        model: "tiny".into(),
        sample: 0,
        tokens: 2,
        mean_logprob: f64::from(first + second) / 2.0,
        perplexity: (-f64::from(first + second) / 2.0).exp(),
        retokenized: false,
        foreign_prompt: false,
        per_token: Some(PerToken {
            logprobs: Some(vec![Some(first), Some(second)]),
            ranks: Some(vec![Some(1), Some(7)]),
            kl: Some(vec![0.01, 1.25]),
            covers: None,
            null_reason: None,
        }),
    };
    let theme = Theme::dark();
    let scored = Event::Scored {
        run_id: a,
        scores: vec![score],
    };
    // Before the other model scored the sample its tokens have nothing to be coloured by.
    update(&mut s, Action::ToggleOtherHeat);
    let screen = render(&s, &theme);
    let (x, y) = find(&screen, "Aa").expect("the sample's text");
    let cell = screen[(x, y)].style();
    assert_eq!(
        (cell.fg, cell.bg),
        (theme.dim.fg, Some(Color::Reset)),
        "dim until scored"
    );
    assert!(find(&screen, "⇄none").is_some());

    update(&mut s, Action::Engine(ModelId(1), scored));
    let screen = render(&s, &theme);
    let bg = |x: u16| screen[(x, y)].style().bg;
    assert_eq!(bg(x), theme.token_style(first.exp()).bg);
    assert_eq!(bg(x + 1), theme.token_style(second.exp()).bg);
    assert_ne!(bg(x), bg(x + 1), "the token tiny doubts stands out");
    assert!(
        find(&screen, "⇄tiny p").is_some(),
        "the title names the model"
    );
    assert!(
        find(&screen, "other model's p").is_some(),
        "the legend says what colours"
    );

    // `k` again goes back to kept p.
    s.focus = Focus::Columns;
    common::tui::press_key(&mut s, crossterm::event::KeyCode::Char('k'));
    let screen = render(&s, &theme);
    assert!(find(&screen, "⇄tiny p").is_none() && find(&screen, "kept p").is_some());
    assert_eq!(screen[(x + 1, y)].style().bg, theme.token_style(0.5).bg);

    update(&mut s, Action::LastToken);
    let screen = render(&s, &theme);
    assert!(
        find(&screen, "⇄tiny lp -2.900  rank 7  KL 1.2500").is_some(),
        "the inspector shows the token under the other model"
    );

    let stats = s.comparison.sides[SideId(0)].response.as_ref().unwrap();
    let means = stats.stats.as_ref().unwrap().mean_kl.clone().unwrap();
    assert!((means["tiny"] - 0.63).abs() < 1e-12, "{means:?}");
    s.focus = Focus::Params;
    common::tui::press_key(&mut s, crossterm::event::KeyCode::Char('i'));
    let screen = render(&s, &theme);
    assert!(
        find(&screen, "mean KL from tiny  0.6300 nats").is_some(),
        "the stats panel shows the mean KL"
    );
}

/// Another vocabulary: the second token carries the other model's probability of both (their
/// bytes are one span of its tokens), the first none of its own.
#[test]
fn k_dims_tokens_another_vocabulary_cannot_score_alone_and_the_inspector_names_the_group() {
    let (mut s, a, _) = two_models();
    stream(&mut s, 0, a, &["A", "a"]);
    update(
        &mut s,
        Action::Engine(ModelId(0), done(a, &[StopReason::Length])),
    );
    let both = -1.7f32;
    let score = CrossScore {
        model: "tiny".into(),
        sample: 0,
        tokens: 1,
        mean_logprob: f64::from(both),
        perplexity: (-f64::from(both)).exp(),
        retokenized: true,
        foreign_prompt: false,
        per_token: Some(PerToken {
            logprobs: Some(vec![None, Some(both)]),
            ranks: Some(vec![None, None]),
            kl: None,
            covers: Some(vec![0, 2]),
            null_reason: Some("the vocabularies differ".into()),
        }),
    };
    let scored = Event::Scored {
        run_id: a,
        scores: vec![score],
    };
    update(&mut s, Action::Engine(ModelId(1), scored));
    update(&mut s, Action::ToggleOtherHeat);
    let theme = Theme::dark();
    let screen = render(&s, &theme);
    let (x, y) = find(&screen, "Aa").expect("the sample's text");
    assert_eq!(
        screen[(x, y)].style().fg,
        theme.dim.fg,
        "not comparable alone"
    );
    assert_eq!(
        screen[(x + 1, y)].style().bg,
        theme.token_style(both.exp()).bg,
        "the group's probability"
    );

    s.focus = Focus::Columns;
    update(&mut s, Action::LastToken);
    let screen = render(&s, &theme);
    assert!(
        find(&screen, "⇄tiny lp -1.700 of 2 tokens").is_some(),
        "the inspector says the figure is of the group: {}",
        (0..screen.area.height)
            .map(|y| common::tui::row(&screen, y))
            .filter(|row| row.contains('⇄'))
            .collect::<Vec<_>>()
            .join("\n")
    );
    update(&mut s, Action::FirstToken);
    let screen = render(&s, &theme);
    assert!(find(&screen, "⇄tiny not comparable here").is_some());
}
