use super::*;

fn noise(len: usize, seed: u64) -> Vec<f32> {
    bits(len, seed)
        .map(|b| (b >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect()
}

fn bits(len: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed | 1;
    (0..len).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    })
}

/// `(weight rows, columns)`: rows not a multiple of the tile, columns below, at and past
/// the lanes.
const SHAPES: &[(usize, usize)] = &[(1, 8), (6, 7), (5, 13), (9, 64), (67, 100)];
/// Activation rows, odd and even, below and past a tile's.
const ACTIVATION_ROWS: std::ops::RangeInclusive<usize> = 1..=9;

fn matrix(dtype: GgmlDType, n: usize, k: usize, bytes: Vec<u8>) -> DenseMatrix {
    DenseMatrix::from_ggml(dtype, n, k, &bytes)
        .unwrap()
        .unwrap()
}

fn f32_matrix(n: usize, k: usize, values: &[f32]) -> DenseMatrix {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    matrix(GgmlDType::F32, n, k, bytes)
}

/// Random f16 values from subnormal to 2^5, and bf16 values in (-1, 1).
fn sixteen_bit(dtype: GgmlDType, len: usize, seed: u64) -> Vec<u16> {
    bits(len, seed)
        .map(|b| {
            let b = (b >> 32) as u16;
            match dtype {
                GgmlDType::F16 => (b & 0x83ff) | ((((b >> 10) & 0x1f) % 21) << 10),
                _ => (noise(1, u64::from(b))[0].to_bits() >> 16) as u16,
            }
        })
        .collect()
}

fn widened(dtype: GgmlDType, values: &[u16]) -> Vec<f32> {
    values
        .iter()
        .map(|&b| match dtype {
            GgmlDType::F16 => F16(b).widen(),
            _ => Bf16(b).widen(),
        })
        .collect()
}

fn to_bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn kernels() -> [Isa; 2] {
    [Isa::detect(), Isa::Portable]
}

#[test]
fn the_f32_product_matches_the_f64_product() {
    for (seed, &(n, k)) in SHAPES.iter().enumerate() {
        let m = 17;
        let w = noise(n * k, seed as u64 + 1);
        let x = noise(m * k, seed as u64 + 50);
        let y = f32_matrix(n, k, &w).matmul(&x);
        for i in 0..m {
            for r in 0..n {
                let want: f64 = (0..k)
                    .map(|j| f64::from(x[i * k + j]) * f64::from(w[r * k + j]))
                    .sum();
                let got = f64::from(y[i * n + r]);
                assert!(
                    (got - want).abs() < 1e-5 * k as f64,
                    "[{i}][{r}] {got} vs {want}"
                );
            }
        }
    }
}

/// A 16-bit matrix gives exactly the f32 product of its widened weights, on every kernel.
#[test]
fn sixteen_bit_products_equal_the_f32_product_of_the_widened_weights() {
    for dtype in [GgmlDType::F16, GgmlDType::BF16] {
        for (seed, &(n, k)) in SHAPES.iter().enumerate() {
            let w = sixteen_bit(dtype, n * k, seed as u64 + 3);
            let bytes = w.iter().flat_map(|b| b.to_le_bytes()).collect();
            let half = matrix(dtype, n, k, bytes);
            let wide = f32_matrix(n, k, &widened(dtype, &w));
            for m in ACTIVATION_ROWS {
                let x = noise(m * k, seed as u64 + 30 + m as u64);
                for kernel in kernels() {
                    assert_eq!(
                        to_bits(&half.matmul_with(kernel, &x)),
                        to_bits(&wide.matmul_with(kernel, &x)),
                        "{dtype:?} [{n}, {k}] x {m} rows on {kernel:?}"
                    );
                }
            }
        }
    }
}

/// A row's result is the same bits alone, in any batch, at any position, on any kernel.
#[test]
fn a_rows_result_does_not_depend_on_the_rows_beside_it() {
    for (seed, &(n, k)) in SHAPES.iter().enumerate() {
        let seed = seed as u64;
        let w = sixteen_bit(GgmlDType::F16, n * k, seed + 7);
        let b = sixteen_bit(GgmlDType::BF16, n * k, seed + 8);
        let matrices = [
            f32_matrix(n, k, &noise(n * k, seed + 9)),
            matrix(
                GgmlDType::F16,
                n,
                k,
                w.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            matrix(
                GgmlDType::BF16,
                n,
                k,
                b.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
        ];
        for matrix in &matrices {
            let name = matrix.dtype_name();
            for m in ACTIVATION_ROWS {
                let x = noise(m * k, seed + 90 + m as u64);
                let batch = matrix.matmul(&x);
                let portable = matrix.matmul_with(Isa::Portable, &x);
                for i in 0..m {
                    let alone = to_bits(&matrix.matmul(&x[i * k..(i + 1) * k]));
                    let row = i * n..(i + 1) * n;
                    assert_eq!(alone, to_bits(&batch[row.clone()]), "{name} row {i}/{m}");
                    assert_eq!(alone, to_bits(&portable[row]), "{name} row {i}/{m}");
                }
            }
        }
    }
}

#[test]
fn sixteen_bit_matrices_take_two_bytes_a_weight() {
    let f16 = matrix(GgmlDType::F16, 3, 5, vec![0; 30]);
    let f32 = f32_matrix(3, 5, &[0.0; 15]);
    assert_eq!(f16.storage_size_in_bytes(), 30);
    assert_eq!(f32.storage_size_in_bytes(), 60);
    assert_eq!((f16.dtype_name(), f32.dtype_name()), ("f16", "f32"));
}

#[test]
fn a_wrong_size_is_an_error_and_a_quantized_type_is_not_ours() {
    assert!(DenseMatrix::from_ggml(GgmlDType::F32, 2, 3, &[0; 20]).is_err());
    assert!(DenseMatrix::from_ggml(GgmlDType::BF16, 2, 3, &[0; 11]).is_err());
    assert!(
        DenseMatrix::from_ggml(GgmlDType::Q8_0, 1, 32, &[0; 34])
            .unwrap()
            .is_none()
    );
}
