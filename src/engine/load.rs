//! Turning `--model` into a [`LoadedModel`]: resolve the source, load the forward pass and the
//! tokenizer that belongs to it, and pick the device.

use super::backend::{Backend, ParkedRow, Prefill, RowSource};
use super::backend_choice::{BackendChoice, BackendKind};
use super::remote::RemoteSpec;
use super::remote::http::Settings;
use super::replay::ReplayStore;
use super::runner::Runner;
use super::score::common_prefix;
use super::worker::LoadedModel;
use crate::model::Activations;
use crate::model::device::DeviceChoice;
use crate::model::error::ModelError;
use crate::model::formats::config::GenerationDefaults;
use crate::model::formats::tensors::check_gguf;
use crate::model::memory;
use crate::model::source::cache::cache_dir;
use crate::model::source::origin::ModelOrigin;
use crate::model::source::synthetic::{qtype_from_name, synthetic_spec, write_synthetic_gguf};
use crate::model::source::{HubSettings, LoadProgress, ModelSource, resolve};
use crate::model::text::chat_template::{ChatTemplate, ModelTemplates};
use crate::model::text::gguf_tokenizer::{GgufTokenizer, tokenizer_from_gguf};
use crate::model::{Model, Session, Snapshots};
use anyhow::Context;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use tokenizers::Tokenizer;

/// The llama forward pass as the engine drives it: a one-row session caches the last prompt,
/// and a batch session decodes the rows of a run.
struct LlamaBackend {
    model: Arc<Model>,
    /// The device's name, for memory refusals.
    device: String,
    prompt: Session<Arc<Model>>,
    /// The tokens whose positions `prompt` holds.
    prompt_ids: Vec<u32>,
    batch: Session<Arc<Model>>,
}

impl LlamaBackend {
    fn new(model: Arc<Model>, device: String) -> Self {
        Self {
            device,
            prompt: Session::new(Arc::clone(&model)),
            prompt_ids: Vec::new(),
            batch: Session::batch(Arc::clone(&model)),
            model,
        }
    }

    /// A row of `len` positions: the prompt cache's first `len - then.len()`, then `then` run
    /// through the model.
    fn prompt_then(&self, then: &[u32], len: usize) -> anyhow::Result<Session<Arc<Model>>> {
        Self::row_then(&self.model, &self.prompt, then, len)
    }

    /// A copy of `source` cut to `len - then.len()` positions, then `then` run through the
    /// model: a row of `len` positions.
    fn row_then(
        model: &Arc<Model>,
        source: &Session<Arc<Model>>,
        then: &[u32],
        len: usize,
    ) -> anyhow::Result<Session<Arc<Model>>> {
        let Some(start) = len.checked_sub(then.len()).filter(|&at| at > 0) else {
            anyhow::bail!(
                "a row of {len} positions cannot hold {} of its own",
                then.len()
            );
        };
        let mut row = Session::batch(Arc::clone(model));
        row.extend(&[source], start)?;
        row.prefill(then, false)?;
        Ok(row)
    }
}

impl Backend for LlamaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Samplab
    }

    fn vocab_size(&self) -> usize {
        self.model.config().vocab_size
    }

    fn weight_bytes(&self) -> u64 {
        self.model.weight_bytes_per_step()
    }

    fn kernels(&self) -> Vec<(String, String)> {
        self.model.kernels()
    }

    fn context_length(&self) -> usize {
        self.model.context_length()
    }

    fn state_bytes(&self, positions: usize) -> u64 {
        memory::kv_bytes(self.model.config(), positions, self.model.snapshots())
    }

    fn free_memory(&self) -> Result<Option<memory::Free>, memory::MemoryError> {
        memory::free_on(self.model.device(), &self.device)
    }

    fn prefill(&mut self, prompt: &[u32], logits_from: usize) -> anyhow::Result<Prefill> {
        let mut reused = common_prefix(&self.prompt_ids, prompt).min(logits_from);
        if reused < self.prompt.position() {
            // A windowed layer may have dropped positions the shorter prompt needs, and a
            // recurrent one keeps only snapshots: go on from the latest cut before.
            reused = self.prompt.cuts().nearest(reused);
        }
        self.prompt.truncate(reused)?;
        self.prompt_ids.truncate(reused);
        let rest = &prompt[reused..];
        if rest.is_empty() {
            return Ok(Prefill::default());
        }
        let every = logits_from + 1 < prompt.len();
        let logits = match self.prompt.prefill(rest, every) {
            Ok(logits) => logits,
            Err(e) => {
                self.prompt = Session::new(Arc::clone(&self.model));
                self.prompt_ids.clear();
                return Err(e.into());
            }
        };
        self.prompt_ids.extend_from_slice(rest);
        let logits = match (every, logits_from < prompt.len()) {
            (true, _) => logits.into_iter().skip(logits_from - reused).collect(),
            (false, true) => logits,
            (false, false) => Vec::new(),
        };
        Ok(Prefill {
            logits,
            computed: rest.len(),
        })
    }

    fn join(&mut self, rows: Vec<RowSource>, len: usize) -> anyhow::Result<()> {
        let mut own: Vec<Option<Session<Arc<Model>>>> = Vec::with_capacity(rows.len());
        for row in rows {
            own.push(match row {
                RowSource::Prompt { then } if then.is_empty() => None,
                RowSource::Prompt { then } => Some(self.prompt_then(&then, len)?),
                RowSource::Parked { row, then } => {
                    let row: Session<Arc<Model>> = row
                        .into_inner()
                        .ok_or_else(|| anyhow::anyhow!("a parked row of another backend"))?;
                    Some(match then.is_empty() {
                        true => row,
                        false => Self::row_then(&self.model, &row, &then, len)?,
                    })
                }
            });
        }
        if own.iter().any(Option::is_none) && self.prompt.position() < len {
            anyhow::bail!(
                "the prompt cache holds {} positions, not the {len} a row joins at",
                self.prompt.position()
            );
        }
        let sources: Vec<&Session<Arc<Model>>> = own
            .iter()
            .map(|row| row.as_ref().unwrap_or(&self.prompt))
            .collect();
        Ok(self.batch.extend(&sources, len)?)
    }

    fn decode(&mut self, tokens: &[u32]) -> anyhow::Result<Vec<Vec<f32>>> {
        Ok(self.batch.decode_step(tokens)?)
    }

    fn retire(&mut self, keep: &[bool]) -> anyhow::Result<Vec<ParkedRow>> {
        Ok(self
            .batch
            .split_off(keep)?
            .into_iter()
            .map(|row| {
                let (positions, bytes, cuts) = (row.position(), row.cache_bytes(), row.cuts());
                ParkedRow::new(row, positions, bytes).with_cuts(cuts)
            })
            .collect())
    }

    fn fork(&self, row: &ParkedRow, len: usize) -> anyhow::Result<Option<ParkedRow>> {
        let Some(parent) = row.inner::<Session<Arc<Model>>>() else {
            return Ok(None);
        };
        // A recurrent state is copied at its latest snapshot before `len`.
        let len = row.nearest_cut(len);
        if len == 0 {
            return Ok(None);
        }
        let mut copy = Session::batch(Arc::clone(&self.model));
        copy.extend(&[parent], len)?;
        let (bytes, cuts) = (copy.cache_bytes(), copy.cuts());
        Ok(Some(ParkedRow::new(copy, len, bytes).with_cuts(cuts)))
    }

    fn reset(&mut self) {
        *self = Self::new(Arc::clone(&self.model), std::mem::take(&mut self.device));
    }
}

/// Held from the memory check until the weights are in memory, so that models loading at the
/// same time (the playground's `--model A --model B`) each see the memory the others took.
static LOADING: Mutex<()> = Mutex::new(());

/// Loads `--model` (a GGUF file, an HF directory or a Hub id) onto `device`, reporting
/// progress.
pub fn load_model(
    spec: &str,
    hub: &HubSettings,
    device: DeviceChoice,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<LoadedModel> {
    load_model_with(
        spec,
        hub,
        device,
        Activations::Exact,
        BackendChoice::Auto,
        progress,
    )
}

/// [`load_model`], with quantized matrices on the CPU multiplying `--activations` of that
/// precision, on the backend `--backend` chose.
pub fn load_model_with(
    spec: &str,
    hub: &HubSettings,
    device: DeviceChoice,
    activations: Activations,
    backend: BackendChoice,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<LoadedModel> {
    load_on(spec, hub, device, activations, backend, progress)
}

/// `--model` as a runner: a served model for an `http(s)://` URL (see [`super::remote`]),
/// else a model loaded here as [`load_model`] does.
pub fn load_any(
    spec: &str,
    hub: &HubSettings,
    device: DeviceChoice,
    activations: Activations,
    backend: BackendChoice,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<Box<dyn Runner>> {
    match RemoteSpec::parse(spec) {
        Some(remote) => {
            let remote = remote.map_err(anyhow::Error::msg)?;
            let settings = Settings::from_env()?;
            Ok(Box::new(super::remote::connect(
                remote, settings, progress,
            )?))
        }
        None => Ok(Box::new(load_model_with(
            spec,
            hub,
            device,
            activations,
            backend,
            progress,
        )?)),
    }
}

/// [`load_model_with`].
fn load_on(
    spec: &str,
    hub: &HubSettings,
    device_choice: DeviceChoice,
    activations: Activations,
    backend: BackendChoice,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<LoadedModel> {
    progress(LoadProgress::step(0.0, format!("finding {spec}")));
    let source = resolve(spec, hub, progress)?;
    let (ModelSource::Gguf(path) | ModelSource::HfDir(path)) = &source;
    let _one_at_a_time = match LOADING.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => {
            progress(LoadProgress::step(
                0.2,
                "waiting for another model to finish loading",
            ));
            LOADING.lock().unwrap_or_else(PoisonError::into_inner)
        }
    };
    let name = display_name(spec, path);
    let origin = ModelOrigin::start(spec, &source);
    // Snapshots of recurrent states count against the replay budget, in the check too.
    let replay = ReplayStore::from_env()?;
    // `Some(why)` where llama.cpp runs it: `why` is samplab's engine's reason when `auto` chose.
    let (gguf, to_llama_cpp) = match (&source, backend) {
        (ModelSource::HfDir(dir), BackendChoice::Only(BackendKind::LlamaCpp)) => {
            anyhow::bail!(
                "the llama.cpp backend runs GGUF files, and {} is a Hugging Face directory: \
                 use --backend samplab (or auto), or convert it with llama.cpp's \
                 convert_hf_to_gguf.py",
                dir.display()
            )
        }
        (ModelSource::Gguf(_), BackendChoice::Only(BackendKind::LlamaCpp)) => (None, Some(None)),
        (ModelSource::Gguf(path), choice) => match Model::open_gguf(path) {
            Ok(gguf) => (Some(gguf), None),
            Err(ModelError::UnsupportedArchitecture {
                name: arch,
                supported,
            }) if choice == BackendChoice::Auto => {
                let ours = format!("samplab's engine does not run `{arch}` (it runs {supported})");
                if !super::llama_cpp::BUILT {
                    anyhow::bail!(
                        "no backend of this build runs {}: {ours}; llama.cpp: {}",
                        path.display(),
                        super::llama_cpp::NOT_BUILT
                    );
                }
                (None, Some(Some(ours)))
            }
            Err(e) => return Err(e.into()),
        },
        (ModelSource::HfDir(_), _) => (None, None),
    };
    if let Some(ours) = to_llama_cpp {
        let notice = ours
            .as_ref()
            .map(|ours| format!("{ours}: llama.cpp runs it (--backend auto)"));
        let loading = Loading {
            name,
            origin,
            replay,
            notice,
        };
        let loaded = load_llama_cpp(path, loading, device_choice);
        return match ours {
            Some(ours) => {
                loaded.map_err(|e| e.context(format!("no backend runs {}: {ours}", path.display())))
            }
            None => loaded,
        };
    }
    let (device, device_name) = device_choice.open()?;
    let mut check_fits = |estimate: memory::MemoryEstimate| -> anyhow::Result<()> {
        memory::check_fits(&name, estimate, memory::free_on(&device, &device_name)?)?;
        progress(LoadProgress::step(
            0.3,
            format!("loading weights from {}", path.display()),
        ));
        Ok(())
    };
    let (model, tokenizer, eos_ids, templates) = match &source {
        ModelSource::Gguf(path) => {
            let gguf = gguf.ok_or_else(|| anyhow::anyhow!("{} was not opened", path.display()))?;
            check_fits(memory::estimate_gguf(&gguf, &device, replay.budget())?)?;
            let (model, content) = gguf.load(&device, activations)?;
            let gguf = tokenizer_from_gguf(&content)
                .with_context(|| format!("cannot build the tokenizer of {}", path.display()))?;
            let templates = gguf_templates(&gguf);
            check_vocab(&gguf.tokenizer, model.config().vocab_size, true, path)?;
            (model, gguf.tokenizer, gguf.eos_ids, templates)
        }
        ModelSource::HfDir(dir) => {
            check_fits(memory::estimate(dir, &device, replay.budget())?)?;
            let model = Model::load(dir, &device)?;
            let file = dir.join("tokenizer.json");
            crate::regular_file::check(&file)
                .with_context(|| format!("cannot read the tokenizer {}", file.display()))?;
            let tokenizer = Tokenizer::from_file(&file).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read the tokenizer {}: {e}; a Hugging Face model directory needs tokenizer.json",
                    file.display()
                )
            })?;
            check_vocab(&tokenizer, model.config().vocab_size, false, &file)?;
            (
                model,
                tokenizer,
                Vec::new(),
                ChatTemplate::templates_of_hf_dir(dir)?,
            )
        }
    };
    // Raw prompts read special-token text as the control token, as vLLM, transformers and
    // llama-server do (a GGUF tokenizer is built literal, as llama.cpp's library default);
    // `Prompt::Literal` keeps it text.
    let mut tokenizer = tokenizer;
    tokenizer.set_encode_special_tokens(false);
    let eos_ids = if eos_ids.is_empty() {
        model.config().eos_token_ids.clone()
    } else {
        eos_ids
    };
    progress(LoadProgress::step(1.0, "ready"));
    let defaults = model.config().generation.sampling_params().ok();
    let warnings = model.config().warnings.clone();
    let mut model = model;
    model.set_snapshots(Snapshots::within_replay_budget(
        model.config(),
        replay.budget(),
    ));
    let model = Arc::new(model);
    Ok(LoadedModel {
        warnings,
        activations: model.activations(),
        structured: Default::default(),
        name,
        backend: Box::new(LlamaBackend::new(model, device_name.clone())),
        device: device_name,
        replay,
        tokenizer,
        eos_ids,
        defaults,
        chat_template: templates.default_template(),
        templates,
        record_traces: false,
        origin,
        encoder: None,
    })
}

/// Every token the tokenizer can give needs a logit, or samples would lose words. `exact`: every
/// logit needs a token too, as llama.cpp requires of a GGUF; an HF model's embedding may be
/// padded beyond its tokenizer (Qwen2.5's by 271 rows), as transformers allows.
fn check_vocab(
    tokenizer: &Tokenizer,
    vocab_size: usize,
    exact: bool,
    file: &Path,
) -> anyhow::Result<()> {
    let tokens = tokenizer
        .get_vocab(true)
        .into_values()
        .max()
        .map_or(0, |id| id as usize + 1);
    if tokens > vocab_size || (exact && tokens != vocab_size) {
        anyhow::bail!(
            "the tokenizer of {} has {tokens} tokens but the model's vocabulary (its embedding \
             rows) has {vocab_size}: the tokenizer belongs to another model",
            file.display()
        );
    }
    Ok(())
}

/// The GGUF's templates with its BOS and EOS texts, which templates write as `bos_token`; a
/// file without a BOS leaves `bos_token` undefined, as a null `bos_token` does under
/// transformers.
fn gguf_templates(gguf: &GgufTokenizer) -> ModelTemplates {
    let tokens = [
        ("bos_token", gguf.bos_id),
        ("eos_token", gguf.eos_ids.first().copied()),
    ]
    .into_iter()
    .filter_map(|(name, id)| Some((name.to_owned(), gguf.tokenizer.id_to_token(id?)?)))
    .collect();
    ModelTemplates::new(
        gguf.chat_template.clone(),
        gguf.named_chat_templates.clone(),
        tokens,
    )
}

/// A short name for status lines: the Hub id as typed, or the file or directory name.
fn display_name(spec: &str, path: &Path) -> String {
    if Path::new(spec).exists() {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| spec.to_owned())
    } else {
        spec.to_owned()
    }
}

/// A random-weight model with a known model's shapes, written once into the cache directory.
pub fn synthetic_model(
    name: &str,
    qtype: &str,
    device: DeviceChoice,
    activations: Activations,
    backend: BackendChoice,
    progress: &mut dyn FnMut(LoadProgress),
) -> anyhow::Result<LoadedModel> {
    let spec = synthetic_spec(name)?;
    let quantization = qtype_from_name(qtype)?;
    // Before minutes of writing, a mix the shape cannot take and a device the build lacks are
    // refused.
    quantization.fits(spec)?;
    device.open()?;
    let path = cache_dir("synthetic")?.join(format!("{name}-{}.gguf", qtype.to_lowercase()));
    if !path.is_file() {
        progress(LoadProgress::step(
            0.0,
            format!("writing {}", path.display()),
        ));
        // Atomic: a write cut short leaves no file that the next run would take as whole.
        write_synthetic_gguf(&path, spec, quantization, 0)?;
    }
    let path = path.to_string_lossy().into_owned();
    load_on(
        &path,
        &HubSettings::from_env(),
        device,
        activations,
        backend,
        progress,
    )
}

/// What a model loaded by llama.cpp shares with one loaded by samplab's engine.
struct Loading {
    name: String,
    origin: ModelOrigin,
    replay: ReplayStore,
    /// Why this backend runs it, when `auto` chose it.
    notice: Option<String>,
}

/// A GGUF file on the llama.cpp backend: samplab's checks and tokenizer, llama.cpp's forward
/// pass.
fn load_llama_cpp(
    path: &Path,
    loading: Loading,
    device: DeviceChoice,
) -> anyhow::Result<LoadedModel> {
    let checked = check_gguf(path)?;
    let gguf = tokenizer_from_gguf(&checked.content)
        .with_context(|| format!("cannot build the tokenizer of {}", path.display()))?;
    let templates = gguf_templates(&gguf);
    let defaults = GenerationDefaults::from_gguf(&checked.content, path)
        .ok()
        .and_then(|g| g.sampling_params().ok());
    drop(checked);
    let opened = super::llama_cpp::open(path, device)?;
    check_vocab(&gguf.tokenizer, opened.backend.vocab_size(), true, path)?;
    let mut tokenizer = gguf.tokenizer;
    tokenizer.set_encode_special_tokens(false);
    // samplab's tokenizer where it splits text as llama.cpp does, else llama.cpp's own.
    let encoder = gguf.unknown_pre.as_ref().map(|_| opened.encoder);
    let own_tokenizer = gguf.unknown_pre.map(|pre| {
        format!(
            "samplab's tokenizer does not know the pre-tokenizer `{pre}`: prompts are \
             tokenized by llama.cpp"
        )
    });
    let warnings = loading
        .notice
        .into_iter()
        .chain(own_tokenizer)
        .chain(opened.warnings)
        .collect();
    Ok(LoadedModel {
        warnings,
        activations: None,
        structured: Default::default(),
        // Every label that names the model (column titles, headers, scores) says whose
        // forward pass it is: the same file on both backends is two models.
        name: format!("{} (llama.cpp)", loading.name),
        backend: opened.backend,
        device: opened.device,
        replay: loading.replay,
        tokenizer,
        eos_ids: gguf.eos_ids,
        defaults,
        chat_template: templates.default_template(),
        templates,
        record_traces: false,
        origin: loading.origin,
        encoder,
    })
}
