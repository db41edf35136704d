//! The save prompt: one line for a preset's name (`s`), a results file's path (`w` in the
//! export dialog) or a session file's (`S` to save, `O` to open), its error, and the y/n
//! question when the preset or file exists.

use super::export_dialog::ExportDialog;
use super::popup;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::widgets::text::TextBuffer;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::path::Path;

/// What the prompt saves.
#[derive(Debug, Clone, PartialEq)]
pub enum Saving {
    /// The params, as a preset of the typed name.
    Preset,
    /// The last finished run, to the typed path; a directory gets a new file named after the
    /// run. The export dialog it was asked from, if any, comes back once the file is written.
    Results(Option<ExportDialog>),
    /// The whole playground, as a session file at the typed path.
    Session,
    /// Nothing: the session file at the typed path is opened.
    OpenSession,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SavePrompt {
    pub buffer: TextBuffer,
    /// Why the last Enter was refused; typing clears it.
    pub error: Option<String>,
    /// The existing preset or file that waits for "overwrite? y/n".
    pub confirm: Option<String>,
    pub saving: Saving,
}

impl SavePrompt {
    pub fn preset(name: &str) -> Self {
        Self::new(name, Saving::Preset)
    }

    /// Offers `path` (a directory: a new file there, as before the path was asked for).
    pub fn results(path: &str, from: Option<ExportDialog>) -> Self {
        Self::new(path, Saving::Results(from))
    }

    pub fn new(text: &str, saving: Saving) -> Self {
        Self {
            buffer: TextBuffer::new(text),
            error: None,
            confirm: None,
            saving,
        }
    }

    /// The name or path as it will be used: surrounding spaces are never meant.
    pub fn name(&self) -> &str {
        self.buffer.text.trim()
    }
}

/// `preset_dir` is where a preset will go, shown so the user knows where to find it.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    prompt: &SavePrompt,
    preset_dir: Option<&Path>,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let modes = match (&prompt.confirm, &prompt.saving) {
        (Some(_), _) => [Mode::Confirm, Mode::Dialog],
        (None, Saving::OpenSession) => [Mode::OpenPath, Mode::Dialog],
        (None, _) => [Mode::PresetName, Mode::Dialog],
    };
    let hints = popup::hints(keymap, &modes);
    let popup_area = popup::centred(area, 76, 7);
    let (title, label, place) = match &prompt.saving {
        Saving::Preset => (
            "save preset",
            "name: ",
            preset_dir.map(|dir| format!("into {}", dir.display())),
        ),
        Saving::Results(_) => (
            "save results",
            "path: ",
            Some("a directory gets a new samplab-<run>-<time>.json".to_owned()),
        ),
        Saving::Session => (
            "save session",
            "path: ",
            Some("models, prompt, conversation, both parameter sets and branches".to_owned()),
        ),
        Saving::OpenSession => (
            "open session",
            "path: ",
            Some("replaces the models, prompt, parameters and branches".to_owned()),
        ),
    };
    let inner = popup::open(frame, popup_area, title, &hints, theme);
    let mut lines = vec![Line::from(vec![
        Span::styled(label, theme.dim),
        Span::styled(prompt.buffer.text.clone(), theme.editor),
    ])];
    lines.extend(place.map(|place| Line::styled(place, theme.dim)));
    if let Some(name) = &prompt.confirm {
        lines.push(Line::styled(
            format!("`{name}` exists: overwrite it? y/n"),
            theme.error,
        ));
    } else if let Some(error) = &prompt.error {
        lines.push(Line::styled(error.clone(), theme.error));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
    let (_, col) = prompt.buffer.cursor_line_col();
    let x = (label.len() + col) as u16;
    if prompt.confirm.is_none() && x < inner.width && inner.height > 0 {
        frame.set_cursor_position(Position::new(inner.x + x, inner.y));
    }
}
