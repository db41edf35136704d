//! The model picker (`a`): the models compared now, and others to add at run time: GGUF files
//! and model directories in the working directory, the Hugging Face cache, or a path or Hub id
//! typed in. Finding candidates reads the disk, so the loop does it and answers with
//! `Outcome::ModelsFound`.

use super::action::Effect;
use super::keymap::{KeyMap, Mode};
use super::popup;
use super::state::{Overlay, State};
use super::status::ModelStatus;
use super::text::TextBuffer;
use super::theme::Theme;
use super::update;
use crate::model::discover::Candidate;
use crate::model::embedded;
use crate::model::hub::progress::bytes;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelPicker {
    /// Found on disk (and the built-in model), offered to add.
    pub candidates: Vec<Candidate>,
    /// Over the loaded models first, then the candidates.
    pub selected: usize,
    /// A path or Hub id being typed; Enter adds it rather than the selection.
    pub input: TextBuffer,
    /// Why the last Enter or Del did nothing.
    pub error: Option<String>,
}

impl ModelPicker {
    /// The built-in model is always offered; what is on disk arrives with `found`.
    pub fn new() -> Self {
        Self {
            candidates: vec![Candidate {
                spec: embedded::NAME.to_owned(),
                label: format!("{} (built in)", embedded::NAME),
                size: None,
            }],
            ..Self::default()
        }
    }

    pub fn found(&mut self, candidates: Vec<Candidate>) {
        self.candidates.extend(candidates);
    }
}

/// `a`: opens the picker and asks the loop what is on disk.
pub fn open(state: &mut State) -> Vec<Effect> {
    state.overlay = Some(Overlay::Models(ModelPicker::new()));
    vec![Effect::DiscoverModels]
}

pub fn move_by(state: &mut State, delta: i32) {
    let rows = state.status.models.len() + picker(state).map_or(0, |p| p.candidates.len());
    if let Some(Overlay::Models(picker)) = &mut state.overlay
        && rows > 0
    {
        picker.selected =
            (picker.selected as i64 + i64::from(delta)).rem_euclid(rows as i64) as usize;
    }
}

/// Enter: the typed spec, else the selected candidate, joins the comparison; it loads on its
/// own engine and runs the current parameters and seeds once ready.
pub fn add(state: &mut State) -> Vec<Effect> {
    let loaded = state.status.models.len();
    let Some(Overlay::Models(picker)) = &mut state.overlay else {
        return Vec::new();
    };
    let typed = picker.input.text.trim().to_owned();
    let spec = if typed.is_empty() {
        match picker.selected.checked_sub(loaded) {
            Some(i) => picker.candidates.get(i).map(|c| c.spec.clone()),
            None => {
                picker.error = Some("already loaded: pick a model below, or type one".to_owned());
                return Vec::new();
            }
        }
    } else {
        Some(typed)
    };
    let Some(spec) = spec else {
        return Vec::new();
    };
    state.overlay = None;
    let id = state.add_model(&spec);
    vec![Effect::AddEngine { id, spec }]
}

/// Del on a loaded model: its runs stop, its columns and its scores go, its engine closes (a
/// download under way stops with it). On the last model, which stays, Del stops its download.
pub fn remove(state: &mut State) -> Vec<Effect> {
    let Some(selected) = picker(state).map(|p| p.selected) else {
        return Vec::new();
    };
    let Some(slot) = state.status.models.get(selected) else {
        return refuse(state, "only a loaded model (above the line) can be removed");
    };
    if state.status.models.len() == 1 {
        // The last model stays, but its download can stop: what arrived is kept to resume.
        if matches!(
            slot.status,
            ModelStatus::Loading {
                downloading: true,
                ..
            }
        ) {
            let (id, spec) = (slot.id, slot.spec.clone());
            state
                .status
                .notify(format!("cancelling the download of {spec}"));
            return vec![Effect::CancelLoad(id)];
        }
        return refuse(
            state,
            "the last model stays: add another before removing this one",
        );
    }
    let (id, name) = (slot.id, slot.name().map(str::to_owned));
    let mut effects = Vec::new();
    for index in (0..state.sides.len()).rev() {
        if state.sides[index].model != id {
            continue;
        }
        effects.extend(update::cancel_side(state, index));
        state.sides.remove(index);
        state.columns.remove_side(index);
    }
    if let Some(name) = name {
        for column in &mut state.columns.columns {
            column.cross.retain(|score| score.model != name);
        }
    }
    state.status.models.retain(|m| m.id != id);
    state.columns.mark_divergence();
    let loaded = state.status.models.len();
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        picker.selected = selected.min(loaded - 1);
        picker.error = None;
    }
    effects.push(Effect::RemoveEngine(id));
    effects
}

fn refuse(state: &mut State, why: &str) -> Vec<Effect> {
    if let Some(Overlay::Models(picker)) = &mut state.overlay {
        picker.error = Some(why.to_owned());
    }
    Vec::new()
}

fn picker(state: &State) -> Option<&ModelPicker> {
    match &state.overlay {
        Some(Overlay::Models(picker)) => Some(picker),
        _ => None,
    }
}

const LABEL: &str = "add: ";

pub fn render(
    frame: &mut Frame,
    area: Rect,
    state: &State,
    picker: &ModelPicker,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let hints = popup::hints(keymap, &[Mode::Models, Mode::Dialog]);
    let rows = state.status.models.len() + picker.candidates.len();
    let mut lines = vec![Line::from(vec![
        Span::styled(LABEL, theme.dim),
        Span::styled(picker.input.text.clone(), theme.editor),
        Span::styled(
            if picker.input.text.is_empty() {
                "a .gguf path, a model directory or a Hub id, or pick one below"
            } else {
                ""
            },
            theme.dim,
        ),
    ])];
    let row_style = |i: usize| {
        if i == picker.selected {
            theme.selected
        } else {
            theme.base
        }
    };
    for (i, model) in state.status.models.iter().enumerate() {
        let name = model.name().unwrap_or(&model.spec);
        let (status, style) = match &model.status {
            ModelStatus::Ready { .. } => ("loaded".to_owned(), row_style(i)),
            ModelStatus::Loading {
                progress, message, ..
            } => (
                format!("loading {:.0}% · {message}", progress * 100.0),
                row_style(i),
            ),
            ModelStatus::Failed(why) => (format!("failed: {why}"), row_style(i).patch(theme.error)),
        };
        // Until it loads the name is the spec: said once, so that a download's figures fit.
        let spec = if name == model.spec {
            String::new()
        } else {
            format!(" ({})", model.spec)
        };
        lines.push(Line::styled(format!(" {name:<40} {status}{spec}"), style));
    }
    let separator = lines.len();
    let loaded = state.status.models.len();
    let label_width = picker
        .candidates
        .iter()
        .map(|c| c.label.chars().count())
        .max()
        .unwrap_or(0);
    for (i, candidate) in picker.candidates.iter().enumerate() {
        let size = candidate.size.map(bytes).unwrap_or_default();
        lines.push(Line::styled(
            format!(" {:<label_width$}  {size:>8}", candidate.label),
            row_style(loaded + i),
        ));
    }
    if let Some(error) = &picker.error {
        lines.push(Line::styled(error.clone(), theme.error));
    }
    // Wide enough for a download's figures where the screen allows.
    let widest = lines.iter().map(Line::width).max().unwrap_or(0);
    let width = u16::try_from(widest + 2).unwrap_or(u16::MAX).max(96);
    let popup_area = popup::centred(area, width, rows as u16 + 6);
    let inner = popup::open(frame, popup_area, "models", &hints, theme);
    lines.insert(
        separator,
        Line::styled("─".repeat(usize::from(inner.width)), theme.dim),
    );
    frame.render_widget(Paragraph::new(lines), inner);
    let (_, col) = picker.input.cursor_line_col();
    let x = (LABEL.len() + col) as u16;
    if x < inner.width && inner.height > 0 {
        frame.set_cursor_position(Position::new(inner.x + x, inner.y));
    }
}
