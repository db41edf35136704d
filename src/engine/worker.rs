//! The worker thread that owns one model: requests in over a channel, events out.
//!
//! candle is blocking, so the model lives on its own thread and the caller never waits on it.
//! The latest request wins: a new run or a cancel interrupts the current run before its next
//! decode step, and runs queued behind it are skipped.

use super::backend::Backend;
use super::events::{Event, Request, RunId};
use super::generate::{RunContext, generate};
use crate::model::chat_template::ChatTemplate;
use crate::params::SamplingParams;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use tokenizers::Tokenizer;
use tokio::sync::mpsc::UnboundedSender;

/// A model ready to run, with what generation needs beside its forward pass.
pub struct LoadedModel {
    pub name: String,
    pub device: String,
    pub backend: Box<dyn Backend + Send>,
    /// Adds BOS (when the model wants one) through its post-processor.
    pub tokenizer: Tokenizer,
    pub eos_ids: Vec<u32>,
    /// The sampling settings the model ships with (generation_config.json, GGUF
    /// `general.sampling.*`), over samplab's defaults; `None` when they are not valid params.
    pub defaults: Option<SamplingParams>,
    pub chat_template: Option<ChatTemplate>,
}

impl LoadedModel {
    pub fn encode(&self, prompt: &str) -> anyhow::Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(prompt, true)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids of `message` as the model's chat template frames it. As in transformers'
    /// `apply_chat_template`, the rendered text already holds BOS and the role markers, so
    /// nothing is added and special-token texts become their ids.
    pub fn encode_chat(&mut self, message: &str) -> anyhow::Result<Vec<u32>> {
        let template = self.chat_template.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no chat template: use the raw prompt, or a model that ships one \
                 (GGUF `tokenizer.chat_template`, tokenizer_config.json `chat_template`)",
                self.name
            )
        })?;
        let text = template.render(message)?;
        let literal = self.tokenizer.get_encode_special_tokens();
        self.tokenizer.set_encode_special_tokens(false);
        let encoding = self.tokenizer.encode(text, false);
        self.tokenizer.set_encode_special_tokens(literal);
        let encoding =
            encoding.map_err(|e| anyhow::anyhow!("cannot tokenize the chat prompt: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Runs one request to the end on this thread (for the CLI and tests).
    pub fn run(
        &mut self,
        request: &Request,
        interrupted: &mut dyn FnMut() -> bool,
        emit: &mut dyn FnMut(Event),
    ) -> anyhow::Result<crate::response::SampleResponse> {
        let prompt_ids = if request.chat {
            self.encode_chat(&request.prompt)?
        } else {
            self.encode(&request.prompt)?
        };
        let seed = request.params.seed.unwrap_or_else(random_seed);
        let ctx = RunContext {
            tokenizer: &self.tokenizer,
            eos_ids: &self.eos_ids,
            model_name: &self.name,
        };
        generate(
            self.backend.as_mut(),
            &ctx,
            request.run_id,
            prompt_ids,
            &request.params,
            seed,
            interrupted,
            emit,
        )
    }
}

/// A seed for runs that asked for none: short enough to read and type back.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) % 1_000_000
}

enum Command {
    Run(Request),
    Cancel(RunId),
}

/// Handle to the worker thread; dropping it stops the worker, and joins it unless it is still
/// loading: a load cannot be interrupted, and quitting must not wait for a download.
pub struct Engine {
    commands: Option<Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    loading: Arc<AtomicBool>,
}

impl Engine {
    /// Starts the worker, which first loads the model with `load` (reporting progress as events).
    pub fn spawn<L>(load: L, events: UnboundedSender<Event>) -> Engine
    where
        L: FnOnce(&mut dyn FnMut(f32, &str)) -> anyhow::Result<LoadedModel> + Send + 'static,
    {
        let (commands, inbox) = mpsc::channel();
        let loading = Arc::new(AtomicBool::new(true));
        let loading_flag = Arc::clone(&loading);
        let load = move |progress: &mut dyn FnMut(f32, &str)| {
            let model = load(progress);
            loading_flag.store(false, Ordering::Release);
            model
        };
        let thread = std::thread::Builder::new()
            .name("samplab-engine".into())
            .spawn(move || worker(load, inbox, events))
            .expect("the OS can start a thread");
        Engine {
            commands: Some(commands),
            thread: Some(thread),
            loading,
        }
    }

    pub fn run(&self, request: Request) {
        self.send(Command::Run(request));
    }

    pub fn cancel(&self, run_id: RunId) {
        self.send(Command::Cancel(run_id));
    }

    fn send(&self, command: Command) {
        if let Some(commands) = &self.commands {
            // A worker that has exited has already reported why; nothing more to tell.
            let _ = commands.send(command);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.commands.take();
        if let Some(thread) = self.thread.take()
            && !self.loading.load(Ordering::Acquire)
        {
            let _ = thread.join();
        }
    }
}

fn worker<L>(load: L, inbox: Receiver<Command>, events: UnboundedSender<Event>)
where
    L: FnOnce(&mut dyn FnMut(f32, &str)) -> anyhow::Result<LoadedModel>,
{
    let emit = |event: Event| {
        // The receiver is gone only when the UI is shutting down.
        let _ = events.send(event);
    };
    let mut progress = |fraction: f32, message: &str| {
        emit(Event::Loading {
            progress: fraction,
            message: message.to_owned(),
        })
    };
    let mut model = match load(&mut progress) {
        Ok(model) => {
            emit(Event::Loaded {
                model: model.name.clone(),
                device: model.device.clone(),
                defaults: model.defaults.clone(),
                chat_template: model.chat_template.is_some(),
            });
            model
        }
        Err(e) => {
            let message = format!("{e:#}");
            emit(Event::LoadFailed {
                message: message.clone(),
            });
            for command in inbox {
                if let Command::Run(request) = command {
                    emit(Event::Error {
                        run_id: request.run_id,
                        message: format!("no model loaded: {message}"),
                    });
                }
            }
            return;
        }
    };

    let mut next: Option<Request> = None;
    loop {
        let request = match next.take() {
            Some(request) => request,
            None => match inbox.recv() {
                Ok(Command::Run(request)) => request,
                Ok(Command::Cancel(_)) => continue,
                Err(_) => return,
            },
        };
        let run_id = request.run_id;
        let mut disconnected = false;
        let mut interrupted = || {
            let mut stop = false;
            loop {
                match inbox.try_recv() {
                    Ok(Command::Run(newer)) => {
                        next = Some(newer);
                        stop = true;
                    }
                    Ok(Command::Cancel(id)) => stop |= id == run_id,
                    Err(TryRecvError::Empty) => return stop,
                    Err(TryRecvError::Disconnected) => {
                        disconnected = true;
                        return true;
                    }
                }
            }
        };
        match model.run(&request, &mut interrupted, &mut |event| emit(event)) {
            Ok(response) => emit(Event::Done {
                run_id,
                response: Box::new(response),
            }),
            Err(e) => emit(Event::Error {
                run_id,
                message: format!("{e:#}"),
            }),
        }
        if disconnected {
            return;
        }
    }
}
