//! `samplab render FILE --html OUT.html`: the page from a results file, checked as text and in
//! a real headless Chromium (which `.ci/run` installs; see `common::chromium`).

use crate::common;
use crate::common::chromium::Browser;
use crate::common::{samplab, stderr};

use samplab::params::{Engine, SamplingParams};
use samplab::response::provenance::{FileDigest, ModelProvenance};
use samplab::response::{
    Provenance, RunStats, SampleResponse, StepTrace, StopMatched, StopReason, Timings, TopLogprob,
    Trajectory, Watched,
};
use samplab::sampling::StageTrace;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A token text that would run script if it reached the page as markup.
const HOSTILE: &str = r#"</script><img src=x onerror="document.title='pwned'">"#;

fn top(id: u32, text: &str, logprob: f32) -> TopLogprob {
    TopLogprob(id, text.to_owned(), logprob)
}

/// Two samples of three tokens: the first traced through the chain, one of its tokens and one
/// alternative hostile markup; the second untraced, ended by a stop token.
fn response() -> SampleResponse {
    let traced_step = |chosen: TopLogprob, other: TopLogprob| StepTrace {
        tokens: vec![chosen, other],
        stages: vec![
            StageTrace::new("model", vec![Some((3.0, 0.9)), Some((0.5, 0.08))]),
            StageTrace::new("top_p", vec![Some((3.0, 1.0)), None]),
        ],
    };
    let first = Trajectory {
        token_ids: vec![5, 6, 7],
        text: format!(" the cat{HOSTILE}"),
        logprobs: vec![-0.1, -0.7, -2.3],
        top_logprobs: Some(vec![
            vec![top(5, " the", -0.1), top(9, " a", -2.5)],
            vec![top(6, " cat", -0.7), top(8, HOSTILE, -0.9)],
            vec![top(5, " the", -0.2), top(7, HOSTILE, -2.3)],
        ]),
        entropy: Some(vec![0.4, 1.1, 2.0]),
        kept_entropy: Some(vec![0.0, 0.6, 1.2]),
        watched: Some([(" the".to_owned(), vec![-0.1, -3.0, -0.2])].into()),
        trace: Some(vec![
            traced_step(top(5, " the", -0.1), top(9, " a", -2.5)),
            traced_step(top(6, " cat", -0.7), top(8, HOSTILE, -0.9)),
            traced_step(top(7, HOSTILE, -2.3), top(5, " the", -0.2)),
        ]),
        ..Trajectory::empty(0, 42, Some(2))
    };
    let second = Trajectory {
        token_ids: vec![9, 6, 2],
        text: " a cat".into(),
        logprobs: vec![-2.5, -0.3, -0.05],
        top_logprobs: Some(vec![
            vec![top(5, " the", -0.1), top(9, " a", -2.5)],
            vec![top(6, " cat", -0.3)],
            vec![top(2, "</s>", -0.05)],
        ]),
        entropy: Some(vec![0.4, 0.9, 0.1]),
        kept_entropy: Some(vec![0.0, 0.5, 0.0]),
        watched: Some([(" the".to_owned(), vec![-0.1, -4.0, -5.0])].into()),
        stop_reason: StopReason::Stop,
        stop_matched: Some(StopMatched::Token(2)),
        ..Trajectory::empty(1, 43, Some(2))
    };
    let trajectories = vec![first, second];
    SampleResponse {
        model: "tiny<b>".into(),
        prompt: None,
        params: SamplingParams::from_yaml("logprobs: 2\nseed: 42\nwatch: [\" the\"]").unwrap(),
        prompt_token_ids: vec![1, 4],
        prompt_logprobs: None,
        prompt_top_logprobs: None,
        watch: Some(vec![Watched {
            name: " the".into(),
            id: 5,
            first_of: None,
        }]),
        prompt_watched: None,
        stats: RunStats::of(&trajectories),
        trajectories,
        timings: Timings::default(),
        provenance: Some(Provenance {
            samplab: "0.1.0".into(),
            model: ModelProvenance {
                source: "/models/<tiny>.gguf".into(),
                files: vec![FileDigest {
                    name: "<tiny>.gguf".into(),
                    size: 1024,
                    sha256: Some("ab12".into()),
                }],
                server: None,
                served_model: None,
                backend: None,
            },
            engine: Engine::Vllm,
            chain: vec!["temperature".into(), "top_p".into()],
            device: "cpu".into(),
            kernels: Vec::new(),
            activations: None,
            seeds: vec![42, 43],
        }),
    }
}

/// The response as a results file in `dir`.
fn results_file(dir: &Path) -> PathBuf {
    let path = dir.join("run.json");
    std::fs::write(&path, serde_json::to_string_pretty(&response()).unwrap()).unwrap();
    path
}

/// `samplab render FILE --html OUT`, which must succeed; the page's text.
fn render(input: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "render",
        input.to_str().unwrap(),
        "--html",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let output = samplab(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn the_page_holds_the_run_and_only_escaped_text_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let page = render(&results_file(dir.path()), &dir.path().join("run.html"), &[]);
    assert!(page.starts_with("<!doctype html>"));
    assert!(
        page.contains("Content-Security-Policy")
            && page.contains("default-src 'none'")
            && page.contains("script-src 'sha256-"),
        "the page forbids every fetch and every script but its own"
    );
    assert!(
        !page.contains("<img") && !page.contains("tiny<b>"),
        "markup from the file reached the page as markup"
    );
    assert!(page.contains("&lt;/script&gt;&lt;img src=x onerror="));
    assert!(page.contains("<title>samplab · tiny&lt;b&gt;</title>"));
    assert!(
        page.contains("\\u003c/script\\u003e\\u003cimg"),
        "the data block cannot be closed by a token's text"
    );
    for shown in [
        "#0 seed 42",
        "#1 seed 43",
        "stop &lt;/s&gt; · 3 tokens · ≠#0@1",
        "<th>model.source</th><td>/models/&lt;tiny&gt;.gguf</td>",
        "<th>model.files[0].sha256</th><td>ab12</td>",
        "<th>chain</th><td>temperature, top_p</td>",
        "<th>seeds</th><td>42, 43</td>",
        "distinct n-grams",
        "the model&#39;s raw entropy along each sample",
        "&quot; the&quot; (token 5)",
        "logprobs: 2",
    ] {
        assert!(page.contains(shown), "{shown} is missing from the page");
    }
    // The heatmap is the theme's own: the default theme's colour at p = exp(-0.1).
    let dark = samplab::tui::Theme::dark().token_style((-0.1f32).exp());
    let ratatui::style::Color::Rgb(r, g, b) = dark.bg.unwrap() else {
        panic!("the dark theme's heatmap is RGB");
    };
    assert!(page.contains(&format!("background:#{r:02x}{g:02x}{b:02x}")));
    let light = render(
        &results_file(dir.path()),
        &dir.path().join("light.html"),
        &["--theme", "light"],
    );
    assert!(
        light.contains("--bg:#fafafa"),
        "the light theme's page colours"
    );
}

#[test]
fn a_bad_file_or_output_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let good = results_file(dir.path());
    let truncated = dir.path().join("cut.json");
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&truncated, &text[..text.len() / 3]).unwrap();
    let out = dir.path().join("out.html");
    let out_arg = out.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec!["render", "/no/such/run.json", "--html", out_arg],
            "cannot read the results file /no/such/run.json: No such file or directory",
        ),
        (
            vec!["render", truncated.to_str().unwrap(), "--html", out_arg],
            "cut.json ends early (line",
        ),
        (
            vec![
                "render",
                good.to_str().unwrap(),
                "--html",
                "/no/such/dir/out.html",
            ],
            "cannot write /no/such/dir/out.html: the directory /no/such/dir does not exist",
        ),
        (
            vec![
                "render",
                good.to_str().unwrap(),
                "--html",
                out_arg,
                "--theme",
                "neon",
            ],
            "theme neon: no theme of that name",
        ),
    ];
    for (args, expected) in cases {
        let output = samplab(&args);
        assert!(!output.status.success(), "{args:?} succeeded");
        let message = stderr(&output);
        assert!(message.contains(expected), "{args:?}:\n{message}");
        assert!(!message.contains("panicked"), "{message}");
    }
    assert!(!out.exists(), "a failed render writes nothing");
}

#[test]
fn standard_input_is_read_for_a_dash() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("piped.html");
    let mut child = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["render", "-", "--html", out.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let json = serde_json::to_string(&vec![response(), response()]).unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let page = std::fs::read_to_string(out).unwrap();
    assert_eq!(page.matches("<section class=run").count(), 2, "one per run");
}

/// Issue 51: the OS's reason was said twice ("No such file or directory (os error 2): No such
/// file or directory (os error 2)").
#[test]
fn a_missing_file_is_refused_with_its_reason_said_once() {
    let output = samplab(&["render", "/no/such/run.json", "--html", "/tmp/never.html"]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("cannot read the results file /no/such/run.json"),
        "{message}"
    );
    assert_eq!(
        message.matches("No such file or directory").count(),
        1,
        "{message}"
    );
}

/// Issue 51: `--html -` wrote a file named `-`.
#[test]
fn a_dash_for_html_writes_the_page_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = results_file(dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_samplab"))
        .args(["render", input.to_str().unwrap(), "--html", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let page = String::from_utf8(output.stdout).unwrap();
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("#1 seed 43"));
    assert!(!dir.path().join("-").exists(), "no file named -");
}

/// The inspector's text after hovering the token `selector` names.
fn hover(browser: &mut Browser, selector: &str) -> String {
    browser.hover(selector);
    let text = browser.eval("document.getElementById('inspector').textContent");
    text.as_str().unwrap_or_default().to_owned()
}

#[test]
fn in_chromium_the_page_loads_cleanly_and_hover_shows_alternatives_and_trace() {
    let Some(mut browser) = Browser::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("run.html");
    render(&results_file(dir.path()), &page, &[]);
    browser.open(&page);
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:?}");

    let first = hover(&mut browser, ".col[data-sample='0'] .t[data-i='0']");
    for shown in [
        "#0 seed 42 · token 1",
        "raw logprob -0.100",
        "alternatives, raw p",
        "\" the\"",
        "\" a\"",
        "chain, in the order it ran",
        "model        0.900",
        "top_p        1.000",
        "cut by top_p",
        "watched",
    ] {
        assert!(
            first.contains(shown),
            "{shown:?} not in the hover:\n{first}"
        );
    }
    let untraced = hover(&mut browser, ".col[data-sample='1'] .t[data-i='1']");
    assert!(untraced.contains("\" cat\""), "{untraced}");
    assert!(
        untraced.contains("no stage trace in this file"),
        "an untraced sample says so: {untraced}"
    );

    let hostile = hover(&mut browser, ".col[data-sample='0'] .t[data-i='2']");
    let quoted = serde_json::to_string(HOSTILE).unwrap();
    assert!(hostile.contains(&quoted), "{hostile}");
    let span = browser
        .eval("document.querySelector(\".col[data-sample='0'] .t[data-i='2']\").textContent");
    assert_eq!(span, HOSTILE, "the token's text shows as text");
    assert_eq!(
        browser.eval("document.images.length"),
        0,
        "no element came from a token"
    );
    assert_eq!(browser.eval("document.title"), "samplab · tiny<b>");
    let errors = browser.errors();
    assert!(errors.is_empty(), "hovering reported errors: {errors:?}");
}

/// The issue's goal: the page of an 8 × 256-token run of the real stories260K model, with 20
/// alternatives per token and every step traced, stays under 2 MB; its load time is printed
/// (run with --nocapture), not asserted, since machines differ.
#[test]
fn an_8_by_256_run_makes_a_small_page_that_loads_and_inspects() {
    let Some(model) = common::test_model() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sampled = samplab(&[
        "sample",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "Once upon a time",
        "--json",
        "--trace",
        "--set",
        "num_samples=8",
        "--set",
        "max_tokens=256",
        "--set",
        "ignore_eos=true",
        "--set",
        "logprobs=20",
        "--set",
        "seed=7",
        "--set",
        "watch=[\" the\", \".\"]",
    ]);
    assert!(sampled.status.success(), "{}", stderr(&sampled));
    let results = dir.path().join("run.json");
    std::fs::write(&results, &sampled.stdout).unwrap();
    let response: SampleResponse = serde_json::from_slice(&sampled.stdout).unwrap();
    assert!(
        response
            .trajectories
            .iter()
            .all(|t| t.token_ids.len() == 256)
    );

    let page = dir.path().join("run.html");
    let started = Instant::now();
    let html = render(&results, &page, &[]);
    let render_time = started.elapsed();
    println!(
        "8 x 256 tokens, logprobs 20, traced: results file {:.2} MB, page {:.2} MB, \
         rendered in {render_time:.2?}",
        sampled.stdout.len() as f64 / 1e6,
        html.len() as f64 / 1e6
    );
    assert!(html.len() < 2_000_000, "the page is {} bytes", html.len());
    assert_eq!(html.matches("class=t ").count(), 8 * 256);

    let Some(mut browser) = Browser::start() else {
        return;
    };
    let load = browser.open(&page);
    println!("the page loaded in {load:.2?} in headless Chromium");
    let last = hover(&mut browser, ".col[data-sample='7'] .t[data-i='255']");
    let trajectory = &response.trajectories[7];
    let alternatives = &trajectory.top_logprobs.as_ref().unwrap()[255];
    assert!(alternatives.len() >= 20);
    for alternative in alternatives {
        let quoted = serde_json::to_string(&alternative.1).unwrap();
        assert!(last.contains(&quoted), "{quoted} not in the hover:\n{last}");
    }
    assert!(last.contains("chain, in the order it ran"), "{last}");
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:?}");
}

#[test]
fn a_trace_is_refused_where_it_has_no_place() {
    let output = samplab(&[
        "sample", "--prompt", "hi", "--json", "--trace", "--shape", "twinkle",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--trace records what twinkle's shape has no place for"),
        "{}",
        stderr(&output)
    );
}

/// Opens `page` in Chromium at 1400 × 900, the size issue 51 was seen at.
fn open_at_1400(browser: &mut Browser, page: &Path) {
    browser.open(page);
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        serde_json::json!({"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    );
    assert_eq!(browser.eval("innerWidth"), 1400);
}

/// Issue 51: a run sampled without `logprobs` (as the playground's `w` writes one) rendered as
/// plain grey text: `samplab sample --json` now keeps every token's alternatives, which the page
/// colours and shows on hover, as the playground does.
#[test]
fn a_run_sampled_without_logprobs_is_coloured_and_inspectable_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let sampled = samplab(&[
        "sample",
        "--prompt",
        "Once upon a time",
        "--json",
        "--set",
        "num_samples=2",
        "--set",
        "max_tokens=24",
        "--set",
        "seed=3",
    ]);
    assert!(sampled.status.success(), "{}", stderr(&sampled));
    let response: SampleResponse = serde_json::from_slice(&sampled.stdout).unwrap();
    for t in &response.trajectories {
        assert_eq!(t.top_logprobs, None, "no logprobs were asked");
        let alternatives = t.alternatives.as_ref().expect("every token's alternatives");
        assert_eq!(alternatives.len(), t.token_ids.len());
        assert!(alternatives.iter().all(|top| top.len() > 1));
    }
    let results = dir.path().join("run.json");
    std::fs::write(&results, &sampled.stdout).unwrap();
    let page = dir.path().join("run.html");
    let html = render(&results, &page, &[]);
    assert!(!html.contains("no per-token texts"));

    let Some(mut browser) = Browser::start() else {
        return;
    };
    open_at_1400(&mut browser, &page);
    let colours = browser.eval(
        "new Set([...document.querySelectorAll('.t')].map(t => getComputedStyle(t).backgroundColor)).size",
    );
    assert!(
        colours.as_u64().unwrap() > 1,
        "tokens are coloured by probability, not all alike: {colours}"
    );
    let shown = hover(&mut browser, ".col[data-sample='0'] .t[data-i='0']");
    let rows = browser.eval("document.querySelectorAll('#inspector .row').length");
    let first = &response.trajectories[0].alternatives.as_ref().unwrap()[0];
    assert_eq!(rows.as_u64().unwrap() as usize, first.len(), "{shown}");
    for alternative in first {
        let quoted = serde_json::to_string(&alternative.1).unwrap();
        assert!(
            shown.contains(&quoted),
            "{quoted} not in the hover:\n{shown}"
        );
    }
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:?}");
}

/// Issue 51: at 1400 px the inspector took a third of the width and the columns scrolled
/// sideways. Six columns of long unbroken tokens now wrap within the window, and the inspector
/// floats beside the hovered token, hidden until then.
#[test]
fn at_1400_px_columns_fit_and_the_inspector_floats_beside_the_token() {
    let Some(mut browser) = Browser::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut run = response();
    let long = "x".repeat(300);
    for top in run
        .trajectories
        .iter_mut()
        .flat_map(|t| t.top_logprobs.iter_mut().flatten())
    {
        for alternative in top.iter_mut().filter(|a| a.0 == 6) {
            alternative.1 = long.clone();
        }
    }
    let base = run.trajectories.clone();
    for i in 2..6 {
        run.trajectories.push(Trajectory {
            index: i,
            ..base[i as usize % 2].clone()
        });
    }
    let input = dir.path().join("wide.json");
    std::fs::write(&input, serde_json::to_string(&run).unwrap()).unwrap();
    let page = dir.path().join("wide.html");
    render(&input, &page, &[]);
    open_at_1400(&mut browser, &page);
    assert_eq!(
        browser.eval("document.getElementById('inspector').hidden"),
        true,
        "no panel before a hover"
    );
    let sideways = browser.eval(
        "[document.documentElement, ...document.querySelectorAll('.cols, .col, .body')]
           .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.className || e.tagName)",
    );
    assert_eq!(sideways, serde_json::json!([]), "these scroll sideways");
    let main_width = browser.eval("document.querySelector('main').getBoundingClientRect().width");
    assert!(
        main_width.as_f64().unwrap() > 1300.0,
        "the page's text has the window's width: {main_width}"
    );

    hover(&mut browser, ".col[data-sample='3'] .t[data-i='1']");
    let placed = browser.eval(
        "(() => { const p = document.getElementById('inspector').getBoundingClientRect();
           const t = document.querySelector(\".col[data-sample='3'] .t[data-i='1']\")
             .getBoundingClientRect();
           return [p.width, p.top - t.bottom, t.top - p.bottom, p.left, p.right]; })()",
    );
    let [width, below, above, left, right] =
        serde_json::from_value::<[f64; 5]>(placed.clone()).unwrap();
    assert!(width <= 400.0, "a compact panel: {placed}");
    assert!(
        (0.0..=8.0).contains(&below) || (0.0..=8.0).contains(&above),
        "the panel touches the token's line: {placed}"
    );
    assert!(
        left >= 0.0 && right <= 1400.0,
        "within the window: {placed}"
    );
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:?}");
}
