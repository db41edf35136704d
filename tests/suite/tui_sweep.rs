//! Sweeps in the playground (`g`): the grid typed in the dialog and refused with the CLI's
//! reasons, every cell run on the current seed through the engine as ordinary runs, the grid
//! view of their figures, moving through it, and opening a cell as the current run.

use crate::common;
use crate::common::tui::*;
use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use samplab::engine::{Event, LoadedModel, Prompt, Request};
use samplab::params::{Field, SamplingParams};
use samplab::presets::Preset;
use samplab::response::{RunStats, SampleResponse, StopReason, Trajectory};
use samplab::tui::{Action, Effect, Focus, ModelId, Overlay, ParamsState, State, Theme, update};

const BASE: &str = "max_tokens: 10\nnum_samples: 3\nseed: 7";
const GRID: &str = "temperature=0.5,1.5 top_k=5,40";

/// A playground on the prompt "Once" with `BASE`'s params, its model loaded, the params focused.
fn playground(width: u16, height: u16) -> State {
    let params = SamplingParams::from_yaml(BASE).unwrap();
    let params = ParamsState::new(Preset::built_in("base", params), 1);
    let mut s = State::new("Once", params, Rect::new(0, 0, width, height));
    update(&mut s, Action::Engine(ModelId(0), loaded()));
    s.focus = Focus::Params;
    s
}

/// `g`, the grid typed, Enter: the effects of Enter.
fn sweep(s: &mut State, grid: &str) -> Vec<Effect> {
    press_key(s, KeyCode::Char('g'));
    assert!(matches!(s.overlay, Some(Overlay::SweepInput(_))));
    update(s, Action::Paste(grid.to_owned()));
    let key = crossterm::event::KeyEvent::from(KeyCode::Enter);
    let enter = samplab::tui::KeyMap::default()
        .action(&s.modes(), key)
        .unwrap();
    update(s, enter)
}

/// Performs the runs among `effects` on `model` as the engine's worker does, feeding their
/// events back, until no run is asked for.
fn drive(s: &mut State, model: &mut LoadedModel, mut effects: Vec<Effect>) {
    while let Some(request) = effects.iter().find_map(|e| match e {
        Effect::Run(_, request) => Some(request.clone()),
        _ => None,
    }) {
        let mut events = Vec::new();
        let ran = model.run(&request, &mut || false, &mut |e| events.push(e));
        events.push(match ran {
            Ok(response) => Event::Done {
                run_id: request.run_id,
                response: Box::new(response),
            },
            Err(e) => Event::Error {
                run_id: request.run_id,
                message: format!("{e:#}"),
            },
        });
        effects = events
            .into_iter()
            .flat_map(|e| update(s, Action::Engine(ModelId(0), e)))
            .collect();
    }
}

/// The playground after a sweep of `GRID` on the test model, or `None` to skip.
fn swept() -> Option<(State, LoadedModel)> {
    let mut model = common::loaded_test_model()?;
    let mut s = playground(120, 30);
    let effects = sweep(&mut s, GRID);
    let lanes: Vec<u32> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Run(_, r) => Some(r.lane),
            _ => None,
        })
        .collect();
    assert_eq!(lanes, [2], "one cell at a time, in a lane of its own");
    drive(&mut s, &mut model, effects);
    Some((s, model))
}

#[test]
fn every_cell_equals_a_plain_run_of_its_parameters_on_the_same_seeds() {
    let Some((s, _)) = swept() else {
        return;
    };
    let sweep = s.sweep.as_ref().unwrap();
    assert_eq!(sweep.running, None, "every cell ran");
    let grid = [(0.5, 5), (0.5, 40), (1.5, 5), (1.5, 40)];
    assert_eq!(sweep.cells.len(), grid.len());
    // A fresh model: nothing replayed from the sweep.
    let mut plain_model = common::loaded_test_model().unwrap();
    for (cell, (temperature, top_k)) in sweep.cells.iter().zip(grid) {
        let response = finished(&cell.outcome);
        let params = SamplingParams::from_yaml(&format!(
            "{BASE}\ntemperature: {temperature}\ntop_k: {top_k}"
        ))
        .unwrap();
        let request = Request {
            run_id: 1,
            prompt: Prompt::raw("Once"),
            lane: 0,
            params,
            branches: Vec::new(),
        };
        let plain = plain_model
            .run(&request, &mut || false, &mut |_| {})
            .unwrap();
        let ids = |r: &samplab::response::SampleResponse| -> Vec<Vec<u32>> {
            r.trajectories.iter().map(|t| t.token_ids.clone()).collect()
        };
        assert_eq!(ids(response), ids(&plain), "cell {:?}", cell.values);
        let seeds: Vec<u64> = response.trajectories.iter().map(|t| t.seed).collect();
        assert_eq!(seeds, [7, 8, 9], "the playground's seed");
        assert_eq!(response.stats, RunStats::of(&plain.trajectories));
    }
    assert_ne!(
        finished(&sweep.cells[0].outcome).trajectories,
        finished(&sweep.cells[3].outcome).trajectories,
        "the parameters tell the cells apart"
    );
}

#[test]
fn arrows_move_through_the_cells_and_enter_opens_one_as_the_current_run() {
    let Some((mut s, mut model)) = swept() else {
        return;
    };
    let selected = |s: &State| s.sweep.as_ref().unwrap().selected;
    press_key(&mut s, KeyCode::Right);
    assert_eq!(selected(&s), 1, "across: top_k 40");
    press_key(&mut s, KeyCode::Right);
    assert_eq!(selected(&s), 1, "stops at the edge");
    press_key(&mut s, KeyCode::Down);
    assert_eq!(selected(&s), 3, "down: temperature 1.5");
    press_key(&mut s, KeyCode::Home);
    assert_eq!(selected(&s), 0);
    press_key(&mut s, KeyCode::End);
    assert_eq!(selected(&s), 3);
    press_key(&mut s, KeyCode::Left);
    assert_eq!(selected(&s), 2);

    let key = crossterm::event::KeyEvent::from(KeyCode::Enter);
    let enter = samplab::tui::KeyMap::default()
        .action(&s.modes(), key)
        .unwrap();
    let effects = update(&mut s, enter);
    assert_eq!(s.overlay, None);
    let cell = s.sweep.as_ref().unwrap().cells[2].clone();
    assert_eq!(s.comparison.params.params, cell.params);
    assert_eq!(
        (cell.params.temperature, cell.params.top_k),
        (1.5, 5),
        "the cell's"
    );
    drive(&mut s, &mut model, effects);
    let shown: Vec<Vec<u32>> = s
        .columns
        .columns
        .iter()
        .map(|c| c.tokens.iter().map(|t| t.id).collect())
        .collect();
    let swept: Vec<Vec<u32>> = cell
        .outcome
        .unwrap()
        .unwrap()
        .trajectories
        .iter()
        .map(|t| t.token_ids.clone())
        .collect();
    assert_eq!(shown, swept, "the columns show the cell's samples");
    assert_eq!(
        s.comparison.sides[0].response.as_ref().unwrap().params,
        cell.params
    );
}

#[test]
fn bad_grids_keep_the_dialog_open_with_the_clis_reasons() {
    let mut s = playground(100, 30);
    let keys = ["seed", "top_k", "min_p", "top_p"];
    let huge: Vec<String> = keys
        .iter()
        .map(|k| format!("{k}=1,2,3,4,5,6,7,8,9,10"))
        .collect();
    let huge = huge.join(" ");
    for (grid, reason) in [
        (" ; ", "the grid is empty"),
        ("temprature=0.5,1", "unknown parameter `temprature`"),
        (&huge[..], "the grid has 10000 cells"),
        ("top_p=0.5,7", "top_p=7: "),
        ("top_p=0.5,,1", "a value is empty"),
        ("top_k=1 top_k=2", "top_k is given twice"),
    ] {
        let effects = sweep(&mut s, grid);
        assert!(effects.is_empty(), "{grid}: nothing runs");
        let Some(Overlay::SweepInput(dialog)) = &s.overlay else {
            panic!("{grid}: the dialog stays");
        };
        let error = dialog.error.clone().unwrap();
        assert!(error.contains(reason), "{grid}: {error}");
        assert!(s.sweep.is_none());
        let drawn = render(&s, &Theme::dark());
        assert!(find(&drawn, &error[..20]).is_some(), "{grid}: shown");
        update(&mut s, Action::InsertChar(' '));
        let Some(Overlay::SweepInput(dialog)) = &s.overlay else {
            unreachable!()
        };
        assert_eq!(dialog.error, None, "typing clears it");
        update(&mut s, Action::CloseOverlay);
    }
    // Before the model is ready there is nothing to run the cells on.
    let params = ParamsState::new(Preset::built_in("base", SamplingParams::default()), 1);
    let mut s = State::new("Once", params, Rect::new(0, 0, 100, 30));
    s.focus = Focus::Params;
    assert!(sweep(&mut s, GRID).is_empty());
    let Some(Overlay::SweepInput(dialog)) = &s.overlay else {
        panic!("the dialog stays");
    };
    assert!(dialog.error.as_ref().unwrap().contains("not ready"));

    // A served model sweeps what its server applies, and refuses an axis it ignores.
    let mut s = playground(100, 30);
    let served = Event::Served {
        server: "vLLM".into(),
        ignored: vec![Field::MinP],
    };
    update(&mut s, Action::Engine(ModelId(0), served));
    assert!(sweep(&mut s, "temperature=0.5,1 min_p=0,0.1").is_empty());
    let Some(Overlay::SweepInput(dialog)) = &s.overlay else {
        panic!("the dialog stays");
    };
    let error = dialog.error.clone().unwrap();
    assert!(error.contains("vLLM does not apply `min_p`"), "{error}");
    update(&mut s, Action::CloseOverlay);
    let effects = sweep(&mut s, "temperature=0.5,1");
    assert!(matches!(&effects[..], [Effect::Run(_, r)] if r.lane == 2));
}

/// Cell `i`'s run, told apart by every figure: samples `i + 1` and `i + 3` tokens long,
/// logprobs `-(i + 1) / 10`, ending by length or, for odd `i`, at a stop, and a first line of
/// its own.
fn cell_done(run_id: u64, i: usize) -> Event {
    let reason = if i.is_multiple_of(2) {
        StopReason::Length
    } else {
        StopReason::Stop
    };
    let trajectories = [i + 1, i + 3]
        .iter()
        .enumerate()
        .map(|(sample, &len)| Trajectory {
            token_ids: (0..len as u32).map(|t| t * (sample as u32 + 1)).collect(),
            logprobs: vec![-(i as f32 + 1.0) / 10.0; len],
            stop_reason: reason,
            text: format!("\n cell{i} says hi\nmore"),
            ..Trajectory::empty(sample as u32, 7 + sample as u64, None)
        })
        .collect();
    Event::Done {
        run_id,
        response: Box::new(response(trajectories)),
    }
}

/// A sweep of `grid` whose cells the fake engine answers with [`cell_done`].
fn faked(grid: &str, width: u16, height: u16) -> State {
    let mut s = playground(width, height);
    let mut effects = sweep(&mut s, grid);
    let mut i = 0;
    while let Some(run_id) = effects.iter().find_map(|e| match e {
        Effect::Run(_, Request { run_id, .. }) => Some(*run_id),
        _ => None,
    }) {
        effects = update(&mut s, Action::Engine(ModelId(0), cell_done(run_id, i)));
        i += 1;
    }
    s
}

/// What the view must show of every cell: its figures, as its statistics give them.
fn expected_figures(s: &State) -> Vec<Vec<String>> {
    let sweep = s.sweep.as_ref().unwrap();
    sweep
        .cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let stats = finished(&cell.outcome).stats.clone();
            let stats = stats.unwrap();
            let reason = if i.is_multiple_of(2) {
                "length 2"
            } else {
                "stop 2"
            };
            vec![
                format!(
                    "d2 {:.2}  lp {:.3}",
                    stats.distinct_2.unwrap(),
                    stats.mean_logprob.unwrap()
                ),
                format!("len {:.1} ({}-{})", i as f64 + 2.0, i + 1, i + 3),
                reason.to_owned(),
                format!("cell{i} says hi"),
            ]
        })
        .collect()
}

#[test]
fn the_grid_view_shows_every_cells_figures_as_a_table_at_80x24_and_160x45() {
    for (width, height) in [(80, 24), (160, 45)] {
        let s = faked("temperature=0.5,0.8,1.2 top_p=0.9,1", width, height);
        assert_eq!(s.overlay, Some(Overlay::Sweep));
        let drawn = render(&s, &Theme::dark());
        assert!(find(&drawn, "sweep: 6/6 cells").is_some(), "the progress");
        assert!(find(&drawn, "temperature ↓ top_p →").is_some());
        for (i, figures) in expected_figures(&s).iter().enumerate() {
            let (x, y) = find(&drawn, &figures[3]).unwrap_or_else(|| panic!("cell {i}"));
            // The table: row i / 2 (temperature), column i % 2 (top_p), the figures stacked.
            for (line, figure) in figures.iter().enumerate() {
                let y = y - 3 + line as u16;
                let shown: String = (x..x + figure.len() as u16)
                    .map(|x| drawn[(x, y)].symbol())
                    .collect();
                assert_eq!(
                    &shown,
                    figure,
                    "{width}x{height} cell {i}, line {line}:\n{}",
                    row(&drawn, y)
                );
            }

            let (first_x, _) = find(&drawn, &expected_figures(&s)[i - i % 2][3]).unwrap();
            assert_eq!(i.is_multiple_of(2), x == first_x, "cell {i} in its column");
        }
        assert!(find(&drawn, "stop 2").is_some());
    }
    // Tiny terminals draw what fits without panicking.
    let s = faked("temperature=0.5,0.8,1.2 top_p=0.9,1", 20, 5);
    render(&s, &Theme::dark());
}

#[test]
fn more_than_two_axes_make_a_line_per_cell_and_progress_shows_while_running() {
    let s = faked("temperature=0.5,1 top_p=0.9,1 min_p=0,0.1", 160, 45);
    let drawn = render(&s, &Theme::dark());
    for (i, figures) in expected_figures(&s).iter().enumerate() {
        let (_, y) = find(&drawn, &figures[3]).unwrap_or_else(|| panic!("cell {i}"));
        let line = row(&drawn, y);
        for figure in figures {
            assert!(line.contains(figure.as_str()), "{figure:?} on {line}");
        }
    }
    render(
        &faked("temperature=0.5,1 top_p=0.9,1 min_p=0,0.1", 20, 5),
        &Theme::dark(),
    );

    // While a cell runs, the view says which and the rest wait.
    let mut s = playground(80, 24);
    let effects = sweep(&mut s, "temperature=0.5,1");
    let Some(Effect::Run(_, request)) = effects.last() else {
        panic!("the first cell runs: {effects:?}");
    };
    let drawn = render(&s, &Theme::dark());
    assert!(find(&drawn, "sweep: 0/2 cells, running 1").is_some());
    assert!(find(&drawn, "running…").is_some() && find(&drawn, "waiting").is_some());
    // A cell's tokens are not drawn in the columns: the grid shows cells, not samples.
    update(
        &mut s,
        Action::Engine(ModelId(0), started(request.run_id, vec![7, 8])),
    );
    update(
        &mut s,
        Action::Engine(ModelId(0), token(request.run_id, 0, " x", 0.5)),
    );
    assert!(s.columns.columns.is_empty());
    let next = update(
        &mut s,
        Action::Engine(ModelId(0), cell_done(request.run_id, 0)),
    );
    assert!(matches!(&next[..], [Effect::Run(_, r)] if r.params.temperature == 1.0));
}

#[test]
fn the_grid_view_closes_and_opens_again_on_the_last_sweep_without_running() {
    let mut s = faked("temperature=0.5,1", 80, 24);
    press_key(&mut s, KeyCode::Esc);
    assert_eq!(s.overlay, None);
    let key = crossterm::event::KeyEvent::from(KeyCode::Char('g'));
    let again = samplab::tui::KeyMap::default()
        .action(&s.modes(), key)
        .unwrap();
    assert!(update(&mut s, again).is_empty(), "nothing runs again");
    assert_eq!(s.overlay, Some(Overlay::Sweep));
    assert!(find(&render(&s, &Theme::dark()), "cell1 says hi").is_some());
    press_key(&mut s, KeyCode::Char('n'));
    let Some(Overlay::SweepInput(dialog)) = &s.overlay else {
        panic!("n asks for a new grid");
    };
    assert_eq!(dialog.buffer.text, "temperature=0.5,1", "offering the last");
}

#[test]
fn a_grid_larger_than_the_screen_scrolls_to_the_selected_cell() {
    let grid = "temperature=0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8 top_k=1,2,3,4,5,6,7,8";
    for (width, height) in [(80, 24), (20, 5)] {
        let mut s = faked(grid, width, height);
        let drawn = render(&s, &Theme::dark());
        if width == 80 {
            assert!(find(&drawn, "cell0 says hi").is_some());
            assert!(find(&drawn, "cell63 says hi").is_none(), "off screen");
        }
        press_key(&mut s, KeyCode::End);
        let drawn = render(&s, &Theme::dark());
        if width == 80 {
            assert!(
                find(&drawn, "cell63 says hi").is_some(),
                "brought into view"
            );
            assert!(find(&drawn, "cell0 says hi").is_none());
            assert!(
                find(&drawn, "temperature=0.8 top_k=8").is_some(),
                "named above"
            );
        }
    }
}

/// The response of a cell that finished without an error.
fn finished(outcome: &Option<Result<Box<SampleResponse>, String>>) -> &SampleResponse {
    outcome
        .as_ref()
        .expect("the cell ran")
        .as_ref()
        .expect("the cell succeeded")
}

/// Removing the swept model ends the sweep: its waiting cells say why, nothing waits on the
/// closed engine, and the status says so.
#[test]
fn removing_the_swept_model_ends_the_sweep_with_its_reason() {
    let (mut s, _, _) = crate::tui_compare::two_models();
    s.focus = Focus::Params;
    let effects = sweep(&mut s, "temperature=0.5,1");
    let Some(Effect::Run(ModelId(0), _)) = effects.last() else {
        panic!("the first cell runs on the first model: {effects:?}");
    };
    update(&mut s, Action::CloseOverlay);
    crate::tui_compare::open_models(&mut s);
    let effects = update(
        &mut s,
        Action::Dialog(samplab::tui::DialogAction::RemoveModel),
    );
    assert!(
        effects.contains(&Effect::RemoveEngine(ModelId(0))),
        "{effects:?}"
    );
    let sweep = s.sweep.as_ref().unwrap();
    assert_eq!(sweep.running, None);
    for cell in &sweep.cells {
        let why = cell.outcome.as_ref().unwrap().as_ref().unwrap_err();
        assert!(why.contains("model was removed"), "{why}");
    }
    let status = render(&s, &Theme::dark());
    assert!(find(&status, "the sweep stopped").is_some());
}
