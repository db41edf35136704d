//! Where each pane goes, computed in one place so that `update` can wrap sample text at the
//! width the view will draw it.

use ratatui::layout::Rect;

/// Narrower columns than this wrap into a new row of columns.
pub const MIN_COLUMN_WIDTH: u16 = 24;
const PARAMS_WIDTH: u16 = 36;

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
    let params_width = PARAMS_WIDTH.min(body.width / 2);
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

/// `n` columns side by side, wrapping into rows when they would be narrower than the minimum.
pub fn column_rects(area: Rect, n: usize) -> Vec<Rect> {
    if n == 0 {
        return Vec::new();
    }
    let per_row = usize::from((area.width / MIN_COLUMN_WIDTH).max(1)).min(n);
    let rows = n.div_ceil(per_row);
    let width = area.width / per_row as u16;
    let height = (usize::from(area.height) / rows) as u16;
    (0..n)
        .map(|i| {
            let (row, col) = (i / per_row, i % per_row);
            let last_in_row = col + 1 == per_row;
            Rect {
                x: area.x + col as u16 * width,
                y: area.y + row as u16 * height,
                // The last column of a row takes the rounding leftovers.
                width: if last_in_row {
                    area.width - col as u16 * width
                } else {
                    width
                },
                height,
            }
        })
        .collect()
}

/// The text width inside each of `n` columns on a terminal of `size`.
pub fn column_text_width(size: Rect, n: usize) -> usize {
    let area = areas(size).columns;
    column_rects(area, n)
        .first()
        .map_or(0, |r| usize::from(r.width.saturating_sub(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panes_tile_the_screen_at_any_size() {
        for (w, h) in [(80, 24), (200, 50), (10, 5), (1, 1), (0, 0)] {
            let a = areas(Rect::new(0, 0, w, h));
            assert_eq!(a.status.y + a.status.height, h);
            assert_eq!(a.prompt.width + a.params.width, w);
            assert_eq!(a.prompt.height + a.columns.height, a.params.height);
        }
    }

    #[test]
    fn many_columns_wrap_into_rows() {
        let rects = column_rects(Rect::new(0, 0, 80, 20), 5);
        assert_eq!(rects.len(), 5);
        assert_eq!(rects[0].width, 26);
        assert_eq!(rects[2].width, 28);
        assert_eq!(rects[3].y, 10);
        assert_eq!(column_rects(Rect::new(0, 0, 10, 5), 3)[0].width, 10);
    }
}
