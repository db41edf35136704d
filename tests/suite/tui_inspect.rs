//! The columns pane: token cursor, inspector, scrolling, the column grid, visible whitespace,
//! footers and the mouse, as pure updates and as drawn cells.

use crate::common;

use common::tui::*;
use crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use samplab::engine::{Alternative, Event, RunId, TokenEvent};
use samplab::response::{StopMatched, StopReason};
use samplab::tui::{
    Action, App, Effect, Focus, Grid, KeyMap, Mode, ModelId, Overlay, State, Theme, areas, mouse,
    update,
};

fn alternative(id: u32, text: &str, raw: f32, kept: f32) -> Alternative {
    Alternative {
        id,
        text: text.into(),
        logprob: raw.ln(),
        prob: kept,
    }
}

/// " the" (id 42, raw p 0.5, kept 0.7, rank 1) among alternatives; " a" was filtered out.
fn inspected(run_id: RunId, sample: u32) -> Event {
    Event::Token {
        run_id,
        token: TokenEvent {
            sample,
            id: 42,
            text: " the".into(),
            logprob: 0.5f32.ln(),
            prob: 0.7,
            reported_prob: 0.5,
            rank: 1,
            top: vec![
                alternative(42, " the", 0.5, 0.7),
                alternative(7, "\n", 0.25, 0.3),
                alternative(9, " a", 0.125, 0.0),
            ],
            entropy: Some(1.2),
            watched: Vec::new(),
            constraint: None,
            channel: None,
        },
    }
}

/// Two samples, the first ending on " the" with a stop string, and the columns focused.
fn inspecting(width: u16, height: u16) -> State {
    let mut s = state_sized(width, height);
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42, 43])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, "Hello", 0.3)),
    );
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, " world", 0.9)),
    );
    update(&mut s, Action::Engine(ModelId(0), inspected(1, 0)));
    update(&mut s, Action::Engine(ModelId(0), token(1, 1, "Bye", 0.05)));
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            finished(
                1,
                0,
                StopReason::Stop,
                Some(StopMatched::Text("\n\n".into())),
            ),
        ),
    );
    // Back from the prompt, where the playground starts.
    update(&mut s, Action::FocusPrev);
    assert_eq!(s.focus, Focus::Columns);
    s
}

/// A ready model with `samples` columns of `tokens` tokens each ("w0", " w1", …), the params
/// focused: the tests Tab from there.
fn long_run(width: u16, height: u16, samples: u32, tokens: usize) -> State {
    let mut s = state_sized(width, height);
    s.focus = Focus::Params;
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    update(
        &mut s,
        Action::Engine(ModelId(0), started(1, (0..u64::from(samples)).collect())),
    );
    for i in 0..tokens {
        for sample in 0..samples {
            update(
                &mut s,
                Action::Engine(ModelId(0), token(1, sample, &format!(" w{i}"), 0.5)),
            );
        }
    }
    s
}

fn cursor(s: &State) -> Option<(usize, usize)> {
    s.columns.cursor_token()
}

/// The rows of text a column shows on this screen.
fn text_rows(s: &State) -> usize {
    Grid::on_screen(s.size, s.columns.columns.len()).text_rows()
}

// ---- update ----

#[test]
fn arrows_home_and_end_walk_the_tokens_of_the_column() {
    let mut s = long_run(80, 24, 2, 5);
    update(&mut s, Action::FocusPrev);
    assert_eq!(s.focus, Focus::Prompt);
    update(&mut s, Action::FocusPrev);
    assert_eq!(s.focus, Focus::Columns);
    assert_eq!(
        cursor(&s),
        Some((0, 4)),
        "the cursor starts on the newest token"
    );
    update(&mut s, Action::StepToken(-1));
    assert_eq!(cursor(&s), Some((0, 3)));
    update(&mut s, Action::FirstToken);
    update(&mut s, Action::StepToken(-1));
    assert_eq!(cursor(&s), Some((0, 0)), "stops at the first token");
    update(&mut s, Action::StepToken(2));
    assert_eq!(cursor(&s), Some((0, 2)));
    update(&mut s, Action::StepToken(10));
    assert_eq!(cursor(&s), Some((0, 4)), "stops at the last token");
    update(&mut s, Action::LastToken);
    update(&mut s, Action::Engine(ModelId(0), token(1, 0, " new", 0.5)));
    assert_eq!(cursor(&s), Some((0, 5)), "End follows the newest token");
    assert!(
        update(&mut s, Action::StepToken(-1)).is_empty(),
        "no re-run"
    );
}

#[test]
fn up_and_down_move_to_the_token_on_the_next_row() {
    // 80 wide: one column of 42 cells; " w0" … take 3 or 4 cells, so a row holds 12 or so.
    let mut s = long_run(80, 40, 1, 40);
    update(&mut s, Action::FocusPrev);
    update(&mut s, Action::FocusPrev);
    update(&mut s, Action::FirstToken);
    update(&mut s, Action::StepToken(1));
    let text = &s.columns.columns[0].text;
    let (row, cell) = text.start(1).unwrap();
    assert_eq!(row, 0);
    update(&mut s, Action::StepTokenRow(1));
    let (_, token) = cursor(&s).unwrap();
    let text = &s.columns.columns[0].text;
    assert_eq!(text.start(token).unwrap().0, 1);
    assert_eq!(text.nearest(1, cell), Some(token));
    update(&mut s, Action::StepTokenRow(-1));
    let (_, up) = cursor(&s).unwrap();
    assert_eq!(s.columns.columns[0].text.start(up).unwrap().0, 0);
    update(&mut s, Action::StepTokenRow(-1));
    assert_eq!(cursor(&s), Some((0, up)), "no row above the first");
}

#[test]
fn tab_moves_between_columns_keeping_the_index_and_leaves_past_the_ends() {
    let mut s = long_run(200, 50, 3, 6);
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, " extra", 0.5)),
    );
    update(&mut s, Action::FocusNext);
    assert_eq!(s.focus, Focus::Columns);
    update(&mut s, Action::FirstToken);
    update(&mut s, Action::StepToken(6));
    assert_eq!(cursor(&s), Some((0, 6)));
    update(&mut s, Action::StepColumn(1));
    assert_eq!(cursor(&s), Some((1, 5)), "a shorter column: its last token");
    update(&mut s, Action::StepColumn(-1));
    assert_eq!(
        cursor(&s),
        Some((0, 6)),
        "the index survived the shorter column"
    );
    update(&mut s, Action::StepColumn(-1));
    assert_eq!(s.focus, Focus::Params, "Shift+Tab before the first column");
    update(&mut s, Action::FocusNext);
    update(&mut s, Action::StepColumn(1));
    update(&mut s, Action::StepColumn(1));
    assert_eq!(cursor(&s), Some((2, 5)));
    update(&mut s, Action::StepColumn(1));
    assert_eq!(s.focus, Focus::Prompt, "Tab past the last column");

    let keys = KeyMap::default();
    let modes = [Mode::Columns, Mode::Navigate, Mode::Global];
    let press = |code| keys.action(&modes, KeyEvent::new(code, KeyModifiers::NONE));
    assert_eq!(press(KeyCode::Tab), Some(Action::StepColumn(1)));
    assert_eq!(press(KeyCode::BackTab), Some(Action::StepColumn(-1)));
    assert_eq!(press(KeyCode::Esc), Some(Action::FocusPrev));
    assert_eq!(press(KeyCode::PageUp), Some(Action::PageColumn(-1)));
    assert_eq!(press(KeyCode::Char('v')), Some(Action::ToggleWhitespace));
    assert_eq!(press(KeyCode::Char('q')), Some(Action::Quit));
}

#[test]
fn columns_follow_the_stream_until_scrolled_up_and_page_back_to_following() {
    let mut s = long_run(80, 24, 1, 400);
    let rows = text_rows(&s);
    let bottom = |s: &State| s.columns.columns[0].text.lines.len() - rows;
    assert_eq!(s.columns.columns[0].top(rows), bottom(&s));
    update(&mut s, Action::FocusNext);
    update(&mut s, Action::PageColumn(-1));
    let pinned = s.columns.columns[0].top(rows);
    assert_eq!(pinned, bottom(&s) - rows);
    let (_, at) = cursor(&s).unwrap();
    let row = s.columns.columns[0].text.start(at).unwrap().0;
    assert!(
        (pinned..pinned + rows).contains(&row),
        "the cursor moved along"
    );
    for _ in 0..30 {
        update(
            &mut s,
            Action::Engine(ModelId(0), token(1, 0, " more", 0.5)),
        );
    }
    assert_eq!(
        s.columns.columns[0].top(rows),
        pinned,
        "scrolled up: no following"
    );
    for _ in 0..100 {
        update(&mut s, Action::PageColumn(1));
    }
    assert_eq!(s.columns.columns[0].scroll, None);
    update(
        &mut s,
        Action::Engine(ModelId(0), token(1, 0, " again and again", 0.5)),
    );
    assert_eq!(
        s.columns.columns[0].top(rows),
        bottom(&s),
        "following again"
    );
}

#[test]
fn a_cursor_on_an_earlier_token_holds_the_view_while_tokens_stream() {
    let mut s = long_run(80, 24, 1, 40);
    let rows = text_rows(&s);
    update(&mut s, Action::FocusPrev);
    update(&mut s, Action::FocusPrev);
    update(&mut s, Action::StepToken(-1));
    let (_, held) = cursor(&s).unwrap();
    for _ in 0..60 {
        update(
            &mut s,
            Action::Engine(ModelId(0), token(1, 0, " more", 0.5)),
        );
    }
    let column = &s.columns.columns[0];
    let row = column.text.start(held).unwrap().0;
    let top = column.top(rows);
    assert!(
        (top..top + rows).contains(&row),
        "{row} outside {top}+{rows}"
    );
    update(&mut s, Action::FirstToken);
    assert_eq!(s.columns.columns[0].top(rows), 0, "Home scrolls to the top");
}

#[test]
fn v_toggles_visible_whitespace_and_keeps_the_layout() {
    let mut s = inspecting(80, 24);
    s.focus = Focus::Params;
    let lines = |s: &State| -> Vec<String> {
        s.columns.columns[0]
            .text
            .lines
            .iter()
            .map(|l| l.iter().map(|seg| seg.text.as_str()).collect())
            .collect()
    };
    assert_eq!(lines(&s), ["Hello world the"]);
    update(&mut s, Action::ToggleWhitespace);
    assert_eq!(lines(&s), ["Hello·world·the"]);
    update(&mut s, Action::Rerun);
    update(&mut s, Action::Engine(ModelId(0), started(2, vec![1])));
    update(
        &mut s,
        Action::Engine(ModelId(0), token(2, 0, "a\tb\n", 0.5)),
    );
    assert_eq!(lines(&s), ["a→b↵", ""], "a new run keeps the setting");
    update(&mut s, Action::ToggleWhitespace);
    assert_eq!(lines(&s), ["a b ", ""]);
}

// ---- mouse ----

fn click(s: &mut State, (x, y): (u16, u16)) -> Vec<Effect> {
    update(s, Action::Click { x, y })
}

#[test]
fn a_click_on_a_token_focuses_its_column_and_puts_the_cursor_there() {
    let mut s = inspecting(200, 50);
    s.focus = Focus::Prompt;
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "Hello world").unwrap();
    assert!(
        click(&mut s, (x + 7, y))
            .iter()
            .all(|e| matches!(e, Effect::Trace(..))),
        "a click only moves the cursor (and asks for the token's trace)"
    );
    assert_eq!((s.focus, cursor(&s)), (Focus::Columns, Some((0, 1))));
    let (x, y) = find(&buffer, "Bye").unwrap();
    click(&mut s, (x + 1, y));
    assert_eq!(cursor(&s), Some((1, 0)));
    // Beyond the text: the column is chosen, the token index kept.
    click(&mut s, (x + 20, y));
    assert_eq!(cursor(&s), Some((1, 0)));
    let prompt = areas(s.size).prompt;
    click(&mut s, (prompt.x + 3, prompt.y + 1));
    assert_eq!(s.focus, Focus::Prompt);
}

/// Issue 51: the inspector's long lines were cut at the panel's edge. They wrap, and a click
/// still finds the alternative drawn under a folded row.
#[test]
fn the_inspectors_long_lines_wrap_and_clicks_still_find_the_alternatives() {
    let mut s = inspecting(100, 40);
    update(&mut s, Action::LastToken);
    let (column, token) = cursor(&s).unwrap();
    s.columns.columns[column].tokens[token].constraint = Some(samplab::response::ConstraintStep {
        refused: 0.123,
        allowed: 1234,
    });
    let why = "the engine no longer holds this sample's logits: run it again to trace it";
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Traced {
                run_id: 1,
                sample: 0,
                step: token,
                trace: Err(why.into()),
            },
        ),
    );
    let shown = panel_text(&s);
    for whole in [
        "allowed 1234 tokens · 12.3% of raw p refused".to_owned(),
        format!("chain: {why}"),
    ] {
        assert!(shown.contains(&whole), "{whole:?} in {shown:?}");
    }
    let buffer = render(&s, &Theme::plain());
    let (x, y) = find(&buffer, "\" a\"").expect("the third alternative");
    let branched = click(&mut s, (x, y)).into_iter().find_map(|e| match e {
        Effect::Run(_, request) => request.branches.first().map(|b| b.path.clone()),
        _ => None,
    });
    assert_eq!(
        branched.and_then(|path| path.last().copied()),
        Some(9),
        "the click branched from the alternative drawn there"
    );
}

#[test]
fn a_click_on_a_slider_sets_its_value_from_the_position() {
    let mut s = state_sized(80, 24);
    let buffer = render(&s, &Theme::dark());
    let (_, y) = find(&buffer, "temperature").unwrap();
    let params = areas(s.size).params;
    // Inside the border: an 11-cell label and a space, then the slider up to " value".
    let start = params.x + 1 + 12;
    let end = params.x + params.width - 1 - 7;
    assert_eq!(buffer[(start, y)].symbol(), "▮");
    assert_eq!(buffer[(end - 1, y)].symbol(), "▯");
    assert_eq!(click(&mut s, (start, y)), [Effect::ScheduleRun]);
    assert_eq!(s.comparison.params.params.temperature, 0.0);
    click(&mut s, (end - 1, y));
    assert_eq!(s.comparison.params.params.temperature, 2.0);
    click(&mut s, (start + 3, y));
    assert_eq!(s.comparison.params.params.temperature, 0.43);

    let (x, y) = find(&buffer, "top_p").unwrap();
    assert!(click(&mut s, (x, y)).is_empty(), "the label only selects");
    assert_eq!(s.comparison.params.field(), samplab::params::Field::TopP);
    assert_eq!(s.comparison.params.params.top_p, 1.0);
}

#[test]
fn the_inspector_gives_way_to_the_params_on_a_click_and_overlays_ignore_the_mouse() {
    let mut s = inspecting(80, 24);
    let params = areas(s.size).params;
    let before = s.comparison.params.clone();
    click(&mut s, (params.x + 20, params.y + 3));
    assert_eq!(s.focus, Focus::Params);
    assert_eq!(
        s.comparison.params, before,
        "the first click only brings the params back"
    );

    update(&mut s, Action::OpenHelp);
    let before = s.clone();
    click(&mut s, (params.x + 20, params.y + 3));
    update(
        &mut s,
        Action::Wheel {
            x: 2,
            y: 10,
            lines: -3,
        },
    );
    assert_eq!(s, before);
    assert!(matches!(s.overlay, Some(Overlay::Help(_))));
}

#[test]
fn the_wheel_scrolls_the_column_under_the_pointer() {
    let mut s = long_run(80, 24, 2, 300);
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "#1 seed 1").unwrap();
    update(
        &mut s,
        Action::Wheel {
            x,
            y: y + 3,
            lines: -3,
        },
    );
    let rows = text_rows(&s);
    let second = &s.columns.columns[1];
    assert_eq!(second.top(rows), second.text.lines.len() - rows - 3);
    assert_eq!(
        s.columns.columns[0].scroll, None,
        "the other column still follows"
    );
}

#[test]
fn mouse_events_become_clicks_and_wheel_steps() {
    let event = |kind| MouseEvent {
        kind,
        column: 5,
        row: 7,
        modifiers: KeyModifiers::NONE,
    };
    let left = MouseButton::Left;
    assert_eq!(
        mouse::action(event(MouseEventKind::Down(left))),
        Some(Action::Click { x: 5, y: 7 })
    );
    assert_eq!(
        mouse::action(event(MouseEventKind::Drag(left))),
        Some(Action::Click { x: 5, y: 7 })
    );
    assert_eq!(
        mouse::action(event(MouseEventKind::ScrollDown)),
        Some(Action::Wheel {
            x: 5,
            y: 7,
            lines: 3
        })
    );
    assert_eq!(mouse::action(event(MouseEventKind::Moved)), None);
    assert_eq!(
        mouse::action(event(MouseEventKind::Down(MouseButton::Right))),
        None
    );
}

#[test]
fn the_app_turns_terminal_mouse_events_into_clicks() {
    let mut app = App::new(inspecting(200, 50), vec![NoEngine], KeyMap::default());
    let prompt = areas(app.state.size).prompt;
    app.on_terminal(TermEvent::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: prompt.x + 2,
        row: prompt.y + 1,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.state.focus, Focus::Prompt);
}

// ---- grid ----

#[test]
fn more_columns_than_fit_scroll_as_rows_with_an_indicator() {
    let mut s = long_run(80, 24, 8, 3);
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "columns 1–3 of 8").is_some());
    assert!(find(&buffer, "#3 seed 3").is_none());
    update(&mut s, Action::FocusPrev);
    update(&mut s, Action::FocusPrev);
    for _ in 0..7 {
        update(&mut s, Action::StepColumn(1));
    }
    assert_eq!(cursor(&s), Some((7, 2)));
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "columns 6–8 of 8").is_some());
    assert!(find(&buffer, "#7 seed 7").is_some());
    let (x, y) = find(&buffer, "columns 6–8").unwrap();
    update(&mut s, Action::Wheel { x, y, lines: -3 });
    let buffer = render(&s, &Theme::dark());
    assert!(
        find(&buffer, "columns 5–7 of 8").is_some(),
        "the wheel on the line"
    );
}

// ---- views ----

/// Issue 34: nine columns at 160x45 were four of 24 cells and a fifth of 28. (Beside the
/// params panel, which grows with the terminal, three fit a row.)
#[test]
fn a_grid_of_nine_columns_has_even_widths_and_fills_the_area() {
    let s = long_run(160, 45, 9, 3);
    let buffer = render(&s, &Theme::dark());
    let area = areas(s.size).columns;
    let lefts: Vec<(u16, u16)> = (0..9)
        .map(|i| find(&buffer, &format!("┌ #{i} seed")).unwrap_or_else(|| panic!("#{i}")))
        .collect();
    let first_row: Vec<u16> = lefts
        .iter()
        .filter(|(_, y)| *y == lefts[0].1)
        .map(|(x, _)| *x)
        .collect();
    assert_eq!(first_row.len(), 3, "{lefts:?}");
    let mut edges = first_row.clone();
    edges.push(area.x + area.width);
    let widths: Vec<u16> = edges.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(widths, [39, 39, 38]);
    // The last row's columns reach the bottom of the area: their bottom border is its last line.
    let (x, y) = lefts[8];
    let bottom = (y..area.y + area.height)
        .rev()
        .find(|&y| buffer[(x, y)].symbol() == "└")
        .unwrap();
    assert_eq!(bottom, area.y + area.height - 1);
}

fn cell_row(buffer: &Buffer, x: u16, y: u16, n: u16) -> String {
    (x..x + n).map(|x| buffer[(x, y)].symbol()).collect()
}

#[test]
fn the_inspector_shows_the_token_and_its_alternatives_as_bars() {
    let theme = Theme::dark();
    for (w, h) in [(80, 24), (200, 50)] {
        let s = inspecting(w, h);
        let buffer = render(&s, &theme);
        for text in [
            "inspect #0 · token 3/3",
            "id       42",
            r#"text     " the""#,
            "logprob  -0.693",
            "raw p    0.500",
            "kept p   0.700",
            "rank     1",
        ] {
            assert!(find(&buffer, text).is_some(), "{w}x{h}: {text}");
        }
        let params = areas(s.size).params;
        let bar_width = usize::from(params.width) - 2 - 26;
        let eighths = (0.5 * bar_width as f32 * 8.0).round() as u16;

        let (x, y) = find(&buffer, r#"▶  1 " the""#).expect("the chosen one is marked, rank 1");
        let bar_x = x + 16;
        let bar = cell_row(&buffer, bar_x, y, bar_width as u16);
        assert_eq!(
            bar.matches('█').count(),
            usize::from(eighths / 8),
            "{bar:?}"
        );
        assert_eq!(buffer[(bar_x, y)].fg, theme.gauge_filled.fg.unwrap());
        assert!(row(&buffer, y).contains(" 0.50 0.70"));

        let (x, y) = find(&buffer, r#"  2 "\n""#).unwrap();
        assert_eq!(buffer[(x + 4, y)].fg, theme.value.fg.unwrap());
        let quarter = cell_row(&buffer, x + 15, y, bar_width as u16);
        assert_eq!(quarter.matches('█').count(), usize::from(eighths / 16));

        let (x, y) = find(&buffer, r#"  3 " a""#).unwrap();
        let dim = theme.dim.fg.unwrap();
        assert_eq!(buffer[(x + 5, y)].fg, dim, "filtered out: dimmed");
        assert_eq!(buffer[(x + 15, y)].fg, dim);
        assert!(row(&buffer, y).contains(" 0.12 0.00"));
    }
}

/// Issue 34: at 80 columns the header over the alternatives was cut to `raw  ke`.
#[test]
fn the_inspectors_header_fits_the_panel_at_every_width() {
    for (w, h) in [(60, 20), (80, 24), (120, 30), (200, 50)] {
        let s = inspecting(w, h);
        let buffer = render(&s, &Theme::dark());
        let panel = areas(s.size).params;
        let (x, y) = find(&buffer, "raw  kept").unwrap_or_else(|| panic!("{w}x{h}"));
        assert_eq!(
            x + 9,
            panel.x + panel.width - 1,
            "{w}x{h}: the titles end at the panel's inner edge"
        );
        let header = cell_row(&buffer, panel.x + 1, y, panel.width - 2);
        assert!(header.starts_with("alternatives"), "{w}x{h}: {header:?}");
    }
    let s = inspecting(80, 24);
    assert!(find(&render(&s, &Theme::dark()), "alternatives · [ ] pick").is_some());
}

/// Issue 14 item 13: `logprobs` shows in the inspector as the line under the alternatives a
/// response keeps.
#[test]
fn the_inspector_marks_the_alternatives_logprobs_keeps() {
    let mut s = inspecting(200, 50);
    s.comparison.params.params.logprobs = None;
    let buffer = render(&s, &Theme::dark());
    let (_, rule) = find(&buffer, "┄ logprobs off: none kept ┄").expect("off");
    let (_, first) = find(&buffer, r#"▶  1 " the""#).unwrap();
    assert!(rule < first, "above every alternative");

    s.comparison.params.params.logprobs = Some(2);
    let buffer = render(&s, &Theme::dark());
    let (_, rule) = find(&buffer, "┄ above: kept by logprobs 2 ┄").expect("kept");
    let (_, second) = find(&buffer, r#"  2 "\n""#).unwrap();
    let (_, third) = find(&buffer, r#"  3 " a""#).unwrap();
    assert!(second < rule && rule < third, "{second} < {rule} < {third}");
}

#[test]
fn the_cursor_token_is_drawn_reversed_only_while_the_columns_have_focus() {
    let mut s = inspecting(80, 24);
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "Hello world the").unwrap();
    let reversed =
        |buffer: &Buffer, dx: u16| buffer[(x + dx, y)].modifier.contains(Modifier::REVERSED);
    assert!(reversed(&buffer, 12), "the newest token: \" the\"");
    assert!(!reversed(&buffer, 8));
    update(&mut s, Action::StepToken(-1));
    let buffer = render(&s, &Theme::dark());
    assert!(reversed(&buffer, 8) && !reversed(&buffer, 12));
    update(&mut s, Action::FocusPrev);
    let buffer = render(&s, &Theme::dark());
    assert!(!reversed(&buffer, 8));
    assert!(
        find(&buffer, "temperature").is_some(),
        "the params are back"
    );
    let buffer = render(&s, &Theme::plain());
    let (x, y) = find(&buffer, "Hello").unwrap();
    assert!(!buffer[(x, y)].modifier.contains(Modifier::REVERSED));
}

/// gpt-oss's reasoning (its `analysis` channel) is drawn dim beside the answer (`final`).
#[test]
fn reasoning_is_dimmed_and_the_answer_is_not() {
    use samplab::response::channels::Channel;
    let mut s = state_sized(80, 24);
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    update(&mut s, Action::Engine(ModelId(0), started(1, vec![42])));
    for (text, channel) in [
        ("Think", Some(Channel::Analysis)),
        ("assistant", None),
        ("Yes", Some(Channel::Final)),
    ] {
        let mut event = token(1, 0, text, 0.5);
        if let Event::Token { token, .. } = &mut event {
            token.channel = channel;
        }
        update(&mut s, Action::Engine(ModelId(0), event));
    }
    let buffer = render(&s, &Theme::dark());
    let (x, y) = find(&buffer, "ThinkassistantYes").unwrap();
    let dim = |dx: u16| buffer[(x + dx, y)].modifier.contains(Modifier::DIM);
    assert!(dim(0) && dim(4), "analysis");
    assert!(
        !dim(5) && !dim(14) && !dim(16),
        "outside a channel, and final"
    );
}

#[test]
fn visible_whitespace_and_footers_are_drawn() {
    let mean = (0.3f64.ln() + 0.9f64.ln() + 0.5f64.ln()) / 3.0;
    for (w, h) in [(80, 24), (200, 50)] {
        let mut s = inspecting(w, h);
        update(&mut s, Action::ToggleWhitespace);
        let buffer = render(&s, &Theme::dark());
        assert!(find(&buffer, "Hello·world·the").is_some(), "{w}x{h}");
        let footer = format!(
            "■ stop \"\\n\\n\" 3 tok lp {mean:.2} ppl {:.2}",
            (-mean).exp()
        );
        assert!(find(&buffer, &footer).is_some(), "{w}x{h}: {footer}");
        assert!(find(&buffer, "… 1 tok").is_some());
        assert!(find(&buffer, "Esc leave").is_some(), "the way out is shown");
    }
}

/// At 80x24 the help is paged; opened from the samples it starts on their keys, and the keys
/// that work outside text are a page turn away.
#[test]
fn help_opened_from_the_samples_starts_on_their_keys() {
    let mut s = inspecting(80, 24);
    update(&mut s, Action::OpenHelp);
    let listed = |s: &State, keys: &str, help: &str| {
        let buffer = render(s, &Theme::dark());
        let rows: Vec<String> = (0..24).map(|y| row(&buffer, y)).collect();
        let needle = format!(" {keys} ");
        rows.iter().any(|r| {
            r.match_indices(&needle)
                .any(|(at, _)| r[at + needle.len()..].trim_start().starts_with(help))
        })
    };
    for (keys, help) in [
        ("←/→/↑/↓/Home/End", "move"),
        ("Tab/Shift+Tab", "column"),
        ("PgUp/PgDn", "scroll"),
        ("Esc", "leave"),
    ] {
        assert!(listed(&s, keys, help), "{keys} {help}");
    }
    let pages_to_whitespace = (0..5)
        .position(|_| {
            let found = listed(&s, "v", "show whitespace");
            update(&mut s, Action::TurnHelpPage(1));
            found
        })
        .expect("`v show whitespace` on some page");
    assert!(pages_to_whitespace > 0, "on another page than the samples'");
}

#[test]
fn tiny_terminals_with_the_inspector_and_many_columns_do_not_panic() {
    for (w, h) in [(10, 5), (1, 1), (3, 2), (24, 6), (0, 0), (60, 9)] {
        let mut s = inspecting(80, 24);
        update(
            &mut s,
            Action::Resize {
                width: w,
                height: h,
            },
        );
        render(&s, &Theme::dark());
        update(&mut s, Action::Click { x: 0, y: 0 });
        update(&mut s, Action::PageColumn(1));
        let mut many = long_run(w, h, 64, 2);
        many.focus = Focus::Columns;
        update(&mut many, Action::StepColumn(1));
        update(
            &mut many,
            Action::Wheel {
                x: 1,
                y: 1,
                lines: 3,
            },
        );
        render(&many, &Theme::plain());
    }
}

/// On a finished sample's token the inspector asks its engine for the chain's trace, then shows
/// the chosen token after every stage in order and what cut each alternative.
#[test]
fn the_inspector_traces_a_finished_token_through_the_chain() {
    use samplab::engine::TraceRequest;
    use samplab::sampling::StageTrace;
    let mut s = inspecting(80, 40);
    s.columns.columns[0].trace = None;
    let effects = update(&mut s, Action::LastToken);
    let request: &TraceRequest = effects
        .iter()
        .find_map(|e| match e {
            Effect::Trace(ModelId(0), request) => Some(request),
            _ => None,
        })
        .expect("a finished sample's token is traced");
    assert_eq!(request.sample, 0);
    assert_eq!(request.seed, 42);
    assert_eq!(request.tokens.last(), Some(&42));
    assert_eq!(request.ids, [42, 7, 9]);
    let buffer = render(&s, &Theme::dark());
    assert!(find(&buffer, "chain: tracing…").is_some());
    assert!(
        update(&mut s, Action::LastToken).is_empty(),
        "a token is traced once"
    );

    let stage = |name: &'static str, tokens: [Option<(f32, f32)>; 3]| StageTrace {
        stage: name.into(),
        tokens: tokens.to_vec(),
    };
    let trace = vec![
        stage(
            "model",
            [Some((1.0, 0.5)), Some((0.3, 0.25)), Some((-0.4, 0.125))],
        ),
        stage(
            "penalties",
            [Some((1.0, 0.55)), Some((0.3, 0.27)), Some((-1.9, 0.03))],
        ),
        stage("top_p", [Some((1.0, 0.7)), Some((0.3, 0.3)), None]),
    ];
    update(
        &mut s,
        Action::Engine(
            ModelId(0),
            Event::Traced {
                run_id: 1,
                sample: 0,
                step: request.tokens.len() - 1,
                trace: Ok(trace),
            },
        ),
    );
    let buffer = render(&s, &Theme::dark());
    assert!(
        find(&buffer, "logit_bias").is_none(),
        "a stage that changed nothing is not listed"
    );
    for text in [
        "chain, in the order it ran",
        "model        0.500",
        "penalties    0.550",
        "top_p        0.700",
        "  \" a\"",
        "    penalties -1.50",
        "    cut by top_p",
    ] {
        assert!(
            find(&buffer, text).is_some(),
            "{text}\n{}",
            (0..buffer.area.height)
                .map(|y| row(&buffer, y))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
