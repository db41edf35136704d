"""llama.cpp's token ids of raw prompts that hold special-token text, parsed (`parse_special =
true`, as llama-server and vLLM read a raw prompt) and kept as text (`parse_special = false`).

    python scripts/special_token_reference.py SMOLLM2.gguf GEMMA3.gguf > tests/fixtures/special_tokens.json

Needs llama-cpp-python (0.3.36). The tests read the output and need no peer.
"""

import json
import sys

from llama_cpp import Llama

TEXTS = {
    "smollm2": [
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        "plain text, no specials",
        "a<|endoftext|>b <|im_end|>",
        "<|im_start|",
    ],
    "gemma3": [
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
        "<bos>twice",
        "x<eos>y",
    ],
}


def main():
    out = {"source": "llama.cpp (llama-cpp-python 0.3.36): Llama.tokenize(text, add_bos=True, special=...)"}
    for (family, texts), path in zip(TEXTS.items(), sys.argv[1:]):
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        out[family] = {
            text: {
                "parsed": llm.tokenize(text.encode(), add_bos=True, special=True),
                "literal": llm.tokenize(text.encode(), add_bos=True, special=False),
            }
            for text in texts
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
