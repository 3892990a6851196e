//! Code generation: a scheduled kernel (`kernel::KernelAst`) is shaped for its target by the
//! optimizer (`opt.rs`: upcast, local, group, unroll, and split into two kernels by `split.rs`),
//! lowered into a `KGraph` (`lower.rs`), linearized into a flat instruction list
//! (`linearize.rs`), and rendered to source text by a `Renderer`: one dialect of the shared
//! C-like printer per language (`render.rs`; `c.rs`, `wgsl.rs`, `cuda.rs`), which keeps an
//! upcast's accumulators in vectors where the dialect has vector types (`vectorize.rs`, C). The
//! interpreter runs the linear instructions directly. `compile` is the whole recipe, top to
//! bottom; `DIALECTS` lists the languages by name (`WGRAD_DUMP_AS` renders any kernel in any of
//! them).

pub mod c;
pub mod cuda;
pub mod linearize;
pub mod lower;
pub mod opt;
pub mod render;
pub mod split;
pub mod vectorize;
#[cfg(feature = "wasm")]
pub mod wasm;
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
    /// Renders a linear kernel in this dialect.
    pub render: fn(&LinearKernel) -> String,
}

/// Every dialect: C, WGSL, CUDA.
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
    /// The kind of device kernels are shaped for.
    pub kind: OptTarget,
    /// Invocations per workgroup the device allows.
    pub max_local: usize,
    /// Bytes of workgroup memory per workgroup the device allows.
    pub max_shared: usize,
    /// Vector registers the CPU has for accumulators (16; 32 with AVX-512), which bounds the
    /// outputs one CPU invocation keeps (`opt.rs`).
    pub registers: usize,
    /// Invocations a GPU keeps running at once (CUDA: multiprocessors times resident threads
    /// each; WebGPU does not say, and 65,536 is assumed). A GPU kernel with real work launches
    /// at least a quarter of it (`opt.rs`).
    pub parallel: usize,
    /// Whether kernels may stage operand tiles in workgroup memory (`lower::Opts::stage`:
    /// barriers inside a loop, which GPUs and the interpreter run and the C dialect does not).
    pub tiles: bool,
    /// Whether the compiler behind the target vectorizes a plain loop over outputs itself (GCC
    /// and Clang at `-O3`); where nothing does (WebAssembly), the optimizer upcasts elementwise
    /// kernels into rows the dialect writes as vector code (`opt.rs`).
    pub loop_vectorizer: bool,
    /// The subgroup size where every subgroup has it (CUDA's warp of 32; a WebGPU adapter with
    /// `subgroups` whose smallest and largest sizes agree), else 0: a grouped reduce then sums
    /// each subgroup's partial results in registers before workgroup memory (`Opts::subgroup`).
    pub subgroup: usize,
    /// The f32 lanes of the widest vectors CPU kernels keep accumulators in (the C dialect's
    /// `v8f`, or `v16f` on machines with AVX-512), for the CPU cost model and the renderer; 8
    /// elsewhere (the WebAssembly dialect steps runs of four, but plans as for 8).
    pub lanes: usize,
}

impl Target {
    /// A target of this kind with the limits WebGPU guarantees everywhere.
    pub fn new(kind: OptTarget) -> Target {
        Target {
            kind,
            max_local: 256,
            max_shared: 16384,
            registers: 16,
            parallel: 65536,
            tiles: true,
            loop_vectorizer: true,
            subgroup: 0,
            lanes: c::VECTOR_LANES,
        }
    }
}

/// Where a stage's buffer slot comes from: the scheduled kernel's own slot, or a scratch
/// buffer the stages share (the partial results of a split reduce).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufRef {
    /// Slot `i` of the scheduled kernel.
    Arg(usize),
    /// Scratch buffer `i` of `Compiled::scratch`.
    Scratch(usize),
}

/// One kernel to launch, and the buffers for its slots.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The kernel.
    pub kernel: LinearKernel,
    /// Per slot of the kernel, the buffer bound to it.
    pub bufs: Vec<BufRef>,
}

/// A scheduled kernel compiled for a target: its stages in launch order and the scratch
/// buffers they pass results through (dtype, elements).
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    /// The kernels in launch order.
    pub stages: Vec<Stage>,
    /// The scratch buffers the stages share: (dtype, elements).
    pub scratch: Vec<(DType, usize)>,
}

/// The optimizer's choices for one scheduled kernel: the actions of a single kernel, or a split
/// of its reduce into two kernels with a plan for each. The heuristics (`default_plan`) make
/// one; `BEAM` search times alternatives and keeps the fastest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Plan {
    /// One kernel, shaped by these actions.
    One(lower::Opts),
    /// The reduce split over `axis` into `parts` (see `split.rs`), each half planned on its own.
    Split {
        /// The reduce axis split.
        axis: usize,
        /// How many slices the first kernel reduces it in.
        parts: usize,
        /// The plan of the first kernel (partial results into a scratch buffer).
        first: Box<Plan>,
        /// The plan of the second kernel (combines them and computes the rest).
        second: Box<Plan>,
    },
}

impl Plan {
    /// The plan with what `target` adds to every kernel's actions (`lower::Opts::for_target`):
    /// plans are searched and remembered without it.
    pub fn for_target(&self, target: &Target) -> Plan {
        match self {
            Plan::One(o) => Plan::One(o.for_target(target)),
            Plan::Split {
                axis,
                parts,
                first,
                second,
            } => Plan::Split {
                axis: *axis,
                parts: *parts,
                first: Box::new(first.for_target(target)),
                second: Box::new(second.for_target(target)),
            },
        }
    }

    /// The actions of every kernel of the plan, in launch order.
    pub fn opts(&self) -> Vec<&lower::Opts> {
        match self {
            Plan::One(o) => vec![o],
            Plan::Split { first, second, .. } => {
                let mut v = first.opts();
                v.extend(second.opts());
                v
            }
        }
    }
}

/// The heuristic plan for `ast` on `target` (a split's first kernel may be split again: a very
/// long reduce; two levels suffice).
pub fn default_plan(ast: &KernelAst, target: &Target) -> Plan {
    plan_at(ast, target, 0)
}

fn plan_at(ast: &KernelAst, target: &Target, depth: u32) -> Plan {
    if depth < 2 {
        if let Some((axis, parts)) = opt::split_for(ast, target, depth > 0) {
            if let Some(s) = split::split(ast, axis, parts) {
                return Plan::Split {
                    axis,
                    parts,
                    first: Box::new(plan_at(&s.first, target, depth + 1)),
                    second: Box::new(plan_at(&s.second, target, depth + 1)),
                };
            }
        }
    }
    Plan::One(opt::default_opts(ast, target))
}

/// Shape a scheduled kernel for `target` with the heuristics, lower, linearize and name it: one
/// stage, or two when the optimizer splits its reduce across workgroups.
pub fn compile(ast: &KernelAst, target: &Target) -> Compiled {
    let plan = default_plan(ast, target);
    compile_plan_for(ast, &plan, target)
        .unwrap_or_else(|e| unreachable!("the default plan applies: {e}"))
}

/// Compile `ast` by `plan`, or say why the plan does not apply to it (an action that does not
/// divide its axis, a split of an axis that is not reduced).
pub fn compile_plan(ast: &KernelAst, plan: &Plan) -> Result<Compiled, lower::Invalid> {
    let mut out = Compiled::default();
    let args: Vec<BufRef> = (0..ast.bufs.len()).map(BufRef::Arg).collect();
    compile_into(ast, plan, &args, &mut out)?;
    Ok(out)
}

/// `compile_plan` for `target`: grouped reduces use its subgroups (`Plan::for_target`).
pub fn compile_plan_for(
    ast: &KernelAst,
    plan: &Plan,
    target: &Target,
) -> Result<Compiled, lower::Invalid> {
    compile_plan(ast, &plan.for_target(target))
}

fn compile_into(
    ast: &KernelAst,
    plan: &Plan,
    refs: &[BufRef],
    out: &mut Compiled,
) -> Result<(), lower::Invalid> {
    match plan {
        Plan::One(o) => {
            lower::check(ast, o)?;
            out.stages.push(Stage {
                kernel: linear_kernel_with(ast, o),
                bufs: refs.to_vec(),
            });
        }
        Plan::Split {
            axis,
            parts,
            first,
            second,
        } => {
            let s = split::split(ast, *axis, *parts)
                .ok_or_else(|| format!("cannot split reduce axis {axis} into {parts}"))?;
            let scratch = BufRef::Scratch(out.scratch.len());
            out.scratch.push(s.first.bufs[0]);
            let mut r1 = vec![scratch];
            r1.extend(s.first_args.iter().map(|&i| refs[i]));
            compile_into(&s.first, first, &r1, out)?;
            let mut r2 = vec![refs[0], scratch];
            r2.extend(s.second_args.iter().map(|&i| refs[i]));
            compile_into(&s.second, second, &r2, out)?;
        }
    }
    Ok(())
}

/// One kernel, optimized for `target` by the heuristics (no split), linearized and named.
pub fn linear_kernel(ast: &KernelAst, target: &Target) -> LinearKernel {
    let o = opt::default_opts(ast, target).for_target(target);
    linear_kernel_with(ast, &o)
}

/// One kernel lowered with the actions `o`, linearized and named (`r_…` when it has a reduce
/// loop, `E_…` when it is elementwise, then its output shape).
pub fn linear_kernel_with(ast: &KernelAst, o: &lower::Opts) -> LinearKernel {
    linear_kernel_of(ast, &lower::lower(ast, o))
}

/// `linear_kernel_with` for a kernel already lowered.
pub fn linear_kernel_of(ast: &KernelAst, lowered: &lower::Lowered) -> LinearKernel {
    let bufs = ast
        .bufs
        .iter()
        .enumerate()
        .map(|(i, (dt, _))| BufArg {
            dtype: *dt,
            writes: i == 0,
        })
        .collect();
    let mut lk = linearize(lowered, bufs, "");
    let kind = if lk.insts.iter().any(|i| matches!(i, Inst::DefAcc { .. })) {
        "r"
    } else {
        "E"
    };
    let dims: Vec<String> = ast.root.shape.iter().map(|d| d.to_string()).collect();
    lk.name = format!("{kind}_{}", dims.join("_"));
    lk
}
