"""Small random-weight models of each family we run, and llama.cpp's logits on them.

    python scripts/make_arch_fixtures.py [tests/fixtures/archs [FAMILY...]]

For each family: `<family>/model.gguf` (F32), `<family>/model.q8_0.gguf` (its matrices in
Q8_0), the same F32 weights as a config.json + model.safetensors directory (`<family>/hf/`,
written the way the family's own checkpoints store them), and `<family>/reference.json`: the
logits llama.cpp (f32 KV cache, flash attention off) gives for every position of a few prompts,
on both GGUF files. The tests read these and need no peer. Needs gguf (0.19), numpy and
llama-cpp-python (0.3.36).
"""

import json
import math
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

# A vocabulary llama.cpp accepts: four specials, the 256 byte tokens, a few words.
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
WORDS = ["▁the", "▁a", "▁cat", "▁dog", "▁sat", "▁on", "▁mat", "▁and", "▁ran"]
TOKENS = SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + WORDS
TYPES = [3, 3, 3, 2] + [6] * 256 + [1] * len(WORDS)

PROMPTS = [
    [2, 260, 262, 264, 261, 263, 265, 10, 40, 77, 260, 262, 266, 268, 264],
    [2, 100, 101, 102],
]


HF_NAMES = {
    "ffn_gate_inp": "mlp.gate",
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
SHAPE = dict(hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=64)


def family(arch, model_type, layers, seed, parts, hf_names=None, norm_offset=0.0,
           permute_qk=False, qk_norm_size="head", untied=False, experts=None, metadata=None, config=None,
           shapes=None, globals_=None):
    """Random weights for `parts` of each layer, GGUF metadata, a config.json and the mapping
    of each GGUF tensor to the family's safetensors name and stored value.

    norm_offset: what the family's checkpoints leave out of a norm (Gemma stores w - 1).
    permute_qk: GGUF q/k rows are permuted for adjacent-pair RoPE (convert does it to llama).
    untied: an output matrix of its own (llama.cpp requires one for some families).
    experts: (count, used, size): a mixture of experts in place of each feed-forward.
    shapes: a part's shape where the family's differs (fused matrices).
    globals_: GGUF-only tensors outside the layers (name: values), which config.json lists
    in its own words instead.
    """
    hidden, heads, kv_heads, head_dim, ffn = (SHAPE[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn"))
    rng = np.random.default_rng(seed)
    vocab = len(TOKENS)
    names = dict(HF_NAMES, **(hf_names or {}))

    def matrix(rows, cols, scale=0.2):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def norm(size):
        return (1.0 + rng.standard_normal(size) * 0.1).astype(np.float32)

    q_norm = head_dim if qk_norm_size == "head" else heads * head_dim
    k_norm = head_dim if qk_norm_size == "head" else kv_heads * head_dim
    shapes = {
        "attn_norm": (hidden,), "attn_q": (heads * head_dim, hidden), "attn_k": (kv_heads * head_dim, hidden),
        "attn_v": (kv_heads * head_dim, hidden), "attn_output": (hidden, heads * head_dim),
        "attn_q_norm": (q_norm,), "attn_k_norm": (k_norm,), "post_attention_norm": (hidden,),
        "ffn_norm": (hidden,), "ffn_gate": (ffn, hidden), "ffn_up": (ffn, hidden), "ffn_down": (hidden, ffn),
        "post_ffw_norm": (hidden,), "attn_qkv": ((heads + 2 * kv_heads) * head_dim, hidden),
        **(shapes or {}),
    }
    tensors = {"token_embd.weight": matrix(vocab, hidden, 0.5), "output_norm.weight": norm(hidden)}
    if untied:
        tensors["output.weight"] = matrix(vocab, hidden, 0.5)
    for name, value in (globals_ or {}).items():
        tensors[name] = np.asarray(value, dtype=np.float32)
    if experts:
        count, _, size = experts
        parts = [p for p in parts if p not in ("ffn_gate", "ffn_up", "ffn_down")] + ["ffn_gate_inp"]
        shapes["ffn_gate_inp"] = (count, hidden)
    for i in range(layers):
        for part in parts:
            shape = shapes[part]
            tensors[f"blk.{i}.{part}.weight"] = norm(shape[0]) if len(shape) == 1 else matrix(*shape)
        if experts:
            tensors[f"blk.{i}.ffn_gate_exps.weight"] = np.stack([matrix(size, hidden) for _ in range(count)])
            tensors[f"blk.{i}.ffn_up_exps.weight"] = np.stack([matrix(size, hidden) for _ in range(count)])
            tensors[f"blk.{i}.ffn_down_exps.weight"] = np.stack([matrix(hidden, size) for _ in range(count)])
    gguf_metadata = {
        "context_length": 64, "embedding_length": hidden, "block_count": layers, "feed_forward_length": ffn,
        "attention.head_count": heads, "attention.head_count_kv": kv_heads, "attention.key_length": head_dim,
        "attention.value_length": head_dim, "attention.layer_norm_rms_epsilon": 1e-6,
        "rope.freq_base": 10_000.0, **(metadata or {}),
    }
    if experts:
        gguf_metadata.update({"expert_count": experts[0], "expert_used_count": experts[1]})
    hf_config = {
        "model_type": model_type, "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": vocab,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": gguf_metadata["rope.freq_base"],
        "tie_word_embeddings": not untied, "bos_token_id": 2, "eos_token_id": 1, **(config or {}),
    }
    if experts:
        hf_config.update({"num_experts": experts[0], "num_experts_per_tok": experts[1],
                          "moe_intermediate_size": experts[2], "norm_topk_prob": True})

    def unpermute(w, n_head):
        rows, cols = w.shape
        return w.reshape(n_head, head_dim // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)

    def hf(name, value):
        if name.endswith("_exps.weight"):
            _, layer, part, _ = name.split(".")
            proj = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}[part]
            return [(f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight", v) for e, v in enumerate(value)]
        if name == "token_embd.weight":
            return "model.embed_tokens.weight", value
        if name == "output.weight":
            return "lm_head.weight", value
        if name == "output_norm.weight":
            return "model.norm.weight", value - norm_offset
        if name in (globals_ or {}):
            return []
        _, layer, part, _ = name.split(".")
        if part.endswith("norm"):
            value = value - norm_offset
        if permute_qk and part in ("attn_q", "attn_k"):
            value = unpermute(value, heads if part == "attn_q" else kv_heads)
        return [(f"model.layers.{layer}.{names[part]}.weight", value)]

    def hf_all(name, value):
        out = hf(name, value)
        return out if isinstance(out, list) else [out]

    return arch, tensors, gguf_metadata, hf_config, hf_all


LLAMA_PARTS = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]


def gemma3():
    """Seven layers: the sixth is global, the rest see a window of 4 positions."""
    layers = 7
    return family(
        "gemma3", "gemma3_text", layers, 3,
        LLAMA_PARTS + ["attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm"],
        hf_names={"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
                  "post_ffw_norm": "post_feedforward_layernorm"},
        norm_offset=1.0,
        metadata={"attention.sliding_window": 4, "rope.freq_base": 1_000_000.0},
        config={
            "rope_local_base_freq": 10_000.0, "sliding_window": 4,
            "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)],
            "query_pre_attn_scalar": SHAPE["head_dim"], "hidden_activation": "gelu_pytorch_tanh",
        },
    )


def smollm3():
    """Five layers: the fourth is not rotated."""
    layers = 5
    return family(
        "smollm3", "smollm3", layers, 4, LLAMA_PARTS, permute_qk=True,
        config={"no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(layers)]},
    )


def qwen3moe():
    """Qwen3's attention, four experts of which each token takes two."""
    return family(
        "qwen3moe", "qwen3_moe", 3, 6, LLAMA_PARTS + ["attn_q_norm", "attn_k_norm"], experts=(4, 2, 32),
        metadata={"expert_feed_forward_length": 32},
    )


def mixtral():
    """Llama with eight experts of which each token takes two (GGUF only: Mixtral's own
    checkpoints name their experts otherwise)."""
    return family("llama", None, 2, 7, LLAMA_PARTS, permute_qk=True, experts=(8, 2, 64))


GRANITE_SCALARS = {"embedding_scale": 12.0, "residual_scale": 0.22, "attention.scale": 0.0078125, "logit_scale": 8.0}


def granite():
    """Llama with its four scalars."""
    return family(
        "granite", "granite", 2, 8, LLAMA_PARTS, permute_qk=True, metadata=GRANITE_SCALARS,
        config={"embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.0078125,
                "logits_scaling": 8.0},
    )


def granitemoe():
    """Granite's scalars and four experts of which each token takes two (GGUF only: its own
    checkpoints fuse each expert's gate and up)."""
    return family("granitemoe", None, 2, 9, LLAMA_PARTS, permute_qk=True, experts=(4, 2, 64),
                  metadata=GRANITE_SCALARS)


def olmo2(layers=3, seed=5):
    """No norms before attention or the feed-forward; q and k normed over all heads."""
    return family(
        "olmo2", "olmo2", layers, seed,
        ["attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm", "post_attention_norm",
         "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm"],
        hf_names={"post_attention_norm": "post_attention_layernorm", "post_ffw_norm": "post_feedforward_layernorm"},
        qk_norm_size="whole", untied=True,
    )


def olmo3():
    """OLMo 2 with a window of 4 positions on three layers of four (the fourth is global)."""
    layers = 5
    arch, tensors, metadata, config, hf = olmo2(layers=layers, seed=10)
    metadata["attention.sliding_window"] = 4
    config.update({
        "model_type": "olmo3", "sliding_window": 4,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(layers)],
    })
    return arch, tensors, metadata, config, hf


LONG, SHORT = [1.0, 1.5, 3.0, 8.0], [1.0, 1.1, 1.3, 2.0]


def phi3():
    """q, k and v in one matrix, gate and up in another, RoPE over half of each head with
    LongRoPE factors: a context of 64 beyond the original 32 takes the long ones."""
    stretch = 64 / 32
    attn_factor = math.sqrt(1 + math.log(stretch) / math.log(32))
    ffn = SHAPE["ffn"]
    return family(
        "phi3", "phi3", 3, 11,
        ["attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"],
        hf_names={"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"},
        shapes={"ffn_up": (2 * ffn, SHAPE["hidden"])},
        globals_={"rope_factors_long.weight": LONG, "rope_factors_short.weight": SHORT},
        metadata={"rope.dimension_count": SHAPE["head_dim"] // 2, "rope.scaling.original_context_length": 32,
                  "rope.scaling.attn_factor": attn_factor},
        config={"partial_rotary_factor": 0.5, "original_max_position_embeddings": 32,
                "rope_scaling": {"type": "longrope", "long_factor": LONG, "short_factor": SHORT}},
    )


def mistral3():
    """Llama with YaRN (8x over an original context of 8, ramped over the first pairs) and
    queries scaled up from position 8 on."""
    yarn = {"factor": 8.0, "original_max_position_embeddings": 8, "beta_fast": 4.0, "beta_slow": 0.25}
    return family(
        "mistral3", "ministral3", 3, 12, LLAMA_PARTS, permute_qk=True,
        metadata={"rope.scaling.type": "yarn", "rope.scaling.factor": 8.0,
                  "rope.scaling.original_context_length": 8, "rope.scaling.yarn_beta_fast": 4.0,
                  "rope.scaling.yarn_beta_slow": 0.25, "attention.temperature_scale": 0.1},
        config={"rope_parameters": {"rope_type": "yarn", "rope_theta": 10_000.0, "llama_4_scaling_beta": 0.1,
                                    **yarn}},
    )


DELTA = dict(k_heads=2, v_heads=4, state=8, conv=4)


def qwen35(experts=None):
    """Qwen3.5: six layers, every third full attention (q and a gate from one projection,
    RoPE over half of each head), the others Gated DeltaNet layers whose four value heads
    share two key heads.

    experts: (count, used, size, shared size): Qwen3.5 MoE's feed-forward instead, the routed
    experts beside one that every token takes, weighed by the sigmoid of its own gate."""
    layers, interval = 6, 3
    hidden, heads, kv_heads, head_dim, ffn = (SHAPE[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn"))
    k_heads, v_heads, state, conv = (DELTA[k] for k in ("k_heads", "v_heads", "state", "conv"))
    inner = v_heads * state
    conv_dim = 2 * k_heads * state + inner
    rng = np.random.default_rng(13)

    def matrix(rows, cols, scale=0.2):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def norm(size):
        return (1.0 + rng.standard_normal(size) * 0.1).astype(np.float32)

    tensors = {"token_embd.weight": matrix(len(TOKENS), hidden, 0.5), "output_norm.weight": norm(hidden)}
    for i in range(layers):
        blk = f"blk.{i}"
        tensors[f"{blk}.attn_norm.weight"] = norm(hidden)
        if (i + 1) % interval == 0:
            tensors.update({
                f"{blk}.attn_q.weight": matrix(2 * heads * head_dim, hidden),
                f"{blk}.attn_k.weight": matrix(kv_heads * head_dim, hidden),
                f"{blk}.attn_v.weight": matrix(kv_heads * head_dim, hidden),
                f"{blk}.attn_output.weight": matrix(hidden, heads * head_dim),
                f"{blk}.attn_q_norm.weight": norm(head_dim),
                f"{blk}.attn_k_norm.weight": norm(head_dim),
            })
        else:
            tensors.update({
                f"{blk}.attn_qkv.weight": matrix(conv_dim, hidden),
                f"{blk}.attn_gate.weight": matrix(inner, hidden),
                f"{blk}.ssm_conv1d.weight": matrix(conv_dim, conv, 0.5),
                f"{blk}.ssm_dt.bias": (rng.standard_normal(v_heads) * 0.5).astype(np.float32),
                f"{blk}.ssm_a": -np.exp(rng.standard_normal(v_heads) * 0.5).astype(np.float32),
                f"{blk}.ssm_beta.weight": matrix(v_heads, hidden),
                f"{blk}.ssm_alpha.weight": matrix(v_heads, hidden),
                f"{blk}.ssm_norm.weight": norm(state),
                f"{blk}.ssm_out.weight": matrix(hidden, inner),
            })
        tensors[f"{blk}.post_attention_norm.weight"] = norm(hidden)
        if experts:
            count, _, size, shared = experts
            tensors.update({
                f"{blk}.ffn_gate_inp.weight": matrix(count, hidden),
                f"{blk}.ffn_gate_exps.weight": np.stack([matrix(size, hidden) for _ in range(count)]),
                f"{blk}.ffn_up_exps.weight": np.stack([matrix(size, hidden) for _ in range(count)]),
                f"{blk}.ffn_down_exps.weight": np.stack([matrix(hidden, size) for _ in range(count)]),
                f"{blk}.ffn_gate_inp_shexp.weight": (rng.standard_normal(hidden) * 0.3).astype(np.float32),
                f"{blk}.ffn_gate_shexp.weight": matrix(shared, hidden),
                f"{blk}.ffn_up_shexp.weight": matrix(shared, hidden),
                f"{blk}.ffn_down_shexp.weight": matrix(hidden, shared),
            })
        else:
            tensors[f"{blk}.ffn_gate.weight"] = matrix(ffn, hidden)
            tensors[f"{blk}.ffn_up.weight"] = matrix(ffn, hidden)
            tensors[f"{blk}.ffn_down.weight"] = matrix(hidden, ffn)
    metadata = {
        "context_length": 64, "embedding_length": hidden, "block_count": layers, "feed_forward_length": ffn,
        "attention.head_count": heads, "attention.head_count_kv": kv_heads, "attention.key_length": head_dim,
        "attention.value_length": head_dim, "attention.layer_norm_rms_epsilon": 1e-6,
        "rope.freq_base": 10_000.0, "rope.dimension_count": head_dim // 2, "rope.dimension_sections": [2, 1, 1, 0],
        "ssm.conv_kernel": conv, "ssm.state_size": state, "ssm.group_count": k_heads,
        "ssm.time_step_rank": v_heads, "ssm.inner_size": inner, "full_attention_interval": interval,
    }
    config = {
        "model_type": "qwen3_5_text", "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": len(TOKENS),
        "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10_000.0, "partial_rotary_factor": 0.5,
        "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1,
        "linear_num_key_heads": k_heads, "linear_num_value_heads": v_heads, "linear_key_head_dim": state,
        "linear_value_head_dim": state, "linear_conv_kernel_dim": conv,
        "layer_types": ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)],
    }
    if experts:
        count, used, size, shared = experts
        metadata.update({"expert_count": count, "expert_used_count": used, "expert_feed_forward_length": size,
                         "expert_shared_feed_forward_length": shared})
        # transformers names no dense feed-forward size for Qwen3.5 MoE, and always renormalises.
        del config["intermediate_size"]
        config.update({"model_type": "qwen3_5_moe_text", "num_experts": count, "num_experts_per_tok": used,
                       "moe_intermediate_size": size, "shared_expert_intermediate_size": shared})
    # config.json groups the value heads by the key head they read; GGUF tiles them (value head
    # j reads key head j mod k_heads). grouped[g] = tiled[(g % per_key) * k_heads + g // per_key].
    per_key = v_heads // k_heads
    order = [(g % per_key) * k_heads + g // per_key for g in range(v_heads)]

    def grouped(value, axis, block):
        parts = np.split(value, v_heads, axis=axis) if block else None
        return np.concatenate([parts[j] for j in order], axis=axis)

    names = {"attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
             "attn_qkv": "linear_attn.in_proj_qkv", "attn_gate": "linear_attn.in_proj_z",
             "ssm_conv1d": "linear_attn.conv1d", "ssm_dt": "linear_attn.dt_bias", "ssm_a": "linear_attn.A_log",
             "ssm_beta": "linear_attn.in_proj_b", "ssm_alpha": "linear_attn.in_proj_a", "ssm_norm": "linear_attn.norm",
             "ssm_out": "linear_attn.out_proj", "ffn_gate_inp": "mlp.gate",
             "ffn_gate_shexp": "mlp.shared_expert.gate_proj", "ffn_up_shexp": "mlp.shared_expert.up_proj",
             "ffn_down_shexp": "mlp.shared_expert.down_proj", "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
             "ffn_gate_exps": "mlp.experts.gate_up_proj", "ffn_down_exps": "mlp.experts.down_proj"}

    def hf(name, value):
        if name == "token_embd.weight":
            return [("model.embed_tokens.weight", value)]
        if name == "output_norm.weight":
            return [("model.norm.weight", value - 1.0)]
        _, layer, part, *_ = name.split(".")
        if part == "ffn_up_exps":  # fused with the gates
            return []
        key = f"model.layers.{layer}.{names[part]}"
        if part.endswith("norm") and part != "ssm_norm":
            value = value - 1.0
        if part == "attn_qkv":
            qk = 2 * k_heads * state
            value = np.concatenate([value[:qk], grouped(value[qk:], 0, True)])
        elif part in ("attn_gate", "ssm_beta", "ssm_alpha", "ssm_dt"):
            value = grouped(value, 0, True)
        elif part == "ssm_a":
            value = np.log(-grouped(value, 0, True))
        elif part == "ssm_conv1d":
            qk = 2 * k_heads * state
            value = np.concatenate([value[:qk], grouped(value[qk:], 0, True)])[:, None, :]
        elif part == "ssm_out":
            value = grouped(value, 1, True)
        elif part == "ffn_gate_inp_shexp":
            value = value[None, :]  # a Linear(hidden, 1)
        elif part == "ffn_gate_exps":
            # transformers 5 fuses each layer's experts: gate's rows above up's, [experts, 2 * size, hidden];
            # down stays [experts, hidden, size].
            value = np.concatenate([value, tensors[f"blk.{layer}.ffn_up_exps.weight"]], axis=1)
        suffix = "" if part in ("ssm_dt", "ssm_a", "ffn_gate_exps", "ffn_down_exps") else ".weight"
        return [(key + suffix, value.astype(np.float32))]

    return "qwen35moe" if experts else "qwen35", tensors, metadata, config, hf


def qwen35moe():
    """Qwen3.5 with four experts of which each token takes two, and a shared expert. Its
    checkpoints (transformers 5) fuse each layer's experts: gate above up in one
    `[experts, 2 * size, hidden]` tensor, down as `[experts, hidden, size]`."""
    return qwen35(experts=(4, 2, 32, 48))


def gpt_oss():
    """Biases on every projection, a sink logit per head, a window of 4 positions on every
    other layer (the first of each pair), YaRN, and four experts with biases of which each
    token takes the two largest logits. Its checkpoints fuse each layer's experts: gate and up
    interleaved in one `[experts, hidden, 2 * size]` tensor, down as `[experts, size, hidden]`."""
    layers, (count, used, size) = 3, (4, 2, 32)
    # llama.cpp reads no YaRN betas from a gpt-oss file: its defaults, which the checkpoints state.
    yarn = {"factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0}
    arch, tensors, metadata, config, _ = family(
        "gpt-oss", "gpt_oss", layers, 13,
        ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "post_attention_norm"],
        untied=True, experts=(count, used, size),
        metadata={"attention.sliding_window": 4, "rope.freq_base": 150_000.0, "expert_feed_forward_length": size,
                  "rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
                  "rope.scaling.original_context_length": 16},
        config={"sliding_window": 4, "rope_theta": 150_000.0, "intermediate_size": size,
                "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
                "rope_scaling": {"rope_type": "yarn", "truncate": False, **yarn}, "attention_bias": True,
                "swiglu_limit": 7.0, "num_local_experts": count, "experts_per_token": used},
    )
    for key in ("num_experts", "moe_intermediate_size", "norm_topk_prob"):
        config.pop(key)
    config["num_local_experts"] = count
    rng = np.random.default_rng(14)
    heads, kv = SHAPE["heads"] * SHAPE["head_dim"], SHAPE["kv_heads"] * SHAPE["head_dim"]
    hidden = SHAPE["hidden"]
    extra = {}
    for i in range(layers):
        for part, n in [("attn_q", heads), ("attn_k", kv), ("attn_v", kv), ("attn_output", hidden),
                        ("ffn_gate_inp", count)]:
            extra[f"blk.{i}.{part}.bias"] = (rng.standard_normal(n) * 0.2).astype(np.float32)
        # Sinks from well below to well above the scores, so that they matter.
        extra[f"blk.{i}.attn_sinks.weight"] = rng.uniform(-2.0, 3.0, SHAPE["heads"]).astype(np.float32)
        for part, n in [("ffn_gate_exps", size), ("ffn_up_exps", size), ("ffn_down_exps", hidden)]:
            extra[f"blk.{i}.{part}.bias"] = (rng.standard_normal((count, n)) * 0.2).astype(np.float32)
        # Gates big enough that the clamp at 7 bites.
        tensors[f"blk.{i}.ffn_gate_exps.weight"] *= 6.0
    tensors.update(extra)
    names = {"attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate_inp": "mlp.router"}

    def hf(name, value):
        if name in ("token_embd.weight", "output.weight", "output_norm.weight"):
            return [({"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight",
                      "output_norm.weight": "model.norm.weight"}[name], value)]
        _, layer, part, suffix = name.split(".")
        prefix = f"model.layers.{layer}"
        if part == "attn_sinks":
            return [(f"{prefix}.self_attn.sinks", value)]
        if part == "ffn_gate_exps":
            up = tensors[f"blk.{layer}.ffn_up_exps.{suffix}"]
            fused = np.stack([value, up], axis=-1 if suffix == "bias" else 2)
            if suffix == "weight":  # [experts, size, 2, hidden] -> [experts, hidden, 2 * size]
                fused = fused.reshape(count, 2 * size, hidden).transpose(0, 2, 1)
            else:
                fused = fused.reshape(count, 2 * size)
            return [(f"{prefix}.mlp.experts.gate_up_proj{'_bias' if suffix == 'bias' else ''}", fused)]
        if part == "ffn_up_exps":
            return []
        if part == "ffn_down_exps":
            stored = value if suffix == "bias" else value.transpose(0, 2, 1)
            return [(f"{prefix}.mlp.experts.down_proj{'_bias' if suffix == 'bias' else ''}", stored)]
        return [(f"{prefix}.{names[part]}.{suffix}", value)]

    return arch, tensors, metadata, config, hf


GEMMA4_CHARS = sorted({c for w in WORDS for c in w})
GEMMA4_MERGES = [(w[:i], w[i]) for w in WORDS for i in range(1, len(w))]
# The gemma4 tokenizer's vocabulary: the shared one, each word's characters and the pieces its
# left-to-right merges make, and newline runs (which llama.cpp takes whole).
GEMMA4_TOKENS = TOKENS + [t for t in dict.fromkeys(GEMMA4_CHARS + [a + b for a, b in GEMMA4_MERGES] + ["\n", "\n\n"])
                          if t not in TOKENS]
GEMMA4_TEXTS = ["the cat sat on a mat", " the dog\n\nran", "a cat\n\n\nand a dog", "the ünïcat"]


def gemma4(experts=None):
    """Six layers: a window of 4 positions on layers 0, 1, 2 and 4; 16-wide heads (one kv head)
    on windowed layers, 32-wide (two kv heads) with proportional RoPE (a quarter rotated) on the
    global ones; layers 4 and 5 reuse the keys of layers 2 and 3; layer 1 has no v (its keys
    serve); per-layer embeddings of 8; a final softcap of 5. GGUF only.

    experts: (count, used, size): beside each dense feed-forward a mixture of experts, as in
    26B-A4B, with its router's input scale and each expert's output scale."""
    layers, hidden, heads, ffn, per_layer = 6, SHAPE["hidden"], 2, SHAPE["ffn"], 8
    swa = [True, True, True, False, True, False]
    shared = 2
    dims = {True: (16, 1), False: (32, 2)}
    rng = np.random.default_rng(13)
    vocab = len(GEMMA4_TOKENS)

    def matrix(rows, cols, scale=0.2):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def norm(size):
        return (1.0 + rng.standard_normal(size) * 0.1).astype(np.float32)

    rotated = 32 // 8
    tensors = {
        "token_embd.weight": matrix(vocab, hidden, 0.5), "output_norm.weight": norm(hidden),
        "rope_freqs.weight": np.array([1.0] * rotated + [1e30] * (16 - rotated), dtype=np.float32),
        "per_layer_token_embd.weight": matrix(vocab, per_layer * layers, 0.5),
        "per_layer_model_proj.weight": matrix(per_layer * layers, hidden),
        "per_layer_proj_norm.weight": norm(per_layer),
    }
    for i in range(layers):
        head_dim, kv_heads = dims[swa[i]]
        parts = {
            "attn_norm": (hidden,), "attn_q": (heads * head_dim, hidden), "attn_k": (kv_heads * head_dim, hidden),
            "attn_v": (kv_heads * head_dim, hidden), "attn_output": (hidden, heads * head_dim),
            "attn_q_norm": (head_dim,), "attn_k_norm": (head_dim,), "post_attention_norm": (hidden,),
            "ffn_norm": (hidden,), "ffn_gate": (ffn, hidden), "ffn_up": (ffn, hidden), "ffn_down": (hidden, ffn),
            "post_ffw_norm": (hidden,), "inp_gate": (per_layer, hidden), "proj": (hidden, per_layer),
            "post_norm": (hidden,),
        }
        if i >= layers - shared:
            for part in ("attn_k", "attn_v", "attn_k_norm"):
                del parts[part]
        if i == 1:
            del parts["attn_v"]
        for part, shape in parts.items():
            tensors[f"blk.{i}.{part}.weight"] = norm(shape[0]) if len(shape) == 1 else matrix(*shape)
        tensors[f"blk.{i}.layer_output_scale.weight"] = np.array([0.5 + rng.random()], dtype=np.float32)
        if experts:
            count, _, size = experts
            tensors[f"blk.{i}.ffn_gate_inp.weight"] = matrix(count, hidden, 1.0)
            tensors[f"blk.{i}.ffn_gate_inp.scale"] = norm(hidden)
            for part, shape in (("gate", (size, hidden)), ("up", (size, hidden)), ("down", (hidden, size))):
                tensors[f"blk.{i}.ffn_{part}_exps.weight"] = np.stack([matrix(*shape) for _ in range(count)])
            tensors[f"blk.{i}.ffn_down_exps.scale"] = (0.5 + rng.random(count)).astype(np.float32)
            for part in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"):
                tensors[f"blk.{i}.{part}.weight"] = norm(hidden)
    metadata = {
        "context_length": 64, "embedding_length": hidden, "block_count": layers, "feed_forward_length": ffn,
        "attention.head_count": heads, "attention.head_count_kv": [dims[s][1] for s in swa],
        "attention.key_length": 32, "attention.value_length": 32, "attention.key_length_swa": 16,
        "attention.value_length_swa": 16, "attention.layer_norm_rms_epsilon": 1e-6,
        "attention.sliding_window": 4, "attention.sliding_window_pattern": swa,
        "attention.shared_kv_layers": shared, "embedding_length_per_layer_input": per_layer,
        "rope.freq_base": 1_000_000.0, "rope.freq_base_swa": 10_000.0, "rope.dimension_count": 32,
        "rope.dimension_count_swa": 16, "final_logit_softcapping": 5.0,
    }
    if experts:
        metadata.update({"expert_count": experts[0], "expert_used_count": experts[1],
                         "expert_feed_forward_length": experts[2]})
    tokenizer = {"model": "gemma4", "tokens": GEMMA4_TOKENS,
                 "types": TYPES + [1] * (len(GEMMA4_TOKENS) - len(TOKENS)),
                 "merges": [f"{a} {b}" for a, b in GEMMA4_MERGES]}
    return "gemma4", tensors, metadata, {"model_type": None}, None, tokenizer


def gemma4moe():
    """Gemma 4 with four experts beside each dense feed-forward, two per token."""
    return gemma4(experts=(4, 2, 16))


def write_gguf(path, arch, tensors, metadata, qtype=None, tokenizer=None, expert_qtype=None):
    writer = GGUFWriter(path, arch)
    for key, value in metadata.items():
        full = f"{arch}.{key}"
        if isinstance(value, str):
            writer.add_string(full, value)
        elif isinstance(value, list):
            writer.add_array(full, value)
        elif isinstance(value, float):
            writer.add_float32(full, value)
        else:
            writer.add_uint32(full, value)
    tokenizer = tokenizer or {"model": "llama", "tokens": TOKENS, "types": TYPES}
    writer.add_tokenizer_model(tokenizer["model"])
    writer.add_token_list(tokenizer["tokens"])
    writer.add_token_scores([0.0] * len(tokenizer["tokens"]))
    writer.add_token_types(tokenizer["types"])
    if "merges" in tokenizer:
        writer.add_token_merges(tokenizer["merges"])
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(False)
    for name, value in tensors.items():
        if expert_qtype is not None and name.endswith("_exps.weight"):
            writer.add_tensor(name, quantize(value, expert_qtype), raw_dtype=expert_qtype)
        elif qtype is not None and name.endswith(".weight") and value.ndim >= 2 and value.shape[-1] % 32 == 0:
            writer.add_tensor(name, quantize(value, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_safetensors(path, tensors):
    """The safetensors format by hand: a little-endian u64 header size, the JSON header, data."""
    header, offset, blobs = {}, 0, []
    for name, value in sorted(tensors.items()):
        data = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def llama_logits(path):
    from llama_cpp import Llama

    out = []
    for prompt in PROMPTS:
        # A fresh context per prompt: llama.cpp's reuse of a cached prefix is unreliable on
        # recurrent layers. llama-cpp-python's YaRN defaults (betas 32 and 1) override the
        # file's; -1 leaves the file's values in force, as llama.cpp's own tools do.
        llm = Llama(model_path=path, n_ctx=64, n_threads=2, logits_all=True, type_k=0, type_v=0,
                    flash_attn=False, verbose=False, yarn_beta_fast=-1.0, yarn_beta_slow=-1.0,
                    yarn_attn_factor=-1.0)
        llm.eval(prompt)
        out.append([[round(float(x), 6) for x in row] for row in np.array(llm.scores[: len(prompt)])])
    return out


def fuse_gate_up(tensors):
    """`ffn_gate_exps` and `ffn_up_exps` of each layer stacked as `ffn_gate_up_exps`, gate first."""
    fused = {}
    for name, value in tensors.items():
        if name.endswith("ffn_gate_exps.weight"):
            up = tensors[name.replace("gate_exps", "up_exps")]
            fused[name.replace("gate_exps", "gate_up_exps")] = np.concatenate([value, up], axis=1)
        elif not name.endswith("ffn_up_exps.weight"):
            fused[name] = value
    return fused


def llama_tokens(path, texts):
    """llama.cpp's ids for each text, BOS added as the file says, specials read as text."""
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=64, vocab_only=True, verbose=False)
    return [[text, llm.tokenize(text.encode(), add_bos=True, special=False)] for text in texts]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/archs"
    import llama_cpp

    wanted = sys.argv[2:]
    for make in [gemma3, smollm3, olmo2, olmo3, phi3, mistral3, qwen3moe, mixtral, granite, granitemoe, qwen35,
                 qwen35moe, gpt_oss, gemma4, gemma4moe]:
        name = make.__name__.replace("_", "-")
        if wanted and name not in wanted:
            continue
        family, tensors, metadata, config, hf, *tokenizer = make()
        tokenizer = tokenizer[0] if tokenizer else None
        folder = os.path.join(root, name)
        os.makedirs(os.path.join(folder, "hf"), exist_ok=True)
        write_gguf(os.path.join(folder, "model.gguf"), family, tensors, metadata, tokenizer=tokenizer)
        write_gguf(os.path.join(folder, "model.q8_0.gguf"), family, tensors, metadata, GGMLQuantizationType.Q8_0,
                   tokenizer)
        if make is gpt_oss:
            # gpt-oss as released: its experts in MXFP4, the rest in F32.
            write_gguf(os.path.join(folder, "model.mxfp4.gguf"), family, tensors, metadata, tokenizer=tokenizer,
                       expert_qtype=GGMLQuantizationType.MXFP4)
        if make is gemma4moe:
            # The same weights with each layer's expert gates and ups in one tensor.
            write_gguf(os.path.join(folder, "model.fused.gguf"), family, fuse_gate_up(tensors), metadata,
                       tokenizer=tokenizer)
        if config["model_type"]:
            with open(os.path.join(folder, "hf", "config.json"), "w") as f:
                json.dump(config, f, indent=1)
            stored = dict(pair for n, v in tensors.items() for pair in hf(n, v))
            write_safetensors(os.path.join(folder, "hf", "model.safetensors"), stored)
        else:
            os.rmdir(os.path.join(folder, "hf"))
        reference = {
            "source": f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, CPU, 2 threads, f32 KV cache, "
                      "no flash attention): logits at every position of each prompt",
            "prompts": PROMPTS,
            "f32": llama_logits(os.path.join(folder, "model.gguf")),
            "q8_0": llama_logits(os.path.join(folder, "model.q8_0.gguf")),
        }
        if make is gpt_oss:
            reference["mxfp4"] = llama_logits(os.path.join(folder, "model.mxfp4.gguf"))
        if make is gemma4:
            reference["tokenized"] = llama_tokens(os.path.join(folder, "model.gguf"), GEMMA4_TEXTS)
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump(reference, f)
            f.write("\n")


if __name__ == "__main__":
    main()
