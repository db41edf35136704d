//! One draw of the whole screen from `&State`; nothing here changes state.

use crate::tui::action::{Action, DialogAction};
use crate::tui::focus::Focus;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::overlays::{
    conversation, export_dialog, help, messages, model_picker, preset_picker, sample_editor,
    save_prompt, stats,
};
use crate::tui::overlays::{sweep_dialog, sweep_grid};
use crate::tui::state::{Overlay, State};
use crate::tui::theme::Theme;
use crate::tui::update::{chat_loop, chat_mode, dialogs, sweep};
use crate::tui::widgets::layout::areas;
use crate::tui::widgets::{columns, inspector, params, prompt, status};
use ratatui::Frame;
use ratatui::widgets::Block;

pub fn draw(frame: &mut Frame, state: &State, theme: &Theme, keymap: &KeyMap) {
    // A theme that names a background (light) paints it everywhere, under every panel.
    frame.render_widget(Block::new().style(theme.base), frame.area());
    let a = areas(frame.area());
    let focus = |f| state.focus == f && state.overlay.is_none();
    let shown = prompt::Shown {
        modes: &chat_mode::modes(state),
        specials: &state.comparison.special_tokens(),
        seen: state.seen_prompt(),
        scores: state.prompt_scores(),
        focused: focus(Focus::Prompt),
    };
    prompt::render(frame, a.prompt, &state.prompt, &shown, theme);
    if state.focus == Focus::Columns {
        let logprobs = state.comparison.params.params.logprobs;
        let served = state
            .columns
            .cursor_side()
            .and_then(|side| state.comparison.side(side))
            .and_then(|side| state.comparison.slot(side.model))
            .and_then(|slot| slot.served.as_ref())
            .map(|(server, _)| server.as_str());
        let watch = state
            .columns
            .cursor_side()
            .and_then(|side| state.comparison.side(side))
            .and_then(|side| side.run_params.as_ref())
            .and_then(|params| params.watch.as_ref())
            .map_or(&[][..], |watch| watch.0.as_slice());
        let context = inspector::Context {
            logprobs,
            served,
            watch,
        };
        inspector::render(frame, a.params, &state.columns, &context, theme);
    } else {
        let compared = state
            .comparison
            .other_set
            .as_ref()
            .map(|other| params::Compared {
                letter: state.comparison.editing_set.letter(),
                other: &other.params,
            });
        params::render(
            frame,
            a.params,
            &state.comparison.params,
            compared,
            &state.comparison.served(),
            focus(Focus::Params),
            theme,
        );
    }
    let modes = state.modes();
    let empty = match state.failure() {
        Some(why) => {
            // The keys outside text fields, where this is read.
            let key = |action| {
                keymap
                    .key_for(&[Mode::Navigate], &action)
                    .unwrap_or_default()
            };
            columns::Empty::Failed(format!(
                "{why}. {} picks another model, {} quits.",
                key(Action::Dialog(DialogAction::OpenModels)),
                key(Action::Quit)
            ))
        }
        None if state.awaits_prompt() => columns::Empty::AwaitsPrompt,
        None => columns::Empty::Waiting,
    };
    let sides = columns::Sides {
        titles: state.comparison.side_titles(),
        marks: state.comparison.side_marks(),
        empty,
    };
    columns::render(
        frame,
        a.columns,
        &state.columns,
        sides,
        focus(Focus::Columns),
        theme,
    );
    let mut wanted = vec![(Action::Quit, "quit"), (Action::OpenHelp, "help")];
    if focus(Focus::Columns) {
        // The cursor keys take over the pane: say how to get out.
        wanted.insert(0, (Action::FocusPrev, "leave"));
    }
    let hints: Vec<(String, &str)> = wanted
        .iter()
        .filter_map(|(action, name)| keymap.key_for(&modes, action).map(|k| (k, *name)))
        .collect();
    let log_key = keymap.key_for(&modes, &Action::OpenMessages);
    let legend = state.columns.heat_name();
    let bar = status::Bar {
        status: &state.status,
        models: &state.comparison.models,
        params: &state.comparison.params,
        hints: &hints,
        log_key,
        legend,
    };
    status::render(frame, a.status, bar, theme);
    let area = frame.area();
    match &state.overlay {
        None => {}
        Some(Overlay::Help(page)) => help::render(frame, area, *page, keymap, theme),
        Some(Overlay::Messages) => messages::render(frame, area, &state.status.log, keymap, theme),
        Some(Overlay::Stats) => {
            let titles = state.comparison.side_titles();
            let runs: Vec<stats::SideRun> = state
                .comparison
                .sides
                .iter()
                .enumerate()
                .map(|(i, side)| stats::SideRun {
                    label: titles.get(i).map(|t| t.label.clone()).unwrap_or_default(),
                    response: side.response.as_deref(),
                })
                .collect();
            stats::render(frame, area, &runs, keymap, theme);
        }
        Some(Overlay::Presets(picker)) => preset_picker::render(frame, area, picker, keymap, theme),
        Some(Overlay::Save(prompt)) => {
            let preset_dir = state
                .presets
                .store
                .as_ref()
                .map(|store| store.dir.as_path());
            save_prompt::render(frame, area, prompt, preset_dir, keymap, theme);
        }
        Some(Overlay::Export(dialog)) => {
            let snippet = dialogs::snippet_of(state, dialog);
            let shape = state.export.shape;
            export_dialog::render(frame, area, dialog, &snippet, shape, keymap, theme);
        }
        Some(Overlay::Models(picker)) => {
            model_picker::render(frame, area, &state.comparison.models, picker, keymap, theme);
        }
        Some(Overlay::EditSample(editor)) => {
            sample_editor::render(frame, area, editor, keymap, theme)
        }
        Some(Overlay::SweepInput(dialog)) => {
            let base = sweep::describe_base(state);
            sweep_dialog::render(frame, area, dialog, &base, keymap, theme);
        }
        Some(Overlay::Sweep) => {
            if let Some(sweep) = &state.sweep {
                sweep_grid::render(frame, area, sweep, keymap, theme);
            }
        }
        Some(Overlay::Conversation(dialog)) => {
            let shown = conversation::Shown {
                prompt: &state.prompt,
                chat: state.comparison.models.iter().any(|m| m.chat),
                reply: chat_loop::candidate(state),
            };
            conversation::render(frame, area, &shown, dialog, keymap, theme);
        }
    }
}
