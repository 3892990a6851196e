//! Code generation: a scheduled kernel (`kernel::KernelAst`) is lowered into a `KGraph`
//! (`lower.rs`), shaped for its target (`opt.rs`: upcasting), linearized into a flat instruction
//! list (`linearize.rs`), and rendered to source text by a `Renderer`: one dialect of the shared
//! C-like printer per language (`render.rs`; `c.rs`, `wgsl.rs`, `cuda.rs`). The interpreter runs
//! the linear instructions directly. `compile` is the whole recipe, top to bottom; `DIALECTS`
//! lists the languages by name (`WGRAD_DUMP_AS` renders any kernel in any of them).

pub mod c;
pub mod cuda;
pub mod linearize;
pub mod lower;
pub mod opt;
pub mod render;
pub mod wgsl;

pub use linearize::{Inst, LinearKernel};
pub use render::Renderer;

use crate::kernel::KernelAst;
use linearize::{linearize, BufArg};

/// A target language of the shared printer.
pub struct Dialect {
    /// The name `WGRAD_DUMP_AS` takes.
    pub name: &'static str,
    /// The extension of its source files.
    pub ext: &'static str,
    pub render: fn(&LinearKernel) -> String,
}

pub const DIALECTS: &[Dialect] = &[c::DIALECT, wgsl::DIALECT, cuda::DIALECT];

/// The dialect called `name` (case-insensitive).
pub fn dialect(name: &str) -> Option<&'static Dialect> {
    DIALECTS
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name.trim()))
}

/// Lower, optimize and linearize a scheduled kernel, and name it (`r_…` when it has a reduce
/// loop, `E_…` when it is elementwise, then its output shape).
pub fn compile(ast: &KernelAst) -> LinearKernel {
    let lowered = opt::optimize(ast);
    let bufs = ast
        .bufs
        .iter()
        .enumerate()
        .map(|(i, (dt, _))| BufArg {
            dtype: *dt,
            writes: i == 0,
        })
        .collect();
    let mut lk = linearize(&lowered, bufs, "");
    let kind = if lk.insts.iter().any(|i| matches!(i, Inst::DefAcc { .. })) {
        "r"
    } else {
        "E"
    };
    let dims: Vec<String> = ast.root.shape.iter().map(|d| d.to_string()).collect();
    lk.name = format!("{kind}_{}", dims.join("_"));
    lk
}
