//! The load progress bar on stderr: bytes, rate and time left while a file downloads, a gauge
//! for the other steps of a load; nothing at all when stderr is not a terminal, so that logs
//! and pipes stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use samplab::model::source::LoadProgress;
use samplab::model::source::hub::progress::{bytes, duration};
use samplab::terminal_text::escape_controls;
use std::io::IsTerminal;

/// Steps that are not downloads count in thousandths.
const STEPS: u64 = 1000;
const STEP_TEMPLATE: &str = "[{bar:30}] {percent:>3}% {msg}";

pub struct LoadBar {
    bar: Option<ProgressBar>,
    /// The file the bar counts the bytes of, to restyle when a step changes.
    downloading: Option<String>,
}

impl LoadBar {
    pub fn new() -> Self {
        Self {
            bar: std::io::stderr().is_terminal().then(|| {
                ProgressBar::with_draw_target(Some(STEPS), ProgressDrawTarget::stderr())
                    .with_style(style(STEP_TEMPLATE))
            }),
            downloading: None,
        }
    }

    pub fn show(&mut self, step: &LoadProgress) {
        let Some(bar) = &self.bar else {
            return;
        };
        match &step.download {
            Some(transfer) => {
                if self.downloading.as_deref() != Some(transfer.file.as_str()) {
                    bar.set_style(style(
                        "{prefix} [{bar:30}] {decimal_bytes}/{decimal_total_bytes} {msg}",
                    ));
                    bar.set_prefix(format!("downloading {}", escape_controls(&transfer.file)));
                    self.downloading = Some(transfer.file.clone());
                }
                bar.set_length(transfer.total.max(transfer.done));
                bar.set_position(transfer.done);
                let mut figures = Vec::new();
                if let Some(rate) = transfer.bytes_per_second {
                    figures.push(format!("{}/s", bytes(rate as u64)));
                }
                if let Some(eta) = transfer.eta().filter(|_| transfer.done < transfer.total) {
                    figures.push(format!("{} left", duration(eta)));
                }
                bar.set_message(figures.join(" · "));
            }
            None => {
                if self.downloading.take().is_some() {
                    bar.set_style(style(STEP_TEMPLATE));
                    bar.set_length(STEPS);
                }
                bar.set_position((step.fraction.clamp(0.0, 1.0) * STEPS as f32) as u64);
                bar.set_message(escape_controls(&step.message).into_owned());
            }
        }
    }

    /// Takes the bar off the screen.
    pub fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for LoadBar {
    fn drop(&mut self) {
        self.clear();
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}
