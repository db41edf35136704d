//! How far a download has got: bytes, rate and time left, measured once here so that the
//! terminal's bar and the playground's status slot tell the same numbers.

use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// One file's download as it stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    /// The file's path in its repository.
    pub file: String,
    /// Bytes on disk, a resumed download's earlier bytes included.
    pub done: u64,
    /// The file's size; 0 when the server did not say.
    pub total: u64,
    /// Over the last few seconds; `None` until there is enough to measure.
    pub bytes_per_second: Option<f64>,
}

impl Transfer {
    /// Done over total in [0, 1]; 0 while the total is unknown.
    pub fn fraction(&self) -> f32 {
        if self.total == 0 {
            0.0
        } else {
            (self.done as f64 / self.total as f64).clamp(0.0, 1.0) as f32
        }
    }

    /// The time left at the current rate.
    pub fn eta(&self) -> Option<Duration> {
        let rate = self.bytes_per_second.filter(|r| *r > 0.0)?;
        let left = self.total.checked_sub(self.done)?;
        Duration::try_from_secs_f64(left as f64 / rate).ok()
    }

    /// `1.2 / 4.0 GB · 12.3 MB/s · 5 min left`: what a status line shows beside the file name.
    pub fn figures(&self) -> String {
        let mut parts = vec![if self.total > 0 {
            format!("{} / {}", bytes(self.done), bytes(self.total))
        } else {
            bytes(self.done)
        }];
        if let Some(rate) = self.bytes_per_second {
            parts.push(format!("{}/s", bytes(rate as u64)));
        }
        if let Some(eta) = self.eta().filter(|_| self.done < self.total) {
            parts.push(format!("{} left", duration(eta)));
        }
        parts.join(" · ")
    }
}

/// Sizes as people read them, in powers of 1000 as the Hub shows them: `812 B`, `3.3 MB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `42 s`, `3 min 5 s`, `2 h 10 min`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// The rate over a window of recent samples, and when the next report is due.
pub(super) struct Meter {
    samples: VecDeque<(Instant, u64)>,
    interval: Duration,
    last_report: Option<Instant>,
}

const WINDOW: Duration = Duration::from_secs(5);
/// Too short a span gives a rate of noise.
const MIN_SPAN: Duration = Duration::from_millis(200);

impl Meter {
    /// Reports come at most once per `interval`, and always at the start and the end.
    pub(super) fn new(interval: Duration) -> Self {
        Self {
            samples: VecDeque::new(),
            interval,
            last_report: None,
        }
    }

    /// Notes that `done` bytes are on disk now; whether to report them.
    pub(super) fn note(&mut self, done: u64, last: bool) -> bool {
        let now = Instant::now();
        self.samples.push_back((now, done));
        while self
            .samples
            .front()
            .is_some_and(|&(t, _)| now.duration_since(t) > WINDOW)
            && self.samples.len() > 2
        {
            self.samples.pop_front();
        }
        let due = self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= self.interval);
        if due || last {
            self.last_report = Some(now);
        }
        due || last
    }

    /// A new connection starts: bytes that were already on disk are not part of the rate.
    pub(super) fn restart(&mut self) {
        self.samples.clear();
    }

    pub(super) fn rate(&self) -> Option<f64> {
        let (&(t0, b0), &(t1, b1)) = (self.samples.front()?, self.samples.back()?);
        let span = t1.duration_since(t0);
        (span >= MIN_SPAN).then(|| b1.saturating_sub(b0) as f64 / span.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_well() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(3_285_416), "3.3 MB");
        assert_eq!(bytes(4_100_000_000), "4.1 GB");
        assert_eq!(bytes(999_999), "1.0 MB");
        assert_eq!(duration(Duration::from_secs(42)), "42 s");
        assert_eq!(duration(Duration::from_secs(185)), "3 min 5 s");
        assert_eq!(duration(Duration::from_secs(7800)), "2 h 10 min");
    }

    #[test]
    fn figures_show_bytes_rate_and_time_left() {
        let transfer = Transfer {
            file: "m.gguf".into(),
            done: 1_000_000_000,
            total: 4_000_000_000,
            bytes_per_second: Some(10_000_000.0),
        };
        assert_eq!(transfer.fraction(), 0.25);
        assert_eq!(transfer.eta(), Some(Duration::from_secs(300)));
        assert_eq!(
            transfer.figures(),
            "1.0 GB / 4.0 GB · 10.0 MB/s · 5 min 0 s left"
        );
        let crawling = Transfer {
            total: u64::MAX,
            bytes_per_second: Some(1e-3),
            ..transfer.clone()
        };
        assert_eq!(crawling.eta(), None, "too long to say, and no panic");
        let unknown = Transfer {
            total: 0,
            bytes_per_second: None,
            ..transfer
        };
        assert_eq!(unknown.fraction(), 0.0);
        assert_eq!(unknown.figures(), "1.0 GB");
    }

    #[test]
    fn the_meter_reports_the_first_and_last_and_throttles_between() {
        let mut meter = Meter::new(Duration::from_secs(3600));
        assert!(meter.note(0, false));
        assert!(!meter.note(10, false));
        assert!(meter.note(20, true));
        let mut every = Meter::new(Duration::ZERO);
        assert!(every.note(0, false) && every.note(1, false));
    }
}
