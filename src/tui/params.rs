//! The params panel: one slider row per `SamplingParams` field, with nudging, log-scale steps,
//! reset, an inline editor for exact values, and its view.

use super::stop_text;
use super::text::TextBuffer;
use super::theme::Theme;
use crate::params::{FIELDS, MAX_LOGPROBS, MAX_SAMPLES, SamplingParams};
use crate::presets::{Preset, PresetSource};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

/// max_tokens the TUI starts with when the preset leaves it unlimited: a run must end soon.
pub const START_MAX_TOKENS: u32 = 128;
/// The largest value the log-scale knobs reach by nudging; typing goes further.
const LOG_MAX: u32 = 1 << 16;

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
    pub selected: usize,
    pub editor: Option<FieldEditor>,
    /// State of the seed roller, so rolling stays a pure function of the state.
    roller: u64,
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
            selected: FIELDS.iter().position(|&f| f == "temperature").unwrap_or(0),
            editor: None,
            roller: entropy,
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
    }

    pub fn field(&self) -> &'static str {
        FIELDS[self.selected.min(FIELDS.len() - 1)]
    }

    /// Whether the params behave differently from the preset as loaded: `*` in the status bar.
    /// Compared in canonical spelling, so that typing `top_k` 0 over -1 is no change.
    pub fn modified(&self) -> bool {
        self.params.normalized() != self.baseline.normalized()
    }

    /// Stops at the first and last rows: wrapping round put a held ↑ on num_samples.
    pub fn select(&mut self, delta: i32) {
        let last = FIELDS.len() as i64 - 1;
        self.selected = (self.selected as i64 + i64::from(delta)).clamp(0, last) as usize;
    }

    /// Takes `next` when it is valid and different; returns whether anything changed.
    fn apply(&mut self, next: SamplingParams) -> bool {
        if next != self.params && next.validate().is_ok() {
            self.params = next;
            true
        } else {
            false
        }
    }

    pub fn nudge(&mut self, steps: i32, coarse: bool) -> bool {
        let mut p = self.params.clone();
        let scale = |fine: i32, big: i32| steps.saturating_mul(if coarse { big } else { fine });
        match self.field() {
            "max_tokens" => p.max_tokens = log_step(p.max_tokens, scale(1, 4)),
            "top_k" => {
                let k = u32::try_from(p.top_k).ok().filter(|&k| k > 0);
                p.top_k = log_step(k, scale(1, 4)).map_or(-1, |k| k as i32);
            }
            "seed" => {
                let seed = p.seed.unwrap_or(0);
                let delta = i64::from(scale(1, 100));
                p.seed = Some(seed.saturating_add_signed(delta));
            }
            "stop" => {}
            "include_stop_str_in_output" => p.include_stop_str_in_output ^= steps % 2 != 0,
            "temperature" => {
                p.temperature = float_step(p.temperature, steps, coarse, 0.05, 0.5, 0.0, 5.0)
            }
            "top_p" => p.top_p = float_step(p.top_p, steps, coarse, 0.01, 0.1, 0.01, 1.0),
            "min_p" => p.min_p = float_step(p.min_p, steps, coarse, 0.01, 0.1, 0.0, 1.0),
            "repetition_penalty" => {
                p.repetition_penalty =
                    float_step(p.repetition_penalty, steps, coarse, 0.01, 0.1, 0.01, 3.0)
            }
            "num_samples" => {
                let n = i64::from(p.num_samples) + i64::from(scale(1, 4));
                p.num_samples = n.clamp(1, i64::from(MAX_SAMPLES)) as u32;
            }
            "logprobs" => p.logprobs = count_step(p.logprobs, scale(1, 5)),
            "prompt_logprobs" => p.prompt_logprobs = count_step(p.prompt_logprobs, scale(1, 5)),
            other => unreachable!("FIELDS has no {other}"),
        }
        self.apply(p)
    }

    /// Back to the baseline value of the selected field.
    pub fn reset(&mut self) -> bool {
        let field = self.field();
        let mut p = self.params.clone();
        let value = match serde_yaml_ng::to_value(&self.baseline) {
            Ok(serde_yaml_ng::Value::Mapping(map)) => map.get(field).cloned(),
            _ => None,
        };
        match value.map(|value| p.set(field, value)) {
            Some(Ok(())) => self.apply(p),
            _ => false,
        }
    }

    /// Null for optional fields, the value that disables a filter otherwise.
    pub fn turn_off(&mut self) -> bool {
        let mut p = self.params.clone();
        match self.field() {
            "max_tokens" => p.max_tokens = None,
            "seed" => p.seed = None,
            "stop" => p.stop = None,
            "include_stop_str_in_output" => p.include_stop_str_in_output = false,
            "top_k" => p.top_k = -1,
            "top_p" => p.top_p = 1.0,
            "min_p" => p.min_p = 0.0,
            "repetition_penalty" => p.repetition_penalty = 1.0,
            "logprobs" => p.logprobs = None,
            "prompt_logprobs" => p.prompt_logprobs = None,
            _ => {}
        }
        self.apply(p)
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
        let log = |max: u32| f64::from(max).powf(f).round() as u32;
        let count = |max: u32| (f * f64::from(max)).round() as u32;
        let mut p = self.params.clone();
        match self.field() {
            "max_tokens" => p.max_tokens = Some(log(LOG_MAX)),
            "top_k" => p.top_k = log(LOG_MAX) as i32,
            "temperature" => p.temperature = hundredths(f * 2.0),
            "top_p" => p.top_p = hundredths(f.max(0.01)),
            "min_p" => p.min_p = hundredths(f),
            "repetition_penalty" => p.repetition_penalty = hundredths(1.0 + f),
            "num_samples" => p.num_samples = log(MAX_SAMPLES),
            "logprobs" => p.logprobs = Some(count(MAX_LOGPROBS)),
            "prompt_logprobs" => p.prompt_logprobs = Some(count(MAX_LOGPROBS)),
            _ => return false,
        }
        self.apply(p)
    }

    pub fn roll_seed(&mut self) -> bool {
        let mut p = self.params.clone();
        p.seed = Some(self.next_seed());
        self.apply(p)
    }

    /// Enter: bools toggle at once; anything else opens the editor on its current value.
    pub fn edit(&mut self) -> bool {
        if self.field() == "include_stop_str_in_output" {
            return self.nudge(1, false);
        }
        self.editor = Some(FieldEditor {
            buffer: TextBuffer::new(edit_text(&self.params, self.field())),
            error: None,
        });
        false
    }

    /// Applies the typed value; an invalid one keeps the editor open with the reason.
    pub fn commit(&mut self) -> bool {
        let Some(editor) = &mut self.editor else {
            return false;
        };
        let mut p = self.params.clone();
        let field = FIELDS[self.selected];
        let set = if field == "stop" {
            stop_text::parse(&editor.buffer.text).and_then(|value| {
                p.set(field, value)
                    .and_then(|()| p.validate())
                    .map_err(|e| e.to_string())
            })
        } else {
            p.set_text(field, &editor.buffer.text)
                .map_err(|e| e.to_string())
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

/// Powers of two, with off (`None`) below 1; a value between powers moves to the next one.
fn log_step(value: Option<u32>, steps: i32) -> Option<u32> {
    let mut v = value;
    for _ in 0..steps.unsigned_abs() {
        v = match (v, steps > 0) {
            (None, true) => Some(1),
            (None, false) | (Some(0 | 1), false) => None,
            (Some(n), true) => Some(
                n.saturating_add(1)
                    .checked_next_power_of_two()
                    .unwrap_or(n)
                    .min(LOG_MAX.max(n)),
            ),
            (Some(n), false) => Some(1 << (31 - (n - 1).leading_zeros())),
        };
    }
    v
}

/// Off (`None`) below 0, then 0..=MAX_LOGPROBS.
fn count_step(value: Option<u32>, steps: i32) -> Option<u32> {
    let position = value.map_or(-1, i64::from) + i64::from(steps);
    (position >= 0).then(|| position.min(i64::from(MAX_LOGPROBS)) as u32)
}

/// To the next multiple of the step in the direction of travel, rounded so that 0.1 + 0.05
/// becomes the f32 nearest 0.15 and shows as typed.
fn float_step(
    value: f32,
    steps: i32,
    coarse: bool,
    fine: f64,
    big: f64,
    min: f64,
    max: f64,
) -> f32 {
    let step = if coarse { big } else { fine };
    let grid = f64::from(value) / step;
    let base = if steps > 0 {
        (grid + 1e-6).floor()
    } else {
        (grid - 1e-6).ceil()
    };
    let next = ((base + f64::from(steps)) * step).clamp(min, max);
    hundredths(next)
}

/// The f32 nearest `value` rounded to two decimals, so that it shows as it would be typed.
fn hundredths(value: f64) -> f32 {
    format!("{value:.2}").parse().unwrap_or(value as f32)
}

/// The value as the editor starts it: YAML that `set_text` reads back; empty means null.
fn edit_text(params: &SamplingParams, field: &str) -> String {
    // f32 fields print themselves: through a JSON value they would widen to 1.100000023841858.
    let float = match field {
        "temperature" => Some(params.temperature),
        "top_p" => Some(params.top_p),
        "min_p" => Some(params.min_p),
        "repetition_penalty" => Some(params.repetition_penalty),
        _ => None,
    };
    if let Some(value) = float {
        return value.to_string();
    }
    if field == "stop" {
        return params
            .stop
            .as_ref()
            .map(stop_text::format)
            .unwrap_or_default();
    }
    match serde_json::to_value(params) {
        Ok(serde_json::Value::Object(map)) => match map.get(field) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(value) => value.to_string(),
        },
        _ => String::new(),
    }
}

/// Short labels so that the panel fits beside three sample columns.
fn label(field: &str) -> &str {
    match field {
        "include_stop_str_in_output" => "incl_stop",
        "repetition_penalty" => "rep_penalty",
        "num_samples" => "samples",
        "prompt_logprobs" => "prompt_lp",
        other => other,
    }
}

/// The value as the panel shows it.
pub fn value_text(params: &SamplingParams, field: &str) -> String {
    let off = || "off".to_owned();
    match field {
        "max_tokens" => params.max_tokens.map_or_else(off, |n| n.to_string()),
        "seed" => params
            .seed
            .map_or_else(|| "random".to_owned(), |s| s.to_string()),
        "stop" => match &params.stop {
            Some(stop) if !stop.is_empty() => stop_text::format(stop),
            _ => off(),
        },
        "include_stop_str_in_output" => if params.include_stop_str_in_output {
            "on"
        } else {
            "off"
        }
        .to_owned(),
        "temperature" => format!("{:.2}", params.temperature),
        "top_k" => params.top_k_limit().map_or_else(off, |k| k.to_string()),
        "top_p" => format!("{:.2}", params.top_p),
        "min_p" => format!("{:.2}", params.min_p),
        "repetition_penalty" => format!("{:.2}", params.repetition_penalty),
        "num_samples" => params.num_samples.to_string(),
        "logprobs" => params.logprobs.map_or_else(off, |n| n.to_string()),
        "prompt_logprobs" => params.prompt_logprobs.map_or_else(off, |n| n.to_string()),
        other => unreachable!("FIELDS has no {other}"),
    }
}

/// How full the slider is, or `None` for fields without one (text, bools, off values).
fn gauge(params: &SamplingParams, field: &str) -> Option<f64> {
    let log = |n: u32| f64::from(n).log2() / f64::from(LOG_MAX).log2();
    let fraction = match field {
        "max_tokens" => log(params.max_tokens?),
        "top_k" => log(u32::try_from(params.top_k_limit()?).ok()?),
        "temperature" => f64::from(params.temperature) / 2.0,
        "top_p" => f64::from(params.top_p),
        "min_p" => f64::from(params.min_p),
        "repetition_penalty" => f64::from(params.repetition_penalty) - 1.0,
        "num_samples" => f64::from(params.num_samples).log2() / f64::from(MAX_SAMPLES).log2(),
        "logprobs" => f64::from(params.logprobs?) / f64::from(MAX_LOGPROBS),
        "prompt_logprobs" => f64::from(params.prompt_logprobs?) / f64::from(MAX_LOGPROBS),
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

/// The set being edited next to another (A/B): its letter, and the other set's parameters,
/// whose differing rows are marked `≠`.
pub struct Compared<'a> {
    pub letter: char,
    pub other: &'a SamplingParams,
}

pub fn render(
    frame: &mut Frame,
    area: Rect,
    state: &ParamsState,
    compared: Option<Compared>,
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
    let mut lines = Vec::with_capacity(FIELDS.len() + 2);
    let mut cursor = None;
    for (i, &field) in FIELDS.iter().enumerate() {
        let selected = i == state.selected;
        let row_style = if selected && focused {
            theme.selected
        } else {
            theme.base
        };
        let differs = compared
            .as_ref()
            .is_some_and(|c| value_text(c.other, field) != value_text(&state.params, field));
        let mut spans = vec![
            Span::styled(format!("{:<LABEL_WIDTH$}", label(field)), row_style),
            if differs {
                Span::styled("≠", theme.value.patch(row_style))
            } else {
                Span::styled(" ", row_style)
            },
        ];
        match (&state.editor, selected) {
            (Some(editor), true) => {
                let (_, col) = editor.buffer.cursor_line_col();
                cursor = Some((LABEL_WIDTH + 1 + col, i));
                spans.push(Span::styled(editor.buffer.text.clone(), theme.editor));
            }
            _ => {
                let value = value_text(&state.params, field);
                let slider = slider_cells(width).filter(|_| value.chars().count() <= VALUE_WIDTH);
                if let (Some(fraction), Some((_, room))) = (gauge(&state.params, field), slider) {
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
    }
    if let Some(error) = state.editor.as_ref().and_then(|e| e.error.as_ref()) {
        lines.push(Line::default());
        lines.push(Line::styled(error.clone(), theme.error));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
    if let Some((x, y)) = cursor
        && focused
        && x < width
        && y < usize::from(inner.height)
    {
        frame.set_cursor_position(Position::new(inner.x + x as u16, inner.y + y as u16));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(field: &str) -> ParamsState {
        let mut s = ParamsState::new(Preset::built_in("default", SamplingParams::default()), 7);
        s.selected = FIELDS.iter().position(|&f| f == field).unwrap();
        s
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
    fn log_scales_pass_through_off() {
        assert_eq!(log_step(None, 1), Some(1));
        assert_eq!(log_step(Some(1), -1), None);
        assert_eq!(log_step(Some(40), 1), Some(64));
        assert_eq!(log_step(Some(40), -1), Some(32));
        assert_eq!(log_step(Some(64), -2), Some(16));
        assert_eq!(log_step(Some(LOG_MAX), 1), Some(LOG_MAX));
        assert_eq!(count_step(None, 1), Some(0));
        assert_eq!(count_step(Some(0), -1), None);
        assert_eq!(count_step(Some(18), 5), Some(MAX_LOGPROBS));
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
            let shown = gauge(&s.params, field).unwrap();
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
        assert_eq!(value_text(&p, "top_k"), "off");
        p.set_text("stop", r#"["\n\n", 13]"#).unwrap();
        assert_eq!(value_text(&p, "stop"), r#""\n\n", #13"#);
        assert_eq!(edit_text(&p, "stop"), r#""\n\n", #13"#);
        p.temperature = 1.1;
        assert_eq!(edit_text(&p, "temperature"), "1.1");
        assert_eq!(edit_text(&p, "top_p"), "1");
        assert_eq!(edit_text(&p, "seed"), "");
    }
}
