//! Line charts as inline SVG: a value along each sample's tokens, one line per sample, with
//! the scale and a legend in HTML around it (text inside a stretched SVG would stretch too).

use super::escape;
use std::fmt::Write;

/// Okabe and Ito's palette, told apart with every common colour-vision deficiency; samples
/// beyond eight take the colours again.
const PALETTE: [&str; 8] = [
    "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7", "#999999",
];

/// The drawing's own units: the SVG stretches to the page's width.
const WIDTH: f32 = 1000.0;
const HEIGHT: f32 = 160.0;

/// One line: its label in the legend and its values, token by token.
pub struct Series<'a> {
    pub label: String,
    pub values: &'a [f32],
}

/// The colour of line `index`.
pub fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// A chart titled `title` of every series on a scale from 0 to `top` (higher values are drawn
/// at the top), `unit` naming what the values are; empty when no series has a value.
pub fn lines(title: &str, series: &[Series], top: f32, unit: &str) -> String {
    let longest = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    if longest == 0 || top <= 0.0 {
        return String::new();
    }
    let step = WIDTH / (longest.max(2) - 1) as f32;
    let mut svg = format!(
        "<svg class=chart viewBox=\"0 0 {WIDTH} {HEIGHT}\" preserveAspectRatio=none \
         role=img aria-label=\"{}\">",
        escape::text(title)
    );
    for (index, line) in series.iter().enumerate() {
        let mut points = String::new();
        for (i, &value) in line.values.iter().enumerate() {
            let value = if value.is_finite() { value } else { 0.0 };
            let y = HEIGHT * (1.0 - (value / top).clamp(0.0, 1.0));
            let _ = write!(points, "{:.1},{y:.1} ", i as f32 * step);
        }
        let _ = write!(
            svg,
            "<polyline points=\"{}\" stroke=\"{}\"/>",
            points.trim_end(),
            colour(index)
        );
    }
    svg.push_str("</svg>");
    let legend: String = series
        .iter()
        .enumerate()
        .map(|(index, line)| {
            format!(
                "<span style=\"color:{}\">━ {}</span> ",
                colour(index),
                escape::text(&line.label)
            )
        })
        .collect();
    format!(
        "<figure><figcaption>{} <span class=dim>(0 to {top} {}, along tokens 0 to {})</span>\
         </figcaption>{svg}<div class=legend>{legend}</div></figure>",
        escape::text(title),
        escape::text(unit),
        longest - 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_series_is_a_line_scaled_to_the_top_and_labelled() {
        let a = [0.0, 0.5, 1.0];
        let b = [2.0, f32::NAN];
        let html = lines(
            "p of <b>",
            &[
                Series {
                    label: "#0".into(),
                    values: &a,
                },
                Series {
                    label: "#1".into(),
                    values: &b,
                },
            ],
            1.0,
            "probability",
        );
        assert!(
            html.contains("points=\"0.0,160.0 500.0,80.0 1000.0,0.0\""),
            "{html}"
        );
        assert!(
            html.contains("points=\"0.0,0.0 500.0,160.0\""),
            "beyond the top is drawn at it, NaN at 0: {html}"
        );
        assert!(html.contains("p of &lt;b&gt;") && !html.contains("<b>"));
        assert!(html.contains(colour(1)));
        assert_eq!(lines("empty", &[], 1.0, ""), "");
    }
}
