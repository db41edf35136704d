#!/usr/bin/env python3
"""llama.cpp's adaptive-p chain over consecutive steps of fixed logits, through llama-cpp-python.

Reads one JSON object on stdin: `logits`, `steps`, `runs`, `paths`, `repeats`, and the chain's
settings `min_p`, `temperature`, `target`, `decay`. The chain is llama.cpp's for them:
min_p -> temperature -> adaptive_p (the other stages of its default order do nothing at their
defaults), each llama_sampler_init_* as common/sampling.cpp calls it.

Prints one JSON object:
- `marginals`: per step, how often each id was drawn over `runs` runs of `steps` steps, each a
  fresh chain seeded with its index; every drawn token is accepted, which moves adaptive-p's
  moving average as llama.cpp's accept does.
- `paths`: `paths` more runs, each with its tokens and, per step, how often each id was drawn in
  `repeats` draws from the state the run had reached there: adaptive-p learns only on accept,
  so repeated applies draw again from the same state, and the last one is the run's token.

The samplab test runs its own sampler on the same logits and compares.
"""

import ctypes
import json
import sys

import llama_cpp
import numpy as np

TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


def chain(settings, seed):
    smpl = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add = lambda s: llama_cpp.llama_sampler_chain_add(smpl, s)
    add(llama_cpp.llama_sampler_init_min_p(settings["min_p"], 0))
    add(llama_cpp.llama_sampler_init_temp_ext(settings["temperature"], 0.0, 1.0))
    add(llama_cpp.llama_sampler_init_adaptive_p(settings["target"], settings["decay"], seed))
    return smpl


def draw(smpl, raw):
    """Applies the chain to a fresh copy of the candidates; the id it selected."""
    data = raw.copy()
    array = llama_cpp.llama_token_data_array(
        data=data.ctypes.data_as(llama_cpp.llama_token_data_p),
        size=len(data),
        selected=-1,
        sorted=False,
    )
    llama_cpp.llama_sampler_apply(smpl, ctypes.byref(array))
    return int(ctypes.cast(array.data, llama_cpp.llama_token_data_p)[array.selected].id)


def main():
    settings = json.load(sys.stdin)
    logits = np.array(settings["logits"], dtype=np.float32)
    raw = np.zeros(len(logits), dtype=TOKEN_DATA)
    raw["id"] = np.arange(len(logits), dtype=np.int32)
    raw["logit"] = logits
    steps = settings["steps"]

    marginals = [{} for _ in range(steps)]
    for run in range(settings["runs"]):
        smpl = chain(settings, run)
        for step in range(steps):
            token = draw(smpl, raw)
            marginals[step][token] = marginals[step].get(token, 0) + 1
            llama_cpp.llama_sampler_accept(smpl, token)
        llama_cpp.llama_sampler_free(smpl)

    paths = []
    for path in range(settings["paths"]):
        smpl = chain(settings, 1_000_000 + path)
        tokens, conditionals = [], []
        for _ in range(steps):
            counts = {}
            for _ in range(settings["repeats"]):
                token = draw(smpl, raw)
                counts[token] = counts.get(token, 0) + 1
            token = draw(smpl, raw)
            llama_cpp.llama_sampler_accept(smpl, token)
            tokens.append(token)
            conditionals.append(counts)
        llama_cpp.llama_sampler_free(smpl)
        paths.append({"tokens": tokens, "conditionals": conditionals})

    as_json = lambda counts: {str(k): v for k, v in sorted(counts.items())}
    print(
        json.dumps(
            {
                "marginals": [as_json(c) for c in marginals],
                "paths": [
                    {"tokens": p["tokens"], "conditionals": [as_json(c) for c in p["conditionals"]]}
                    for p in paths
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
