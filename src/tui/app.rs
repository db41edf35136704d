//! The loop: terminal events, engine events and timers become actions; effects reach the
//! engine; the screen is drawn once per batch, behind a dirty flag, at most ~60 times a second.

use super::Ending;
use crate::engine::disagreement::{RowsRequest, Wanted, row_channel};
use crate::engine::{
    BackendKind, EditRequest, Engine, Event, Request, RunId, ScoreRequest, TraceRequest,
};
use crate::tui::action::{Action, Effect, Outcome};
use crate::tui::comparison::ModelId;
use crate::tui::effects::perform;
use crate::tui::input::keymap::KeyMap;
use crate::tui::input::mouse;
use crate::tui::state::State;
use crate::tui::update::update;
use crate::tui::view;
use crossterm::event::{Event as TermEvent, KeyEventKind};
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// Quiet time after the last change before a re-run starts.
pub const DEBOUNCE: Duration = Duration::from_millis(150);
const FRAME: Duration = Duration::from_millis(16);

/// What the loop needs from an engine; a fake stands in for it in tests.
pub trait EngineHandle {
    fn run(&self, request: Request);
    fn cancel(&self, run_id: RunId);
    fn score(&self, request: ScoreRequest);
    /// Sends the distributions of this model's samples to the model scoring them; fakes that
    /// drop it leave the KL null.
    fn rows(&self, _request: RowsRequest) {}
    fn trace(&self, request: TraceRequest);
    /// Stops a download the load is making; nothing when there is none.
    fn cancel_load(&self) {}
    /// Finds an edited sample's tokens; fakes that never answer may leave it out.
    fn edit(&self, _request: EditRequest) {}
}

impl EngineHandle for Engine {
    fn run(&self, request: Request) {
        Engine::run(self, request);
    }

    fn cancel(&self, run_id: RunId) {
        Engine::cancel(self, run_id);
    }

    fn trace(&self, request: TraceRequest) {
        Engine::trace(self, request);
    }

    fn score(&self, request: ScoreRequest) {
        Engine::score(self, request);
    }

    fn rows(&self, request: RowsRequest) {
        Engine::rows(self, request);
    }

    fn cancel_load(&self) {
        Engine::cancel_load(self);
    }

    fn edit(&self, request: EditRequest) {
        Engine::edit(self, request);
    }
}

/// Starts the engine of model `id` loading `spec`; events come back tagged with `id`.
pub type Spawner<E> = Box<dyn FnMut(ModelId, &str, Option<BackendKind>) -> E + Send>;

pub struct App<E> {
    pub state: State,
    /// The engines by model id; a removed model leaves `None`, so ids stay valid.
    pub engines: Vec<Option<E>>,
    /// Starts engines for models added at run time; without one, adding does nothing.
    spawner: Option<Spawner<E>>,
    pub keymap: KeyMap,
    /// Where OSC 52 copy requests go: the terminal, or a buffer in tests.
    clipboard: Box<dyn Write + Send>,
    debounce: Option<Instant>,
    dirty: bool,
    quit: bool,
}

impl<E: EngineHandle> App<E> {
    pub fn new(state: State, engines: Vec<E>, keymap: KeyMap) -> Self {
        Self {
            state,
            engines: engines.into_iter().map(Some).collect(),
            spawner: None,
            keymap,
            clipboard: Box::new(std::io::stdout()),
            debounce: None,
            dirty: true,
            quit: false,
        }
    }

    /// Sends clipboard requests to `out` instead of the terminal.
    pub fn with_clipboard(mut self, out: impl Write + Send + 'static) -> Self {
        self.clipboard = Box::new(out);
        self
    }

    /// Lets the model picker add models.
    pub fn with_spawner(mut self, spawner: Spawner<E>) -> Self {
        self.spawner = Some(spawner);
        self
    }

    /// The sampling model sends the scorer its distributions with one vocabulary, for KL per
    /// token, and its tokens' bytes with two, to line the tokenizations up (see
    /// [`crate::engine::disagreement`]): both asked here, one after the other.
    fn feed_rows(&self, scorer: ModelId, request: ScoreRequest) -> ScoreRequest {
        let comparison = &self.state.comparison;
        let wanted = comparison
            .slot(scorer)
            .map_or(Wanted::Bytes, |slot| request.wanted_by(slot.vocab));
        let source = comparison
            .side_running(request.run_id)
            .map(|side| comparison.sides[side].model);
        match source {
            Some(source) if source != scorer => {
                let (to, feed) = row_channel();
                self.engine(source, |e| e.rows(request.rows_request(wanted, to)));
                request.with_feed(feed)
            }
            _ => request,
        }
    }

    fn engine(&self, model: ModelId, act: impl FnOnce(&E)) {
        if let Some(Some(engine)) = self.engines.get(model.0) {
            act(engine);
        }
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// How quitting now ends the playground.
    pub fn ending(&self) -> Ending {
        match self.state.failure() {
            Some(why) => Ending::Failed(why),
            None => Ending::Quit,
        }
    }

    /// Updates the state and performs the effects; the outcomes of file and terminal effects
    /// go back through `update` before this returns.
    pub fn dispatch(&mut self, action: Action) {
        self.dirty = true;
        let mut queue = VecDeque::from([action]);
        while let Some(action) = queue.pop_front() {
            for effect in update(&mut self.state, action) {
                if let Some(outcome) = self.perform(effect) {
                    queue.push_back(Action::Outcome(outcome));
                }
            }
        }
    }

    fn perform(&mut self, effect: Effect) -> Option<Outcome> {
        match effect {
            Effect::Run(model, request) => self.engine(model, |e| e.run(request)),
            Effect::Cancel(model, run_id) => self.engine(model, |e| e.cancel(run_id)),
            Effect::Score(model, request) => {
                let request = self.feed_rows(model, request);
                self.engine(model, |e| e.score(request));
            }
            Effect::Trace(model, request) => self.engine(model, |e| e.trace(request)),
            Effect::Edit(model, request) => self.engine(model, |e| e.edit(request)),
            Effect::AddEngine { id, spec, backend } => {
                if let Some(spawn) = &mut self.spawner {
                    let engine = spawn(id, &spec, backend);
                    let ModelId(id) = id;
                    if self.engines.len() <= id {
                        self.engines.resize_with(id + 1, || None);
                    }
                    self.engines[id] = Some(engine);
                }
            }
            // Dropping the engine stops its worker.
            Effect::RemoveEngine(ModelId(id)) => {
                if let Some(slot) = self.engines.get_mut(id) {
                    *slot = None;
                }
            }
            Effect::CancelLoad(id) => self.engine(id, |e| e.cancel_load()),
            Effect::DiscoverModels => return Some(perform::discover_models()),
            Effect::ScheduleRun => self.debounce = Some(Instant::now() + DEBOUNCE),
            Effect::Quit => self.quit = true,
            Effect::ListPresets(store) => return Some(perform::list_presets(&store)),
            Effect::SavePreset {
                store,
                name,
                params,
                overwrite,
            } => return Some(perform::save_preset(&store, &name, &params, overwrite)),
            Effect::Copy(text) => return Some(perform::copy(&mut self.clipboard, &text)),
            Effect::WriteResults {
                path,
                overwrite,
                run_id,
                responses,
                shape,
                prompt,
            } => {
                let json = shape.json(&responses, &prompt);
                return Some(perform::write_results(&path, overwrite, run_id, json));
            }
            Effect::SaveSession {
                path,
                text,
                overwrite,
            } => return Some(perform::save_session(&path, &text, overwrite)),
            Effect::OpenSession(path) => return Some(perform::open_session(&path)),
        }
        None
    }

    /// Maps a terminal event through the key map; unbound keys do nothing.
    pub fn on_terminal(&mut self, event: TermEvent) {
        let action = match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => {
                self.keymap.action(&self.state.modes(), key)
            }
            TermEvent::Paste(text) => Some(Action::Paste(text)),
            TermEvent::Resize(width, height) => Some(Action::Resize { width, height }),
            TermEvent::Mouse(event) => mouse::action(event),
            _ => None,
        };
        if let Some(action) = action {
            self.dispatch(action);
        }
    }

    pub fn draw<B: Backend>(&mut self, terminal: &mut Terminal<B>) -> Result<(), B::Error> {
        terminal.draw(|frame| {
            view::draw(
                frame,
                &self.state,
                &self.state.themes.current().theme,
                &self.keymap,
            )
        })?;
        self.dirty = false;
        Ok(())
    }

    /// Runs until quit or until `input` ends.
    pub async fn run<B, S>(
        &mut self,
        terminal: &mut Terminal<B>,
        mut input: S,
        events: &mut UnboundedReceiver<(ModelId, Event)>,
    ) -> anyhow::Result<()>
    where
        B: Backend,
        B::Error: Send + Sync + 'static,
        S: Stream<Item = std::io::Result<TermEvent>> + Unpin,
    {
        let mut last_draw = Instant::now() - FRAME;
        let mut engine_open = true;
        while !self.quit {
            if self.dirty && last_draw.elapsed() >= FRAME {
                self.draw(terminal)?;
                last_draw = Instant::now();
            }
            let draw_at = self.dirty.then_some(last_draw + FRAME);
            let debounce = self.debounce;
            tokio::select! {
                event = input.next() => match event {
                    Some(event) => self.on_terminal(event?),
                    None => break,
                },
                event = events.recv(), if engine_open => match event {
                    Some(event) => {
                        self.dispatch(Action::Engine(event.0, event.1));
                        // Drain the backlog so a burst of tokens costs one draw.
                        while let Ok(event) = events.try_recv() {
                            self.dispatch(Action::Engine(event.0, event.1));
                        }
                    }
                    None => engine_open = false,
                },
                _ = sleep_until(debounce) => {
                    self.debounce = None;
                    self.dispatch(Action::DebounceElapsed);
                }
                _ = sleep_until(draw_at) => {}
            }
        }
        if self.dirty {
            self.draw(terminal)?;
        }
        Ok(())
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
