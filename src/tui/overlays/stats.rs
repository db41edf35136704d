//! The run statistics (`i`): for each side's newest finished run, how diverse its samples are,
//! how long, how they ended, which came out the same and where they part from the first.

use super::popup;
use crate::response::{RunStats, SampleResponse, Trajectory};
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
                    describe(stats, &response.trajectories)
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

/// The statistics as lines of text, one figure family per line.
pub fn describe(stats: &RunStats, trajectories: &[Trajectory]) -> Vec<String> {
    let ratio = |r: Option<f64>| r.map_or("–".to_owned(), |r| format!("{r:.2}"));
    let samples = stats.divergence.len();
    let mut lines = vec![
        format!(
            "{samples} samples  length mean {:.1}  min {}  max {}",
            stats.length.mean, stats.length.min, stats.length.max
        ),
        format!(
            "distinct n-grams  1: {}  2: {}  3: {}",
            ratio(stats.distinct_1),
            ratio(stats.distinct_2),
            ratio(stats.distinct_3)
        ),
        format!(
            "ended  {}",
            stats
                .stop_reasons
                .iter()
                .map(|(reason, n)| format!("{reason} {n}"))
                .collect::<Vec<_>>()
                .join(" · ")
        ),
    ];
    let same: Vec<String> = stats
        .identical
        .iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            let names: Vec<String> = group.iter().map(|i| format!("#{i}")).collect();
            names.join(" = ")
        })
        .collect();
    lines.push(if same.is_empty() {
        "identical  none: every sample is its own".to_owned()
    } else {
        format!("identical  {}", same.join(" · "))
    });
    let parts: Vec<String> = stats
        .divergence
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, at)| at.map_or(format!("#{i} same"), |at| format!("#{i}@{at}")))
        .collect();
    if !parts.is_empty() {
        lines.push(format!("parts from #0  {}", parts.join("  ")));
    }
    if let Some(mean) = stats.mean_logprob {
        lines.push(format!(
            "mean logprob {mean:.3}  perplexity {:.2}",
            (-mean).exp()
        ));
    }
    let mean_of = |pick: fn(&Trajectory) -> Option<&Vec<f32>>| {
        let values: Vec<f32> = trajectories
            .iter()
            .filter(|t| t.branch.is_none())
            .filter_map(pick)
            .flatten()
            .copied()
            .collect();
        (!values.is_empty())
            .then(|| values.iter().map(|&h| f64::from(h)).sum::<f64>() / values.len() as f64)
    };
    if let (Some(raw), Some(kept)) = (
        mean_of(|t| t.entropy.as_ref()),
        mean_of(|t| t.kept_entropy.as_ref()),
    ) {
        lines.push(format!(
            "mean entropy  raw {raw:.2} nats  kept {kept:.2} nats"
        ));
    }
    if let Some(cut) = stats.constraint {
        lines.push(format!(
            "constraint  refused {:.1}% of the mass per step · forced {:.0}% of steps",
            cut.mean_refused * 100.0,
            cut.forced_share * 100.0
        ));
    }
    lines
}
