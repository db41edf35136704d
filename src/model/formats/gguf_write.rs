//! Writing GGUF files ourselves: candle's `gguf_file::write` has no MXFP4 (type 39, see
//! [`super::mxfp4`]) and wants every tensor in memory at once. Here the table comes first and
//! each tensor's bytes are written as they are made, so a 4 GB file needs one tensor's memory.

use super::mxfp4;
use crate::model::kernels::QuantType;
use candle_core::quantized::{GgmlDType, gguf_file::Value};
use std::io::{self, Write};

/// Where the data section and each tensor start: multiples of GGUF's default alignment, which
/// readers assume when `general.alignment` is absent.
const ALIGNMENT: u64 = 32;

/// One tensor in the table: its dimensions outermost first (as candle lists them) and type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorEntry {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: QuantType,
}

impl TensorEntry {
    /// Bytes of its blocks (each row a whole number of them).
    pub(crate) fn bytes(&self) -> u64 {
        let (block, block_bytes) = self.dtype.block();
        let values: u64 = self.dims.iter().map(|&d| d as u64).product();
        values / block as u64 * block_bytes as u64
    }
}

/// Writes a GGUF (version 3) file: `metadata`, the table of `tensors`, then their bytes, which
/// `data(i, out)` writes for `tensors[i]`, in order. A tensor whose bytes are not as many as
/// its type and shape take is an error, not a file that a reader would misplace.
pub(crate) fn write(
    out: &mut impl Write,
    metadata: &[(String, Value)],
    tensors: &[TensorEntry],
    mut data: impl FnMut(usize, &mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut out = Counted { inner: out, at: 0 };
    out.write_all(b"GGUF")?;
    out.write_all(&3u32.to_le_bytes())?;
    out.write_all(&(tensors.len() as u64).to_le_bytes())?;
    out.write_all(&(metadata.len() as u64).to_le_bytes())?;
    for (key, value) in metadata {
        write_string(&mut out, key)?;
        out.write_all(&value_type(value).to_le_bytes())?;
        write_value(&mut out, value)?;
    }
    let mut offset = 0u64;
    for tensor in tensors {
        write_string(&mut out, &tensor.name)?;
        out.write_all(&(tensor.dims.len() as u32).to_le_bytes())?;
        // GGUF lists dimensions innermost first.
        for &dim in tensor.dims.iter().rev() {
            out.write_all(&(dim as u64).to_le_bytes())?;
        }
        out.write_all(&type_number(tensor.dtype).to_le_bytes())?;
        out.write_all(&offset.to_le_bytes())?;
        offset = (offset + tensor.bytes()).next_multiple_of(ALIGNMENT);
    }
    pad(&mut out)?;
    for (i, tensor) in tensors.iter().enumerate() {
        let start = out.at;
        data(i, &mut out)?;
        let written = out.at - start;
        if written != tensor.bytes() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "tensor `{}` got {written} bytes; its type and shape take {}",
                    tensor.name,
                    tensor.bytes()
                ),
            ));
        }
        pad(&mut out)?;
    }
    out.flush()
}

/// A writer that counts what it wrote, for the padding and the tensors' sizes.
struct Counted<'a, W> {
    inner: &'a mut W,
    at: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.at += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn pad<W: Write>(out: &mut Counted<'_, W>) -> io::Result<()> {
    let zeros = out.at.next_multiple_of(ALIGNMENT) - out.at;
    out.write_all(&vec![0; zeros as usize])
}

fn write_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(&(s.len() as u64).to_le_bytes())?;
    out.write_all(s.as_bytes())
}

/// GGUF's number for a metadata value's type.
fn value_type(value: &Value) -> u32 {
    match value {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn write_value(out: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::U8(v) => out.write_all(&v.to_le_bytes()),
        Value::I8(v) => out.write_all(&v.to_le_bytes()),
        Value::U16(v) => out.write_all(&v.to_le_bytes()),
        Value::I16(v) => out.write_all(&v.to_le_bytes()),
        Value::U32(v) => out.write_all(&v.to_le_bytes()),
        Value::I32(v) => out.write_all(&v.to_le_bytes()),
        Value::F32(v) => out.write_all(&v.to_le_bytes()),
        Value::Bool(v) => out.write_all(&[u8::from(*v)]),
        Value::String(v) => write_string(out, v),
        Value::U64(v) => out.write_all(&v.to_le_bytes()),
        Value::I64(v) => out.write_all(&v.to_le_bytes()),
        Value::F64(v) => out.write_all(&v.to_le_bytes()),
        Value::Array(values) => {
            // An empty array's element type is never read; U32's will do.
            let kind = values.first().map_or(4, value_type);
            if values.iter().any(|value| value_type(value) != kind) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a GGUF array's values must all have one type",
                ));
            }
            out.write_all(&kind.to_le_bytes())?;
            out.write_all(&(values.len() as u64).to_le_bytes())?;
            values.iter().try_for_each(|value| write_value(out, value))
        }
    }
}

/// GGML's number for a tensor type (ggml.h's `ggml_type`).
fn type_number(dtype: QuantType) -> u32 {
    let QuantType::Ggml(dtype) = dtype else {
        return mxfp4::GGML_TYPE;
    };
    match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::formats::gguf_checks;
    use crate::model::formats::mxfp4::{Mxfp4Tensors, StandIn};
    use candle_core::quantized::{QTensor, gguf_file::Content};
    use candle_core::{Device, Tensor};
    use std::io::{BufReader, Cursor, Read, Seek, SeekFrom};

    /// The header as the loader reads it: our scan, candle's reader through the stand-in, the
    /// checks of every tensor's place; and the bytes the table says the file needs.
    fn read_back(bytes: &[u8]) -> (Content, Mxfp4Tensors, u64) {
        let mut reader = BufReader::new(Cursor::new(bytes));
        let header = gguf_checks::scan(&mut reader, bytes.len() as u64).unwrap();
        reader.rewind().unwrap();
        let fields = header.mxfp4.iter().map(|(_, at)| *at).collect();
        let mut stand_in = StandIn::new(&mut reader, fields).unwrap();
        let content = Content::read(&mut stand_in).unwrap();
        let names: Vec<String> = header.mxfp4.iter().map(|(n, _)| n.clone()).collect();
        let mxfp4 = Mxfp4Tensors::listed(&content, &names);
        let needed = gguf_checks::check_tensors(&content, &mxfp4, &header).unwrap();
        (content, mxfp4, needed)
    }

    fn entry(name: &str, dims: &[usize], dtype: QuantType) -> TensorEntry {
        TensorEntry {
            name: name.to_owned(),
            dims: dims.to_vec(),
            dtype,
        }
    }

    #[test]
    fn a_written_file_reads_back_with_its_metadata_tensors_and_mxfp4_blocks() {
        let values = |n: usize| -> Vec<f32> { (0..n).map(|i| (i as f32 * 0.37).sin()).collect() };
        let quantized = |dims: &[usize], dtype| {
            let n = dims.iter().product();
            let tensor = Tensor::from_vec(values(n), dims, &Device::Cpu).unwrap();
            QTensor::quantize(&tensor, dtype)
                .unwrap()
                .data()
                .unwrap()
                .to_vec()
        };
        let mut blocks = Vec::new();
        mxfp4::quantize(&values(3 * 2 * 64), &mut blocks);
        let tensors = [
            entry("norm", &[5], QuantType::Ggml(GgmlDType::F32)),
            entry("q8", &[3, 64], QuantType::Ggml(GgmlDType::Q8_0)),
            entry("experts", &[3, 2, 64], QuantType::Mxfp4),
            entry("q4k", &[2, 256], QuantType::Ggml(GgmlDType::Q4K)),
        ];
        let data = [
            quantized(&[5], GgmlDType::F32),
            quantized(&[3, 64], GgmlDType::Q8_0),
            blocks,
            quantized(&[2, 256], GgmlDType::Q4K),
        ];
        let metadata = vec![
            (
                "general.architecture".to_owned(),
                Value::String("llama".to_owned()),
            ),
            ("count".to_owned(), Value::U32(7)),
            ("eps".to_owned(), Value::F32(1e-5)),
            ("flag".to_owned(), Value::Bool(true)),
            (
                "list".to_owned(),
                Value::Array(vec![Value::I32(-1), Value::I32(2)]),
            ),
        ];
        let mut bytes = Vec::new();
        write(&mut bytes, &metadata, &tensors, |i, out| {
            out.write_all(&data[i])
        })
        .unwrap();

        let (content, mxfp4, needed) = read_back(&bytes);
        assert_eq!(
            needed,
            bytes.len() as u64,
            "no bytes past the last tensor's padding"
        );
        assert_eq!(content.metadata["count"].to_u32().unwrap(), 7);
        assert_eq!(content.metadata["eps"].to_f32().unwrap(), 1e-5);
        assert!(content.metadata["flag"].to_bool().unwrap());
        assert_eq!(
            content.metadata["general.architecture"]
                .to_string()
                .unwrap(),
            "llama"
        );
        let list = content.metadata["list"].to_vec().unwrap();
        assert_eq!(
            list.iter().map(|v| v.to_i32().unwrap()).collect::<Vec<_>>(),
            [-1, 2]
        );
        let experts = mxfp4.get("experts").expect("the MXFP4 tensor is listed");
        assert_eq!(experts.dims, [3, 2, 64]);
        let start = content.tensor_data_offset + experts.offset;
        assert_eq!(
            &bytes[start as usize..][..data[2].len()],
            data[2].as_slice()
        );
        for (i, tensor) in tensors.iter().enumerate().filter(|(i, _)| *i != 2) {
            let info = &content.tensor_infos[&tensor.name];
            assert_eq!(info.shape.dims(), tensor.dims.as_slice(), "{}", tensor.name);
            assert_eq!(
                QuantType::Ggml(info.ggml_dtype),
                tensor.dtype,
                "{}",
                tensor.name
            );
            let mut reader = Cursor::new(&bytes);
            let read = content
                .tensor(&mut reader, &tensor.name, &Device::Cpu)
                .unwrap();
            assert_eq!(
                read.data().unwrap().as_ref(),
                data[i].as_slice(),
                "{}",
                tensor.name
            );
        }
    }

    #[test]
    fn a_tensor_given_the_wrong_number_of_bytes_is_an_error_naming_it() {
        let tensors = [entry("w", &[2, 32], QuantType::Ggml(GgmlDType::Q8_0))];
        let error = write(&mut Vec::new(), &[], &tensors, |_, out| {
            out.write_all(&[0; 67])
        })
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "tensor `w` got 67 bytes; its type and shape take 68"
        );
    }

    #[test]
    fn an_array_of_mixed_types_is_refused() {
        let mixed = Value::Array(vec![Value::U32(1), Value::F32(2.0)]);
        let error = write(
            &mut Vec::new(),
            &[("mixed".to_owned(), mixed)],
            &[],
            |_, _| Ok(()),
        )
        .unwrap_err();
        assert!(error.to_string().contains("one type"), "{error}");
    }

    /// Each tensor starts on a multiple of the alignment, from the data section's start.
    #[test]
    fn tensors_start_aligned() {
        let tensors = [
            entry("a", &[3], QuantType::Ggml(GgmlDType::F32)),
            entry("b", &[32], QuantType::Mxfp4),
        ];
        let mut bytes = Vec::new();
        write(&mut bytes, &[], &tensors, |i, out| {
            out.write_all(&[i as u8 + 1; 17][..[12, 17][i]])
        })
        .unwrap();
        let (content, mxfp4, _) = read_back(&bytes);
        assert_eq!(content.tensor_data_offset % ALIGNMENT, 0);
        assert_eq!(content.tensor_infos["a"].offset, 0);
        let b = mxfp4.get("b").unwrap().offset;
        assert_eq!(b, ALIGNMENT);
        let mut cursor = Cursor::new(&bytes);
        cursor
            .seek(SeekFrom::Start(content.tensor_data_offset + b))
            .unwrap();
        let mut block = [0; 17];
        cursor.read_exact(&mut block).unwrap();
        assert_eq!(block, [2; 17]);
    }
}
