//! Code generation: a scheduled kernel (`kernel::KernelAst`) is shaped for its target by the
//! optimizer (`opt.rs`: upcast, local, group, unroll, and split into two kernels by `split.rs`),
//! lowered into a `KGraph` (`lower.rs`), linearized into a flat instruction list
//! (`linearize.rs`), and rendered to source text by a `Renderer`: one dialect of the shared
//! C-like printer per language (`render.rs`; `c.rs`, `wgsl.rs`, `cuda.rs`). The interpreter runs
//! the linear instructions directly. `compile` is the whole recipe, top to bottom; `DIALECTS`
//! lists the languages by name (`WGRAD_DUMP_AS` renders any kernel in any of them).

pub mod c;
pub mod cuda;
pub mod linearize;
pub mod lower;
pub mod opt;
pub mod render;
pub mod split;
pub mod wgsl;

pub use crate::context::OptTarget;
pub use linearize::{Inst, LinearKernel};
pub use render::Renderer;

use crate::dtype::DType;
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

/// What the optimizer needs to know about a device: the kind of target and its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    pub kind: OptTarget,
    /// Invocations per workgroup the device allows.
    pub max_local: usize,
    /// Bytes of workgroup memory per workgroup the device allows.
    pub max_shared: usize,
}

impl Target {
    /// A target of this kind with the limits WebGPU guarantees everywhere.
    pub fn new(kind: OptTarget) -> Target {
        Target {
            kind,
            max_local: 256,
            max_shared: 16384,
        }
    }
}

/// Where a stage's buffer slot comes from: the scheduled kernel's own slot, or a scratch
/// buffer the stages share (the partial results of a split reduce).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufRef {
    Arg(usize),
    Scratch(usize),
}

/// One kernel to launch, and the buffers for its slots.
#[derive(Clone, Debug)]
pub struct Stage {
    pub kernel: LinearKernel,
    pub bufs: Vec<BufRef>,
}

/// A scheduled kernel compiled for a target: its stages in launch order and the scratch
/// buffers they pass results through (dtype, elements).
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    pub stages: Vec<Stage>,
    pub scratch: Vec<(DType, usize)>,
}

/// Shape a scheduled kernel for `target`, lower, linearize and name it: one stage, or two
/// when the optimizer splits its reduce across workgroups.
pub fn compile(ast: &KernelAst, target: &Target) -> Compiled {
    let mut out = Compiled::default();
    let args: Vec<BufRef> = (0..ast.bufs.len()).map(BufRef::Arg).collect();
    compile_into(ast, target, &args, &mut out, 0);
    out
}

fn compile_into(ast: &KernelAst, target: &Target, refs: &[BufRef], out: &mut Compiled, depth: u32) {
    // A split's first stage may be split again (a very long reduce); two levels suffice.
    if depth < 2 {
        if let Some(s) = opt::split_for(ast, target).and_then(|(a, p)| split::split(ast, a, p)) {
            let scratch = BufRef::Scratch(out.scratch.len());
            out.scratch.push(s.first.bufs[0]);
            let mut first = vec![scratch];
            first.extend(s.first_args.iter().map(|&i| refs[i]));
            compile_into(&s.first, target, &first, out, depth + 1);
            let mut second = vec![refs[0], scratch];
            second.extend(s.second_args.iter().map(|&i| refs[i]));
            compile_into(&s.second, target, &second, out, depth + 1);
            return;
        }
    }
    out.stages.push(Stage {
        kernel: linear_kernel(ast, target),
        bufs: refs.to_vec(),
    });
}

/// One kernel, optimized for `target` (no split), linearized and named (`r_…` when it has a
/// reduce loop, `E_…` when it is elementwise, then its output shape).
pub fn linear_kernel(ast: &KernelAst, target: &Target) -> LinearKernel {
    let lowered = opt::optimize(ast, target);
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
