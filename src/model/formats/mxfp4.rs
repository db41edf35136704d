//! MXFP4 blocks (GGML type 39, gpt-oss's expert weights), which candle 0.11 has no type for.
//!
//! A block is 32 values: one E8M0 byte `e` (a bare power of two), then 16 bytes of 4-bit E2M1
//! codes, value `j` in the low nibble of byte `j` and value `j + 16` in its high nibble. GGML
//! keeps the E2M1 values doubled, as the integers of [`VALUES`], and halves the scale to
//! match: `w = VALUES[code] * 2^(e - 128)`. Both factors are exact in f32 and so is their
//! product (two significant bits times a power of two), unless it overflows, as GGML's does.
//!
//! candle's GGUF reader refuses a table with type 39 in it. Our header scan
//! ([`super::gguf_checks::scan`]) notes where each MXFP4 tensor's type field lies; candle reads
//! the header through [`StandIn`], which shows those fields as F32, and the tensors then move
//! out of its table into ours ([`Mxfp4Tensors`]), so that no F32 stand-in is ever read as data.
//! The loader reads their blocks itself: into our kernel on the CPU, widened to f32 elsewhere.

use candle_core::quantized::gguf_file::Content;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

/// The type's number in a GGUF tensor table.
pub(crate) const GGML_TYPE: u32 = 39;
/// Values and bytes of one block.
pub(crate) const BLOCK: usize = 32;
pub(crate) const BLOCK_BYTES: usize = 17;

/// The doubled E2M1 value of each code: the top bit is the sign (code 8 is a zero, `+0`).
pub(crate) const VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `2^(e - 128)`: half the E8M0 scale, to go with the doubled values. The two smallest are
/// subnormal; 255 (E8M0's NaN) is read as GGML reads it, `2^127`.
pub(crate) fn scale(e: u8) -> f32 {
    match e {
        0 | 1 => f32::from_bits(0x0020_0000 << e),
        _ => f32::from_bits(u32::from(e - 1) << 23),
    }
}

/// Whole blocks `data` into `out` (32 values a block), as GGML dequantizes them.
pub(crate) fn dequantize(data: &[u8], out: &mut [f32]) {
    for (block, out) in data
        .chunks_exact(BLOCK_BYTES)
        .zip(out.chunks_exact_mut(BLOCK))
    {
        let d = scale(block[0]);
        for (j, &byte) in block[1..].iter().enumerate() {
            out[j] = f32::from(VALUES[usize::from(byte & 0xf)]) * d;
            out[j + BLOCK / 2] = f32::from(VALUES[usize::from(byte >> 4)]) * d;
        }
    }
}

/// Whole blocks of `values` (32 a block) into `out`, with GGML's rounding: the scale is the
/// largest magnitude's power of two less two (so that 6, E2M1's largest, times the scale spans
/// it), and each value takes the code whose value lies nearest in f32, the smaller magnitude on
/// a tie. A code of the wrong sign is never nearer than zero, so only the value's own sign is
/// searched; a zero is code 0, never the "negative zero" 8. Where GGML's exponent leaves E8M0's
/// range (all values below 2^-125, or an infinity) ours saturates to 0 or 255.
pub(crate) fn quantize(values: &[f32], out: &mut Vec<u8>) {
    for block in values.chunks_exact(BLOCK) {
        let amax = block
            .iter()
            .fold(0f32, |m, v| if m < v.abs() { v.abs() } else { m });
        // The float-to-byte cast saturates; the exponent is floor(log2) - 2, biased by 127.
        let e = if amax > 0.0 {
            (amax.log2().floor() + 125.0) as u8
        } else {
            0
        };
        let d = scale(e);
        let code = |v: f32| {
            let (mut magnitude, mut nearest) = (0, v.abs());
            for (m, &value) in VALUES[..8].iter().enumerate().skip(1) {
                let error = (f32::from(value) * d - v.abs()).abs();
                if error < nearest {
                    (magnitude, nearest) = (m, error);
                }
            }
            match magnitude {
                0 => 0,
                m if v < 0.0 => m as u8 | 8,
                m => m as u8,
            }
        };
        out.push(e);
        out.extend((0..BLOCK / 2).map(|j| code(block[j]) | code(block[j + BLOCK / 2]) << 4));
    }
}

/// A reader that shows the 4-byte type fields at `fields` (offsets in the stream, ascending)
/// as F32's.
pub(crate) struct StandIn<R> {
    inner: R,
    fields: Vec<u64>,
    at: u64,
}

impl<R: Seek> StandIn<R> {
    pub(crate) fn new(mut inner: R, fields: Vec<u64>) -> std::io::Result<Self> {
        let at = inner.stream_position()?;
        Ok(Self { inner, fields, at })
    }
}

impl<R: Read> Read for StandIn<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = self.at..self.at + n as u64;
        // The fields lie in file order: only those from the first that ends past the read's
        // start can be in it.
        let first = self
            .fields
            .partition_point(|&field| field + 4 <= read.start);
        for &field in self.fields[first..].iter().take_while(|&&f| f < read.end) {
            for byte in (field..field + 4).filter(|byte| read.contains(byte)) {
                // F32 is type 0.
                buf[(byte - self.at) as usize] = 0;
            }
        }
        self.at = read.end;
        Ok(n)
    }
}

impl<R: Seek> Seek for StandIn<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.at = self.inner.seek(pos)?;
        Ok(self.at)
    }
}

/// Where an MXFP4 tensor lies: its dimensions (outermost first, as candle lists them) and its
/// offset in the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mxfp4Info {
    pub dims: Vec<usize>,
    pub offset: u64,
}

impl Mxfp4Info {
    /// Bytes of its blocks; `None` past any file.
    pub(crate) fn bytes(&self) -> Option<u64> {
        let values = self
            .dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))?;
        (values / BLOCK as u64).checked_mul(BLOCK_BYTES as u64)
    }
}

/// A GGUF file's MXFP4 tensors, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mxfp4Tensors(HashMap<String, Mxfp4Info>);

impl Mxfp4Tensors {
    /// The tensors `names`, as candle's table (read through [`StandIn`]) lists them.
    pub(crate) fn listed(content: &Content, names: &[String]) -> Self {
        let listed = names.iter().filter_map(|name| {
            let info = content.tensor_infos.get(name)?;
            let dims = info.shape.dims().to_vec();
            Some((
                name.clone(),
                Mxfp4Info {
                    dims,
                    offset: info.offset,
                },
            ))
        });
        Self(listed.collect())
    }

    /// Takes their stand-ins out of candle's table, so that none is ever read as F32.
    pub(crate) fn remove_from(&self, content: &mut Content) {
        for name in self.0.keys() {
            content.tensor_infos.remove(name);
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Mxfp4Info> {
        self.0.get(name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Mxfp4Info)> {
        self.0.iter()
    }

    /// Values in all of them.
    pub(crate) fn values(&self) -> u64 {
        let values = |info: &Mxfp4Info| info.dims.iter().map(|&d| d as u64).product::<u64>();
        self.0.values().map(values).fold(0, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Model, ModelError};
    use candle_core::Device;
    use std::path::Path;

    const MODEL: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mxfp4-qwen3moe.gguf"
    );

    #[test]
    fn a_stand_in_shows_each_field_as_f32_however_the_reads_fall() {
        let bytes: Vec<u8> = (1..=40).collect();
        let fields = |i: usize| (5..9).contains(&i) || (20..24).contains(&i);
        for chunk in [1, 3, 7, 40] {
            let mut reader = StandIn::new(std::io::Cursor::new(&bytes), vec![5, 20]).unwrap();
            let (mut seen, mut buf) = (Vec::new(), vec![0; chunk]);
            loop {
                let n = reader.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let want: Vec<u8> = (0..40)
                .map(|i| if fields(i) { 0 } else { bytes[i] })
                .collect();
            assert_eq!(seen, want, "reads of {chunk}");
            reader.seek(SeekFrom::Start(7)).unwrap();
            let mut four = [9; 4];
            reader.read_exact(&mut four).unwrap();
            assert_eq!(four, [0, 0, 10, 11]);
        }
    }

    /// Our kernel and the f32 widening (the path off the CPU, or with candle's kernels) both
    /// multiply by the exact weights: the logits differ only by the order of f32 sums.
    #[test]
    fn an_mxfp4_model_runs_in_our_kernel_and_widened_alike() {
        let ours = Model::load(Path::new(MODEL), &Device::Cpu).unwrap();
        let widened = Model::load_with_candle_kernels(Path::new(MODEL), &Device::Cpu).unwrap();
        let kernels = ours.kernels();
        assert!(
            kernels
                .iter()
                .any(|(dtype, kernel)| dtype == "mxfp4" && kernel.starts_with("samplab ")),
            "{kernels:?}"
        );
        assert!(
            kernels.iter().all(|(_, k)| !k.contains("widened")),
            "{kernels:?}"
        );
        let kernels = widened.kernels();
        assert!(
            kernels
                .iter()
                .any(|(dtype, kernel)| dtype == "mxfp4"
                    && kernel.ends_with("(widened to f32 at load)")),
            "{kernels:?}"
        );
        let prompt = [2, 260, 262, 264, 261, 263, 265, 10, 40, 77];
        let a = ours.session().prefill(&prompt, true).unwrap();
        let b = widened.session().prefill(&prompt, true).unwrap();
        assert_eq!(a.len(), prompt.len());
        for (a, b) in a.iter().zip(&b) {
            let spread = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(spread > 0.0);
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 1e-4 * spread,
                    "{x} vs {y} (largest {spread})"
                );
            }
        }
    }

    fn open_changed(change: impl FnOnce(&mut Vec<u8>)) -> ModelError {
        let mut bytes = std::fs::read(MODEL).unwrap();
        change(&mut bytes);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("changed.gguf");
        std::fs::write(&path, bytes).unwrap();
        match Model::open_gguf(&path) {
            Ok(_) => panic!("the changed file opened"),
            Err(error) => error,
        }
    }

    #[test]
    fn a_truncated_mxfp4_file_says_how_many_bytes_its_tensors_need() {
        let error = open_changed(|bytes| bytes.truncate(bytes.len() - 100));
        assert!(matches!(error, ModelError::Truncated { .. }), "{error}");
    }

    /// Where `blk.0.attn_q.weight`'s type field lies: after its name, its two dimensions.
    fn attn_q_type(bytes: &[u8]) -> usize {
        let name = b"blk.0.attn_q.weight";
        let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
        at + name.len() + 4 + 2 * 8
    }

    #[test]
    fn an_unknown_type_is_refused_naming_the_tensor_and_the_type() {
        let error = open_changed(|bytes| {
            let at = attn_q_type(bytes);
            assert_eq!(bytes[at], 39);
            bytes[at] = 99;
        });
        let message = error.to_string();
        assert!(
            message.contains("`blk.0.attn_q.weight` has GGML type 99"),
            "{message}"
        );
    }

    /// As F32 the tensor would need 7.5 times its bytes: the tensors after it no longer fit.
    #[test]
    fn an_mxfp4_tensor_read_as_another_type_does_not_fit_its_place() {
        let error = open_changed(|bytes| {
            let at = attn_q_type(bytes);
            bytes[at] = 0;
        });
        let message = error.to_string();
        assert!(
            message.contains("overlaps tensor `blk.0.attn_q.weight`"),
            "{message}"
        );
    }

    #[test]
    fn scales_are_powers_of_two_from_two_to_the_minus_128() {
        assert_eq!(scale(0), 2f32.powi(-128));
        assert_eq!(scale(1), 2f32.powi(-127));
        assert_eq!(scale(2), 2f32.powi(-126));
        assert_eq!(scale(128), 1.0);
        assert_eq!(scale(254), 2f32.powi(126));
        assert_eq!(scale(255), 2f32.powi(127));
    }

    #[test]
    fn a_block_puts_low_nibbles_first_and_zero_codes_are_plus_zero() {
        let mut block = [0u8; BLOCK_BYTES];
        block[0] = 129;
        block[1] = 0x8f;
        block[16] = 0x71;
        let mut out = [f32::NAN; BLOCK];
        dequantize(&block, &mut out);
        assert_eq!(out[0], -24.0);
        assert_eq!(out[16].to_bits(), 0, "code 8 is +0");
        assert_eq!(out[15], 2.0);
        assert_eq!(out[31], 24.0);
        assert_eq!(out[1].to_bits(), 0);
    }

    /// Blocks the gguf package (GGML's rule in numpy) quantized, written by
    /// `scripts/make_mxfp4_fixture.py`: ours gives the same bytes, block by block.
    #[test]
    fn quantizing_gives_the_gguf_packages_blocks() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mxfp4-quantize.bin"
        ))
        .unwrap();
        let blocks = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        let (values, theirs) = bytes[4..].split_at(blocks * BLOCK * 4);
        assert_eq!(theirs.len(), blocks * BLOCK_BYTES);
        let values: Vec<f32> = values
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let mut ours = Vec::new();
        quantize(&values, &mut ours);
        for (i, (a, b)) in ours
            .chunks(BLOCK_BYTES)
            .zip(theirs.chunks(BLOCK_BYTES))
            .enumerate()
        {
            assert_eq!(a, b, "block {i}: {:?}", &values[i * BLOCK..][..BLOCK]);
        }
        assert_eq!(ours.len(), theirs.len());
    }

    fn quantized(values: &[f32]) -> (Vec<u8>, Vec<f32>) {
        let mut bytes = Vec::new();
        quantize(values, &mut bytes);
        let mut back = vec![f32::NAN; values.len()];
        dequantize(&bytes, &mut back);
        (bytes, back)
    }

    #[test]
    fn zeros_of_either_sign_quantize_to_plus_zero_under_the_smallest_scale() {
        let values: Vec<f32> = (0..BLOCK).map(|i| [0.0, -0.0][i % 2]).collect();
        let (bytes, back) = quantized(&values);
        assert_eq!(bytes, [0; BLOCK_BYTES]);
        assert!(back.iter().all(|v| v.to_bits() == 0));
    }

    /// Values that are codes times the scale come back exactly, at the largest scale finite
    /// values reach (2^127 gives E8M0 252) and a tiny one; far below, where GGML's exponent
    /// would leave E8M0's range, ours saturates at 0 (2^-128) and the values flush to zero.
    #[test]
    fn extreme_scales_keep_exact_values_and_saturate_below_e8m0() {
        for d in [2f32.powi(124), 2f32.powi(-124), 1.0] {
            let values: Vec<f32> = (0..BLOCK).map(|i| f32::from(VALUES[i % 16]) * d).collect();
            let (bytes, back) = quantized(&values);
            assert_eq!(scale(bytes[0]), d);
            assert_eq!(back, values, "scale {d:e}");
        }
        let (bytes, back) = quantized(&[2f32.powi(-140); BLOCK]);
        assert_eq!(bytes[0], 0);
        assert!(back.iter().all(|&v| v == 0.0));
    }

    /// Halfway between two codes' values the smaller magnitude wins, for either sign.
    #[test]
    fn ties_round_to_the_smaller_magnitude() {
        let mut values = [0f32; BLOCK];
        values[0] = 6.0; // scale 0.5: codes 0, 0.5, 1, 1.5, 2, 3, 4, 6
        values[1] = 2.5;
        values[2] = -5.0;
        values[3] = -0.25;
        let (_, back) = quantized(&values);
        assert_eq!(&back[..4], [6.0, 2.0, -4.0, 0.0]);
    }
}
