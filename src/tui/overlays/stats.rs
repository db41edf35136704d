//! The run statistics (`i`): for each side's newest finished run, how diverse its samples are,
//! how long, how they ended, which came out the same and where they part from the first.

use super::popup;
use crate::response::SampleResponse;
use crate::tui::input::keymap::{KeyMap, Mode};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

/// One side's newest response under the name its columns carry (empty for a lone side).
pub struct SideRun<'a> {
    pub label: String,
    pub response: Option<&'a SampleResponse>,
}

pub fn render(frame: &mut Frame, area: Rect, runs: &[SideRun], keymap: &KeyMap, theme: &Theme) {
    let hints = popup::hints(keymap, &[Mode::Stats, Mode::Dialog]);
    let popup_area = popup::centred(area, 90, area.height.saturating_sub(4));
    let inner = popup::open(frame, popup_area, "run statistics", &hints, theme);
    let mut lines = Vec::new();
    for run in runs {
        if !run.label.is_empty() {
            lines.push(Line::styled(run.label.clone(), theme.title));
        }
        match run.response.and_then(|r| Some((r, r.stats.as_ref()?))) {
            Some((response, stats)) => {
                lines.extend(
                    stats
                        .describe(&response.trajectories)
                        .into_iter()
                        .map(Line::from),
                );
            }
            None => lines.push(Line::styled("no finished run yet", theme.dim)),
        }
        lines.push(Line::default());
    }
    lines.pop();
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
