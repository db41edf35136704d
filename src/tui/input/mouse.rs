//! The mouse: terminal mouse events become actions, and an action's cell is hit-tested against
//! the same layout the view draws (computed from the state, never stored while drawing).

use crate::params::Field;
use crate::tui::action::Action;
use crate::tui::focus::Focus;
use crate::tui::state::State;
use crate::tui::widgets::inspector;
use crate::tui::widgets::layout::{Grid, areas};
use crate::tui::widgets::params::{first_row, slider_cells, visible_rows};
use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Margin, Position, Rect};

/// Rows one wheel notch scrolls.
const WHEEL_LINES: i32 = 3;

/// The action for a mouse event; moves and other buttons do nothing.
pub fn action(event: MouseEvent) -> Option<Action> {
    let (x, y) = (event.column, event.row);
    match event.kind {
        MouseEventKind::Down(MouseButton::Left) | MouseEventKind::Drag(MouseButton::Left) => {
            Some(Action::Click { x, y })
        }
        MouseEventKind::ScrollUp => Some(Action::Wheel {
            x,
            y,
            lines: -WHEEL_LINES,
        }),
        MouseEventKind::ScrollDown => Some(Action::Wheel {
            x,
            y,
            lines: WHEEL_LINES,
        }),
        _ => None,
    }
}

/// What a cell shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    Prompt,
    /// An alternative listed by the inspector (drawn in the params panel's place).
    Alternative(usize),
    /// The params panel, or the inspector drawn in its place.
    Params {
        /// The row's field and, on its slider, how far along it the cell is.
        field: Option<(usize, Option<f64>)>,
    },
    /// A sample column, and the (row, cell) of its text under the pointer.
    Column {
        column: usize,
        text: Option<(usize, usize)>,
    },
    /// The columns' area outside any column: the "columns 1–4 of 8" line.
    Grid,
}

/// What is drawn at (`x`, `y`) on the screen of `state`.
pub fn target(state: &State, x: u16, y: u16) -> Option<Target> {
    let at = Position::new(x, y);
    let a = areas(state.size);
    if a.prompt.contains(at) {
        return Some(Target::Prompt);
    }
    if a.params.contains(at) {
        if state.focus == Focus::Columns
            && let Some(alternative) = alternative_at(a.params, at, state)
        {
            return Some(Target::Alternative(alternative));
        }
        let field = (state.focus != Focus::Columns)
            .then(|| param_at(a.params, at, state))
            .flatten();
        return Some(Target::Params { field });
    }
    if !a.columns.contains(at) {
        return None;
    }
    let grid = state.grid();
    let Some((column, rect)) = grid
        .rects(state.columns.first_row)
        .find(|(_, rect)| rect.contains(at))
    else {
        return Some(Target::Grid);
    };
    let text = Grid::text_area(rect);
    let text = text.contains(at).then(|| {
        let top = state.columns.columns[column].top(usize::from(text.height));
        (top + usize::from(y - text.y), usize::from(x - text.x))
    });
    Some(Target::Column { column, text })
}

/// The alternative of the cursor's token on the inspector's line at `at`.
fn alternative_at(panel: Rect, at: Position, state: &State) -> Option<usize> {
    let inner = panel.inner(Margin::new(1, 1));
    if !inner.contains(at) {
        return None;
    }
    let (column, token) = state.columns.cursor_token()?;
    let event = &state.columns.columns[column].tokens[token];
    inspector::alternative_at(
        event,
        state.comparison.params.params.logprobs,
        usize::from(inner.width),
        usize::from(at.y - inner.y),
    )
}

/// The field of the params row at `at` and, on its slider, the fraction of the slider.
fn param_at(panel: Rect, at: Position, state: &State) -> Option<(usize, Option<f64>)> {
    let inner = panel.inner(Margin::new(1, 1));
    if !inner.contains(at) {
        return None;
    }
    let visible = visible_rows(&state.comparison.params, &state.comparison.served(), inner);
    let row = usize::from(at.y - inner.y);
    let field = first_row(state.comparison.params.selected, visible) + row;
    if row >= visible || field >= Field::ALL.len() {
        return None;
    }
    let cell = usize::from(at.x - inner.x);
    let fraction = slider_cells(usize::from(inner.width))
        .filter(|&(start, len)| (start..start + len).contains(&cell))
        .map(|(start, len)| (cell - start) as f64 / (len - 1) as f64);
    Some((field, fraction))
}
