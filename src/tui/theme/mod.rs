//! Colours as meaning, not as numbers: views ask the theme for `token_style(prob)` or
//! `frame(focused)`, and theme files (`file`) fill in this struct; `catalog` holds the themes to
//! choose from.

pub mod catalog;
pub mod file;

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
    /// Token text is black or white, whichever reads better on its heatmap colour (`fg: auto`).
    pub token_contrast: bool,
    /// Empty means "no colour at all" (NO_COLOR): tokens keep the base style.
    pub gradient: Vec<GradientStop>,
}

impl Theme {
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
            token_contrast: false,
            gradient: Vec::new(),
        }
    }

    /// https://no-color.org: any non-empty NO_COLOR asks for no colours.
    pub fn no_color_requested() -> bool {
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
    }

    pub fn frame(&self, focused: bool) -> Style {
        if focused {
            self.border_focused
        } else {
            self.border
        }
    }

    /// The token under the cursor: its heatmap colours swapped, so that it stands out in any
    /// theme, NO_COLOR included.
    pub fn cursor_style(&self, prob: f32) -> Style {
        self.token_style(prob)
            .add_modifier(Modifier::REVERSED | Modifier::BOLD)
    }

    /// The background of a token with processed probability `prob`, linear between stops;
    /// without colours, a weight instead (see [`weight_cue`]).
    pub fn token_style(&self, prob: f32) -> Style {
        let Some(first) = self.gradient.first() else {
            return self.token_fg.add_modifier(weight_cue(prob));
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
                return self.on_heatmap((
                    mix(lo.rgb.0, hi.rgb.0),
                    mix(lo.rgb.1, hi.rgb.1),
                    mix(lo.rgb.2, hi.rgb.2),
                ));
            }
            lo = hi;
        }
        self.on_heatmap(lo.rgb)
    }

    fn on_heatmap(&self, (r, g, b): (u8, u8, u8)) -> Style {
        let style = self.token_fg.bg(Color::Rgb(r, g, b));
        if !self.token_contrast {
            return style;
        }
        // WCAG: black text wins above a relative luminance of about 0.18.
        let linear = |c: u8| {
            let c = f32::from(c) / 255.0;
            if c <= 0.039_28 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let luminance = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
        style.fg(if luminance > 0.179 {
            Color::Black
        } else {
            Color::White
        })
    }
}

/// Probabilities under which a colourless token is set bold (unlikely) and italic (a toss-up).
const UNLIKELY: f32 = 0.1;
const UNSURE: f32 = 0.5;

impl Theme {
    /// What the heatmap's styles mean, as (label, style) pieces of a legend: each gradient
    /// stop's probability on its own colour, or, without colours, each weight with where it
    /// starts (`bold <0.1`), in that weight.
    pub fn heat_legend(&self) -> Vec<(String, Style)> {
        if self.gradient.is_empty() {
            return vec![
                (format!("bold <{UNLIKELY}"), self.token_style(0.0)),
                (format!("italic <{UNSURE}"), self.token_style(UNLIKELY)),
            ];
        }
        self.gradient
            .iter()
            .map(|stop| {
                // `.25` rather than `0.25`: the stops sit side by side in little room.
                let at = format!("{}", stop.at);
                let at = at
                    .strip_prefix("0.")
                    .map_or(at.clone(), |rest| format!(".{rest}"));
                (format!(" {at} "), self.token_style(stop.at))
            })
            .collect()
    }
}

/// Where there are no colours, the heatmap's message by weight: bold for a token the sampler
/// thought unlikely, italic for an unsure one, plain for a likely one. (Underline already marks
/// where samples part.)
fn weight_cue(prob: f32) -> Modifier {
    match prob {
        p if p.is_nan() || p < UNLIKELY => Modifier::BOLD,
        p if p < UNSURE => Modifier::ITALIC,
        _ => Modifier::empty(),
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
    fn contrast_picks_black_on_light_and_white_on_dark_heatmap_colours() {
        let mut theme = Theme::dark();
        theme.token_contrast = true;
        theme.gradient = vec![
            GradientStop {
                at: 0.0,
                rgb: (68, 1, 84),
            },
            GradientStop {
                at: 1.0,
                rgb: (253, 231, 37),
            },
        ];
        assert_eq!(theme.token_style(0.0).fg, Some(Color::White));
        assert_eq!(theme.token_style(1.0).fg, Some(Color::Black));
        theme.token_contrast = false;
        assert_eq!(theme.token_style(1.0).fg, Theme::dark().token_fg.fg);
    }

    #[test]
    fn plain_theme_has_no_colours() {
        let theme = Theme::plain();
        assert_eq!(theme.token_style(0.3).bg, None);
        assert_eq!(theme.status.bg, None);
    }

    #[test]
    fn the_legend_shows_each_stop_on_its_colour_or_names_the_weights() {
        let dark = Theme::dark();
        let legend = dark.heat_legend();
        let labels: Vec<&str> = legend.iter().map(|(label, _)| label.as_str()).collect();
        assert_eq!(labels, [" 0 ", " .25 ", " .5 ", " .75 ", " 1 "]);
        assert_eq!(legend[1].1, dark.token_style(0.25));
        let plain = Theme::plain().heat_legend();
        assert_eq!(plain[0].0, "bold <0.1");
        assert_eq!(plain[0].1.add_modifier, Modifier::BOLD);
        assert_eq!(plain[1].0, "italic <0.5");
        assert_eq!(plain[1].1.add_modifier, Modifier::ITALIC);
    }

    /// Issue 34: under NO_COLOR the heatmap still says something: bold for unlikely tokens,
    /// italic for unsure ones, plain for likely ones.
    #[test]
    fn without_colours_probability_shows_as_weight() {
        let theme = Theme::plain();
        let cue = |p: f32| theme.token_style(p).add_modifier;
        assert_eq!(cue(0.02), Modifier::BOLD);
        assert_eq!(cue(f32::NAN), Modifier::BOLD);
        assert_eq!(cue(0.3), Modifier::ITALIC);
        assert_eq!(cue(0.8), Modifier::empty());
        // A coloured theme keeps its colours alone.
        assert_eq!(
            Theme::dark().token_style(0.02).add_modifier,
            Modifier::empty()
        );
    }
}
