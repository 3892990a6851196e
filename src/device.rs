//! The list of backends (one per backend compiled in, each behind its cargo feature), numbered
//! devices (`CPU:1` is the second instance of the CPU backend), their names and parsing. A
//! leaf: what a device can do (`available`, `backend`, `best`, the default) is implemented in
//! `runtime`, which owns the backends.

use crate::error::{bail, Result};
use std::fmt;

/// The backends of this build: the single list of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    /// Executes the linear IR in Rust: the reference every other backend is compared with.
    Interp,
    /// C source compiled by the system C compiler, run on the host's cores.
    #[cfg(feature = "cpu")]
    Cpu,
    /// WGSL through wgpu: WebGPU in the browser; Vulkan, Metal or DX12 natively.
    #[cfg(feature = "wgpu")]
    Wgpu,
    /// CUDA C through NVRTC on an NVIDIA GPU (native only).
    #[cfg(feature = "cuda")]
    Cuda,
    /// WebAssembly modules: the JS engine's in a browser or Node.js (over the engine's own
    /// memory), wasmi natively.
    #[cfg(feature = "wasm")]
    Wasm,
}

impl DeviceKind {
    /// Every backend compiled into this build.
    pub fn all() -> Vec<DeviceKind> {
        vec![
            DeviceKind::Interp,
            #[cfg(feature = "cpu")]
            DeviceKind::Cpu,
            #[cfg(feature = "wgpu")]
            DeviceKind::Wgpu,
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda,
            #[cfg(feature = "wasm")]
            DeviceKind::Wasm,
        ]
    }
    /// The backend's name as `DEV=` takes it: `INTERP`, `CPU`, `WEBGPU` or `CUDA`.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Interp => "INTERP",
            #[cfg(feature = "cpu")]
            DeviceKind::Cpu => "CPU",
            #[cfg(feature = "wgpu")]
            DeviceKind::Wgpu => "WEBGPU",
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => "CUDA",
            #[cfg(feature = "wasm")]
            DeviceKind::Wasm => "WASM",
        }
    }
}

/// Where tensors live and kernels run: a backend and which instance of it. Instances of one
/// backend are separate devices with their own buffers and compiled programs (`CPU:0` and
/// `CPU:1` are two logical devices on the host; `WEBGPU:1` a second wgpu device; `CUDA:1` the
/// second GPU), so sharding can be tried on one machine. `Device::Cpu` and the other constants
/// are instance 0, which a bare name (`CPU`) also means.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Device {
    /// The backend.
    pub kind: DeviceKind,
    /// Which instance of the backend (0 for the constants such as `Device::Cpu`).
    pub index: u8,
}

// The constants read like the backends they name (`Device::Cpu`), as when `Device` was the enum
// of backends.
#[allow(non_upper_case_globals)]
impl Device {
    /// `INTERP:0`.
    pub const Interp: Device = Device::new(DeviceKind::Interp, 0);
    /// `CPU:0`.
    #[cfg(feature = "cpu")]
    pub const Cpu: Device = Device::new(DeviceKind::Cpu, 0);
    /// `WEBGPU:0`.
    #[cfg(feature = "wgpu")]
    pub const Wgpu: Device = Device::new(DeviceKind::Wgpu, 0);
    /// `CUDA:0`.
    #[cfg(feature = "cuda")]
    pub const Cuda: Device = Device::new(DeviceKind::Cuda, 0);
    /// `WASM:0`.
    #[cfg(feature = "wasm")]
    pub const Wasm: Device = Device::new(DeviceKind::Wasm, 0);
}

impl Device {
    /// Instance `index` of backend `kind`.
    pub const fn new(kind: DeviceKind, index: u8) -> Device {
        Device { kind, index }
    }
    /// Instance `index` of this device's backend (`Device::Cpu.with_index(1)` is `CPU:1`).
    pub const fn with_index(self, index: u8) -> Device {
        Device::new(self.kind, index)
    }
    /// Instance 0 of every backend compiled into this build.
    pub fn all() -> Vec<Device> {
        DeviceKind::all()
            .into_iter()
            .map(|k| Device::new(k, 0))
            .collect()
    }
    /// The backend's name (`CPU`), without the instance number.
    pub fn name(self) -> &'static str {
        self.kind.name()
    }
    /// A comma-separated list of devices (`"CPU:0,CPU:1"`, as `DEVICES=` takes it).
    pub fn parse_list(s: &str) -> Result<Vec<Device>> {
        let out: Vec<Device> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_>>()?;
        if out.is_empty() {
            bail!(Device, "no device in the list '{s}'");
        }
        Ok(out)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.name(), self.index)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Device {
    type Err = crate::Error;
    /// `CPU`, `cpu:1`, `WEBGPU:0` (also `WGPU`, `GPU`), `CUDA:1`, `INTERP`.
    fn from_str(s: &str) -> Result<Device> {
        let up = s.trim().to_ascii_uppercase();
        let (name, index) = match up.split_once(':') {
            Some((n, i)) => {
                let Ok(i) = i.trim().parse::<u8>() else {
                    bail!(
                        Device,
                        "unknown device '{s}': the instance number must be 0 to 255"
                    )
                };
                (n.trim().to_string(), i)
            }
            None => (up.clone(), 0),
        };
        let name = match name.as_str() {
            "WGPU" | "GPU" => "WEBGPU",
            n => n,
        };
        match DeviceKind::all().into_iter().find(|k| k.name() == name) {
            Some(k) => Ok(Device::new(k, index)),
            None => {
                let known: Vec<&str> = DeviceKind::all().iter().map(|k| k.name()).collect();
                bail!(
                    Device,
                    "unknown device '{s}': this build has {} (numbered like CPU:1)",
                    known.join(", ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_and_without_an_instance_number() {
        #[cfg(feature = "cpu")]
        {
            let d: Device = " cpu:1".parse().expect("parse");
            assert_eq!(d, Device::Cpu.with_index(1));
            assert_eq!(d.to_string(), "CPU:1");
            assert_eq!("CPU".parse::<Device>().expect("parse"), Device::Cpu);
        }
        assert_eq!("INTERP".parse::<Device>().expect("parse"), Device::Interp);
        assert_eq!(
            "interp:3".parse::<Device>().expect("parse"),
            Device::Interp.with_index(3)
        );
        assert!("INTERP:256".parse::<Device>().is_err());
        let e = "TPU:0".parse::<Device>().expect_err("unknown");
        assert!(e.msg.contains("TPU:0") && e.msg.contains("INTERP"), "{e}");
        assert_eq!(
            Device::parse_list("INTERP:0, INTERP:1").expect("list"),
            vec![Device::Interp, Device::Interp.with_index(1)]
        );
    }
}
