"""What llama.cpp computes for a model file: prompt ids, the logprob of every prompt token and
greedy tokens with their logprobs, with an f32 KV cache and flash attention off.

    python scripts/llama_reference.py MODEL.gguf OUT.json [--exact] [--greedy N] PROMPT...

`--exact` also runs the file's exact twin (every tensor dequantized to F32, written beside
OUT.json's cache as MODEL.f32.gguf): the model's own distribution, without llama.cpp's 8-bit
activations. Needs llama-cpp-python (0.3.36) and gguf (0.19); scripts/llama-server.sh makes a
venv with the first.
"""

import argparse
import json
import os
import sys

import numpy as np


def exact_twin(path):
    """`path` with every quantized tensor dequantized to F32, written once next to it."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType
    from gguf.quants import dequantize

    out = path[: -len(".gguf")] + ".f32.gguf"
    if os.path.exists(out):
        return out
    reader = GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(out + ".partial", arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub)
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        shape = list(reversed(tensor.shape.tolist()))
        writer.add_tensor(tensor.name, values.reshape(shape), raw_dtype=GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(out + ".partial", out)
    return out


def log_softmax(logits):
    logits = logits.astype(np.float64)
    top = logits.max()
    return logits - top - np.log(np.exp(logits - top).sum())


def run(path, prompts, greedy, n_ctx):
    from llama_cpp import Llama

    llm = Llama(
        model_path=path,
        n_ctx=n_ctx,
        n_batch=512,
        n_threads=2,
        logits_all=True,
        type_k=0,
        type_v=0,
        flash_attn=False,
        verbose=False,
    )
    results = {}
    for text in prompts:
        tokens = llm.tokenize(text.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(tokens)
        scores = np.array(llm.scores[: len(tokens)])
        prompt_logprobs = [None] + [
            float(log_softmax(scores[i - 1])[tokens[i]]) for i in range(1, len(tokens))
        ]
        greedy_tokens, greedy_logprobs = [], []
        for _ in range(greedy):
            logprobs = log_softmax(np.array(llm.scores[llm.n_tokens - 1]))
            token = int(np.argmax(logprobs))
            greedy_tokens.append(token)
            greedy_logprobs.append(float(logprobs[token]))
            llm.eval([token])
        results[text] = {
            "prompt_tokens": tokens,
            "prompt_logprobs": prompt_logprobs,
            "greedy_tokens": greedy_tokens,
            "greedy_logprobs": greedy_logprobs,
            "greedy_text": llm.detokenize(greedy_tokens).decode(errors="replace"),
        }
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--greedy", type=int, default=24)
    parser.add_argument("--n-ctx", type=int, default=1024)
    parser.add_argument("--label", default="file")
    parser.add_argument("prompts", nargs="+")
    args = parser.parse_args()
    import llama_cpp

    runs = {args.label: run(args.model, args.prompts, args.greedy, args.n_ctx)}
    if args.exact:
        runs["exact"] = run(exact_twin(args.model), args.prompts, args.greedy, args.n_ctx)
    prompts = {}
    for text in args.prompts:
        first = runs[args.label][text]
        case = {"prompt_tokens": first["prompt_tokens"]}
        for label, results in runs.items():
            result = dict(results[text])
            del result["prompt_tokens"]
            case[label] = result
        prompts[text] = case
    reference = {
        "source": f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, CPU, 2 threads, f32 KV "
        f"cache, no flash attention) on {os.path.basename(args.model)}"
        + (" and on its exact twin (every tensor dequantized to F32)" if args.exact else ""),
        "prompts": prompts,
    }
    with open(args.out, "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
