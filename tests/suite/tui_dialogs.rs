//! The playground's dialogs and themes: the preset picker, saving presets, the export dialog,
//! theme switching and the `*` marker, as pure updates, as drawn cells, and against real files.

use crate::common;

use common::tui::{NoEngine, done, find, loaded, press_key, render, row, state_sized};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use samplab::engine::{Event, RunId};
use samplab::export::{ExportContext, ExportFormat, to_vllm};
use samplab::params::{Field, SamplingParams};
use samplab::preset_store::{PresetStore, UserPreset};
use samplab::presets::{Preset, PresetSource};
use samplab::response::{ResponseShape, SampleResponse, StopReason};
use samplab::tui::{
    Action, App, DialogAction, Effect, EntryKind, ExportDialog, Focus, KeyMap, ListMove, Mode,
    ModelId, Note, Outcome, Overlay, ParamsState, PresetPicker, START_MAX_TOKENS, START_SAMPLES,
    SavePrompt, State, Theme, ThemeCatalog, areas, builtin_theme, osc52, results_file, update,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

fn dialog(action: DialogAction) -> Action {
    Action::Dialog(action)
}

fn with_store(dir: &Path) -> State {
    let mut s = state_sized(80, 24);
    s.presets.store = Some(PresetStore::new(dir));
    s
}

/// Model loaded, first run (id 1) in flight.
fn running(dir: &Path) -> State {
    let mut s = with_store(dir);
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    s
}

fn type_text(s: &mut State, text: &str) {
    for c in text.chars() {
        update(s, Action::InsertChar(c));
    }
}

fn select(s: &mut State, field: &str) {
    s.focus = Focus::Params;
    s.comparison.params.selected = Field::ALL.iter().position(|f| f.name() == field).unwrap();
}

fn nudge(steps: i32) -> Action {
    Action::NudgeParam {
        steps,
        coarse: false,
    }
}

fn picker(s: &State) -> &PresetPicker {
    match &s.overlay {
        Some(Overlay::Presets(picker)) => picker,
        other => panic!("no picker: {other:?}"),
    }
}

fn prompt(s: &State) -> &SavePrompt {
    match &s.overlay {
        Some(Overlay::Save(prompt)) => prompt,
        other => panic!("no save prompt: {other:?}"),
    }
}

fn export(s: &State) -> &ExportDialog {
    match &s.overlay {
        Some(Overlay::Export(dialog)) => dialog,
        other => panic!("no export dialog: {other:?}"),
    }
}

fn user(name: &str, params: Result<SamplingParams, String>) -> UserPreset {
    UserPreset {
        name: name.into(),
        path: PathBuf::from(format!("/presets/{name}.yaml")),
        params,
        shadowed_by: None,
    }
}

fn pick(s: &mut State, name: &str) {
    while picker(s).chosen().unwrap().name != name {
        update(s, Action::Select(ListMove::Step(1)));
    }
}

fn bad_top_p() -> String {
    SamplingParams::from_yaml("top_p: 2")
        .unwrap_err()
        .to_string()
}

// ---- preset picker ----

#[test]
fn p_opens_the_picker_on_the_built_ins_and_asks_the_loop_for_user_presets() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_store(dir.path());
    let effects = update(&mut s, dialog(DialogAction::OpenPresets));
    assert_eq!(effects, [Effect::ListPresets(PresetStore::new(dir.path()))]);
    let names: Vec<&str> = picker(&s).entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(&names[..3], ["default", "greedy", "precise"]);
    assert_eq!(
        picker(&s).chosen().unwrap().name,
        "default",
        "on the current"
    );
    assert_eq!(s.modes(), [Mode::Presets, Mode::List, Mode::Dialog]);
    update(&mut s, Action::CloseOverlay);
    assert_eq!(s.overlay, None);

    let mut no_dir = state_sized(80, 24);
    assert!(update(&mut no_dir, dialog(DialogAction::OpenPresets)).is_empty());
    let message = picker(&no_dir).message.clone().unwrap();
    assert!(message.contains("SAMPLAB_CONFIG_DIR"), "{message}");
}

#[test]
fn enter_loads_the_chosen_preset_keeps_the_seed_and_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    let seed = s.comparison.params.params.seed;
    s.comparison.params.params.max_tokens = Some(300);
    update(&mut s, dialog(DialogAction::OpenPresets));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetsListed(Ok(vec![user(
            "mine",
            Ok(SamplingParams::from_yaml("min_p: 0.2").unwrap()),
        )]))),
    );
    pick(&mut s, "creative");
    let effects = update(&mut s, dialog(DialogAction::LoadPreset));
    assert_eq!(
        effects,
        [Effect::Cancel(ModelId(0), 1), Effect::ScheduleRun]
    );
    assert_eq!(s.overlay, None);
    assert_eq!(s.comparison.params.preset_name, "creative");
    assert_eq!(
        (
            s.comparison.params.params.temperature,
            s.comparison.params.params.min_p
        ),
        (1.1, 0.05)
    );
    assert_eq!(
        s.comparison.params.params.seed, seed,
        "the seed stays unless rolled"
    );
    assert_eq!(
        s.comparison.params.params.max_tokens,
        Some(START_MAX_TOKENS),
        "creative leaves the length open: the playground's starting one, not the 300 before"
    );
    assert!(!s.comparison.params.modified());
    assert_eq!(s.comparison.params.source, PresetSource::BuiltIn);

    update(&mut s, dialog(DialogAction::OpenPresets));
    assert_eq!(picker(&s).chosen().unwrap().name, "creative");
    update(
        &mut s,
        Action::Outcome(Outcome::PresetsListed(Ok(vec![user(
            "mine",
            Ok(SamplingParams::from_yaml("min_p: 0.2").unwrap()),
        )]))),
    );
    pick(&mut s, "mine");
    assert_eq!(
        picker(&s).chosen().unwrap().kind,
        EntryKind::User("/presets/mine.yaml".into())
    );
    update(&mut s, dialog(DialogAction::LoadPreset));
    assert_eq!(s.comparison.params.params.min_p, 0.2);
    assert_eq!(
        s.comparison.params.params.temperature, 1.0,
        "a preset replaces, not patches"
    );
    assert_eq!(
        s.comparison.params.source,
        PresetSource::File("/presets/mine.yaml".into())
    );
}

#[test]
fn a_broken_user_preset_is_listed_with_its_error_and_loads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    update(&mut s, dialog(DialogAction::OpenPresets));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetsListed(Ok(vec![user(
            "bad",
            Err(bad_top_p()),
        )]))),
    );
    pick(&mut s, "bad");
    let before = s.comparison.params.clone();
    assert!(update(&mut s, dialog(DialogAction::LoadPreset)).is_empty());
    assert_eq!(s.comparison.params, before);
    let message = picker(&s).message.clone().unwrap();
    assert!(
        message.contains("nothing loaded") && message.contains("bad"),
        "{message}"
    );
}

#[test]
fn the_model_preset_is_offered_once_the_model_shipped_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_store(dir.path());
    update(&mut s, dialog(DialogAction::OpenPresets));
    assert!(
        picker(&s)
            .entries
            .iter()
            .all(|e| e.kind != EntryKind::Model)
    );
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Loaded {
                model: "fake".into(),
                device: "cpu".into(),
                defaults: Some(SamplingParams::from_yaml("temperature: 0.6").unwrap()),
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
    update(&mut s, dialog(DialogAction::OpenPresets));
    pick(&mut s, "model");
    update(&mut s, dialog(DialogAction::LoadPreset));
    assert_eq!(
        (
            s.comparison.params.preset_name.as_str(),
            s.comparison.params.params.temperature
        ),
        ("model", 0.6)
    );
}

// ---- saving presets ----

#[test]
fn s_asks_for_a_name_and_saving_makes_the_preset_current_and_unmodified() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    select(&mut s, "temperature");
    update(&mut s, nudge(-2));
    assert!(s.comparison.params.modified());
    update(&mut s, dialog(DialogAction::OpenSave));
    assert_eq!(
        prompt(&s).buffer.text,
        "",
        "a built-in's name is not offered"
    );
    assert_eq!(s.modes(), [Mode::PresetName, Mode::TextField, Mode::Dialog]);
    type_text(&mut s, " mine ");
    let effects = update(&mut s, dialog(DialogAction::SubmitName));
    let [
        Effect::SavePreset {
            store,
            name,
            params,
            overwrite,
        },
    ] = &effects[..]
    else {
        panic!("{effects:?}")
    };
    assert_eq!(
        (store.dir.as_path(), name.as_str(), *overwrite),
        (dir.path(), "mine", false)
    );
    assert_eq!(params, &s.comparison.params.params);

    let saved = PresetStore::new(dir.path())
        .save("mine", params, false)
        .unwrap();
    update(&mut s, Action::Outcome(Outcome::PresetSaved(Ok(saved))));
    assert_eq!(s.overlay, None);
    assert_eq!(s.comparison.params.preset_name, "mine");
    assert!(!s.comparison.params.modified());
    let notice = s.status.notice.clone().unwrap();
    assert!(notice.contains("mine.yaml"), "{notice}");
    update(&mut s, dialog(DialogAction::OpenSave));
    assert_eq!(
        prompt(&s).buffer.text,
        "mine",
        "a user preset offers its name"
    );
    assert_eq!(s.status.notice, None, "the next key clears the notice");
}

#[test]
fn each_parameter_set_offers_its_own_presets_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_store(dir.path());
    let creative = Preset::built_in("creative", SamplingParams::default());
    s.comparison
        .compare(&["m".into()], Some(ParamsState::new(creative, 1)));
    let saved = PresetStore::new(dir.path())
        .save("mine", &s.comparison.params.params, false)
        .unwrap();
    update(&mut s, Action::Outcome(Outcome::PresetSaved(Ok(saved))));

    update(&mut s, Action::SwitchParamSet);
    update(&mut s, dialog(DialogAction::OpenSave));
    assert_eq!(
        prompt(&s).buffer.text,
        "",
        "set B came from a built-in, whatever set A came from"
    );
    update(&mut s, Action::CloseOverlay);
    update(&mut s, Action::SwitchParamSet);
    update(&mut s, dialog(DialogAction::OpenSave));
    assert_eq!(prompt(&s).buffer.text, "mine");
}

#[test]
fn an_existing_name_asks_before_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    update(&mut s, dialog(DialogAction::OpenSave));
    type_text(&mut s, "mine");
    update(&mut s, dialog(DialogAction::SubmitName));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetExists("mine".into())),
    );
    assert_eq!(prompt(&s).confirm.as_deref(), Some("mine"));
    assert_eq!(s.modes(), [Mode::Confirm, Mode::Dialog]);
    assert!(update(&mut s, dialog(DialogAction::ConfirmOverwrite(false))).is_empty());
    assert_eq!(prompt(&s).confirm, None, "n goes back to the name");
    assert_eq!(prompt(&s).buffer.text, "mine");

    update(&mut s, dialog(DialogAction::SubmitName));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetExists("mine".into())),
    );
    let effects = update(&mut s, dialog(DialogAction::ConfirmOverwrite(true)));
    assert!(
        matches!(&effects[..], [Effect::SavePreset { name, overwrite: true, .. }] if name == "mine"),
        "{effects:?}"
    );
    update(
        &mut s,
        Action::Outcome(Outcome::PresetSaved(Err(
            "cannot write preset: disk full".into()
        ))),
    );
    assert_eq!(
        prompt(&s).error.as_deref(),
        Some("cannot write preset: disk full")
    );
    assert_eq!(prompt(&s).confirm, None);
}

#[test]
fn bad_names_are_refused_with_what_would_be_right() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    update(&mut s, dialog(DialogAction::OpenSave));
    for (name, expected) in [
        ("", "type a name"),
        ("a/b", "cannot contain `/`"),
        (
            "Creative",
            "`creative` is a built-in preset; choose another name",
        ),
        ("model", "the model's own defaults"),
    ] {
        update(&mut s, Action::CursorEnd);
        while update(&mut s, Action::DeleteBack).is_empty() && !prompt(&s).buffer.text.is_empty() {}
        type_text(&mut s, name);
        assert!(update(&mut s, dialog(DialogAction::SubmitName)).is_empty());
        let error = prompt(&s).error.clone().unwrap();
        assert!(error.contains(expected), "{name}: {error}");
    }
    update(&mut s, Action::Paste("x\ny".into()));
    assert_eq!(prompt(&s).error, None, "typing clears the error");
    assert_eq!(prompt(&s).buffer.text, "modelx y", "a name is one line");
}

#[test]
fn saving_without_a_config_dir_says_how_to_get_one() {
    let mut s = state_sized(80, 24);
    assert!(update(&mut s, dialog(DialogAction::OpenSave)).is_empty());
    assert_eq!(s.overlay, None);
    assert!(
        s.status
            .notice
            .clone()
            .unwrap()
            .contains("SAMPLAB_CONFIG_DIR")
    );
}

// ---- export ----

#[test]
fn the_export_dialog_switches_tabs_scrolls_and_copies_the_shown_snippet() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    s.comparison.models[0].spec = "org/tiny".into();
    update(&mut s, dialog(DialogAction::OpenExport));
    assert_eq!(export(&s).format, ExportFormat::Vllm);
    assert_eq!(s.modes(), [Mode::Export, Mode::Dialog]);
    let effects = update(&mut s, dialog(DialogAction::CopyExport));
    let expected = to_vllm(
        &s.comparison.params.params,
        &ExportContext::raw("Once", "org/tiny"),
    );
    assert_eq!(effects, [Effect::Copy(expected)]);
    update(&mut s, Action::Outcome(Outcome::Copied(Ok(()))));
    assert_eq!(
        export(&s).note,
        Some(Note::Done(
            "copied the vLLM snippet to the clipboard (OSC 52)".into()
        ))
    );

    update(&mut s, dialog(DialogAction::ExportCycle(-1)));
    assert_eq!(export(&s).format, ExportFormat::Twinkle);
    assert_eq!(export(&s).note, None);
    update(
        &mut s,
        dialog(DialogAction::ExportSelect(ExportFormat::Openai)),
    );
    update(&mut s, dialog(DialogAction::ExportScroll(3)));
    assert_eq!(export(&s).scroll, 3);
    update(&mut s, dialog(DialogAction::ExportScroll(-9)));
    assert_eq!(export(&s).scroll, 0);
    let effects = update(&mut s, dialog(DialogAction::CopyExport));
    assert!(matches!(&effects[..], [Effect::Copy(text)] if text.contains("/v1/completions")));
    update(
        &mut s,
        Action::Outcome(Outcome::Copied(Err("broken pipe".into()))),
    );
    assert_eq!(
        export(&s).note,
        Some(Note::Failed("cannot copy: broken pipe".into()))
    );
}

#[test]
fn w_asks_where_to_write_the_last_finished_run_or_says_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    s.export.results_dir = dir.path().to_owned();
    update(&mut s, dialog(DialogAction::OpenExport));
    assert!(update(&mut s, dialog(DialogAction::WriteResults)).is_empty());
    assert!(
        matches!(&export(&s).note, Some(Note::Failed(m)) if m.contains("no finished run yet")),
        "{:?}",
        export(&s).note
    );
    update(
        &mut s,
        Action::Engine(ModelId(0), done(1, &[StopReason::Length])),
    );
    assert!(update(&mut s, dialog(DialogAction::WriteResults)).is_empty());
    let offered = format!("{}/", dir.path().display());
    assert_eq!(prompt(&s).buffer.text, offered, "the results directory");
    while !prompt(&s).buffer.text.is_empty() {
        update(&mut s, Action::DeleteBack);
    }
    update(&mut s, Action::Paste("  ".into()));
    assert!(update(&mut s, dialog(DialogAction::SubmitName)).is_empty());
    assert!(
        prompt(&s)
            .error
            .as_deref()
            .unwrap()
            .contains("type a file path")
    );
    update(&mut s, Action::DeleteBack);
    update(&mut s, Action::DeleteBack);
    update(&mut s, Action::Paste(offered.clone()));
    let effects = update(&mut s, dialog(DialogAction::SubmitName));
    let [
        Effect::WriteResults {
            path,
            overwrite,
            run_id,
            responses,
            shape,
            prompt: text,
        },
    ] = &effects[..]
    else {
        panic!("{effects:?}")
    };
    assert_eq!(
        (path, *overwrite, *run_id),
        (&PathBuf::from(&offered), false, 1)
    );
    assert_eq!(responses.len(), 1, "one side, one response");
    assert_eq!(responses[0].trajectories.len(), 1);
    assert_eq!((*shape, text.as_str()), (ResponseShape::Samplab, "Once"));
    let written = dir.path().join("samplab-1-7.json");
    update(
        &mut s,
        Action::Outcome(Outcome::ResultsWritten(Ok(written.clone()))),
    );
    assert_eq!(
        export(&s).note,
        Some(Note::Done(format!("wrote {}", written.display()))),
        "back in the export dialog"
    );
}

#[test]
fn a_results_path_is_written_as_typed_and_an_existing_file_only_after_a_yes() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app(running(dir.path()));
    app.dispatch(Action::Engine(ModelId(0), done(1, &[StopReason::Length])));
    app.dispatch(dialog(DialogAction::OpenExport));
    app.dispatch(dialog(DialogAction::WriteResults));
    let target = dir.path().join("mine.json");
    std::fs::write(&target, "kept").unwrap();
    while !prompt(&app.state).buffer.text.is_empty() {
        app.dispatch(Action::DeleteBack);
    }
    app.dispatch(Action::Paste(target.display().to_string()));
    app.dispatch(dialog(DialogAction::SubmitName));
    let Some(Overlay::Save(asking)) = &app.state.overlay else {
        panic!("still asking")
    };
    assert_eq!(asking.confirm, Some(target.display().to_string()));
    app.dispatch(dialog(DialogAction::ConfirmOverwrite(false)));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");
    assert!(matches!(&app.state.overlay, Some(Overlay::Save(p)) if p.confirm.is_none()));

    app.dispatch(dialog(DialogAction::SubmitName));
    app.dispatch(dialog(DialogAction::ConfirmOverwrite(true)));
    let back: SampleResponse =
        serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(back.trajectories.len(), 1);
    assert_eq!(
        export(&app.state).note,
        Some(Note::Done(format!("wrote {}", target.display())))
    );

    // Issue 34: the next `w` offers the path given last, also after the dialog was closed.
    app.dispatch(Action::CloseOverlay);
    app.dispatch(dialog(DialogAction::OpenExport));
    app.dispatch(dialog(DialogAction::WriteResults));
    assert_eq!(prompt(&app.state).buffer.text, target.display().to_string());
    let screen = render(&app.state, &Theme::dark());
    assert!(find(&screen, &format!("path: {}", target.display())).is_some());

    // A path that cannot be written says why and stays editable.
    while !prompt(&app.state).buffer.text.is_empty() {
        app.dispatch(Action::DeleteBack);
    }
    let nowhere = dir.path().join("no/such/dir/r.json");
    app.dispatch(Action::Paste(nowhere.display().to_string()));
    app.dispatch(dialog(DialogAction::SubmitName));
    let Some(Overlay::Save(failed)) = &app.state.overlay else {
        panic!("still asking")
    };
    assert!(
        failed
            .error
            .as_deref()
            .unwrap()
            .starts_with("cannot write the results"),
        "{:?}",
        failed.error
    );
    assert!(!nowhere.exists());
}

// ---- themes and the `*` marker ----

#[test]
fn t_cycles_the_themes_and_names_the_new_one_until_the_next_key() {
    let mut s = state_sized(80, 24);
    update(&mut s, Action::CycleTheme);
    assert_eq!(s.themes.current().theme, builtin_theme("light").unwrap());
    assert_eq!(s.status.notice.as_deref(), Some("theme light"));
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    assert!(s.status.notice.is_some(), "engine news is not a key");
    update(&mut s, Action::FocusNext);
    assert_eq!(s.status.notice, None);
    for _ in 0..4 {
        update(&mut s, Action::CycleTheme);
    }
    assert_eq!(s.themes.current().name, "dark", "round the cycle");
}

#[test]
fn the_star_goes_when_the_params_are_back_at_the_preset() {
    let mut s = state_sized(80, 24);
    select(&mut s, "temperature");
    update(&mut s, nudge(1));
    assert!(s.comparison.params.modified());
    update(&mut s, nudge(-1));
    assert!(!s.comparison.params.modified());
    select(&mut s, "top_k");
    update(&mut s, Action::EditParam);
    // The value (-1) opens selected: typing replaces it.
    type_text(&mut s, "0");
    update(&mut s, Action::CommitEdit);
    assert_eq!(s.comparison.params.params.top_k, 0);
    assert!(
        !s.comparison.params.modified(),
        "top_k 0 is off, as the preset's -1"
    );
}

// ---- key map and help ----

#[test]
fn the_new_keys_are_bound_where_they_act() {
    let map = KeyMap::default();
    let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    let nav = [Mode::Params, Mode::Navigate, Mode::Global];
    assert_eq!(
        map.action(&nav, key('p')),
        Some(dialog(DialogAction::OpenPresets))
    );
    assert_eq!(
        map.action(&nav, key('s')),
        Some(dialog(DialogAction::OpenSave))
    );
    assert_eq!(
        map.action(&nav, key('e')),
        Some(dialog(DialogAction::OpenExport))
    );
    assert_eq!(map.action(&nav, key('t')), Some(Action::CycleTheme));
    let typing = [Mode::PresetName, Mode::Dialog];
    assert_eq!(map.action(&typing, key('p')), Some(Action::InsertChar('p')));
    let export = [Mode::Export, Mode::Dialog];
    assert_eq!(
        map.action(&export, key('3')),
        Some(dialog(DialogAction::ExportSelect(ExportFormat::Openai)))
    );
    assert_eq!(
        map.action(&export, key('5')),
        Some(dialog(DialogAction::ExportSelect(ExportFormat::Twinkle)))
    );
    assert_eq!(
        map.action(&export, key('s')),
        Some(dialog(DialogAction::CycleResultsShape))
    );
    assert_eq!(
        map.action(&export, KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)),
        Some(Action::CloseOverlay)
    );
    assert_eq!(
        map.action(&[Mode::Confirm, Mode::Dialog], key('y')),
        Some(dialog(DialogAction::ConfirmOverwrite(true)))
    );
}

/// Every binding of every mode is in the help: at 200x50 on one page, at 80x24 on pages that
/// PgDn turns, the bottom edge saying which and how to see more.
#[test]
fn help_lists_every_binding_at_80x24_and_200x50() {
    let map = KeyMap::default();
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = state_sized(w, h);
        update(&mut s, Action::OpenHelp);
        let first = render(&s, &Theme::dark());
        let paged = find(&first, "PgDn more").is_some();
        assert_eq!(paged, w == 80, "{w}x{h}: paged only where it must be");
        let mut pages = vec![first];
        if paged {
            // Help opens on the prompt's keys, which need not be on the first page.
            let (_, y) = find(&pages[0], "PgDn more").expect("the page cue");
            let edge = row(&pages[0], y);
            assert!(edge.contains('┘'), "on the bottom edge");
            loop {
                update(&mut s, Action::TurnHelpPage(1));
                let page = render(&s, &Theme::dark());
                if page == pages[0] {
                    break;
                }
                assert!(pages.len() < 8, "the pages come round");
                pages.push(page);
            }
            assert!(pages.len() >= 2);
            let numbered =
                (1..=pages.len()).any(|n| edge.contains(&format!(" {n}/{} ", pages.len())));
            assert!(numbered, "the page number: {edge}");
        }
        for mode in Mode::ALL {
            let rows = map.describe(mode);
            if rows.is_empty() {
                continue;
            }
            assert!(
                pages.iter().any(|b| find(b, mode.title()).is_some()),
                "{w}x{h}: {}",
                mode.title()
            );
            for (keys, help) in rows {
                assert!(
                    pages.iter().any(|b| listed(b, &keys, help)),
                    "{w}x{h}: `{keys} {help}` of {}",
                    mode.title()
                );
            }
        }
    }
}

/// Whether some screen line has `keys`, then only spaces, then `help`.
fn listed(buffer: &Buffer, keys: &str, help: &str) -> bool {
    (0..buffer.area.height).any(|y| {
        let line = row(buffer, y);
        line.match_indices(keys)
            .any(|(i, _)| line[i + keys.len()..].trim_start().starts_with(help))
    })
}

// ---- views ----

#[test]
fn the_picker_shows_presets_with_summaries_and_a_bad_files_error() {
    let dir = tempfile::tempdir().unwrap();
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = with_store(dir.path());
        s.size = Rect::new(0, 0, w, h);
        update(&mut s, dialog(DialogAction::OpenPresets));
        update(
            &mut s,
            Action::Outcome(Outcome::PresetsListed(Ok(vec![
                user("bad", Err(bad_top_p())),
                user("mine", Ok(SamplingParams::from_yaml("min_p: 0.2").unwrap())),
            ]))),
        );
        let buffer = render(&s, &Theme::dark());
        assert!(find(&buffer, " presets ").is_some(), "{w}x{h}");
        assert!(find(&buffer, "creative").is_some());
        assert!(find(&buffer, "temperature: 1.1, top_p: 0.98").is_some());
        assert!(find(&buffer, "mine").is_some());
        let (x, y) = find(&buffer, "✗ `top_p` = 2 is invalid").expect("the error, inline");
        assert_eq!(buffer[(x, y)].fg, Theme::dark().error.fg.unwrap());
        assert!(
            find(&buffer, "Enter load").is_some(),
            "hints from the key map"
        );

        pick(&mut s, "bad");
        let buffer = render(&s, &Theme::dark());
        assert!(find(&buffer, "/presets/bad.yaml").is_some(), "{w}x{h}");
        assert!(
            find(&buffer, "cannot load: `top_p` = 2").is_some(),
            "{w}x{h}"
        );
    }
}

/// Issue 34: Home/End/PgUp/PgDn in the preset picker, whose list scrolls with the selection.
#[test]
fn the_preset_picker_pages_and_jumps_to_its_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_store(dir.path());
    update(&mut s, dialog(DialogAction::OpenPresets));
    let users = (0..30)
        .map(|i| user(&format!("mine-{i:02}"), Ok(SamplingParams::default())))
        .collect();
    update(&mut s, Action::Outcome(Outcome::PresetsListed(Ok(users))));
    let press = |s: &mut State, code| {
        press_key(s, code);
        picker(s).selected
    };
    let entries = picker(&s).entries.len();
    // At 80x24 the popup is the screen's height: 22 lines inside, 4 of them the detail.
    let page = 18;
    assert_eq!(press(&mut s, KeyCode::PageDown), page);
    assert_eq!(press(&mut s, KeyCode::End), entries - 1);
    let screen = render(&s, &Theme::dark());
    assert!(find(&screen, "mine-29").is_some(), "the last entry in view");
    assert_eq!(press(&mut s, KeyCode::PageDown), entries - 1, "pages stop");
    assert_eq!(press(&mut s, KeyCode::PageUp), entries - 1 - page);
    assert_eq!(press(&mut s, KeyCode::Home), 0);
    assert_eq!(
        press(&mut s, KeyCode::Up),
        entries - 1,
        "a step wraps round"
    );
}

/// Issue 34: `.json` presets in the config dir were not offered by `p`.
#[test]
fn p_lists_json_presets_and_a_shadowed_one_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pasted.json"), r#"{"min_p": 0.3}"#).unwrap();
    std::fs::write(dir.path().join("mine.yaml"), "top_k: 7\n").unwrap();
    std::fs::write(dir.path().join("mine.json"), r#"{"top_k": 9}"#).unwrap();
    let mut app = app(running(dir.path()));
    app.state.size = Rect::new(0, 0, 200, 50);
    app.dispatch(dialog(DialogAction::OpenPresets));
    let screen = render(&app.state, &Theme::dark());
    assert!(find(&screen, "min_p: 0.3").is_some(), "the .json is listed");
    assert!(find(&screen, "top_k: 7").is_some());
    assert!(
        find(
            &screen,
            "(shadowed by mine.yaml, which the name loads) top_k: 9"
        )
        .is_some(),
        "the shadowed .json says so"
    );
    pick(&mut app.state, "pasted");
    app.dispatch(dialog(DialogAction::LoadPreset));
    assert_eq!(app.state.comparison.params.preset_name, "pasted");
    assert_eq!(app.state.comparison.params.params.min_p, 0.3);
}

#[test]
fn the_export_dialog_shows_the_vllm_snippet_and_its_notes() {
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = state_sized(w, h);
        s.comparison.models[0].spec = "org/tiny".into();
        update(&mut s, dialog(DialogAction::OpenExport));
        let buffer = render(&s, &Theme::dark());
        assert!(find(&buffer, "1 vLLM").is_some(), "{w}x{h}");
        assert!(find(&buffer, "4 llama.cpp").is_some(), "{w}x{h}");
        assert!(
            find(&buffer, "llm = LLM(model=\"org/tiny\")").is_some(),
            "{w}x{h}"
        );
        assert!(
            find(&buffer, "params = SamplingParams(").is_some(),
            "{w}x{h}"
        );
        update(&mut s, Action::Outcome(Outcome::Copied(Ok(()))));
        let buffer = render(&s, &Theme::dark());
        assert!(
            find(&buffer, "copied the vLLM snippet").is_some(),
            "{w}x{h}"
        );
        update(
            &mut s,
            dialog(DialogAction::ExportSelect(ExportFormat::Llamacpp)),
        );
        let buffer = render(&s, &Theme::dark());
        assert!(
            find(&buffer, "llama-completion -m org/tiny").is_some(),
            "{w}x{h}"
        );
    }
}

#[test]
fn the_save_prompt_shows_the_name_the_directory_and_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_store(dir.path());
    s.size = Rect::new(0, 0, 200, 50);
    update(&mut s, dialog(DialogAction::OpenSave));
    type_text(&mut s, "a/b");
    update(&mut s, dialog(DialogAction::SubmitName));
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "name: a/b").is_some());
    assert!(find(&buffer, &format!("into {}", dir.path().display())).is_some());
    assert!(find(&buffer, "cannot contain `/`").is_some());
    update(&mut s, Action::Outcome(Outcome::PresetExists("a".into())));
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "`a` exists: overwrite it? y/n").is_some());
    assert!(find(&buffer, "y overwrite").is_some());
}

#[test]
fn switching_themes_recolours_borders_and_tokens() {
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = state_sized(w, h);
        update(&mut s, Action::Engine(ModelId(0), loaded()));
        update(
            &mut s,
            Action::Engine(
                ModelId(0),
                Event::Started {
                    run_id: 1,
                    prompt_token_ids: vec![0],
                    seeds: vec![42],
                    prefill_ms: 1.0,
                    prefill_tokens: 1,
                },
            ),
        );
        update(&mut s, Action::Engine(ModelId(0), token(1, "Hello", 0.0)));
        let prompt = areas(Rect::new(0, 0, w, h)).prompt;
        let dark = render(&s, &Theme::dark());
        assert_eq!(dark[(prompt.x, prompt.y)].fg, Color::Cyan, "focused border");
        let (x, y) = find(&dark, "Hello").unwrap();
        assert_eq!(dark[(x, y)].bg, Color::Rgb(150, 30, 45));

        while s.themes.current().name != "viridis" {
            update(&mut s, Action::CycleTheme);
        }
        let viridis = render(&s, &s.themes.current().theme);
        assert_eq!(viridis[(prompt.x, prompt.y)].fg, Color::Rgb(94, 201, 98));
        assert_eq!(viridis[(x, y)].bg, Color::Rgb(68, 1, 84), "{w}x{h}");
        assert_eq!(viridis[(x, y)].fg, Color::White, "readable on dark purple");
        assert!(
            find(&viridis, "theme viridis").is_some(),
            "named in the status bar"
        );
    }
}

fn token(run_id: RunId, text: &str, prob: f32) -> Event {
    Event::Token {
        run_id,
        token: samplab::engine::TokenEvent {
            sample: 0,
            id: 5,
            text: text.into(),
            logprob: -1.0,
            prob,
            reported_prob: (-1.0f32).exp(),
            rank: 1,
            top: Vec::new(),
            entropy: None,
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

#[test]
fn the_star_marks_a_modified_preset_in_the_status_bar() {
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = state_sized(w, h);
        update(&mut s, Action::Engine(ModelId(0), loaded()));
        select(&mut s, "min_p");
        let status_row = h - 1;
        let status = |s: &State| {
            let buffer = render(s, &Theme::dark());
            let (_, y) = find(&buffer, "preset default").expect("preset in the status bar");
            assert_eq!(y, status_row);
            find(&buffer, "preset default*").is_some()
        };
        assert!(!status(&s));
        update(&mut s, nudge(1));
        assert!(status(&s), "{w}x{h}");
        update(&mut s, nudge(-1));
        assert!(!status(&s), "{w}x{h}: back at the preset's value");
    }
}

// ---- against real files, through the app ----

/// A clipboard the test can read after the app wrote to it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn app(state: State) -> App<NoEngine> {
    App::new(state, vec![NoEngine], KeyMap::default())
}

/// `s`, the offered name erased, `name` typed, Enter.
fn save_as(app: &mut App<NoEngine>, name: &str) {
    app.dispatch(dialog(DialogAction::OpenSave));
    while matches!(&app.state.overlay, Some(Overlay::Save(p)) if !p.buffer.text.is_empty()) {
        app.dispatch(Action::DeleteBack);
    }
    for c in name.chars() {
        app.dispatch(Action::InsertChar(c));
    }
    app.dispatch(dialog(DialogAction::SubmitName));
}

#[test]
fn saved_presets_hold_only_non_default_keys_and_load_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app(running(dir.path()));
    select(&mut app.state, "top_p");
    app.dispatch(nudge(-5));
    save_as(&mut app, "mine");
    assert_eq!(app.state.overlay, None);
    let text = std::fs::read_to_string(dir.path().join("mine.yaml")).unwrap();
    let seed = app.state.comparison.params.params.seed.unwrap();
    assert_eq!(
        text,
        format!("max_tokens: 128\nseed: {seed}\ntop_p: 0.95\n")
    );
    let store = PresetStore::new(dir.path());
    assert_eq!(
        store.find("mine").unwrap().unwrap().params,
        app.state.comparison.params.params
    );
    assert!(!app.state.comparison.params.modified());

    app.dispatch(dialog(DialogAction::OpenPresets));
    let Some(Overlay::Presets(picker)) = &app.state.overlay else {
        panic!("picker")
    };
    assert_eq!(
        picker.chosen().unwrap().name,
        "mine",
        "listed from disk, on the current"
    );
}

#[test]
fn overwriting_asks_first_and_no_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app(running(dir.path()));
    save_as(&mut app, "mine");
    let first = std::fs::read_to_string(dir.path().join("mine.yaml")).unwrap();
    select(&mut app.state, "temperature");
    app.dispatch(nudge(-4));
    save_as(&mut app, "mine");
    assert!(matches!(&app.state.overlay, Some(Overlay::Save(p)) if p.confirm.is_some()));
    app.dispatch(dialog(DialogAction::ConfirmOverwrite(false)));
    app.dispatch(Action::CloseOverlay);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("mine.yaml")).unwrap(),
        first
    );
    save_as(&mut app, "mine");
    app.dispatch(dialog(DialogAction::ConfirmOverwrite(true)));
    let second = std::fs::read_to_string(dir.path().join("mine.yaml")).unwrap();
    assert!(second.contains("temperature: 0.8"), "{second}");
    assert!(!app.state.comparison.params.modified());
}

#[test]
fn a_failed_save_says_why_and_keeps_the_prompt_open() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("presets");
    std::fs::write(&blocker, "a file where the directory should be").unwrap();
    let mut app = app(running(&blocker));
    save_as(&mut app, "mine");
    let Some(Overlay::Save(prompt)) = &app.state.overlay else {
        panic!("the prompt stays open")
    };
    let error = prompt.error.clone().unwrap();
    assert!(
        error.contains("cannot write preset") && error.contains("mine.yaml"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&blocker).unwrap(),
        "a file where the directory should be"
    );
}

#[test]
fn w_writes_json_that_parses_back_to_the_response_and_c_copies_with_osc_52() {
    let dir = tempfile::tempdir().unwrap();
    let clipboard = Shared::default();
    let mut app = app(running(dir.path())).with_clipboard(clipboard.clone());
    app.state.export.results_dir = dir.path().to_owned();
    let Event::Done { response, .. } = done(1, &[StopReason::Length, StopReason::Stop]) else {
        unreachable!()
    };
    app.dispatch(Action::Engine(
        ModelId(0),
        Event::Done {
            run_id: 1,
            response: response.clone(),
        },
    ));
    app.dispatch(dialog(DialogAction::OpenExport));
    app.dispatch(dialog(DialogAction::WriteResults));
    app.dispatch(dialog(DialogAction::SubmitName));
    let Some(Overlay::Export(dialog_state)) = &app.state.overlay else {
        panic!("export dialog")
    };
    let Some(Note::Done(note)) = &dialog_state.note else {
        panic!("{:?}", dialog_state.note)
    };
    let path = PathBuf::from(note.strip_prefix("wrote ").unwrap());
    assert_eq!(path.parent(), Some(dir.path()));
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("samplab-1-") && name.ends_with(".json"),
        "{name}"
    );
    let back: SampleResponse =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(back, *response);

    app.dispatch(dialog(DialogAction::CopyExport));
    let written = String::from_utf8(clipboard.0.lock().unwrap().clone()).unwrap();
    let snippet = to_vllm(
        &app.state.comparison.params.params,
        &ExportContext::raw("Once", ""),
    );
    assert_eq!(written, osc52(&snippet));
}

#[test]
fn s_switches_w_to_twinkles_shape_and_the_choice_outlives_the_dialog() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app(running(dir.path()));
    app.state.export.results_dir = dir.path().to_owned();
    app.dispatch(Action::Engine(
        ModelId(0),
        done(1, &[StopReason::Length, StopReason::Abort]),
    ));
    app.dispatch(dialog(DialogAction::OpenExport));
    let shows =
        |app: &App<NoEngine>, text| find(&render(&app.state, &Theme::dark()), text).is_some();
    assert!(shows(
        &app,
        "results are written in samplab's JSON shape (s switches)"
    ));
    app.dispatch(dialog(DialogAction::CycleResultsShape));
    assert!(shows(&app, "results are written in twinkle's JSON shape"));
    app.dispatch(Action::CloseOverlay);
    app.dispatch(dialog(DialogAction::OpenExport));
    app.dispatch(dialog(DialogAction::WriteResults));
    app.dispatch(dialog(DialogAction::SubmitName));
    let Some(Note::Done(note)) = &export(&app.state).note else {
        panic!("{:?}", export(&app.state).note)
    };
    let written: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(note.strip_prefix("wrote ").unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        written["trajectories"][0]["messages"][0],
        serde_json::json!({"role": "user", "content": "Once"})
    );
    assert_eq!(
        written["stop_reason"],
        serde_json::json!(["length", "length"])
    );
    app.dispatch(dialog(DialogAction::CycleResultsShape));
    assert_eq!(
        app.state.export.shape,
        ResponseShape::Samplab,
        "cycles back"
    );
    assert_eq!(
        export(&app.state).note,
        None,
        "the note spoke of the other shape"
    );
}

/// Issue 34: a path in a missing directory was refused naming `.samplab-XXXX.tmp`, a file the
/// user never typed.
#[test]
fn a_results_path_in_a_missing_directory_names_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app(running(dir.path()));
    app.dispatch(Action::Engine(ModelId(0), done(1, &[StopReason::Length])));
    app.dispatch(dialog(DialogAction::OpenExport));
    app.dispatch(dialog(DialogAction::WriteResults));
    while !prompt(&app.state).buffer.text.is_empty() {
        app.dispatch(Action::DeleteBack);
    }
    let missing = dir.path().join("no/such");
    for c in missing.join("out.json").display().to_string().chars() {
        app.dispatch(Action::InsertChar(c));
    }
    app.dispatch(dialog(DialogAction::SubmitName));
    let error = prompt(&app.state)
        .error
        .clone()
        .expect("the prompt says why");
    assert_eq!(
        error,
        format!(
            "cannot write the results: the directory {} does not exist",
            missing.display()
        )
    );
    let screen = render(&app.state, &Theme::dark());
    assert!(find(&screen, "exist").is_some(), "the error is shown");
    assert!(find(&screen, ".samplab-").is_none());
}

#[test]
fn results_files_never_overwrite_one_another() {
    let dir = tempfile::tempdir().unwrap();
    let Event::Done { response, .. } = done(3, &[StopReason::Length]) else {
        unreachable!()
    };
    let json = serde_json::to_string(&response).unwrap();
    let first = results_file::write(dir.path(), 3, 1_700_000_000, &json).unwrap();
    let second = results_file::write(dir.path(), 3, 1_700_000_000, &json).unwrap();
    assert_eq!(first, dir.path().join("samplab-3-1700000000.json"));
    assert_eq!(second, dir.path().join("samplab-3-1700000000-2.json"));
    assert_eq!(
        std::fs::read_to_string(&first).unwrap(),
        std::fs::read_to_string(&second).unwrap()
    );
}

#[test]
fn every_overlay_survives_tiny_terminals() {
    let dir = tempfile::tempdir().unwrap();
    for (w, h) in [(10, 5), (1, 1), (3, 2), (24, 6), (0, 0)] {
        let mut s = with_store(dir.path());
        s.size = Rect::new(0, 0, w, h);
        update(&mut s, Action::OpenHelp);
        render(&s, &Theme::dark());
        for open in [
            DialogAction::OpenPresets,
            DialogAction::OpenSave,
            DialogAction::OpenExport,
        ] {
            update(&mut s, dialog(open));
            update(&mut s, Action::InsertChar('x'));
            update(&mut s, dialog(DialogAction::ExportScroll(5)));
            render(&s, &Theme::plain());
        }
    }
}

#[test]
fn a_loaded_preset_sets_the_run_shape_it_names_and_starting_values_for_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    s.comparison.params.params.num_samples = 7;
    s.comparison.params.params.logprobs = Some(3);
    s.comparison
        .params
        .params
        .set_assignment("stop=[\"zzz\"]")
        .unwrap();
    update(&mut s, dialog(DialogAction::OpenPresets));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetsListed(Ok(vec![user(
            "two",
            Ok(SamplingParams::from_yaml("num_samples: 2\ntemperature: 0.5").unwrap()),
        )]))),
    );
    pick(&mut s, "greedy");
    update(&mut s, dialog(DialogAction::LoadPreset));
    assert_eq!(s.comparison.params.params.temperature, 0.0);
    assert_eq!(
        (
            s.comparison.params.params.num_samples,
            s.comparison.params.params.logprobs
        ),
        (START_SAMPLES, None),
        "greedy names neither: the playground's starting values, nothing carried over"
    );
    assert_eq!(s.comparison.params.params.stop, None);
    assert!(!s.comparison.params.modified());
    update(&mut s, dialog(DialogAction::OpenPresets));
    update(
        &mut s,
        Action::Outcome(Outcome::PresetsListed(Ok(vec![user(
            "two",
            Ok(SamplingParams::from_yaml("num_samples: 2\ntemperature: 0.5").unwrap()),
        )]))),
    );
    pick(&mut s, "two");
    update(&mut s, dialog(DialogAction::LoadPreset));
    assert_eq!(
        s.comparison.params.params.num_samples, 2,
        "named, so the preset's"
    );
}

/// The params the save prompt asks to write under `name`.
fn saved_params(s: &mut State, name: &str) -> SamplingParams {
    update(s, dialog(DialogAction::OpenSave));
    type_text(s, name);
    match &update(s, dialog(DialogAction::SubmitName))[..] {
        [Effect::SavePreset { params, .. }] => params.clone(),
        effects => panic!("{effects:?}"),
    }
}

#[test]
fn a_saved_preset_leaves_out_the_seed_the_session_drew() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = running(dir.path());
    let drawn = s.comparison.params.params.seed;
    s.presets.drawn_seed = drawn;
    let params = saved_params(&mut s, "mine");
    assert_eq!(params.seed, None);
    let saved = PresetStore::new(dir.path())
        .save("mine", &params, false)
        .unwrap();
    update(&mut s, Action::Outcome(Outcome::PresetSaved(Ok(saved))));
    assert_eq!(
        s.comparison.params.params.seed, drawn,
        "the samples keep their seed"
    );
    assert!(!s.comparison.params.modified());

    update(&mut s, Action::RollSeed);
    let rolled = s.comparison.params.params.seed;
    assert_ne!(rolled, drawn);
    assert_eq!(
        saved_params(&mut s, "rolled").seed,
        rolled,
        "a seed the user rolled is theirs"
    );
}

#[test]
fn t_stops_on_a_broken_user_theme_to_say_why_and_keeps_the_colours() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.yaml"), "border: blu").unwrap();
    let (catalog, _) = ThemeCatalog::load(Some("no-color"), Some(dir.path()), false).unwrap();
    let mut s = state_sized(80, 24);
    s.themes = catalog;
    update(&mut s, Action::CycleTheme);
    assert_eq!(s.themes.current().name, "no-color");
    let error = s.status.error.clone().expect("the broken theme is said");
    assert!(
        error.contains("broken.yaml: `border`") && error.contains("still on no-color"),
        "{error}"
    );
    update(&mut s, Action::CycleTheme);
    assert_eq!(s.themes.current().name, "dark");
    assert_eq!(
        s.status.error, None,
        "the broken theme's error goes with it"
    );
    assert_eq!(s.status.notice.as_deref(), Some("theme dark"));
}

#[test]
fn the_light_theme_paints_the_light_background_its_dark_text_assumes() {
    let mut s = state_sized(80, 24);
    // max_tokens selected: the temperature row's 1.00 is not on the selection's colour.
    s.comparison.params.selected = 0;
    let light = builtin_theme("light").unwrap();
    let buffer = render(&s, &light);
    let paper = light.base.bg.expect("the light theme names its background");
    let (x, y) = find(&buffer, "1.00").expect("a value in the params panel");
    let ink = buffer[(x, y)].fg;
    assert!(ink == Color::Black || Some(ink) == light.base.fg, "{ink:?}");
    assert_eq!(buffer[(x, y)].bg, paper, "dark text on the theme's paper");
    let samples = areas(Rect::new(0, 0, 80, 24)).columns;
    let inside = (samples.x + 30, samples.y + 5);
    assert_eq!(buffer[inside].bg, paper, "empty space too");
    let dark = render(&s, &Theme::dark());
    assert_eq!(
        dark[inside].bg,
        Color::Reset,
        "the dark theme keeps the terminal's"
    );
}
