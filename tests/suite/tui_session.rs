//! Sessions (issue 34, item 5): `S` saves the playground's whole state as one file and `O` (or
//! `--session`) opens it again, branches re-run; every broken or hostile file is refused with
//! what is wrong, and nothing changes.

use crate::common;
use crate::tui_branches::{cursor_to, play, run_of};

use common::tui::*;
use crossterm::event::KeyCode;
use samplab::engine::Request;
use samplab::model::text::chat_template::Message;
use samplab::params::SamplingParams;
use samplab::presets::Preset;
use samplab::tui::session;
use samplab::tui::{
    Action, BranchAction, DialogAction, Effect, Focus, ModelId, Outcome, Overlay, ParamsState,
    SetId, State, update,
};
use std::path::{Path, PathBuf};

/// A playground comparing two parameter sets on one model in chat mode, with a conversation
/// before the prompt, whose set A has run and made a branch from sample 1; set B edited since.
/// Returns it with the request that ran the branch.
fn worked_state(model: &str) -> (State, Request) {
    let mut s = state_sized(160, 45);
    s.prompt.buffer = samplab::tui::TextBuffer::new("and then?");
    s.prompt.history = vec![
        Message::new("system", "Be brief."),
        Message::new("user", "Tell a story."),
        Message::new("assistant", "Once there was a fox."),
    ];
    s.comparison.params.params.num_samples = 2;
    let greedy = SamplingParams::from_yaml("temperature: 0\nnum_samples: 2").unwrap();
    let b = ParamsState::new(Preset::built_in("greedy", greedy), 5);
    s.comparison.compare(&[model.to_owned()], Some(b));
    s.comparison.models[0].chat = true;
    let effects = update(
        &mut s,
        Action::Engine(ModelId(0), loaded_with_template(true)),
    );
    let run_a = effects
        .iter()
        .find_map(|e| match e {
            Effect::Run(_, r) if r.lane == 0 => Some(r.clone()),
            _ => None,
        })
        .expect("set A runs");
    play(&mut s, &run_a, 3);
    while s.focus != Focus::Columns {
        update(&mut s, Action::FocusNext);
    }
    cursor_to(&mut s, 1, 1);
    update(&mut s, Action::Branch(BranchAction::Pick(1)));
    let branched = run_of(&update(&mut s, Action::Branch(BranchAction::Take)));
    assert_eq!(branched.branches.len(), 1, "a branch runs");
    update(&mut s, Action::SwitchParamSet);
    update(
        &mut s,
        Action::NudgeParam {
            steps: 2,
            coarse: false,
        },
    );
    (s, branched)
}

/// Types `path` over what the open path dialog offers and presses Enter.
fn submit_path(s: &mut State, path: &Path) -> Vec<Effect> {
    update(s, Action::ClearText);
    update(s, Action::Paste(path.display().to_string()));
    update(s, Action::Dialog(DialogAction::SubmitName))
}

/// `S` with the path: the file's text that the save effect writes.
fn save_text(s: &mut State, path: &Path) -> String {
    press_key(s, KeyCode::Char('S'));
    let effects = submit_path(s, path);
    match &effects[..] {
        [
            Effect::SaveSession {
                path: to,
                text,
                overwrite: false,
            },
        ] => {
            assert_eq!(to, path);
            text.clone()
        }
        other => panic!("one save: {other:?}"),
    }
}

/// `O` with the path in a playground out of the prompt box, and the file as the loop reads it.
fn open(s: &mut State, path: &Path) -> Vec<Effect> {
    while s.focus == Focus::Prompt {
        update(s, Action::FocusNext);
    }
    press_key(s, KeyCode::Char('O'));
    let effects = submit_path(s, path);
    assert_eq!(effects, [Effect::OpenSession(path.to_owned())]);
    let read = session::read(path).map(Box::new).map_err(|e| e.to_string());
    update(s, Action::Outcome(Outcome::SessionOpened(read)))
}

fn written(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_saved_session_opens_into_a_fresh_playground_as_it_was_and_reruns_its_branch() {
    let dir = tempfile::tempdir().unwrap();
    let model = written(dir.path(), "m.gguf", "").display().to_string();
    let (mut s, branched) = worked_state(&model);
    let path = dir.path().join("story.session.yaml");
    let text = save_text(&mut s, &path);
    std::fs::write(&path, &text).unwrap();
    update(
        &mut s,
        Action::Outcome(Outcome::SessionSaved(Ok(path.clone()))),
    );
    assert_eq!(s.overlay, None, "saved: the dialog closes");

    let mut fresh = state_sized(160, 45);
    let effects = open(&mut fresh, &path);
    assert!(effects.contains(&Effect::RemoveEngine(ModelId(0))));
    let added = ModelId(1);
    assert!(effects.contains(&Effect::AddEngine {
        id: added,
        spec: model,
        backend: None,
    }));
    assert_eq!(fresh.overlay, None);

    assert_eq!(fresh.prompt.text(), "and then?");
    assert_eq!(fresh.prompt.history, s.prompt.history);
    let (was, now) = (&s.comparison, &fresh.comparison);
    assert_eq!(now.editing_set, SetId::B);
    for set in [SetId::A, SetId::B] {
        let (was, now) = (was.set_params(set), now.set_params(set));
        assert_eq!(now.params, was.params, "set {set:?}");
        assert_eq!(now.baseline, was.baseline, "set {set:?}'s preset");
        assert_eq!(now.preset_name, was.preset_name);
        assert_eq!(now.modified(), was.modified());
    }
    let specs = |c: &samplab::tui::Comparison| -> Vec<(String, bool)> {
        c.models.iter().map(|m| (m.spec.clone(), m.chat)).collect()
    };
    assert_eq!(specs(now), specs(was));
    assert_eq!(now.sides.len(), 2);
    assert_eq!(now.sides[0].tree, was.sides[0].tree);
    assert_eq!(
        now.sides[0].follow,
        Some((1, Some(1))),
        "the cursor's token"
    );
    assert_eq!(fresh.focus, Focus::Columns);

    // Once the model loads, the branch runs again with the very tokens it was made of.
    let effects = update(
        &mut fresh,
        Action::Engine(added, loaded_with_template(true)),
    );
    let rerun = effects
        .iter()
        .find_map(|e| match e {
            Effect::Run(model, r) if *model == added && r.lane == 0 => Some(r.clone()),
            _ => None,
        })
        .expect("set A runs");
    assert_eq!(rerun.branches, branched.branches);
    assert_eq!(
        rerun.prompt, branched.prompt,
        "the conversation in chat mode"
    );

    // Saved again, it is the same file.
    let again = dir.path().join("again.yaml");
    assert_eq!(save_text(&mut fresh, &again), text);
}

#[test]
fn the_path_dialogs_remember_the_last_path_and_ask_before_overwriting() {
    let (mut s, _) = worked_state("/models/fake");
    let path = PathBuf::from("/tmp/a.yaml");
    save_text(&mut s, &path);
    update(
        &mut s,
        Action::Outcome(Outcome::SessionExists(path.clone())),
    );
    let effects = update(&mut s, Action::Dialog(DialogAction::ConfirmOverwrite(true)));
    assert!(
        matches!(&effects[..], [Effect::SaveSession { overwrite: true, path: p, .. }] if *p == path),
        "{effects:?}"
    );
    update(&mut s, Action::CloseOverlay);
    press_key(&mut s, KeyCode::Char('O'));
    let Some(Overlay::Save(prompt)) = &s.overlay else {
        panic!("the open dialog");
    };
    assert_eq!(prompt.name(), "/tmp/a.yaml", "offered again");
    let screen = render(&s, &samplab::tui::Theme::plain());
    assert!(find(&screen, "open session").is_some());
    assert!(find(&screen, "Enter open").is_some(), "its own hint");
}

/// A session file as `S` writes it, for the tests to break.
fn good_text() -> String {
    let (mut s, _) = worked_state("/models/fake");
    save_text(&mut s, Path::new("/x.yaml"))
}

fn refusal(text: &str) -> String {
    session::parse(text, "s.yaml").unwrap_err().to_string()
}

#[test]
fn a_file_cut_short_anywhere_is_refused() {
    let text = good_text();
    assert!(session::parse(&text, "s.yaml").is_ok());
    let mut said_cut = false;
    for (at, _) in text
        .match_indices('\n')
        .filter(|&(at, _)| at + 1 < text.len())
    {
        for cut in [at, at + 1, at + 3] {
            let Some(part) = text.get(..cut) else {
                continue;
            };
            let error = session::parse(part, "s.yaml")
                .err()
                .unwrap_or_else(|| panic!("cut at {cut} reads:\n{part}"))
                .to_string();
            assert!(error.contains("s.yaml"), "{error}");
            said_cut |= error.contains("cut short");
        }
    }
    assert!(said_cut, "a missing key says the file may be cut short");
}

#[test]
fn versions_unknown_keys_and_hostile_yaml_are_refused_by_name() {
    let text = good_text();
    let newer = text.replace("version: 1", "version: 2");
    assert!(
        refusal(&newer).contains("is a version 2 session"),
        "{}",
        refusal(&newer)
    );
    let none = text.replace("version: 1\n", "");
    assert!(refusal(&none).contains("has no `version`"));
    let unknown = text.replace("editing:", "colour: red\nediting:");
    assert!(
        refusal(&unknown).contains("unknown field `colour`"),
        "{}",
        refusal(&unknown)
    );
    let bad_param = text.replace("prompt: and then?", "prompt: and then?\nx: 1");
    assert!(refusal(&bad_param).contains("`x`"));
    let huge = format!("{text}#{}\n", "x".repeat(300 << 10));
    assert!(refusal(&huge).contains("at most"), "{}", refusal(&huge));
    let deep = format!(
        "version: 1\nprompt: {}{}\n",
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(
        refusal(&deep).contains("nested deeper"),
        "{}",
        refusal(&deep)
    );
    let tagged = text.replace("prompt: and then?", "prompt: !!binary aGVsbG8=");
    assert!(refusal(&tagged).contains("!!binary"));
    let out_of_range = text.replacen("temperature: 0.0", "temperature: -3", 1);
    assert_ne!(out_of_range, text);
    assert!(
        refusal(&out_of_range).contains("temperature"),
        "{}",
        refusal(&out_of_range)
    );
}

#[test]
fn branches_that_do_not_fit_their_side_are_refused_by_name() {
    let text = good_text();
    assert!(text.contains("parent: sample 1"), "{text}");
    let cases = [
        (
            "parent: sample 1",
            "parent: sample 7",
            "follows sample 7, but its set runs 2",
        ),
        (
            "parent: sample 1",
            "parent: branch 0",
            "follows branch 0 of its side, which has 0",
        ),
        ("parent: sample 1", "parent: uncle", "`uncle` is no parent"),
        (
            "  at: 1\n",
            "  at: 9\n",
            "parts at token 9, past its 2 tokens",
        ),
        (
            "- model: 0\n",
            "- model: 3\n",
            "on model 3 with set A, which the session does not have",
        ),
    ];
    for (from, to, said) in cases {
        let broken = text.replacen(from, to, 1);
        assert_ne!(broken, text, "{from}");
        let error = refusal(&broken);
        assert!(error.contains(said), "{to}: {error}");
    }
}

#[test]
fn a_model_that_is_gone_is_refused_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), "s.yaml", &good_text());
    let error = session::read(&path).unwrap_err().to_string();
    assert!(
        error.contains("names model `/models/fake`, which cannot be loaded")
            && error.contains("does not exist"),
        "{error}"
    );

    let (mut s, _) = worked_state("/models/fake");
    let before = s.clone();
    let effects = open(&mut s, &path);
    assert_eq!(effects, []);
    let Some(Overlay::Save(prompt)) = &s.overlay else {
        panic!("the dialog stays open");
    };
    assert!(
        prompt
            .error
            .as_deref()
            .is_some_and(|e| e.contains("/models/fake"))
    );
    update(&mut s, Action::CloseOverlay);
    assert_eq!(s.comparison, before.comparison, "nothing restored");
    assert_eq!(s.prompt.history, before.prompt.history);
}

#[test]
fn a_branch_with_a_token_beyond_the_vocabulary_is_dropped_with_its_reason_when_the_model_loads() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    std::fs::write(&model, "").unwrap();
    let text = good_text().replace("/models/fake", &model.display().to_string());
    let path = written(dir.path(), "s.yaml", &text);
    let broken = text.replacen("  - 112\n", "  - 99999\n", 1);
    assert_ne!(broken, text, "{text}");
    std::fs::write(&path, broken).unwrap();

    let mut s = state_sized(160, 45);
    open(&mut s, &path);
    assert_eq!(
        s.comparison.sides[0].tree.nodes.len(),
        1,
        "restored as saved"
    );
    let effects = update(
        &mut s,
        Action::Engine(ModelId(1), loaded_with_template(true)),
    );
    assert!(s.comparison.sides[0].tree.nodes.is_empty());
    let error = s.status.error.clone().unwrap_or_default();
    assert!(
        error.contains("branch 0 takes token 99999") && error.contains("1024 tokens"),
        "{error}"
    );
    let runs: Vec<usize> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(_, r) => Some(r.branches.len()),
            _ => None,
        })
        .collect();
    assert_eq!(runs, [0, 0], "both sides run, without the branch");
}

#[test]
fn the_session_flag_refuses_a_broken_file_before_the_terminal_and_reads_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let newer = written(dir.path(), "new.yaml", "version: 9\nmodels: []\n");
    let output = common::samplab(&["--session", newer.to_str().unwrap()]);
    assert!(!output.status.success());
    let said = common::stderr(&output);
    assert!(said.contains("is a version 9 session"), "{said}");

    let gone = written(dir.path(), "gone.yaml", &good_text());
    let said = common::stderr(&common::samplab(&["--session", gone.to_str().unwrap()]));
    assert!(said.contains("/models/fake"), "{said}");

    let text = good_text().replace("/models/fake", samplab::model::source::embedded::NAME);
    let good = written(dir.path(), "good.yaml", &text);
    let output = common::samplab(&["--session", good.to_str().unwrap()]);
    let said = common::stderr(&output);
    assert!(
        said.contains("needs a terminal"),
        "read, then the terminal: {said}"
    );

    let both = common::samplab(&["--session", "x.yaml", "--prompt", "hi"]);
    assert!(common::stderr(&both).contains("cannot be used with"));
}

#[test]
fn the_keys_are_in_help() {
    let rows = samplab::tui::KeyMap::default().describe(samplab::tui::Mode::Navigate);
    assert!(rows.contains(&("S".to_owned(), "save session")), "{rows:?}");
    assert!(rows.contains(&("O".to_owned(), "open session")));
}

/// The documentation's example is a session this samplab reads, as the documentation says of it.
#[test]
fn the_documented_example_reads() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/reproducibility.md"
    ))
    .expect("docs/reproducibility.md");
    let section = &doc[doc.find("## Sessions").expect("the Sessions section")..];
    let start = section.find("```yaml\n").expect("an example") + "```yaml\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let read = session::parse(example, "docs/reproducibility.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read.models[0].spec, "/models/stories260K");
    assert_eq!(read.sets[0].params.0.temperature, 0.9);
    assert_eq!(read.branches[0].path, [412, 96, 301]);
    assert_eq!(read.focus, Focus::Columns);
}

/// A model that ran on llama.cpp is saved with its backend and, opened again, loads on it;
/// sessions saved before there were two backends leave the choice to `--backend`.
#[test]
fn a_saved_session_keeps_each_models_backend() {
    let dir = tempfile::tempdir().unwrap();
    let model = written(dir.path(), "m.gguf", "").display().to_string();
    let mut s = state_sized(160, 45);
    s.comparison.compare(std::slice::from_ref(&model), None);
    let mut loaded = loaded_with_template(false);
    if let samplab::engine::Event::Loaded { backend, .. } = &mut loaded {
        *backend = Some(samplab::engine::BackendKind::LlamaCpp);
    }
    update(&mut s, Action::Engine(ModelId(0), loaded));
    while s.focus == Focus::Prompt {
        update(&mut s, Action::FocusNext);
    }
    let path = dir.path().join("s.yaml");
    let text = save_text(&mut s, &path);
    assert!(text.contains("backend: llama.cpp"), "{text}");
    std::fs::write(&path, &text).unwrap();
    let mut fresh = state_sized(160, 45);
    let effects = open(&mut fresh, &path);
    assert!(
        effects.contains(&Effect::AddEngine {
            id: ModelId(1),
            spec: model.clone(),
            backend: Some(samplab::engine::BackendKind::LlamaCpp),
        }),
        "{effects:?}"
    );
    let older = written(
        dir.path(),
        "old.yaml",
        &text.replace("  backend: llama.cpp\n", ""),
    );
    let effects = open(&mut state_sized(160, 45), &older);
    assert!(
        effects.contains(&Effect::AddEngine {
            id: ModelId(1),
            spec: model,
            backend: None,
        }),
        "{effects:?}"
    );
}
