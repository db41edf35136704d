"""MXFP4 blocks and GGML's dequantization of them, and a small MXFP4 model.

    python scripts/make_mxfp4_fixture.py [tests/fixtures]

`mxfp4.bin`, for the kernels' bit-for-bit test: a [ROWS, COLS] matrix: little-endian u32 ROWS and COLS, its MXFP4 blocks (17 bytes
per 32 values, row by row), then the f32 values the gguf package (0.19) dequantizes them to.
Some rows are the package's quantization of random values (ordinary, huge and tiny ones);
the rest are written by hand, to reach every code (8, the "negative zero", among them) under
the extreme scales E8M0 0, 1 and 254 that quantizing finite values rarely or never gives.

`mxfp4-quantize.bin`, for our quantizer's test: little-endian u32 BLOCKS, then BLOCKS x 32 f32
values, then the package's MXFP4 quantization of them (17 bytes a block). The blocks hold
random values at many scales, ties halfway between codes, zeros of both signs, and largest
magnitudes just below, at and above powers of two.

`mxfp4-qwen3moe.gguf`: the random-weight qwen3moe of make_arch_fixtures.py with every matrix
(attention, router, the experts' stacks, the embedding) in MXFP4, for the loader's tests.
Needs gguf (0.19) and numpy.
"""

import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

ROWS, COLS = 8, 96
BLOCK_BYTES = 17


def hand_written_row(rng, scales, codes_for):
    """One row of blocks: block `i` has E8M0 `scales[i]` and codes drawn by `codes_for(i)`."""
    row = bytearray()
    for i, e in enumerate(scales):
        codes = codes_for(i)
        row.append(e)
        row += bytes(int(codes[j]) | int(codes[j + 16]) << 4 for j in range(16))
    return bytes(row)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    write_blocks(os.path.join(root, "mxfp4.bin"))
    write_quantized(os.path.join(root, "mxfp4-quantize.bin"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_arch_fixtures import qwen3moe, write_gguf

    family, tensors, metadata, _, _ = qwen3moe()
    model = os.path.join(root, "mxfp4-qwen3moe.gguf")
    write_gguf(model, family, tensors, metadata, GGMLQuantizationType.MXFP4)
    print(f"wrote {model}")


def write_blocks(out):
    rng = np.random.default_rng(39)
    quantized_rows = np.stack(
        [
            rng.normal(0, 0.02, COLS),
            rng.normal(0, 1.0, COLS),
            rng.uniform(-5, 5, COLS) * np.repeat([1.0, 0.0, 1e-3], 32),
            rng.normal(0, 1e30, COLS),
            rng.normal(0, 1e-30, COLS),
        ]
    ).astype(np.float32)
    blocks = quantize(quantized_rows, GGMLQuantizationType.MXFP4).tobytes()
    every_code = lambda i: rng.permutation(np.arange(32) % 16)  # noqa: E731
    # At 2^126 a code beyond ±3 overflows f32 (GGML's dequantization gives infinity).
    finite_at_254 = lambda i: rng.choice([0, 1, 2, 3, 8, 9, 10, 11], 32)  # noqa: E731
    blocks += hand_written_row(rng, [0, 1, 2], every_code)
    blocks += hand_written_row(rng, [127, 128, 129], every_code)
    blocks += hand_written_row(rng, [254, 0, 1], finite_at_254)
    assert len(blocks) == ROWS * COLS // 32 * BLOCK_BYTES
    raw = np.frombuffer(blocks, dtype=np.uint8).reshape(ROWS, -1)
    values = dequantize(raw, GGMLQuantizationType.MXFP4).astype("<f4")
    assert values.shape == (ROWS, COLS) and np.isfinite(values).all()
    with open(out, "wb") as f:
        f.write(struct.pack("<II", ROWS, COLS))
        f.write(blocks)
        f.write(values.tobytes())
    print(f"wrote {out}: {ROWS} x {COLS} MXFP4 values")


def write_quantized(out):
    rng = np.random.default_rng(4)
    blocks = [rng.normal(0, sigma, 32) for sigma in (1e-30, 1e-3, 0.02, 1.0, 7.0, 1e30)]
    blocks += [rng.uniform(-1, 1, 32) * 10.0 ** rng.integers(-20, 20) for _ in range(20)]
    # Halfway between neighbouring codes' values under the scale 0.5 that a largest 6 gives.
    halves = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0])
    blocks.append(np.concatenate([halves, -halves, halves / 2, -halves / 2]))
    blocks.append(np.zeros(32))
    blocks.append(np.where(np.arange(32) % 2 == 0, 0.0, -0.0))
    for power in (-3, 0, 5):
        for amax in np.float32(2.0**power) * np.float32([1 - 2**-24, 1, 1 + 2**-23]):
            block = rng.uniform(-amax, amax, 32)
            block[rng.integers(32)] = -amax
            blocks.append(block)
    values = np.stack(blocks).astype("<f4")
    quantized = quantize(values.reshape(1, -1), GGMLQuantizationType.MXFP4).tobytes()
    assert len(quantized) == len(blocks) * BLOCK_BYTES
    with open(out, "wb") as f:
        f.write(struct.pack("<I", len(blocks)))
        f.write(values.tobytes())
        f.write(quantized)
    print(f"wrote {out}: {len(blocks)} blocks quantized to MXFP4")


if __name__ == "__main__":
    main()
