//! The page `samplab render --html` writes: one file that needs nothing else (its style,
//! script, data and charts are inline, and its Content-Security-Policy forbids every fetch),
//! showing the prompt, each run's samples on the theme's heatmap with an inspector on hover,
//! the statistics, the watched tokens' charts and the provenance.

mod chart;
mod colour;
mod columns;
mod escape;
mod hover;
mod provenance;

use crate::response::SampleResponse;
use crate::tui::Theme;
use base64::Engine as _;
use chart::Series;
use hover::RunData;
use ratatui::style::{Color, Style};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fmt::Write;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// Probabilities the heatmap's legend shows.
const LEGEND: [f32; 7] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0];

/// Entropy the stats chart reaches at its top, as the columns' sparklines in the playground:
/// about a choice among 55 equally likely tokens.
const ENTROPY_TOP: f32 = 4.0;

/// The page's data: one entry per run, for the inspector.
#[derive(Serialize)]
struct PageData<'a> {
    runs: Vec<RunData<'a>>,
}

/// The whole page for `runs` in `theme`'s colours.
pub fn page(runs: &[SampleResponse], theme: &Theme) -> serde_json::Result<String> {
    let data: Vec<RunData> = runs.iter().map(RunData::of).collect();
    let mut body = String::new();
    if let Some(first) = runs.first() {
        body.push_str(&prompt(first));
    }
    for (index, (run, run_data)) in runs.iter().zip(&data).enumerate() {
        body.push_str(&run_section(index, run, run_data, theme)?);
    }
    let json = escape::script_json(&PageData { runs: data })?;
    let title = runs.first().map_or("", |run| run.model.as_str());
    Ok(format!(
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=Content-Security-Policy content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src '{}'\">\
         <title>samplab · {}</title><style>{}{STYLE}</style></head>\n<body><main>\
         <h1>samplab run</h1><div class=legend>{}</div>{body}</main>\
         <aside id=inspector hidden></aside>\
         <script type=application/json id=data>{json}</script><script>{SCRIPT}</script>\
         </body></html>\n",
        script_hash(SCRIPT),
        escape::text(title),
        theme_variables(theme),
        legend(theme),
    ))
}

/// The CSP source that lets the page's own script run and nothing else: not a script a file's
/// text might smuggle in, were it ever not escaped.
fn script_hash(script: &str) -> String {
    let digest = Sha256::digest(script.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The theme's colours for the page around the tokens; where a theme leaves one to the
/// terminal (`base: {}`), a dark terminal's, which the default theme is made for.
fn theme_variables(theme: &Theme) -> String {
    let pick = |colour: Option<Color>, fallback: &str| {
        colour
            .and_then(colour::hex)
            .unwrap_or_else(|| fallback.to_owned())
    };
    let fg = pick(theme.base.fg, "#d4d4d4");
    let bg = pick(theme.base.bg, "#16161d");
    let variables = [
        ("fg", fg.clone()),
        ("bg", bg.clone()),
        ("dim", pick(theme.dim.fg, "#8a8a8a")),
        ("border", pick(theme.border.fg, "#5a5a5a")),
        ("accent", pick(theme.border_focused.fg, &fg)),
        ("title", pick(theme.title.fg, &fg)),
        ("value", pick(theme.value.fg, &fg)),
        ("panel", pick(theme.status.bg, &bg)),
        ("panel-fg", pick(theme.status.fg, &fg)),
    ];
    let mut css = String::from(":root{");
    for (name, value) in variables {
        let _ = write!(css, "--{name}:{value};");
    }
    css.push('}');
    css
}

/// Swatches of the heatmap at a few probabilities, through the theme's own mapping (its
/// colours, or its weights when it has none).
fn legend(theme: &Theme) -> String {
    let swatches: String = LEGEND
        .iter()
        .map(|&p| styled(theme.token_style(p), &format!("{p}")))
        .collect();
    format!(
        "tokens by the probability their logprobs report, the model's own unless a run's \
         logprobs_mode is processed (hover one to inspect it): {swatches}"
    )
}

fn styled(style: Style, text: &str) -> String {
    format!(
        "<span style=\"{}\">{}</span>",
        colour::declarations(style),
        escape::text(text)
    )
}

/// The prompt as typed, and in chat mode the conversation the template got.
fn prompt(response: &SampleResponse) -> String {
    let mut html = String::from("<h2>prompt</h2>");
    match &response.prompt {
        Some(prompt) if prompt.chat && !prompt.messages.is_empty() => {
            for message in &prompt.messages {
                let _ = write!(
                    html,
                    "<p class=dim>{}</p><pre>{}</pre>",
                    escape::text(&message.role),
                    escape::text(&message.content)
                );
            }
        }
        Some(prompt) => {
            let _ = write!(html, "<pre>{}</pre>", escape::text(&prompt.text));
        }
        None => {
            let _ = write!(
                html,
                "<p class=note>given as token ids: {:?}</p>",
                response.prompt_token_ids
            );
        }
    }
    html
}

/// One run: its model, parameters, columns, statistics, watched tokens and provenance.
fn run_section(
    index: usize,
    response: &SampleResponse,
    data: &RunData,
    theme: &Theme,
) -> serde_json::Result<String> {
    let mut html = format!(
        "<section class=run data-run={index}><h2>{}</h2>",
        escape::text(&response.model)
    );
    if let Some(rendered) = response.prompt.as_ref().and_then(|p| p.rendered.as_ref()) {
        let _ = write!(
            html,
            "<details><summary>what the model saw (its chat template's rendering)</summary>\
             <pre>{}</pre></details>",
            escape::text(rendered)
        );
    }
    let _ = write!(
        html,
        "<details><summary>parameters (those not at their defaults)</summary><pre>{}</pre>\
         </details>{}",
        escape::text(&response.params.to_yaml_non_default()),
        columns::columns(response, data, theme)
    );
    html.push_str(&stats(response));
    html.push_str(&watched(response));
    if let Some(provenance) = &response.provenance {
        let value = serde_json::to_value(provenance)?;
        let _ = write!(html, "<h3>provenance</h3>{}", provenance::table(&value));
    }
    html.push_str("</section>");
    Ok(html)
}

/// The statistics as the playground's `i` tells them, and the raw entropy along each sample.
fn stats(response: &SampleResponse) -> String {
    let Some(stats) = &response.stats else {
        return String::new();
    };
    let lines: String = stats
        .describe(&response.trajectories)
        .iter()
        .map(|line| format!("<li>{}</li>", escape::text(line)))
        .collect();
    let series: Vec<Series> = response
        .trajectories
        .iter()
        .filter_map(|t| {
            Some(Series {
                label: format!("#{}", t.index),
                values: t.entropy.as_deref()?,
            })
        })
        .collect();
    format!(
        "<h3>statistics</h3><ul class=stats>{lines}</ul>{}",
        chart::lines(
            "the model's raw entropy along each sample",
            &series,
            ENTROPY_TOP,
            "nats"
        )
    )
}

/// For each watched token, its probability along each sample.
fn watched(response: &SampleResponse) -> String {
    let Some(watch) = &response.watch else {
        return String::new();
    };
    let probabilities: Vec<Vec<(String, Vec<f32>)>> = watch
        .iter()
        .map(|w| {
            response
                .trajectories
                .iter()
                .filter_map(|t| {
                    let series = t.watched.as_ref()?.get(&w.name)?;
                    let p = series.iter().map(|lp| lp.exp()).collect();
                    Some((format!("#{}", t.index), p))
                })
                .collect()
        })
        .collect();
    let mut html = String::from("<h3>watched tokens</h3>");
    for (w, lines) in watch.iter().zip(&probabilities) {
        let series: Vec<Series> = lines
            .iter()
            .map(|(label, values)| Series {
                label: label.clone(),
                values,
            })
            .collect();
        html.push_str(&chart::lines(
            &format!("{:?} (token {})", w.name, w.id),
            &series,
            1.0,
            "probability",
        ));
    }
    html
}
