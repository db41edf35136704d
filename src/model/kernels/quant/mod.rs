//! Our CPU matrix products for quantized weights, every format through one kernel.
//!
//! At load each matrix is repacked into tiles of 16 output rows: for every 32 columns a
//! tile stores its quants as bit planes (row-interleaved, so 16 bytes hold one, two or four
//! columns of the 16 rows) and its scales as compact as the file has them (see [`format`]), so a
//! decode step reads as many bytes as llama.cpp's. The kernel expands a column of a tile into 16
//! f32 weights, exactly the values candle's dequantization gives, and multiplies them
//! with f32 activations: the product is the dequantized model's, up to f32 summation
//! order, with no 8-bit rounding of activations. A tile is expanded once per group of
//! activation rows, so batched decode and prefill reuse it from L1.

mod format;
#[cfg(target_arch = "x86_64")]
mod vnni;

use super::half::f16_to_f32;
use super::lanes::{self, Lanes, Portable};
use super::parallel::{Disjoint, filled, for_each_range};
use super::prefetch;
use super::{Isa, rows_through};
use candle_core::quantized::GgmlDType;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape};
use format::{Format, SUB, Scales, Sub};

/// Output rows per tile: one lane each.
const TILE: usize = 16;
/// Activation rows swept together over a thread's tiles: their values stay in L2 while
/// each tile stays in L1.
const CHUNK_ROWS: usize = 64;

/// What our quantized products do with activations, as `--activations` names it: keep them
/// f32 (`exact`: the exact model's logits up to summation order), round them to 16 bits
/// (`16bit`: on CPUs with AVX-512 VNNI, about 1/100 of llama.cpp's 8-bit error and up to
/// twice as fast on models of a few GB), or `auto`: 16-bit where the CPU has it, else exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activations {
    #[default]
    Auto,
    Exact,
    #[serde(rename = "16bit")]
    SixteenBit,
}

#[derive(Debug, thiserror::Error)]
pub enum ActivationsError {
    #[error(
        "`{0}` is not an activation precision: write auto (the default: 16bit where the CPU \
         has it, else exact), exact (f32) or 16bit"
    )]
    Unknown(String),
    #[error(
        "16-bit activations need AVX-512 VNNI and VBMI, which this CPU lacks: pass --activations exact"
    )]
    Unsupported,
}

impl std::str::FromStr for Activations {
    type Err = ActivationsError;

    fn from_str(text: &str) -> Result<Self, ActivationsError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "exact" | "f32" => Ok(Self::Exact),
            "16bit" | "16" => Ok(Self::SixteenBit),
            _ => Err(ActivationsError::Unknown(text.to_owned())),
        }
    }
}

impl std::fmt::Display for Activations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Exact => "exact",
            Self::SixteenBit => "16bit",
        })
    }
}

impl Activations {
    /// Refuses a precision this CPU cannot run, before anything loads.
    pub fn check(self) -> Result<(), ActivationsError> {
        self.arithmetic().map(|_| ())
    }

    /// The arithmetic that gives this precision on this CPU.
    pub(crate) fn arithmetic(self) -> Result<Arithmetic, ActivationsError> {
        match self {
            Self::Exact => Ok(Arithmetic::exact()),
            #[cfg(target_arch = "x86_64")]
            Self::SixteenBit | Self::Auto if vnni::available() => Ok(Arithmetic::Vnni),
            Self::SixteenBit => Err(ActivationsError::Unsupported),
            Self::Auto => Ok(Arithmetic::exact()),
        }
    }
}

/// How a product multiplies: f32 activations with one instruction set, or activations
/// rounded to 16 bits on AVX-512 VNNI (see [`vnni`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arithmetic {
    F32(Isa),
    /// Made only where `vnni::available()`: its kernels rely on it.
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Arithmetic {
    /// f32 activations with the best instruction set this CPU has.
    pub(crate) fn exact() -> Self {
        Arithmetic::F32(Isa::detect())
    }

    /// The precision this arithmetic gives.
    pub(crate) fn activations(self) -> Activations {
        match self {
            Arithmetic::F32(_) => Activations::Exact,
            #[cfg(target_arch = "x86_64")]
            Arithmetic::Vnni => Activations::SixteenBit,
        }
    }

    /// e.g. `avx512, f32 activations`.
    pub(crate) fn name(self) -> String {
        match self {
            Arithmetic::F32(isa) => format!("{}, f32 activations", isa.name()),
            #[cfg(target_arch = "x86_64")]
            Arithmetic::Vnni => "avx512-vnni, 16-bit activations".to_owned(),
        }
    }
}

/// A weight type our kernels run: one of candle's GGML types, or MXFP4, which candle lacks
/// (see [`crate::model::formats::mxfp4`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuantType {
    Ggml(GgmlDType),
    Mxfp4,
}

impl QuantType {
    /// llama.cpp's name of the type: `q4_1`, `q6_k`, `f16`, `mxfp4`.
    pub(crate) fn name(self) -> String {
        let QuantType::Ggml(dtype) = self else {
            return "mxfp4".to_owned();
        };
        let name = format!("{dtype:?}").to_lowercase();
        match name.strip_suffix('k') {
            Some(base) => format!("{base}_k"),
            None => name,
        }
    }

    /// Values and bytes of one block.
    pub(crate) fn block(self) -> (usize, usize) {
        use crate::model::formats::mxfp4;
        match self {
            QuantType::Ggml(dtype) => (dtype.block_size(), dtype.type_size()),
            QuantType::Mxfp4 => (mxfp4::BLOCK, mxfp4::BLOCK_BYTES),
        }
    }
}

/// One tile's weights in column order: its sub-blocks' quant planes, f16 scales (and
/// mins), and K-quant multipliers.
#[derive(Clone, Copy)]
struct TileRef<'a> {
    quants: &'a [u8],
    halves: &'a [u16],
    multipliers: &'a [u8],
}

impl TileRef<'_> {
    /// Asks the memory for the tile's first `bytes` of quants (the whole tile if it is
    /// smaller) and the same share of its scales; returns the bytes left.
    fn prefetch_first(self, bytes: usize) -> usize {
        let quants = bytes.min(self.quants.len());
        let share = |len: usize| len * quants / self.quants.len();
        prefetch::elements(self.quants.as_ptr(), quants);
        prefetch::elements(self.halves.as_ptr(), share(self.halves.len()));
        prefetch::elements(self.multipliers.as_ptr(), share(self.multipliers.len()));
        bytes - quants
    }
}

/// A tile times activation rows `rows` of `x` (`cols` wide), into `out`.
type TileTimes = fn(Isa, TileRef, &[f32], std::ops::Range<usize>, &Sink);

/// One lane of a tile, dequantized into `out`.
type RowOf = fn(TileRef, usize, &mut [f32]);

/// A `[rows, cols]` quantized matrix in our tiled layout; the last tile is padded with
/// zero rows.
#[derive(Clone)]
pub(crate) struct QuantMatrix {
    rows: usize,
    cols: usize,
    dtype: QuantType,
    quants: Lines,
    /// Per tile and sub-block (or K-quant super-block): `[scale, min][lane]` f16 bits.
    halves: Vec<u16>,
    /// K-quants, per tile and sub-block: `[scale spans, min spans][lane]` as i8.
    multipliers: Vec<u8>,
    sizes: Sizes,
    arithmetic: Arithmetic,
    tile_times: TileTimes,
    #[cfg(target_arch = "x86_64")]
    vnni: vnni::Kernel,
    row_of: RowOf,
}

impl std::fmt::Debug for QuantMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QuantMatrix({:?}, [{}, {}])",
            self.dtype, self.rows, self.cols
        )
    }
}

impl QuantMatrix {
    /// Takes over a GGUF tensor's bytes; `None` for a type we have no kernel for.
    pub(crate) fn from_gguf(
        dtype: QuantType,
        rows: usize,
        cols: usize,
        data: &[u8],
    ) -> candle_core::Result<Option<Self>> {
        use format::*;
        let QuantType::Ggml(dtype) = dtype else {
            return Self::repack::<Mxfp4>(rows, cols, data).map(Some);
        };
        Ok(Some(match dtype {
            GgmlDType::Q4_0 => Self::repack::<Q4_0>(rows, cols, data)?,
            GgmlDType::Q4_1 => Self::repack::<Q4_1>(rows, cols, data)?,
            GgmlDType::Q5_0 => Self::repack::<Q5_0>(rows, cols, data)?,
            GgmlDType::Q5_1 => Self::repack::<Q5_1>(rows, cols, data)?,
            GgmlDType::Q8_0 => Self::repack::<Q8_0>(rows, cols, data)?,
            GgmlDType::Q4K => Self::repack::<Q4K>(rows, cols, data)?,
            GgmlDType::Q5K => Self::repack::<Q5K>(rows, cols, data)?,
            GgmlDType::Q6K => Self::repack::<Q6K>(rows, cols, data)?,
            GgmlDType::Q2K => Self::repack::<Q2K>(rows, cols, data)?,
            GgmlDType::Q3K => Self::repack::<Q3K>(rows, cols, data)?,
            _ => return Ok(None),
        }))
    }

    fn repack<F: Format>(rows: usize, cols: usize, data: &[u8]) -> candle_core::Result<Self> {
        let blocks = rows * cols / F::BLOCK;
        if rows == 0
            || cols == 0
            || !cols.is_multiple_of(F::BLOCK)
            || data.len() != blocks * F::BLOCK_BYTES
        {
            candle_core::bail!(
                "{} matrix [{rows}, {cols}] does not match {} bytes of blocks",
                F::DTYPE.name(),
                data.len()
            );
        }
        let sizes = Sizes::of::<F>(cols);
        let tiles = rows.div_ceil(TILE);
        let mut m = Self {
            rows,
            cols,
            dtype: F::DTYPE,
            quants: Lines::zeros(tiles * sizes.quants),
            halves: vec![0; tiles * sizes.halves],
            multipliers: vec![0; tiles * sizes.multipliers],
            sizes,
            arithmetic: Arithmetic::exact(),
            tile_times: tile_times::<F>,
            #[cfg(target_arch = "x86_64")]
            vnni: vnni::Kernel::of::<F>(),
            row_of: row_of::<F>,
        };
        let mut unpacked = vec![Sub::default(); F::BLOCK / SUB];
        let blocks_per_row = cols / F::BLOCK;
        for (i, block) in data.chunks_exact(F::BLOCK_BYTES).enumerate() {
            F::unpack(block, &mut unpacked);
            let (row, first) = (i / blocks_per_row, i % blocks_per_row * unpacked.len());
            for (j, sub) in unpacked.iter().enumerate() {
                m.place::<F>(row, first + j, sub);
            }
        }
        Ok(m)
    }

    /// Writes a sub-block into the planes. A plane of `b` bits per value has `4 b` byte
    /// rows of 16 lanes: byte `(c % 4b) * 16 + lane` holds column `c` at bits
    /// `b (c / 4b)..`. The low plane takes a value's low bits (all 8, 4, or 2: see
    /// [`low_bits`]); 3-, 5- and 6-bit formats add a high plane, after it, for the rest.
    fn place<F: Format>(&mut self, row: usize, sb: usize, sub: &Sub) {
        let (tile, lane, sizes) = (row / TILE, row % TILE, self.sizes);
        let planes_bytes = plane_bytes(F::BITS);
        let at = tile * sizes.quants + sb * planes_bytes;
        let planes = &mut self.quants.bytes_mut()[at..][..planes_bytes];
        let (low, high) = (low_bits(F::BITS), F::BITS - low_bits(F::BITS));
        let mut put = |first: usize, bits: u32, c: usize, value: u8| {
            let rows = plane_rows(bits);
            planes[first + (c % rows) * TILE + lane] |= value << (bits as usize * (c / rows));
        };
        for (c, &q) in sub.q.iter().enumerate() {
            put(0, low, c, q & mask(low) as u8);
            if high > 0 {
                put(plane_rows(low) * TILE, high, c, q >> low);
            }
        }
        let group = if F::SUPER { sb / (F::BLOCK / SUB) } else { sb };
        let halves = &mut self.halves[tile * sizes.halves + group * sizes.group..][..sizes.group];
        for (k, &half) in sub.half.iter().take(sizes.group / TILE).enumerate() {
            halves[k * TILE + lane] = half;
        }
        if F::SUPER {
            let per_sub = sizes.multipliers / (self.cols / SUB);
            let at = tile * sizes.multipliers + sb * per_sub;
            let multipliers = &mut self.multipliers[at..][..per_sub];
            let kinds = if F::MIN { 2 } else { 1 };
            for kind in 0..kinds {
                for span in 0..F::SPANS {
                    let value = sub.multiplier[kind][span] as u8;
                    multipliers[(kind * F::SPANS + span) * TILE + lane] = value;
                }
            }
        }
    }

    /// The same matrix multiplying with `arithmetic`.
    pub(crate) fn with(self, arithmetic: Arithmetic) -> Self {
        Self { arithmetic, ..self }
    }

    pub(crate) fn arithmetic(&self) -> Arithmetic {
        self.arithmetic
    }

    pub(crate) fn dtype(&self) -> QuantType {
        self.dtype
    }

    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub(crate) fn storage_size_in_bytes(&self) -> usize {
        size_of_val(self.quants.bytes())
            + size_of_val(self.halves.as_slice())
            + size_of_val(self.multipliers.as_slice())
    }

    fn tile(&self, t: usize) -> TileRef<'_> {
        let sizes = self.sizes;
        TileRef {
            quants: &self.quants.bytes()[t * sizes.quants..][..sizes.quants],
            halves: &self.halves[t * sizes.halves..][..sizes.halves],
            multipliers: &self.multipliers[t * sizes.multipliers..][..sizes.multipliers],
        }
    }

    /// Row `r`, dequantized into `out` (`cols` long) to the values the kernel expands: an
    /// embedding lookup in a tied matrix, which then needs no copy of its own.
    pub(crate) fn row(&self, r: usize, out: &mut [f32]) {
        (self.row_of)(self.tile(r / TILE), r % TILE, out);
    }

    /// `x W^T` for `x` = `[m, cols]` f32 values (row-major): `[m, rows]`.
    pub(crate) fn matmul(&self, x: &[f32]) -> Vec<f32> {
        self.matmul_with(self.arithmetic, x)
    }

    fn matmul_with(&self, arithmetic: Arithmetic, x: &[f32]) -> Vec<f32> {
        match arithmetic {
            Arithmetic::F32(isa) => self.tiles_times(x.len() / self.cols, |w, rows, sink| {
                (self.tile_times)(isa, w, x, rows, sink)
            }),
            #[cfg(target_arch = "x86_64")]
            Arithmetic::Vnni => {
                let split = vnni::Rows::split(x, self.cols, self.vnni.offset);
                self.tiles_times(x.len() / self.cols, |w, rows, sink| {
                    (self.vnni.times)(w, &split, rows, sink)
                })
            }
        }
    }

    /// `[m, rows]` from every tile times `m` activation rows, by `tile_times`.
    fn tiles_times(
        &self,
        m: usize,
        tile_times: impl Fn(TileRef, std::ops::Range<usize>, &Sink) + Sync,
    ) -> Vec<f32> {
        let mut y = Vec::new();
        if m == 0 {
            return y;
        }
        let out = Disjoint::uninit(&mut y, m * self.rows);
        // Each task takes a run of tiles: their output rows are its own.
        for_each_range(self.rows.div_ceil(TILE), |tiles| {
            // The kernel asks for the weights ahead as it goes; a run's first, which nothing
            // before them in this run asked for, are asked for here.
            let mut lead = PREFETCH_BYTES;
            for t in tiles.clone().take(PREFETCH_TILES) {
                lead = self.tile(t).prefetch_first(lead);
            }
            for chunk in (0..m).step_by(CHUNK_ROWS) {
                let chunk = chunk..(chunk + CHUNK_ROWS).min(m);
                for t in tiles.clone() {
                    let sink = Sink {
                        out: &out,
                        first: t * TILE,
                        width: TILE.min(self.rows - t * TILE),
                        stride: self.rows,
                    };
                    tile_times(self.tile(t), chunk.clone(), &sink);
                }
            }
        });
        // SAFETY: the tiles cover every output row, and each kernel stores every activation
        // row of its range (a sweep of groups down to single rows).
        unsafe { filled(&mut y, m * self.rows) };
        y
    }
}

/// Where a tile's results go: activation row `i`'s are `out[i * stride + first..][..width]`
/// (the last tile's padding rows are dropped).
struct Sink<'a, 'b> {
    out: &'a Disjoint<'b>,
    first: usize,
    width: usize,
    stride: usize,
}

impl Sink<'_, '_> {
    fn store<const C: usize>(&self, i: usize, tile: &[[f32; TILE]; C]) {
        for (j, values) in tile.iter().enumerate() {
            // SAFETY: these are the tile's own output rows, which no other task writes.
            unsafe {
                self.out
                    .write((i + j) * self.stride + self.first, &values[..self.width]);
            }
        }
    }
}

/// Bytes that start on a cache line. A sub-block's planes are whole lines (64 to 512 bytes),
/// so each then starts a line too, and prefetching one asks for its own lines only (at any
/// other start, it asked for one line more, half of it its neighbour's, twice).
#[derive(Clone)]
struct Lines(Vec<Line>);

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

impl Lines {
    /// `len` zero bytes, `len` a multiple of a line.
    fn zeros(len: usize) -> Self {
        debug_assert!(len.is_multiple_of(size_of::<Line>()));
        Self(vec![Line([0; 64]); len / size_of::<Line>()])
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a `Line` is 64 bytes with no padding, so the lines are `64 n` initialised
        // bytes, borrowed as long as the lines are.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), size_of_val(&self.0[..])) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = size_of_val(&self.0[..]);
        // SAFETY: as in `bytes`, borrowed mutably as long as the lines are.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), len) }
    }
}

/// What one tile holds for a row of `cols` columns.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    quants: usize,
    halves: usize,
    /// f16 values per sub-block (or super-block): a scale, and a min, for every lane.
    group: usize,
    multipliers: usize,
}

impl Sizes {
    fn of<F: Format>(cols: usize) -> Self {
        let subs = cols / SUB;
        let kinds = if F::MIN { 2 } else { 1 };
        let group = kinds * TILE;
        let (groups, multipliers) = if F::SUPER {
            (cols / F::BLOCK, subs * kinds * F::SPANS * TILE)
        } else {
            (subs, 0)
        };
        Self {
            quants: subs * plane_bytes(F::BITS),
            halves: groups * group,
            group,
            multipliers,
        }
    }
}

/// A sub-block's planes: 32 values of `bits` bits for each of 16 lanes.
const fn plane_bytes(bits: u32) -> usize {
    4 * bits as usize * TILE
}

/// Bits of a value in the low plane: a whole byte, a nibble, or two bits (2- and 3-bit
/// formats), so that one load gives 1, 2 or 4 columns.
const fn low_bits(bits: u32) -> u32 {
    match bits {
        8 => 8,
        2 | 3 => 2,
        _ => 4,
    }
}

/// Byte rows of a plane of `bits` bits per value.
const fn plane_rows(bits: u32) -> usize {
    4 * bits as usize
}

const fn mask(bits: u32) -> i32 {
    (1 << bits) - 1
}

fn tile_times<F: Format>(
    isa: Isa,
    w: TileRef,
    x: &[f32],
    rows: std::ops::Range<usize>,
    out: &Sink,
) {
    let cols = w.quants.len() / plane_bytes(F::BITS) * SUB;
    // Activation rows share one expansion of the tile's weights in groups as large as
    // their accumulators fit in registers (AVX-512 has 32, AVX2 16 of half the width).
    let mut i = rows.start;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 {
        sweep::<F, 16>(isa, w, x, cols, &mut i, rows.end, out);
        sweep::<F, 8>(isa, w, x, cols, &mut i, rows.end, out);
    }
    sweep::<F, 4>(isa, w, x, cols, &mut i, rows.end, out);
    sweep::<F, 1>(isa, w, x, cols, &mut i, rows.end, out);
}

/// Activation rows `*i..end` in groups of `G`, while a whole group remains.
#[allow(clippy::too_many_arguments)]
fn sweep<F: Format, const G: usize>(
    isa: Isa,
    w: TileRef,
    x: &[f32],
    cols: usize,
    i: &mut usize,
    end: usize,
    out: &Sink,
) {
    while *i + G <= end {
        let rows = std::array::from_fn(|d| &x[(*i + d) * cols..][..cols]);
        out.store(*i, &tile_product::<F, G>(isa, w, rows));
        *i += G;
    }
}

fn tile_product<F: Format, const C: usize>(
    isa: Isa,
    w: TileRef,
    x: [&[f32]; C],
) -> [[f32; TILE]; C] {
    match isa {
        // SAFETY: the portable lanes need no CPU feature.
        Isa::Portable => unsafe { tile_body::<Portable, F, C>(w, x) },
        // SAFETY: `Isa::detect` chose this only where the CPU has AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { tile_avx2::<F, C>(w, x) },
        // SAFETY: `Isa::detect` chose this only where the CPU has AVX-512F.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { tile_avx512::<F, C>(w, x) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_avx2<F: Format, const C: usize>(w: TileRef, x: [&[f32]; C]) -> [[f32; TILE]; C] {
    // SAFETY: AVX2, FMA and F16C are enabled here, as `lanes::Avx2` requires.
    unsafe { tile_body::<lanes::Avx2, F, C>(w, x) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<F: Format, const C: usize>(w: TileRef, x: [&[f32]; C]) -> [[f32; TILE]; C] {
    // SAFETY: AVX-512F is enabled here, as `lanes::Avx512` requires.
    unsafe { tile_body::<lanes::Avx512, F, C>(w, x) }
}

/// One lane of a tile, one weight at a time, with the kernel's arithmetic: `q * scale` is
/// exact in f32 for every format (an f16 times at most 6 + 8 bits, or MXFP4's power of two
/// times a value of two bits), so fused or not, each weight is the kernel's.
fn row_of<F: Format>(w: TileRef, lane: usize, out: &mut [f32]) {
    let cols = out.len();
    let sizes = Sizes::of::<F>(cols);
    let (low, high) = (low_bits(F::BITS), F::BITS - low_bits(F::BITS));
    let multipliers = sizes.multipliers / (cols / SUB);
    let planes = w.quants.chunks_exact(plane_bytes(F::BITS));
    for (sb, (q, out)) in planes.zip(out.chunks_exact_mut(SUB)).enumerate() {
        let group = if F::SUPER { sb / (F::BLOCK / SUB) } else { sb };
        let halves = &w.halves[group * sizes.group..][..sizes.group];
        let d = F::SCALES.value(halves[lane]);
        let dmin = if F::MIN {
            f16_to_f32(halves[TILE + lane])
        } else {
            0.0
        };
        let multiplier =
            |k: usize| f32::from(w.multipliers[sb * multipliers + k * TILE + lane] as i8);
        let bits = |first: usize, bits: u32, col: usize| {
            let rows = plane_rows(bits);
            let byte = q[first + (col % rows) * TILE + lane];
            i32::from(byte >> (bits as usize * (col / rows))) & mask(bits)
        };
        for (col, out) in out.iter_mut().enumerate() {
            let span = col * F::SPANS / SUB;
            let (scale, min) = if F::SUPER {
                let min = if F::MIN {
                    dmin * multiplier(F::SPANS + span)
                } else {
                    0.0
                };
                (d * multiplier(span), min)
            } else {
                (d, dmin)
            };
            let mut qi = if F::BITS == 8 {
                i32::from(q[col * TILE + lane] as i8)
            } else {
                bits(0, low, col)
            };
            if high > 0 {
                qi |= bits(plane_rows(low) * TILE, high, col) << low;
            }
            let qf = match F::VALUES {
                Some(values) => values[qi as usize],
                None => (qi - F::OFFSET) as f32,
            };
            *out = if F::MIN {
                qf.mul_add(scale, min)
            } else {
                qf * scale
            };
        }
    }
}

/// How far ahead of the sub-block multiplying [`prefetch_ahead`] asks for, in bytes of quants:
/// far enough to cover memory's latency, near enough that what arrives is still in L1 when the
/// kernel gets there. A distance of two whole tiles
/// is 36 KB to 212 KB on a 1.7B model's matrices, more than L1 holds.
const PREFETCH_BYTES: usize = 8 << 10;
/// The most tiles ahead it asks for, for narrow matrices.
const PREFETCH_TILES: usize = 2;

/// Asks the memory for the weights [`PREFETCH_BYTES`] past sub-block `sb` of `w`, while `w`
/// computes. With several activation rows (batched decode) a product is bound by its
/// multiply-adds, and left to the hardware's prefetchers it also waits on the weights it
/// streams: asked for ahead, they arrive during the arithmetic instead.
///
/// Each of a matrix's arrays holds its tiles one after another at a fixed size, so a distance
/// in sub-blocks is the same share of a tile in every array of `w`, and runs on into the next
/// tiles; past the matrix's end the addresses are never loaded (a prefetch does not fault),
/// hence the wrapping arithmetic.
#[inline(always)]
fn prefetch_ahead<F: Format>(w: TileRef, sb: usize, sizes: Sizes, multipliers: usize) {
    let planes = plane_bytes(F::BITS);
    let subs = w.quants.len() / planes;
    let ahead = (PREFETCH_BYTES / planes).clamp(1, PREFETCH_TILES * subs);
    let past = |slice_len: usize| slice_len * ahead / subs;
    prefetch_past(w.quants, sb * planes + past(w.quants.len()), planes);
    let subs_per_group = if F::SUPER { F::BLOCK / SUB } else { 1 };
    if sb.is_multiple_of(subs_per_group) {
        let group = sb / subs_per_group * sizes.group;
        prefetch_past(w.halves, group + past(w.halves.len()), sizes.group);
    }
    if F::SUPER {
        let at = sb * multipliers + past(w.multipliers.len());
        prefetch_past(w.multipliers, at, multipliers);
    }
}

/// Elements `at..at + len` from the start of `slice`, `at` possibly past its end.
#[inline(always)]
fn prefetch_past<T>(slice: &[T], at: usize, len: usize) {
    prefetch::elements(slice.as_ptr().wrapping_add(at), len);
}

/// Moves bits `from..` of every lane to bits `to..`.
#[inline(always)]
unsafe fn shift<L: Lanes>(v: L::I, from: u32, to: u32) -> L::I {
    // SAFETY: the caller's lanes are enabled.
    unsafe {
        if from >= to {
            L::shr(v, from - to)
        } else {
            L::shl(v, to - from)
        }
    }
}

/// A sub-block's scales and mins for each of its spans (the second is the first's where
/// there is one span): `w = scale * (q - OFFSET) + min`.
///
/// # Safety
/// `L`'s instruction set must be enabled.
#[inline(always)]
unsafe fn sub_block_scales<L: Lanes, F: Format>(
    w: TileRef,
    sb: usize,
    sizes: Sizes,
    multipliers: usize,
) -> ([L::F; 2], [L::F; 2]) {
    // SAFETY: 16 f16 of the sub-block's group and 16 multipliers, lengths checked by the
    // indexing; the caller enabled `L`.
    unsafe {
        let group = if F::SUPER { sb / (F::BLOCK / SUB) } else { sb };
        let halves = &w.halves[group * sizes.group..][..sizes.group];
        let d = match F::SCALES {
            Scales::F16 => L::load_f16(halves.as_ptr()),
            Scales::Bf16 => L::load_bf16(halves.as_ptr()),
        };
        let dmin = if F::MIN {
            L::load_f16(halves[TILE..].as_ptr())
        } else {
            L::zero()
        };
        if !F::SUPER {
            return ([d; 2], [dmin; 2]);
        }
        let m = &w.multipliers[sb * multipliers..][..multipliers];
        let times = |d, k: usize| L::mul(d, L::float(L::load_i8(m[k * TILE..][..TILE].as_ptr())));
        let last = F::SPANS - 1;
        let scale = [times(d, 0), times(d, last)];
        let min = if F::MIN {
            [times(dmin, F::SPANS), times(dmin, F::SPANS + last)]
        } else {
            [L::zero(); 2]
        };
        (scale, min)
    }
}

/// `$call` for every `$c` in `0..rows` (at most 32), written out: each call then sees its
/// byte row as a constant, and so do the shifts and offsets of a high plane's bits.
macro_rules! written_out {
    ($c:ident < $rows:expr => $call:expr) => {
        written_out!(@ $c, $rows, $call,
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (@ $c:ident, $rows:expr, $call:expr, $($k:literal)*) => {
        $(if $k < $rows {
            let $c: usize = $k;
            $call;
            // An empty instruction (the caller is in an unsafe block): its implied memory
            // clobber keeps the compiler from hoisting the next byte rows' loads above it, to
            // expand their weights early and spill them.
            std::arch::asm!("", options(nostack, preserves_flags));
        })*
    };
}

/// The tile's 16 output rows times `C` activation rows. For each column the 16 weights
/// are expanded once, `scale * (q - OFFSET) + min`, and multiply-added into every
/// activation row's accumulator; each row's sums run in the same order whatever `C` is,
/// so a row's result does not depend on the batch around it.
///
/// # Safety
/// `L`'s instruction set must be enabled.
#[inline(always)]
unsafe fn tile_body<L: Lanes, F: Format, const C: usize>(
    w: TileRef,
    x: [&[f32]; C],
) -> [[f32; TILE]; C] {
    let rows = plane_rows(low_bits(F::BITS));
    let sizes = Sizes::of::<F>(x[0].len());
    let multipliers = sizes.multipliers / (x[0].len() / SUB);
    // SAFETY (whole body): the caller enabled `L`.
    unsafe {
        let mut acc = [L::zero(); C];
        for (sb, q) in w.quants.chunks_exact(plane_bytes(F::BITS)).enumerate() {
            prefetch_ahead::<F>(w, sb, sizes, multipliers);
            let (scale, min) = sub_block_scales::<L, F>(w, sb, sizes, multipliers);
            // `scale * (q - OFFSET)` as one multiply-add, `fma(q, scale, -OFFSET * scale)`:
            // the offset is a power of two, so `OFFSET * scale` is exact and the sum rounds
            // once, to the same weight. (Formats with an offset have no min.)
            const { assert!(F::OFFSET == 0 || !F::MIN) };
            let min = if F::OFFSET == 0 {
                min
            } else {
                let offset = L::splat(-F::OFFSET as f32);
                [L::mul(offset, scale[0]), L::mul(offset, scale[1])]
            };
            let xs: [&[f32]; C] = std::array::from_fn(|i| &x[i][sb * SUB..][..SUB]);
            let sub_block = SubBlock { q, scale, min };
            // A high plane's row and shift differ from column to column: written out, they
            // are constants. With one activation row each multiply-add waits on the one
            // before, and the loop leaves the CPU room to expand the next weights meanwhile
            // (written out, the compiler hoists them and spills); with more, the arithmetic
            // is the bound, and constant shifts take the fewest instructions.
            if C == 1 || F::BITS == low_bits(F::BITS) {
                for c in 0..rows {
                    byte_row::<L, F, C>(&sub_block, c, &xs, &mut acc);
                }
            } else {
                written_out!(c < rows => byte_row::<L, F, C>(&sub_block, c, &xs, &mut acc));
            }
        }
        let mut out = [[0f32; TILE]; C];
        for (out, acc) in out.iter_mut().zip(acc) {
            L::store(acc, out.as_mut_ptr());
        }
        out
    }
}

/// One sub-block of a tile, ready to expand: its planes and each span's scale and
/// `min - OFFSET * scale`.
struct SubBlock<'a, L: Lanes> {
    q: &'a [u8],
    scale: [L::F; 2],
    min: [L::F; 2],
}

/// The columns of byte row `c` of a sub-block's low plane (one, two or four), each expanded
/// into 16 weights and multiply-added into every activation row's accumulator.
///
/// # Safety
/// `L`'s instruction set must be enabled.
#[inline(always)]
unsafe fn byte_row<L: Lanes, F: Format, const C: usize>(
    sub: &SubBlock<L>,
    c: usize,
    xs: &[&[f32]; C],
    acc: &mut [L::F; C],
) {
    let (low, high) = (low_bits(F::BITS), F::BITS - low_bits(F::BITS));
    let (rows, per_byte) = (plane_rows(low), (8 / low) as usize);
    let q = sub.q;
    // SAFETY (whole body): every pointer below is into a slice whose length was checked by
    // the indexing, 16 bytes of the sub-block's planes; the caller enabled `L`.
    unsafe {
        let byte_row = q[c * TILE..][..TILE].as_ptr();
        let v = if F::BITS == 8 {
            L::load_i8(byte_row)
        } else {
            L::load_u8(byte_row)
        };
        for h in 0..per_byte {
            let col = c + h * rows;
            let shifted = if h == 0 { v } else { L::shr(v, low * h as u32) };
            // The top bits of a zero-extended byte need no mask.
            let mut qi = if h + 1 == per_byte {
                shifted
            } else {
                L::and(shifted, mask(low))
            };
            if high > 0 {
                let high_rows = plane_rows(high);
                let at = (rows + col % high_rows) * TILE;
                let bits = L::load_u8(q[at..][..TILE].as_ptr());
                let from = high * (col / high_rows) as u32;
                qi = L::or(qi, L::and(shift::<L>(bits, from, low), mask(high) << low));
            }
            let span = col * F::SPANS / SUB;
            let weights = if let Some(values) = &F::VALUES {
                L::mul(L::lookup(qi, values), sub.scale[span])
            } else if F::MIN || F::OFFSET != 0 {
                L::fma(L::float(qi), sub.scale[span], sub.min[span])
            } else {
                L::mul(L::float(qi), sub.scale[span])
            };
            for (acc, xs) in acc.iter_mut().zip(xs) {
                *acc = L::fma(weights, L::splat(xs[col]), *acc);
            }
        }
    }
}

/// Runs a `[.., cols]` f32 tensor through the matrix: `[.., rows]`.
impl CustomOp1 for QuantMatrix {
    fn name(&self) -> &'static str {
        "quant-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        rows_through(self.name(), (self.rows, self.cols), storage, layout, |x| {
            self.matmul(x)
        })
    }
}

#[cfg(test)]
mod tests;
