//! The help overlay, generated from the key map so that it always tells the truth. Sections
//! (one per key-map mode) flow top to bottom into columns, as short as the width allows; their
//! keys are padded into a column of their own, and a blank line parts the sections, unless that
//! would not fit; on a small terminal short rows go side by side.

use super::popup;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::update::run_shape::START_SAMPLES;
use crate::tui::widgets::params::START_MAX_TOKENS;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// The order sections appear in; modes without bindings are left out.
const ORDER: [Mode; 17] = [
    Mode::Global,
    Mode::Navigate,
    Mode::Prompt,
    Mode::Params,
    Mode::ParamEdit,
    Mode::TextField,
    Mode::List,
    Mode::Columns,
    Mode::Help,
    Mode::Dialog,
    Mode::Presets,
    Mode::PresetName,
    Mode::Confirm,
    Mode::Export,
    Mode::Models,
    Mode::Messages,
    Mode::Conversation,
];
const GAP: u16 = 2;

/// How a section's rows are laid out.
#[derive(Clone, Copy)]
enum Rows {
    /// One binding a line, keys padded to the section's widest.
    Aligned,
    /// One binding a line.
    Compact,
    /// Short bindings side by side, as many as fit in the given width or the width of the
    /// section's widest one: for small terminals, where one a line does not fit.
    Paired(usize),
}

/// Every mode's section in [`ORDER`]: its title, then its rows laid out as `layout` says.
/// Modes without bindings are left out.
fn sections<'a>(keymap: &KeyMap, layout: Rows, theme: &Theme) -> Vec<Vec<Line<'a>>> {
    // A key that does the same everywhere is listed once, under "everywhere".
    let global = keymap.describe(Mode::Global);
    let mut sections = Vec::new();
    for mode in ORDER {
        let rows = keymap.describe(mode);
        if rows.is_empty() {
            continue;
        }
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|row| mode == Mode::Global || !global.contains(row))
            .collect();
        let keys_width = match layout {
            Rows::Aligned => rows
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(0),
            Rows::Compact | Rows::Paired(_) => 0,
        };
        let rows: Vec<Line> = rows
            .into_iter()
            .map(|(keys, help)| {
                Line::from(vec![
                    Span::styled(format!(" {keys:<keys_width$} "), theme.value),
                    Span::styled(help.to_owned(), theme.dim),
                ])
            })
            .collect();
        let mut lines = vec![Line::styled(mode.title().to_owned(), theme.title)];
        match layout {
            Rows::Paired(width) => lines.extend(paired(rows, width)),
            Rows::Aligned | Rows::Compact => lines.extend(rows),
        }
        sections.push(lines);
    }
    sections
}

/// Rows joined side by side while the joined line is no wider than `width` or the widest row.
fn paired(rows: Vec<Line>, width: usize) -> Vec<Line> {
    let widest = rows.iter().map(Line::width).max().unwrap_or(0).max(width);
    let mut lines: Vec<Line> = Vec::new();
    for row in rows {
        match lines.last_mut() {
            Some(line) if line.width() + 1 + row.width() <= widest => {
                line.spans.push(Span::raw(" "));
                line.spans.extend(row.spans);
            }
            _ => lines.push(row),
        }
    }
    lines
}

/// Sections flowed into columns of at most `height` lines, with `spaced` a blank line between
/// sections (their bold titles part them otherwise). A section that does not fit whole goes
/// on in the next column under its title again, so that no space is lost to short columns.
fn columns<'a>(sections: &[Vec<Line<'a>>], height: usize, spaced: bool) -> Vec<Vec<Line<'a>>> {
    let gap = usize::from(spaced);
    let mut columns: Vec<Vec<Line>> = vec![Vec::new()];
    for section in sections {
        let Some((title, lines)) = section.split_first() else {
            continue;
        };
        let column = columns.last_mut().expect("starts with one column");
        // A title needs one of its rows under it in the same column.
        if !column.is_empty() && column.len() + gap + 2 > height {
            columns.push(Vec::new());
        } else if !column.is_empty() && spaced {
            column.push(Line::default());
        }
        columns
            .last_mut()
            .expect("one column at least")
            .push(title.clone());
        for line in lines {
            if columns.last().is_some_and(|c| c.len() >= height.max(2)) {
                columns.push(vec![title.clone()]);
            }
            columns
                .last_mut()
                .expect("one column at least")
                .push(line.clone());
        }
    }
    columns
}

/// The width of each column, and of the whole box with gaps and borders.
fn widths(columns: &[Vec<Line>]) -> (Vec<u16>, u16) {
    let widths: Vec<u16> = columns
        .iter()
        .map(|c| c.iter().map(Line::width).max().unwrap_or(0) as u16)
        .collect();
    let total = widths.iter().sum::<u16>() + GAP * (widths.len() as u16 - 1) + 2;
    (widths, total)
}

/// The shortest flow that fits `area`, spaced and with keys aligned if possible, short rows
/// side by side if need be; when nothing fits (a tiny terminal) the full-height paired flow,
/// clipped. With the columns' widths.
fn layout<'a>(keymap: &KeyMap, area: Rect, theme: &Theme) -> (Vec<Vec<Line<'a>>>, Vec<u16>, u16) {
    let max_height = usize::from(area.height.saturating_sub(2));
    let flows = [
        (true, Rows::Aligned),
        (true, Rows::Compact),
        (false, Rows::Aligned),
        (false, Rows::Compact),
    ]
    .into_iter()
    .chain((0..=usize::from(area.width) / 3).map(|width| (false, Rows::Paired(width))));
    for (spaced, rows) in flows {
        let sections = sections(keymap, rows, theme);
        for height in 1..=max_height {
            let columns = columns(&sections, height, spaced);
            let (widths, width) = widths(&columns);
            if width <= area.width && columns.iter().all(|c| c.len() <= height) {
                return (columns, widths, width);
            }
        }
    }
    let sections = sections(keymap, Rows::Paired(usize::from(area.width) / 3), theme);
    let columns = columns(&sections, max_height, false);
    let (widths, width) = widths(&columns);
    (columns, widths, width)
}

/// Why the first run is not `samplab sample`'s, on the help box's bottom edge: the longest form
/// that fits a box `width` wide, or nothing.
fn start_note(width: u16) -> String {
    let forms = [
        format!(
            "opens at {START_SAMPLES} samples x {START_MAX_TOKENS} tokens, to compare them side \
             by side (samplab sample: 1, until EOS)"
        ),
        format!("opens at {START_SAMPLES} x {START_MAX_TOKENS} tokens (samplab sample: 1, to EOS)"),
        format!("opens at {START_SAMPLES} x {START_MAX_TOKENS} tokens"),
    ];
    // The border's corners and the note's spaces.
    let room = usize::from(width).saturating_sub(4);
    forms
        .into_iter()
        .find(|form| form.chars().count() <= room)
        .unwrap_or_default()
}

pub fn render(frame: &mut Frame, area: Rect, keymap: &KeyMap, theme: &Theme) {
    let (columns, widths, width) = layout(keymap, area, theme);
    let height = columns.iter().map(Vec::len).max().unwrap_or(0) as u16 + 2;
    let popup_area = popup::centred(area, width, height);
    let note = start_note(popup_area.width);
    let inner = popup::open(frame, popup_area, "keys", &note, theme);
    let right = inner.x + inner.width;
    let mut x = inner.x;
    for (column, width) in columns.into_iter().zip(widths) {
        if x >= right {
            break;
        }
        let column_area = Rect {
            x,
            width: width.min(right - x),
            ..inner
        };
        frame.render_widget(Paragraph::new(column), column_area);
        x = x.saturating_add(width + GAP);
    }
}
