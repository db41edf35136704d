#!/usr/bin/env python3
"""llama.cpp figures to set beside `samplab bench` (same prompt ids, same thread count).

Prefill: one pass over N prompt tokens. Decode: single-stream steps of one token each.
With --parallel N, also N sequences decoding side by side, one token each per step in one
batch (as `samplab bench --samples N` decodes N samples): their aggregate tokens a second.
Needs llama-cpp-python (built as issue 19 says: without AMX on this machine); the tests
never use it.

    python3 benches/llamacpp_peer.py MODEL.gguf [--threads 2] [--prompt-tokens 512] [--tokens 128]
        [--parallel 8 [--unified]]
"""

import argparse
import json
import time

import llama_cpp
from llama_cpp import Llama


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--parallel", type=int, default=0, help="sequences decoding together")
    parser.add_argument(
        "--unified",
        action="store_true",
        help="the parallel sequences share one KV cache, as samplab's llama.cpp backend keeps them",
    )
    args = parser.parse_args()

    llm = Llama(
        model_path=args.model,
        n_ctx=args.prompt_tokens + args.tokens + 16,
        n_batch=args.prompt_tokens,
        n_ubatch=args.prompt_tokens,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        verbose=False,
    )
    vocab = llm.n_vocab()
    # The ids samplab bench uses; their values do not change the work done.
    prompt = [(i * 7919 + 1) % vocab for i in range(args.prompt_tokens)]

    prefill, decode = 0.0, 0.0
    for _ in range(args.repeats):
        llm.reset()
        llm.eval(prompt[:8])
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt)
        prefill = max(prefill, args.prompt_tokens / (time.perf_counter() - start))

        llm.reset()
        llm.eval(prompt[:1])
        token = 7
        start = time.perf_counter()
        for _ in range(args.tokens):
            llm.eval([token])
        decode = max(decode, args.tokens / (time.perf_counter() - start))

    figures = {
        "model": args.model,
        "threads": args.threads,
        "prefill_tokens": args.prompt_tokens,
        "prefill_tok_per_s": round(prefill, 1),
        "decode_tok_per_s": round(decode, 1),
    }
    if args.parallel > 0:
        del llm
        figures["parallel"] = args.parallel
        figures["parallel_tok_per_s"] = round(parallel_decode(args, prompt), 1)
    print(json.dumps(figures, indent=1))


def parallel_decode(args, prompt):
    """Aggregate tokens a second of `args.parallel` sequences, each after the prompt's first
    16 ids, stepping one token each in one batch; best of `args.repeats` runs."""
    n, lead = args.parallel, prompt[:16]
    width = max(n, len(lead))  # the widest batch: the lead of one sequence, or a step of all
    model = llama_cpp.llama_model_load_from_file(
        args.model.encode(), llama_cpp.llama_model_default_params()
    )
    params = llama_cpp.llama_context_default_params()
    params.n_seq_max = n
    params.kv_unified = args.unified
    params.n_ctx = n * (len(lead) + args.tokens + 16)
    params.n_batch = params.n_ubatch = width
    params.n_threads = params.n_threads_batch = args.threads
    ctx = llama_cpp.llama_init_from_model(model, params)
    batch = llama_cpp.llama_batch_init(width, 0, n)

    def decode(entries):
        """entries: (token, position, sequence, wants logits)."""
        batch.n_tokens = len(entries)
        for i, (token, pos, seq, logits) in enumerate(entries):
            batch.token[i], batch.pos[i] = token, pos
            batch.n_seq_id[i], batch.seq_id[i][0] = 1, seq
            batch.logits[i] = logits
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise SystemExit("llama_decode failed")

    best = 0.0
    for _ in range(args.repeats):
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        for seq in range(n):
            decode([(t, p, seq, p == len(lead) - 1) for p, t in enumerate(lead)])
        start = time.perf_counter()
        for step in range(args.tokens):
            decode([(7, len(lead) + step, seq, True) for seq in range(n)])
        best = max(best, n * args.tokens / (time.perf_counter() - start))
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return best


if __name__ == "__main__":
    main()
