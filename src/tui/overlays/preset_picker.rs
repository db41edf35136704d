//! The preset picker (`p`): the built-ins, the model's own defaults when it shipped some, and
//! the user's presets, each with a summary of what it sets; a broken user file is listed with
//! its error and cannot be loaded.

use super::popup;
use crate::params::SamplingParams;
use crate::preset_store::{PresetStore, UserPreset};
use crate::presets::{self, MODEL_PRESET};
use crate::tui::action::ListMove;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use std::path::PathBuf;

/// What the preset dialogs know beyond the params themselves.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PresetsState {
    /// Where user presets live; `None` when the platform offers no config directory.
    pub store: Option<PresetStore>,
    /// The loaded model's own sampling defaults, offered as the `model` preset.
    pub model_defaults: Option<SamplingParams>,
    /// The seed the session drew because its preset named none: saving leaves it out, as the
    /// user never chose it (a seed typed or rolled with `r` differs and is saved).
    pub drawn_seed: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    BuiltIn,
    Model,
    User(PathBuf),
}

impl EntryKind {
    fn label(&self) -> &'static str {
        match self {
            EntryKind::BuiltIn => "built-in",
            EntryKind::Model => "model",
            EntryKind::User(_) => "user",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PickerEntry {
    pub name: String,
    pub kind: EntryKind,
    /// The preset, or why its file cannot be loaded.
    pub params: Result<SamplingParams, String>,
    /// Said beside it: a user file that another of the same name shadows.
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PresetPicker {
    pub entries: Vec<PickerEntry>,
    pub selected: usize,
    /// A problem to show under the list: an unreadable directory, a refused load.
    pub message: Option<String>,
}

impl PresetPicker {
    /// The built-ins and `model` (when the model shipped defaults), on the current preset.
    pub fn new(presets: &PresetsState, current: &str) -> Self {
        let mut entries: Vec<PickerEntry> = presets::builtins()
            .into_iter()
            .map(|p| PickerEntry {
                name: p.name,
                kind: EntryKind::BuiltIn,
                params: Ok(p.params),
                note: None,
            })
            .collect();
        if let Some(defaults) = &presets.model_defaults {
            entries.push(PickerEntry {
                name: MODEL_PRESET.to_owned(),
                kind: EntryKind::Model,
                params: Ok(defaults.clone()),
                note: None,
            });
        }
        let message = presets.store.is_none().then(|| {
            "no config directory for user presets: set SAMPLAB_CONFIG_DIR to choose one".to_owned()
        });
        let mut picker = Self {
            entries,
            selected: 0,
            message,
        };
        picker.select_named(current);
        picker
    }

    /// Adds the user's presets as read from disk, staying on `current` if it is among them.
    pub fn add_user(&mut self, listed: Result<Vec<UserPreset>, String>, current: &str) {
        match listed {
            Ok(listed) => {
                self.entries.extend(listed.into_iter().map(|p| PickerEntry {
                    note: p.note(),
                    name: p.name,
                    kind: EntryKind::User(p.path),
                    params: p.params,
                }));
                self.select_named(current);
            }
            Err(e) => self.message = Some(format!("cannot read the user presets: {e}")),
        }
    }

    fn select_named(&mut self, name: &str) {
        if let Some(i) = self.entries.iter().position(|e| e.name == name) {
            self.selected = i;
        }
    }

    /// Steps wrap round; `page` is how many entries a page moves.
    pub fn move_by(&mut self, by: ListMove, page: usize) {
        self.selected = by.apply(self.selected, self.entries.len(), page, true);
    }

    pub fn chosen(&self) -> Option<&PickerEntry> {
        self.entries.get(self.selected)
    }
}

/// `temperature: 1.1, top_p: 0.98`, or `all defaults`.
fn summary(params: &SamplingParams) -> String {
    let yaml = params.to_yaml_non_default();
    if yaml.trim() == "{}" {
        return "all defaults".to_owned();
    }
    yaml.trim_end().replace('\n', ", ")
}

const NAME_WIDTH: usize = 18;
const KIND_WIDTH: usize = 9;
/// Lines under the list for the selected entry's full text.
const DETAIL_LINES: u16 = 4;

/// Where the picker goes on `screen`: tall enough for every entry and the detail lines.
fn popup_area(screen: Rect, picker: &PresetPicker) -> Rect {
    let wanted = picker.entries.len() as u16 + DETAIL_LINES + 3;
    popup::centred(screen, 100, wanted)
}

/// The popup's inside split into the list and the selected entry's detail under it.
fn split(inner: Rect) -> [Rect; 2] {
    let detail_height = DETAIL_LINES.min(inner.height / 2);
    Layout::vertical([Constraint::Fill(1), Constraint::Length(detail_height)]).areas(inner)
}

/// How many entries the picker shows on `screen`: what PgUp/PgDn move by.
pub fn page_rows(screen: Rect, picker: &PresetPicker) -> usize {
    let [list, _] = split(popup::inside(popup_area(screen, picker)));
    usize::from(list.height)
}

pub fn render(
    frame: &mut Frame,
    area: Rect,
    picker: &PresetPicker,
    keymap: &KeyMap,
    theme: &Theme,
) {
    let hints = popup::hints(keymap, &[Mode::Presets, Mode::List, Mode::Dialog]);
    let inner = popup::open(frame, popup_area(area, picker), "presets", &hints, theme);
    let [list_area, detail_area] = split(inner);

    let visible = usize::from(list_area.height);
    let top = (picker.selected + 1).saturating_sub(visible);
    let lines: Vec<Line> = picker
        .entries
        .iter()
        .enumerate()
        .skip(top)
        .take(visible)
        .map(|(i, entry)| {
            let row = if i == picker.selected {
                theme.selected
            } else {
                theme.base
            };
            let (mut text, style) = match &entry.params {
                Ok(params) => (summary(params), theme.dim),
                Err(e) => (format!("✗ {e}"), theme.error),
            };
            if let Some(note) = &entry.note {
                text = format!("({note}) {text}");
            }
            Line::from(vec![
                Span::styled(
                    format!(" {:<NAME_WIDTH$} ", entry.name),
                    theme.value.patch(row),
                ),
                Span::styled(
                    format!("{:<KIND_WIDTH$} ", entry.kind.label()),
                    theme.dim.patch(row),
                ),
                Span::styled(text, style.patch(row)),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), list_area);

    let mut detail = Vec::new();
    if let Some(message) = &picker.message {
        detail.push(Line::styled(message.clone(), theme.error));
    }
    if let Some(entry) = picker.chosen() {
        if let EntryKind::User(path) = &entry.kind {
            let mut place = path.display().to_string();
            if let Some(note) = &entry.note {
                place.push_str(&format!(" ({note})"));
            }
            detail.push(Line::styled(place, theme.dim));
        }
        match &entry.params {
            Ok(params) => detail.push(Line::styled(summary(params), theme.value)),
            Err(e) => detail.push(Line::styled(format!("cannot load: {e}"), theme.error)),
        }
    }
    frame.render_widget(
        Paragraph::new(detail).wrap(Wrap { trim: false }),
        detail_area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, params: Result<SamplingParams, String>) -> UserPreset {
        UserPreset {
            name: name.into(),
            path: PathBuf::from(format!("/p/{name}.yaml")),
            params,
            shadowed_by: None,
        }
    }

    #[test]
    fn lists_built_ins_model_and_user_presets_on_the_current_one() {
        let presets = PresetsState {
            model_defaults: Some(SamplingParams::default()),
            ..PresetsState::default()
        };
        let mut picker = PresetPicker::new(&presets, "mine");
        assert_eq!(picker.entries[0].name, "default");
        let model = crate::presets::builtin_names().len();
        assert_eq!(picker.entries[model].kind, EntryKind::Model);
        assert_eq!(picker.selected, 0, "mine is not known yet");
        assert!(
            picker
                .message
                .as_ref()
                .unwrap()
                .contains("SAMPLAB_CONFIG_DIR")
        );
        picker.add_user(
            Ok(vec![
                user("bad", Err("broken".into())),
                user("mine", Ok(SamplingParams::default())),
            ]),
            "mine",
        );
        assert_eq!(picker.chosen().unwrap().name, "mine");
        picker.move_by(ListMove::Step(1), 5);
        assert_eq!(picker.selected, 0, "wraps around");
        picker.move_by(ListMove::Step(-2), 5);
        assert_eq!(picker.chosen().unwrap().name, "bad");
        picker.add_user(Err("permission denied".into()), "mine");
        assert!(
            picker
                .message
                .as_ref()
                .unwrap()
                .contains("permission denied")
        );
    }

    #[test]
    fn summaries_list_what_a_preset_changes() {
        assert_eq!(summary(&SamplingParams::default()), "all defaults");
        let p = SamplingParams::from_yaml("temperature: 1.1\ntop_p: 0.98").unwrap();
        assert_eq!(summary(&p), "temperature: 1.1, top_p: 0.98");
    }
}
