//! One-line charts in block characters: a series of values along a sample squeezed into a
//! given width (each cell the mean of its share), with the cell of a chosen position.

use ratatui::style::Style;
use ratatui::text::Span;

/// Cells from nothing to full: the border's own line for nothing, so that a chart drawn on a
/// border reads as the border where the value is 0.
const LEVELS: [char; 9] = ['─', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// `values` in at most `width` cells on a scale of 0 to `full` (beyond it fills the cell),
/// and the cell that holds position `at`; `None` when there is nothing to draw.
pub fn chart(
    values: &[f32],
    full: f32,
    width: usize,
    at: Option<usize>,
) -> Option<(String, Option<usize>)> {
    if values.is_empty() || width == 0 {
        return None;
    }
    let cells = values.len().min(width);
    let cell_of = |i: usize| i * cells / values.len();
    let mut sums = vec![(0.0f32, 0usize); cells];
    for (i, &v) in values.iter().enumerate() {
        let cell = &mut sums[cell_of(i)];
        cell.0 += v;
        cell.1 += 1;
    }
    let line = sums
        .iter()
        .map(|&(sum, n)| {
            let level = (sum / n as f32 / full * 8.0).ceil();
            LEVELS[(level.max(0.0) as usize).min(8)]
        })
        .collect();
    Some((line, at.filter(|&i| i < values.len()).map(cell_of)))
}

/// The chart as spans in `style`, the cell `at` in `lit`.
pub fn spans(chart: &str, at: Option<usize>, style: Style, lit: Style) -> Vec<Span<'static>> {
    let Some(at) = at else {
        return vec![Span::styled(chart.to_owned(), style)];
    };
    let cells: Vec<char> = chart.chars().collect();
    let text = |range: &[char]| range.iter().collect::<String>();
    vec![
        Span::styled(text(&cells[..at]), style),
        Span::styled(text(&cells[at..=at]), lit),
        Span::styled(text(&cells[at + 1..]), style),
    ]
}

#[cfg(test)]
mod tests {
    use super::chart;

    #[test]
    fn values_fill_cells_by_their_share_of_the_scale_and_squeeze_by_the_mean() {
        assert_eq!(
            chart(&[0.0, 0.5, 1.0, 9.0], 1.0, 10, Some(2)),
            Some(("─▄██".to_owned(), Some(2)))
        );
        // Eight values in two cells: the means 0.25 and 0.75.
        let values = [0.0, 0.5, 0.0, 0.5, 1.0, 0.5, 1.0, 0.5];
        assert_eq!(
            chart(&values, 1.0, 2, Some(5)),
            Some(("▂▆".to_owned(), Some(1)))
        );
        assert_eq!(chart(&[], 1.0, 5, None), None);
        assert_eq!(
            chart(&[f32::NAN], 1.0, 5, Some(3)),
            Some(("─".to_owned(), None))
        );
    }
}
