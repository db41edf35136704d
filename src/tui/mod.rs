//! The playground: prompt, parameter sliders and live sample columns (docs/playground.md).
//!
//! Elm-style: terminal and engine events become `Action`s, a pure `update` changes the `State`
//! and returns `Effect`s for the loop to perform, and `view::draw` paints `&State` once per batch.
//!
//! `input` turns keys, mouse and signals into actions, `update` holds the pure logic, `effects`
//! the work the loop performs, and `widgets` and `overlays` draw their own state, never `State`.
//! Tests and benches reach the playground through the re-exports below.

mod action;
mod app;
mod branch_tree;
mod comparison;
mod effects;
mod focus;
mod input;
mod model_slot;
mod overlays;
pub mod session;
mod state;
mod theme;
mod update;
mod view;
mod widgets;

pub use action::{Action, BranchAction, DialogAction, Effect, ListMove, Outcome};
pub use app::{App, EngineHandle};
pub use comparison::{Comparison, ModelId, SetId, Side, SideId};
pub use effects::clipboard::osc52;
pub use effects::results_file;
pub use focus::Focus;
pub use input::keymap::{Key, KeyMap, Mode};
pub use input::mouse;
pub use overlays::export_dialog::{ExportDialog, Note};
pub use overlays::help::HelpPage;
pub use overlays::preset_picker::{EntryKind, PresetPicker};
pub use overlays::sample_editor::SampleEditor;
pub use overlays::save_prompt::SavePrompt;
pub use state::{Overlay, State};
pub use theme::Theme;
pub use theme::catalog::{ThemeCatalog, builtin as builtin_theme};
pub use theme::file::parse as parse_theme;
pub use update::run_shape::START_SAMPLES;
pub use update::update;
pub use view::draw;
pub use widgets::layout::{Grid, areas};
pub use widgets::params::{ParamsState, START_MAX_TOKENS, value_text};
pub use widgets::prompt::PromptView;
pub use widgets::text::TextBuffer;

use crate::engine::load::load_any;
use crate::engine::{BackendKind, Backends, Engine};
use crate::model::Activations;
use crate::model::device::DeviceChoice;
use crate::model::source::HubSettings;
use crate::model::source::embedded;
use crate::preset_store::PresetStore;
use crate::presets::Preset;
use crossterm::cursor::Show;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    EventStream,
};
use crossterm::execute;
use ratatui::layout::Rect;

/// What the playground starts with, all of it checked before the terminal is taken.
pub struct Playground {
    /// As given to `--model`, in order; more than one are compared side by side.
    pub models: Vec<String>,
    /// Where every model runs, those picked later included.
    pub device: DeviceChoice,
    /// What their quantized CPU products do with activations.
    pub activations: Activations,
    /// Which backend runs each model (`--backend`).
    pub backends: Backends,
    pub prompt: String,
    /// Send the prompt through the model's chat template.
    pub chat: bool,
    /// `--chat-template`: the template every model renders conversations with instead of its
    /// own default.
    pub chat_template: Option<String>,
    pub preset: Preset,
    /// A second parameter set to compare with the first (A/B).
    pub second_preset: Option<Preset>,
    /// `KEY=VALUE` changes over both presets (`--set`), checked against them already.
    pub sets: Vec<String>,
    /// Where user presets are saved; `None` when there is no config directory.
    pub presets: Option<PresetStore>,
    pub themes: ThemeCatalog,
    /// Shown in the status bar at the start, e.g. user theme files that could not be read.
    pub notice: Option<String>,
    /// A session file read and checked (`--session`): it replaces the prompt, the parameters
    /// and the branches; `models` are its models.
    pub session: Option<session::Session>,
}

/// How the playground ended, for the exit status.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// Quit with nothing failed.
    Quit,
    /// Quit while something had failed (a model that could not load, the last run): what, to
    /// print.
    Failed(String),
    /// Ended by this signal (SIGTERM, SIGHUP…), with the terminal restored all the same.
    Signal(i32),
}

/// Opens the playground and returns when the user quits; the terminal is restored on quit,
/// on error and on panic.
pub fn run(playground: Playground) -> anyhow::Result<Ending> {
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        anyhow::bail!(
            "the playground needs a terminal for its input and output; for scripts and pipes \
             use `samplab sample --prompt ...`"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let (device, activations) = (playground.device, playground.activations);
    let backends = playground.backends.clone();
    let template = playground.chat_template.clone();
    let spawn = move |id: ModelId, spec: &str, backend: Option<BackendKind>| {
        let spec = spec.to_owned();
        let backend = backend.map_or(backends.for_model(id.0), Into::into);
        let events_tx = events_tx.clone();
        let hub = HubSettings::from_env();
        let cancel = hub.cancel.clone();
        let template = template.clone();
        Engine::spawn(
            move |progress| {
                let mut model = load_any(&spec, &hub, device, activations, backend, progress)?;
                model.use_chat_template(template.as_deref())?;
                Ok(model)
            },
            move |event| {
                // The receiver is gone only when the playground is closing.
                let _ = events_tx.send((id, event));
            },
        )
        .with_load_cancel(cancel)
    };
    let engines: Vec<Engine> = playground
        .models
        .iter()
        .enumerate()
        .map(|(id, spec)| spawn(ModelId(id), spec, None))
        .collect();
    let mut terminal =
        ratatui::try_init().map_err(|e| anyhow::anyhow!("cannot take over the terminal: {e}"))?;
    let restore_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // An engine's panic becomes that model's error event; the playground keeps running.
        if crate::engine::contain::panic_is_contained() {
            return;
        }
        release_terminal();
        restore_hook(info);
    }));
    let result = (|| {
        execute!(std::io::stdout(), EnableBracketedPaste, EnableMouseCapture)?;
        let size = terminal.size()?;
        let Playground {
            models,
            device: _,
            activations: _,
            backends: _,
            prompt,
            chat,
            chat_template,
            preset,
            second_preset,
            sets,
            presets,
            themes,
            notice,
            session,
        } = playground;
        let preset = Preset {
            params: update::run_shape::starting(preset.params),
            ..preset
        };
        let seed_named = preset.params.seed.is_some();
        let params = ParamsState::new(preset, entropy());
        let mut state = State::new(&prompt, params, Rect::new(0, 0, size.width, size.height));
        if !seed_named {
            state.presets.drawn_seed = state.comparison.params.params.seed;
        }
        // The second set runs the first one's shape (seed, samples, length) unless its preset
        // names them, so that the two sides' columns can be compared sample by sample.
        let second_set = second_preset.map(|preset| {
            let params =
                update::run_shape::load_over(preset.params, &state.comparison.params.params);
            ParamsState::new(Preset { params, ..preset }, entropy())
        });
        state.comparison.compare(&models, second_set);
        let comparison = &mut state.comparison;
        for set in std::iter::once(&mut comparison.params).chain(&mut comparison.other_set) {
            for assignment in &sets {
                if let Err(e) = set.params.set_assignment(assignment) {
                    state.status.notify(format!("--set {assignment}: {e}"));
                }
            }
        }
        for model in &mut state.comparison.models {
            model.chat = chat;
        }
        state.presets.store = presets;
        // Written by the first load anyway; an error here is the load's to report.
        state.export.builtin_model = embedded::materialise().ok();
        state.export.chat_template = chat_template;
        if let Some(notice) = notice {
            state.status.notify(notice);
        }
        state.themes = themes;
        if let Some(session) = session {
            // The engines above were started for its models, numbered from 0.
            update::session::restore(&mut state, session, ModelId(0));
        }
        let mut app = App::new(state, engines, KeyMap::default()).with_spawner(Box::new(spawn));
        let signal = runtime.block_on(async {
            // Caught before the first frame, which is drawn by the first poll of `app.run`.
            #[cfg(unix)]
            let signal = input::signals::catch()?.first();
            #[cfg(not(unix))]
            let signal = std::future::pending::<i32>();
            tokio::select! {
                quit = app.run(&mut terminal, EventStream::new(), &mut events) => quit.map(|()| None),
                signal = signal => Ok(Some(signal)),
            }
        })?;
        let Some(signal) = signal else {
            return Ok(app.ending());
        };
        // Quit as `q` does, so that the runs in flight are cancelled before the engines join.
        app.dispatch(Action::Quit);
        Ok(Ending::Signal(signal))
        // Dropping `app` here joins the engine thread after the quit cancelled its run.
    })();
    release_terminal();
    ratatui::restore();
    result
}

/// Undoes what the playground turned on beyond `ratatui::init`, which `ratatui::restore` does not
/// know of; errors are ignored, as the terminal may be gone (SIGHUP).
fn release_terminal() {
    let _ = execute!(
        std::io::stdout(),
        DisableMouseCapture,
        DisableBracketedPaste,
        Show
    );
}

/// Seeds the seed roller differently on every start.
fn entropy() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
