//! The pure heart of the UI: `update(&mut State, Action) -> Vec<Effect>`. No clock, no terminal,
//! no engine: the loop performs the effects.

pub mod branches;
pub mod chat_loop;
pub mod chat_mode;
pub mod conversation;
pub mod dialogs;
pub mod edit_sample;
pub mod model_picker;
pub mod run_shape;
pub mod session;
pub mod sweep;

use crate::engine::{Event, Request, RunId, ScoreRequest, TraceRequest};
use crate::model::Activations;
use crate::params::{Field, LogprobsMode};
use crate::presets::{MODEL_PRESET, Preset};
use crate::response::StopReason;
use crate::sampling::sample_seed;
use crate::tui::action::{Action, Effect, ListMove};
use crate::tui::branch_tree::keep_for_run;
use crate::tui::comparison::{ModelId, SideId};
use crate::tui::focus::Focus;
use crate::tui::input::keymap::Mode;
use crate::tui::input::mouse::{self, Target};
use crate::tui::model_slot::ModelStatus;
use crate::tui::overlays::help::HelpPage;
use crate::tui::overlays::preset_picker;
use crate::tui::state::{Overlay, State};
use crate::tui::widgets::chain_view::TokenTrace;
use crate::tui::widgets::columns::Columns;
use crate::tui::widgets::layout::{Grid, areas};
use crate::tui::widgets::params::{ParamsState, page_rows};
use crate::tui::widgets::prompt::{PromptView, SeenPrompt};
use crate::tui::widgets::text::TextBuffer;
use run_shape::load_over;

pub fn update(state: &mut State, action: Action) -> Vec<Effect> {
    if !matches!(
        action,
        Action::Engine(..) | Action::DebounceElapsed | Action::Resize { .. } | Action::Outcome(_)
    ) {
        // A notice lasts until the user does the next thing.
        state.status.notice = None;
    }
    match action {
        Action::Quit => {
            let mut effects = cancel_all(state);
            effects.push(Effect::Quit);
            effects
        }
        Action::SwitchParamSet => {
            if let Some(other) = &mut state.comparison.other_set {
                state.comparison.params.editor = None;
                std::mem::swap(&mut state.comparison.params, other);
                state.comparison.editing_set = state.comparison.editing_set.other();
            } else {
                state.status.notify(
                    "one parameter set: start with two --preset to compare sets (A/B)".to_owned(),
                );
            }
            Vec::new()
        }
        Action::FocusNext | Action::FocusPrev => cycle_focus(state, action == Action::FocusNext),
        Action::OpenHelp => {
            // Help opens where the keys of the pane it was asked from are.
            let from = state.modes().first().copied().unwrap_or(Mode::Global);
            state.overlay = Some(Overlay::Help(HelpPage::new(from)));
            Vec::new()
        }
        Action::TurnHelpPage(pages) => {
            if let Some(Overlay::Help(page)) = &mut state.overlay {
                page.turned = page.turned.saturating_add(pages);
            }
            Vec::new()
        }
        Action::OpenMessages => {
            state.overlay = Some(Overlay::Messages);
            Vec::new()
        }
        Action::OpenStats => {
            state.overlay = Some(Overlay::Stats);
            Vec::new()
        }
        Action::CloseOverlay => {
            state.overlay = None;
            Vec::new()
        }
        Action::Rerun => rerun(state),
        Action::Select(by) => {
            select(state, by);
            Vec::new()
        }
        Action::NudgeParam { steps, coarse } => {
            change_params(state, |params| params.nudge(steps, coarse))
        }
        Action::ResetParam => change_params(state, ParamsState::reset),
        Action::TurnOffParam => change_params(state, ParamsState::turn_off),
        Action::RollSeed => {
            let changed = roll_seeds(state);
            params_changed(state, changed)
        }
        Action::ToggleChat => chat_mode::toggle(state),
        Action::AcceptReply => chat_loop::accept(state),
        Action::SwipeReply(delta) => chat_loop::swipe(state, delta),
        Action::Regenerate => chat_loop::regenerate(state),
        Action::CyclePromptView => {
            state.prompt.view = state.prompt.view.next();
            Vec::new()
        }
        Action::EditParam => change_params(state, ParamsState::edit),
        Action::CommitEdit => edit_sample::commit(state)
            .or_else(|| conversation::commit(state))
            .unwrap_or_else(|| change_params(state, ParamsState::commit)),
        Action::CancelEdit => {
            if !edit_sample::cancel(state) && !conversation::cancel(state) {
                state.comparison.params.editor = None;
            }
            Vec::new()
        }
        Action::InsertChar(c) => edit_text(state, |b| {
            b.insert(c.encode_utf8(&mut [0; 4]));
            true
        }),
        Action::InsertNewline if one_line_field(state) => Vec::new(),
        Action::InsertNewline => edit_text(state, |b| {
            b.insert("\n");
            true
        }),
        Action::Paste(text) => {
            // Windows and old-Mac line ends become plain newlines, and in a one-line field
            // spaces: newlines would only make a value invalid.
            let text = text.replace("\r\n", "\n").replace('\r', "\n");
            let text = if one_line_field(state) {
                text.replace('\n', " ")
            } else {
                text
            };
            edit_text(state, |b| {
                b.insert(&text);
                true
            })
        }
        Action::DeleteBack => edit_text(state, TextBuffer::delete_back),
        Action::DeleteForward => edit_text(state, TextBuffer::delete_forward),
        Action::ClearText => edit_text(state, TextBuffer::clear),
        Action::Undo if state.focus == Focus::Prompt && state.overlay.is_none() => {
            state.prompt.view = PromptView::Typed;
            let undone = state.prompt.undo();
            params_changed(state, undone)
        }
        Action::Undo => Vec::new(),
        Action::CursorLeft | Action::CursorRight if inspecting_prompt_tokens(state) => {
            let last = state
                .seen_prompt()
                .map_or(0, |seen| seen.tokens.len().saturating_sub(1));
            let at = state.prompt.token_cursor.min(last);
            state.prompt.token_cursor = match action {
                Action::CursorLeft => at.saturating_sub(1),
                _ => (at + 1).min(last),
            };
            Vec::new()
        }
        Action::CursorLeft => edit_text(state, |b| {
            b.left();
            false
        }),
        Action::CursorRight => edit_text(state, |b| {
            b.right();
            false
        }),
        Action::CursorUp => edit_text(state, |b| {
            b.vertical(true);
            false
        }),
        Action::CursorDown => edit_text(state, |b| {
            b.vertical(false);
            false
        }),
        Action::CursorHome => edit_text(state, |b| {
            b.home();
            false
        }),
        Action::CursorEnd => edit_text(state, |b| {
            b.end();
            false
        }),
        Action::Resize { width, height } => {
            state.size.width = width;
            state.size.height = height;
            navigate(state, Columns::rewrap)
        }
        Action::StepToken(delta) => navigate(state, |c, g| c.step_token(delta as isize, g)),
        Action::StepTokenRow(delta) => navigate(state, |c, g| c.step_row(delta as isize, g)),
        Action::FirstToken => navigate(state, Columns::first_token),
        Action::LastToken => navigate(state, Columns::last_token),
        Action::PageColumn(pages) => navigate(state, |c, g| c.page(pages as isize, g)),
        Action::ToggleWhitespace => navigate(state, Columns::toggle_whitespace),
        Action::ToggleReportedHeat => {
            state.columns.heat = state.columns.heat.toggled();
            Vec::new()
        }
        Action::ToggleOtherHeat => {
            state.columns.heat = state.columns.heat.toggled_other();
            Vec::new()
        }
        Action::StepColumn(delta) => {
            let grid = state.grid();
            if state.columns.step_column(delta as isize, &grid) {
                state.columns.pick = None;
                trace_cursor(state)
            } else {
                cycle_focus(state, delta > 0)
            }
        }
        Action::Click { x, y } => click(state, x, y),
        Action::Wheel { x, y, lines } => {
            wheel(state, x, y, lines);
            Vec::new()
        }
        Action::DebounceElapsed => start_pending(state),
        Action::Engine(model, event) => engine_event(state, model, event),
        Action::CycleTheme => dialogs::cycle_theme(state),
        Action::Dialog(action) => dialogs::update(state, action),
        Action::Branch(action) => branches::update(state, action),
        Action::Outcome(outcome) => dialogs::outcome(state, outcome),
        Action::Sweep(action) => sweep::update(state, action),
    }
}

/// A new seed for the set being edited and the same one for the other set, so that their
/// columns stay comparable sample by sample; whether it changed.
fn roll_seeds(state: &mut State) -> bool {
    let changed = state.comparison.params.roll_seed();
    let seed = state.comparison.params.params.seed;
    if let (true, Some(other), Some(seed)) = (changed, &mut state.comparison.other_set, seed) {
        other.set_seed(Some(seed));
        state
            .status
            .notify(format!("rolled seed {seed} for both sets, A and B"));
    }
    changed
}

/// Runs every side again now, skipping the debounce.
fn rerun(state: &mut State) -> Vec<Effect> {
    mark_all_pending(state);
    start_pending(state)
}

/// Moves the selection of the open picker's or dialog's list, else the parameters'.
fn select(state: &mut State, by: ListMove) {
    match &mut state.overlay {
        Some(Overlay::Presets(picker)) => {
            let page = preset_picker::page_rows(state.size, picker);
            picker.move_by(by, page);
        }
        Some(Overlay::Models(_)) => model_picker::move_by(state, by),
        Some(Overlay::Conversation(_)) => conversation::move_by(state, by),
        Some(_) => {}
        None => {
            let page = page_rows(
                &state.comparison.params,
                &state.comparison.served(),
                areas(state.size).params,
            );
            let params = &mut state.comparison.params;
            // Stops at the first and last rows: wrapping round put a held ↑ on num_samples.
            params.select_row(by.apply(params.selected, Field::ALL.len(), page, false));
        }
    }
}

/// Moves the token cursor or the columns' view; nothing to re-run.
pub(super) fn navigate(state: &mut State, step: impl FnOnce(&mut Columns, &Grid)) -> Vec<Effect> {
    let grid = state.grid();
    let before = state.columns.cursor_token();
    step(&mut state.columns, &grid);
    if state.columns.cursor_token() != before {
        state.columns.pick = None;
    }
    trace_cursor(state)
}

/// [`trace_cursor_token`] as effects.
pub(super) fn trace_cursor(state: &mut State) -> Vec<Effect> {
    trace_cursor_token(state).into_iter().collect()
}

/// Asks the engine to trace the token under the cursor through the chain, once its sample has
/// ended (a running sample's logits are still in use) and unless it is traced already.
fn trace_cursor_token(state: &mut State) -> Option<Effect> {
    if state.focus != Focus::Columns {
        return None;
    }
    let (index, step) = state.columns.cursor_token()?;
    let column = &state.columns.columns[index];
    let side = state.comparison.side(column.side)?;
    if column.finish.is_none() || column.trace.as_ref().is_some_and(|t| t.step == step) {
        return None;
    }
    let num_samples = side.run_params.as_ref()?.num_samples;
    let branch = column.sample.checked_sub(num_samples).map(|j| {
        let j = j as usize;
        (j, side.run_branches.get(j).map_or(0, |b| b.path.len()))
    });
    let request = TraceRequest {
        run_id: side.current?,
        sample: column.sample,
        seed: column.seed?,
        branch,
        tokens: column.tokens[..=step].iter().map(|t| t.id).collect(),
        params: side.run_params.clone()?,
        ids: column.tokens[step].top.iter().map(|a| a.id).collect(),
    };
    let model = side.model;
    state.columns.columns[index].trace = Some(TokenTrace { step, result: None });
    Some(Effect::Trace(model, request))
}

/// Tab and Shift+Tab between panes; arriving in the columns brings the cursor into view.
fn cycle_focus(state: &mut State, forward: bool) -> Vec<Effect> {
    state.comparison.params.editor = None;
    state.focus = state.focus.cycled(forward);
    if state.focus == Focus::Columns {
        navigate(state, Columns::reveal_cursor)
    } else {
        Vec::new()
    }
}

/// A click focuses the pane under it: on a token it moves the cursor there, on a slider it
/// sets the value; over the inspector it brings the params back. Overlays ignore the mouse.
fn click(state: &mut State, x: u16, y: u16) -> Vec<Effect> {
    if state.overlay.is_some() {
        return Vec::new();
    }
    let Some(target) = mouse::target(state, x, y) else {
        return Vec::new();
    };
    state.comparison.params.editor = None;
    match target {
        Target::Prompt => state.focus = Focus::Prompt,
        Target::Alternative(alternative) => {
            state.columns.pick = Some(alternative);
            return branches::take(state);
        }
        Target::Params { field } => {
            state.focus = Focus::Params;
            if let Some((field, fraction)) = field {
                state.comparison.params.selected = field;
                let changed = fraction.is_some_and(|f| state.comparison.params.set_fraction(f));
                return params_changed(state, changed);
            }
        }
        Target::Column { column, text } => {
            state.focus = Focus::Columns;
            let token = text
                .and_then(|(row, cell)| state.columns.columns[column].text.token_at(row, cell))
                .or(state.columns.cursor.token);
            return navigate(state, |c, g| c.select(column, token, g));
        }
        Target::Grid => {}
    }
    Vec::new()
}

/// The wheel scrolls the column under the pointer, or the rows of columns from the line that
/// says which are shown.
fn wheel(state: &mut State, x: u16, y: u16, lines: i32) {
    if state.overlay.is_some() {
        return;
    }
    let grid = state.grid();
    match mouse::target(state, x, y) {
        Some(Target::Column { column, .. }) => {
            state.columns.columns[column].scroll_by(lines as isize, grid.text_rows());
        }
        Some(Target::Grid) => {
            let first_row = state
                .columns
                .first_row
                .saturating_add_signed(lines.signum() as isize);
            state.columns.first_row = grid.clamp_first_row(first_row);
        }
        _ => {}
    }
}

/// Applies `edit` to the preset name being typed, the open value editor, or else the prompt;
/// ←/→ in the prompt box's token view move between tokens instead of the text cursor.
fn inspecting_prompt_tokens(state: &State) -> bool {
    state.focus == Focus::Prompt
        && state.overlay.is_none()
        && state.comparison.params.editor.is_none()
        && state.prompt.view == PromptView::Tokens
        && state.seen_prompt().is_some()
}

/// The text being edited is one line: a value, a preset name or a path, a model; the prompt
/// and a conversation's turns take newlines.
fn one_line_field(state: &State) -> bool {
    match &state.overlay {
        Some(Overlay::Save(_) | Overlay::Models(_) | Overlay::SweepInput(_)) => true,
        Some(Overlay::Conversation(dialog)) if dialog.editor.is_some() => false,
        Some(Overlay::EditSample(_)) => false,
        _ => state.comparison.params.editor.is_some(),
    }
}

/// `edit` says whether the text changed, and a changed prompt re-runs.
fn edit_text(state: &mut State, edit: impl FnOnce(&mut TextBuffer) -> bool) -> Vec<Effect> {
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        if edit(&mut picker.input) {
            picker.error = None;
        }
        Vec::new()
    } else if let Some(Overlay::Save(prompt)) = &mut state.overlay {
        if edit(&mut prompt.buffer) {
            prompt.error = None;
        }
        Vec::new()
    } else if let Some(Overlay::SweepInput(dialog)) = &mut state.overlay {
        if edit(&mut dialog.buffer) {
            dialog.error = None;
        }
        Vec::new()
    } else if let Some(buffer) = conversation::editor_mut(state) {
        edit(buffer);
        Vec::new()
    } else if let Some(buffer) = edit_sample::editor_mut(state) {
        edit(buffer);
        Vec::new()
    } else if let Some(editor) = &mut state.comparison.params.editor {
        if edit(&mut editor.buffer) {
            editor.error = None;
        }
        Vec::new()
    } else if state.focus == Focus::Prompt && state.overlay.is_none() {
        // What is typed is shown.
        state.prompt.view = PromptView::Typed;
        let changed = state.prompt.edit(edit);
        params_changed(state, changed)
    } else {
        Vec::new()
    }
}

/// A change stops the run on screen at once and asks for a new one after the debounce.
/// Applies `change` to the edited parameters. A new refusal (of a typed value, or of a move
/// another parameter rules out) also goes to the message log: the panel shows it only until
/// the next key, and the status bar keeps its room for the run.
fn change_params(state: &mut State, change: impl FnOnce(&mut ParamsState) -> bool) -> Vec<Effect> {
    let refusal = |params: &ParamsState| {
        let typed = params.editor.as_ref().and_then(|e| e.error.clone());
        typed.or_else(|| params.refusal.clone())
    };
    let before = refusal(&state.comparison.params);
    let changed = change(&mut state.comparison.params);
    if let Some(why) = refusal(&state.comparison.params).filter(|why| Some(why) != before.as_ref())
    {
        state.status.log_notice(why);
    }
    params_changed(state, changed)
}

pub(super) fn params_changed(state: &mut State, changed: bool) -> Vec<Effect> {
    if !changed {
        return Vec::new();
    }
    mark_all_pending(state);
    let mut effects = cancel_all(state);
    effects.push(Effect::ScheduleRun);
    effects
}

pub(super) fn mark_all_pending(state: &mut State) {
    for side in &mut state.comparison.sides {
        side.pending = true;
    }
}

/// Stops every side's run in flight; their unfinished samples end as `abort`.
pub(super) fn cancel_all(state: &mut State) -> Vec<Effect> {
    state
        .comparison
        .side_ids()
        .filter_map(|i| cancel_side(state, i))
        .collect()
}

/// Stops the run in progress on side `index`, if any.
pub(super) fn cancel_side(state: &mut State, index: SideId) -> Option<Effect> {
    let side = &mut state.comparison.sides[index];
    let id = side.current.filter(|_| side.active)?;
    side.current = None;
    side.active = false;
    let model = side.model;
    state.columns.end_unfinished(index, StopReason::Abort);
    Some(Effect::Cancel(model, id))
}

/// Runs every owed side whose model is ready; the others stay owed until theirs loads.
pub(super) fn start_pending(state: &mut State) -> Vec<Effect> {
    let mut effects = Vec::new();
    for index in state.comparison.side_ids() {
        let side = &state.comparison.sides[index];
        if !side.pending || !state.comparison.is_ready(side.model) {
            continue;
        }
        effects.extend(cancel_side(state, index));
        state.run.last_id += 1;
        let run_id = state.run.last_id;
        let params = state
            .comparison
            .set_params(state.comparison.sides[index].set)
            .params
            .clone();
        let prompt = chat_mode::prompt_for(state, state.comparison.sides[index].model);
        let side = &mut state.comparison.sides[index];
        let last = side.run_prompt.as_ref().zip(side.run_params.as_ref());
        if let Some(cleared) = keep_for_run(&mut side.tree, last, &prompt, &params) {
            state.status.notify(cleared);
        }
        let side = &mut state.comparison.sides[index];
        let branches = side.tree.requests(params.num_samples);
        // The seed of each column: the samples', then the branches', which follow theirs.
        let seeds: Vec<Option<u64>> = (0..params.num_samples)
            .chain(branches.iter().map(|b| b.sample))
            .map(|i| params.seed.map(|seed| sample_seed(seed, i)))
            .collect();
        side.run_branches.clone_from(&branches);
        side.current = Some(run_id);
        side.active = true;
        side.pending = false;
        side.response = None;
        side.run_params = Some(params.clone());
        side.run_prompt = Some(prompt.clone());
        side.error = None;
        effects.push(Effect::Run(
            side.model,
            Request {
                run_id,
                prompt,
                lane: side.set as u32,
                params,
                branches,
            },
        ));
        reserve_columns(state, index, &seeds);
    }
    effects
}

/// Beside other sides, a side's first run takes its columns' places when it is sent rather
/// than when its first token comes, so that the columns already shown do not narrow under the
/// reader's eyes. They show the `seeds` the run will take, where known.
fn reserve_columns(state: &mut State, side: SideId, seeds: &[Option<u64>]) {
    let shown = state.columns.columns.iter().any(|c| c.side == side);
    if shown || state.comparison.sides.len() < 2 {
        return;
    }
    let grid = Grid::on_screen(state.size, state.columns.columns.len() + seeds.len());
    state
        .columns
        .start(side, seeds, logprobs_mode(state, side), &grid);
}

/// What the logprobs of `side`'s current run report.
fn logprobs_mode(state: &State, side: SideId) -> LogprobsMode {
    let side = state.comparison.side(side);
    side.and_then(|s| s.run_params.as_ref())
        .map(|params| params.logprobs_mode)
        .unwrap_or_default()
}

/// The side showing run `run_id` of `model`.
fn side_of(state: &State, model: ModelId, run_id: RunId) -> Option<SideId> {
    state
        .comparison
        .sides
        .iter()
        .position(|s| s.model == model && s.current == Some(run_id))
        .map(SideId)
}

fn engine_event(state: &mut State, model: ModelId, event: Event) -> Vec<Effect> {
    if state.comparison.slot(model).is_none() {
        return Vec::new();
    }
    if let Event::Edited { id, edit } = event {
        return edit_sample::edited(state, id, edit);
    }
    if sweep::owns(state, model, event.run_id()) {
        return sweep::event(state, event);
    }
    let side = match event.run_id() {
        Some(_) if matches!(event, Event::Scored { .. } | Event::ScoreFailed { .. }) => None,
        Some(run_id) => match side_of(state, model, run_id) {
            Some(side) => Some(side),
            None => return Vec::new(),
        },
        None => None,
    };
    match event {
        Event::Loading {
            progress,
            message,
            download,
        } => {
            if let Some(slot) = state.comparison.slot_mut(model) {
                slot.status = ModelStatus::Loading {
                    progress,
                    message,
                    downloading: download.is_some(),
                };
            }
        }
        Event::Loaded {
            model: name,
            device,
            defaults,
            chat_template,
            vocab,
            vocab_size,
            special_tokens,
            warnings,
            activations,
            backend,
        } => {
            for warning in warnings {
                state.status.notify(format!("warning: {warning}"));
            }
            if let Some(slot) = state.comparison.slot_mut(model) {
                // The probabilities shown are the rounded path's: say so where the device is.
                let device = match activations {
                    Some(Activations::SixteenBit) => format!("{device}, 16-bit activations"),
                    _ => device,
                };
                slot.status = ModelStatus::Ready { name, device };
                slot.backend = backend;
                slot.chat_available = chat_template;
                slot.vocab = vocab;
                slot.special_tokens = special_tokens;
            }
            // A served model does not say its vocabulary's size: it caps nothing.
            if let Some(vocab_size) = vocab_size {
                branches::drop_foreign(state, model, vocab_size);
                let size = u32::try_from(vocab_size).unwrap_or(u32::MAX);
                state.comparison.params.vocab_size = Some(
                    state
                        .comparison
                        .params
                        .vocab_size
                        .map_or(size, |s| s.min(size)),
                );
            }
            chat_mode::loaded(state, model);
            // The first model's defaults are the ones `--preset model` means.
            if model == ModelId(0) {
                state.presets.model_defaults.clone_from(&defaults);
                if state.comparison.params.preset_name == MODEL_PRESET {
                    match defaults {
                        Some(defaults) => {
                            let params = load_over(defaults, &state.comparison.params.params);
                            state
                                .comparison
                                .params
                                .load_preset(Preset::built_in(MODEL_PRESET, params))
                        }
                        None => state
                            .status
                            .report_error("the model ships no valid sampling defaults".to_owned()),
                    }
                }
            }
            let mut effects = start_pending(state);
            // Finished runs of the other models are this one's to score too.
            effects.extend(state.comparison.side_ids().filter_map(|side| {
                (state.comparison.sides[side].model != model)
                    .then(|| score_request(state, side))
                    .flatten()
                    .map(|request| Effect::Score(model, request))
            }));
            return effects;
        }
        Event::Served { server, ignored } => {
            let names: Vec<&str> = ignored.iter().map(|f| f.name()).collect();
            if let Some(slot) = state.comparison.slot_mut(model) {
                let name = slot.name().unwrap_or("the model").to_owned();
                slot.served = Some((server.clone(), ignored));
                state.status.notify(format!(
                    "{name} is served by {server}; the params marked ✗ are not applied: {}",
                    names.join(", ")
                ));
            }
        }
        Event::LoadFailed { message } => {
            if let Some(slot) = state.comparison.slot_mut(model) {
                slot.status = ModelStatus::Failed(message);
                if let Some(error) = slot.load_error() {
                    state.status.report_error(error);
                }
            }
        }
        Event::Prompted {
            rendered, tokens, ..
        } => {
            let name = state
                .comparison
                .slot(model)
                .and_then(|s| s.name())
                .unwrap_or("the model");
            state.comparison.sides[side.unwrap_or_default()].seen = Some(SeenPrompt {
                model: name.to_owned(),
                rendered,
                tokens,
            });
        }
        Event::Started {
            run_id,
            seeds,
            prefill_ms,
            ..
        } => {
            if let Some(slot) = state.comparison.slot_mut(model) {
                slot.prefill_ms = Some(prefill_ms);
                slot.tok_per_s = None;
            }
            state.status.error = None;
            let side = side.unwrap_or_default();
            let others = state
                .columns
                .columns
                .iter()
                .filter(|c| c.side != side)
                .count();
            let grid = Grid::on_screen(state.size, others + seeds.len());
            let seeds: Vec<Option<u64>> = seeds.into_iter().map(Some).collect();
            state
                .columns
                .start(side, &seeds, logprobs_mode(state, side), &grid);
            state.comparison.sides[side].shown = Some(run_id);
            label_branches(state, side, &grid);
        }
        Event::Token { token, .. } => {
            let hold = state.focus == Focus::Columns;
            let grid = state.grid();
            state
                .columns
                .push_token(side.unwrap_or_default(), token, &grid, hold);
        }
        Event::Finished {
            sample,
            reason,
            matched,
            stop_token,
            tail,
            replayed,
            decoded,
            ..
        } => {
            let side = side.unwrap_or_default();
            if let Some(column) = state.columns.get_mut(side, sample) {
                column.push_tail(&tail);
                column.finish(reason, matched.as_ref(), stop_token.as_deref());
                column.replay = Some((replayed, decoded));
            }
        }
        Event::Done { response, .. } => {
            // A run that only replayed decoded nothing, so it measured no speed.
            if let Some(slot) = state.comparison.slot_mut(model)
                && response.timings.tokens_decoded > 0
            {
                slot.tok_per_s = Some(response.timings.decode_tok_per_s);
            }
            let side = side.unwrap_or_default();
            state.comparison.sides[side].active = false;
            for trajectory in &response.trajectories {
                if let Some(column) = state.columns.get_mut(side, trajectory.index)
                    && column.finish.is_none()
                {
                    let matched = trajectory.stop_matched.as_ref();
                    column.finish(trajectory.stop_reason, matched, None);
                }
            }
            state.columns.mark_divergence();
            state.comparison.sides[side].response = Some(response);
            // The inspector may be waiting on this run's end to trace its token.
            let mut effects: Vec<Effect> = trace_cursor_token(state).into_iter().collect();
            if let Some(request) = score_request(state, side) {
                effects.extend(
                    state
                        .comparison
                        .models
                        .iter()
                        .filter(|other| other.id != model && other.ready())
                        .map(|other| Effect::Score(other.id, request.clone())),
                );
            }
            return effects;
        }
        Event::Traced {
            sample,
            step,
            trace,
            ..
        } => {
            if let Some(column) = state.columns.get_mut(side.unwrap_or_default(), sample)
                && let Some(current) = column.trace.as_mut().filter(|t| t.step == step)
            {
                current.result = Some(trace);
            }
        }
        Event::Scored { run_id, scores } => {
            if let Some(side) = state.comparison.side_running(run_id) {
                for score in scores {
                    if let Some(response) = &mut state.comparison.sides[side].response {
                        response.add_cross_score(score.clone());
                    }
                    if let Some(column) = state.columns.get_mut(side, score.sample) {
                        column.add_cross_score(score);
                    }
                }
            }
        }
        Event::ScoreFailed { run_id, message } => {
            // A model that cannot score says so in the footers of the samples it was given.
            let name = state
                .comparison
                .slot(model)
                .and_then(|s| s.name())
                .unwrap_or("model")
                .to_owned();
            if let Some(side) = state.comparison.side_running(run_id) {
                for column in state.columns.columns.iter_mut().filter(|c| c.side == side) {
                    column.add_unscored(&name);
                }
            }
            state
                .status
                .report_error(format!("cross-scoring failed: {message}"));
        }
        Event::Edited { .. } => {}
        Event::Error { message, .. } => {
            let side = side.unwrap_or_default();
            state.comparison.sides[side].active = false;
            if state.comparison.sides[side]
                .seen
                .as_ref()
                .is_some_and(SeenPrompt::is_empty)
            {
                // An empty prompt the model cannot start from is the next thing to do, not an
                // error: the view asks for a prompt (see `State::awaits_prompt`).
                return Vec::new();
            }
            state.comparison.sides[side].error = Some(message.clone());
            state.status.report_error(message);
            state.columns.end_unfinished(side, StopReason::Error);
        }
    }
    Vec::new()
}

/// Marks the columns of a run's branches with where they part from their parents, and puts the
/// cursor where the branch or step that asked for the run wants it.
fn label_branches(state: &mut State, side: SideId, grid: &Grid) {
    let Some(num_samples) = state.comparison.sides[side]
        .run_params
        .as_ref()
        .map(|p| p.num_samples)
    else {
        return;
    };
    for (j, branch) in state.comparison.sides[side].run_branches.iter().enumerate() {
        if let Some(column) = state.columns.get_mut(side, num_samples + j as u32) {
            column.origin = Some(branch.origin);
            column.stepping = branch.then.is_some();
        }
    }
    if let Some((sample, token)) = state.comparison.sides[side].follow.take()
        && let Some(column) = state.columns.index_of(side, sample)
    {
        state.focus = Focus::Columns;
        state.columns.select(column, token, grid);
    }
}

/// The finished current run of `side`, as other models are asked to score it.
fn score_request(state: &State, side: SideId) -> Option<ScoreRequest> {
    let side = &state.comparison.sides[side];
    let response = side.response.as_ref()?;
    Some(ScoreRequest::new(
        side.current?,
        state.comparison.slot(side.model)?.vocab,
        side.run_prompt.as_ref()?,
        response,
    ))
}

/// The cursor's column as a side, its run's sample count and its index in the run.
pub(super) fn cursor_place(state: &State) -> Option<(SideId, u32, u32, usize)> {
    let (column, token) = state.columns.cursor_token()?;
    let c = &state.columns.columns[column];
    let num_samples = state
        .comparison
        .side(c.side)?
        .run_params
        .as_ref()?
        .num_samples;
    Some((c.side, num_samples, c.sample, token))
}

/// Runs `side` again at once (its tree changed) and puts the cursor on `sample`'s `token`
/// (`None`: its newest) once the run starts.
pub(super) fn run_side(
    state: &mut State,
    side: SideId,
    sample: u32,
    token: Option<usize>,
) -> Vec<Effect> {
    state.columns.pick = None;
    state.comparison.sides[side].follow = Some((sample, token));
    state.comparison.sides[side].pending = true;
    start_pending(state)
}
