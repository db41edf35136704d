//! Which device runs a model: `--device cpu | cuda[:N] | metal[:N]`, or the best one present.
//!
//! A GPU exists for samplab only when its cargo feature was compiled in (`--features cuda` or
//! `metal`); asking for one the build lacks says how to rebuild instead of quietly running on
//! the CPU.

use candle_core::Device;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the user asked for; [`DeviceChoice::open`] turns it into a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The first CUDA GPU, else the Metal GPU, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
    Metal(usize),
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("`{0}` is not a device: write cpu, cuda, cuda:N (GPUs count from 0), metal or metal:N")]
    Unknown(String),
    #[error(
        "this samplab was built without {feature} support: rebuild with `cargo build --release --features {feature}`, or pass --device cpu"
    )]
    NotBuilt { feature: &'static str },
    #[error("{device} cannot be opened: {reason}; pass --device cpu, or another GPU")]
    Absent { device: String, reason: String },
}

impl FromStr for DeviceChoice {
    type Err = DeviceError;

    fn from_str(text: &str) -> Result<Self, DeviceError> {
        let unknown = || DeviceError::Unknown(text.to_owned());
        let lower = text.trim().to_ascii_lowercase();
        let (kind, ordinal) = match lower.split_once(':') {
            Some((kind, n)) => (kind, Some(n.parse().map_err(|_| unknown())?)),
            None => (lower.as_str(), None),
        };
        match (kind, ordinal) {
            ("auto", None) => Ok(Self::Auto),
            ("cpu", None) => Ok(Self::Cpu),
            ("cuda", n) => Ok(Self::Cuda(n.unwrap_or(0))),
            ("metal", n) => Ok(Self::Metal(n.unwrap_or(0))),
            _ => Err(unknown()),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Metal(n) => write!(f, "metal:{n}"),
        }
    }
}

impl DeviceChoice {
    /// The device and the name the status bar and `loaded` events show for it.
    pub fn open(self) -> Result<(Device, String), DeviceError> {
        match self {
            Self::Auto => Ok([Self::Cuda(0), Self::Metal(0)]
                .into_iter()
                .find_map(|gpu| gpu.open().ok())
                .unwrap_or_else(|| (Device::Cpu, "cpu".to_owned()))),
            Self::Cpu => Ok((Device::Cpu, "cpu".to_owned())),
            Self::Cuda(n) => open_cuda(n).map(|device| (device, self.to_string())),
            Self::Metal(n) => open_metal(n).map(|device| (device, self.to_string())),
        }
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(ordinal: usize) -> Result<Device, DeviceError> {
    use candle_core::cuda::cudarc::driver::CudaContext;
    let absent = |reason: String| DeviceError::Absent {
        device: format!("cuda:{ordinal}"),
        reason,
    };
    let count = CudaContext::device_count()
        .map_err(|e| absent(format!("the NVIDIA driver does not answer ({e})")))?;
    if ordinal >= count.max(0) as usize {
        return Err(absent(format!("this machine has {count} CUDA GPU(s)")));
    }
    Device::new_cuda(ordinal).map_err(|e| absent(e.to_string()))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: usize) -> Result<Device, DeviceError> {
    Err(DeviceError::NotBuilt { feature: "cuda" })
}

#[cfg(feature = "metal")]
fn open_metal(ordinal: usize) -> Result<Device, DeviceError> {
    Device::new_metal(ordinal).map_err(|e| DeviceError::Absent {
        device: format!("metal:{ordinal}"),
        reason: e.to_string(),
    })
}

#[cfg(not(feature = "metal"))]
fn open_metal(_: usize) -> Result<Device, DeviceError> {
    Err(DeviceError::NotBuilt { feature: "metal" })
}

/// Whether the engine takes, on the CPU too, the paths it takes on a GPU (candle's products,
/// attention and adds, experts one after another, every tensor a candle tensor): a test
/// switch, so that what a GPU runs is checked where no GPU is. Process-wide: the tests that set
/// it run alone in a process of their own.
static GPU_PATHS: AtomicBool = AtomicBool::new(false);

/// Makes models loaded from now on take a GPU's paths on the CPU (see [`cpu_paths`]).
pub fn take_gpu_paths(on: bool) {
    GPU_PATHS.store(on, Ordering::SeqCst);
}

/// Whether work on `device` takes the CPU's own paths: the device is the CPU, and the GPU's
/// paths were not asked for ([`take_gpu_paths`]).
pub fn cpu_paths(device: &Device) -> bool {
    device.is_cpu() && !GPU_PATHS.load(Ordering::Relaxed)
}

/// A GPU's free and total memory in bytes, from its driver; `None` on the CPU, and where the
/// driver cannot say (Metal shares the host's memory).
pub fn gpu_memory(device: &Device) -> Option<(u64, u64)> {
    #[cfg(feature = "cuda")]
    if let Ok(cuda) = device.as_cuda_device() {
        let (free, total) = cuda.cuda_stream().context().mem_get_info().ok()?;
        return Some((free as u64, total as u64));
    }
    let _ = device;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_and_print_back() {
        for (text, choice) in [
            ("cpu", DeviceChoice::Cpu),
            ("CUDA", DeviceChoice::Cuda(0)),
            ("cuda:1", DeviceChoice::Cuda(1)),
            ("metal", DeviceChoice::Metal(0)),
            ("auto", DeviceChoice::Auto),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice, "{text}");
        }
        assert_eq!(DeviceChoice::Cuda(1).to_string(), "cuda:1");
        assert_eq!(DeviceChoice::Auto.to_string(), "auto");
        for bad in [
            "", "tpu", "gpu", "cuda:", "cuda:x", "cpu:0", "cuda:-1", "auto:1",
        ] {
            let error = bad.parse::<DeviceChoice>().unwrap_err().to_string();
            assert!(error.contains("write cpu, cuda, cuda:N"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_cpu_always_opens_and_auto_falls_back_to_it_without_a_gpu() {
        let (device, name) = DeviceChoice::Cpu.open().unwrap();
        assert!(device.is_cpu());
        assert_eq!(name, "cpu");
        let (auto, name) = DeviceChoice::Auto.open().unwrap();
        assert_eq!(auto.is_cpu(), name == "cpu");
        assert_eq!(gpu_memory(&Device::Cpu), None);
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn a_gpu_the_build_lacks_says_how_to_rebuild() {
        let error = DeviceChoice::Cuda(0).open().unwrap_err().to_string();
        assert!(error.contains("--features cuda"), "{error}");
        assert!(error.contains("--device cpu"), "{error}");
    }
}
