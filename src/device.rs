//! The list of devices (one per backend compiled in, each behind its cargo feature), their names
//! and parsing. A leaf: what a device can do (`available`, `backend`, `best`, the default) is
//! implemented in `runtime`, which owns the backends.

use crate::error::{bail, Result};
use std::fmt;

/// Where tensors live and kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Executes the linear IR in Rust: the reference every other backend is compared with.
    Interp,
    /// C source compiled by the system C compiler, run on all cores.
    #[cfg(feature = "cpu")]
    Cpu,
    /// WGSL through wgpu: WebGPU in the browser; Vulkan, Metal or DX12 natively.
    #[cfg(feature = "wgpu")]
    Wgpu,
    /// CUDA C through NVRTC on an NVIDIA GPU (native only).
    #[cfg(feature = "cuda")]
    Cuda,
}

impl Device {
    /// Every backend compiled into this build.
    pub fn all() -> Vec<Device> {
        vec![
            Device::Interp,
            #[cfg(feature = "cpu")]
            Device::Cpu,
            #[cfg(feature = "wgpu")]
            Device::Wgpu,
            #[cfg(feature = "cuda")]
            Device::Cuda,
        ]
    }
    pub fn name(self) -> &'static str {
        match self {
            Device::Interp => "INTERP",
            #[cfg(feature = "cpu")]
            Device::Cpu => "CPU",
            #[cfg(feature = "wgpu")]
            Device::Wgpu => "WEBGPU",
            #[cfg(feature = "cuda")]
            Device::Cuda => "CUDA",
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Device {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Device> {
        let mut up = s.trim().to_ascii_uppercase();
        if up == "WGPU" || up == "GPU" {
            up = "WEBGPU".into();
        }
        for d in Device::all() {
            if d.name() == up {
                return Ok(d);
            }
        }
        let known: Vec<&str> = Device::all().iter().map(|d| d.name()).collect();
        bail!(
            Device,
            "unknown device '{s}': this build has {}",
            known.join(", ")
        )
    }
}
