//! The help overlay, generated from the key map so that it always tells the truth.
//!
//! One section per key-map mode, its keys padded into a column of their own, one binding a
//! line. Sections flow top to bottom into columns and stay whole where they fit in one; the
//! columns go side by side as far as the width allows, and the rest onto further pages, which
//! PgUp/PgDn turn (the bottom edge says `1/3` and which key shows more). A wide terminal gets
//! everything on one page, as short as the columns allow. Help opens on the page that holds the
//! keys of the pane it was opened from, so that on a small terminal the keys at hand come
//! first. Paging was chosen over squeezing: readable rows at any size, and room for more keys.

use super::popup;
use crate::tui::action::Action;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use crate::tui::update::run_shape::START_SAMPLES;
use crate::tui::widgets::params::START_MAX_TOKENS;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::ops::Range;

/// Which page the help shows: the one holding the keys of `from`, the mode of the pane it was
/// opened from, turned `turned` pages on (round the ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelpPage {
    pub from: Mode,
    pub turned: i32,
}

impl HelpPage {
    pub fn new(from: Mode) -> Self {
        Self { from, turned: 0 }
    }
}

const GAP: u16 = 2;

/// One mode's title and its rows.
struct Section {
    mode: Mode,
    lines: Vec<Line<'static>>,
}

/// Every mode with bindings, in [`Mode::ALL`]'s order, as a title and one aligned row per
/// binding. A key that does the same everywhere is listed once, under "everywhere".
fn sections(keymap: &KeyMap, theme: &Theme) -> Vec<Section> {
    let global = keymap.describe(Mode::Global);
    Mode::ALL
        .into_iter()
        .filter_map(|mode| {
            let rows: Vec<_> = keymap
                .describe(mode)
                .into_iter()
                .filter(|row| mode == Mode::Global || !global.contains(row))
                .collect();
            let keys_width = rows.iter().map(|(k, _)| k.chars().count()).max()?;
            let mut lines = vec![Line::styled(mode.title().to_owned(), theme.title)];
            lines.extend(rows.into_iter().map(|(keys, help)| {
                Line::from(vec![
                    Span::styled(format!(" {keys:<keys_width$} "), theme.value),
                    Span::styled(help.to_owned(), theme.dim),
                ])
            }));
            Some(Section { mode, lines })
        })
        .collect()
}

/// A column of help lines and the modes whose sections it holds (a part of one included).
#[derive(Default)]
struct Column {
    lines: Vec<Line<'static>>,
    modes: Vec<Mode>,
}

impl Column {
    fn width(&self) -> u16 {
        let widest = self.lines.iter().map(Line::width).max().unwrap_or(0);
        u16::try_from(widest).unwrap_or(u16::MAX)
    }
}

/// Sections flowed into columns of at most `height` lines, a blank line between sections. A
/// section that fits in a column is never split: it starts the next column instead. One taller
/// than a column goes on in the next under its title again.
fn flow(sections: &[Section], height: usize) -> Vec<Column> {
    let height = height.max(2);
    let mut columns = vec![Column::default()];
    for section in sections {
        let Some((title, rows)) = section.lines.split_first() else {
            continue;
        };
        let column = columns.last_mut().expect("starts with one column");
        let room = height.saturating_sub(column.lines.len() + 1);
        let whole = section.lines.len() <= height;
        // A title needs a row under it at least; a section that fits a column stays whole.
        if !column.lines.is_empty() && (room < 2 || (whole && section.lines.len() > room)) {
            columns.push(Column::default());
        } else if !column.lines.is_empty() {
            column.lines.push(Line::default());
        }
        let column = columns.last_mut().expect("one column at least");
        column.lines.push(title.clone());
        column.modes.push(section.mode);
        for row in rows {
            if columns.last().is_some_and(|c| c.lines.len() >= height) {
                columns.push(Column {
                    lines: vec![title.clone()],
                    modes: vec![section.mode],
                });
            }
            columns
                .last_mut()
                .expect("one column at least")
                .lines
                .push(row.clone());
        }
    }
    columns
}

/// Consecutive columns that fit side by side in `width`, gaps included; a column wider than
/// `width` is a page of its own (clipped).
fn pages(columns: &[Column], width: u16) -> Vec<Range<usize>> {
    let mut pages: Vec<Range<usize>> = Vec::new();
    let mut used = 0u16;
    for (i, column) in columns.iter().enumerate() {
        let w = column.width();
        match pages.last_mut() {
            Some(page) if used.saturating_add(GAP).saturating_add(w) <= width => {
                page.end = i + 1;
                used = used.saturating_add(GAP).saturating_add(w);
            }
            _ => {
                pages.push(i..i + 1);
                used = w;
            }
        }
    }
    pages
}

/// The help laid out for one screen.
struct Layout {
    columns: Vec<Column>,
    pages: Vec<Range<usize>>,
    /// Lines of the tallest column.
    height: u16,
}

impl Layout {
    /// Everything on one page at the lowest height that keeps every section whole, else pages
    /// of columns as tall as the screen.
    fn new(keymap: &KeyMap, area: Rect, theme: &Theme) -> Self {
        let sections = sections(keymap, theme);
        let inner = popup::inside(area);
        let tallest = usize::from(inner.height).max(2);
        let fits_one_page = |height| {
            let columns = flow(&sections, height);
            let pages = pages(&columns, inner.width);
            (pages.len() == 1).then_some((columns, pages))
        };
        // Shorter than the tallest section would split it across columns.
        let whole = sections.iter().map(|s| s.lines.len()).max().unwrap_or(2);
        let (columns, pages) = (whole.min(tallest)..=tallest)
            .find_map(fits_one_page)
            .unwrap_or_else(|| {
                let columns = flow(&sections, tallest);
                let pages = pages(&columns, inner.width);
                (columns, pages)
            });
        let height = columns.iter().map(|c| c.lines.len()).max().unwrap_or(0);
        Self {
            height: u16::try_from(height).unwrap_or(u16::MAX),
            columns,
            pages,
        }
    }

    /// The page shown for `page`: the first holding its mode's section, turned.
    fn shown(&self, page: HelpPage) -> usize {
        let count = self.pages.len().max(1);
        let home = self
            .pages
            .iter()
            .position(|range| {
                self.columns[range.clone()]
                    .iter()
                    .any(|c| c.modes.contains(&page.from))
            })
            .unwrap_or(0);
        (home as i64 + i64::from(page.turned)).rem_euclid(count as i64) as usize
    }

    /// The width of page `i`'s columns with their gaps.
    fn page_width(&self, i: usize) -> u16 {
        let columns = &self.columns[self.pages[i].clone()];
        let gaps = GAP * (columns.len().saturating_sub(1)) as u16;
        columns
            .iter()
            .map(Column::width)
            .fold(gaps, u16::saturating_add)
    }
}

/// Why the first run is not `samplab sample`'s, on the help box's bottom edge: the longest form
/// that fits in `room` cells, or nothing.
fn start_note(room: usize) -> String {
    let forms = [
        format!(
            "opens at {START_SAMPLES} samples x {START_MAX_TOKENS} tokens, to compare them side \
             by side (samplab sample: 1, until EOS)"
        ),
        format!("opens at {START_SAMPLES} x {START_MAX_TOKENS} tokens (samplab sample: 1, to EOS)"),
        format!("opens at {START_SAMPLES} x {START_MAX_TOKENS} tokens"),
    ];
    forms
        .into_iter()
        .find(|form| form.chars().count() <= room)
        .unwrap_or_default()
}

/// `2/3 PgDn more`: where the page is among the pages and the key that turns it.
fn page_cue(keymap: &KeyMap, shown: usize, count: usize) -> String {
    let key = keymap
        .key_for(&[Mode::Help], &Action::TurnHelpPage(1))
        .unwrap_or_default();
    format!(" {}/{count} {key} more ", shown + 1)
}

pub fn render(frame: &mut Frame, area: Rect, page: HelpPage, keymap: &KeyMap, theme: &Theme) {
    let layout = Layout::new(keymap, area, theme);
    let count = layout.pages.len();
    let Some(shown) = (count > 0).then(|| layout.shown(page)) else {
        return;
    };
    // The box keeps its size as the pages turn.
    let width = (0..count).map(|i| layout.page_width(i)).max().unwrap_or(0) + 2;
    let popup_area = popup::centred(area, width, layout.height + 2);
    let cue = if count > 1 {
        page_cue(keymap, shown, count)
    } else {
        String::new()
    };
    // The border's corners, the note's spaces and the cue.
    let room = usize::from(popup_area.width).saturating_sub(4 + cue.chars().count());
    let inner = popup::open(frame, popup_area, "keys", &start_note(room), theme);
    if !cue.is_empty() {
        let edge = Rect {
            y: popup_area.y + popup_area.height.saturating_sub(1),
            height: popup_area.height.min(1),
            ..popup_area
        };
        let cue = Line::styled(cue, theme.title).right_aligned();
        frame.render_widget(
            Paragraph::new(cue),
            edge.inner(ratatui::layout::Margin::new(1, 0)),
        );
    }
    let right = inner.x + inner.width;
    let mut x = inner.x;
    for column in &layout.columns[layout.pages[shown].clone()] {
        if x >= right {
            break;
        }
        let width = column.width();
        let column_area = Rect {
            x,
            width: width.min(right - x),
            ..inner
        };
        frame.render_widget(Paragraph::new(column.lines.clone()), column_area);
        x = x.saturating_add(width + GAP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(mode: Mode, rows: usize) -> Section {
        let mut lines = vec![Line::raw(mode.title())];
        lines.extend((0..rows).map(|i| Line::raw(format!(" k{i} row"))));
        Section { mode, lines }
    }

    fn titles(column: &Column) -> Vec<String> {
        column
            .lines
            .iter()
            .map(|l| l.to_string())
            .filter(|l| !l.starts_with(' ') && !l.is_empty())
            .collect()
    }

    #[test]
    fn sections_stay_whole_and_a_tall_one_goes_on_under_its_title() {
        let sections = [
            section(Mode::Global, 3),
            section(Mode::Prompt, 3),
            section(Mode::Columns, 7),
        ];
        let columns = flow(&sections, 6);
        // 4 + blank + 4 would be 9: the prompt's section starts a column rather than split.
        assert_eq!(titles(&columns[0]), ["everywhere"]);
        assert_eq!(titles(&columns[1]), ["prompt"]);
        // Taller than a column: split, its title again on top of the rest.
        assert_eq!(titles(&columns[2]), ["samples"]);
        assert_eq!(titles(&columns[3]), ["samples"]);
        assert_eq!(columns[2].lines.len() + columns[3].lines.len(), 8 + 1);
        assert!(columns.iter().all(|c| c.lines.len() <= 6));
    }

    #[test]
    fn columns_that_do_not_fit_side_by_side_go_to_the_next_page() {
        let sections = [
            section(Mode::Global, 2),
            section(Mode::Prompt, 2),
            section(Mode::Params, 2),
        ];
        let columns = flow(&sections, 3);
        let width = columns[0].width();
        assert_eq!(pages(&columns, width * 2 + GAP), [0..2, 2..3]);
        let all_on_one = 0..3;
        assert_eq!(pages(&columns, width * 3 + GAP * 2), [all_on_one]);
        assert_eq!(
            pages(&columns, 1),
            [0..1, 1..2, 2..3],
            "clipped, one a page"
        );
    }
}
