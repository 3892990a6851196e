//! wgrad: a small deep-learning engine in the spirit of tinygrad. Lazy tensors with autograd;
//! a scheduler that fuses the graph into few kernels; code generation for each backend; and
//! backends that compile and launch them.
//!
//! The pipeline (see DESIGN.md): `Tensor` (tensor.rs, grad.rs) builds a graph of primitive ops
//! (ops.rs; movement ops become views, shape.rs) → `schedule` fuses it into kernels →
//! `codegen` lowers, simplifies (rewrite.rs), linearizes and renders them → `runtime` backends
//! compile and launch → `realize` drives it all.

pub mod codegen;
pub mod context;
pub mod dtype;
pub mod error;
mod functional;
pub mod grad;
pub mod jit;
pub mod memory;
mod movement;
pub mod nn;
pub mod ops;
mod random;
pub mod realize;
mod reduce;
pub mod rewrite;
pub mod runtime;
pub mod schedule;
pub mod shape;
pub mod tensor;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use context::{Context, GlobalCounters};
pub use dtype::{DType, Element};
pub use error::{Error, ErrorKind, Result};
pub use functional::{Conv2dOpts, CrossEntropyOpts, Padding, Reduction};
pub use jit::TinyJit;
pub use runtime::Device;
pub use tensor::{Axes, Operand, Tensor};
