//! The shape and hyper-parameters of a model, read from GGUF metadata or a Hugging Face
//! `config.json` (+ `generation_config.json`), so that the forward pass never looks at files.

pub use crate::model::arch::registry::Architecture;
use crate::model::arch::registry::{Window, supported_gguf, supported_hf};
use crate::model::error::ModelError;
use crate::model::kernels::fused::RopeLayout;
use crate::params::{ParamError, SamplingParams};
use candle_core::quantized::gguf_file;
use serde::Deserialize;
use std::path::Path;

/// How RoPE frequencies are stretched beyond the trained context.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Every frequency divided by `factor`.
    Linear { factor: f32 },
    /// Llama 3.1's wavelength-dependent scaling.
    Llama3 {
        factor: f32,
        low_freq_factor: f32,
        high_freq_factor: f32,
        original_max_position_embeddings: usize,
    },
    /// Per-frequency divisors precomputed by convert (GGUF `rope_freqs.weight`).
    FreqFactors(Vec<f32>),
    /// YaRN: low frequencies stretched by `factor`, high ones kept, a ramp between (over the
    /// pairs whose wavelengths fit `beta_slow` to `beta_fast` times in the original context);
    /// its magnitude correction is in [`ModelConfig::rope_attn_factor`].
    Yarn {
        factor: f32,
        original_context: usize,
        beta_fast: f32,
        beta_slow: f32,
    },
}

/// Queries scaled by `1 + beta ln(1 + floor(pos / floor))` (Llama 4's and Ministral 3's
/// attention temperature), so that far positions keep sharp attention.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnTemperature {
    pub beta: f32,
    pub floor: usize,
}

impl AttnTemperature {
    pub(crate) fn scale(&self, pos: usize) -> f32 {
        ((pos / self.floor) as f32 + 1.0).ln() * self.beta + 1.0
    }
}

/// YaRN's magnitude correction `0.1 m ln(s) + 1` (1 for no stretch).
fn yarn_mscale(stretch: f64, m: f64) -> f64 {
    if stretch <= 1.0 {
        1.0
    } else {
        0.1 * m * stretch.ln() + 1.0
    }
}

/// The sampling settings a model ships with (generation_config.json, or GGUF
/// `general.sampling.*`); `None` where the file is silent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationDefaults {
    pub do_sample: Option<bool>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub max_new_tokens: Option<u64>,
}

impl GenerationDefaults {
    /// The model's defaults over samplab's, checked like any user input. An explicit
    /// `do_sample: false` means greedy, as in transformers.
    /// A GGUF file's `general.sampling.*` keys, whatever its architecture.
    pub(crate) fn from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Self, ModelError> {
        let md = Metadata { content, path };
        Ok(Self {
            temperature: md.opt_f32("general.sampling.temp")?.map(f64::from),
            top_k: md.opt_usize("general.sampling.top_k")?.map(|k| k as i64),
            top_p: md.opt_f32("general.sampling.top_p")?.map(f64::from),
            min_p: md.opt_f32("general.sampling.min_p")?.map(f64::from),
            repetition_penalty: md
                .opt_f32("general.sampling.penalty_repeat")?
                .map(f64::from),
            ..Self::default()
        })
    }

    pub fn sampling_params(&self) -> Result<SamplingParams, ParamError> {
        let mut params = SamplingParams::default();
        let float = |x: f64| serde_yaml_ng::Value::Number(x.into());
        let int = |x: i64| serde_yaml_ng::Value::Number(x.into());
        let fields = [
            ("temperature", self.temperature.map(float)),
            ("top_k", self.top_k.map(int)),
            ("top_p", self.top_p.map(float)),
            ("min_p", self.min_p.map(float)),
            ("repetition_penalty", self.repetition_penalty.map(float)),
            (
                "max_tokens",
                self.max_new_tokens
                    .map(|n| serde_yaml_ng::Value::Number(n.into())),
            ),
        ];
        for (key, value) in fields {
            if let Some(value) = value {
                params.set(key, value)?;
            }
        }
        if self.do_sample == Some(false) {
            params.temperature = 0.0;
        }
        params.validate()?;
        Ok(params)
    }
}

/// What one layer's attention sees and how it rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerAttention {
    /// Each query sees at most this many positions, its own included; `None`: all before it.
    pub window: Option<usize>,
    /// Rotated with the local RoPE base (`rope_theta_local`, unscaled) instead of the global.
    pub local_rope: bool,
    /// Rotated at all (SmolLM3 leaves every fourth layer unrotated).
    pub rope: bool,
    /// A Gated DeltaNet layer (Qwen3.5): a recurrent state in place of attention.
    pub recurrent: bool,
    /// The width of its heads: Gemma 4's global layers are wider than its windowed ones.
    pub head_dim: usize,
    pub kv_heads: usize,
    /// Attends over the keys and values this earlier layer wrote, keeping none of its own
    /// (Gemma 4's last layers).
    pub kv_from: Option<usize>,
}

/// The shape of a model's Gated DeltaNet layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaNetShape {
    /// The causal convolution's width, the current position included.
    pub conv_kernel: usize,
    pub k_heads: usize,
    pub v_heads: usize,
    /// Each key's and value's size: the state is `head_dim x head_dim` per value head.
    pub head_dim: usize,
    /// Value head `j` reads key head `j / (v_heads / k_heads)` (config.json checkpoints);
    /// else `j % k_heads` (GGUF, whose converter reorders the value heads).
    pub grouped: bool,
}

impl DeltaNetShape {
    /// Channels the convolution runs over: q, k and v.
    pub fn conv_channels(&self) -> usize {
        2 * self.k_heads * self.head_dim + self.v_heads * self.head_dim
    }

    /// Floats one row's state holds in one layer: the convolution's window and the matrix.
    pub fn state_floats(&self) -> usize {
        (self.conv_kernel - 1) * self.conv_channels() + self.v_heads * self.head_dim * self.head_dim
    }

    /// The key head value head `v` reads.
    pub fn k_head(&self, v: usize) -> usize {
        match self.grouped {
            true => v / (self.v_heads / self.k_heads),
            false => v % self.k_heads,
        }
    }

    /// The shape a GGUF file's `ssm.*` keys give (llama.cpp's names: the state size is the
    /// head size, the group count the key heads, the time-step rank the value heads).
    fn from_gguf(md: &Metadata, key: &impl Fn(&str) -> String) -> Result<Self, ModelError> {
        let shape = Self {
            conv_kernel: md.usize(&key("ssm.conv_kernel"))?,
            k_heads: md.usize(&key("ssm.group_count"))?,
            v_heads: md.usize(&key("ssm.time_step_rank"))?,
            head_dim: md.usize(&key("ssm.state_size"))?,
            grouped: false,
        };
        let inner_key = key("ssm.inner_size");
        let inner = md.usize(&inner_key)?;
        shape.check(
            md.path,
            [
                &key("ssm.conv_kernel"),
                &key("ssm.group_count"),
                &key("ssm.time_step_rank"),
                &key("ssm.state_size"),
            ],
        )?;
        if inner != shape.v_heads * shape.head_dim {
            return Err(config_error(
                md.path,
                format!(
                    "`{inner_key}` is {inner}; it must be `{}` ({}) x `{}` ({}) = {}",
                    key("ssm.time_step_rank"),
                    shape.v_heads,
                    key("ssm.state_size"),
                    shape.head_dim,
                    shape.v_heads * shape.head_dim
                ),
            ));
        }
        Ok(shape)
    }

    /// Refuses sizes no layer can run: `keys` name the kernel, key heads, value heads and
    /// head size as the file does.
    fn check(&self, path: &Path, keys: [&str; 4]) -> Result<(), ModelError> {
        let [kernel, k_heads, v_heads, head_dim] = keys;
        let bounded = [
            (kernel, self.conv_kernel, 2, 64, "4 is usual"),
            (k_heads, self.k_heads, 1, 1 << 10, "16 is usual"),
            (v_heads, self.v_heads, 1, 1 << 10, "16 to 64 are usual"),
            (head_dim, self.head_dim, 1, 1 << 12, "128 is usual"),
        ];
        for (key, value, least, most, usual) in bounded {
            if !(least..=most).contains(&value) {
                return Err(config_error(
                    path,
                    format!("`{key}` is {value}; it must be {least} to {most} ({usual})"),
                ));
            }
        }
        if !self.v_heads.is_multiple_of(self.k_heads) {
            return Err(config_error(
                path,
                format!(
                    "`{v_heads}` ({}) is not a multiple of `{k_heads}` ({}): each key head serves \
                     the same number of value heads",
                    self.v_heads, self.k_heads
                ),
            ));
        }
        Ok(())
    }
}

/// How many experts a layer has, how many each token takes, and each expert's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experts {
    pub count: usize,
    pub used: usize,
    /// Each expert's feed-forward size.
    pub intermediate_size: usize,
    /// The shared expert's feed-forward size, where the file gives one (Qwen3.5 MoE's shared
    /// expert is otherwise the model's feed-forward size).
    pub shared_size: Option<usize>,
}

impl Experts {
    /// `count`, `used` and the size as a file gave them: refused where a token would take no
    /// expert or more than there are.
    fn checked(
        count: usize,
        used: usize,
        intermediate_size: usize,
        keys: [&str; 3],
        path: &Path,
    ) -> Result<Self, ModelError> {
        let [count_key, used_key, size_key] = keys;
        if count == 0 || count > 1 << 16 {
            return Err(config_error(
                path,
                format!(
                    "`{count_key}` is {count}; a mixture of experts has 1 to 65536 (8, 64 and 128 are usual)"
                ),
            ));
        }
        if used == 0 || used > count {
            return Err(config_error(
                path,
                format!(
                    "`{used_key}` is {used}; each token takes 1 to `{count_key}` ({count}) experts"
                ),
            ));
        }
        if intermediate_size == 0 || intermediate_size > 1 << 22 {
            return Err(config_error(
                path,
                format!(
                    "`{size_key}` is {intermediate_size}; an expert's feed-forward size is 1 to 4194304"
                ),
            ));
        }
        Ok(Self {
            count,
            used,
            intermediate_size,
            shared_size: None,
        })
    }

    /// With the shared expert's size as a file gave it under `key`, where it did.
    fn with_shared(
        self,
        shared_size: Option<usize>,
        key: &str,
        path: &Path,
    ) -> Result<Self, ModelError> {
        if let Some(size) = shared_size.filter(|&n| n == 0 || n > 1 << 22) {
            return Err(config_error(
                path,
                format!("`{key}` is {size}; the shared expert's feed-forward size is 1 to 4194304"),
            ));
        }
        Ok(Self {
            shared_size,
            ..self
        })
    }
}

/// Everything the forward pass needs to know about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    /// The most positions (prompt + generated) a sequence may hold.
    pub context_length: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f32,
    pub rope_layout: RopeLayout,
    pub rope_scaling: Option<RopeScaling>,
    /// How many of a head's dimensions RoPE rotates (the first ones; Phi-4 mini rotates
    /// three quarters); the head size unless the model says less.
    pub rope_dims: usize,
    /// cos and sin are multiplied by this (LongRoPE's attention factor; 1 elsewhere).
    pub rope_attn_factor: f32,
    /// Queries grow with their position (Ministral 3).
    pub attn_temperature: Option<AttnTemperature>,
    /// The context RoPE was trained at before it was stretched (LongRoPE takes its long
    /// factors for a context beyond it).
    pub rope_original_context: Option<usize>,
    /// The RoPE base of windowed layers where the model gives them their own (Gemma 3's local
    /// layers, which no scaling stretches).
    pub rope_theta_local: Option<f32>,
    /// How many dimensions of a windowed layer's head its own RoPE rotates (`rope_dims`
    /// unless the model says otherwise).
    pub rope_dims_local: usize,
    /// Each layer adds an embedding of this size looked up for the token (Gemma 4's E2B and
    /// E4B).
    pub per_layer_input: Option<usize>,
    /// Logits pass through `cap * tanh(logits / cap)` (Gemma 4).
    pub final_logit_softcap: Option<f32>,
    /// Each layer's attention, in order.
    pub layers: Vec<LayerAttention>,
    /// A mixture of experts in every layer's feed-forward (Qwen3 MoE, Mixtral).
    pub experts: Option<Experts>,
    /// The Gated DeltaNet layers' shape, where the model has any.
    pub delta_net: Option<DeltaNetShape>,
    /// Scores are multiplied by this before the softmax: `1 / sqrt(head_dim)` unless the
    /// model says otherwise.
    pub attention_scale: f32,
    /// Token embeddings are multiplied by this (Gemma's `sqrt(hidden)`, Granite's multiplier).
    pub embedding_scale: Option<f32>,
    /// Attention's and the feed-forward's outputs are multiplied by this before each residual
    /// add (Granite).
    pub residual_scale: Option<f32>,
    /// Logits are divided by this (Granite's `logits_scaling`).
    pub logit_divisor: Option<f32>,
    /// The output projection reuses the token embeddings (no `output.weight` / `lm_head`).
    pub tie_word_embeddings: bool,
    /// From config.json / generation_config.json; `None` for GGUF, whose special tokens the
    /// GGUF tokenizer reads.
    pub bos_token_id: Option<u32>,
    /// From generation_config.json and config.json (both, deduplicated); empty for GGUF.
    pub eos_token_ids: Vec<u32>,
    pub generation: GenerationDefaults,
    /// What loading found odd but accepted, as llama.cpp accepts it; shown to the user.
    pub warnings: Vec<String>,
}

impl ModelConfig {
    pub(crate) fn from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Self, ModelError> {
        let md = Metadata { content, path };
        let arch_name = md.string("general.architecture")?;
        let architecture = Architecture::from_gguf(&arch_name).ok_or_else(|| {
            ModelError::UnsupportedArchitecture {
                name: arch_name.clone(),
                supported: supported_gguf(),
            }
        })?;
        let family = architecture.family();
        let key = |k: &str| format!("{arch_name}.{k}");
        let hidden_size = md.usize(&key("embedding_length"))?;
        let num_heads = md.usize(&key("attention.head_count"))?;
        let head_dim = match md.opt_usize(&key("attention.key_length"))? {
            Some(d) => d,
            None => div_exact(hidden_size, num_heads, path)?,
        };
        let rope_dims = md
            .opt_usize(&key("rope.dimension_count"))?
            .unwrap_or(head_dim);
        let vocab_size = match md.opt_usize(&key("vocab_size"))? {
            Some(v) => v,
            None => content
                .tensor_infos
                .get("token_embd.weight")
                .map(|t| t.shape.dims()[0])
                .ok_or_else(|| ModelError::MissingTensor {
                    path: path.to_owned(),
                    name: "token_embd.weight".to_owned(),
                    family: family.name,
                })?,
        };
        let context_length = md.usize(&key("context_length"))?;
        let rope_original_context = md.opt_usize(&key("rope.scaling.original_context_length"))?;
        // llama.cpp's `n_ctx_orig_yarn`: the original context, else the trained one.
        let original_or_trained = rope_original_context.unwrap_or(context_length);
        let rope_scaling = match md.opt_string(&key("rope.scaling.type"))?.as_deref() {
            None | Some("none") => None,
            Some("linear") => Some(RopeScaling::Linear {
                factor: md.f32(&key("rope.scaling.factor"))?,
            }),
            // LongRoPE's factors are tensors of the file (Phi-3), read with the weights.
            Some("longrope") => None,
            Some("yarn") => Some(RopeScaling::Yarn {
                factor: md.f32(&key("rope.scaling.factor"))?,
                original_context: original_or_trained,
                beta_fast: match family.gguf_yarn_betas {
                    true => md.opt_f32(&key("rope.scaling.yarn_beta_fast"))?,
                    false => None,
                }
                .unwrap_or(32.0),
                beta_slow: match family.gguf_yarn_betas {
                    true => md.opt_f32(&key("rope.scaling.yarn_beta_slow"))?,
                    false => None,
                }
                .unwrap_or(1.0),
            }),
            Some(other) => {
                return Err(config_error(
                    path,
                    format!("RoPE scaling `{other}` is not supported (linear, longrope, yarn are)"),
                ));
            }
        };
        let mut warnings = Vec::new();
        let blocks = md.usize(&key("block_count"))?;
        // Multi-token-prediction blocks follow the trunk's layers (Qwen3.5's next-n): counted
        // by `block_count`, run only to draft tokens, which samplab does not do.
        let nextn = md.opt_usize(&key("nextn_predict_layers"))?.unwrap_or(0);
        let num_layers = match nextn {
            0 => blocks,
            n if n < blocks => {
                warnings.push(format!(
                    "the last {n} of {blocks} blocks are multi-token-prediction layers; they are \
                     not run (samplab samples one token at a time)"
                ));
                blocks - n
            }
            n => {
                return Err(config_error(
                    path,
                    format!(
                        "`{}` is {n} of {blocks} blocks; the trunk needs at least one",
                        key("nextn_predict_layers")
                    ),
                ));
            }
        };
        let intermediate_size = md.usize(&key("feed_forward_length"))?;
        let experts = match md.opt_usize(&key("expert_count"))? {
            None if family.moe => {
                return Err(config_error(
                    path,
                    format!("metadata `{}` is missing", key("expert_count")),
                ));
            }
            None => None,
            Some(count) => {
                let keys = [
                    key("expert_count"),
                    key("expert_used_count"),
                    key("expert_feed_forward_length"),
                ];
                let size = md.opt_usize(&keys[2])?.unwrap_or(intermediate_size);
                let used = md.usize(&keys[1])?;
                let experts =
                    Experts::checked(count, used, size, [&keys[0], &keys[1], &keys[2]], path)?;
                let shared_key = key("expert_shared_feed_forward_length");
                Some(experts.with_shared(md.opt_usize(&shared_key)?, &shared_key, path)?)
            }
        };
        // One count for every layer, or one per layer (Gemma 4's global layers have more).
        let kv_heads_key = key("attention.head_count_kv");
        let kv_heads = md.per_layer(&kv_heads_key, num_layers, |v| md.count(&kv_heads_key, v))?;
        let window_key = key("attention.sliding_window");
        let windowed = match family.window {
            Window::None => None,
            Window::Required { period } | Window::Alternating { period } => {
                Some((md.usize(&window_key)?, period))
            }
            // The pattern below says which layers; no period.
            Window::Listed => Some((md.usize(&window_key)?, 0)),
            Window::Optional { period } => md.opt_usize(&window_key)?.map(|w| (w, period)),
        };
        let pattern_key = key("attention.sliding_window_pattern");
        let pattern = match family.window {
            Window::Listed => Some(md.listed(&pattern_key, num_layers, |v| {
                v.to_bool().map_err(|e| md.wrong(&pattern_key, e))
            })?),
            _ => None,
        };
        if windowed.is_some_and(|(w, _)| w == 0) {
            return Err(config_error(
                path,
                format!(
                    "`{window_key}` is 0; {arch_name} needs a window of at least one position (512 and 1024 are usual)"
                ),
            ));
        }
        let mut layers = layer_plan(
            num_layers,
            windowed,
            |i| match &pattern {
                Some(pattern) => pattern[i],
                None => windowed.is_some_and(|(_, p)| (i + 1) % p != 0),
            },
            |i| family.no_rope_period.is_none_or(|p| (i + 1) % p != 0),
            (head_dim, num_heads),
        );
        let delta_net = match family.recurrent {
            Some(period) => {
                let interval_key = key("full_attention_interval");
                let period = md.opt_usize(&interval_key)?.unwrap_or(period);
                if period == 0 {
                    return Err(config_error(
                        path,
                        format!(
                            "`{interval_key}` is 0; every n-th layer is full attention, n >= 1 (4 is usual)"
                        ),
                    ));
                }
                for (i, plan) in layers.iter_mut().enumerate() {
                    plan.recurrent = (i + 1) % period != 0;
                }
                Some(DeltaNetShape::from_gguf(&md, &key)?)
            }
            None => None,
        };
        let local_head_dim = md
            .opt_usize(&key("attention.key_length_swa"))?
            .unwrap_or(head_dim);
        for (plan, kv) in layers.iter_mut().zip(&kv_heads) {
            plan.kv_heads = kv.unwrap_or(num_heads);
            if plan.window.is_some() {
                plan.head_dim = local_head_dim;
            }
        }
        let shared_key = key("attention.shared_kv_layers");
        if let Some(shared) = md.opt_usize(&shared_key)?.filter(|&n| n > 0) {
            share_kv(&mut layers, shared, &shared_key, path)?;
        }
        // The global layers' count stands for the model's where the layers differ.
        let num_kv_heads = layers
            .iter()
            .find(|l| l.window.is_none())
            .or(layers.first())
            .map_or(num_heads, |l| l.kv_heads);
        let rope_theta = md.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        let config = Self {
            architecture,
            hidden_size,
            intermediate_size,
            num_layers,
            experts,
            delta_net,
            num_heads,
            num_kv_heads,
            head_dim,
            vocab_size,
            context_length,
            rms_norm_eps: md.f32(&key("attention.layer_norm_rms_epsilon"))? as f64,
            rope_theta,
            rope_layout: family.gguf_rope,
            rope_dims,
            // llama.cpp's YaRN correction: `m` is the file's log multiplier where it has one.
            rope_attn_factor: md.opt_f32(&key("rope.scaling.attn_factor"))?.unwrap_or(1.0)
                * match &rope_scaling {
                    Some(RopeScaling::Yarn { factor, .. }) => {
                        let stretch = f64::from(*factor);
                        match md.opt_f32(&key("rope.scaling.yarn_log_multiplier"))? {
                            Some(m) if m != 0.0 => {
                                yarn_mscale(stretch, 1.0) / yarn_mscale(stretch, f64::from(m))
                            }
                            _ => yarn_mscale(stretch, 1.0),
                        }
                    }
                    _ => 1.0,
                } as f32,
            rope_scaling,
            attn_temperature: match md.opt_f32(&key("attention.temperature_scale"))? {
                Some(beta) if beta != 0.0 => Some(AttnTemperature {
                    beta,
                    floor: original_or_trained,
                }),
                _ => None,
            },
            rope_original_context,
            rope_theta_local: match (windowed, family.window) {
                (None, _) | (_, Window::None | Window::Alternating { .. }) => None,
                (Some(_), Window::Required { .. } | Window::Listed) => {
                    Some(md.opt_f32(&key("rope.freq_base_swa"))?.unwrap_or(10_000.0))
                }
                (Some(_), Window::Optional { .. }) => Some(rope_theta),
            },
            rope_dims_local: md
                .opt_usize(&key("rope.dimension_count_swa"))?
                .unwrap_or(rope_dims),
            per_layer_input: md
                .opt_usize(&key("embedding_length_per_layer_input"))?
                .filter(|&n| n > 0),
            final_logit_softcap: md.opt_f32(&key("final_logit_softcapping"))?,
            attention_scale: match md.opt_f32(&key("attention.scale"))? {
                Some(scale) => scale,
                None => {
                    gguf_attention_scale(architecture, num_layers, hidden_size, num_heads, head_dim)
                }
            },
            embedding_scale: match family.scaled_embeddings {
                true => Some((hidden_size as f32).sqrt()),
                false => md.opt_f32(&key("embedding_scale"))?,
            },
            residual_scale: md.opt_f32(&key("residual_scale"))?,
            logit_divisor: md.opt_f32(&key("logit_scale"))?,
            layers,
            tie_word_embeddings: !content.tensor_infos.contains_key("output.weight"),
            bos_token_id: None,
            eos_token_ids: Vec::new(),
            generation: GenerationDefaults::from_gguf(content, path)?,
            warnings,
        };
        config.check(path, Some(&arch_name))?;
        Ok(config)
    }

    /// Reads `config.json` and, when present, `generation_config.json` from a model directory.
    pub(crate) fn from_hf_dir(dir: &Path) -> Result<Self, ModelError> {
        let config_path = dir.join("config.json");
        let hf: HfConfig = read_json(&config_path)?;
        let generation_path = dir.join("generation_config.json");
        let generation: HfGenerationConfig = if generation_path.is_file() {
            read_json(&generation_path)?
        } else {
            HfGenerationConfig::default()
        };
        Self::from_hf(hf, generation, &config_path)
    }

    fn from_hf(
        hf: HfConfig,
        generation: HfGenerationConfig,
        path: &Path,
    ) -> Result<Self, ModelError> {
        let architecture = Architecture::from_hf(&hf.model_type).ok_or_else(|| {
            ModelError::UnsupportedArchitecture {
                name: hf.model_type.clone(),
                supported: supported_hf(),
            }
        })?;
        let family = architecture.family();
        let head_dim = match hf.head_dim {
            Some(d) => d,
            None => div_exact(hf.hidden_size, hf.num_attention_heads, path)?,
        };
        let sliding_window = hf
            .sliding_window
            .filter(|_| hf.use_sliding_window != Some(false));
        let period = match family.window {
            Window::None => None,
            Window::Required { period } | Window::Alternating { period } => Some(period),
            // `layer_types` lists the windowed layers.
            Window::Listed => Some(0),
            Window::Optional { period } => sliding_window.map(|_| period),
        };
        let (context_length, windowed, sliding) = match period {
            // The window is a layer's: the context stays the trained one.
            Some(period) => {
                let window = sliding_window.ok_or_else(|| {
                    config_error(
                        path,
                        format!("`sliding_window` is missing; {} needs it", hf.model_type),
                    )
                })?;
                if window == 0 {
                    return Err(config_error(
                        path,
                        format!(
                            "`sliding_window` is 0; {} needs a window of at least one position",
                            hf.model_type
                        ),
                    ));
                }
                let sliding = hf_sliding_layers(&hf, period, path)?;
                (hf.max_position_embeddings, Some((window, period)), sliding)
            }
            // Mistral's window only limits how far a sequence may go.
            None => (
                sliding_window.map_or(hf.max_position_embeddings, |w| {
                    w.min(hf.max_position_embeddings)
                }),
                None,
                Vec::new(),
            ),
        };
        let rotated = hf_rotated_layers(&hf, family.no_rope_period, path)?;
        let (delta_net, recurrent) = match family.recurrent {
            Some(period) => {
                let (shape, layers) = hf_delta_net(&hf, period, path)?;
                (Some(shape), layers)
            }
            None => (None, Vec::new()),
        };
        let intermediate_size = match (hf.intermediate_size, hf.moe_intermediate_size) {
            (Some(size), _) => size,
            // Experts in every layer and no dense feed-forward (Qwen3.5 MoE): an expert's size.
            (None, Some(size)) if family.moe => size,
            (None, _) => {
                return Err(config_error(
                    path,
                    format!("`intermediate_size` is missing; {} needs it", hf.model_type),
                ));
            }
        };
        let experts = match (
            hf.num_experts.or(hf.num_local_experts),
            hf.num_experts_per_tok,
        ) {
            (None, _) if family.moe => {
                return Err(config_error(path, "`num_experts` is missing".to_owned()));
            }
            (None, _) => None,
            (Some(count), used) => Some(
                Experts::checked(
                    count,
                    used.unwrap_or(0),
                    hf.moe_intermediate_size.unwrap_or(intermediate_size),
                    [
                        "num_experts",
                        "num_experts_per_tok",
                        "moe_intermediate_size",
                    ],
                    path,
                )?
                .with_shared(
                    hf.shared_expert_intermediate_size,
                    "shared_expert_intermediate_size",
                    path,
                )?,
            ),
        };
        if hf.norm_topk_prob == Some(false) {
            return Err(config_error(
                path,
                "`norm_topk_prob` is false; samplab renormalises the chosen experts' weights, as llama.cpp does".to_owned(),
            ));
        }
        if let Some(activation) = &hf.hidden_activation
            && family.activation == crate::model::kernels::fused::Activation::GeluTanh
            && !matches!(activation.as_str(), "gelu_pytorch_tanh" | "gelu_new")
        {
            return Err(config_error(
                path,
                format!(
                    "hidden_activation `{activation}` is not supported for {} (gelu_pytorch_tanh is)",
                    hf.model_type
                ),
            ));
        }
        if let Some(limit) = hf.swiglu_limit
            && family.activation == crate::model::kernels::fused::Activation::SwigluOai
            && limit != 7.0
        {
            return Err(config_error(
                path,
                format!(
                    "swiglu_limit {limit} is not supported for {}: samplab clamps at 7.0, as \
                     llama.cpp does",
                    hf.model_type
                ),
            ));
        }
        // transformers 5 writes `rope_parameters` (the base inside) where 4 wrote `rope_scaling`.
        let rope_scaling_value = hf.rope_scaling.as_ref().or(hf.rope_parameters.as_ref());
        let rope_theta = hf
            .rope_theta
            .or_else(|| {
                let theta = hf.rope_parameters.as_ref()?.get("rope_theta")?.as_f64()?;
                Some(theta as f32)
            })
            .unwrap_or(10_000.0);
        // Likewise the rotated share of each head (Qwen3.5's checkpoints keep it there).
        let partial_rotary_factor = hf.partial_rotary_factor.or_else(|| {
            hf.rope_parameters
                .as_ref()?
                .get("partial_rotary_factor")?
                .as_f64()
        });
        let rope_dims = match partial_rotary_factor {
            Some(f) if !(f > 0.0 && f <= 1.0) => {
                return Err(config_error(
                    path,
                    format!("`partial_rotary_factor` {f} is not in (0, 1]; 1 rotates whole heads"),
                ));
            }
            // As convert rounds it for GGUF.
            Some(f) => (f * head_dim as f64) as usize,
            None => head_dim,
        };
        let (rope_scaling, rope_attn_factor) = match rope_scaling_value {
            Some(v) => hf_rope_scaling(v, &hf, context_length, path)?,
            None => (None, 1.0),
        };
        let attn_temperature = match rope_scaling_value
            .and_then(|v| v.get("llama_4_scaling_beta"))
            .and_then(|b| b.as_f64())
        {
            Some(beta) if beta != 0.0 => {
                let floor = rope_scaling_value
                    .and_then(|v| v.get("original_max_position_embeddings"))
                    .and_then(|n| n.as_u64())
                    .ok_or_else(|| {
                        config_error(
                            path,
                            "llama_4_scaling_beta needs rope original_max_position_embeddings"
                                .to_owned(),
                        )
                    })?;
                Some(AttnTemperature {
                    beta: beta as f32,
                    floor: floor as usize,
                })
            }
            _ => None,
        };
        let mut eos_token_ids = generation
            .eos_token_id
            .map(Ids::into_vec)
            .unwrap_or_default();
        for id in hf.eos_token_id.map(Ids::into_vec).unwrap_or_default() {
            if !eos_token_ids.contains(&id) {
                eos_token_ids.push(id);
            }
        }
        let mut config = Self {
            architecture,
            hidden_size: hf.hidden_size,
            intermediate_size,
            num_layers: hf.num_hidden_layers,
            experts,
            delta_net,
            layers: layer_plan(
                hf.num_hidden_layers,
                windowed,
                |i| sliding.get(i).copied().unwrap_or(false),
                |i| rotated.get(i).copied().unwrap_or(true),
                (
                    head_dim,
                    hf.num_key_value_heads.unwrap_or(hf.num_attention_heads),
                ),
            ),
            rope_dims_local: rope_dims,
            per_layer_input: None,
            final_logit_softcap: None,
            rope_theta_local: match family.window {
                Window::Optional { .. } => windowed.map(|_| rope_theta),
                Window::Alternating { .. } => None,
                _ => windowed.map(|_| hf.rope_local_base_freq.unwrap_or(10_000.0)),
            },
            attention_scale: match hf.attention_multiplier {
                Some(scale) => scale,
                None => 1.0 / hf.query_pre_attn_scalar.unwrap_or(head_dim as f64).sqrt() as f32,
            },
            embedding_scale: match family.scaled_embeddings {
                true => Some((hf.hidden_size as f32).sqrt()),
                false => hf.embedding_multiplier,
            },
            residual_scale: hf.residual_multiplier,
            logit_divisor: hf.logits_scaling,
            num_heads: hf.num_attention_heads,
            num_kv_heads: hf.num_key_value_heads.unwrap_or(hf.num_attention_heads),
            head_dim,
            vocab_size: hf.vocab_size,
            context_length,
            rms_norm_eps: hf.rms_norm_eps,
            rope_theta,
            rope_layout: RopeLayout::HalfSplit,
            rope_scaling,
            rope_dims,
            rope_attn_factor,
            attn_temperature,
            rope_original_context: hf.original_max_position_embeddings,
            tie_word_embeddings: hf.tie_word_embeddings,
            bos_token_id: generation.bos_token_id.or(hf.bos_token_id),
            eos_token_ids,
            generation: GenerationDefaults {
                do_sample: generation.do_sample,
                temperature: generation.temperature,
                top_k: generation.top_k,
                top_p: generation.top_p,
                min_p: generation.min_p,
                repetition_penalty: generation.repetition_penalty,
                max_new_tokens: generation.max_new_tokens,
            },
            warnings: Vec::new(),
        };
        for (plan, &recurrent) in config.layers.iter_mut().zip(&recurrent) {
            plan.recurrent = recurrent;
        }
        config.check(path, None)?;
        Ok(config)
    }

    /// Query heads per key/value head (grouped-query attention).
    pub fn heads_per_kv(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }

    /// `arch`: the GGUF architecture whose keys name the fields, `None` for config.json.
    fn check(&self, path: &Path, arch: Option<&str>) -> Result<(), ModelError> {
        // (what, GGUF key after `<arch>.`, config.json key, value, most any model has): the
        // bounds keep every product of sizes far inside 64 bits, and a header's 2^61 layers
        // out of an allocation.
        let sizes = [
            (
                "hidden size",
                "embedding_length",
                "hidden_size",
                self.hidden_size,
                1 << 20,
            ),
            (
                "feed-forward size",
                "feed_forward_length",
                "intermediate_size",
                self.intermediate_size,
                1 << 22,
            ),
            (
                "layer count",
                "block_count",
                "num_hidden_layers",
                self.num_layers,
                1 << 16,
            ),
            (
                "head count",
                "attention.head_count",
                "num_attention_heads",
                self.num_heads,
                1 << 16,
            ),
            (
                "kv head count",
                "attention.head_count_kv",
                "num_key_value_heads",
                self.num_kv_heads,
                1 << 16,
            ),
            (
                "head dim",
                "attention.key_length",
                "head_dim",
                self.head_dim,
                1 << 16,
            ),
            (
                "vocabulary size",
                "vocab_size",
                "vocab_size",
                self.vocab_size,
                1 << 24,
            ),
            (
                "context length",
                "context_length",
                "max_position_embeddings",
                self.context_length,
                1 << 40,
            ),
        ];
        for (what, gguf_key, hf_key, value, most) in sizes {
            let key = match arch {
                Some(arch) => format!("{arch}.{gguf_key}"),
                None => hf_key.to_owned(),
            };
            if value == 0 {
                return Err(config_error(path, format!("{what} is 0 (`{key}`)")));
            }
            if value > most {
                return Err(config_error(
                    path,
                    format!("{what} {value} (`{key}`) is above {most}, more than any model has"),
                ));
            }
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return Err(config_error(
                path,
                format!("head dim {} is not a positive even number", self.head_dim),
            ));
        }
        // RoPE's frequencies are theta^(-2i/d): a theta at or below 1 (or not finite) makes
        // them all 1 or degenerate, which no trained model has.
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(config_error(
                path,
                format!(
                    "rope theta {} is not a finite number above 1 (10000, 500000 and 1000000 are usual)",
                    self.rope_theta
                ),
            ));
        }
        if let Some(theta) = self.rope_theta_local
            && !(theta.is_finite() && theta > 1.0)
        {
            return Err(config_error(
                path,
                format!("local rope theta {theta} is not a finite number above 1 (10000 is usual)"),
            ));
        }
        let scalars = [
            ("embedding scale", self.embedding_scale),
            ("residual scale", self.residual_scale),
            ("logit scale", self.logit_divisor),
        ];
        if let Some((what, Some(x))) = scalars
            .into_iter()
            .find(|(_, x)| x.is_some_and(|x| !(x.is_finite() && x > 0.0)))
        {
            return Err(config_error(
                path,
                format!("{what} {x} is not a finite number above 0"),
            ));
        }
        if !(self.attention_scale.is_finite() && self.attention_scale > 0.0) {
            return Err(config_error(
                path,
                format!(
                    "attention scale {} is not a finite number above 0 (query_pre_attn_scalar \
                     must be above 0; the head size is usual)",
                    self.attention_scale
                ),
            ));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps >= 0.0) {
            return Err(config_error(
                path,
                format!(
                    "rms norm epsilon {} is not a small positive number (such as 1e-5)",
                    self.rms_norm_eps
                ),
            ));
        }
        if self.rope_dims == 0
            || self.rope_dims > self.head_dim
            || !self.rope_dims.is_multiple_of(2)
        {
            return Err(config_error(
                path,
                format!(
                    "RoPE rotates {} dimensions of a {}-dimension head; it must rotate an even \
                     number from 2 up to the head size",
                    self.rope_dims, self.head_dim
                ),
            ));
        }
        if !(self.rope_attn_factor.is_finite() && self.rope_attn_factor > 0.0) {
            return Err(config_error(
                path,
                format!(
                    "RoPE attention factor {} is not a finite number above 0 (1 is usual)",
                    self.rope_attn_factor
                ),
            ));
        }
        if let Some(scaling) = &self.rope_scaling {
            check_rope_scaling(scaling, self.rope_dims, path)?;
        }
        if let Some(t) = self.attn_temperature
            && (t.floor == 0 || !t.beta.is_finite())
        {
            return Err(config_error(
                path,
                format!(
                    "attention temperature {} over {} positions: it needs a finite scale and \
                     the original context (above 0) it counts positions in",
                    t.beta, t.floor
                ),
            ));
        }
        let kv_key = match arch {
            Some(arch) => format!("{arch}.attention.head_count_kv"),
            None => "num_key_value_heads".to_owned(),
        };
        for (i, layer) in self.layers.iter().enumerate() {
            if layer.kv_heads == 0 || !self.num_heads.is_multiple_of(layer.kv_heads) {
                return Err(config_error(
                    path,
                    format!(
                        "layer {i}: {} heads are not a multiple of {} kv heads (`{kv_key}`)",
                        self.num_heads, layer.kv_heads
                    ),
                ));
            }
            if layer.head_dim == 0 || layer.head_dim > 1 << 16 || !layer.head_dim.is_multiple_of(2)
            {
                return Err(config_error(
                    path,
                    format!(
                        "layer {i}: head dim {} is not a positive even number",
                        layer.head_dim
                    ),
                ));
            }
            let dims = if layer.local_rope {
                self.rope_dims_local
            } else {
                self.rope_dims
            };
            if layer.rope && (dims == 0 || dims > layer.head_dim || !dims.is_multiple_of(2)) {
                return Err(config_error(
                    path,
                    format!(
                        "layer {i}: RoPE rotates {dims} dimensions of a {}-dimension head; it \
                         must rotate an even number from 2 up to the head size",
                        layer.head_dim
                    ),
                ));
            }
        }
        if let Some(cap) = self.final_logit_softcap
            && !(cap.is_finite() && cap > 0.0)
        {
            return Err(config_error(
                path,
                format!("final logit softcap {cap} is not a finite number above 0 (30 is usual)"),
            ));
        }
        if self.per_layer_input.is_some_and(|n| n > 1 << 16) {
            return Err(config_error(
                path,
                format!(
                    "per-layer embeddings of {} are more than any model has",
                    self.per_layer_input.unwrap_or(0)
                ),
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(config_error(
                path,
                format!(
                    "{} heads are not a multiple of {} kv heads",
                    self.num_heads, self.num_kv_heads
                ),
            ));
        }
        Ok(())
    }
}

/// Each layer's attention: windowed ones (`is_windowed(i)`) see `window` positions and
/// rotate with the local base.
fn layer_plan(
    layers: usize,
    windowed: Option<(usize, usize)>,
    is_windowed: impl Fn(usize) -> bool,
    is_rotated: impl Fn(usize) -> bool,
    (head_dim, kv_heads): (usize, usize),
) -> Vec<LayerAttention> {
    (0..layers.min(1 << 16))
        .map(|i| {
            let window = windowed.filter(|_| is_windowed(i)).map(|(w, _)| w);
            LayerAttention {
                window,
                local_rope: window.is_some(),
                rope: is_rotated(i),
                recurrent: false,
                head_dim,
                kv_heads,
                kv_from: None,
            }
        })
        .collect()
}

/// The last `shared` layers read the keys and values of an earlier layer of their kind, as
/// llama.cpp pairs them: the last layer that keeps its own is global, the one before windowed.
fn share_kv(
    layers: &mut [LayerAttention],
    shared: usize,
    key: &str,
    path: &Path,
) -> Result<(), ModelError> {
    let first = layers.len().saturating_sub(shared);
    if first < 2 {
        return Err(config_error(
            path,
            format!(
                "`{key}` is {shared}, but at least two of the {} layers must keep their own keys",
                layers.len()
            ),
        ));
    }
    for i in first..layers.len() {
        let source = first - if layers[i].window.is_some() { 2 } else { 1 };
        let (from, to) = (&layers[source], &layers[i]);
        if from.window != to.window || from.head_dim != to.head_dim || from.kv_heads != to.kv_heads
        {
            return Err(config_error(
                path,
                format!(
                    "`{key}` is {shared}: layer {i} would reuse the keys of layer {source}, \
                     whose attention differs (the last two layers that keep their own must be \
                     a windowed one, then a global one)"
                ),
            ));
        }
        layers[i].kv_from = Some(source);
    }
    Ok(())
}

/// Which layers a config.json rotates: SmolLM3's `no_rope_layers` (1: rotated, 0: not), else
/// all but every `no_rope_layer_interval`-th (the family's period when it is silent).
fn hf_rotated_layers(
    hf: &HfConfig,
    period: Option<usize>,
    path: &Path,
) -> Result<Vec<bool>, ModelError> {
    let Some(period) = period else {
        return Ok(Vec::new());
    };
    if let Some(flags) = &hf.no_rope_layers {
        if flags.len() != hf.num_hidden_layers {
            return Err(config_error(
                path,
                format!(
                    "`no_rope_layers` lists {} layers for {} hidden layers; write one 0 or 1 per layer",
                    flags.len(),
                    hf.num_hidden_layers
                ),
            ));
        }
        return Ok(flags.iter().map(|&f| f != 0).collect());
    }
    let period = hf.no_rope_layer_interval.unwrap_or(period).max(1);
    Ok((0..hf.num_hidden_layers.min(1 << 16))
        .map(|i| (i + 1) % period != 0)
        .collect())
}

/// Which layers a config.json windows: its `layer_types` list, else every layer but each
/// `sliding_window_pattern`-th (the family's period when it is silent).
fn hf_sliding_layers(hf: &HfConfig, period: usize, path: &Path) -> Result<Vec<bool>, ModelError> {
    if let Some(layers) = hf_layer_types(hf, path, ["sliding_attention", "full_attention"])? {
        return Ok(layers);
    }
    let period = hf.sliding_window_pattern.unwrap_or(period);
    if period == 0 {
        return Err(config_error(
            path,
            "`sliding_window_pattern` is 0; 6 (five local layers, then a global one) is usual"
                .to_owned(),
        ));
    }
    Ok((0..hf.num_hidden_layers.min(1 << 16))
        .map(|i| (i + 1) % period != 0)
        .collect())
}

/// Per layer, whether config.json's `layer_types` names it the first of `kinds` (rather than
/// the second); `None` where it lists no layer types.
fn hf_layer_types(
    hf: &HfConfig,
    path: &Path,
    kinds: [&str; 2],
) -> Result<Option<Vec<bool>>, ModelError> {
    let Some(types) = &hf.layer_types else {
        return Ok(None);
    };
    if types.len() != hf.num_hidden_layers {
        return Err(config_error(
            path,
            format!(
                "`layer_types` lists {} layers for {} hidden layers; write one per layer",
                types.len(),
                hf.num_hidden_layers
            ),
        ));
    }
    let [first, second] = kinds;
    types
        .iter()
        .map(|t| match t.as_str() {
            t if t == first => Ok(true),
            t if t == second => Ok(false),
            other => Err(config_error(
                path,
                format!("`layer_types` has `{other}`; {first} or {second} are"),
            )),
        })
        .collect::<Result<_, _>>()
        .map(Some)
}

/// A config.json's Gated DeltaNet shape (its value heads grouped by key head) and which layers
/// recur: `layer_types`' `linear_attention` ones, else all but every `full_attention_interval`-th.
fn hf_delta_net(
    hf: &HfConfig,
    period: usize,
    path: &Path,
) -> Result<(DeltaNetShape, Vec<bool>), ModelError> {
    let need = |value: Option<usize>, key: &str| {
        value.ok_or_else(|| {
            config_error(
                path,
                format!("`{key}` is missing; {} needs it", hf.model_type),
            )
        })
    };
    let head_dim = need(hf.linear_key_head_dim, "linear_key_head_dim")?;
    let value_dim = need(hf.linear_value_head_dim, "linear_value_head_dim")?;
    if value_dim != head_dim {
        return Err(config_error(
            path,
            format!(
                "`linear_value_head_dim` is {value_dim} and `linear_key_head_dim` {head_dim}; \
                 Gated DeltaNet needs them equal"
            ),
        ));
    }
    let shape = DeltaNetShape {
        conv_kernel: need(hf.linear_conv_kernel_dim, "linear_conv_kernel_dim")?,
        k_heads: need(hf.linear_num_key_heads, "linear_num_key_heads")?,
        v_heads: need(hf.linear_num_value_heads, "linear_num_value_heads")?,
        head_dim,
        grouped: true,
    };
    shape.check(
        path,
        [
            "linear_conv_kernel_dim",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
        ],
    )?;
    let layers = match hf_layer_types(hf, path, ["linear_attention", "full_attention"])? {
        Some(layers) => layers,
        None => {
            let period = hf.full_attention_interval.unwrap_or(period);
            if period == 0 {
                return Err(config_error(
                    path,
                    "`full_attention_interval` is 0; every n-th layer is full attention, n >= 1 (4 is usual)".to_owned(),
                ));
            }
            (0..hf.num_hidden_layers.min(1 << 16))
                .map(|i| (i + 1) % period != 0)
                .collect()
        }
    };
    Ok((shape, layers))
}

/// The score scale llama.cpp gives a GGUF model: Gemma 3 27B (62 layers) scales by
/// `hidden / heads` (its `query_pre_attn_scalar`), every other model by the head size.
fn gguf_attention_scale(
    architecture: Architecture,
    layers: usize,
    hidden: usize,
    heads: usize,
    head_dim: usize,
) -> f32 {
    let scalar = if architecture == Architecture::Gemma3 && layers == 62 && heads > 0 {
        hidden / heads
    } else if architecture == Architecture::Gemma4 {
        // Its q and k are RMS-normed: scores are not scaled.
        1
    } else {
        head_dim
    };
    1.0 / (scalar as f32).sqrt()
}

#[derive(Deserialize)]
struct HfConfig {
    model_type: String,
    hidden_size: usize,
    /// The dense feed-forward's size; Qwen3.5 MoE's configs, all experts, give none.
    intermediate_size: Option<usize>,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    vocab_size: usize,
    max_position_embeddings: usize,
    rms_norm_eps: f64,
    rope_theta: Option<f32>,
    rope_scaling: Option<serde_json::Value>,
    rope_parameters: Option<serde_json::Value>,
    /// Phi-4 mini rotates part of each head.
    partial_rotary_factor: Option<f64>,
    /// LongRoPE's trained context before the stretch (Phi-3).
    original_max_position_embeddings: Option<usize>,
    sliding_window: Option<usize>,
    use_sliding_window: Option<bool>,
    /// Gemma 3: every n-th layer is global (older configs).
    sliding_window_pattern: Option<usize>,
    /// Gemma 3: `sliding_attention` or `full_attention` per layer (newer configs).
    layer_types: Option<Vec<String>>,
    rope_local_base_freq: Option<f32>,
    /// Qwen3.5's Gated DeltaNet layers.
    linear_num_key_heads: Option<usize>,
    linear_num_value_heads: Option<usize>,
    linear_key_head_dim: Option<usize>,
    linear_value_head_dim: Option<usize>,
    linear_conv_kernel_dim: Option<usize>,
    full_attention_interval: Option<usize>,
    /// Granite's four scalars.
    embedding_multiplier: Option<f32>,
    residual_multiplier: Option<f32>,
    attention_multiplier: Option<f32>,
    logits_scaling: Option<f32>,
    /// Mixtures of experts: Qwen's names, and Mixtral's `num_local_experts`.
    num_experts: Option<usize>,
    num_local_experts: Option<usize>,
    num_experts_per_tok: Option<usize>,
    moe_intermediate_size: Option<usize>,
    /// Qwen3.5 MoE's shared expert.
    shared_expert_intermediate_size: Option<usize>,
    norm_topk_prob: Option<bool>,
    /// SmolLM3: 1 where a layer is rotated, 0 where not.
    no_rope_layers: Option<Vec<u8>>,
    no_rope_layer_interval: Option<usize>,
    query_pre_attn_scalar: Option<f64>,
    hidden_activation: Option<String>,
    /// gpt-oss: where its SwiGLU clamps.
    swiglu_limit: Option<f64>,
    bos_token_id: Option<u32>,
    eos_token_id: Option<Ids>,
    #[serde(default)]
    tie_word_embeddings: bool,
}

#[derive(Deserialize, Default)]
struct HfGenerationConfig {
    bos_token_id: Option<u32>,
    eos_token_id: Option<Ids>,
    do_sample: Option<bool>,
    temperature: Option<f64>,
    top_k: Option<i64>,
    top_p: Option<f64>,
    min_p: Option<f64>,
    repetition_penalty: Option<f64>,
    max_new_tokens: Option<u64>,
}

/// `eos_token_id` is a single id or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Ids {
    One(u32),
    Many(Vec<u32>),
}

impl Ids {
    fn into_vec(self) -> Vec<u32> {
        match self {
            Ids::One(id) => vec![id],
            Ids::Many(ids) => ids,
        }
    }
}

/// A stretch factor must be a finite number above 0, llama3's frequency bounds ordered, and
/// per-frequency factors one per rotated pair.
fn check_rope_scaling(
    scaling: &RopeScaling,
    rope_dims: usize,
    path: &Path,
) -> Result<(), ModelError> {
    if let RopeScaling::FreqFactors(factors) = scaling {
        if factors.len() != rope_dims / 2 {
            return Err(config_error(
                path,
                format!(
                    "RoPE lists {} frequency factors for {rope_dims} rotated dimensions; it needs one per pair ({})",
                    factors.len(),
                    rope_dims / 2
                ),
            ));
        }
        if let Some(f) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(config_error(
                path,
                format!("RoPE frequency factor {f} is not a finite number above 0"),
            ));
        }
    }
    let factors: &[(&str, f32)] = match scaling {
        RopeScaling::Linear { factor } => &[("factor", *factor)],
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            ..
        } => &[
            ("factor", *factor),
            ("low_freq_factor", *low_freq_factor),
            ("high_freq_factor", *high_freq_factor),
        ],
        RopeScaling::FreqFactors(_) => &[],
        RopeScaling::Yarn {
            factor,
            beta_fast,
            beta_slow,
            ..
        } => &[
            ("factor", *factor),
            ("beta_fast", *beta_fast),
            ("beta_slow", *beta_slow),
        ],
    };
    if let RopeScaling::Yarn {
        original_context: 0,
        ..
    } = scaling
    {
        return Err(config_error(
            path,
            "YaRN's original context is 0; it needs the context the model was trained at"
                .to_owned(),
        ));
    }
    if let Some((name, f)) = factors.iter().find(|(_, f)| !(f.is_finite() && *f > 0.0)) {
        return Err(config_error(
            path,
            format!("RoPE scaling {name} {f} is not a finite number above 0"),
        ));
    }
    if let RopeScaling::Llama3 {
        low_freq_factor,
        high_freq_factor,
        original_max_position_embeddings,
        ..
    } = scaling
        && (high_freq_factor <= low_freq_factor || *original_max_position_embeddings == 0)
    {
        return Err(config_error(
            path,
            format!(
                "llama3 RoPE scaling needs high_freq_factor above low_freq_factor ({high_freq_factor} \
                 <= {low_freq_factor}?) and original_max_position_embeddings above 0"
            ),
        ));
    }
    Ok(())
}

/// A config.json's RoPE scaling, and the factor cos and sin are multiplied by. LongRoPE's
/// long factors serve a context beyond the original one, its short factors any other, as
/// llama.cpp chooses them for its context (samplab's is the whole trained one).
fn hf_rope_scaling(
    value: &serde_json::Value,
    hf: &HfConfig,
    context_length: usize,
    path: &Path,
) -> Result<(Option<RopeScaling>, f32), ModelError> {
    if value.is_null() {
        return Ok((None, 1.0));
    }
    if !value.is_object() {
        return Err(config_error(
            path,
            format!(
                "rope_scaling is {value}; write null or an object such as \
                 {{\"rope_type\": \"linear\", \"factor\": 2.0}}"
            ),
        ));
    }
    let kind = value
        .get("rope_type")
        .or_else(|| value.get("type"))
        .and_then(|v| v.as_str())
        .unwrap_or("default");
    let number = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_f64())
            .ok_or_else(|| config_error(path, format!("rope_scaling.{key} is missing")))
    };
    let factors = |key: &str| -> Result<Vec<f32>, ModelError> {
        let list = value.get(key).and_then(|v| v.as_array()).ok_or_else(|| {
            config_error(
                path,
                format!("rope_scaling.{key} is missing (a list of numbers)"),
            )
        })?;
        list.iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| config_error(path, format!("rope_scaling.{key} holds a non-number")))
    };
    match kind {
        "default" => Ok((None, 1.0)),
        "linear" => Ok((
            Some(RopeScaling::Linear {
                factor: number("factor")? as f32,
            }),
            1.0,
        )),
        "llama3" => Ok((
            Some(RopeScaling::Llama3 {
                factor: number("factor")? as f32,
                low_freq_factor: number("low_freq_factor")? as f32,
                high_freq_factor: number("high_freq_factor")? as f32,
                original_max_position_embeddings: number("original_max_position_embeddings")?
                    as usize,
            }),
            1.0,
        )),
        "longrope" | "su" => {
            let original = match hf.original_max_position_embeddings {
                Some(n) => n,
                None => number("original_max_position_embeddings")? as usize,
            };
            if original == 0 {
                return Err(config_error(
                    path,
                    "original_max_position_embeddings is 0; LongRoPE needs the context it was trained at".to_owned(),
                ));
            }
            let (long, short) = (factors("long_factor")?, factors("short_factor")?);
            let stretch = hf.max_position_embeddings as f64 / original as f64;
            let attn_factor = match value.get("attention_factor").and_then(|v| v.as_f64()) {
                Some(f) => f,
                None if stretch > 1.0 => (1.0 + stretch.ln() / (original as f64).ln()).sqrt(),
                None => 1.0,
            };
            let chosen = if context_length > original {
                long
            } else {
                short
            };
            Ok((Some(RopeScaling::FreqFactors(chosen)), attn_factor as f32))
        }
        "yarn" => {
            let original = number("original_max_position_embeddings")? as usize;
            let factor = match value.get("factor").and_then(|v| v.as_f64()) {
                Some(f) => f,
                None if original > 0 => hf.max_position_embeddings as f64 / original as f64,
                None => 0.0,
            };
            let get = |key: &str| {
                value
                    .get(key)
                    .and_then(|v| v.as_f64())
                    .filter(|x| *x != 0.0)
            };
            let attn_factor = match (
                get("attention_factor"),
                get("mscale"),
                get("mscale_all_dim"),
            ) {
                (Some(f), _, _) => f,
                (None, Some(m), Some(all)) => yarn_mscale(factor, m) / yarn_mscale(factor, all),
                _ => yarn_mscale(factor, 1.0),
            };
            Ok((
                Some(RopeScaling::Yarn {
                    factor: factor as f32,
                    original_context: original,
                    beta_fast: get("beta_fast").unwrap_or(32.0) as f32,
                    beta_slow: get("beta_slow").unwrap_or(1.0) as f32,
                }),
                attn_factor as f32,
            ))
        }
        other => Err(config_error(
            path,
            format!("RoPE scaling `{other}` is not supported (linear, llama3, longrope, yarn are)"),
        )),
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ModelError> {
    let text =
        crate::regular_file::read_to_string(path).map_err(|source| io_error(path, source))?;
    serde_json::from_str(&text).map_err(|e| config_error(path, e.to_string()))
}

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> ModelError {
    if source.kind() == std::io::ErrorKind::NotFound {
        ModelError::NotFound(path.to_owned())
    } else {
        ModelError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

fn config_error(path: &Path, reason: String) -> ModelError {
    ModelError::Config {
        path: path.to_owned(),
        reason,
    }
}

fn div_exact(a: usize, b: usize, path: &Path) -> Result<usize, ModelError> {
    if b == 0 || !a.is_multiple_of(b) {
        return Err(config_error(
            path,
            format!("hidden size {a} is not a multiple of the head count {b}"),
        ));
    }
    Ok(a / b)
}

/// Typed access to GGUF metadata with errors that name the key.
struct Metadata<'a> {
    content: &'a gguf_file::Content,
    path: &'a Path,
}

impl Metadata<'_> {
    fn get(&self, key: &str) -> Option<&gguf_file::Value> {
        self.content.metadata.get(key)
    }

    fn missing(&self, key: &str) -> ModelError {
        config_error(self.path, format!("metadata `{key}` is missing"))
    }

    fn wrong(&self, key: &str, e: candle_core::Error) -> ModelError {
        config_error(self.path, format!("metadata `{key}`: {e}"))
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>, ModelError> {
        self.get(key).map(|v| self.count(key, v)).transpose()
    }

    fn usize(&self, key: &str) -> Result<usize, ModelError> {
        self.opt_usize(key)?.ok_or_else(|| self.missing(key))
    }

    /// `v`, a value of `key` (or an element of its array), as a non-negative integer.
    fn count(&self, key: &str, v: &gguf_file::Value) -> Result<usize, ModelError> {
        // GGUF writers disagree on integer widths; accept any non-negative one.
        let n = match v {
            gguf_file::Value::U8(_)
            | gguf_file::Value::U16(_)
            | gguf_file::Value::U32(_)
            | gguf_file::Value::U64(_) => v.to_u64(),
            gguf_file::Value::I32(n) => Ok(i64::from(*n)).and_then(|n| {
                u64::try_from(n).map_err(|_| candle_core::Error::Msg(format!("{n} < 0")))
            }),
            _ => v.to_i64().and_then(|n| {
                u64::try_from(n).map_err(|_| candle_core::Error::Msg(format!("{n} < 0")))
            }),
        };
        n.map(|n| n as usize).map_err(|e| self.wrong(key, e))
    }

    /// An array of `key` with one element per layer, each read by `read`: an error naming the
    /// key where it is missing, not an array, or of another length.
    fn listed<T>(
        &self,
        key: &str,
        layers: usize,
        read: impl Fn(&gguf_file::Value) -> Result<T, ModelError>,
    ) -> Result<Vec<T>, ModelError> {
        let Some(value) = self.get(key) else {
            return Err(config_error(
                self.path,
                format!("metadata `{key}` is missing: it lists each of the {layers} layers"),
            ));
        };
        let items = value.to_vec().map_err(|e| self.wrong(key, e))?;
        if items.len() != layers {
            return Err(config_error(
                self.path,
                format!(
                    "metadata `{key}` lists {} layers, but the model has {layers} (`block_count`)",
                    items.len()
                ),
            ));
        }
        items.iter().map(read).collect()
    }

    /// `key` as one value for every layer or an array of one per layer; `None`s where absent.
    fn per_layer<T: Clone>(
        &self,
        key: &str,
        layers: usize,
        read: impl Fn(&gguf_file::Value) -> Result<T, ModelError>,
    ) -> Result<Vec<Option<T>>, ModelError> {
        let layers = layers.min(1 << 16);
        match self.get(key) {
            None => Ok(vec![None; layers]),
            Some(gguf_file::Value::Array(_)) => Ok(self
                .listed(key, layers, read)?
                .into_iter()
                .map(Some)
                .collect()),
            Some(value) => Ok(vec![Some(read(value)?); layers]),
        }
    }

    fn opt_f32(&self, key: &str) -> Result<Option<f32>, ModelError> {
        self.get(key)
            .map(|v| match v {
                gguf_file::Value::F64(x) => Ok(*x as f32),
                _ => v.to_f32().map_err(|e| self.wrong(key, e)),
            })
            .transpose()
    }

    fn f32(&self, key: &str) -> Result<f32, ModelError> {
        self.opt_f32(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, ModelError> {
        self.get(key)
            .map(|v| v.to_string().cloned().map_err(|e| self.wrong(key, e)))
            .transpose()
    }

    fn string(&self, key: &str) -> Result<String, ModelError> {
        self.opt_string(key)?.ok_or_else(|| self.missing(key))
    }
}
