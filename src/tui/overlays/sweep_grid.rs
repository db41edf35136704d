//! The sweep's grid view: every cell of the last sweep with its figures (distinct-2, mean
//! logprob, lengths, stop reasons, the first line of sample 0). One or two axes make a table,
//! the first axis down and the second across; more make a list, one cell a line. The arrows
//! move through the cells and Enter opens one as the current run.

use super::popup;
use crate::engine::{Prompt, RunId};
use crate::params::SamplingParams;
use crate::params::sweep::{Axis, CellValues, describe};
use crate::response::SampleResponse;
use crate::tui::comparison::ModelId;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// A sweep: its grid and cells, run one after another on one model, each with the same seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// The grid as typed, offered again when a new sweep is asked for.
    pub text: String,
    pub axes: Vec<Axis>,
    pub cells: Vec<SweepCell>,
    pub model: ModelId,
    /// The prompt every cell ran on.
    pub prompt: Prompt,
    /// The cell run in flight (the first cell without an outcome).
    pub running: Option<RunId>,
    pub selected: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SweepCell {
    pub values: CellValues,
    pub params: SamplingParams,
    /// The finished run, or why it failed; `None` while waiting or running.
    pub outcome: Option<Result<Box<SampleResponse>, String>>,
}

impl Sweep {
    /// How the view lays the cells out: (rows, columns), the first axis down and the second
    /// across, or one cell a row when there are more than two axes.
    pub fn shape(&self) -> (usize, usize) {
        match self.axes.as_slice() {
            [down] => (down.values.len(), 1),
            [down, across] => (down.values.len(), across.values.len()),
            _ => (self.cells.len(), 1),
        }
    }

    /// Moves the selection `across` columns and `down` rows, stopping at the edges; in one
    /// column both step through the cells.
    pub fn step(&mut self, across: i32, down: i32) {
        let (rows, columns) = self.shape();
        let (row, column) = (self.selected / columns, self.selected % columns);
        let clamp = |at: usize, by: i32, len: usize| {
            (at as i64 + i64::from(by)).clamp(0, len.saturating_sub(1) as i64) as usize
        };
        self.selected = if columns == 1 {
            clamp(row, across + down, rows)
        } else {
            clamp(row, down, rows) * columns + clamp(column, across, columns)
        };
    }

    /// How many cells have an outcome.
    pub fn done(&self) -> usize {
        self.cells.iter().filter(|c| c.outcome.is_some()).count()
    }

    /// The cell waiting for its run: the first without an outcome.
    pub fn next_cell(&self) -> Option<usize> {
        self.cells.iter().position(|c| c.outcome.is_none())
    }
}

/// A cell's figures, one a line: `d2 0.67  lp -1.234`, `len 3.0 (2-4)`, `length 3 stop 1`, and
/// the first line of sample 0; or what became of it.
pub fn figures(cell: &SweepCell, running: bool) -> Vec<String> {
    let response = match &cell.outcome {
        None if running => return vec!["running…".to_owned()],
        None => return vec!["waiting".to_owned()],
        Some(Err(error)) => return vec![format!("failed: {error}")],
        Some(Ok(response)) => response,
    };
    let Some(stats) = &response.stats else {
        return vec!["no samples".to_owned()];
    };
    let figure =
        |x: Option<f64>, places: usize| x.map_or("-".to_owned(), |x| format!("{x:.places$}"));
    let reasons: Vec<String> = stats
        .stop_reasons
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    let first = response.trajectories.first().map_or("", |t| {
        t.text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
    });
    vec![
        format!(
            "d2 {}  lp {}",
            figure(stats.distinct_2, 2),
            figure(stats.mean_logprob, 3)
        ),
        format!(
            "len {:.1} ({}-{})",
            stats.length.mean, stats.length.min, stats.length.max
        ),
        reasons.join(" "),
        crate::terminal_text::escape_controls(first).into_owned(),
    ]
}

/// Lines of a table cell: its figures and a gap before the next row.
const CELL_LINES: u16 = 5;
/// Narrower table columns cannot show a cell's first figures.
const MIN_COLUMN: u16 = 18;

pub fn render(frame: &mut Frame, area: Rect, sweep: &Sweep, keymap: &KeyMap, theme: &Theme) {
    let hints = popup::hints(keymap, &[Mode::Sweep, Mode::Dialog]);
    let running = match sweep.running {
        Some(_) => format!(", running {}", sweep.done() + 1),
        None => String::new(),
    };
    let title = format!(
        "sweep: {}/{} cells{running}",
        sweep.done(),
        sweep.cells.len()
    );
    // Borders, the heading and the header row, then the cells; no taller than that.
    let (rows, _) = sweep.shape();
    let cells_height = match sweep.axes.len() {
        1 | 2 => rows * usize::from(CELL_LINES) - 1,
        _ => rows,
    };
    let height = u16::try_from(cells_height + 4).unwrap_or(u16::MAX);
    let popup_area = popup::centred(area, area.width.saturating_sub(2), height);
    let inner = popup::open(frame, popup_area, &title, &hints, theme);
    if inner.height < 2 || inner.width < 2 {
        return;
    }
    // Which axis goes where, and the selected cell's values in full: the headers may be cut.
    let axes = match sweep.axes.as_slice() {
        [down] => format!("{} ↓   ", down.key),
        [down, across] => format!("{} ↓ {} →   ", down.key, across.key),
        _ => String::new(),
    };
    let selected = sweep.cells.get(sweep.selected);
    let heading = Line::from(vec![
        Span::styled(axes, theme.dim),
        Span::styled(
            selected.map_or(String::new(), |c| describe(&c.values)),
            theme.title,
        ),
    ]);
    frame.render_widget(Paragraph::new(heading), Rect { height: 1, ..inner });
    let body = Rect {
        y: inner.y + 1,
        height: inner.height - 1,
        ..inner
    };
    if sweep.axes.len() <= 2 {
        table(frame, body, sweep, theme);
    } else {
        list(frame, body, sweep, theme);
    }
}

/// The first of `len` items to show, `visible` at a time, so that `selected` is in view.
fn first_shown(selected: usize, visible: usize, len: usize) -> usize {
    selected
        .saturating_sub(visible.max(1) - 1)
        .min(len.saturating_sub(visible))
}

/// One or two axes: values of the first down the left, of the second along the top.
fn table(frame: &mut Frame, area: Rect, sweep: &Sweep, theme: &Theme) {
    let (rows, columns) = sweep.shape();
    let down = &sweep.axes[0];
    let across = sweep.axes.get(1);
    let label_width = down
        .values
        .iter()
        .map(|v| v.chars().count())
        .max()
        .unwrap_or(0)
        .max(3) as u16
        + 2;
    let label_width = label_width.min(area.width / 3);
    let room = area.width - label_width;
    let shown_columns = usize::from((room / MIN_COLUMN).max(1)).min(columns);
    let column_width = room / shown_columns as u16;
    // The header row, then rows of cells; the last needs no gap after it.
    let shown_rows = usize::from((area.height / CELL_LINES).max(1)).min(rows);
    let (row, column) = (sweep.selected / columns, sweep.selected % columns);
    let first_row = first_shown(row, shown_rows, rows);
    let first_column = first_shown(column, shown_columns, columns);
    let at = |x: u16, y: u16, width: u16, height: u16| {
        Rect::new(area.x + x, area.y + y, width, height).intersection(area)
    };
    let put = |frame: &mut Frame, rect: Rect, lines: Vec<Line>| {
        frame.render_widget(Paragraph::new(lines), rect);
    };
    for c in 0..shown_columns {
        let x = label_width + c as u16 * column_width;
        let header = across.map_or(String::new(), |a| a.values[first_column + c].clone());
        put(
            frame,
            at(x, 0, column_width.saturating_sub(1), 1),
            vec![Line::styled(header, theme.title)],
        );
    }
    for r in 0..shown_rows {
        let y = 1 + r as u16 * CELL_LINES;
        let label = down.values[first_row + r].clone();
        put(
            frame,
            at(0, y, label_width.saturating_sub(1), 1),
            vec![Line::styled(label, theme.title)],
        );
        for c in 0..shown_columns {
            let index = (first_row + r) * columns + first_column + c;
            let Some(cell) = sweep.cells.get(index) else {
                continue;
            };
            let x = label_width + c as u16 * column_width;
            let style = cell_style(sweep, index, theme);
            let lines = figures(cell, is_running(sweep, index))
                .into_iter()
                .map(|text| Line::styled(text, style))
                .collect();
            put(
                frame,
                at(x, y, column_width.saturating_sub(1), CELL_LINES - 1),
                lines,
            );
        }
    }
}

/// More axes: one cell a line, its values then its figures, in columns padded to fit.
fn list(frame: &mut Frame, area: Rect, sweep: &Sweep, theme: &Theme) {
    let mut header: Vec<String> = sweep.axes.iter().map(|a| a.key.clone()).collect();
    header.extend(["diversity  logprob", "length", "stops", "sample 0"].map(str::to_owned));
    let rows: Vec<Vec<String>> = sweep
        .cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let mut row: Vec<String> = cell.values.values().map(|v| v.to_string()).collect();
            let mut figures = figures(cell, is_running(sweep, i));
            figures.resize(4, String::new());
            row.extend(figures);
            row
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |row: &[String]| {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        cells.join("  ")
    };
    let shown = usize::from(area.height - 1);
    let first = first_shown(sweep.selected, shown, rows.len());
    let mut lines = vec![Line::styled(line(&header), theme.dim)];
    lines.extend(
        rows.iter()
            .enumerate()
            .skip(first)
            .take(shown)
            .map(|(i, row)| Line::styled(line(row), cell_style(sweep, i, theme))),
    );
    frame.render_widget(Paragraph::new(lines), area);
}

fn is_running(sweep: &Sweep, index: usize) -> bool {
    sweep.running.is_some() && sweep.next_cell() == Some(index)
}

fn cell_style(sweep: &Sweep, index: usize, theme: &Theme) -> Style {
    if index == sweep.selected {
        theme.selected
    } else if sweep.cells[index].outcome.is_none() {
        theme.dim
    } else {
        theme.base
    }
}
