#!/usr/bin/env python3
"""llama.cpp figures to set beside `samplab bench` (same prompt ids, same thread count).

Prefill: one pass over N prompt tokens. Decode: single-stream steps of one token each.
Needs llama-cpp-python (built as issue 19 says: without AMX on this machine); the tests
never use it.

    python3 benches/llamacpp_peer.py MODEL.gguf [--threads 2] [--prompt-tokens 512] [--tokens 128]
"""

import argparse
import json
import time

from llama_cpp import Llama


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
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

    print(
        json.dumps(
            {
                "model": args.model,
                "threads": args.threads,
                "prefill_tokens": args.prompt_tokens,
                "prefill_tok_per_s": round(prefill, 1),
                "decode_tok_per_s": round(decode, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
