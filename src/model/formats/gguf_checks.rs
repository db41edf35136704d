//! What candle's GGUF reader does not check, checked before and after it reads the header:
//! it divides by `general.alignment` (0 panics), keeps only the last of two tensors that share
//! a name, holds every metadata array element as a 32-byte value (a 64M-element byte array
//! takes 2 GB), and trusts each tensor's dimensions, type and offset. llama.cpp refuses all of
//! these; so do we, naming the key or tensor.

use super::mxfp4::{self, Mxfp4Tensors};
use crate::model::kernels::QuantType;
use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::HashSet;
use std::io::{BufReader, Read, Seek};

/// GGUF's default tensor data alignment.
const DEFAULT_ALIGNMENT: u64 = 32;
/// What the parsed metadata may take beyond the file's own size: a 150k-token vocabulary with
/// its scores, types and merges takes about 25 MB.
const METADATA_SLACK: u64 = 64 << 20;
/// candle's limit on arrays nested in arrays.
const MAX_DEPTH: usize = 64;

/// What the first pass learns for candle's read of the header and the checks after it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Header {
    pub alignment: u64,
    /// MXFP4 tensors (which candle refuses): names, and where each one's type field lies.
    pub mxfp4: Vec<(String, u64)>,
}

/// Walks the header without keeping values. A header cut short or otherwise unreadable is left
/// to candle's reader, which says what it found; only what candle would mishandle is refused.
pub(crate) fn scan<R: Read + Seek>(
    reader: &mut BufReader<R>,
    file_size: u64,
) -> Result<Header, String> {
    let mut scan = Scan {
        reader,
        wide: true,
        held: 0,
        budget: file_size.saturating_add(METADATA_SLACK),
    };
    match scan.header() {
        Ok(header) => header,
        Err(Unreadable) => Ok(Header {
            alignment: DEFAULT_ALIGNMENT,
            mxfp4: Vec::new(),
        }),
    }
}

/// A read failed: the header is not what the format says, and candle will say how.
struct Unreadable;

impl From<std::io::Error> for Unreadable {
    fn from(_: std::io::Error) -> Self {
        Unreadable
    }
}

struct Scan<'a, R> {
    reader: &'a mut BufReader<R>,
    /// GGUF v2 and v3 write lengths as u64, v1 as u32.
    wide: bool,
    /// Bytes the parsed metadata will take in memory.
    held: u64,
    budget: u64,
}

type Step<T> = Result<T, Unreadable>;

impl<R: Read + Seek> Scan<'_, R> {
    fn header(&mut self) -> Step<Result<Header, String>> {
        let _magic = self.u32()?;
        self.wide = match self.u32()? {
            1 => false,
            2 | 3 => true,
            _ => return Err(Unreadable),
        };
        let tensors = self.length()?;
        let entries = self.length()?;
        let mut alignment = DEFAULT_ALIGNMENT;
        for _ in 0..entries {
            let key = self.string()?;
            let kind = self.u32()?;
            if key == b"general.alignment" {
                match self.alignment(kind)? {
                    Ok(a) => alignment = a,
                    Err(reason) => return Ok(Err(reason)),
                }
                continue;
            }
            self.skip_value(kind, 0)?;
            if self.held > self.budget {
                return Ok(Err(format!(
                    "its metadata would take over {} MB in memory, far more than the file's size \
                     (metadata `{}` is the array that crossed the limit)",
                    self.budget >> 20,
                    String::from_utf8_lossy(&key)
                )));
            }
        }
        let mut names = HashSet::new();
        let mut mxfp4 = Vec::new();
        for _ in 0..tensors {
            let name = self.string()?;
            let dims = self.u32()?;
            if dims > 4 {
                return Err(Unreadable);
            }
            let dim_bytes = if self.wide { 8 } else { 4 };
            self.skip(i64::from(dims) * dim_bytes)?;
            let type_at = self.reader.stream_position()?;
            match self.u32()? {
                mxfp4::GGML_TYPE => mxfp4.push((candle_name(&name), type_at)),
                // The types candle 0.11 reads.
                0..=3 | 6..=15 | 30 => {}
                kind => {
                    return Ok(Err(format!(
                        "tensor `{}` has GGML type {kind}, which samplab cannot read (it reads \
                         F32, F16, BF16, the Q*_0, Q*_1 and K-quant types, and MXFP4)",
                        candle_name(&name)
                    )));
                }
            }
            self.skip(8)?;
            if !names.insert(name.clone()) {
                return Ok(Err(format!(
                    "tensor `{}` is listed twice",
                    String::from_utf8_lossy(&name)
                )));
            }
        }
        Ok(Ok(Header { alignment, mxfp4 }))
    }

    fn alignment(&mut self, kind: u32) -> Step<Result<u64, String>> {
        let value = match kind {
            0 => u64::from(self.bytes::<1>()?[0]),
            2 => u64::from(u16::from_le_bytes(self.bytes()?)),
            4 => u64::from(self.u32()?),
            _ => {
                return Ok(Err(
                    "metadata `general.alignment` must be an unsigned integer (u32)".to_owned(),
                ));
            }
        };
        Ok(if value.is_power_of_two() {
            Ok(value)
        } else {
            Err(format!(
                "metadata `general.alignment` is {value}; it must be a power of two ({DEFAULT_ALIGNMENT} by default)"
            ))
        })
    }

    fn skip_value(&mut self, kind: u32, depth: usize) -> Step<()> {
        match kind {
            8 => {
                let len = self.length()?;
                self.held = self.held.saturating_add(len);
                self.skip_len(len)
            }
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(Unreadable);
                }
                let element = self.u32()?;
                let len = self.length()?;
                let value_size = std::mem::size_of::<Value>() as u64;
                self.held = self.held.saturating_add(len.saturating_mul(value_size));
                if self.held > self.budget {
                    return Ok(());
                }
                match fixed_size(element) {
                    Some(size) => self.skip_len(len.checked_mul(size).ok_or(Unreadable)?),
                    None => (0..len).try_for_each(|_| self.skip_value(element, depth + 1)),
                }
            }
            _ => self.skip_len(fixed_size(kind).ok_or(Unreadable)?),
        }
    }

    fn length(&mut self) -> Step<u64> {
        if self.wide {
            Ok(u64::from_le_bytes(self.bytes()?))
        } else {
            Ok(u64::from(self.u32()?))
        }
    }

    fn string(&mut self) -> Step<Vec<u8>> {
        let len = self.length()?;
        let mut text = Vec::new();
        (&mut *self.reader).take(len).read_to_end(&mut text)?;
        if text.len() as u64 != len {
            return Err(Unreadable);
        }
        Ok(text)
    }

    fn u32(&mut self) -> Step<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn bytes<const N: usize>(&mut self) -> Step<[u8; N]> {
        let mut bytes = [0; N];
        self.reader.read_exact(&mut bytes)?;
        Ok(bytes)
    }

    fn skip_len(&mut self, len: u64) -> Step<()> {
        self.skip(i64::try_from(len).map_err(|_| Unreadable)?)
    }

    fn skip(&mut self, len: i64) -> Step<()> {
        Ok(self.reader.seek_relative(len)?)
    }
}

/// A tensor's name as candle keeps it: trailing NULs dropped, invalid UTF-8 replaced.
fn candle_name(bytes: &[u8]) -> String {
    let end = bytes
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Bytes of a fixed-size GGUF value type; `None` for strings and arrays.
fn fixed_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// One tensor's place in the data section.
struct Extent<'a> {
    name: &'a str,
    offset: u64,
    bytes: u64,
}

/// What the rules need of a tensor in either table.
struct Listed<'a> {
    name: &'a str,
    dims: &'a [usize],
    type_name: String,
    /// Values and bytes of a block of its type.
    block: (usize, usize),
    offset: u64,
}

/// llama.cpp's rules for the tensor table: every tensor has dimensions whose element count
/// fits and fills whole blocks of its type, and the tensors lie one after another, each at an
/// aligned offset, in the data section. A type changed after writing breaks the second rule.
/// Returns the bytes the data section needs, from the start of the file.
pub(crate) fn check_tensors(
    content: &Content,
    mxfp4: &Mxfp4Tensors,
    header: &Header,
) -> Result<u64, String> {
    let not_stand_in = |(name, _): &(&String, _)| mxfp4.get(name).is_none();
    let candle = content
        .tensor_infos
        .iter()
        .filter(not_stand_in)
        .map(|(name, info)| Listed {
            name,
            dims: info.shape.dims(),
            type_name: format!("{:?}", info.ggml_dtype),
            block: QuantType::Ggml(info.ggml_dtype).block(),
            offset: info.offset,
        });
    let ours = mxfp4.iter().map(|(name, info)| Listed {
        name,
        dims: &info.dims,
        type_name: "MXFP4".to_owned(),
        block: QuantType::Mxfp4.block(),
        offset: info.offset,
    });
    let mut extents = Vec::with_capacity(content.tensor_infos.len());
    for Listed {
        name,
        dims,
        type_name,
        block: (block, type_size),
        offset,
    } in candle.chain(ours)
    {
        if dims.is_empty() {
            return Err(format!("tensor `{name}` has no dimensions"));
        }
        let elements = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .filter(|&n| n <= isize::MAX as u64)
            .ok_or_else(|| format!("tensor `{name}` has dimensions {dims:?}, too many elements"))?;
        if !dims[dims.len() - 1].is_multiple_of(block) {
            return Err(format!(
                "tensor `{name}` of type {type_name} has rows of {} values, not a multiple of \
                 its block of {block}",
                dims[dims.len() - 1]
            ));
        }
        if !offset.is_multiple_of(header.alignment) {
            return Err(format!(
                "tensor `{name}` starts at offset {offset}, not a multiple of the alignment {}",
                header.alignment
            ));
        }
        let bytes = (elements / block as u64)
            .checked_mul(type_size as u64)
            .ok_or_else(|| format!("tensor `{name}` has dimensions {dims:?}, too many bytes"))?;
        extents.push(Extent {
            name,
            offset,
            bytes,
        });
    }
    extents.sort_by_key(|e| e.offset);
    let mut end = 0u64;
    let mut previous: Option<&Extent> = None;
    for extent in &extents {
        let expected = end.next_multiple_of(header.alignment);
        if extent.offset != expected {
            let before = previous.map_or("the start of the data".to_owned(), |p| {
                format!("tensor `{}`", p.name)
            });
            let how = if extent.offset < expected {
                "overlaps"
            } else {
                "leaves a gap after"
            };
            return Err(format!(
                "tensor `{}` at offset {} {how} {before}, which ends at {end}: the tensors' \
                 types or shapes do not match their stored sizes",
                extent.name, extent.offset
            ));
        }
        end = extent
            .offset
            .checked_add(extent.bytes)
            .ok_or_else(|| format!("tensor `{}` ends beyond any file", extent.name))?;
        previous = Some(extent);
    }
    content
        .tensor_data_offset
        .checked_add(end)
        .ok_or_else(|| "the tensors end beyond any file".to_owned())
}
