//! The tensors of GGUF and safetensors files, by name and checked against the shapes a
//! family expects, in the form the forward pass keeps them: GGUF matrices as stored (quantized
//! or not), safetensors ones in their own float type.

use crate::model::arch::registry::{Family, Part};
use crate::model::error::{ModelError, without_backtrace};
use crate::model::formats::config::{ModelConfig, io_error};
use crate::model::formats::gguf_checks;
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
    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError>;
    /// A small f32 tensor of `shape` (vectors, a convolution's kernel), dequantized.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError>;
    fn vector(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, ModelError> {
        self.tensor(name, &[len])
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
    ) -> Result<Option<Vec<QMatMul>>, ModelError>;
    fn path(&self) -> &Path;
    /// The family whose tensors these are, for errors.
    fn family(&self) -> &'static Family;
}

/// Reads a GGUF file's header and config; the tensors stay on disk until `load_gguf`.
pub(crate) fn open_gguf(
    path: &Path,
) -> Result<(gguf_file::Content, BufReader<File>, ModelConfig), ModelError> {
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
    let content = gguf_file::Content::read(&mut reader).map_err(|e| corrupt(path, e))?;
    let needed = gguf_checks::check_tensors(&content, header).map_err(|r| corrupt_as(path, r))?;
    if needed > file_size {
        return Err(ModelError::Truncated {
            path: path.to_owned(),
            needed,
            actual: file_size,
        });
    }
    let mut config = ModelConfig::from_gguf(&content, path)?;
    // llama.cpp accepts bytes after the last tensor, as a type changed to a smaller one
    // leaves them; past the alignment padding they are worth a word.
    let trailing = file_size - needed;
    if trailing >= header.alignment {
        config.warnings.push(format!(
            "{}: {trailing} bytes after the last tensor, which no tensor reads: a tensor's \
             type or shape may not be what it was written with",
            path.display()
        ));
    }
    Ok((content, reader, config))
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
    content: &'a gguf_file::Content,
    reader: BufReader<File>,
    path: PathBuf,
    device: Device,
    family: &'static Family,
}

impl<'a> GgufSource<'a> {
    pub(crate) fn new(
        content: &'a gguf_file::Content,
        reader: BufReader<File>,
        path: &Path,
        device: &Device,
        family: &'static Family,
    ) -> Self {
        Self {
            content,
            reader,
            path: path.to_owned(),
            device: device.clone(),
            family,
        }
    }

    fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<QTensor>, ModelError> {
        if !self.content.tensor_infos.contains_key(name) {
            return Ok(None);
        }
        let tensor = self
            .content
            .tensor(&mut self.reader, name, &self.device)
            .map_err(|e| corrupt(&self.path, e))?;
        check_shape(&self.path, self.family, name, shape, tensor.shape().dims())?;
        Ok(Some(tensor))
    }
}

impl Source for GgufSource<'_> {
    fn name(&self, layer: Option<usize>, part: Part, suffix: &str) -> String {
        let part = part.gguf(self.family);
        with_suffix(
            match layer {
                Some(i) => format!("blk.{i}.{part}"),
                None => part.to_owned(),
            },
            suffix,
        )
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError> {
        self.qtensor(name, &[shape.0, shape.1])?
            .map(|t| as_stored(t).map_err(|e| corrupt(&self.path, e)))
            .transpose()
    }

    /// GGUF stacks a layer's experts in one `[count, rows, cols]` tensor, each expert's
    /// blocks contiguous: it is cut into one matrix per expert.
    fn experts(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        (rows, cols): (usize, usize),
    ) -> Result<Option<Vec<QMatMul>>, ModelError> {
        let name = self.name(Some(layer), part, "weight");
        let Some(stacked) = self.qtensor(&name, &[count, rows, cols])? else {
            return Ok(None);
        };
        cut_rows(&stacked, &vec![rows; count], cols)
            .map(Some)
            .map_err(|e| corrupt(&self.path, e))
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

/// `name.suffix`, or `name` alone for a tensor stored without one (GGUF's `ssm_a`).
fn with_suffix(name: String, suffix: &str) -> String {
    match suffix {
        "" => name,
        _ => format!("{name}.{suffix}"),
    }
}

/// `tensor`'s rows, stored one after another, cut into matrices of `rows[i]` rows each.
fn cut_rows(tensor: &QTensor, rows: &[usize], cols: usize) -> candle_core::Result<Vec<QMatMul>> {
    let data = tensor.data()?;
    let row_bytes = data.len() / rows.iter().sum::<usize>().max(1);
    let mut start = 0;
    rows.iter()
        .map(|&n| {
            let bytes = &data[start * row_bytes..(start + n) * row_bytes];
            start += n;
            qtensor_from_ggml(tensor.dtype(), bytes, vec![n, cols], &tensor.device())
                .and_then(as_stored)
        })
        .collect()
}

/// A matrix that stacks several along its rows (a fused qkv or gate-up), cut into them.
pub(crate) fn split_rows(matrix: QMatMul, rows: &[usize]) -> candle_core::Result<Vec<QMatMul>> {
    let narrow = |t: &Tensor, wrap: fn(Tensor) -> QMatMul| {
        let mut start = 0;
        rows.iter()
            .map(|&n| {
                let part = t.narrow(0, start, n)?.contiguous()?;
                start += n;
                Ok(wrap(part))
            })
            .collect()
    };
    match &matrix {
        QMatMul::QTensor(q) => cut_rows(q, rows, q.shape().dims2()?.1),
        QMatMul::Tensor(t) => narrow(t, QMatMul::Tensor),
        QMatMul::TensorF16(t) => narrow(t, QMatMul::TensorF16),
    }
}

/// On the CPU a GGUF matrix stays as stored (quantized, f32, f16 or bf16) for our products
/// ([`Linear::new`]) and the embedding lookup; elsewhere candle widens float matrices to f32
/// for its own product.
fn as_stored(tensor: QTensor) -> candle_core::Result<QMatMul> {
    let tensor = Arc::new(tensor);
    if tensor.device().is_cpu() {
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
        Ok(Self {
            tensors,
            path: dir.to_owned(),
            family,
        })
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
        let part = part.hf(self.family);
        with_suffix(
            match layer {
                Some(i) => format!("model.layers.{i}.{part}"),
                None => part.to_owned(),
            },
            suffix,
        )
    }

    fn matrix(&mut self, name: &str, shape: (usize, usize)) -> Result<Option<QMatMul>, ModelError> {
        let Some(tensor) = self.take(name, &[shape.0, shape.1])? else {
            return Ok(None);
        };
        if !tensor.device().is_cpu() {
            return Ok(Some(QMatMul::Tensor(tensor.to_dtype(DType::F32)?)));
        }
        // The conversion passes through f32 one tensor at a time; the values are exact in
        // their own type, so they come back unchanged.
        let stored = QTensor::quantize(&tensor, stored_type(tensor.dtype()))?;
        Ok(Some(QMatMul::QTensor(Arc::new(stored))))
    }

    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Option<Tensor>, ModelError> {
        Ok(self
            .take(name, shape)?
            .map(|t| t.to_dtype(DType::F32))
            .transpose()?)
    }

    /// One tensor per expert, `model.layers.{layer}.mlp.experts.{e}.gate_proj.weight`: all of
    /// them, or none.
    fn experts(
        &mut self,
        layer: usize,
        part: Part,
        count: usize,
        shape: (usize, usize),
    ) -> Result<Option<Vec<QMatMul>>, ModelError> {
        let name = |e: usize| {
            format!(
                "model.layers.{layer}.mlp.experts.{e}.{}.weight",
                part.hf(self.family)
            )
        };
        let mut matrices = Vec::new();
        for e in 0..count {
            let expert = name(e);
            match self.matrix(&expert, shape)? {
                Some(m) => matrices.push(m),
                None if e == 0 => return Ok(None),
                None => {
                    return Err(ModelError::MissingTensor {
                        path: self.path.clone(),
                        name: expert,
                        family: self.family.name,
                    });
                }
            }
        }
        Ok(Some(matrices))
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
