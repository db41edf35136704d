//! Where each pane goes, computed in one place so that `update` can wrap sample text at the
//! width the view will draw it.

use ratatui::layout::{Margin, Rect};

/// Narrower columns than this wrap into a new row of columns.
pub const MIN_COLUMN_WIDTH: u16 = 24;
/// Rows of columns lower than this (borders, two lines of text, the footer) scroll instead.
pub const MIN_COLUMN_HEIGHT: u16 = 5;
/// The params panel's width up to a 126-cell terminal; wider ones give it 2/7 of their width
/// (longer sliders, help on fewer lines), up to `PARAMS_MAX_WIDTH`.
const PARAMS_WIDTH: u16 = 36;
const PARAMS_MAX_WIDTH: u16 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub prompt: Rect,
    pub params: Rect,
    pub columns: Rect,
    pub status: Rect,
}

pub fn areas(size: Rect) -> Areas {
    let status_height = size.height.min(1);
    let body = Rect {
        height: size.height - status_height,
        ..size
    };
    let status = Rect {
        y: body.y + body.height,
        height: status_height,
        ..size
    };
    let params_width = (body.width / 7 * 2)
        .clamp(PARAMS_WIDTH, PARAMS_MAX_WIDTH)
        .min(body.width / 2);
    let left_width = body.width - params_width;
    let params = Rect {
        x: body.x + left_width,
        width: params_width,
        ..body
    };
    let prompt_height = (body.height / 4).clamp(body.height.min(3), 7);
    let prompt = Rect {
        width: left_width,
        height: prompt_height,
        ..body
    };
    let columns = Rect {
        y: body.y + prompt_height,
        width: left_width,
        height: body.height - prompt_height,
        ..body
    };
    Areas {
        prompt,
        params,
        columns,
        status,
    }
}

/// How `n` sample columns tile their area: side by side, wrapping into balanced rows of columns
/// when they would be narrower than `MIN_COLUMN_WIDTH`; when even the rows do not fit at
/// `MIN_COLUMN_HEIGHT`, a window of rows is shown and a last line says which columns are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    area: Rect,
    n: usize,
    pub per_row: usize,
    /// Rows of columns in all.
    pub rows: usize,
    /// Rows of columns on screen at once.
    pub shown: usize,
    row_height: u16,
    /// The line for "columns 1–4 of 8", when not every row is shown.
    pub indicator: Option<Rect>,
}

impl Grid {
    pub fn new(area: Rect, n: usize) -> Self {
        let fit = usize::from((area.width / MIN_COLUMN_WIDTH).max(1)).clamp(1, n.max(1));
        let rows = n.div_ceil(fit);
        // As many in each row as the rows need: 6 columns go 3+3, not 5+1.
        let per_row = n.div_ceil(rows.max(1)).max(1);
        let fits = rows * usize::from(MIN_COLUMN_HEIGHT) <= usize::from(area.height);
        let (area, indicator) = if fits || area.height == 0 {
            (area, None)
        } else {
            let body = Rect {
                height: area.height - 1,
                ..area
            };
            let line = Rect {
                y: area.y + body.height,
                height: 1,
                ..area
            };
            (body, Some(line))
        };
        let shown = if fits {
            rows
        } else {
            (usize::from(area.height / MIN_COLUMN_HEIGHT)).clamp(1, rows.max(1))
        };
        let row_height = usize::from(area.height).checked_div(shown).unwrap_or(0) as u16;
        Self {
            area,
            n,
            per_row,
            rows,
            shown,
            row_height,
            indicator,
        }
    }

    /// The grid on a terminal of `size`.
    pub fn on_screen(size: Rect, n: usize) -> Self {
        Self::new(areas(size).columns, n)
    }

    /// `first_row` moved as little as possible to keep the rows in range.
    pub fn clamp_first_row(&self, first_row: usize) -> usize {
        first_row.min(self.rows - self.shown)
    }

    /// The first row to show so that `column` is on screen, moving from `first_row` as little as
    /// possible.
    pub fn first_row_showing(&self, column: usize, first_row: usize) -> usize {
        let row = column / self.per_row;
        let first_row = self.clamp_first_row(first_row);
        if row < first_row {
            row
        } else if row >= first_row + self.shown {
            row + 1 - self.shown
        } else {
            first_row
        }
    }

    /// The columns on screen with their rectangles, when the window starts at `first_row`.
    /// They fill the area: the cells that do not divide evenly go one each to the first
    /// columns of a row and the first rows, so that widths (and heights) differ by one at most.
    pub fn rects(&self, first_row: usize) -> impl Iterator<Item = (usize, Rect)> + '_ {
        let first_row = self.clamp_first_row(first_row);
        let start = first_row * self.per_row;
        let end = ((first_row + self.shown) * self.per_row).min(self.n);
        (start..end).map(move |i| {
            let (row, col) = (i / self.per_row - first_row, i % self.per_row);
            let (x, width) = share(self.area.width, self.per_row, col);
            let (y, height) = share(self.area.height, self.shown, row);
            let rect = Rect {
                x: self.area.x + x,
                y: self.area.y + y,
                width,
                height,
            };
            (i, rect)
        })
    }

    /// The text width inside the narrowest column (others may have a cell more).
    pub fn text_width(&self) -> usize {
        usize::from((self.area.width / self.per_row as u16).saturating_sub(2))
    }

    /// Rows of text inside the lowest column: the height less the borders and the footer.
    pub fn text_rows(&self) -> usize {
        usize::from(self.row_height.saturating_sub(3))
    }

    /// Where the text of a column drawn in `rect` goes: inside the borders, above the footer
    /// ([`Self::text_rows`] high).
    pub fn text_area(rect: Rect) -> Rect {
        let inner = rect.inner(Margin::new(1, 1));
        Rect {
            height: inner.height.saturating_sub(1),
            ..inner
        }
    }
}

/// Part `i` of `total` cells cut into `parts`: its offset and length. The remainder goes one
/// cell each to the first parts.
fn share(total: u16, parts: usize, i: usize) -> (u16, u16) {
    let parts = parts.max(1) as u16;
    let i = i as u16;
    let (base, extra) = (total / parts, total % parts);
    (i * base + i.min(extra), base + u16::from(i < extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 51: the params panel stayed 36 cells wide on a large terminal.
    #[test]
    fn the_params_panel_grows_with_the_terminal() {
        let small = areas(Rect::new(0, 0, 100, 30));
        let large = areas(Rect::new(0, 0, 160, 45));
        assert_eq!(small.params.width, PARAMS_WIDTH);
        assert!(large.params.width > small.params.width, "{large:?}");
        assert_eq!(large.params.height, 44, "all of the body's height");
        assert!(
            large.columns.width > small.columns.width,
            "the columns grow too"
        );
        let huge = areas(Rect::new(0, 0, 400, 100));
        assert_eq!(huge.params.width, PARAMS_MAX_WIDTH);
    }

    #[test]
    fn panes_tile_the_screen_at_any_size() {
        for (w, h) in [(80, 24), (200, 50), (10, 5), (1, 1), (0, 0)] {
            let a = areas(Rect::new(0, 0, w, h));
            assert_eq!(a.status.y + a.status.height, h);
            assert_eq!(a.prompt.width + a.params.width, w);
            assert_eq!(a.prompt.height + a.columns.height, a.params.height);
        }
    }

    fn rects(grid: &Grid, first_row: usize) -> Vec<Rect> {
        grid.rects(first_row).map(|(_, r)| r).collect()
    }

    #[test]
    fn many_columns_wrap_into_rows() {
        let grid = Grid::new(Rect::new(0, 0, 80, 20), 5);
        let shown = rects(&grid, 0);
        assert_eq!(shown.len(), 5);
        let widths: Vec<u16> = shown.iter().map(|r| r.width).collect();
        assert_eq!(widths, [27, 27, 26, 27, 27]);
        assert_eq!(shown[3].y, 10);
        assert_eq!((grid.text_width(), grid.text_rows()), (24, 7));
        assert_eq!(grid.indicator, None);
        assert_eq!(rects(&Grid::new(Rect::new(0, 0, 10, 5), 3), 0)[0].width, 10);
    }

    /// Issue 34: nine columns were 26 cells wide, the last 32.
    #[test]
    fn columns_share_the_leftover_cells_and_fill_the_area() {
        for (w, h, n) in [
            (240, 40, 9),
            (124, 40, 7),
            (80, 23, 5),
            (50, 16, 8),
            (199, 51, 6),
        ] {
            let area = Rect::new(3, 2, w, h);
            let grid = Grid::new(area, n);
            let shown = rects(&grid, 0);
            let widths: Vec<u16> = shown.iter().map(|r| r.width).collect();
            let (lo, hi) = (widths.iter().min().unwrap(), widths.iter().max().unwrap());
            assert!(hi - lo <= 1, "{w}x{h}, {n}: {widths:?}");
            let heights: Vec<u16> = shown.iter().map(|r| r.height).collect();
            let (lo, hi) = (heights.iter().min().unwrap(), heights.iter().max().unwrap());
            assert!(hi - lo <= 1, "{w}x{h}, {n}: {heights:?}");
            let body = grid.indicator.map_or(h, |_| h - 1);
            for row in shown.chunks_exact(grid.per_row) {
                assert_eq!(row.iter().map(|r| r.width).sum::<u16>(), w, "{row:?}");
                assert_eq!(row[0].x, area.x);
                for pair in row.windows(2) {
                    assert_eq!(pair[0].x + pair[0].width, pair[1].x, "no gaps");
                }
            }
            let last = shown.last().unwrap();
            assert_eq!(last.y + last.height, area.y + body, "{w}x{h}, {n}");
            assert_eq!(
                grid.text_width(),
                usize::from(*widths.iter().min().unwrap() - 2)
            );
        }
    }

    #[test]
    fn rows_of_columns_are_balanced() {
        // Five columns fit across 124 cells.
        let per_row = |n| {
            let grid = Grid::new(Rect::new(0, 0, 124, 40), n);
            let shown = rects(&grid, 0);
            let mut tops: Vec<u16> = shown.iter().map(|r| r.y).collect();
            tops.dedup();
            let counts: Vec<usize> = tops
                .iter()
                .map(|&y| shown.iter().filter(|r| r.y == y).count())
                .collect();
            counts
        };
        assert_eq!(per_row(5), [5]);
        assert_eq!(per_row(6), [3, 3]);
        assert_eq!(per_row(7), [4, 3]);
        assert_eq!(per_row(8), [4, 4]);
        assert_eq!(per_row(11), [4, 4, 3]);
    }

    #[test]
    fn rows_that_do_not_fit_scroll_with_an_indicator_line() {
        // 8 columns of at least 24 cells in 50: 2 per row, 4 rows; 16 lines hold 3 rows of 5.
        let grid = Grid::new(Rect::new(0, 10, 50, 16), 8);
        assert_eq!((grid.per_row, grid.rows, grid.shown), (2, 4, 3));
        assert_eq!(grid.indicator, Some(Rect::new(0, 25, 50, 1)));
        let shown: Vec<usize> = grid.rects(5).map(|(i, _)| i).collect();
        assert_eq!(
            shown,
            [2, 3, 4, 5, 6, 7],
            "the window stops at the last row"
        );
        assert_eq!(rects(&grid, 1)[0], Rect::new(0, 10, 25, 5));
        assert_eq!(grid.first_row_showing(7, 0), 1);
        assert_eq!(grid.first_row_showing(0, 1), 0);
        assert_eq!(grid.first_row_showing(3, 1), 1);
        for (w, h) in [(0, 0), (1, 1), (30, 2)] {
            let grid = Grid::new(Rect::new(0, 0, w, h), 64);
            assert!(
                rects(&grid, 99)
                    .iter()
                    .all(|r| r.height <= h && r.width <= w)
            );
        }
    }
}
