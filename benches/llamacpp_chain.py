#!/usr/bin/env python3
"""samplab's llama.cpp profile against llama.cpp's own sampler chain, on the same logits.

For each configuration: llama.cpp's chain (built with llama_sampler_init_*, as common/sampling.cpp
builds it) draws the first token 6,000 times, a fresh chain and seed per draw; samplab's exact
distribution for the same logits and history comes from `examples/chain_distribution.rs`. The
script prints the total variation distance between llama.cpp's empirical distribution and
samplab's, beside the distance the same number of draws from samplab's own distribution gives
(sampling noise alone). Needs llama-cpp-python and a GGUF
model for the vocabulary DRY wants (its logits are not used). The tests never use it.

    python3 benches/llamacpp_chain.py MODEL.gguf [--draws 6000]
"""

import argparse
import ctypes
import json
import math
import random
import subprocess

import llama_cpp as l

CONFIGS = {
    "temperature": "temperature: 0.7",
    "top_k": "top_k: 8\ntemperature: 1.3",
    "top_p": "top_p: 0.8",
    "min_p (before temperature)": "min_p: 0.1\ntemperature: 2.0",
    "typical_p": "typical_p: 0.7",
    "top_n_sigma": "top_n_sigma: 1.0",
    "xtc": "xtc_probability: 1.0\nxtc_threshold: 0.05",
    "dynatemp": "dynatemp_range: 0.5\ntemperature: 1.0",
    "penalties": "repetition_penalty: 1.3\nfrequency_penalty: 0.2\npresence_penalty: 0.3\nrepeat_last_n: 16",
    "dry": "dry_multiplier: 0.8\ndry_base: 1.75\ndry_allowed_length: 2\ndry_sequence_breakers: []",
    "typical chain": "repetition_penalty: 1.1\nrepeat_last_n: 64\ndry_multiplier: 0.8\ndry_sequence_breakers: []\ntop_k: 40\ntop_p: 0.95\nmin_p: 0.05\ntemperature: 0.8",
    "custom order": "samplers: [temperature, min_p, top_k, top_p]\ntemperature: 1.5\nmin_p: 0.08\ntop_k: 12\ntop_p: 0.9",
    "min_keep": "min_keep: 5\ntop_p: 0.3\nmin_p: 0.5",
    "mirostat 2": "mirostat: 2\nmirostat_tau: 3.0\nmirostat_eta: 0.1",
    "mirostat 1": "mirostat: 1\nmirostat_tau: 4.0\nmirostat_eta: 0.1",
}

DEFAULTS = {
    "temperature": 1.0, "top_k": -1, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0,
    "top_n_sigma": -1.0, "xtc_probability": 0.0, "xtc_threshold": 0.1, "dynatemp_range": 0.0,
    "dynatemp_exponent": 1.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0,
    "presence_penalty": 0.0, "repeat_last_n": 64, "dry_multiplier": 0.0, "dry_base": 1.75,
    "dry_allowed_length": 2, "dry_penalty_last_n": -1, "min_keep": 0, "mirostat": 0,
    "mirostat_tau": 5.0, "mirostat_eta": 0.1,
    "samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"],
}


def parse(yaml):
    params = dict(DEFAULTS)
    for line in yaml.splitlines():
        key, value = (part.strip() for part in line.split(":", 1))
        if value.startswith("["):
            params[key] = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        else:
            params[key] = float(value) if "." in value else int(value)
    return params


def chain(p, vocab, n_vocab, history, seed):
    smpl = l.llama_sampler_chain_init(l.llama_sampler_chain_default_params())
    add = lambda s: l.llama_sampler_chain_add(smpl, s)
    if p["mirostat"] == 0:
        for stage in p["samplers"]:
            if stage == "penalties":
                add(l.llama_sampler_init_penalties(n_vocab, p["repeat_last_n"], p["repetition_penalty"], p["frequency_penalty"], p["presence_penalty"]))
            elif stage == "dry":
                last_n = len(history) if p["dry_penalty_last_n"] == -1 else p["dry_penalty_last_n"]
                add(l.llama_sampler_init_dry(vocab, p["dry_multiplier"], p["dry_base"], p["dry_allowed_length"], last_n, None, 0))
            elif stage == "top_n_sigma":
                add(l.llama_sampler_init_top_n_sigma(p["top_n_sigma"]))
            elif stage == "top_k":
                add(l.llama_sampler_init_top_k(p["top_k"]))
            elif stage == "typ_p":
                add(l.llama_sampler_init_typical(p["typical_p"], p["min_keep"]))
            elif stage == "top_p":
                add(l.llama_sampler_init_top_p(p["top_p"], p["min_keep"]))
            elif stage == "min_p":
                add(l.llama_sampler_init_min_p(p["min_p"], p["min_keep"]))
            elif stage == "xtc":
                add(l.llama_sampler_init_xtc(p["xtc_probability"], p["xtc_threshold"], p["min_keep"], seed))
            elif stage == "temperature":
                add(l.llama_sampler_init_temp_ext(p["temperature"], p["dynatemp_range"], p["dynatemp_exponent"]))
        add(l.llama_sampler_init_dist(seed))
    elif p["mirostat"] == 1:
        add(l.llama_sampler_init_temp(p["temperature"]))
        add(l.llama_sampler_init_mirostat(n_vocab, seed, p["mirostat_tau"], p["mirostat_eta"], 100))
    else:
        add(l.llama_sampler_init_temp(p["temperature"]))
        add(l.llama_sampler_init_mirostat_v2(seed, p["mirostat_tau"], p["mirostat_eta"]))
    for token in history:
        l.llama_sampler_accept(smpl, token)
    return smpl


def draw(smpl, logits):
    n = len(logits)
    data = (l.llama_token_data * n)(*[l.llama_token_data(i, x, 0.0) for i, x in enumerate(logits)])
    array = l.llama_token_data_array(data, n, -1, False)
    l.llama_sampler_apply(smpl, ctypes.byref(array))
    # Stages such as XTC move the array's start: index from where it points now.
    return array.data[array.selected].id


def samplab(yaml, logits, history):
    payload = json.dumps({"params": "engine: llama.cpp\n" + yaml, "logits": logits, "history": history})
    out = subprocess.run(
        ["cargo", "run", "-q", "--release", "--example", "chain_distribution"],
        input=payload, capture_output=True, text=True, check=True,
    )
    return {id_: p for id_, p in json.loads(out.stdout)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--draws", type=int, default=6000)
    args = parser.parse_args()
    l.llama_backend_init()
    params = l.llama_model_default_params()
    model = l.llama_model_load_from_file(args.model.encode(), params)
    vocab = l.llama_model_get_vocab(model)
    n_vocab = l.llama_vocab_n_tokens(vocab)
    rng = random.Random(1)
    # A language-model-like shape: a Gaussian body with a few strong candidates.
    logits = [rng.gauss(0.0, 1.0) for _ in range(n_vocab)]
    for i in range(12):
        logits[rng.randrange(n_vocab)] += 6.0 + 0.3 * i
    top = sorted(range(n_vocab), key=lambda i: -logits[i])[:8]
    # A history that repeats the strong candidates, so that penalties and DRY have work.
    history = [top[i % 4] for i in range(10)] + [top[5], top[0], top[1], top[2]]
    print(f"{'configuration':<28} {'TV':>6} {'noise':>6}  kept (samplab)")
    for name, yaml in CONFIGS.items():
        p = parse(yaml)
        counts = {}
        for i in range(args.draws):
            smpl = chain(p, vocab, n_vocab, history, 1000 + i)
            token = draw(smpl, logits)
            counts[token] = counts.get(token, 0) + 1
            l.llama_sampler_free(smpl)
        ours = samplab(yaml, logits, history)
        ids = set(counts) | set(ours)
        tv = sum(abs(counts.get(i, 0) / args.draws - ours.get(i, 0.0)) for i in ids) / 2
        # The same number of draws from samplab's own distribution: the distance noise alone gives.
        own = {}
        for token in rng.choices(list(ours), weights=list(ours.values()), k=args.draws):
            own[token] = own.get(token, 0) + 1
        noise = sum(abs(own.get(i, 0) / args.draws - p) for i, p in ours.items()) / 2
        print(f"{name:<28} {tv:6.3f} {noise:6.3f}  {len(ours)}")


if __name__ == "__main__":
    main()
