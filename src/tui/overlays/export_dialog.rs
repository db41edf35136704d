//! The export dialog (`e`): the current params, prompt and model as code for each exporter of
//! `crate::export`, one tab each, to copy (OSC 52) or to keep; and the last finished run
//! written out as SampleResponse JSON, in samplab's shape or twinkle's.

use super::popup;
use crate::export::ExportFormat;
use crate::model::source::embedded;
use crate::response::ResponseShape;
use crate::tui::action::{Action, DialogAction};
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Tabs, Wrap};
use std::path::PathBuf;

/// What the results file needs from outside the params; kept while the dialog is closed.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSettings {
    /// Where `w` writes results files.
    pub results_dir: PathBuf,
    /// The path last given to `w` this session, offered again instead of `results_dir`.
    pub last_path: Option<String>,
    /// The JSON shape `w` writes results in.
    pub shape: ResponseShape,
    /// The built-in model's files (its directory in the cache), which exports name instead of
    /// `samplab-tiny`, a name no other engine can load.
    pub builtin_model: Option<PathBuf>,
    /// `--chat-template`, which chat exports pass on.
    pub chat_template: Option<String>,
}

impl Default for ExportSettings {
    fn default() -> Self {
        Self {
            results_dir: PathBuf::from("."),
            last_path: None,
            shape: ResponseShape::default(),
            builtin_model: None,
            chat_template: None,
        }
    }
}

impl ExportSettings {
    /// How exports name the model given as `spec`.
    pub fn model_name(&self, spec: &str) -> String {
        match &self.builtin_model {
            Some(dir) if spec == embedded::NAME => dir.display().to_string(),
            _ => spec.to_owned(),
        }
    }

    /// The next results shape.
    pub fn cycle_shape(&mut self) {
        let shapes = ResponseShape::all();
        let i = shapes.iter().position(|s| *s == self.shape).unwrap_or(0);
        self.shape = shapes[(i + 1) % shapes.len()];
    }
}

/// The answer to the last copy or write, shown under the snippet.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    Done(String),
    Failed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExportDialog {
    pub format: ExportFormat,
    /// The first snippet line shown.
    pub scroll: u16,
    pub note: Option<Note>,
}

impl Default for ExportDialog {
    fn default() -> Self {
        Self {
            format: ExportFormat::Vllm,
            scroll: 0,
            note: None,
        }
    }
}

impl ExportDialog {
    fn tab(&self) -> usize {
        ExportFormat::all()
            .iter()
            .position(|f| *f == self.format)
            .unwrap_or(0)
    }

    pub fn tab_name(&self) -> &'static str {
        self.format.spec().title
    }

    /// A new tab starts at its top, with the last note gone (it spoke of another snippet).
    pub fn select(&mut self, format: ExportFormat) {
        if format != self.format {
            self.format = format;
            self.scroll = 0;
            self.note = None;
        }
    }

    pub fn cycle(&mut self, delta: i32) {
        let formats = ExportFormat::all();
        let i = (self.tab() as i64 + i64::from(delta)).rem_euclid(formats.len() as i64);
        self.select(formats[i as usize]);
    }

    /// Scrolls within the snippet's `lines`, keeping its last line reachable.
    pub fn scroll_by(&mut self, delta: i32, lines: usize) {
        let last = lines.saturating_sub(1) as i64;
        self.scroll = (i64::from(self.scroll) + i64::from(delta)).clamp(0, last) as u16;
    }
}

pub fn render(
    frame: &mut Frame,
    area: Rect,
    dialog: &ExportDialog,
    snippet: &str,
    shape: ResponseShape,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let popup_area = popup::centred(
        area,
        area.width.saturating_sub(4).max(60),
        area.height.saturating_sub(2),
    );
    let hints = popup::hints(keymap, &[Mode::Export, Mode::Dialog]);
    let inner = popup::open(frame, popup_area, "export", &hints, theme);
    let note_height = u16::from(dialog.note.is_some());
    let [tabs_area, shape_area, code_area, note_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(note_height),
    ])
    .areas(inner);
    let titles = ExportFormat::all()
        .iter()
        .enumerate()
        .map(|(i, format)| format!("{} {}", i + 1, format.spec().title));
    frame.render_widget(
        Tabs::new(titles)
            .select(dialog.tab())
            .style(theme.dim)
            .highlight_style(theme.selected.patch(theme.value)),
        tabs_area,
    );
    // Said here too because the hints line is cut on narrow screens.
    let switch = keymap
        .key_for(
            &[Mode::Export],
            &Action::Dialog(DialogAction::CycleResultsShape),
        )
        .map(|key| format!(" ({key} switches)"))
        .unwrap_or_default();
    frame.render_widget(
        Paragraph::new(Line::styled(
            format!(
                "results are written in {}'s JSON shape{switch}",
                shape.name()
            ),
            theme.dim,
        )),
        shape_area,
    );
    let lines: Vec<Line> = snippet
        .lines()
        .map(|l| Line::styled(l.to_owned(), theme.value))
        .collect();
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((dialog.scroll, 0)),
        code_area,
    );
    if let Some(note) = &dialog.note {
        let (text, style) = match note {
            Note::Done(text) => (text, theme.value),
            Note::Failed(text) => (text, theme.error),
        };
        frame.render_widget(Paragraph::new(Line::styled(text.clone(), style)), note_area);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_cycle_both_ways_and_a_new_tab_starts_fresh() {
        let mut d = ExportDialog::default();
        d.cycle(-1);
        assert_eq!(d.format, ExportFormat::Twinkle);
        d.cycle(1);
        assert_eq!(d.format, ExportFormat::Vllm);
        d.scroll_by(5, 20);
        d.note = Some(Note::Done("copied".into()));
        d.select(ExportFormat::Vllm);
        assert_eq!(
            (d.scroll, d.note.is_some()),
            (5, true),
            "same tab: nothing resets"
        );
        d.select(ExportFormat::Openai);
        assert_eq!(
            (d.scroll, d.note.clone(), d.tab_name()),
            (0, None, "OpenAI request")
        );
        d.scroll_by(-3, 20);
        assert_eq!(d.scroll, 0);
        d.scroll_by(100, 20);
        assert_eq!(d.scroll, 19);
    }
}
