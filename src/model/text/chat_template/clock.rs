//! `strftime_now(format)`, which transformers gives templates as `datetime.now().strftime(format)`
//! (Llama 3.2 and Granite stamp today's date into the system prompt). The clock is a value so
//! tests render with a fixed date.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Where `strftime_now` reads the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// The system clock, in UTC (Python's `datetime.now()` is local time, which on the servers
    /// and containers these models run in is UTC; samplab carries no time-zone database).
    #[default]
    System,
    Fixed(CivilTime),
}

impl Clock {
    pub fn now(self) -> CivilTime {
        match self {
            Clock::System => {
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                CivilTime::from_unix(secs as i64)
            }
            Clock::Fixed(time) => time,
        }
    }
}

/// A calendar date and time of day, proleptic Gregorian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilTime {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl CivilTime {
    /// Seconds since 1970-01-01 UTC to a date (Howard Hinnant's `civil_from_days`).
    pub fn from_unix(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let in_day = secs.rem_euclid(86_400) as u32;
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Self {
            year,
            month,
            day,
            hour: in_day / 3600,
            minute: in_day / 60 % 60,
            second: in_day % 60,
        }
    }

    /// Days since 1970-01-01 (`days_from_civil`), for the weekday and the day of the year.
    fn days(&self) -> i64 {
        let year = self.year - i64::from(self.month <= 2);
        let era = year.div_euclid(400);
        let yoe = year.rem_euclid(400);
        let month = i64::from(self.month);
        let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5
            + i64::from(self.day)
            - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// 0 = Monday.
    fn weekday(&self) -> usize {
        (self.days() + 3).rem_euclid(7) as usize
    }

    fn day_of_year(&self) -> i64 {
        let january_first = CivilTime {
            month: 1,
            day: 1,
            ..*self
        };
        self.days() - january_first.days() + 1
    }

    /// Python's `strftime` for the directives C's strftime shares on every platform, plus
    /// glibc's `%-d` style unpadded numbers (Linux Python has them). An unknown directive is
    /// kept as written, as glibc does.
    pub fn strftime(&self, format: &str) -> String {
        let mut out = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let mut directive = chars.next();
            let unpadded = directive == Some('-');
            if unpadded {
                directive = chars.next();
            }
            let number = |value: i64, width: usize| {
                if unpadded {
                    value.to_string()
                } else {
                    format!("{value:0width$}")
                }
            };
            let month = MONTHS[self.month as usize - 1];
            let weekday = WEEKDAYS[self.weekday()];
            let hour12 = (self.hour + 11) % 12 + 1;
            match directive {
                Some('Y') => out.push_str(&self.year.to_string()),
                Some('y') => out.push_str(&number(self.year.rem_euclid(100), 2)),
                Some('m') => out.push_str(&number(self.month.into(), 2)),
                Some('d') => out.push_str(&number(self.day.into(), 2)),
                Some('e') => out.push_str(&format!("{:>2}", self.day)),
                Some('j') => out.push_str(&number(self.day_of_year(), 3)),
                Some('H') => out.push_str(&number(self.hour.into(), 2)),
                Some('I') => out.push_str(&number(hour12.into(), 2)),
                Some('M') => out.push_str(&number(self.minute.into(), 2)),
                Some('S') => out.push_str(&number(self.second.into(), 2)),
                Some('p') => out.push_str(if self.hour < 12 { "AM" } else { "PM" }),
                Some('B') => out.push_str(month),
                Some('b' | 'h') => out.push_str(&month[..3]),
                Some('A') => out.push_str(weekday),
                Some('a') => out.push_str(&weekday[..3]),
                Some('F') => out.push_str(&self.strftime("%Y-%m-%d")),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    if unpadded {
                        out.push('-');
                    }
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_become_the_calendar_date() {
        // 2024-02-29 23:59:59 UTC, a leap day.
        let t = CivilTime::from_unix(1_709_251_199);
        assert_eq!((t.year, t.month, t.day), (2024, 2, 29));
        assert_eq!((t.hour, t.minute, t.second), (23, 59, 59));
        assert_eq!(
            CivilTime::from_unix(0).strftime("%F %A"),
            "1970-01-01 Thursday"
        );
    }

    #[test]
    fn directives_format_as_python_does() {
        let t = CivilTime {
            year: 2025,
            month: 3,
            day: 7,
            hour: 21,
            minute: 5,
            second: 3,
        };
        assert_eq!(t.strftime("%d %b %Y"), "07 Mar 2025");
        assert_eq!(t.strftime("%B %d, %Y"), "March 07, 2025");
        assert_eq!(t.strftime("%A %a %-d/%-m/%y %j"), "Friday Fri 7/3/25 066");
        assert_eq!(t.strftime("%I:%M:%S %p %H %e"), "09:05:03 PM 21  7");
        assert_eq!(t.strftime("100%% %Q %"), "100% %Q %");
    }
}
