//! The tensors of GGUF and safetensors files, by name and checked against the shapes a
//! family expects, in the form the forward pass keeps them: GGUF matrices as stored (quantized
//! or not), safetensors ones in their own float type.

use crate::model::arch::registry::{Family, Part};
use crate::model::device::cpu_paths;
use crate::model::error::{ModelError, without_backtrace};
use crate::model::formats::config::{ModelConfig, io_error};
use crate::model::formats::gguf_checks;
use crate::model::formats::mxfp4::{self, Mxfp4Tensors};
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where tensors come from: by name, shape-checked, `None` when absent.
pub(crate) trait Source {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String;
    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<Stored>, ModelError>;
    /// A small f32 tensor of `shape` (vectors, a convolution's kernel), dequantized.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError>;
    fn vector(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.tensor(name, &[len])
    }
    /// A Gated DeltaNet's decay rates per value head, negative: GGUF's `ssm_a` as stored.
    fn decay_rates(&mut self, name: &str, heads: usize) -> Result<Option<Tensor>, ModelError> {
        self.vector(name, heads)
    }
    /// A causal convolution's filters, `[channels, kernel]`.
    fn conv_kernel(
        &mut self,
        name: &str,
        channels: usize,
        kernel: usize,
    ) -> Result<Option<Tensor>, ModelError> {
        self.tensor(name, &[channels, kernel])
    }
    /// A shared expert's gate: one weight per hidden unit.
    fn shared_expert_gate(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.vector(name, len)
    }
    /// An RMSNorm's weight as the forward pass multiplies by it.
    fn norm(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.vector(name, len)
    }
    /// Layer `layer`'s `count` expert matrices of one kind (`part`), each `shape`; `None` when
    /// the file has none.
    fn experts(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        shape: (usize, usize),
    ) -> Result<Option<Vec<Stored>>, ModelError>;
    /// The biases of layer `layer`'s `count` expert matrices of one kind, `len` each (gpt-oss);
    /// `None` when the file has none.
    fn expert_biases(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        len: usize,
    ) -> Result<Option<Vec<Tensor>>, ModelError>;
    fn path(&self) -> &Path;
    /// The family whose tensors these are, for errors.
    fn family(&self) -> &'static Family;
}

/// A matrix as a file stores it: in a form candle holds, or MXFP4 blocks, which it has no
/// type for.
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    Candle(QMatMul),
    Mxfp4(Arc<Mxfp4Matrix>),
}

impl Stored {
    /// candle's form: MXFP4 widened to f32.
    pub(crate) fn into_candle(self) -> candle_core::Result<QMatMul> {
        match self {
            Stored::Candle(m) => Ok(m),
            Stored::Mxfp4(m) => m.widened(),
        }
    }
}

/// A `[rows, cols]` matrix of MXFP4 blocks, row by row, for `device`.
#[derive(Debug)]
pub(crate) struct Mxfp4Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<u8>,
    pub device: Device,
}

impl Mxfp4Matrix {
    /// Its values in f32, for where our kernel does not run: f32 stays as stored on the CPU
    /// (our dense product takes it), and is candle's matrix elsewhere.
    pub(crate) fn widened(&self) -> candle_core::Result<QMatMul> {
        let mut values = vec![0f32; self.rows * self.cols];
        mxfp4::dequantize(&self.data, &mut values);
        let cpu = Tensor::from_vec(values, (self.rows, self.cols), &Device::Cpu)?;
        if cpu_paths(&self.device) {
            let stored = QTensor::quantize(&cpu, GgmlDType::F32)?;
            Ok(QMatMul::QTensor(Arc::new(stored)))
        } else {
            Ok(QMatMul::Tensor(cpu.to_device(&self.device)?))
        }
    }

    /// Its rows cut into matrices of `rows[i]` rows each.
    fn cut_rows(&self, rows: &[usize]) -> Vec<Stored> {
        let row_bytes = self.cols / mxfp4::BLOCK * mxfp4::BLOCK_BYTES;
        let mut start = 0;
        rows.iter()
            .map(|&n| {
                let data = self.data[start * row_bytes..(start + n) * row_bytes].to_vec();
                start += n;
                Stored::Mxfp4(Arc::new(Self {
                    rows: n,
                    cols: self.cols,
                    data,
                    device: self.device.clone(),
                }))
            })
            .collect()
    }
}

/// A GGUF file's header, read: candle's table of tensors and our own of the MXFP4 ones.
pub(crate) struct GgufTables {
    pub content: gguf_file::Content,
    pub mxfp4: Mxfp4Tensors,
}

/// Reads a GGUF file's header and config; the tensors stay on disk until `load_gguf`.
pub(crate) fn open_gguf(
    path: &Path,
) -> Result<(GgufTables, BufReader<File>, ModelConfig), ModelError> {
    let Checked {
        mut content,
        mxfp4,
        reader,
        trailing,
        alignment,
    } = check_gguf(path)?;
    // The config reads the tensors' shapes, the stand-ins' too; then they leave candle's table.
    let mut config = ModelConfig::from_gguf(&content, path)?;
    mxfp4.remove_from(&mut content);
    // llama.cpp accepts bytes after the last tensor, as a type changed to a smaller one
    // leaves them; past the alignment padding they are worth a word.
    if trailing >= alignment {
        config.warnings.push(format!(
            "{}: {trailing} bytes after the last tensor, which no tensor reads: a tensor's \
             type or shape may not be what it was written with",
            path.display()
        ));
    }
    Ok((GgufTables { content, mxfp4 }, reader, config))
}

/// A GGUF file whose header, metadata and tensor table passed samplab's checks: what any
/// backend may be handed, whatever its architecture.
pub(crate) struct Checked {
    pub content: gguf_file::Content,
    mxfp4: Mxfp4Tensors,
    reader: BufReader<File>,
    /// Bytes after the last tensor.
    trailing: u64,
    alignment: u64,
}

/// Reads a GGUF file's header, metadata and tensor table, refusing what is malformed or
/// truncated (before llama.cpp, which aborts the process on some such files, sees it).
pub(crate) fn check_gguf(path: &Path) -> Result<Checked, ModelError> {
    let file = crate::regular_file::open(path).map_err(|e| io_error(path, e))?;
    let file_size = file.metadata().map_err(|e| io_error(path, e))?.len();
    let mut reader = BufReader::new(file);
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut reader, &mut magic)
        .map_err(|_| ModelError::NotGguf(path.to_owned()))?;
    if &magic != b"GGUF" {
        return Err(ModelError::NotGguf(path.to_owned()));
    }
    std::io::Seek::rewind(&mut reader).map_err(|e| io_error(path, e))?;
    let header = gguf_checks::scan(&mut reader, file_size).map_err(|r| corrupt_as(path, r))?;
    std::io::Seek::rewind(&mut reader).map_err(|e| io_error(path, e))?;
    let fields = header.mxfp4.iter().map(|(_, at)| *at).collect();
    let mut stand_in = mxfp4::StandIn::new(&mut reader, fields).map_err(|e| io_error(path, e))?;
    let content = gguf_file::Content::read(&mut stand_in).map_err(|e| corrupt(path, e))?;
    let names: Vec<String> = header.mxfp4.iter().map(|(name, _)| name.clone()).collect();
    let mxfp4 = Mxfp4Tensors::listed(&content, &names);
    let needed =
        gguf_checks::check_tensors(&content, &mxfp4, &header).map_err(|r| corrupt_as(path, r))?;
    if needed > file_size {
        return Err(ModelError::Truncated {
            path: path.to_owned(),
            needed,
            actual: file_size,
        });
    }
    Ok(Checked {
        content,
        mxfp4,
        reader,
        trailing: file_size - needed,
        alignment: header.alignment,
    })
}

/// The `*.safetensors` files of a Hugging Face model directory, in name order.
pub(crate) fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_error(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    if files.is_empty() {
        return Err(ModelError::NoWeights(dir.to_owned()));
    }
    files.sort();
    Ok(files)
}

pub(crate) fn require<S: Source, T>(
    source: &mut S,
    name: &str,
    get: impl FnOnce(&mut S, &str) -> Result<Option<T>, ModelError>,
) -> Result<T, ModelError> {
    get(source, name)?.ok_or_else(|| ModelError::MissingTensor {
        path: source.path().to_owned(),
        name: name.to_owned(),
        family: source.family().name,
    })
}

fn check_shape(
    path: &Path,
    family: &Family,
    name: &str,
    expected: &[usize],
    actual: &[usize],
) -> Result<(), ModelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(ModelError::TensorShape {
            path: path.to_owned(),
            name: name.to_owned(),
            family: family.name,
            expected: expected.to_vec(),
            actual: actual.to_vec(),
        })
    }
}

fn corrupt(path: &Path, e: candle_core::Error) -> ModelError {
    corrupt_as(path, without_backtrace(e).to_string())
}

fn corrupt_as(path: &Path, reason: String) -> ModelError {
    ModelError::Corrupt {
        path: path.to_owned(),
        reason,
    }
}

pub(crate) struct GgufSource<'a> {
    tables: &'a GgufTables,
    reader: BufReader<File>,
    path: PathBuf,
    device: Device,
    family: &'static Family,
}

impl<'a> GgufSource<'a> {
    pub(crate) fn new(
        tables: &'a GgufTables,
        reader: BufReader<File>,
        path: &Path,
        device: &Device,
        family: &'static Family,
    ) -> Self {
        Self {
            tables,
            reader,
            path: path.to_owned(),
            device: device.clone(),
            family,
        }
    }

    /// A tensor of `shape` as stored: MXFP4 as its blocks (`[.., rows, cols]` in one
    /// matrix of all its rows), any other as candle reads it.
    fn stored(&mut self, name: &str, shape: &[usize]) -> Result<Option<Stored>, ModelError> {
        let Some(info) = self.tables.mxfp4.get(name) else {
            return Ok(self
                .qtensor(name, shape)?
                .map(|t| Stored::Candle(QMatMul::QTensor(Arc::new(t)))));
        };
        check_shape(&self.path, self.family, name, shape, &info.dims)?;
        let (Some(bytes), Some(at)) = (
            info.bytes(),
            self.tables
                .content
                .tensor_data_offset
                .checked_add(info.offset),
        ) else {
            return Err(corrupt_as(
                &self.path,
                format!("tensor `{name}` lies past any file"),
            ));
        };
        let data = read_at(&mut self.reader, at, bytes).map_err(|e| io_error(&self.path, e))?;
        let cols = shape[shape.len() - 1];
        let matrix = Mxfp4Matrix {
            rows: shape
                .iter()
                .product::<usize>()
                .checked_div(cols)
                .unwrap_or(0),
            cols,
            data,
            device: self.device.clone(),
        };
        Ok(Some(Stored::Mxfp4(Arc::new(matrix))))
    }

    fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<QTensor>, ModelError> {
        if !self.tables.content.tensor_infos.contains_key(name) {
            return Ok(None);
        }
        let tensor = self
            .tables
            .content
            .tensor(&mut self.reader, name, &self.device)
            .map_err(|e| corrupt(&self.path, e))?;
        check_shape(&self.path, self.family, name, shape, tensor.shape().dims())?;
        Ok(Some(tensor))
    }
}

impl Source for GgufSource<'_> {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String {
        tensor_name("blk", layer, part.gguf(self.family), suffix)
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<Stored>, ModelError> {
        match self.stored(name, &[shape.0, shape.1])? {
            Some(Stored::Candle(QMatMul::QTensor(t))) => as_stored(t)
                .map(|m| Some(Stored::Candle(m)))
                .map_err(|e| corrupt(&self.path, e)),
            other => Ok(other),
        }
    }

    /// GGUF stacks a layer's experts in one `[count, rows, cols]` tensor, each expert's
    /// blocks contiguous: it is cut into one matrix per expert.
    fn experts(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        (rows, cols): (usize, usize),
    ) -> Result<Option<Vec<Stored>>, ModelError> {
        let name = self.name(Some(layer), part, "weight");
        let Some(stacked) = self.stored(&name, &[count, rows, cols])? else {
            return Ok(None);
        };
        split_rows(stacked, &vec![rows; count])
            .map(Some)
            .map_err(|e| corrupt(&self.path, e))
    }

    /// GGUF stacks them in one `[count, len]` tensor.
    fn expert_biases(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        len: usize,
    ) -> Result<Option<Vec<Tensor>>, ModelError> {
        let name = self.name(Some(layer), part, "bias");
        let Some(stacked) = self.qtensor(&name, &[count, len])? else {
            return Ok(None);
        };
        let stacked = stacked
            .dequantize(&self.device)
            .map_err(|e| corrupt(&self.path, e))?;
        Ok(Some(
            (0..count)
                .map(|e| stacked.get(e))
                .collect::<candle_core::Result<_>>()?,
        ))
    }

    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError> {
        self.qtensor(name, shape)?
            .map(|t| {
                t.dequantize(&self.device)
                    .map_err(|e| corrupt(&self.path, e))
            })
            .transpose()
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn family(&self) -> &'static Family {
        self.family
    }
}

/// `part` of layer `layer` (under `layers`, e.g. `blk.3.attn_q`) or of the model, then
/// `.suffix`, or nothing for a tensor stored without one (GGUF's `ssm_a`).
fn tensor_name(layers: &str, layer: Option<usize>, part: &str, suffix: &str) -> String {
    let name = match layer {
        Some(i) => format!("{layers}.{i}.{part}"),
        None => part.to_owned(),
    };
    match suffix {
        "" => name,
        _ => format!("{name}.{suffix}"),
    }
}

/// `len` bytes from `at`, which the header checks found inside the file.
fn read_at(reader: &mut BufReader<File>, at: u64, len: u64) -> std::io::Result<Vec<u8>> {
    std::io::Seek::seek(reader, std::io::SeekFrom::Start(at))?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(reader, len), &mut data)?;
    if data.len() as u64 != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(data)
}

/// `tensor`'s rows, stored one after another, cut into matrices of `rows[i]` rows each.
fn cut_rows(tensor: &QTensor, rows: &[usize], cols: usize) -> candle_core::Result<Vec<Stored>> {
    let data = tensor.data()?;
    let row_bytes = data.len() / rows.iter().sum::<usize>().max(1);
    let mut start = 0;
    rows.iter()
        .map(|&n| {
            let bytes = &data[start * row_bytes..(start + n) * row_bytes];
            start += n;
            qtensor_from_ggml(tensor.dtype(), bytes, vec![n, cols], &tensor.device())
                .and_then(|t| as_stored(Arc::new(t)))
                .map(Stored::Candle)
        })
        .collect()
}

/// A matrix that stacks several along its rows (a fused qkv or gate-up, a layer's experts),
/// cut into them.
pub(crate) fn split_rows(matrix: Stored, rows: &[usize]) -> candle_core::Result<Vec<Stored>> {
    let narrow = |t: &Tensor, wrap: fn(Tensor) -> QMatMul| {
        let mut start = 0;
        rows.iter()
            .map(|&n| {
                let part = t.narrow(0, start, n)?.contiguous()?;
                start += n;
                Ok(Stored::Candle(wrap(part)))
            })
            .collect()
    };
    match &matrix {
        Stored::Mxfp4(m) => Ok(m.cut_rows(rows)),
        Stored::Candle(QMatMul::QTensor(q)) => {
            cut_rows(q, rows, *q.shape().dims().last().unwrap_or(&0))
        }
        Stored::Candle(QMatMul::Tensor(t)) => narrow(t, QMatMul::Tensor),
        Stored::Candle(QMatMul::TensorF16(t)) => narrow(t, QMatMul::TensorF16),
    }
}

/// On the CPU a GGUF matrix stays as stored (quantized, f32, f16 or bf16) for our products
/// ([`Linear::new`]) and the embedding lookup; elsewhere candle widens float matrices to f32
/// for its own product.
fn as_stored(tensor: Arc<QTensor>) -> candle_core::Result<QMatMul> {
    if cpu_paths(&tensor.device()) {
        Ok(QMatMul::QTensor(tensor))
    } else {
        QMatMul::from_arc(tensor)
    }
}

pub(crate) struct HfSource {
    tensors: HashMap<String, Tensor>,
    path: PathBuf,
    family: &'static Family,
}

impl HfSource {
    /// Every `*.safetensors` file of a Hugging Face model directory, read; a tensor in two
    /// files is refused.
    pub(crate) fn read(
        dir: &Path,
        device: &Device,
        family: &'static Family,
    ) -> Result<Self, ModelError> {
        let mut tensors = HashMap::new();
        let mut first_file = HashMap::new();
        for file in &safetensors_files(dir)? {
            crate::regular_file::check(file).map_err(|e| io_error(file, e))?;
            let loaded =
                candle_core::safetensors::load(file, device).map_err(|e| corrupt(file, e))?;
            for (name, tensor) in loaded {
                if let Some(first) = first_file.insert(name.clone(), file) {
                    return Err(corrupt_as(
                        file,
                        format!("tensor `{name}` is also in {}", first.display()),
                    ));
                }
                tensors.insert(name, tensor);
            }
        }
        if let Some(layout) = family.hf_fused_experts {
            super::fused_experts::split(&mut tensors, layout).map_err(|r| corrupt_as(dir, r))?;
        }
        Ok(Self {
            tensors,
            path: dir.to_owned(),
            family,
        })
    }

    /// One tensor per expert, `model.layers.{layer}.mlp.experts.{e}.gate_proj.{suffix}`: all
    /// of them, or none.
    fn per_expert<T>(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        suffix: &str,
        get: impl Fn(&mut Self, &str) -> Result<Option<T>, ModelError>,
    ) -> Result<Option<Vec<T>>, ModelError> {
        let mut found = Vec::new();
        for e in 0..count {
            let name = format!(
                "model.layers.{layer}.mlp.experts.{e}.{}.{suffix}",
                part.hf(self.family)
            );
            match get(self, &name)? {
                Some(t) => found.push(t),
                None if e == 0 => return Ok(None),
                None => {
                    return Err(ModelError::MissingTensor {
                        path: self.path.clone(),
                        name,
                        family: self.family.name,
                    });
                }
            }
        }
        Ok(Some(found))
    }

    /// Takes a tensor out of the loaded files, so that each is freed once converted.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError> {
        let Some(tensor) = self.tensors.remove(name) else {
            return Ok(None);
        };
        check_shape(&self.path, self.family, name, shape, tensor.dims())?;
        Ok(Some(tensor))
    }
}

/// The GGML type a safetensors matrix is kept in on the CPU: f16 and bf16 as they are,
/// anything else as f32.
fn stored_type(dtype: DType) -> GgmlDType {
    match dtype {
        DType::F16 => GgmlDType::F16,
        DType::BF16 => GgmlDType::BF16,
        _ => GgmlDType::F32,
    }
}

impl Source for HfSource {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String {
        tensor_name("model.layers", layer, part.hf(self.family), suffix)
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<Stored>, ModelError> {
        let Some(tensor) = self.take(name, &[shape.0, shape.1])? else {
            return Ok(None);
        };
        if !cpu_paths(tensor.device()) {
            let widened = QMatMul::Tensor(tensor.to_dtype(DType::F32)?);
            return Ok(Some(Stored::Candle(widened)));
        }
        // The conversion passes through f32 one tensor at a time; the values are exact in
        // their own type, so they come back unchanged.
        let stored = QTensor::quantize(&tensor, stored_type(tensor.dtype()))?;
        Ok(Some(Stored::Candle(QMatMul::QTensor(Arc::new(stored)))))
    }

    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .take(name, shape)?
            .map(|t| t.to_dtype(DType::F32))
            .transpose()?)
    }

    fn experts(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        shape: (usize, usize),
    ) -> Result<Option<Vec<Stored>>, ModelError> {
        self.per_expert(layer, part, count, "weight", |s, n| s.matrix(n, shape))
    }

    fn expert_biases(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        len: usize,
    ) -> Result<Option<Vec<Tensor>>, ModelError> {
        self.per_expert(layer, part, count, "bias", |s, n| s.vector(n, len))
    }

    /// config.json stores `A_log`; the rates are `-exp(A_log)`, as convert writes them.
    fn decay_rates(&mut self, name: &str, heads: usize) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .vector(name, heads)?
            .map(|log| log.exp()?.neg())
            .transpose()?)
    }

    /// config.json keeps a depthwise convolution's filters as `[channels, 1, kernel]`.
    fn conv_kernel(
        &mut self,
        name: &str,
        channels: usize,
        kernel: usize,
    ) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .tensor(name, &[channels, 1, kernel])?
            .map(|t| t.reshape((channels, kernel)))
            .transpose()?)
    }

    /// config.json keeps it as a `Linear(hidden, 1)`, `[1, hidden]`.
    fn shared_expert_gate(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .tensor(name, &[1, len])?
            .map(|t| t.reshape(len))
            .transpose()?)
    }

    /// Gemma's checkpoints store `w - 1`; convert adds the one for GGUF, we add it here.
    fn norm(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        let weight = self.vector(name, len)?;
        match weight {
            Some(w) if self.family.hf_norm_plus_one => Ok(Some((w + 1.0)?)),
            other => Ok(other),
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn family(&self) -> &'static Family {
        self.family
    }
}
