use super::*;
use candle_core::Device;
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use format::SUB;

/// Every format we run, with the byte offsets of its scales inside a block (f16, or
/// MXFP4's E8M0 byte).
const FORMATS: &[(QuantType, &[usize])] = &[
    (QuantType::Ggml(GgmlDType::Q4_0), &[0]),
    (QuantType::Ggml(GgmlDType::Q4_1), &[0, 2]),
    (QuantType::Ggml(GgmlDType::Q5_0), &[0]),
    (QuantType::Ggml(GgmlDType::Q5_1), &[0, 2]),
    (QuantType::Ggml(GgmlDType::Q8_0), &[0]),
    (QuantType::Ggml(GgmlDType::Q4K), &[0, 2]),
    (QuantType::Ggml(GgmlDType::Q5K), &[0, 2]),
    (QuantType::Ggml(GgmlDType::Q6K), &[208]),
    (QuantType::Ggml(GgmlDType::Q2K), &[80, 82]),
    (QuantType::Ggml(GgmlDType::Q3K), &[108]),
    (QuantType::Mxfp4, &[0]),
];

struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// An f16 scale: mostly ordinary, sometimes subnormal, sometimes the largest finite.
    fn scale(&mut self) -> u16 {
        let sign = (self.next() as u16 & 1) << 15;
        sign | match self.next() % 8 {
            0 => (self.next() % 0x3ff) as u16 + 1,
            1 => 0x7bff,
            _ => 0x2000 + (self.next() % 0x1800) as u16,
        }
    }

    /// An E8M0 scale: mostly near 1, sometimes the two subnormal ones, sometimes 2^72 (far
    /// beyond f16, far from overflowing a sum of products).
    fn e8m0(&mut self) -> u8 {
        match self.next() % 8 {
            0 => (self.next() % 2) as u8,
            1 => 200,
            _ => 110 + (self.next() % 36) as u8,
        }
    }
}

/// Random blocks: random quant bytes and packed K-quant scales, finite scales.
fn random_blocks(
    dtype: QuantType,
    scales_at: &[usize],
    rows: usize,
    cols: usize,
    seed: u64,
) -> Vec<u8> {
    let mut noise = Noise((seed * 0x9e37_79b9) | 1);
    let (block, block_bytes) = dtype.block();
    let blocks = rows * cols / block;
    let mut data: Vec<u8> = (0..blocks * block_bytes)
        .map(|_| noise.next() as u8)
        .collect();
    for block in data.chunks_exact_mut(block_bytes) {
        for &at in scales_at {
            if dtype == QuantType::Mxfp4 {
                block[at] = noise.e8m0();
            } else {
                block[at..at + 2].copy_from_slice(&noise.scale().to_le_bytes());
            }
        }
    }
    data
}

/// candle's dequantization of the same bytes (ours for MXFP4, which candle lacks; it is
/// checked against GGML's in `mxfp4_fixture`): the reference values.
fn dequantized(dtype: QuantType, rows: usize, cols: usize, data: &[u8]) -> Vec<f32> {
    let QuantType::Ggml(dtype) = dtype else {
        let mut values = vec![0f32; rows * cols];
        crate::model::formats::mxfp4::dequantize(data, &mut values);
        return values;
    };
    let q = qtensor_from_ggml(dtype, data, vec![rows, cols], &Device::Cpu).unwrap();
    q.dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

/// Every way this CPU can run a product: f32 on each instruction set, then VNNI.
fn paths() -> Vec<Arithmetic> {
    let mut paths = vec![Arithmetic::F32(Isa::Portable)];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            paths.push(Arithmetic::F32(Isa::Avx2));
        }
        if is_x86_feature_detected!("avx512f") {
            paths.push(Arithmetic::F32(Isa::Avx512));
        }
        if vnni::available() {
            paths.push(Arithmetic::Vnni);
        } else {
            eprintln!("this CPU has no AVX-512 VNNI and VBMI: the 16-bit path is not tested");
        }
    }
    paths
}

/// How far from `x` a path may take an activation: 0 for f32; for VNNI the block's step,
/// at most twice its largest magnitude / 32512 (see `vnni`).
fn activation_error(path: Arithmetic, x: &[f32], j: usize) -> f64 {
    match path {
        Arithmetic::F32(_) => 0.0,
        #[cfg(target_arch = "x86_64")]
        Arithmetic::Vnni => {
            let block = &x[j / SUB * SUB..][..SUB];
            let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            2.0 * f64::from(max) / (127.0 * 256.0)
        }
    }
}

/// Output rows not a multiple of the tile; 1..=9 activation rows, and a batch across the
/// group and chunk edges.
fn shapes(block: usize) -> Vec<(usize, usize, usize)> {
    let mut shapes: Vec<_> = (1..=9)
        .map(|m| (2 * m + 3, block * (1 + m % 3), m))
        .collect();
    shapes.push((37, 2 * block, 70));
    shapes
}

#[test]
fn expands_every_weight_exactly_as_candle_dequantizes() {
    for &(dtype, scales_at) in FORMATS {
        let (rows, cols) = (19, 2 * dtype.block().0);
        let data = random_blocks(dtype, scales_at, rows, cols, 1);
        let w = QuantMatrix::from_gguf(dtype, rows, cols, &data)
            .unwrap()
            .unwrap();
        // The identity as activations gives back every weight, column by column.
        let identity: Vec<f32> = (0..cols * cols)
            .map(|i| f32::from(u8::from(i / cols == i % cols)))
            .collect();
        let want = dequantized(dtype, rows, cols, &data);
        // VNNI splits a 1 exactly (a power of two), and each weight meets it alone.
        for path in paths() {
            let y = w.matmul_with(path, &identity);
            for r in 0..rows {
                for c in 0..cols {
                    let (got, want) = (y[c * rows + r], want[r * cols + c]);
                    // Equal as numbers: a sum that starts at +0 cannot give back -0.
                    assert_eq!(got, want, "{dtype:?} {path:?} [{r}, {c}]");
                }
            }
        }
    }
}

/// Against the f64 product of candle's dequantized weights. The weights are exact, so the
/// f32 paths' only error is summation's, for every format (see `assert_near_exact`).
#[test]
fn a_row_looked_up_is_candles_dequantized_row_to_the_bit() {
    for &(dtype, scales_at) in FORMATS {
        let (rows, cols) = (19, 3 * dtype.block().0);
        let data = random_blocks(dtype, scales_at, rows, cols, 3);
        let w = QuantMatrix::from_gguf(dtype, rows, cols, &data)
            .unwrap()
            .unwrap();
        let expected = dequantized(dtype, rows, cols, &data);
        let mut row = vec![0f32; cols];
        for r in 0..rows {
            w.row(r, &mut row);
            for (c, (got, want)) in row.iter().zip(&expected[r * cols..]).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{dtype:?} row {r} column {c}"
                );
            }
        }
    }
}

#[test]
fn matches_the_exact_product_for_every_format_and_batch_size() {
    for (seed, &(dtype, scales_at)) in FORMATS.iter().enumerate() {
        for (n, k, m) in shapes(dtype.block().0) {
            let seed = seed as u64 * 100 + m as u64;
            let data = random_blocks(dtype, scales_at, n, k, seed);
            let w = QuantMatrix::from_gguf(dtype, n, k, &data).unwrap().unwrap();
            let wd = dequantized(dtype, n, k, &data);
            let mut noise = Noise(seed + 7);
            let x: Vec<f32> = (0..m * k).map(|_| noise.uniform()).collect();
            for path in paths() {
                let what = format!("{dtype:?} {path:?} [{n}, {k}] x {m}");
                assert_near_exact(&what, path, &wd, k, &x, &w.matmul_with(path, &x));
            }
        }
    }
}

/// `y` = `x wd^T` (both `[.., k]`) within `path`'s error: the f32 sum's, at
/// most `(cols + 1) · ε · Σ|w_j x_j|` plus half the least subnormal for each rounding that
/// underflows, and VNNI's rounding of activations, `Σ|w_j| e_j` (see `activation_error`).
fn assert_near_exact(what: &str, path: Arithmetic, wd: &[f32], k: usize, x: &[f32], y: &[f32]) {
    let n = wd.len() / k;
    assert_eq!(y.len(), x.len() / k * n, "{what}");
    let underflow = 2f64.powi(-150);
    for (i, xi) in x.chunks_exact(k).enumerate() {
        for (r, wr) in wd.chunks_exact(k).enumerate() {
            let terms = wr
                .iter()
                .zip(xi)
                .map(|(&a, &b)| f64::from(a) * f64::from(b));
            let want: f64 = terms.clone().sum();
            let magnitude: f64 = terms.map(f64::abs).sum();
            let rounding: f64 = wr
                .iter()
                .enumerate()
                .map(|(j, &a)| f64::from(a).abs() * activation_error(path, xi, j))
                .sum();
            let allowed = (k + 1) as f64
                * (f64::from(f32::EPSILON) * (magnitude + rounding) + 3.0 * underflow)
                + rounding;
            let got = f64::from(y[i * n + r]);
            assert!(
                (got - want).abs() <= allowed,
                "{what}: y[{i}][{r}] = {got}, want {want} ± {allowed}"
            );
        }
    }
}

/// A row's result is the same bits alone or in any batch (29 rows: groups of 16, 8, 4
/// and 1), on every path; the f32 vector kernels agree with each other bit for bit (both
/// fuse every multiply-add).
#[test]
fn rows_do_not_depend_on_their_batch_and_vector_kernels_agree() {
    for (seed, &(dtype, scales_at)) in FORMATS.iter().enumerate() {
        let (n, k, m) = (21, 2 * dtype.block().0, 29);
        let data = random_blocks(dtype, scales_at, n, k, seed as u64 + 50);
        let w = QuantMatrix::from_gguf(dtype, n, k, &data).unwrap().unwrap();
        let mut noise = Noise(seed as u64 + 3);
        let x: Vec<f32> = (0..m * k).map(|_| noise.uniform()).collect();
        let vector: Vec<Vec<f32>> = paths()
            .into_iter()
            .filter_map(|path| {
                let batch = w.matmul_with(path, &x);
                let alone: Vec<f32> = x
                    .chunks_exact(k)
                    .flat_map(|xi| w.matmul_with(path, xi))
                    .collect();
                assert_eq!(batch, alone, "{dtype:?} {path:?}");
                matches!(path, Arithmetic::F32(isa) if isa != Isa::Portable).then_some(batch)
            })
            .collect();
        for other in vector.iter().skip(1) {
            assert_eq!(&vector[0], other, "{dtype:?}");
        }
    }
}

#[test]
fn rejects_blocks_that_do_not_fit_the_shape() {
    use GgmlDType::{F32, Q4_1, Q4K};
    let [q4_1, q4k, f32] = [Q4_1, Q4K, F32].map(QuantType::Ggml);
    let data = random_blocks(q4_1, &[0, 2], 4, 64, 1);
    assert!(QuantMatrix::from_gguf(q4_1, 4, 64, &data).is_ok());
    assert!(QuantMatrix::from_gguf(q4_1, 4, 32, &data).is_err());
    assert!(QuantMatrix::from_gguf(q4k, 4, 64, &data).is_err());
    assert!(QuantMatrix::from_gguf(f32, 4, 64, &data).unwrap().is_none());
    assert!(QuantMatrix::from_gguf(q4_1, 0, 64, &[]).is_err());
    assert!(QuantMatrix::from_gguf(q4_1, 4, 0, &[]).is_err());
    assert!(QuantMatrix::from_gguf(QuantType::Mxfp4, 4, 64, &data).is_err());
}

/// An activation that is not finite makes its own row's results not finite on every path
/// (never a finite number that hides it), and leaves the other rows alone.
#[test]
fn an_activation_not_finite_spoils_only_its_row() {
    let (dtype, scales_at) = FORMATS[1];
    let (n, k) = (21, 64);
    let data = random_blocks(dtype, scales_at, n, k, 77);
    let w = QuantMatrix::from_gguf(dtype, n, k, &data).unwrap().unwrap();
    for bad in [f32::NAN, f32::INFINITY] {
        let mut x: Vec<f32> = (0..2 * k).map(|i| (i as f32 * 0.37).sin()).collect();
        x[k + 40] = bad;
        for path in paths() {
            let y = w.matmul_with(path, &x);
            let clean = w.matmul_with(path, &x[..k]);
            assert_eq!(&y[..n], &clean[..], "{path:?}: the clean row");
            assert!(
                y[n..].iter().all(|v| !v.is_finite()),
                "{path:?} {bad}: {y:?}"
            );
        }
    }
}

/// GGML's dequantization of MXFP4 blocks (written by `scripts/make_mxfp4_fixture.py` with the
/// gguf package: quantized rows, and every code under the E8M0 scales 0, 1, 2, 127..=129 and
/// 254) is ours and our kernel's to the bit, and every path multiplies those values exactly.
#[test]
fn mxfp4_is_ggmls_dequantization_to_the_bit_and_multiplies_exactly() {
    let file = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mxfp4.bin"
    ));
    let u32_at = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
    let (rows, cols) = (u32_at(0), u32_at(4));
    let (data, values) = file[8..].split_at(rows * cols / 32 * 17);
    let want: Vec<f32> = values
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(want.len(), rows * cols);
    let mut ours = vec![f32::NAN; rows * cols];
    crate::model::formats::mxfp4::dequantize(data, &mut ours);
    let w = QuantMatrix::from_gguf(QuantType::Mxfp4, rows, cols, data)
        .unwrap()
        .unwrap();
    let mut row = vec![f32::NAN; cols];
    for r in 0..rows {
        w.row(r, &mut row);
        for c in 0..cols {
            let want = want[r * cols + c].to_bits();
            assert_eq!(ours[r * cols + c].to_bits(), want, "dequantized [{r}, {c}]");
            assert_eq!(row[c].to_bits(), want, "the kernel's row [{r}, {c}]");
        }
    }
    // Small activations keep the sums of 2^126-scaled weights finite.
    let mut noise = Noise(39);
    for m in 1..=9 {
        let x: Vec<f32> = (0..m * cols).map(|_| noise.uniform() / 256.0).collect();
        for path in paths() {
            let what = format!("MXFP4 fixture {path:?} x {m}");
            assert_near_exact(&what, path, &want, cols, &x, &w.matmul_with(path, &x));
        }
    }
}
