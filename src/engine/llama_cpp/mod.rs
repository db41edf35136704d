//! llama.cpp linked in as a second local backend (cargo feature `llama-cpp`): every
//! architecture llama.cpp runs and its GPU backends, behind the same [`Backend`] as samplab's
//! engine, so that samplers, replay, branches and analysis work on it unchanged.
//!
//! Only the forward pass is llama.cpp's: files pass samplab's GGUF checks before llama.cpp
//! sees them, tokens come from samplab's GGUF tokenizer (llama.cpp's ids) and chat templates
//! from samplab's renderer.
//!
//! [`Backend`]: crate::engine::Backend

#[cfg(feature = "llama-cpp")]
mod backend;
#[cfg(feature = "llama-cpp")]
pub mod log;
#[cfg(feature = "llama-cpp")]
pub mod probe;
#[cfg(feature = "llama-cpp")]
mod sequences;

use crate::engine::{Backend, TextEncoder};
use crate::model::device::DeviceChoice;
use std::path::Path;

/// The variable naming the binary that loads a file in a child process before llama.cpp loads
/// it here (see `probe`); the CLI sets it to itself.
pub const PROBE_VAR: &str = "SAMPLAB_LLAMA_PROBE";

/// Whether this build has the llama.cpp backend.
pub const BUILT: bool = cfg!(feature = "llama-cpp");

/// Why a build without the feature cannot run llama.cpp, and what to do.
pub const NOT_BUILT: &str = "this samplab was built without the llama.cpp backend: rebuild with \
     `cargo build --release --features llama-cpp` (it needs cmake and libclang: `apt-get \
     install cmake libclang-dev`)";

/// Positions of llama.cpp's context, shared by the prompt and every row, unless
/// `SAMPLAB_LLAMA_CTX` says otherwise; never more than the model was trained on.
pub const DEFAULT_CONTEXT: u32 = 8192;

/// A model llama.cpp has loaded, ready to be a [`Backend`].
pub struct Opened {
    pub backend: Box<dyn Backend + Send>,
    /// `cpu`, or the GPU its layers went to.
    pub device: String,
    /// What llama.cpp warned of while loading.
    pub warnings: Vec<String>,
    /// llama.cpp's own tokenizer, for vocabularies samplab's does not reproduce.
    pub encoder: std::sync::Arc<dyn TextEncoder>,
}

/// llama.cpp's tokenizer of a loaded model.
#[cfg(feature = "llama-cpp")]
struct LlamaEncoder(std::sync::Arc<llama_cpp_2::model::LlamaModel>);

#[cfg(feature = "llama-cpp")]
impl TextEncoder for LlamaEncoder {
    fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.0
            .vocab()
            .tokenize(text.as_bytes(), add_special, parse_special)
            .into_iter()
            .map(|token| token.0 as u32)
            .collect()
    }
}

#[cfg(not(feature = "llama-cpp"))]
pub fn open(_path: &Path, _device: DeviceChoice) -> anyhow::Result<Opened> {
    anyhow::bail!(NOT_BUILT)
}

/// Loads the GGUF file at `path` (checked by samplab already) with llama.cpp, its layers on
/// `device`, after a child process has loaded it unharmed (see [`probe`]).
#[cfg(feature = "llama-cpp")]
pub fn open(path: &Path, device: DeviceChoice) -> anyhow::Result<Opened> {
    probe::probe(path)?;
    log::capture();
    let _ = log::drain();
    load(path, device)
}

/// The child's side of [`probe`]: loads `path` on the CPU and runs one token, llama.cpp's log
/// going to stderr for the parent to quote.
#[cfg(feature = "llama-cpp")]
pub fn run_probe(path: &Path) -> anyhow::Result<()> {
    let mut opened = load(path, DeviceChoice::Cpu)?;
    opened.backend.prefill(&[0], 0)?;
    Ok(())
}

/// `--verbose`: llama.cpp's whole log on stderr as well as in the notices.
pub fn echo_log(on: bool) {
    #[cfg(feature = "llama-cpp")]
    log::echo(on);
    #[cfg(not(feature = "llama-cpp"))]
    let _ = on;
}

#[cfg(not(feature = "llama-cpp"))]
pub fn run_probe(_path: &Path) -> anyhow::Result<()> {
    anyhow::bail!(NOT_BUILT)
}

#[cfg(feature = "llama-cpp")]
fn load(path: &Path, device: DeviceChoice) -> anyhow::Result<Opened> {
    use llama_cpp_2::context::params::LlamaContextParams;
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::model::params::LlamaModelParams;
    use std::num::NonZeroU32;
    use std::sync::Arc;

    let llama = llama_backend()?;
    let (layers, device_name) = offload(llama, device)?;
    let mut params = LlamaModelParams::default().with_n_gpu_layers(layers);
    if let DeviceChoice::Cuda(n) | DeviceChoice::Metal(n) = device {
        params = params.with_main_gpu(n as i32);
    }
    let model = LlamaModel::load_from_file(llama, path, &params).map_err(|e| {
        anyhow::anyhow!(
            "llama.cpp could not load {}: {e}{}",
            path.display(),
            logged_errors()
        )
    })?;
    let model = Arc::new(model);
    let trained = model.n_ctx_train().max(1);
    let cells = context_size()?.min(trained);
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()) as i32;
    const SEQUENCES: u32 = 72;
    const BATCH: u32 = 512;
    let context_params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(cells))
        .with_n_batch(BATCH)
        .with_n_ubatch(BATCH)
        .with_n_seq_max(SEQUENCES)
        // Rows copied from the prompt share its cells; one pool serves every sequence.
        .with_kv_unified(true)
        // A sliding window's cache keeps every position, so rows can be cut back anywhere.
        .with_swa_full(true)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let context = model.new_context(llama, context_params).map_err(|e| {
        anyhow::anyhow!("llama.cpp could not make a context: {e}{}", logged_errors())
    })?;
    let recurrent = model.is_recurrent() || model.is_hybrid();
    let bytes_per_position = kv_bytes_per_position(&model);
    let kernels = vec![("all".to_owned(), format!("llama.cpp ({} threads)", threads))];
    let seqs = sequences::Sequences::new(Arc::clone(&model), context, SEQUENCES, BATCH as usize);
    let warnings = log::drain()
        .into_iter()
        .filter(|line| line.warning)
        .map(|line| format!("llama.cpp: {}", line.text))
        .collect();
    Ok(Opened {
        backend: Box::new(backend::LlamaCppBackend::new(
            seqs,
            recurrent,
            bytes_per_position,
            kernels,
        )),
        device: device_name,
        warnings,
        encoder: std::sync::Arc::new(LlamaEncoder(model)),
    })
}

/// llama.cpp's process-wide backend, started once (tests call llama.cpp through it too).
#[cfg(feature = "llama-cpp")]
pub fn llama_backend() -> anyhow::Result<&'static llama_cpp_2::llama_backend::LlamaBackend> {
    use llama_cpp_2::llama_backend::LlamaBackend;
    use std::sync::OnceLock;
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| LlamaBackend::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("llama.cpp could not start: {e}"))
}

/// How many layers go to a GPU, and the device's name.
#[cfg(feature = "llama-cpp")]
fn offload(
    llama: &llama_cpp_2::llama_backend::LlamaBackend,
    device: DeviceChoice,
) -> anyhow::Result<(u32, String)> {
    let gpu = llama.supports_gpu_offload();
    match device {
        DeviceChoice::Cpu => Ok((0, "cpu".to_owned())),
        DeviceChoice::Auto if gpu => Ok((u32::MAX, gpu_name())),
        DeviceChoice::Auto => Ok((0, "cpu".to_owned())),
        DeviceChoice::Cuda(_) | DeviceChoice::Metal(_) if gpu => Ok((u32::MAX, device.to_string())),
        DeviceChoice::Cuda(_) | DeviceChoice::Metal(_) => anyhow::bail!(
            "llama.cpp in this build runs on the CPU only: rebuild with `--features llama-cpp,cuda` \
             (or metal, or vulkan), or pass --device cpu"
        ),
    }
}

/// The first GPU llama.cpp found, as `--device` would name it.
#[cfg(feature = "llama-cpp")]
fn gpu_name() -> String {
    llama_cpp_2::list_llama_ggml_backend_devices()
        .into_iter()
        .find(|d| !d.backend.eq_ignore_ascii_case("cpu"))
        .map_or_else(
            || "gpu".to_owned(),
            |d| format!("{}:0", d.backend.to_ascii_lowercase()),
        )
}

/// `SAMPLAB_LLAMA_CTX`, or the default.
#[cfg(feature = "llama-cpp")]
fn context_size() -> anyhow::Result<u32> {
    match std::env::var("SAMPLAB_LLAMA_CTX") {
        Err(_) => Ok(DEFAULT_CONTEXT),
        Ok(text) => text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n >= 16)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "SAMPLAB_LLAMA_CTX is `{text}`: write the positions llama.cpp's context \
                     holds for the prompt and all samples together, a whole number from 16"
                )
            }),
    }
}

/// Keys and values of one position in f16, the context's default, over every layer.
#[cfg(feature = "llama-cpp")]
fn kv_bytes_per_position(model: &llama_cpp_2::model::LlamaModel) -> usize {
    let (layers, heads, kv_heads) = (model.n_layer(), model.n_head(), model.n_head_kv());
    let head_dim = model.n_embd() as u32 / heads.max(1);
    (2 * 2 * layers * kv_heads * head_dim) as usize
}

/// llama.cpp's logged errors since the last drain, as a sentence to add to a failure.
#[cfg(feature = "llama-cpp")]
fn logged_errors() -> String {
    let lines: Vec<String> = log::drain()
        .into_iter()
        .filter(|line| line.warning)
        .map(|line| line.text)
        .collect();
    match lines.is_empty() {
        true => String::new(),
        false => format!(" (llama.cpp said: {})", lines.join("; ")),
    }
}
