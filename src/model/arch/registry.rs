//! The families we run, one row each: the names files give them and how their blocks are
//! assembled. Adding a family that reuses the blocks is one row here (and, where its files
//! say something new, the reading of that in `formats::config`).

use crate::model::kernels::fused::{Activation, RopeLayout};

/// The model families we run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    /// Plain Llama math; a sliding window only limits the usable context.
    Mistral,
    /// Biases on the q/k/v projections.
    Qwen2,
    /// A per-head RMSNorm on q and k before RoPE.
    Qwen3,
    /// Gemma 3: scaled embeddings, norms after attention and feed-forward too, GeGLU, QK-norm,
    /// a sliding window on five layers of six with their own RoPE base.
    Gemma3,
    /// SmolLM3: Llama with no RoPE on every fourth layer.
    SmolLm3,
    /// OLMo 2: norms after attention and the feed-forward only, and q/k normed over the whole
    /// projection.
    Olmo2,
    /// Qwen3's attention with a mixture of experts in place of the feed-forward.
    Qwen3Moe,
    /// Granite: Llama with four scalars (embeddings, residual branches, attention scores and
    /// logits are each scaled).
    Granite,
    /// Granite with a mixture of experts.
    GraniteMoe,
    /// Ministral 3: Llama with YaRN and queries scaled up with their position (Llama 4's
    /// attention temperature).
    Mistral3,
    /// Gemma 4: Gemma 3's blocks with the windowed layers listed, wider heads on the global
    /// ones with proportional RoPE, v normed too, unscaled scores, the last layers reusing
    /// earlier layers' keys, per-layer embeddings (E2B, E4B) and a final logit softcap.
    Gemma4,
    /// Phi-3 and Phi-4: q, k and v in one matrix, gate and up in another, RoPE over part of
    /// each head with LongRoPE's factors.
    Phi3,
    /// Qwen3.5: three layers of four are Gated DeltaNet (a recurrent state, no keys), the
    /// fourth gated attention over part of each head.
    Qwen35,
    /// Qwen3.5's layers with a mixture of experts beside a sigmoid-gated shared expert.
    Qwen35Moe,
    /// gpt-oss: biases on every projection, a learned sink logit per head in attention's
    /// softmax, a window on every other layer, YaRN, and experts with a clamped SwiGLU chosen
    /// by the router's largest logits.
    GptOss,
}

/// Where q and k are RMS-normed before RoPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QkNorm {
    None,
    /// Each head on its own (Qwen3, Gemma 3).
    PerHead,
    /// The whole projection, all heads together (OLMo 2).
    Whole,
}

/// How one family's blocks are assembled from the shared pieces.
#[derive(Debug)]
pub(crate) struct Family {
    pub architecture: Architecture,
    pub name: &'static str,
    /// `general.architecture` values in GGUF.
    pub gguf: &'static [&'static str],
    /// `model_type` values in config.json.
    pub hf: &'static [&'static str],
    /// RoPE's pair layout in GGUF files (convert permutes llama's q and k for adjacent
    /// pairs); config.json models all rotate halves.
    pub gguf_rope: RopeLayout,
    pub qk_norm: QkNorm,
    /// RMSNorm before attention and before the feed-forward (every family but OLMo 2).
    pub pre_norms: bool,
    /// RMSNorm after attention and after the feed-forward, before each residual add.
    pub post_norms: bool,
    pub activation: Activation,
    /// Token embeddings multiplied by `sqrt(hidden_size)`.
    pub scaled_embeddings: bool,
    /// Every layer's feed-forward is a mixture of experts: files must say how many.
    pub moe: bool,
    /// safetensors RMSNorm weights are stored as `w - 1` and applied as `1 + w`; GGUF files
    /// store `1 + w` (convert adds the one).
    pub hf_norm_plus_one: bool,
    /// Which layers see a sliding window, and how those rotate.
    pub window: Window,
    /// Every n-th layer rotates nothing (SmolLM3's 4), where GGUF metadata does not list them.
    pub no_rope_period: Option<usize>,
    /// The feed-forward's gate and up are one matrix, gate's rows first (Phi-3's `ffn_up`,
    /// `gate_up_proj`).
    pub fused_gate_up: bool,
    /// Per-layer names of config.json tensors that differ from llama's.
    pub hf_names: &'static [(Part, &'static str)],
    /// Per-layer names of GGUF tensors that differ from llama.cpp's usual ones.
    pub gguf_names: &'static [(Part, &'static str)],
    /// The q projection yields a gate beside each head's query; attention's output is
    /// multiplied by its sigmoid before `o` (Qwen3.5).
    pub gated_attention: bool,
    /// Gated DeltaNet layers in place of attention: all but every n-th layer, where the
    /// files do not list them (Qwen3.5's 4).
    pub recurrent: Option<usize>,
    /// Each attention head has a learned sink logit (gpt-oss): its share of the softmax goes
    /// to no value.
    pub sinks: bool,
    /// How the router's logits choose and weigh a token's experts.
    pub gating: Gating,
    /// GGUF metadata's YaRN betas are read (llama.cpp reads them for Ministral 3 alone;
    /// every other family rotates with its defaults, 32 and 1, whatever the file says).
    pub gguf_yarn_betas: bool,
    /// How config.json checkpoints fuse a layer's experts into a few tensors, where they may
    /// (else, and always allowed, one tensor per expert).
    pub hf_fused_experts: Option<FusedExperts>,
    /// Values are RMS-normed per head (no weight) before attention (Gemma 4).
    pub v_norm: bool,
    /// A layer with a router runs its experts beside the dense feed-forward, each branch
    /// normed on its own (Gemma 4's 26B-A4B), not in its place.
    pub experts_beside_dense: bool,
}

/// How a mixture of experts turns the router's logits into each token's experts and weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gating {
    /// Softmax over all experts, the most likely taken, their weights renormalised (Qwen3 MoE,
    /// Mixtral).
    SoftmaxThenTopK,
    /// The largest logits taken, then a softmax over those alone (gpt-oss).
    TopKThenSoftmax,
}

/// How a config.json checkpoint lays out a layer's experts fused into `mlp.experts.gate_up_proj`
/// and `mlp.experts.down_proj`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FusedExperts {
    /// As `nn.Linear` weights stacked per expert, gate's rows above up's: `[experts, 2 *
    /// size, hidden]` and `[experts, hidden, size]` (transformers 5's MoE layers, Qwen3.5 MoE).
    Stacked,
    /// Multiplied from the left, gate and up columns interleaved: `[experts, hidden, 2 *
    /// size]` and `[experts, size, hidden]`, with biases (gpt-oss).
    Interleaved,
}

/// Sliding-window layers: each but every `period`-th one, where the files do not list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// None; a config.json `sliding_window` only bounds the context (Mistral).
    None,
    /// The files must give the window; its layers rotate with their own base, unscaled
    /// (Gemma 3: `rope.freq_base_swa`, `rope_local_base_freq`, 10000 when silent).
    Required { period: usize },
    /// Windowed only where the files give a window (OLMo 3, not OLMo 2); its layers rotate
    /// with the global base, unscaled, as llama.cpp rotates them.
    Optional { period: usize },
    /// The files must give the window; its layers rotate as the others do, YaRN included
    /// (gpt-oss, whose first layer of each pair is windowed).
    Alternating { period: usize },
    /// The files must give the window and list its layers (Gemma 4's
    /// `attention.sliding_window_pattern`, config.json's `layer_types`); they rotate as
    /// `Required`'s do.
    Listed,
}

/// The tensors of a block and of the model around the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Embed,
    Norm,
    Output,
    RopeFreqs,
    /// LongRoPE's two sets of per-frequency divisors (Phi-3).
    RopeFactorsLong,
    RopeFactorsShort,
    AttnNorm,
    /// q, k and v stacked in one matrix (Phi-3); split into the three at load.
    Qkv,
    Q,
    K,
    V,
    O,
    QNorm,
    KNorm,
    PostAttnNorm,
    FfnNorm,
    PostFfnNorm,
    Gate,
    Up,
    Down,
    /// The router of a mixture of experts: one logit per expert.
    Router,
    /// A shared expert that every token takes (Qwen3.5 MoE): its gate's weight vector (one
    /// logit per token, through a sigmoid) and its feed-forward.
    SharedRouter,
    SharedGate,
    SharedUp,
    SharedDown,
    /// A Gated DeltaNet layer's parts: the output gate's projection (`z`), the causal
    /// convolution over q, k and v, the decay's bias and rate, the projections to β and to
    /// the decay's input, the norm of each head's output, and the output projection.
    SsmGate,
    SsmConv,
    SsmDt,
    SsmA,
    SsmBeta,
    SsmAlpha,
    SsmNorm,
    SsmOut,
    GateExperts,
    UpExperts,
    /// Every expert's gate and up stacked, gate's rows first (Gemma 4's converter may write
    /// them so).
    GateUpExperts,
    DownExperts,
    /// Attention's per-head sink logits (gpt-oss).
    Sinks,
    /// Each layer's output is multiplied by this scalar (Gemma 4).
    OutputScale,
    /// Experts beside a dense feed-forward (Gemma 4's 26B-A4B): the router's input scale,
    /// each expert's output scale, the dense branch's norm after, the experts' before and
    /// after.
    RouterScale,
    ExpertScales,
    PostDenseNorm,
    PreExpertsNorm,
    PostExpertsNorm,
    /// Per-layer embeddings (Gemma 4's E2B, E4B): a table of every layer's per token, a
    /// projection of the embeddings to every layer's and its norm...
    PerLayerEmbed,
    PerLayerModelProj,
    PerLayerProjNorm,
    /// ...and in each layer the gate that reads it, the projection back and its norm.
    PerLayerGate,
    PerLayerProj,
    PerLayerPostNorm,
}

const LLAMA_LIKE: Family = Family {
    architecture: Architecture::Llama,
    name: "llama",
    gguf: &["llama"],
    hf: &["llama"],
    gguf_rope: RopeLayout::Interleaved,
    qk_norm: QkNorm::None,
    pre_norms: true,
    post_norms: false,
    activation: Activation::Silu,
    scaled_embeddings: false,
    moe: false,
    hf_norm_plus_one: false,
    window: Window::None,
    no_rope_period: None,
    fused_gate_up: false,
    hf_names: &[],
    gguf_names: &[],
    gated_attention: false,
    recurrent: None,
    sinks: false,
    gating: Gating::SoftmaxThenTopK,
    gguf_yarn_betas: false,
    hf_fused_experts: None,
    v_norm: false,
    experts_beside_dense: false,
};

/// Qwen3.5: GGUF names the feed-forward's norm after the attention it follows.
const QWEN35: Family = Family {
    architecture: Architecture::Qwen35,
    name: "qwen35",
    gguf: &["qwen35"],
    hf: &["qwen3_5_text"],
    // Every norm but the DeltaNet heads' output norm is stored as `w - 1`.
    hf_norm_plus_one: true,
    hf_names: &[(Part::Qkv, "linear_attn.in_proj_qkv")],
    gguf_rope: RopeLayout::HalfSplit,
    qk_norm: QkNorm::PerHead,
    gguf_names: &[(Part::FfnNorm, "post_attention_norm")],
    gated_attention: true,
    recurrent: Some(4),
    ..LLAMA_LIKE
};

/// Every family, in the order the "supported" lists name them.
pub(crate) const FAMILIES: &[Family] = &[
    LLAMA_LIKE,
    Family {
        architecture: Architecture::Mistral,
        name: "mistral",
        gguf: &[],
        hf: &["mistral"],
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Qwen2,
        name: "qwen2",
        gguf: &["qwen2"],
        hf: &["qwen2"],
        gguf_rope: RopeLayout::HalfSplit,
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Qwen3,
        name: "qwen3",
        gguf: &["qwen3"],
        hf: &["qwen3"],
        gguf_rope: RopeLayout::HalfSplit,
        qk_norm: QkNorm::PerHead,
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Gemma3,
        name: "gemma3",
        gguf: &["gemma3"],
        hf: &["gemma3_text"],
        gguf_rope: RopeLayout::HalfSplit,
        qk_norm: QkNorm::PerHead,
        post_norms: true,
        activation: Activation::GeluTanh,
        scaled_embeddings: true,
        hf_norm_plus_one: true,
        window: Window::Required { period: 6 },
        hf_names: &[
            (Part::PostAttnNorm, "post_attention_layernorm"),
            (Part::FfnNorm, "pre_feedforward_layernorm"),
            (Part::PostFfnNorm, "post_feedforward_layernorm"),
        ],
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::SmolLm3,
        name: "smollm3",
        gguf: &["smollm3"],
        hf: &["smollm3"],
        no_rope_period: Some(4),
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Qwen3Moe,
        name: "qwen3moe",
        gguf: &["qwen3moe"],
        hf: &["qwen3_moe"],
        gguf_rope: RopeLayout::HalfSplit,
        qk_norm: QkNorm::PerHead,
        moe: true,
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Granite,
        name: "granite",
        gguf: &["granite"],
        hf: &["granite"],
        ..LLAMA_LIKE
    },
    // config.json checkpoints of Granite MoE fuse each expert's gate and up: GGUF only.
    Family {
        architecture: Architecture::GraniteMoe,
        name: "granitemoe",
        gguf: &["granitemoe"],
        hf: &[],
        moe: true,
        ..LLAMA_LIKE
    },
    // OLMo 3 is OLMo 2 with a window on three layers of four.
    Family {
        architecture: Architecture::Olmo2,
        name: "olmo2",
        gguf: &["olmo2"],
        hf: &["olmo2", "olmo3"],
        gguf_rope: RopeLayout::HalfSplit,
        qk_norm: QkNorm::Whole,
        pre_norms: false,
        post_norms: true,
        window: Window::Optional { period: 4 },
        hf_names: &[
            (Part::PostAttnNorm, "post_attention_layernorm"),
            (Part::PostFfnNorm, "post_feedforward_layernorm"),
        ],
        ..LLAMA_LIKE
    },
    // transformers names Ministral 3's text model `ministral3` (`mistral3` is its vision
    // wrapper).
    Family {
        architecture: Architecture::Mistral3,
        name: "mistral3",
        gguf: &["mistral3"],
        hf: &["ministral3"],
        gguf_yarn_betas: true,
        ..LLAMA_LIKE
    },
    // GGUF only: its config.json checkpoints are multimodal wrappers.
    Family {
        architecture: Architecture::Gemma4,
        name: "gemma4",
        gguf: &["gemma4"],
        hf: &[],
        gguf_rope: RopeLayout::HalfSplit,
        qk_norm: QkNorm::PerHead,
        post_norms: true,
        activation: Activation::GeluTanh,
        scaled_embeddings: true,
        window: Window::Listed,
        v_norm: true,
        experts_beside_dense: true,
        ..LLAMA_LIKE
    },
    Family {
        architecture: Architecture::Phi3,
        name: "phi3",
        gguf: &["phi3"],
        hf: &["phi3"],
        gguf_rope: RopeLayout::HalfSplit,
        fused_gate_up: true,
        hf_names: &[(Part::Up, "mlp.gate_up_proj")],
        ..LLAMA_LIKE
    },
    QWEN35,
    Family {
        architecture: Architecture::Qwen35Moe,
        name: "qwen35moe",
        gguf: &["qwen35moe"],
        hf: &["qwen3_5_moe_text"],
        moe: true,
        hf_fused_experts: Some(FusedExperts::Stacked),
        ..QWEN35
    },
    // The norm before the experts is llama's `ffn_norm` under another GGUF name.
    Family {
        architecture: Architecture::GptOss,
        name: "gpt-oss",
        gguf: &["gpt-oss"],
        hf: &["gpt_oss"],
        gguf_rope: RopeLayout::HalfSplit,
        activation: Activation::SwigluOai,
        moe: true,
        window: Window::Alternating { period: 2 },
        hf_names: &[(Part::Router, "mlp.router")],
        gguf_names: &[(Part::FfnNorm, "post_attention_norm")],
        sinks: true,
        gating: Gating::TopKThenSoftmax,
        hf_fused_experts: Some(FusedExperts::Interleaved),
        ..LLAMA_LIKE
    },
];

impl Architecture {
    pub fn name(self) -> &'static str {
        self.family().name
    }

    pub(crate) fn family(self) -> &'static Family {
        FAMILIES
            .iter()
            .find(|f| f.architecture == self)
            .expect("every architecture has a row")
    }

    pub(crate) fn from_gguf(name: &str) -> Option<Self> {
        FAMILIES
            .iter()
            .find(|f| f.gguf.contains(&name))
            .map(|f| f.architecture)
    }

    pub(crate) fn from_hf(model_type: &str) -> Option<Self> {
        FAMILIES
            .iter()
            .find(|f| f.hf.contains(&model_type))
            .map(|f| f.architecture)
    }
}

/// The names of every family's GGUF architectures, for the error that refuses another.
pub(crate) fn supported_gguf() -> String {
    FAMILIES
        .iter()
        .flat_map(|f| f.gguf.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The config.json `model_type`s we run.
pub(crate) fn supported_hf() -> String {
    FAMILIES
        .iter()
        .flat_map(|f| f.hf.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Part {
    /// The tensor's name in GGUF files (llama.cpp's names, shared by every family but where
    /// a family's `gguf_names` override them).
    pub(crate) fn gguf(self, family: &Family) -> &'static str {
        if let Some((_, name)) = family.gguf_names.iter().find(|(p, _)| *p == self) {
            return name;
        }
        match self {
            Part::Embed => "token_embd",
            Part::Norm => "output_norm",
            Part::Output => "output",
            Part::RopeFreqs => "rope_freqs",
            Part::RopeFactorsLong => "rope_factors_long",
            Part::RopeFactorsShort => "rope_factors_short",
            Part::AttnNorm => "attn_norm",
            Part::Qkv => "attn_qkv",
            Part::Q => "attn_q",
            Part::K => "attn_k",
            Part::V => "attn_v",
            Part::O => "attn_output",
            Part::QNorm => "attn_q_norm",
            Part::KNorm => "attn_k_norm",
            Part::PostAttnNorm => "post_attention_norm",
            Part::FfnNorm => "ffn_norm",
            Part::PostFfnNorm => "post_ffw_norm",
            Part::Gate => "ffn_gate",
            Part::Up => "ffn_up",
            Part::Down => "ffn_down",
            Part::Router => "ffn_gate_inp",
            Part::GateExperts => "ffn_gate_exps",
            Part::UpExperts => "ffn_up_exps",
            Part::GateUpExperts => "ffn_gate_up_exps",
            Part::DownExperts => "ffn_down_exps",
            Part::SharedRouter => "ffn_gate_inp_shexp",
            Part::SharedGate => "ffn_gate_shexp",
            Part::SharedUp => "ffn_up_shexp",
            Part::SharedDown => "ffn_down_shexp",
            Part::SsmGate => "attn_gate",
            Part::SsmConv => "ssm_conv1d",
            // Read without a suffix: config.json's `dt_bias` has none.
            Part::SsmDt => "ssm_dt.bias",
            Part::SsmA => "ssm_a",
            Part::SsmBeta => "ssm_beta",
            Part::SsmAlpha => "ssm_alpha",
            Part::SsmNorm => "ssm_norm",
            Part::SsmOut => "ssm_out",
            Part::Sinks => "attn_sinks",
            Part::OutputScale => "layer_output_scale",
            // Read with the suffix `scale` rather than `weight`.
            Part::RouterScale => "ffn_gate_inp",
            Part::ExpertScales => "ffn_down_exps",
            Part::PostDenseNorm => "post_ffw_norm_1",
            Part::PreExpertsNorm => "pre_ffw_norm_2",
            Part::PostExpertsNorm => "post_ffw_norm_2",
            Part::PerLayerEmbed => "per_layer_token_embd",
            Part::PerLayerModelProj => "per_layer_model_proj",
            Part::PerLayerProjNorm => "per_layer_proj_norm",
            Part::PerLayerGate => "inp_gate",
            Part::PerLayerProj => "proj",
            Part::PerLayerPostNorm => "post_norm",
        }
    }

    /// The tensor's name in a llama-style config.json checkpoint; a family's `hf_names`
    /// override it.
    pub(crate) fn hf(self, family: &Family) -> &'static str {
        if let Some((_, name)) = family.hf_names.iter().find(|(p, _)| *p == self) {
            return name;
        }
        match self {
            Part::Embed => "model.embed_tokens",
            Part::Norm => "model.norm",
            Part::Output => "lm_head",
            Part::RopeFreqs => "rope_freqs",
            // config.json lists LongRoPE's factors instead.
            Part::RopeFactorsLong => "rope_factors_long",
            Part::RopeFactorsShort => "rope_factors_short",
            Part::AttnNorm => "input_layernorm",
            Part::Qkv => "self_attn.qkv_proj",
            Part::Q => "self_attn.q_proj",
            Part::K => "self_attn.k_proj",
            Part::V => "self_attn.v_proj",
            Part::O => "self_attn.o_proj",
            Part::QNorm => "self_attn.q_norm",
            Part::KNorm => "self_attn.k_norm",
            Part::PostAttnNorm => "post_attention_norm",
            Part::FfnNorm => "post_attention_layernorm",
            Part::PostFfnNorm => "post_feedforward_layernorm",
            Part::Gate => "mlp.gate_proj",
            Part::Up => "mlp.up_proj",
            Part::Down => "mlp.down_proj",
            Part::Router => "mlp.gate",
            // One tensor per expert `e`: `mlp.experts.{e}.gate_proj`.
            Part::GateExperts => "gate_proj",
            Part::UpExperts => "up_proj",
            Part::GateUpExperts => "gate_up_proj",
            Part::DownExperts => "down_proj",
            Part::SharedRouter => "mlp.shared_expert_gate",
            Part::SharedGate => "mlp.shared_expert.gate_proj",
            Part::SharedUp => "mlp.shared_expert.up_proj",
            Part::SharedDown => "mlp.shared_expert.down_proj",
            Part::SsmGate => "linear_attn.in_proj_z",
            Part::SsmConv => "linear_attn.conv1d",
            Part::SsmDt => "linear_attn.dt_bias",
            Part::SsmA => "linear_attn.A_log",
            Part::SsmBeta => "linear_attn.in_proj_b",
            Part::SsmAlpha => "linear_attn.in_proj_a",
            Part::SsmNorm => "linear_attn.norm",
            Part::SsmOut => "linear_attn.out_proj",
            // `self_attn.sinks` in the checkpoint, named so when it is read.
            Part::Sinks => "self_attn.sinks",
            Part::OutputScale => "layer_scalar",
            Part::RouterScale => "router.scale",
            Part::ExpertScales => "router.per_expert_scale",
            Part::PostDenseNorm => "post_feedforward_layernorm_1",
            Part::PreExpertsNorm => "pre_feedforward_layernorm_2",
            Part::PostExpertsNorm => "post_feedforward_layernorm_2",
            Part::PerLayerEmbed => "model.embed_tokens_per_layer",
            Part::PerLayerModelProj => "model.per_layer_model_projection",
            Part::PerLayerProjNorm => "model.per_layer_projection_norm",
            Part::PerLayerGate => "per_layer_input_gate",
            Part::PerLayerProj => "per_layer_projection",
            Part::PerLayerPostNorm => "post_per_layer_input_norm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_architecture_has_one_row_and_every_name_finds_its_row() {
        for family in FAMILIES {
            assert_eq!(family.architecture.family().name, family.name);
            for name in family.gguf {
                assert_eq!(Architecture::from_gguf(name), Some(family.architecture));
            }
            for name in family.hf {
                assert_eq!(Architecture::from_hf(name), Some(family.architecture));
            }
        }
        assert_eq!(
            supported_gguf(),
            "llama, qwen2, qwen3, gemma3, smollm3, qwen3moe, granite, granitemoe, olmo2, mistral3, gemma4, phi3, qwen35, qwen35moe, gpt-oss"
        );
        assert_eq!(Architecture::from_gguf("gpt2"), None);
    }
}
