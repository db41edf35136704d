//! Colours as meaning, not as numbers: views ask the theme for `token_style(prob)` or
//! `title(focused)`, so a later theme file only has to fill in this struct.

use ratatui::style::{Color, Modifier, Style};

/// One stop of the heatmap: at probability `at` the background is `color`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientStop {
    pub at: f32,
    pub rgb: (u8, u8, u8),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub base: Style,
    pub border: Style,
    pub border_focused: Style,
    pub title: Style,
    pub selected: Style,
    pub gauge_filled: Style,
    pub gauge_empty: Style,
    pub value: Style,
    pub dim: Style,
    pub error: Style,
    pub editor: Style,
    pub status: Style,
    pub token_fg: Style,
    /// Empty means "no colour at all" (NO_COLOR): tokens keep the base style.
    pub gradient: Vec<GradientStop>,
}

impl Theme {
    /// The built-in dark theme; surprising tokens glow red, confident ones fade to blue.
    pub fn dark() -> Self {
        let stop = |at, rgb| GradientStop { at, rgb };
        Self {
            base: Style::new(),
            border: Style::new().fg(Color::DarkGray),
            border_focused: Style::new().fg(Color::Cyan),
            title: Style::new().fg(Color::Gray).add_modifier(Modifier::BOLD),
            selected: Style::new().bg(Color::Rgb(45, 50, 70)),
            gauge_filled: Style::new().fg(Color::Cyan),
            gauge_empty: Style::new().fg(Color::DarkGray),
            value: Style::new().fg(Color::White),
            dim: Style::new().fg(Color::DarkGray),
            error: Style::new().fg(Color::LightRed),
            editor: Style::new().fg(Color::Black).bg(Color::Yellow),
            status: Style::new().fg(Color::Gray).bg(Color::Rgb(30, 30, 40)),
            token_fg: Style::new().fg(Color::Rgb(235, 235, 235)),
            gradient: vec![
                stop(0.0, (150, 30, 45)),
                stop(0.25, (150, 80, 30)),
                stop(0.5, (115, 105, 30)),
                stop(0.75, (45, 95, 60)),
                stop(1.0, (35, 60, 85)),
            ],
        }
    }

    /// For NO_COLOR: structure survives through modifiers only.
    pub fn plain() -> Self {
        let none = Style::new();
        Self {
            base: none,
            border: none,
            border_focused: none.add_modifier(Modifier::BOLD),
            title: none.add_modifier(Modifier::BOLD),
            selected: none.add_modifier(Modifier::REVERSED),
            gauge_filled: none,
            gauge_empty: none,
            value: none,
            dim: none,
            error: none.add_modifier(Modifier::BOLD),
            editor: none.add_modifier(Modifier::UNDERLINED),
            status: none.add_modifier(Modifier::REVERSED),
            token_fg: none,
            gradient: Vec::new(),
        }
    }

    /// https://no-color.org: any non-empty NO_COLOR turns colours off.
    pub fn from_env() -> Self {
        match std::env::var_os("NO_COLOR") {
            Some(v) if !v.is_empty() => Self::plain(),
            _ => Self::dark(),
        }
    }

    pub fn frame(&self, focused: bool) -> Style {
        if focused {
            self.border_focused
        } else {
            self.border
        }
    }

    /// The background of a token with processed probability `prob`, linear between stops.
    pub fn token_style(&self, prob: f32) -> Style {
        let Some(first) = self.gradient.first() else {
            return self.token_fg;
        };
        let p = if prob.is_finite() {
            prob.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut lo = *first;
        for &hi in &self.gradient {
            if p <= hi.at {
                let span = hi.at - lo.at;
                let t = if span > 0.0 { (p - lo.at) / span } else { 0.0 };
                let mix =
                    |a: u8, b: u8| (f32::from(a) + (f32::from(b) - f32::from(a)) * t).round() as u8;
                let (r, g, b) = (
                    mix(lo.rgb.0, hi.rgb.0),
                    mix(lo.rgb.1, hi.rgb.1),
                    mix(lo.rgb.2, hi.rgb.2),
                );
                return self.token_fg.bg(Color::Rgb(r, g, b));
            }
            lo = hi;
        }
        let (r, g, b) = lo.rgb;
        self.token_fg.bg(Color::Rgb(r, g, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_hits_its_stops_and_interpolates_between() {
        let theme = Theme::dark();
        assert_eq!(theme.token_style(0.0).bg, Some(Color::Rgb(150, 30, 45)));
        assert_eq!(theme.token_style(1.0).bg, Some(Color::Rgb(35, 60, 85)));
        assert_eq!(theme.token_style(0.125).bg, Some(Color::Rgb(150, 55, 38)));
        assert_eq!(theme.token_style(f32::NAN), theme.token_style(0.0));
        assert_eq!(theme.token_style(7.0), theme.token_style(1.0));
    }

    #[test]
    fn plain_theme_has_no_colours() {
        let theme = Theme::plain();
        assert_eq!(theme.token_style(0.3).bg, None);
        assert_eq!(theme.status.bg, None);
    }
}
