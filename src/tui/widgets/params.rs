//! The params panel: one slider row per `SamplingParams` field, with nudging, log-scale steps,
//! reset, an inline editor for exact values, and its view.

use super::cells::word_wrap;
use super::text::TextBuffer;
use super::token_texts;
use crate::params::{Field, Knob, SamplingParams, TokenTexts};
use crate::presets::{Preset, PresetSource};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use serde_yaml_ng::Value;
use std::cmp::Ordering;

/// max_tokens the TUI starts with when the preset leaves it unlimited: a run must end soon.
pub const START_MAX_TOKENS: u32 = 128;

/// An exact value being typed; `error` says why the last Enter was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldEditor {
    pub buffer: TextBuffer,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParamsState {
    pub params: SamplingParams,
    /// What reset returns to and what `*` compares with: the preset as the TUI started it.
    pub baseline: SamplingParams,
    pub preset_name: String,
    /// Where the preset came from, so that saving offers its name back when it is the user's.
    pub source: PresetSource,
    /// The selected row: an index into `Field::ALL`.
    pub selected: usize,
    pub editor: Option<FieldEditor>,
    /// Why the last knob move was refused: a value another parameter rules out (a parameter
    /// the new engine lacks, min_tokens above max_tokens).
    pub refusal: Option<String>,
    /// The smallest vocabulary among the loaded models, which caps top_k's knob.
    pub vocab_size: Option<u32>,
    /// State of the seed roller, so rolling stays a pure function of the state.
    roller: u64,
    /// Values of parameters the engine switched to lacks, set aside at the switch (shown
    /// greyed beside `n/a`) and given back when an engine that has them is chosen again.
    kept: Vec<(Field, Value)>,
}

impl ParamsState {
    /// The preset's params, with a 128-token limit and a fixed seed where it leaves them null,
    /// so that every change re-runs quickly and shows the knob's effect rather than new noise.
    pub fn new(preset: Preset, entropy: u64) -> Self {
        let mut state = Self {
            baseline: SamplingParams::default(),
            params: SamplingParams::default(),
            preset_name: String::new(),
            source: PresetSource::BuiltIn,
            selected: row_of(Field::Temperature),
            editor: None,
            refusal: None,
            vocab_size: None,
            roller: entropy,
            kept: Vec::new(),
        };
        state.load_preset(preset);
        state
    }

    /// Starts over from a preset (the model's defaults arrive only once it has loaded).
    pub fn load_preset(&mut self, preset: Preset) {
        self.preset_name = preset.name;
        self.source = preset.source;
        self.baseline = preset.params;
        if self.baseline.max_tokens.is_none() {
            self.baseline.max_tokens = Some(START_MAX_TOKENS);
        }
        if self.baseline.seed.is_none() {
            self.baseline.seed = Some(self.next_seed());
        }
        self.params = self.baseline.clone();
        self.kept.clear();
    }

    pub fn field(&self) -> Field {
        Field::ALL[self.selected.min(Field::ALL.len() - 1)]
    }

    /// Selects the row of `field`.
    pub fn select_field(&mut self, field: Field) {
        self.selected = row_of(field);
    }

    /// Whether the params behave differently from the preset as loaded: `*` in the status bar.
    /// Compared in canonical spelling, so that typing `top_k` 0 over -1 is no change.
    pub fn modified(&self) -> bool {
        self.params.normalized() != self.baseline.normalized()
    }

    /// Selects row `row` (clamped to the last).
    pub fn select_row(&mut self, row: usize) {
        self.selected = row.min(Field::ALL.len() - 1);
        self.refusal = None;
    }

    /// Takes `next` (a sweep's cell) as [`ParamsState::apply`] does.
    pub fn set_params(&mut self, next: SamplingParams) -> bool {
        self.apply(next)
    }

    /// Takes `next` when it is valid and different; returns whether anything changed. A
    /// change of engine sets aside the values the new engine has no place for and gives back
    /// those it has, instead of refusing while one is set.
    fn apply(&mut self, mut next: SamplingParams) -> bool {
        if next == self.params {
            return false;
        }
        let mut kept = self.kept.clone();
        if next.engine != self.params.engine {
            switch_engine(&mut next, &mut kept);
        }
        match next.validate() {
            Ok(()) => {
                self.params = next;
                self.kept = kept;
                self.refusal = None;
                true
            }
            Err(e) => {
                self.refusal = Some(e.to_string());
                false
            }
        }
    }

    /// The value set aside for `field`, if any.
    pub fn kept_value(&self, field: Field) -> Option<&Value> {
        self.kept.iter().find(|(f, _)| *f == field).map(|(_, v)| v)
    }

    /// Sets the selected field to `value` when the result is valid.
    fn apply_value(&mut self, value: Value) -> bool {
        let mut p = self.params.clone();
        p.set_field(self.field(), value).is_ok() && self.apply(p)
    }

    /// ←/→: moves the selected knob `steps` steps (coarse ones with Shift).
    pub fn nudge(&mut self, steps: i32, coarse: bool) -> bool {
        let field = self.field();
        let spec = field.spec();
        let value = self.params.get(field);
        let off = || spec.off_value();
        let next = match spec.knob {
            Knob::Decimal {
                fine,
                coarse: big,
                limit: (lo, hi),
                ..
            } => {
                let beyond = off().and_then(|off| off_beyond(&off, (lo, hi)));
                match (number(&value), beyond) {
                    // Off beyond the range: nudging back in enters at its near end.
                    (_, Some(side)) if self.params.is_off(field) => match (side, steps > 0) {
                        (Ordering::Less, true) => decimal(lo),
                        (Ordering::Greater, false) => decimal(hi),
                        _ => return false,
                    },
                    (Some(x), _) => {
                        let next = decimal_step(x, steps, if coarse { big } else { fine });
                        match (beyond, off()) {
                            (Some(Ordering::Less), Some(off)) if next < lo => off,
                            (Some(Ordering::Greater), Some(off)) if next > hi => off,
                            _ => decimal(next.clamp(lo, hi)),
                        }
                    }
                    (None, _) => return false,
                }
            }
            Knob::Doubling { max, vocab } => {
                let max = self.doubling_max(max, vocab);
                let n = number(&value)
                    .filter(|&n| n >= 1.0)
                    .map(|n| n.min(f64::from(u32::MAX)) as u32);
                let steps = steps.saturating_mul(if coarse { 4 } else { 1 });
                match doubling_step(n, steps, max) {
                    Some(n) => Value::from(n),
                    None => match off() {
                        Some(off) => off,
                        None => return false,
                    },
                }
            }
            Knob::Count {
                coarse: big,
                limit: (lo, hi),
                ..
            } => {
                let off = off().filter(|off| number(off).is_none_or(|n| n < lo as f64));
                let position = number(&value).map_or(lo - 1, |n| n as i64);
                let next = position.saturating_add(i64::from(steps).saturating_mul(if coarse {
                    big
                } else {
                    1
                }));
                match (next < lo, off) {
                    (true, Some(off)) => off,
                    _ => Value::from(next.clamp(lo, hi)),
                }
            }
            Knob::Seed => {
                let seed = self.params.seed.unwrap_or(0);
                let delta = i64::from(steps.saturating_mul(if coarse { 100 } else { 1 }));
                Value::from(seed.saturating_add_signed(delta))
            }
            Knob::Toggle => Value::Bool(value.as_bool().unwrap_or(false) ^ (steps % 2 != 0)),
            Knob::Choice(names) => {
                let at = names
                    .iter()
                    .position(|&n| Some(n) == value.as_str())
                    .unwrap_or(0);
                let n = names.len() as i64;
                Value::from(names[(at as i64 + i64::from(steps)).rem_euclid(n) as usize])
            }
            Knob::Text | Knob::TokenList => return false,
        };
        self.apply_value(next)
    }

    /// Back to the baseline value of the selected field.
    pub fn reset(&mut self) -> bool {
        let value = self.baseline.get(self.field());
        self.apply_value(value)
    }

    /// The value that turns the selected field off, where one does.
    pub fn turn_off(&mut self) -> bool {
        let field = self.field();
        match field.spec().off_value() {
            Some(off) => self.apply_value(off),
            None => {
                self.refusal = Some(format!(
                    "{} has no off value: type one (Enter) or reset it to the preset's (Backspace)",
                    field.name()
                ));
                false
            }
        }
    }

    fn next_seed(&mut self) -> u64 {
        // splitmix64: good enough to scatter seeds, and deterministic under test.
        self.roller = self.roller.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.roller;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // Short enough to read and type back, like the engine's random seeds.
        (z ^ (z >> 31)) % 1_000_000
    }

    /// Sets the selected field to the value a full slider times `fraction` shows (a click on
    /// the slider); the inverse of `gauge`. Fields without a slider do not change.
    pub fn set_fraction(&mut self, fraction: f64) -> bool {
        let f = fraction.clamp(0.0, 1.0);
        let value = match self.field().spec().knob {
            Knob::Decimal {
                limit: (lo_limit, hi_limit),
                slider: (lo, hi),
                ..
            } => decimal(((lo + f * (hi - lo)) * 100.0).round() / 100.0)
                .clamp_within(lo_limit, hi_limit),
            Knob::Doubling { max, vocab } => {
                let max = self.doubling_max(max, vocab);
                Value::from(f64::from(max).powf(f).round() as u32)
            }
            Knob::Count {
                limit: (lo, hi),
                log: true,
                ..
            } => Value::from(((hi as f64).powf(f).round() as i64).max(lo)),
            Knob::Count {
                limit: (lo, hi), ..
            } => Value::from(lo + (f * (hi - lo) as f64).round() as i64),
            Knob::Seed | Knob::Toggle | Knob::Choice(_) | Knob::Text | Knob::TokenList => {
                return false;
            }
        };
        self.apply_value(value)
    }

    /// The top of a doubling knob: its own, or the vocabulary's size where that is smaller.
    fn doubling_max(&self, max: u32, vocab: bool) -> u32 {
        match self.vocab_size.filter(|_| vocab) {
            Some(size) => max.min(size.max(1)),
            None => max,
        }
    }

    pub fn roll_seed(&mut self) -> bool {
        let seed = self.next_seed();
        self.set_seed(Some(seed))
    }

    /// Takes `seed`; whether it changed.
    pub fn set_seed(&mut self, seed: Option<u64>) -> bool {
        let mut p = self.params.clone();
        p.seed = seed;
        self.apply(p)
    }

    /// Enter: toggles and choices move at once; anything else opens the editor on its value.
    pub fn edit(&mut self) -> bool {
        if matches!(self.field().spec().knob, Knob::Toggle | Knob::Choice(_)) {
            return self.nudge(1, false);
        }
        // Selected, so that typing replaces the value rather than appending to it.
        self.editor = Some(FieldEditor {
            buffer: TextBuffer::selected(edit_text(&self.params, self.field())),
            error: None,
        });
        false
    }

    /// Applies the typed value; an invalid one keeps the editor open with the reason.
    pub fn commit(&mut self) -> bool {
        let field = self.field();
        let Some(editor) = &mut self.editor else {
            return false;
        };
        let mut p = self.params.clone();
        let set = if field.spec().knob == Knob::TokenList {
            token_texts::parse(&editor.buffer.text).and_then(|value| {
                p.set_field(field, value)
                    .and_then(|()| p.validate())
                    .map_err(|e| e.to_string())
            })
        } else {
            p.set_text(field.name(), &editor.buffer.text)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    crate::sampling::check_constraint(&p).map_err(|e| {
                        let message = e.to_string();
                        place_cursor(&mut editor.buffer, &message);
                        message
                    })
                })
        };
        match set {
            Ok(()) => {
                self.editor = None;
                self.apply(p)
            }
            Err(e) => {
                editor.error = Some(e);
                false
            }
        }
    }
}

/// Puts the editor's cursor where a constraint's error says the mistake is ("line 3, column 7"
/// of the grammar, which the YAML block form holds from its second line, indented).
fn place_cursor(buffer: &mut TextBuffer, message: &str) {
    let number_after = |word: &str| -> Option<usize> {
        let rest = &message[message.find(word)? + word.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let (Some(line), Some(column)) = (number_after("line "), number_after("column ")) else {
        return;
    };
    let block = buffer.text.lines().position(|l| {
        let l = l.trim_end();
        l.ends_with('|') || l.ends_with("|-")
    });
    let (skip, indent) = match block {
        Some(header) => {
            let body = buffer.text.lines().nth(header + 1).unwrap_or_default();
            (header + 1, body.len() - body.trim_start().len())
        }
        None => (0, 0),
    };
    let mut offset = 0;
    for (i, text) in buffer.text.split('\n').enumerate() {
        if i + 1 == line + skip {
            let at = (indent + column.saturating_sub(1)).min(text.len());
            buffer.cursor = offset
                + (0..=at)
                    .rev()
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0);
            buffer.selected = false;
            return;
        }
        offset += text.len() + 1;
    }
}

/// The row of `field` in the panel.
fn row_of(field: Field) -> usize {
    Field::ALL.iter().position(|&f| f == field).unwrap_or(0)
}

/// A YAML number as f64.
fn number(value: &Value) -> Option<f64> {
    value.as_f64()
}

/// A decimal as a YAML number, rounded to the 1e-9 grid so that 0.1 + 0.05 is 0.15 exactly.
fn decimal(x: f64) -> Value {
    let rounded = (x * 1e9).round() / 1e9;
    Value::from(rounded)
}

trait ClampWithin {
    fn clamp_within(self, lo: f64, hi: f64) -> Value;
}

impl ClampWithin for Value {
    fn clamp_within(self, lo: f64, hi: f64) -> Value {
        match number(&self) {
            Some(x) => decimal(x.clamp(lo, hi)),
            None => self,
        }
    }
}

/// Which side of a decimal knob's `limit` its off value lies on, where it lies outside: below
/// (adaptive_target's -1), or above (null: top_h off keeps more than any value does).
fn off_beyond(off: &Value, (lo, hi): (f64, f64)) -> Option<Ordering> {
    match number(off) {
        None => Some(Ordering::Greater),
        Some(x) if x < lo => Some(Ordering::Less),
        Some(x) if x > hi => Some(Ordering::Greater),
        Some(_) => None,
    }
}

/// The next point of the `step` grid in the direction of travel, `steps` times. A value on the
/// grid (within round-off of its decimal) moves a whole step.
fn decimal_step(x: f64, steps: i32, step: f64) -> f64 {
    let units = x / step;
    let base = if (units - units.round()).abs() < 1e-6 {
        units.round()
    } else if steps > 0 {
        units.floor()
    } else {
        units.ceil()
    };
    (base + f64::from(steps)) * step
}

/// Powers of two, with off (`None`) below 1; a value between powers moves to the next one.
fn doubling_step(value: Option<u32>, steps: i32, max: u32) -> Option<u32> {
    let mut v = value;
    for _ in 0..steps.unsigned_abs() {
        v = match (v, steps > 0) {
            (None, true) => Some(1),
            (None, false) | (Some(0 | 1), false) => None,
            (Some(n), true) => Some(
                n.saturating_add(1)
                    .checked_next_power_of_two()
                    .unwrap_or(n)
                    .min(max.max(n)),
            ),
            (Some(n), false) => Some(1 << (31 - (n - 1).leading_zeros())),
        };
    }
    v
}

/// The parameters that hold a constraint (structured outputs): edited over several lines
/// (Ctrl+J starts a new one), and checked for syntax when applied.
const CONSTRAINTS: [Field; 3] = [Field::StructuredOutputs, Field::Grammar, Field::JsonSchema];

/// The value as the editor starts it: YAML that `set_text` reads back; empty means null.
fn edit_text(params: &SamplingParams, field: Field) -> String {
    if field.spec().knob == Knob::TokenList {
        return token_list(params, field)
            .map(|list| token_texts::format(&list))
            .unwrap_or_default();
    }
    if CONSTRAINTS.contains(&field) && !params.is_off(field) {
        // Schemas and grammars run over lines: YAML's block form keeps them readable and a
        // grammar's line breaks intact.
        let yaml = serde_yaml_ng::to_string(&params.get(field)).unwrap_or_default();
        return yaml.trim_end().to_owned();
    }
    match params.get(field) {
        Value::Null => String::new(),
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), |x| x.to_string()),
        Value::String(s) => s,
        other => compact(&other),
    }
}

/// The list a [`Knob::TokenList`] field holds; `None` when it is null.
fn token_list(params: &SamplingParams, field: Field) -> Option<TokenTexts> {
    serde_yaml_ng::from_value(params.get(field)).ok()
}

/// A value on one line, as JSON writes it (YAML reads it back).
fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The value as the panel shows it: `off` for every parameter at its off value, however the
/// value is spelled.
pub fn value_text(params: &SamplingParams, field: Field) -> String {
    let value = params.get(field);
    match (field.spec().knob, &value) {
        (Knob::Seed, Value::Null) => "random".to_owned(),
        (_, Value::Null) if field == Field::Samplers => "default".to_owned(),
        _ if params.is_off(field) => "off".to_owned(),
        (Knob::TokenList, _) => {
            token_list(params, field).map_or_else(String::new, |list| token_texts::format(&list))
        }
        (Knob::Toggle, Value::Bool(on)) => if *on { "on" } else { "off" }.to_owned(),
        (Knob::Doubling { .. }, Value::Number(n)) if n.as_i64().is_some_and(|n| n < 0) => {
            "all".to_owned()
        }
        (Knob::Decimal { .. }, Value::Number(n)) => {
            let shortest = n.to_string();
            let decimals = shortest.split_once('.').map_or(0, |(_, d)| d.len());
            match n.as_f64() {
                Some(x) if decimals <= 2 => format!("{x:.2}"),
                _ => shortest,
            }
        }
        (_, Value::Number(n)) => n.to_string(),
        (_, Value::String(s)) => s.clone(),
        (_, other) => compact(other),
    }
}

/// How full the slider is, or `None` for fields without one (text, toggles, off values).
fn gauge(state: &ParamsState, field: Field) -> Option<f64> {
    let params = &state.params;
    let x = number(&params.get(field))?;
    let fraction = match field.spec().knob {
        Knob::Decimal {
            slider: (lo, hi), ..
        } => (x - lo) / (hi - lo),
        Knob::Doubling { max, vocab } if x >= 1.0 => {
            x.log2() / f64::from(state.doubling_max(max, vocab)).log2()
        }
        Knob::Count {
            limit: (_, hi),
            log: true,
            ..
        } => x.max(1.0).log2() / (hi as f64).log2(),
        Knob::Count {
            limit: (lo, hi), ..
        } => (x - lo as f64) / (hi - lo) as f64,
        _ => return None,
    };
    Some(fraction.clamp(0.0, 1.0))
}

const LABEL_WIDTH: usize = 11;
const VALUE_WIDTH: usize = 6;

/// Where a row of `width` cells draws its slider: (first cell, cells); `None` when too narrow.
/// The view and the mouse share it, so a click lands where the slider is drawn.
pub fn slider_cells(width: usize) -> Option<(usize, usize)> {
    let room = width.saturating_sub(LABEL_WIDTH + 2 + VALUE_WIDTH);
    (room >= 3).then_some((LABEL_WIDTH + 1, room))
}

/// The first row shown in a panel with room for `visible` rows: the table scrolls so that the
/// selected row stays in view, centred where it can be. The view and the mouse share it.
pub fn first_row(selected: usize, visible: usize) -> usize {
    let n = Field::ALL.len();
    if visible >= n {
        return 0;
    }
    selected.saturating_sub(visible / 2).min(n - visible.max(1))
}

/// The set being edited next to another (A/B): its letter, and the other set's parameters,
/// whose differing rows are marked `≠`.
pub struct Compared<'a> {
    pub letter: char,
    pub other: &'a SamplingParams,
}

/// A served model's server and the parameters it has no place for: their rows are marked
/// `✗` and say so, since the server will not apply them.
pub struct Served<'a> {
    pub server: &'a str,
    pub ignored: &'a [Field],
}

pub fn render(
    frame: &mut Frame,
    area: Rect,
    state: &ParamsState,
    compared: Option<Compared>,
    served: &[Served],
    focused: bool,
    theme: &Theme,
) {
    let title = format!(
        " params{} · {}{} ",
        compared
            .as_ref()
            .map(|c| format!(" {}", c.letter))
            .unwrap_or_default(),
        state.preset_name,
        if state.modified() { "*" } else { "" }
    );
    let block = Block::bordered()
        .title(Span::styled(title, theme.title))
        .border_style(theme.frame(focused));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = usize::from(inner.width);
    let visible = visible_rows(state, served, inner);
    let first = first_row(state.selected, visible);
    let mut lines = Vec::with_capacity(visible + 3);
    let mut cursor = None;
    for (i, &field) in Field::ALL.iter().enumerate().skip(first).take(visible) {
        let selected = i == state.selected;
        let spec = field.spec();
        let lost = lost_on(served, field);
        let applies = spec.engines.has(state.params.engine);
        let row_style = match (selected && focused, applies && lost.is_none()) {
            (true, _) => theme.selected,
            (false, true) => theme.base,
            (false, false) => theme.dim,
        };
        let differs = compared
            .as_ref()
            .is_some_and(|c| value_text(c.other, field) != value_text(&state.params, field));
        let mut spans = vec![
            Span::styled(format!("{:<LABEL_WIDTH$}", spec.label), row_style),
            if differs {
                Span::styled("≠", theme.value.patch(row_style))
            } else if lost.is_some() {
                Span::styled("✗", theme.error.patch(row_style))
            } else {
                Span::styled(" ", row_style)
            },
        ];
        let mut below = Vec::new();
        match (&state.editor, selected) {
            (Some(editor), true) => {
                let (line, col) = editor.buffer.cursor_line_col();
                cursor = Some((LABEL_WIDTH + 1 + col, lines.len() + line));
                let style = match editor.buffer.selected {
                    true => theme
                        .editor
                        .add_modifier(ratatui::style::Modifier::REVERSED),
                    false => theme.editor,
                };
                // A value over several lines (a grammar, a schema) opens below its row.
                let mut text_lines = editor.buffer.text.split('\n');
                spans.push(Span::styled(
                    text_lines.next().unwrap_or_default().to_owned(),
                    style,
                ));
                below = text_lines
                    .map(|text| {
                        Line::from(vec![
                            Span::raw(" ".repeat(LABEL_WIDTH + 1)),
                            Span::styled(text.to_owned(), style),
                        ])
                    })
                    .collect();
            }
            _ if !applies => spans.push(Span::styled(
                not_applied(state, field),
                theme.dim.patch(row_style),
            )),
            _ => {
                let value = value_text(&state.params, field);
                let slider = slider_cells(width).filter(|_| value.chars().count() <= VALUE_WIDTH);
                if let (Some(fraction), Some((_, room))) = (gauge(state, field), slider) {
                    let filled = (fraction * room as f64).round() as usize;
                    spans.push(Span::styled(
                        "▮".repeat(filled),
                        theme.gauge_filled.patch(row_style),
                    ));
                    spans.push(Span::styled(
                        "▯".repeat(room - filled),
                        theme.gauge_empty.patch(row_style),
                    ));
                    spans.push(Span::styled(
                        format!(" {value:>VALUE_WIDTH$}"),
                        theme.value.patch(row_style),
                    ));
                } else {
                    spans.push(Span::styled(value, theme.value.patch(row_style)));
                }
            }
        }
        lines.push(Line::from(spans));
        lines.extend(below);
    }
    // The rows past `visible` are the footer's; below an editor over several lines it shows
    // what fits.
    let (footer, style) = match refusal(state) {
        Some(refusal) => (word_wrap(refusal, width), theme.error),
        None => (help_rows(state, served, state.field(), width), theme.dim),
    };
    let room = usize::from(inner.height).saturating_sub(lines.len());
    lines.extend(
        footer
            .into_iter()
            .take(room)
            .map(|row| Line::styled(row, style)),
    );
    frame.render_widget(Paragraph::new(lines), inner);
    if let Some((x, y)) = cursor
        && focused
        && x < width
        && y < usize::from(inner.height)
    {
        frame.set_cursor_position(Position::new(inner.x + x as u16, inner.y + y as u16));
    }
}

/// How many parameter rows the panel drawn in `area` shows: what PgUp/PgDn move by.
pub fn page_rows(state: &ParamsState, served: &[Served], area: Rect) -> usize {
    visible_rows(state, served, Block::bordered().inner(area))
}

/// How many parameter rows fit `inner`, the panel's inside: the rest is the footer's. It
/// holds the longest help at this width (up to a third of the panel), so that the table keeps
/// its height as the selection moves; a refusal longer than that takes more while it shows,
/// since it says what would be right.
pub fn visible_rows(state: &ParamsState, served: &[Served], inner: Rect) -> usize {
    let (width, height) = (usize::from(inner.width), usize::from(inner.height));
    let help = Field::ALL
        .iter()
        .map(|&field| help_rows(state, served, field, width).len())
        .max()
        .unwrap_or(1)
        .min((height / 3).max(1));
    let refused = refusal(state).map_or(0, |refusal| word_wrap(refusal, width).len());
    let footer = help.max(refused);
    if height > footer + 3 {
        (height - footer).min(Field::ALL.len())
    } else {
        height.min(Field::ALL.len())
    }
}

/// Why the typed value, or else the last move, was refused.
fn refusal(state: &ParamsState) -> Option<&String> {
    let typed = state.editor.as_ref().and_then(|e| e.error.as_ref());
    typed.or(state.refusal.as_ref())
}

/// `field`'s help wrapped to `width`, first saying when a served model will not apply it.
fn help_rows(state: &ParamsState, served: &[Served], field: Field, width: usize) -> Vec<String> {
    let help = help_line(state.params.engine, field);
    let help = match lost_on(served, field) {
        Some(server) => format!("✗ not applied: {server} has no such parameter · {help}"),
        None => help,
    };
    word_wrap(&help, width)
}

/// The server of a served model that has no place for `field`, if one has none.
fn lost_on<'a>(served: &[Served<'a>], field: Field) -> Option<&'a str> {
    served
        .iter()
        .find(|s| s.ignored.contains(&field))
        .map(|s| s.server)
}

/// The selected parameter's help, and which engines have it when the chosen one does not.
fn help_line(engine: crate::params::Engine, field: Field) -> String {
    let spec = field.spec();
    if spec.engines.has(engine) {
        spec.help.to_owned()
    } else {
        format!("{} only · {}", spec.engines.titles(), spec.help)
    }
}

/// A row the engine has no place for: `n/a in vLLM`, with the value set aside for it.
fn not_applied(state: &ParamsState, field: Field) -> String {
    let engine = state.params.engine.title();
    let mut shown = state.params.clone();
    match state.kept_value(field) {
        Some(value) if shown.set_field(field, value.clone()).is_ok() => {
            format!("n/a in {engine}, {} kept", value_text(&shown, field))
        }
        _ => format!("n/a in {engine}"),
    }
}

/// `next`'s engine lacks the parameters in `kept` it does not have: those `next` sets move
/// into `kept` (back to their defaults in `next`), and those in `kept` it has come back.
fn switch_engine(next: &mut SamplingParams, kept: &mut Vec<(Field, Value)>) {
    let defaults = SamplingParams::default();
    let (back, still): (Vec<_>, Vec<_>) = std::mem::take(kept)
        .into_iter()
        .partition(|(field, _)| field.spec().engines.has(next.engine));
    *kept = still;
    for &field in Field::ALL {
        if next.is_outside_engine(field, &defaults) {
            kept.push((field, next.get(field)));
            // A field's own default always sets.
            let _ = next.set_field(field, defaults.get(field));
        }
    }
    for (field, value) in back {
        if next.set_field(field, value.clone()).is_err() {
            kept.push((field, value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(field: &str) -> ParamsState {
        let mut s = ParamsState::new(Preset::built_in("default", SamplingParams::default()), 7);
        s.selected = Field::ALL.iter().position(|f| f.name() == field).unwrap();
        s
    }

    /// A grammar is edited over lines in YAML's block form, and one that does not parse keeps
    /// the editor open with the reason, the cursor on the line and column it names.
    #[test]
    fn constraints_edit_over_lines_and_point_at_their_error() {
        let mut s = state("structured_outputs");
        s.params.structured_outputs = Some(crate::params::StructuredOutputs::Grammar(
            "root ::= item+\nitem ::= \"a\" | \"b\"".into(),
        ));
        s.edit();
        let editor = s.editor.as_mut().unwrap();
        assert_eq!(
            editor.buffer.text,
            "grammar: |-\n  root ::= item+\n  item ::= \"a\" | \"b\""
        );
        editor.buffer.text = "grammar: |-\n  root ::= item+\n  item ::= \"a\" | [b".into();
        assert!(!s.commit());
        let editor = s.editor.as_ref().unwrap();
        let error = editor.error.as_deref().unwrap();
        assert!(error.contains("line 2"), "{error}");
        assert_eq!(editor.buffer.cursor_line_col().0, 2, "{error}");
        assert!(s.params.structured_outputs.is_some());
    }

    #[test]
    fn starts_with_a_token_limit_and_a_fixed_seed() {
        let s = state("seed");
        assert_eq!(s.params.max_tokens, Some(START_MAX_TOKENS));
        assert!(s.params.seed.is_some());
        assert!(!s.modified());
    }

    #[test]
    fn floats_move_on_their_grid_and_stop_at_the_range() {
        let mut s = state("temperature");
        assert!(s.nudge(1, false));
        assert_eq!(s.params.temperature, 1.05);
        s.params.temperature = 0.73;
        s.nudge(-1, false);
        assert_eq!(s.params.temperature, 0.7);
        s.nudge(-1, true);
        assert_eq!(s.params.temperature, 0.5);
        let mut s = state("top_p");
        assert!(!s.nudge(1, false), "top_p is already at 1");
        s.nudge(-3, true);
        assert_eq!(s.params.top_p, 0.7);
    }

    #[test]
    fn doubling_and_count_knobs_pass_through_off() {
        assert_eq!(doubling_step(None, 1, 1 << 16), Some(1));
        assert_eq!(doubling_step(Some(1), -1, 1 << 16), None);
        assert_eq!(doubling_step(Some(40), 1, 1 << 16), Some(64));
        assert_eq!(doubling_step(Some(40), -1, 1 << 16), Some(32));
        assert_eq!(doubling_step(Some(64), -2, 1 << 16), Some(16));
        assert_eq!(doubling_step(Some(1 << 16), 1, 1 << 16), Some(1 << 16));
        let mut s = state("logprobs");
        assert!(s.nudge(1, false));
        assert_eq!(s.params.logprobs, Some(0));
        assert!(s.nudge(-1, false));
        assert_eq!(s.params.logprobs, None);
        s.params.logprobs = Some(18);
        s.nudge(1, true);
        assert_eq!(s.params.logprobs, Some(20));
        let mut s = state("top_k");
        s.nudge(1, false);
        assert_eq!(s.params.top_k, 1);
        s.nudge(-1, false);
        assert_eq!(s.params.top_k, -1, "below 1 top_k is off");
    }

    /// A decimal whose off lies beyond its range turns off past that end and comes back in at
    /// it: adaptive_target below 0 (its -1), top_h above 1 (null, keeping every token).
    #[test]
    fn decimals_off_beyond_their_range_pass_through_off() {
        let mut s = state("adaptive_target");
        s.params.engine = crate::params::Engine::LlamaCpp;
        assert!(!s.nudge(-1, false), "already off");
        assert!(s.nudge(1, false));
        assert_eq!(s.params.adaptive_target, 0.0);
        s.nudge(1, false);
        assert_eq!(s.params.adaptive_target, 0.05);
        s.nudge(-2, false);
        assert_eq!(s.params.adaptive_target, -1.0);
        let mut s = state("top_h");
        s.params.engine = crate::params::Engine::Transformers;
        assert!(!s.nudge(1, false), "already off");
        assert!(s.nudge(-1, false));
        assert_eq!(s.params.top_h, Some(1.0));
        s.nudge(-1, false);
        assert_eq!(s.params.top_h, Some(0.95));
        s.nudge(2, false);
        assert_eq!(s.params.top_h, None);
        assert_eq!(value_text(&s.params, Field::TopH), "off");
    }

    /// Issue 14's sticking nudges: every step lands on the next decimal, both ways.
    #[test]
    fn float_nudges_never_stick() {
        for (field, from, to) in [
            ("top_p", 0.9, 0.5),
            ("repetition_penalty", 1.0, 1.5),
            ("temperature", 1.5, 3.0),
            ("min_p", 0.0, 0.3),
        ] {
            let mut s = state(field);
            let f = s.field();
            s.params.set_field(f, Value::from(from)).unwrap();
            let down = to < from;
            let mut seen = vec![value_text(&s.params, f)];
            while number(&s.params.get(f)).unwrap() != to {
                assert!(
                    s.nudge(if down { -1 } else { 1 }, false),
                    "{field} stuck at {}",
                    seen.last().unwrap()
                );
                let shown = value_text(&s.params, f);
                assert_ne!(Some(&shown), seen.last(), "{field} did not move");
                seen.push(shown);
                assert!(seen.len() < 100, "{field} never reached {to}");
            }
        }
    }

    /// Issue 14: top_k went up to 65536 on a 1,024-token vocabulary.
    #[test]
    fn top_k_stops_at_the_vocabulary() {
        let mut s = state("top_k");
        s.vocab_size = Some(1000);
        s.params.top_k = 512;
        assert!(s.nudge(1, false));
        assert_eq!(s.params.top_k, 1000);
        assert!(
            !s.nudge(1, false),
            "past the vocabulary top_k changes nothing"
        );
        assert!(s.set_fraction(1.0) || s.params.top_k == 1000);
        assert_eq!(s.params.top_k, 1000);
        s.select_field(Field::MaxTokens);
        s.params.max_tokens = Some(1024);
        assert!(s.nudge(1, false));
        assert_eq!(
            s.params.max_tokens,
            Some(2048),
            "other counts are not capped"
        );
    }

    /// Issue 34: switching to an engine that lacks a parameter set keeps its value aside
    /// (shown beside `n/a`) instead of refusing, and gives it back with an engine that has it.
    #[test]
    fn choices_cycle_and_another_engines_values_are_kept_aside() {
        let mut s = state("engine");
        assert!(s.edit());
        assert_eq!(s.params.engine, crate::params::Engine::Transformers);
        s.nudge(1, false);
        assert_eq!(s.params.engine, crate::params::Engine::LlamaCpp);
        s.select_field(Field::DryMultiplier);
        assert!(s.nudge(1, false));
        assert_eq!(s.params.dry_multiplier, 0.05);
        s.select_field(Field::Engine);
        assert!(s.nudge(1, false), "vLLM has no DRY: the value is set aside");
        assert_eq!(s.params.engine, crate::params::Engine::Vllm);
        assert_eq!(s.params.dry_multiplier, 0.0, "vLLM runs without it");
        assert!(s.params.validate().is_ok());
        assert_eq!(s.kept_value(Field::DryMultiplier), Some(&Value::from(0.05)));
        assert_eq!(
            not_applied(&s, Field::DryMultiplier),
            "n/a in vLLM, 0.05 kept"
        );
        assert_eq!(not_applied(&s, Field::Mirostat), "n/a in vLLM");
        // Back through transformers (no DRY either) to llama.cpp, which has it again.
        s.nudge(1, false);
        assert_eq!(s.params.dry_multiplier, 0.0);
        s.nudge(1, false);
        assert_eq!(s.params.engine, crate::params::Engine::LlamaCpp);
        assert_eq!(s.params.dry_multiplier, 0.05, "given back");
        assert!(s.kept.is_empty());
    }

    #[test]
    fn turning_off_a_parameter_with_no_off_value_says_so() {
        let mut s = state("temperature");
        assert!(!s.turn_off());
        let refusal = s.refusal.clone().expect("x says why nothing changed");
        assert!(
            refusal.contains("temperature has no off value"),
            "{refusal}"
        );
        s.select_field(Field::TopK);
        assert!(s.turn_off() || s.params.top_k == -1);
    }

    #[test]
    fn the_table_scrolls_to_keep_the_selected_row_in_view() {
        let n = Field::ALL.len();
        assert_eq!(first_row(0, 10), 0);
        assert_eq!(first_row(n - 1, 10), n - 10);
        let middle = first_row(20, 10);
        assert!((middle..middle + 10).contains(&20));
        assert_eq!(first_row(30, n + 5), 0);
    }

    #[test]
    fn a_click_on_the_slider_sets_the_value_the_slider_then_shows() {
        for (field, at) in [
            ("temperature", 0.4),
            ("top_p", 0.9),
            ("min_p", 0.05),
            ("repetition_penalty", 0.3),
            ("max_tokens", 0.5),
            ("top_k", 0.25),
            ("num_samples", 0.5),
            ("logprobs", 0.5),
        ] {
            let mut s = state(field);
            assert!(s.set_fraction(at), "{field}");
            let shown = gauge(&s, s.field()).unwrap();
            assert!((shown - at).abs() < 0.01, "{field}: {shown} for {at}");
        }
        let mut s = state("top_p");
        s.set_fraction(0.0);
        assert_eq!(s.params.top_p, 0.01, "top_p stays valid at the left end");
        let mut s = state("temperature");
        s.set_fraction(0.0);
        assert_eq!(s.params.temperature, 0.0, "greedy is reachable");
        assert!(!state("seed").set_fraction(0.5), "no slider");
        assert_eq!(slider_cells(34), Some((12, 15)));
        assert_eq!(slider_cells(20), None);
    }

    #[test]
    fn value_texts_say_off_and_escape_stop_strings() {
        let mut p = SamplingParams::default();
        assert_eq!(value_text(&p, Field::TopK), "off");
        assert_eq!(value_text(&p, Field::RepeatLastN), "64");
        p.set_text("stop", r#"["\n\n", 13]"#).unwrap();
        assert_eq!(value_text(&p, Field::Stop), r#""\n\n", #13"#);
        assert_eq!(edit_text(&p, Field::Stop), r#""\n\n", #13"#);
        p.temperature = 1.1;
        assert_eq!(edit_text(&p, Field::Temperature), "1.1");
        assert_eq!(value_text(&p, Field::Temperature), "1.10");
        assert_eq!(edit_text(&p, Field::TopP), "1");
        assert_eq!(edit_text(&p, Field::Seed), "");
        assert_eq!(
            value_text(&p, Field::DrySequenceBreakers),
            r#"["\n",":","\"","*"]"#
        );
        p.repeat_last_n = -1;
        assert_eq!(value_text(&p, Field::RepeatLastN), "all");
    }

    /// Issue 34: off read `top_k off`, `top_p 1.00` and `top_n_sigma -1.00`.
    #[test]
    fn every_parameter_at_its_off_value_reads_off() {
        for &field in Field::ALL {
            let Some(off) = field.spec().off_value() else {
                continue;
            };
            let mut p = SamplingParams::default();
            p.set_field(field, off).unwrap();
            let shown = value_text(&p, field);
            let expected = if field == Field::Samplers {
                "default"
            } else {
                "off"
            };
            assert_eq!(shown, expected, "{}", field.name());
        }
        let mut p = SamplingParams {
            top_k: 0,
            ..SamplingParams::default()
        };
        assert_eq!(value_text(&p, Field::TopK), "off", "0 is read as off");
        p.top_p = 0.9;
        p.min_tokens = 3;
        assert_eq!(value_text(&p, Field::TopP), "0.90");
        assert_eq!(value_text(&p, Field::MinTokens), "3");
        assert_eq!(value_text(&p, Field::Temperature), "1.00", "no off value");
    }
}
