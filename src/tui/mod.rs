//! The playground: prompt, parameter sliders and live sample columns (design.md §5).
//!
//! Elm-style: terminal and engine events become `Action`s, a pure `update` changes the `State`
//! and returns `Effect`s for the loop to perform, and `view::draw` paints `&State` once per batch.

pub mod action;
pub mod app;
pub mod columns;
pub mod help;
pub mod keymap;
pub mod layout;
pub mod params;
pub mod prompt;
pub mod state;
pub mod status;
pub mod text;
pub mod theme;
pub mod update;
pub mod view;

use crate::engine::Engine;
use crate::engine::load::load_model;
use crate::model::source::HubSettings;
use crate::presets::Preset;
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, EventStream};
use crossterm::execute;
use ratatui::layout::Rect;

/// Opens the playground on `model` and returns when the user quits; the terminal is restored
/// on quit, on error and on panic.
pub fn run(model: &str, prompt: &str, chat: bool, preset: Preset) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let spec = model.to_owned();
    let engine = Engine::spawn(
        move |progress| load_model(&spec, &HubSettings::from_env(), progress),
        move |event| {
            // The receiver is gone only when the playground is closing.
            let _ = events_tx.send(event);
        },
    );
    let mut terminal = ratatui::init();
    let restore_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableBracketedPaste);
        restore_hook(info);
    }));
    let result = (|| {
        execute!(std::io::stdout(), EnableBracketedPaste)?;
        let size = terminal.size()?;
        let params = params::ParamsState::new(&preset.name, preset.params, entropy());
        let mut state = state::State::new(prompt, params, Rect::new(0, 0, size.width, size.height));
        state.prompt.chat = chat;
        let mut app = app::App::new(
            state,
            engine,
            keymap::KeyMap::default(),
            theme::Theme::from_env(),
        );
        runtime.block_on(app.run(&mut terminal, EventStream::new(), &mut events))
        // Dropping `app` here joins the engine thread after the quit cancelled its run.
    })();
    let _ = execute!(std::io::stdout(), DisableBracketedPaste);
    ratatui::restore();
    result
}

/// Seeds the seed roller differently on every start.
fn entropy() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
