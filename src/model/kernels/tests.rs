use super::*;
use candle_core::Device;
use candle_core::quantized::ggml_file::qtensor_from_ggml;

/// Every format we run, with the byte offsets of its f16 scales inside a block.
const FORMATS: &[(GgmlDType, &[usize])] = &[
    (GgmlDType::Q4_0, &[0]),
    (GgmlDType::Q4_1, &[0, 2]),
    (GgmlDType::Q5_0, &[0]),
    (GgmlDType::Q5_1, &[0, 2]),
    (GgmlDType::Q8_0, &[0]),
    (GgmlDType::Q4K, &[0, 2]),
    (GgmlDType::Q5K, &[0, 2]),
    (GgmlDType::Q6K, &[208]),
    (GgmlDType::Q2K, &[80, 82]),
    (GgmlDType::Q3K, &[108]),
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
}

/// Random blocks: random quant bytes and packed K-quant scales, finite f16 scales.
fn random_blocks(
    dtype: GgmlDType,
    scales_at: &[usize],
    rows: usize,
    cols: usize,
    seed: u64,
) -> Vec<u8> {
    let mut noise = Noise((seed * 0x9e37_79b9) | 1);
    let blocks = rows * cols / dtype.block_size();
    let mut data: Vec<u8> = (0..blocks * dtype.type_size())
        .map(|_| noise.next() as u8)
        .collect();
    for block in data.chunks_exact_mut(dtype.type_size()) {
        for &at in scales_at {
            block[at..at + 2].copy_from_slice(&noise.scale().to_le_bytes());
        }
    }
    data
}

/// candle's dequantization of the same bytes: the reference values.
fn dequantized(dtype: GgmlDType, rows: usize, cols: usize, data: &[u8]) -> Vec<f32> {
    let q = qtensor_from_ggml(dtype, data, vec![rows, cols], &Device::Cpu).unwrap();
    q.dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

fn isas() -> Vec<Isa> {
    let mut isas = vec![Isa::Portable];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            isas.push(Isa::Avx2);
        }
        if is_x86_feature_detected!("avx512f") {
            isas.push(Isa::Avx512);
        }
    }
    isas
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
        let (rows, cols) = (19, 2 * dtype.block_size());
        let data = random_blocks(dtype, scales_at, rows, cols, 1);
        let w = QuantMatrix::from_gguf(dtype, rows, cols, &data)
            .unwrap()
            .unwrap();
        // The identity as activations gives back every weight, column by column.
        let identity: Vec<f32> = (0..cols * cols)
            .map(|i| f32::from(u8::from(i / cols == i % cols)))
            .collect();
        let want = dequantized(dtype, rows, cols, &data);
        for isa in isas() {
            let y = w.matmul_with(isa, &identity);
            for r in 0..rows {
                for c in 0..cols {
                    let (got, want) = (y[c * rows + r], want[r * cols + c]);
                    // Equal as numbers: a sum that starts at +0 cannot give back -0.
                    assert_eq!(got, want, "{dtype:?} {isa:?} [{r}, {c}]");
                }
            }
        }
    }
}

/// Against the f64 product of candle's dequantized weights. The weights are exact, so the
/// only error is f32 summation: at most `(cols + 1) · ε · Σ|w_j x_j|` for every format.
#[test]
fn a_row_looked_up_is_candles_dequantized_row_to_the_bit() {
    for &(dtype, scales_at) in FORMATS {
        let (rows, cols) = (19, 3 * dtype.block_size());
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
        for (n, k, m) in shapes(dtype.block_size()) {
            let seed = seed as u64 * 100 + m as u64;
            let data = random_blocks(dtype, scales_at, n, k, seed);
            let w = QuantMatrix::from_gguf(dtype, n, k, &data).unwrap().unwrap();
            let wd = dequantized(dtype, n, k, &data);
            let mut noise = Noise(seed + 7);
            let x: Vec<f32> = (0..m * k).map(|_| noise.uniform()).collect();
            for isa in isas() {
                let y = w.matmul_with(isa, &x);
                assert_eq!(y.len(), m * n);
                for (i, xi) in x.chunks_exact(k).enumerate() {
                    for (r, wr) in wd.chunks_exact(k).enumerate() {
                        let terms = wr
                            .iter()
                            .zip(xi)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b));
                        let want: f64 = terms.clone().sum();
                        let magnitude: f64 = terms.map(f64::abs).sum();
                        let allowed = (k + 1) as f64 * f64::from(f32::EPSILON) * magnitude;
                        let got = f64::from(y[i * n + r]);
                        assert!(
                            (got - want).abs() <= allowed,
                            "{dtype:?} {isa:?} [{n}, {k}] x {m}: y[{i}][{r}] = {got}, want {want} ± {allowed}"
                        );
                    }
                }
            }
        }
    }
}

/// A row's result is the same bits alone or in any batch (29 rows: groups of 16, 8, 4
/// and 1), on every instruction set; the
/// vector kernels agree with each other bit for bit (both fuse every multiply-add).
#[test]
fn rows_do_not_depend_on_their_batch_and_vector_kernels_agree() {
    for (seed, &(dtype, scales_at)) in FORMATS.iter().enumerate() {
        let (n, k, m) = (21, 2 * dtype.block_size(), 29);
        let data = random_blocks(dtype, scales_at, n, k, seed as u64 + 50);
        let w = QuantMatrix::from_gguf(dtype, n, k, &data).unwrap().unwrap();
        let mut noise = Noise(seed as u64 + 3);
        let x: Vec<f32> = (0..m * k).map(|_| noise.uniform()).collect();
        let vector: Vec<Vec<f32>> = isas()
            .into_iter()
            .map(|isa| {
                let batch = w.matmul_with(isa, &x);
                let alone: Vec<f32> = x
                    .chunks_exact(k)
                    .flat_map(|xi| w.matmul_with(isa, xi))
                    .collect();
                assert_eq!(batch, alone, "{dtype:?} {isa:?}");
                batch
            })
            .skip(1)
            .collect();
        for other in vector.iter().skip(1) {
            assert_eq!(&vector[0], other, "{dtype:?}");
        }
    }
}

#[test]
fn rejects_blocks_that_do_not_fit_the_shape() {
    let data = random_blocks(GgmlDType::Q4_1, &[0, 2], 4, 64, 1);
    assert!(QuantMatrix::from_gguf(GgmlDType::Q4_1, 4, 64, &data).is_ok());
    assert!(QuantMatrix::from_gguf(GgmlDType::Q4_1, 4, 32, &data).is_err());
    assert!(QuantMatrix::from_gguf(GgmlDType::Q4K, 4, 64, &data).is_err());
    assert!(
        QuantMatrix::from_gguf(GgmlDType::F32, 4, 64, &data)
            .unwrap()
            .is_none()
    );
    assert!(QuantMatrix::from_gguf(GgmlDType::Q4_1, 0, 64, &[]).is_err());
    assert!(QuantMatrix::from_gguf(GgmlDType::Q4_1, 4, 0, &[]).is_err());
}
