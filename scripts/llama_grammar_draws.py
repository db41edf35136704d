#!/usr/bin/env python3
"""llama.cpp's first token under a GBNF grammar, drawn as its common sampler draws it.

Usage: llama_grammar_draws.py MODEL.gguf PROMPT GRAMMAR TOP_K DRAWS

Prints one JSON object: the prompt's last logits as llama.cpp computes them, the ids its grammar
sampler allows at the first position, and how often each id was drawn in DRAWS draws by
common_sampler_sample's rule: run the chain (top_k, then dist) on the raw candidates; when the
token breaks the grammar, apply the grammar to fresh candidates, run the chain again and draw
again from the same random stream. The samplab test runs its own sampler on the same logits and
compares the two distributions.
"""

import ctypes
import json
import sys

import llama_cpp
import numpy as np

TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


def candidates(logits):
    data = np.zeros(len(logits), dtype=TOKEN_DATA)
    data["id"] = np.arange(len(logits), dtype=np.int32)
    data["logit"] = logits
    return data


def apply(sampler, data):
    """Runs a sampler on a candidate buffer; returns the array (size, selected) it left."""
    array = llama_cpp.llama_token_data_array(
        data=data.ctypes.data_as(llama_cpp.llama_token_data_p),
        size=len(data),
        selected=-1,
        sorted=False,
    )
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
    return array


def main():
    model, prompt, grammar, top_k, draws = sys.argv[1:6]
    top_k, draws = int(top_k), int(draws)
    llm = llama_cpp.Llama(
        model_path=model, n_ctx=512, n_threads=2, logits_all=True, verbose=False
    )
    tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    llm.eval(tokens)
    logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    grammar_sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not grammar_sampler:
        sys.exit("llama.cpp refused the grammar")

    # The grammar's verdict on every token at the first position. It never changes here (no
    # draw is accepted into the grammar), so each resampling starts from a copy of it.
    masked = candidates(logits)
    array = apply(grammar_sampler, masked)
    masked = np.ctypeslib.as_array(array.data, shape=(array.size,)).copy()
    allowed = masked["id"][np.isfinite(masked["logit"])]
    if np.all(logits == 0):
        sys.exit("llama.cpp returned no logits for the prompt")

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(top_k))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(1234))
    counts = {}
    resampled = 0
    raw = candidates(logits)
    for _ in range(draws):
        data = raw.copy()
        array = apply(chain, data)
        chosen = ctypes.cast(array.data, llama_cpp.llama_token_data_p)[array.selected].id
        single = candidates(np.array([0.0], dtype=np.float32))
        single["id"][0] = chosen
        check = apply(grammar_sampler, single)
        if not np.isfinite(ctypes.cast(check.data, llama_cpp.llama_token_data_p)[0].logit):
            resampled += 1
            data = masked.copy()
            array = apply(chain, data)
            chosen = ctypes.cast(array.data, llama_cpp.llama_token_data_p)[array.selected].id
        counts[int(chosen)] = counts.get(int(chosen), 0) + 1
    print(
        json.dumps(
            {
                "logits": [float(x) for x in logits],
                "allowed": [int(i) for i in allowed],
                "counts": {str(k): v for k, v in sorted(counts.items())},
                "resampled": resampled,
            }
        )
    )


if __name__ == "__main__":
    main()
