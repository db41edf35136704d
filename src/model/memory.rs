//! Will a model fit? Weights plus a KV cache, estimated from the headers before any tensor is
//! read, against the memory the machine has free, so that loading a second model is refused
//! with a reason instead of ending in the OOM killer.

use super::arch::{Model, OpenGguf};
use super::device::gpu_memory;
use super::error::ModelError;
use super::formats::config::{ModelConfig, io_error};
use super::formats::{mxfp4, tensors};
use super::state::{Snapshots, positions_held};
use candle_core::Device;
use candle_core::quantized::GgmlDType;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Positions the estimate reserves KV cache for (capped by the model's context): a long
/// prompt plus a long sample, without charging a 128k-context model for its whole window.
pub const KV_POSITIONS: usize = 4096;

/// Sets the memory samplab may use, overriding what the system reports (`512M`, `8G`, bytes).
pub const BUDGET_VAR: &str = "SAMPLAB_MEMORY_BUDGET";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Bytes of weights as loaded: GGUF tensors as stored, safetensors f16 and bf16 as stored
    /// and anything else as f32.
    pub weights: u64,
    /// f32 keys and values of every layer for `positions` positions of one sequence.
    pub kv_cache: u64,
    pub positions: usize,
}

impl MemoryEstimate {
    pub fn total(&self) -> u64 {
        self.weights.saturating_add(self.kv_cache)
    }
}

/// Memory a model may still take, and where: the host's, or a GPU's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Free {
    pub bytes: u64,
    pub place: Place,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Host,
    Gpu { device: String, total: u64 },
}

impl Free {
    pub fn host(bytes: u64) -> Self {
        Self {
            bytes,
            place: Place::Host,
        }
    }
}

impl fmt::Display for Free {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::Host => write!(f, "only {} is free", human(self.bytes)),
            Place::Gpu { device, total } => write!(
                f,
                "only {} of {device}'s {} is free",
                human(self.bytes),
                human(*total)
            ),
        }
    }
}

impl Place {
    /// What frees more of this memory, besides asking for less.
    fn remedy(&self) -> String {
        match self {
            Place::Host => format!(
                "close other programs or loaded models (set {BUDGET_VAR} to override the free-memory figure)"
            ),
            Place::Gpu { .. } => {
                "close other programs using the GPU or other loaded models, or pass --device cpu"
                    .to_owned()
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(
        "{model} needs about {} ({} of weights + {} of KV cache for {positions} positions) \
         but {available}: pick a smaller or more quantized model, or {}",
        human(.estimate.total()), human(.estimate.weights), human(.estimate.kv_cache),
        .available.place.remedy(), positions = .estimate.positions
    )]
    DoesNotFit {
        model: String,
        estimate: MemoryEstimate,
        available: Free,
    },
    #[error(
        "{model}: {samples} samples of up to {positions} positions need about {} of KV cache \
         but {available}: lower num_samples or max_tokens, or {}",
        human(*.needed), .available.place.remedy()
    )]
    RunDoesNotFit {
        model: String,
        samples: u32,
        positions: usize,
        needed: u64,
        available: Free,
    },
    #[error(
        "{BUDGET_VAR}={value} is not a size: write bytes or a number with K, M or G, e.g. 512M or 1.5G"
    )]
    BadBudget { value: String },
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// Estimates a GGUF file or an HF directory from its headers alone, for weights kept on
/// `device` and recurrent snapshots within `replay_budget` (`SAMPLAB_REPLAY_BUDGET`).
pub fn estimate(
    path: &Path,
    device: &Device,
    replay_budget: usize,
) -> Result<MemoryEstimate, ModelError> {
    if path.is_dir() {
        let mut bytes = 0u64;
        for file in tensors::safetensors_files(path)? {
            bytes += safetensors_bytes(&file, device)?;
        }
        Ok(for_config(
            &ModelConfig::from_hf_dir(path)?,
            bytes,
            replay_budget,
        ))
    } else {
        estimate_gguf(&Model::open_gguf(path)?, device, replay_budget)
    }
}

/// Estimates an opened GGUF file: on the CPU its tensors take what they take on disk; a GPU
/// widens 16-bit matrices to f32 for candle's product, and MXFP4 ones (4.25 bits a value),
/// which candle cannot run.
pub fn estimate_gguf(
    gguf: &OpenGguf,
    device: &Device,
    replay_budget: usize,
) -> Result<MemoryEstimate, ModelError> {
    let mut bytes = std::fs::metadata(gguf.path())
        .map_err(|e| io_error(gguf.path(), e))?
        .len();
    if !device.is_cpu() {
        for info in gguf.tensor_infos() {
            if matches!(info.ggml_dtype, GgmlDType::F16 | GgmlDType::BF16) {
                bytes = bytes.saturating_add(2 * info.shape.elem_count() as u64);
            }
        }
        // Four bytes a value where a block took 17 bytes.
        let widened = (4 * mxfp4::BLOCK - mxfp4::BLOCK_BYTES) as u64;
        let blocks = gguf.mxfp4_values() / mxfp4::BLOCK as u64;
        bytes = bytes.saturating_add(blocks.saturating_mul(widened));
    }
    Ok(for_config(gguf.config(), bytes, replay_budget))
}

/// The model's figures, its recurrent layers keeping the snapshots the engine will give them.
fn for_config(config: &ModelConfig, weights: u64, replay_budget: usize) -> MemoryEstimate {
    let positions = config.context_length.min(KV_POSITIONS);
    let snapshots = Snapshots::within_replay_budget(config, replay_budget);
    MemoryEstimate {
        weights,
        kv_cache: kv_bytes(config, positions, snapshots),
        positions,
    }
}

/// f32 keys and values of every layer for one sequence of `positions`, from the layer plan: a
/// windowed layer holds its window's worth at most, a recurrent one its state and as many
/// snapshots of it as `snapshots` keeps. A header's absurd figures saturate (and so are
/// refused) instead of wrapping to a small number.
pub fn kv_bytes(config: &ModelConfig, positions: usize, snapshots: Snapshots) -> u64 {
    let bytes = |sizes: [usize; 3]| {
        sizes
            .iter()
            .fold(2 * 4u64, |bytes, &n| bytes.saturating_mul(n as u64))
    };
    // Layers that read another layer's keys hold none, recurrent ones a state of their own;
    // layers past the plan (a config made by hand) count as full ones.
    let beyond = config.num_layers.saturating_sub(config.layers.len());
    let keys = config
        .layers
        .iter()
        .filter(|plan| plan.kv_from.is_none() && !plan.recurrent)
        .map(|plan| {
            bytes([
                plan.kv_heads,
                plan.head_dim,
                positions_held(plan.window, positions),
            ])
        })
        .fold(
            bytes([beyond, config.num_kv_heads, config.head_dim]).saturating_mul(positions as u64),
            u64::saturating_add,
        );
    let recurrent = config.layers.iter().filter(|plan| plan.recurrent).count() as u64;
    let state = match config.delta_net {
        Some(shape) => {
            let each = recurrent.saturating_mul(shape.state_floats() as u64 * 4);
            each.saturating_mul(1 + snapshots.cap as u64)
        }
        None => 0,
    };
    keys.saturating_add(state)
}

/// Bytes a safetensors file's tensors take once loaded, from its JSON header: on the CPU f16
/// and bf16 stay 16-bit; anything else, and everything on a GPU, becomes f32.
fn safetensors_bytes(file: &Path, device: &Device) -> Result<u64, ModelError> {
    let corrupt = |reason: &str| ModelError::Corrupt {
        path: file.to_owned(),
        reason: reason.to_owned(),
    };
    let mut reader = crate::regular_file::open(file).map_err(|e| io_error(file, e))?;
    let mut len = [0u8; 8];
    reader
        .read_exact(&mut len)
        .map_err(|_| corrupt("shorter than a safetensors header"))?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 {
        return Err(corrupt("the safetensors header claims to be over 100 MB"));
    }
    let mut header = vec![0u8; len as usize];
    reader
        .read_exact(&mut header)
        .map_err(|_| corrupt("the safetensors header is cut short"))?;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|_| corrupt("the safetensors header is not JSON"))?;
    Ok(header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(_, tensor)| {
            let elements = tensor["shape"].as_array().map_or(0, |shape| {
                shape
                    .iter()
                    .filter_map(|d| d.as_u64())
                    .fold(1u64, u64::saturating_mul)
            });
            let size = match tensor["dtype"].as_str() {
                Some("F16" | "BF16") if device.is_cpu() => 2,
                _ => 4,
            };
            elements.saturating_mul(size)
        })
        .fold(0, u64::saturating_add))
}

/// Free memory: `$SAMPLAB_MEMORY_BUDGET` when set, else the kernel's MemAvailable; `None`
/// where neither is known (then nothing is refused). A budget above the machine's total
/// memory is capped at it: a budget may lower the figure, not switch the check off.
pub fn available() -> Result<Option<u64>, MemoryError> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    budgeted(std::env::var(BUDGET_VAR).ok(), &meminfo)
}

/// Free memory where `device` keeps weights and KV cache: a GPU's own, from its driver (the
/// models already on it have taken theirs), else the host's ([`available`]).
pub fn free_on(device: &Device, name: &str) -> Result<Option<Free>, MemoryError> {
    if let Some((free, total)) = gpu_memory(device) {
        return Ok(Some(Free {
            bytes: free,
            place: Place::Gpu {
                device: name.to_owned(),
                total,
            },
        }));
    }
    if device.is_cpu() {
        Ok(available()?.map(Free::host))
    } else {
        Ok(None)
    }
}

fn budgeted(budget: Option<String>, meminfo: &str) -> Result<Option<u64>, MemoryError> {
    let total = meminfo_kib(meminfo, "MemTotal:");
    match budget {
        Some(value) => {
            let budget = parse_size(&value).ok_or(MemoryError::BadBudget { value })?;
            Ok(Some(total.map_or(budget, |total| budget.min(total))))
        }
        None => Ok(meminfo_kib(meminfo, "MemAvailable:")),
    }
}

/// A `/proc/meminfo` figure in bytes.
fn meminfo_kib(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `1536`, `512K`, `512M`, `1.5G` (binary units; a trailing `B` or `iB` is accepted).
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_uppercase();
    let text = text
        .strip_suffix("IB")
        .or_else(|| text.strip_suffix('B'))
        .unwrap_or(&text);
    let (number, scale) = match text.chars().last()? {
        'K' => (&text[..text.len() - 1], 1u64 << 10),
        'M' => (&text[..text.len() - 1], 1 << 20),
        'G' => (&text[..text.len() - 1], 1 << 30),
        'T' => (&text[..text.len() - 1], 1 << 40),
        _ => (text, 1),
    };
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value * scale as f64) as u64)
}

/// Refuses `estimate` when it exceeds `available`.
pub fn check_fits(
    model: &str,
    estimate: MemoryEstimate,
    available: Option<Free>,
) -> Result<(), MemoryError> {
    match available {
        Some(available) if estimate.total() > available.bytes => Err(MemoryError::DoesNotFit {
            model: model.to_owned(),
            estimate,
            available,
        }),
        _ => Ok(()),
    }
}

/// Refuses a run whose KV cache (`samples` rows of up to `positions`, `row_bytes` each) would
/// exceed `available`.
pub fn check_run(
    model: &str,
    row_bytes: u64,
    samples: u32,
    positions: usize,
    available: Option<Free>,
) -> Result<(), MemoryError> {
    let needed = row_bytes.saturating_mul(u64::from(samples));
    match available {
        Some(available) if needed > available.bytes => Err(MemoryError::RunDoesNotFit {
            model: model.to_owned(),
            samples,
            positions,
            needed,
            available,
        }),
        _ => Ok(()),
    }
}

/// `1.5 GiB`, `340 MiB`, `12 KiB`.
pub fn human(bytes: u64) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in units {
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            return if value < 10.0 {
                format!("{value:.1} {unit}")
            } else {
                format!("{value:.0} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("1536"), Some(1536));
        assert_eq!(parse_size("512K"), Some(512 << 10));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        assert_eq!(parse_size("64 MiB"), Some(64 << 20));
        assert_eq!(parse_size("2gb"), Some(2 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-1M"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let info = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(budgeted(None, info).unwrap(), Some(2048 * 1024));
        assert_eq!(budgeted(None, "MemTotal: 1 kB\n").unwrap(), None);
    }

    #[test]
    fn a_budget_lowers_the_free_figure_but_never_raises_it_above_the_machine() {
        let info = "MemTotal:       4096 kB\nMemAvailable:   2048 kB\n";
        let budget = |b: &str| budgeted(Some(b.to_owned()), info);
        assert_eq!(budget("1K").unwrap(), Some(1024));
        assert_eq!(
            budget("3M").unwrap(),
            Some(3 << 20),
            "above MemAvailable is allowed"
        );
        assert_eq!(budget("1000T").unwrap(), Some(4096 * 1024));
        assert_eq!(budgeted(Some("9G".into()), "").unwrap(), Some(9 << 30));
        assert!(matches!(budget("lots"), Err(MemoryError::BadBudget { .. })));
    }

    #[test]
    fn a_run_whose_kv_cache_outgrows_the_free_memory_is_refused_with_both_figures() {
        // An 8B Llama: 32 layers x 8 kv heads x 128 dims, f32 keys and values.
        let per_row = 2 * 4 * 32 * 8 * 128 * 4096;
        assert!(check_run("8b", per_row, 1, 4096, Some(Free::host(16 << 30))).is_ok());
        assert!(check_run("8b", per_row, 64, 4096, None).is_ok());
        let err = check_run("8b", per_row, 64, 4096, Some(Free::host(16 << 30)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("64 samples of up to 4096 positions"), "{err}");
        assert!(
            err.contains("about 64 GiB") && err.contains("only 16 GiB"),
            "{err}"
        );
        assert!(
            check_run(
                "m",
                u64::MAX,
                64,
                usize::MAX,
                Some(Free::host(u64::MAX - 1))
            )
            .is_err()
        );
    }

    #[test]
    fn absurd_layer_counts_saturate_instead_of_wrapping_to_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({
            "model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 64,
            "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
        });
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        let mut config = ModelConfig::from_hf_dir(dir.path()).unwrap();
        // Past the config check's bounds, as a caller building a config by hand could go.
        for layers in [1usize << 61, 1 << 62, usize::MAX] {
            config.num_layers = layers;
            let estimate = for_config(&config, 1 << 20, 1 << 20);
            assert_eq!(estimate.kv_cache, u64::MAX, "{layers}");
            assert!(check_fits("m", estimate, Some(Free::host(u64::MAX - 1))).is_err());
        }
    }

    /// Snapshots of a recurrent state count as the engine keeps them: per row an eighth of
    /// the replay budget's worth, up to 64; none at a budget of 0.
    #[test]
    fn the_replay_budget_sets_the_recurrent_snapshots_the_estimate_counts() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/archs/qwen35/hf");
        let config = ModelConfig::from_hf_dir(&dir).unwrap();
        let kv_cache = |budget: usize| estimate(&dir, &Device::Cpu, budget).unwrap().kv_cache;
        let positions = config.context_length.min(KV_POSITIONS);
        let bare = kv_bytes(&config, positions, Snapshots::NONE);
        assert_eq!(kv_cache(0), bare);
        let recurrent = config.layers.iter().filter(|l| l.recurrent).count();
        let shape = config.delta_net.unwrap();
        let one = (recurrent * shape.state_floats() * 4) as u64;
        for snapshots in [1, 3, 10] {
            let budget = 8 * one as usize * snapshots;
            assert_eq!(kv_cache(budget), bare + snapshots as u64 * one, "{budget}");
        }
        assert_eq!(kv_cache(64 << 30), bare + 64 * one);
    }

    #[test]
    fn a_model_larger_than_the_free_memory_is_refused_with_the_figures() {
        let estimate = MemoryEstimate {
            weights: 3 << 30,
            kv_cache: 1 << 29,
            positions: 4096,
        };
        assert!(check_fits("big", estimate, Some(Free::host(4 << 30))).is_ok());
        assert!(check_fits("big", estimate, None).is_ok());
        let err = check_fits("big", estimate, Some(Free::host(2 << 30)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("big needs about 3.5 GiB"), "{err}");
        assert!(err.contains("only 2.0 GiB is free"), "{err}");
        assert!(err.contains(BUDGET_VAR), "{err}");
    }

    #[test]
    fn a_gpu_refusal_names_the_gpu_its_total_and_the_way_to_the_cpu() {
        let estimate = MemoryEstimate {
            weights: 3 << 30,
            kv_cache: 1 << 29,
            positions: 4096,
        };
        let on_gpu = |bytes| Free {
            bytes,
            place: Place::Gpu {
                device: "cuda:0".to_owned(),
                total: 8 << 30,
            },
        };
        assert!(check_fits("big", estimate, Some(on_gpu(4 << 30))).is_ok());
        let err = check_fits("big", estimate, Some(on_gpu(2 << 30)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("needs about 3.5 GiB")
                && err.contains("only 2.0 GiB of cuda:0's 8.0 GiB is free"),
            "{err}"
        );
        assert!(
            err.contains("--device cpu") && !err.contains(BUDGET_VAR),
            "{err}"
        );
        let err = check_run("big", 1 << 30, 8, 1024, Some(on_gpu(1 << 30)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("8.0 GiB of KV cache but only 1.0 GiB of cuda:0's"),
            "{err}"
        );
    }
}
