//! wgrad: a small deep-learning engine in the spirit of tinygrad. Lazy tensors with autograd;
//! a scheduler that fuses the graph into few kernels; code generation for each backend; and
//! backends that compile and launch them.
//!
//! The modules are declared below in pipeline order, which is also the layer order (a module
//! uses only those above it in this list; `tests/layers.rs` enforces it):
//!
//! | stage | module | what it holds |
//! | --- | --- | --- |
//! | helpers | `error`, `dtype`, `device`, `context` | `Error`, `DType`, the `Device` list, knobs (`DEBUG`, `DEV`, …) and counters |
//! | vocabulary | `ops`, `shape` | `Op`, `UnaryOp`/`BinaryOp`/`ReduceOp` and what they compute; `View`, `ShapeTracker` |
//! | kernel IR | `kernel` | `KernelAst` (scheduler → codegen), `KGraph` and its rewrite rules |
//! | codegen | `codegen` | lower → optimize → linearize (`LinearKernel`) → render (`Renderer`: C, WGSL) |
//! | runtime | `runtime` | `Backend`s (interp, cpu, wgpu), `Buffer`, `Program`, `Launch` |
//! | schedule | `uop`, `schedule` | the lazy graph's node `UOp`; fusing it into `ScheduleItem`s |
//! | engine | `realize`, `memory`, `search` | realize a schedule, the capture hook, memory planning, BEAM search |
//! | frontend | `tensor` | `Tensor` and its ops, autograd (`tensor::grad`) |
//! | | `jit` | `TinyJit`: capture a step, replay its launches |
//! | | `nn` | layers, optimizers, datasets, state dicts |
//! | | `web` | the JavaScript API (wasm32 only) |
//!
//! `examples/walkthrough.rs` takes one small graph through every stage and prints each.

#![warn(missing_docs)]

// The CUDA backend's dependency exists only natively (Cargo.toml); the browser build is
// `--no-default-features --features wgpu`.
#[cfg(all(feature = "cuda", target_arch = "wasm32"))]
compile_error!(
    "the cuda feature is native only: build wasm32 with --no-default-features --features wgpu"
);

pub mod codegen;
pub mod context;
pub mod device;
pub mod dtype;
pub mod error;
pub mod jit;
pub mod kernel;
pub mod memory;
pub mod nn;
pub mod ops;
pub mod realize;
pub mod runtime;
pub mod schedule;
pub mod search;
pub mod shape;
pub mod tensor;
pub mod uop;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use context::{Context, GlobalCounters};
pub use device::Device;
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, Result};
pub use jit::{KernelInfo, Timer, TinyJit};
pub use tensor::conv::{
    Conv1dOpts, ConvTranspose1dOpts, ConvTranspose2dOpts, Interpolation, PadMode, Padding1d,
    Pool2dOpts,
};
pub use tensor::functional::{Conv2dOpts, CrossEntropyOpts, Padding, Reduction};
pub use tensor::{Axes, Index, Operand, Tensor};
