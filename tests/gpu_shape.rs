//! The kernel optimizer's GPU shape, counted without a GPU, and its correctness everywhere.
//!
//! - The structural test compiles every kernel of one training step of the tutorial's CNN at
//!   batch 128 (Adam) for a GPU target and counts what a GPU cares about: invocations launched
//!   and loop iterations per invocation. The CPU emulators here cannot show it; these counts
//!   can, and they are pinned.
//! - The optimized kernels of the same step (at a small batch) compute what the unoptimized
//!   ones compute, on the interpreter, the C backend and WebGPU, for every optimizer target.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

#[path = "../examples/common/model.rs"]
mod model;

use model::Model;
use wgrad::codegen::c::CRenderer;
use wgrad::codegen::lower::{
    gathers_per_output, loads_per_output, lower, stageable_operands, tiles_of,
};
use wgrad::codegen::{compile, compile_plan, default_plan, LinearKernel, OptTarget, Plan, Target};
use wgrad::nn::optim::{Adam, Optimizer};
use wgrad::nn::state::get_parameters;
use wgrad::schedule::ScheduleItem;
use wgrad::{Context, CrossEntropyOpts, DType, Device, Tensor};

/// One training step's tensors to realize (the loss and every update), not yet realized.
fn step(bs: usize, seed: u64) -> (Vec<Tensor>, Vec<Tensor>) {
    Tensor::manual_seed(seed);
    let x = Tensor::rand(&[bs, 1, 28, 28]).unwrap().realize().unwrap();
    step_on(&x, seed)
}

/// The same on images `x` (`[bs, 1, 28, 28]`, any dtype the model casts from).
fn step_on(x: &Tensor, seed: u64) -> (Vec<Tensor>, Vec<Tensor>) {
    let bs = x.shape()[0];
    Tensor::manual_seed(seed);
    let model = Model::new().unwrap();
    let params = get_parameters(&model);
    Tensor::realize_all(&params.iter().collect::<Vec<_>>()).unwrap();
    let mut opt = Adam::new(params.clone()).unwrap();
    let y = Tensor::randint(&[bs], 0, 10).unwrap().realize().unwrap();
    let mut all = Context::new()
        .training(true)
        .run(|| -> wgrad::Result<Vec<Tensor>> {
            opt.zero_grad();
            let loss = model
                .forward(x)?
                .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
            loss.backward()?;
            let mut all = opt.schedule_step()?;
            all.insert(0, loss);
            Ok(all)
        })
        .unwrap();
    // Keep the model alive with the step (its parameters are what the updates write).
    all.shrink_to_fit();
    (all, params)
}

struct Shape {
    name: String,
    invocations: usize,
    loop_iterations: u64,
    ops: u64,
    staged: bool,
}

/// Every kernel `items` compile to for `target` (a split reduce's two stages each).
fn kernels_of(items: &[ScheduleItem], target: &Target) -> Vec<LinearKernel> {
    items
        .iter()
        .filter_map(|item| match item {
            ScheduleItem::Kernel { ast, .. } => Some(compile(ast, target).stages),
            _ => None,
        })
        .flatten()
        .map(|s| s.kernel)
        .collect()
}

fn gpu_shapes(bs: usize) -> Vec<Shape> {
    Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let (all, _params) = step(bs, 1);
            let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
            let target = Target::new(OptTarget::Gpu);
            let mut out = vec![];
            for k in &kernels_of(&items, &target) {
                let wgsl = wgrad::codegen::wgsl::render_wgsl(k);
                if let Err(e) = common::validate_wgsl(&wgsl) {
                    panic!("{}: invalid WGSL: {e}\n{wgsl}", k.name);
                }
                out.push(Shape {
                    name: k.name.clone(),
                    invocations: k.global_size,
                    loop_iterations: k.loop_iterations(),
                    ops: k.ops_per_item() * k.global_size as u64,
                    staged: staged(k),
                });
            }
            out
        })
}

#[test]
fn the_training_step_is_gpu_shaped() {
    let shapes = gpu_shapes(128);
    let mut report = String::new();
    for s in &shapes {
        report += &format!(
            "  {:<34} {:>9} invocations {:>6} iterations {:>11} ops\n",
            s.name, s.invocations, s.loop_iterations, s.ops
        );
    }
    let longest = shapes.iter().map(|s| s.loop_iterations).max().unwrap_or(0);
    let total: u64 = shapes.iter().map(|s| s.loop_iterations).sum();
    eprintln!(
        "{} kernels; longest loop {longest}; loops summed {total}\n{report}",
        shapes.len()
    );
    assert!(
        longest <= 2048,
        "a kernel loops {longest} times per invocation"
    );
    assert!(total <= 10_000, "the kernels' loops sum to {total}");
    // A kernel with real work keeps a quarter of what the default target's GPU runs at once
    // in flight (a staged one hides latency with its register block instead, and asks for a
    // workgroup on each of its 32 multiprocessors: of 256 invocations, or of 64 where only
    // those stage, as the dense layer's gradients do).
    for s in &shapes {
        assert!(
            s.ops <= 1 << 20 || s.invocations >= if s.staged { 2048 } else { 16384 },
            "{} does {} ops in only {} invocations",
            s.name,
            s.ops,
            s.invocations
        );
    }
}

/// The kernels of `items` compiled for `target`: name, invocations, loop iterations per
/// invocation, and loads executed per multiply-add (distinct load sites per stored output,
/// times outputs stored, times loop iterations, over the kernel's ops / 2).
fn shapes_for(items: &[ScheduleItem], target: &Target) -> Vec<(String, usize, u64, u64, bool)> {
    kernels_of(items, target)
        .iter()
        .map(|k| {
            (
                k.name.clone(),
                k.global_size,
                k.loop_iterations(),
                k.ops_per_item() * k.global_size as u64,
                staged(k),
            )
        })
        .collect()
}

/// Whether a kernel stages tiles in workgroup memory (waits for its workgroup inside a loop).
fn staged(k: &LinearKernel) -> bool {
    let mut depth = 0;
    for i in &k.insts {
        match i {
            wgrad::codegen::Inst::Loop { .. } => depth += 1,
            wgrad::codegen::Inst::EndLoop => depth -= 1,
            wgrad::codegen::Inst::Barrier if depth > 0 => return true,
            _ => {}
        }
    }
    false
}

/// A bigger GPU gets more invocations. Compiled for an H200 (132 multiprocessors of 2,048
/// resident threads, as its CUDA driver reports), a GPT's weight gradient (`xᵀ·g` over 4,096
/// rows), split into parts that stage their tiles in workgroup memory, launches 8x the
/// invocations it gets on the default target (65,536 threads: 2 parts, 8,192 invocations of
/// 4x4 outputs; on the H200 4 parts, 65,536); a square matmul, staged whole, keeps its 65,536
/// invocations of 4x4 outputs (a staged kernel asks for a workgroup per multiprocessor, not
/// more invocations); no kernel with real work launches fewer than the default asks for (a
/// staged one: a workgroup per multiprocessor, of 64 invocations at least), and none loops
/// longer.
#[test]
fn a_bigger_gpu_gets_more_invocations() {
    Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let x = Tensor::rand(&[4096, 512]).unwrap().realize().unwrap();
            let g = Tensor::rand(&[4096, 128]).unwrap().realize().unwrap();
            let a = Tensor::rand(&[1024, 1024]).unwrap().realize().unwrap();
            let mut all = vec![
                x.transpose(0, 1).unwrap().matmul(&g).unwrap(),
                a.matmul(&a).unwrap(),
            ];
            all.extend(step(128, 1).0);
            let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
            let h200 = Target {
                parallel: 132 * 2048,
                ..Target::new(OptTarget::Gpu)
            };
            let invocations = |shapes: &[(String, usize, u64, u64, bool)], prefix: &str| -> usize {
                // The kernel doing most of the work (a split's first, named with its parts first).
                shapes
                    .iter()
                    .filter(|s| s.0.contains(prefix))
                    .max_by_key(|s| s.3)
                    .map_or(0, |s| s.1)
            };
            let small = shapes_for(&items, &Target::new(OptTarget::Gpu));
            let big = shapes_for(&items, &h200);
            for (t, shapes) in [(Target::new(OptTarget::Gpu), &small), (h200, &big)] {
                for (name, inv, iters, ops, staged) in shapes {
                    // A staged kernel asks for a workgroup per multiprocessor (of 64 at least).
                    let floor = if *staged { t.parallel / 32 } else { 16384 };
                    assert!(
                        *ops <= 1 << 20 || *inv >= floor,
                        "{name} does {ops} ops in only {inv} invocations"
                    );
                    assert!(*iters <= 2048, "{name} loops {iters} times per invocation");
                }
            }
            // (Named after their outputs, with the reduce's axis between: the products' axes
            // follow their right operands, row-major here.)
            let wgrad = (
                invocations(&small, "_512_1_128"),
                invocations(&big, "_512_1_128"),
            );
            let matmul = (
                invocations(&small, "_1024_1_1024"),
                invocations(&big, "_1024_1_1024"),
            );
            eprintln!("weight gradient {wgrad:?}, matmul {matmul:?} invocations (default, H200)");

            assert_eq!(wgrad, (8192, 65536));
            assert_eq!(matmul, (65536, 65536));
        });
}

/// Loads one kernel executes in its loops: distinct load sites per invocation, times the
/// invocations, times the loop iterations of each.
fn loads_executed(ast: &wgrad::kernel::KernelAst, plan: &Plan) -> f64 {
    let opts = match plan {
        Plan::One(o) => o.clone(),
        Plan::Split { .. } => return 0.0,
    };
    let l = lower(ast, &opts);
    let sites = loads_per_output(&l) * l.stores() as f64;
    let k = &compile_plan(ast, plan).unwrap().stages[0].kernel;
    sites * k.global_size as f64 * k.loop_iterations().max(1) as f64
}

/// On the CPU the optimizer upcasts kernels with a reduce loop so neighbouring outputs share
/// their loads: over the training step at batch 128 the loads executed in loops fall to under
/// half of what the unoptimized kernels execute (a regression once left every CPU kernel
/// unoptimized and the step 9x slower, with every test still passing).
#[test]
fn cpu_kernels_share_their_loads() {
    Context::new().dev(Device::Interp).run(|| {
        let (all, _params) = step(128, 1);
        let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
        let target = Target::new(OptTarget::Cpu);
        let (mut plain, mut tuned, mut upcast) = (0.0, 0.0, 0);
        for item in &items {
            let ScheduleItem::Kernel { ast, .. } = item else {
                continue;
            };
            let plan = default_plan(ast, &target);
            if let Plan::One(o) = &plan {
                upcast += usize::from(!o.upcast.is_empty());
                plain += loads_executed(ast, &Plan::One(Default::default()));
                tuned += loads_executed(ast, &plan);
            }
        }
        eprintln!("loads in loops: {plain:.3e} unoptimized, {tuned:.3e} with the CPU's upcasts; {upcast} kernels upcast");
        assert!(upcast >= 6, "only {upcast} kernels upcast");
        assert!(tuned < 0.5 * plain, "{tuned:.3e} loads against {plain:.3e}");
    })
}

/// On the CPU a window's reduce (pooling and its gradient, a convolution over one input
/// channel) keeps a row of outputs whose inputs it reads whole: max-pooling's forward and its
/// tie count upcast the pooled width (13) with the window's inner loop unrolled (16 batches'
/// windows at once ran 2.4x slower), and conv1's forward reads its u8 pixels as vectors (8
/// channels of a row of 13; 8 channels of 8 batches, whose bytes were gathered, ran 2x slower).
#[test]
fn cpu_window_kernels_read_rows() {
    Context::new().dev(Device::Interp).run(|| {
        let pixels: Vec<u8> = (0..128 * 784).map(|i| (i * 37 % 251) as u8).collect();
        let x = Tensor::from_raw(&pixels, DType::U8, &[128, 1, 28, 28]).unwrap();
        let (all, _params) = step_on(&x, 1);
        let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
        let target = Target::new(OptTarget::Cpu);
        let (mut pools, mut convs) = (0, 0);
        for item in &items {
            let ScheduleItem::Kernel { ast, .. } = item else {
                continue;
            };
            let plan = default_plan(ast, &target);
            let Plan::One(o) = &plan else { continue };
            if ast.root.shape == [128, 32, 13, 13, 1, 1] {
                pools += 1;
                assert!(o.upcast.contains(&(3, 13)) && o.unroll.is_some(), "{o:?}");
            }
            if ast.root.shape == [128, 1, 32, 26, 26, 1, 1, 1] {
                convs += 1;
                let k = &compile_plan(ast, &plan).unwrap().stages[0].kernel;
                let c = wgrad::codegen::c::render_c(k);
                assert!(c.contains("ldb8(b1 + "), "{o:?}\n{c}");
            }
        }
        assert_eq!((pools, convs), (2, 1), "pooling kernels, conv1 forwards");
    })
}

/// The outputs a CPU invocation keeps grow with the machine's vector registers: conv2's weight
/// gradient (the first kernel of its split reduce) keeps 8 output channels of a 3x3 window
/// (72 outputs, nine vector multiply-adds per gather of the output gradient's 8 channels) with
/// 16 registers, and 8 output channels of 16 input channels (128, sixteen per gather) with
/// AVX-512's 32.
#[test]
fn cpu_upcasts_grow_with_vector_registers() {
    Context::new().dev(Device::Interp).run(|| {
        let (all, _params) = step(128, 1);
        let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
        let outputs = |registers: usize| -> Vec<usize> {
            let target = Target {
                registers,
                ..Target::new(OptTarget::Cpu)
            };
            items
                .iter()
                .filter_map(|item| match item {
                    ScheduleItem::Kernel { ast, .. }
                        if ast.root.shape == [1, 1, 64, 1, 1, 32, 3, 3] =>
                    {
                        let plan = default_plan(ast, &target);
                        let Plan::Split { first, .. } = &plan else {
                            return None;
                        };
                        Some(first.opts()[0].upcast.iter().map(|u| u.1).product())
                    }
                    _ => None,
                })
                .collect()
        };
        // The upcast leaves every core four invocations of the 18,432 outputs' kernel, so on a
        // machine of more than 32 cores the figures are smaller.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores <= 32 {
            assert_eq!(
                outputs(16),
                vec![72],
                "conv2's weight gradient, 16 registers"
            );
            assert_eq!(
                outputs(32),
                vec![128],
                "conv2's weight gradient, 32 registers"
            );
        } else {
            assert!(
                outputs(32)[0] >= outputs(16)[0],
                "{:?}",
                (outputs(16), outputs(32))
            );
        }
    })
}

/// On a software GPU adapter (lavapipe, SwiftShader) the big kernels of the training step
/// share their loads across the outputs of an invocation: conv2's forward and input gradient
/// keep a row of 11 outputs for 8 channels, 19 loads per step of their reduce for 88 outputs
/// (they kept 22 outputs for 23 loads, and ran 2x slower on lavapipe). Over the step the loads
/// executed in loops fall to a fifth of the unoptimized kernels'.
#[test]
fn soft_gpu_kernels_share_their_gathers() {
    Context::new().dev(Device::Interp).opt_target(OptTarget::SoftGpu).run(|| {
        let (all, _params) = step(128, 1);
        let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
        let target = Target::new(OptTarget::SoftGpu);
        let (mut plain, mut tuned) = (0.0, 0.0);
        for item in &items {
            let ScheduleItem::Kernel { ast, .. } = item else {
                continue;
            };
            let Plan::One(o) = default_plan(ast, &target) else {
                continue;
            };
            let executed = |o: &wgrad::codegen::lower::Opts| {
                let l = lower(ast, o);
                let k = &compile_plan(ast, &Plan::One(o.clone())).unwrap().stages[0].kernel;
                let per_out = gathers_per_output(&l);
                let n = per_out * l.stores() as f64 * k.global_size as f64;
                (per_out, n * k.loop_iterations().max(1) as f64, k.ops_per_item() * k.global_size as u64, k.name.clone())
            };
            let (per_out, n, ops, name) = executed(&o);
            plain += executed(&Default::default()).1;
            tuned += n;
            if ops > 500_000_000 {
                eprintln!("{name}: {per_out:.3} gathers per output and reduce step");
                assert!(per_out <= 0.25, "{name}: {per_out:.3} gathers per output and reduce step");
            }
        }
        eprintln!("gathers in loops: {plain:.3e} unoptimized, {tuned:.3e} with the software adapters' upcasts");
        assert!(tuned < 0.2 * plain, "{tuned:.3e} gathers against {plain:.3e}");
    })
}

/// The step's loss and updated parameters, computed with kernels shaped for `target`.
fn run_step(dev: Device, target: OptTarget) -> Vec<Vec<f32>> {
    run_step_of(4, dev, target)
}

/// `run_step` at batch size `bs`.
fn run_step_of(bs: usize, dev: Device, target: OptTarget) -> Vec<Vec<f32>> {
    Context::new().dev(dev).opt_target(target).run(|| {
        let (all, params) = step(bs, 7);
        Tensor::realize_all(&all.iter().collect::<Vec<_>>()).unwrap();
        let mut out = vec![all[0].cast(DType::F32).unwrap().to_vec::<f32>().unwrap()];
        out.extend(params.iter().map(|p| p.to_vec::<f32>().unwrap()));
        out
    })
}

fn assert_close(what: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len());
        for (j, (&a, &b)) in g.iter().zip(w).enumerate() {
            let tol = 1e-4 + 1e-3 * b.abs();
            assert!(
                (a - b).abs() <= tol,
                "{what}: tensor {i}[{j}]: {a} vs {b} (unoptimized)"
            );
        }
    }
}

/// `outs` computed with the CPU target's plans, on the interpreter and (where it runs) the C
/// backend, equal what the unoptimized kernels compute on the interpreter, within rounding.
fn assert_cpu_plans_compute_the_same(outs: impl Fn() -> wgrad::Result<Vec<Tensor>>) {
    let run = |dev: Device, t: OptTarget| {
        Context::new().dev(dev).opt_target(t).run(|| {
            let o = outs().unwrap();
            o.iter()
                .map(|t| t.to_vec::<f32>().unwrap())
                .collect::<Vec<_>>()
        })
    };
    let plain = run(Device::Interp, OptTarget::None);
    assert_close("interpreter", &run(Device::Interp, OptTarget::Cpu), &plain);
    if common::usable(Device::Cpu) {
        assert_close("C", &run(Device::Cpu, OptTarget::Cpu), &plain);
    }
}

#[test]
fn optimized_kernels_equal_unoptimized_ones_on_the_interpreter() {
    let plain = run_step(Device::Interp, OptTarget::None);
    for t in [OptTarget::Gpu, OptTarget::SoftGpu, OptTarget::Cpu] {
        let got = run_step(Device::Interp, t);
        assert_close(&format!("interp {t:?}"), &got, &plain);
    }
}

/// The tutorial's convolutions staged for a GPU (at batch 16: conv2's forward, input and
/// weight gradients stage their input tiles, reading the weights directly; tiles of rows of 11
/// load in padded rounds; conv1's forward stages tiles of output columns plus the window's, the
/// input gradient runs workgroups of 3 x 32) compute what unoptimized kernels do, on the
/// interpreter and on every backend that runs them.
#[test]
fn staged_convolutions_equal_unoptimized_ones() {
    let target = Target::new(OptTarget::Gpu);
    let conv2 = Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let all = step(16, 7).0;
            let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
            kernels_of(&items, &target)
                .iter()
                // conv2's: 16 images x 64 channels x 11 x 11 outputs, 32 x 3 x 3 each.
                .filter(|k| k.fmas_per_item() * k.global_size as u64 == 16 * 64 * 121 * 288)
                .map(|k| {
                    (
                        k.name.clone(),
                        staged(k),
                        k.global_loads_per_fma(),
                        k.local_size,
                    )
                })
                .collect::<Vec<_>>()
        });
    assert_eq!(conv2.len(), 3, "{conv2:?}");
    for (name, staged, loads, _) in &conv2 {
        assert!(*staged && *loads <= 0.125, "{name}: {loads} loads/FMA");
    }
    // The input gradient's workgroup takes the whole window row (3 x a power of two).
    assert!(conv2.iter().any(|k| k.3 % 3 == 0), "{conv2:?}");
    // The forward convolutions stage their input along the window's column, in tiles of the
    // workgroup's output columns plus the window's (`Tile::merged`).
    let merged = Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let all = step(16, 7).0;
            let items = Tensor::schedule_all(&all.iter().collect::<Vec<_>>()).unwrap();
            items
                .iter()
                .filter_map(|item| match item {
                    ScheduleItem::Kernel { ast, .. } => match default_plan(ast, &target) {
                        Plan::One(o) => Some(
                            tiles_of(ast, &stageable_operands(ast), &o)
                                .into_iter()
                                .filter_map(|(_, t)| {
                                    t.merged.map(|m| (ast.root.shape.clone(), m, t.ext))
                                })
                                .collect::<Vec<_>>(),
                        ),
                        _ => None,
                    },
                    _ => None,
                })
                .flatten()
                .collect::<Vec<_>>()
        });
    let conv1 = merged
        .iter()
        .filter(|t| t.0 == [16, 1, 32, 26, 26, 1, 1, 1]);
    assert_eq!(conv1.count(), 1, "{merged:?}");
    let plain = run_step_of(16, Device::Interp, OptTarget::None);
    for dev in common::devices() {
        let got = run_step_of(16, dev, OptTarget::Gpu);
        assert_close(&format!("{dev} staged convolutions"), &got, &plain);
    }
}

/// The tutorial's conv1 weight gradient at batch 128 (its reduce split in parts whose first
/// kernel runs workgroups of the window's row of 3 x 32, over three output axes) computes what
/// the unoptimized kernels do, on every backend that runs it.
#[test]
fn a_window_row_workgroup_computes_the_weight_gradient() {
    let run = |dev: Device, t: OptTarget| -> (Vec<f32>, Vec<usize>) {
        Context::new().dev(dev).opt_target(t).run(|| {
            Tensor::manual_seed(11);
            let x = Tensor::rand(&[128, 1, 28, 28]).unwrap();
            let w = Tensor::rand(&[32, 1, 3, 3]).unwrap();
            w.set_requires_grad(true);
            let dy = Tensor::rand(&[128, 32, 26, 26]).unwrap();
            let y = x.conv2d(&w, None, &Default::default()).unwrap();
            y.mul(&dy)
                .unwrap()
                .sum((), false)
                .unwrap()
                .backward()
                .unwrap();
            let g = w.grad().unwrap();
            let items = Tensor::schedule_all(&[&g]).unwrap();
            let target = Target::new(t);
            let locals = kernels_of(&items, &target)
                .iter()
                .map(|k| k.local_size)
                .collect();
            (g.to_vec::<f32>().unwrap(), locals)
        })
    };
    let (plain, _) = run(Device::Interp, OptTarget::None);
    let (_, locals) = run(Device::Interp, OptTarget::Gpu);
    assert!(locals.contains(&96), "{locals:?}");
    for dev in common::devices() {
        let (got, _) = run(dev, OptTarget::Gpu);
        assert_close(
            &format!("{dev} conv1 weight gradient"),
            &[got],
            std::slice::from_ref(&plain),
        );
    }
}

#[test]
fn gpu_shaped_kernels_run_on_every_backend() {
    let plain = run_step(Device::Interp, OptTarget::None);
    for dev in common::devices() {
        if dev == Device::Interp {
            continue;
        }
        for t in [OptTarget::Gpu, OptTarget::SoftGpu] {
            let got = run_step(dev, t);
            assert_close(&format!("{dev} {t:?}"), &got, &plain);
        }
    }
}

/// Kernels of the training step of a small GPT (2 layers, width 64, context 64, batch 16: the
/// transformers guide's) and its loss's tensors, scheduled, not realized.
fn gpt_step() -> Vec<Tensor> {
    use wgrad::nn::gpt::{Gpt, GptConfig};
    Tensor::manual_seed(3);
    let cfg = GptConfig {
        vocab_size: 65,
        block_size: 64,
        n_layer: 2,
        n_head: 4,
        n_embd: 64,
        bias: true,
    };
    let gpt = Gpt::new(cfg).unwrap();
    let mut opt = gpt.configure_optimizers(0.1, 1e-3, (0.9, 0.95)).unwrap();
    let w = Tensor::randint(&[16, 65], 0, 65)
        .unwrap()
        .realize()
        .unwrap();
    Context::new().training(true).run(|| {
        opt.zero_grad();
        let loss = gpt.loss(&w).unwrap();
        loss.backward().unwrap();
        let mut all = opt.schedule_step().unwrap();
        all.insert(0, loss);
        all
    })
}

/// Every kernel of `items` for `target` doing at least `min_fmas` multiply-adds: (name,
/// multiply-adds, global loads per multiply-add). Each one's WGSL validates.
fn fma_kernels(items: &[ScheduleItem], target: &Target, min_fmas: u64) -> Vec<(String, f64, f64)> {
    let mut out = vec![];
    for k in &kernels_of(items, target) {
        let per = k.global_loads_per_fma();
        let fmas = (k.fmas_per_item() * k.global_size as u64) as f64;
        if fmas >= min_fmas as f64 {
            let wgsl = wgrad::codegen::wgsl::render_wgsl(k);
            if let Err(e) = common::validate_wgsl(&wgsl) {
                panic!("{}: {e}\n{wgsl}", k.name);
            }
            out.push((k.name.clone(), fmas, per));
        }
    }
    out
}

/// How well a staged kernel's tile loads coalesce: per global load whose value is stored into
/// workgroup memory, the most 32-byte memory segments any warp (32 consecutive invocations of a
/// workgroup) touches in the first step, over the fewest its bytes need. Evaluated from the
/// lowered kernel's index arithmetic for the first, a middle and the last workgroup.
fn tile_load_segments(k: &LinearKernel) -> Vec<f64> {
    use wgrad::codegen::Inst;
    // The registers the values stored into workgroup memory are computed from (a tile may
    // hold a value computed from loads).
    let mut staged: std::collections::HashSet<u32> = k
        .insts
        .iter()
        .filter_map(|i| match i {
            Inst::StoreShared { val, .. } => Some(*val),
            _ => None,
        })
        .collect();
    for i in k.insts.iter().rev() {
        let (dst, srcs) = match i {
            Inst::Unary { dst, a, .. } | Inst::Cast { dst, a, .. } => (*dst, vec![*a]),
            Inst::Binary { dst, a, b, .. } => (*dst, vec![*a, *b]),
            Inst::Where { dst, c, a, b, .. } => (*dst, vec![*c, *a, *b]),
            _ => continue,
        };
        if staged.contains(&dst) {
            staged.extend(srcs);
        }
    }
    let sites: Vec<(u32, u32, Option<u32>, usize, usize)> = k
        .insts
        .iter()
        .filter_map(|i| match i {
            Inst::Load {
                dst,
                idx,
                gate,
                dtype,
                ..
            } if staged.contains(dst) => Some((*dst, *idx, *gate, 1, dtype.size())),
            Inst::LoadVec {
                dsts, idx, dtype, ..
            } if dsts.iter().any(|d| staged.contains(d)) => {
                Some((dsts[0], *idx, None, dsts.len(), dtype.size()))
            }
            _ => None,
        })
        .collect();
    // The addresses (bytes) each invocation `lane` of workgroup `wg` reads at every site.
    let addresses = |wg: usize, lane: usize| -> Vec<Option<Vec<i64>>> {
        let mut regs = vec![0f64; k.nregs];
        for i in &k.insts {
            match i {
                Inst::Const { dst, bits, .. } => regs[*dst as usize] = f64::from_bits(*bits),
                Inst::Lidx { dst } => regs[*dst as usize] = lane as f64,
                Inst::Wgid { dst } => regs[*dst as usize] = wg as f64,
                Inst::Gidx { dst } => regs[*dst as usize] = (wg * k.local_size + lane) as f64,
                Inst::Binary {
                    dst,
                    op,
                    dtype,
                    a,
                    b,
                } => {
                    let (a, b) = (regs[*a as usize], regs[*b as usize]);
                    regs[*dst as usize] = wgrad::ops::exec_binary(*op, *dtype, a, b)
                }
                Inst::Where { dst, c, a, b, .. } => {
                    let v = if regs[*c as usize] != 0.0 { a } else { b };
                    regs[*dst as usize] = regs[*v as usize]
                }
                Inst::Cast { dst, from, to, a } => {
                    regs[*dst as usize] = wgrad::ops::exec_cast(*from, *to, regs[*a as usize])
                }
                Inst::Loop { dst, .. } => regs[*dst as usize] = 0.0,
                _ => {}
            }
        }
        sites
            .iter()
            .map(|&(_, idx, gate, n, size)| {
                let on = gate.is_none_or(|g| regs[g as usize] != 0.0);
                on.then(|| {
                    let first = regs[idx as usize] as i64;
                    (0..n as i64).map(|j| (first + j) * size as i64).collect()
                })
            })
            .collect()
    };
    let groups = k.global_size / k.local_size;
    let mut worst = vec![0f64; sites.len()];
    for wg in [0, groups / 2, groups - 1] {
        let lanes: Vec<_> = (0..k.local_size).map(|l| addresses(wg, l)).collect();
        for warp in lanes.chunks(32) {
            for (s, w) in worst.iter_mut().enumerate() {
                let bytes: Vec<i64> = warp
                    .iter()
                    .filter_map(|l| l[s].as_ref())
                    .flatten()
                    .copied()
                    .collect();
                let segments: std::collections::HashSet<i64> =
                    bytes.iter().map(|b| b.div_euclid(32)).collect();
                let fewest = (bytes.len() * sites[s].4).div_ceil(32).max(1);
                *w = w.max(segments.len() as f64 / fewest as f64);
            }
        }
    }
    worst
}

/// Over `kernels`: global loads per multiply-add (all loads over all multiply-adds), and the
/// share of multiply-adds done by kernels that read at most 1/8 of an element per one.
fn memory_summary(kernels: &[(String, f64, f64)]) -> (f64, f64) {
    let fmas: f64 = kernels.iter().map(|k| k.1).sum();
    let loads: f64 = kernels.iter().map(|k| k.1 * k.2).sum();
    // (A fold from 0.0: an empty f64 sum is -0.0.)
    let tiled = kernels
        .iter()
        .filter(|k| k.2 <= 0.125)
        .fold(0.0, |a, k| a + k.1);
    (loads / fmas, tiled / fmas)
}

/// On a GPU target, matmuls stage their operand tiles in workgroup memory: a workgroup loads
/// each tile once, cooperatively, and its invocations multiply from there. Counted from the
/// lowered kernels (elements read from global buffers per multiply-add, loops counted by their
/// trip counts; a register block alone reads 1/2 and more): a 1024x1024x1024 matmul reads
/// 1/32; in a small GPT's training step the matmuls of the forward pass, of the input and
/// weight gradients (split in parts that stage) and of attention read at most 1/8 (the output
/// layer's vocabulary of 65 in register blocks of 13, in workgroups of 64), over 90% of
/// the step's multiply-adds, and the step as a whole reads a tenth of what it reads unstaged.
/// In the tutorial's step (batch 128) every convolution and dense kernel reads at most 1/8:
/// conv2's forward, input and weight gradients (285M multiply-adds each, 1.09-1.11 loads per
/// one unstaged) stage their input tiles in rows of 11 (0.107, 0.101, 0.023), the weights read
/// directly where their tile would be scattered (a row of 11 outputs times the workgroup's
/// channels shares each), the forward's and weight gradients' input tiles holding a row of
/// outputs plus the window's (13 for 11 outputs and a window of 3, not 33), the input
/// gradient's workgroup the window's row of 3 times 64; conv1's forward reads 0.083 and its
/// weight gradient 0.123 (one input channel: 288 outputs, split in 64 parts; each element of
/// its output gradient meets only 9 weights, so no tiling reads under 1/9: a workgroup of the
/// window's row of 3 x 32 channels, each invocation 3 window rows x 2 channels). A tile's last
/// round counts for the invocations still inside it. The step as a whole reads 0.078, a
/// fourteenth of what it reads unstaged (1.105). Every matmul of the GPT's step reads at most
/// 1/8 (the step 0.050).
#[test]
fn gpu_matmuls_and_convolutions_stage_their_tiles() {
    Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let target = Target::new(OptTarget::Gpu);
            let untiled = Target {
                tiles: false,
                ..target
            };
            let a = Tensor::rand(&[1024, 1024]).unwrap().realize().unwrap();
            let square = Tensor::schedule_all(&[&a.matmul(&a).unwrap()]).unwrap();
            let k = fma_kernels(&square, &target, 1 << 20);
            assert_eq!(k.len(), 1);
            assert!(k[0].2 <= 1.0 / 32.0, "{k:?}");
            let cnn = step(128, 1).0;
            let cnn = Tensor::schedule_all(&cnn.iter().collect::<Vec<_>>()).unwrap();
            let gpt = gpt_step();
            let gpt = Tensor::schedule_all(&gpt.iter().collect::<Vec<_>>()).unwrap();
            let mut report = String::new();
            for (what, items) in [("CNN", &cnn), ("GPT", &gpt)] {
                let with = fma_kernels(items, &target, 1 << 20);
                let without = fma_kernels(items, &untiled, 1 << 20);
                for k in &with {
                    report += &format!(
                        "  {what} {:<26} {:>6.1}M FMAs {:.4} loads/FMA\n",
                        k.0,
                        k.1 / 1e6,
                        k.2
                    );
                }
                let (w, wt) = memory_summary(&with);
                let (wo, _) = memory_summary(&without);
                report += &format!(
                "  {what}: {w:.3} loads/FMA staged ({:.0}% of FMAs at <= 1/8), {wo:.3} unstaged\n",
                wt * 100.0
            );
            }
            eprintln!("{report}");
            let with = fma_kernels(&cnn, &target, 1 << 20);
            let (cnn_with, tiled) = memory_summary(&with);
            let (cnn_without, _) = memory_summary(&fma_kernels(&cnn, &untiled, 1 << 20));
            assert!(tiled >= 0.9, "{report}");
            assert!(cnn_with * 10.0 <= cnn_without, "{report}");
            let conv2: Vec<_> = with.iter().filter(|k| k.1 > 280e6).collect();
            assert_eq!(conv2.len(), 3, "{report}");
            assert!(conv2.iter().all(|k| k.2 <= 0.125), "{report}");
            assert!(cnn_with <= 0.08, "{report}");
            assert!(with.iter().all(|k| k.2 <= 0.125), "{report}");
            let with = fma_kernels(&gpt, &target, 1 << 20);
            let (gpt_with, tiled) = memory_summary(&with);
            let (gpt_without, _) = memory_summary(&fma_kernels(&gpt, &untiled, 1 << 20));
            assert!(tiled >= 0.9, "{report}");
            assert!(gpt_with * 10.0 <= gpt_without, "{report}");
            assert!(with.iter().all(|k| k.2 <= 0.125), "{report}");
            // The forward pass's matmuls (the residual stream's Linear layers and attention's).
            for k in &with {
                let forward = k.0.starts_with("r_16_64_") && k.0.ends_with("_1");
                assert!(!forward || k.2 <= 0.125, "{k:?}\n{report}");
            }
        });
}

/// Every tile a staged kernel loads is read coalesced: consecutive invocations read
/// consecutive addresses, so a warp's loads touch few more 32-byte segments than their bytes
/// fill. For the 1024^3 matmul and the CNN's and GPT's steps compiled for a GPU (45 staged
/// kernels), each staged load's worst warp in the first, middle and last workgroups: the
/// matmul's and the GPT's Linear layers' and attention's touch exactly the fewest; the
/// convolutions' rows of 11 or 13 (44 or 52 bytes, wherever the row starts) touch twice as
/// many, 1.75 for rows of 13, the dense layer's gradient runs of 5 (2.25), and the GPT's
/// output layer steps of 13 along its vocabulary's rows of 65 (2-2.5). (A tile is staged only
/// where it is read in runs of at least 4 elements, `lower::MIN_RUN`: at most 4x.)
#[test]
fn staged_tiles_load_in_whole_segments() {
    Context::new()
        .dev(Device::Interp)
        .opt_target(OptTarget::Gpu)
        .run(|| {
            let target = Target::new(OptTarget::Gpu);
            let a = Tensor::rand(&[1024, 1024]).unwrap().realize().unwrap();
            let square = Tensor::schedule_all(&[&a.matmul(&a).unwrap()]).unwrap();
            let cnn = step(128, 1).0;
            let cnn = Tensor::schedule_all(&cnn.iter().collect::<Vec<_>>()).unwrap();
            let gpt = gpt_step();
            let gpt = Tensor::schedule_all(&gpt.iter().collect::<Vec<_>>()).unwrap();
            let mut report = String::new();
            let mut worst = 0f64;
            let mut kernels = 0;
            for (what, items) in [("matmul", &square), ("CNN", &cnn), ("GPT", &gpt)] {
                for k in kernels_of(items, &target).iter().filter(|k| staged(k)) {
                    let r = tile_load_segments(k);
                    report += &format!("  {what} {:<28} {r:.2?}\n", k.name);
                    assert!(!r.is_empty(), "{}: no tile load found", k.name);
                    let most = r.iter().copied().fold(0.0, f64::max);
                    assert!(what != "matmul" || most == 1.0, "{}: {r:?}", k.name);
                    worst = worst.max(most);
                    kernels += 1;
                }
            }
            eprintln!("{kernels} staged kernels; segments per warp over the fewest:\n{report}");
            assert!(kernels >= 40, "{report}");
            assert!(worst <= 2.5, "{report}");
        });
}

/// Staged kernels compute what unoptimized ones do, on the interpreter and on every backend
/// that runs them (WebGPU; the C backend's target never stages): matmuls of several shapes
/// (square, transposed operands, batched, a reduce of 48 = 3 steps of 16, one of 65 = 5 steps
/// of 13, outputs along 65 in blocks of 13) and a bias and activation fused after the reduce.
#[test]
fn staged_matmuls_equal_unoptimized_ones() {
    let run = |dev: Device, t: OptTarget| -> Vec<Vec<f32>> {
        Context::new().dev(dev).opt_target(t).run(|| {
            Tensor::manual_seed(5);
            let a = Tensor::randn(&[256, 48]).unwrap();
            let b = Tensor::randn(&[48, 128]).unwrap();
            let c = Tensor::randn(&[4, 128, 64]).unwrap();
            let d = Tensor::randn(&[4, 64, 128]).unwrap();
            let bias = Tensor::randn(&[128]).unwrap();
            // A reduce of 65 (a GPT's vocabulary): steps of 13.
            let e = Tensor::randn(&[1024, 65]).unwrap();
            let f = Tensor::randn(&[65, 64]).unwrap();
            // Outputs along 65 (a GPT's output layer, weight stored (out, in)): a block of 13
            // in workgroups of 64.
            let g = Tensor::randn(&[1024, 64]).unwrap();
            let outs = [
                a.matmul(&b).unwrap().add(&bias).unwrap().relu().unwrap(),
                b.transpose(0, 1)
                    .unwrap()
                    .matmul(&a.transpose(0, 1).unwrap())
                    .unwrap(),
                c.matmul(&d).unwrap(),
                e.matmul(&f).unwrap(),
                g.matmul(&f.transpose(0, 1).unwrap()).unwrap(),
            ];
            let staged = outs.iter().all(|o| {
                let items = Tensor::schedule_all(&[o]).unwrap();
                items.iter().any(|it| match it {
                    ScheduleItem::Kernel { ast, .. } => {
                        let o =
                            wgrad::codegen::opt::default_opts(ast, &Target::new(OptTarget::Gpu));
                        eprintln!("{:?} {o:?}", ast.root.shape);
                        o.stage.is_some()
                    }
                    _ => false,
                })
            });
            assert!(staged, "every matmul here stages its tiles on a GPU target");
            outs.iter().map(|o| o.to_vec::<f32>().unwrap()).collect()
        })
    };
    let plain = run(Device::Interp, OptTarget::None);
    for dev in common::devices() {
        if dev == Device::Cpu {
            continue;
        }
        let got = run(dev, OptTarget::Gpu);
        assert_close(&format!("{dev} staged"), &got, &plain);
    }
}

/// On the CPU a weight gradient whose inputs L2 cannot keep (`dW = dYᵀ X` over 4,096 rows of
/// the medium GPT's MLP: 10 MiB) is split along the rows into parts that read at most 512 KiB,
/// so the tiles of a part share their inputs from L2 (read whole per tile row, `X` streamed from
/// L3 made it 3x slower); each part is whole rows, contiguous in memory (one batch of 128 rows,
/// not every 32nd group of 4: rows 64 KiB apart); the forward matmul and the input gradient,
/// which read their large operand once, stay one kernel. The split kernels compute what the
/// unoptimized ones compute.
#[test]
fn cpu_weight_gradients_split_into_parts_that_stay_in_l2() {
    let grads = || -> wgrad::Result<Vec<Tensor>> {
        Tensor::manual_seed(5);
        let x = Tensor::randn(&[32, 128, 128])?.realize()?;
        let w = Tensor::randn(&[512, 128])?.mul(0.05)?.realize()?;
        x.set_requires_grad(true);
        w.set_requires_grad(true);
        x.linear(&w.t()?, None)?
            .square()?
            .mean((), false)?
            .backward()?;
        Ok(vec![x.grad().expect("x.grad"), w.grad().expect("w.grad")])
    };
    Context::new().dev(Device::Interp).run(|| {
        let g = grads().unwrap();
        let items = Tensor::schedule_all(&g.iter().collect::<Vec<_>>()).unwrap();
        let target = Target::new(OptTarget::Cpu);
        let (mut split, mut one) = (vec![], 0);
        for item in &items {
            let ScheduleItem::Kernel { ast, .. } = item else {
                continue;
            };
            let reduce = ast.root.find(
                &|n| matches!(n.op, wgrad::kernel::AstOp::Reduce(..)),
                &|_| false,
            );
            let has_reduce = reduce.is_some();
            let out: usize = ast.root.shape.iter().product();
            match default_plan(ast, &target) {
                Plan::Split { parts, axis, .. } => {
                    // The reduce's axes: the batch (32) outside the positions (128).
                    let r = reduce.expect("a split kernel has a reduce");
                    let wgrad::kernel::AstOp::Reduce(_, axes) = &r.op else {
                        unreachable!()
                    };
                    let sizes: Vec<usize> = axes.iter().map(|&a| r.src[0].shape[a]).collect();
                    assert_eq!(sizes, [32, 128], "reduce axes {axes:?}");
                    assert_eq!(axis, axes[0], "split along the batch, parts of whole rows");
                    split.push((out, parts))
                }
                Plan::One(_) if has_reduce && out >= 128 * 128 => one += 1,
                Plan::One(_) => {}
            }
        }
        // (32·128·512 + 32·128·128) floats = 10 MiB: at least 20 parts of 512 KiB.
        assert_eq!(split.len(), 1, "splits (outputs, parts): {split:?}");
        assert!(split[0].0 == 512 * 128 && split[0].1 >= 20, "{split:?}");
        assert!(
            one >= 2,
            "the forward and the input gradient stay one kernel each: {one}"
        );
    });
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "cpu weight gradient split", "no C compiler");
    }
    let run = |dev: Device| -> Vec<Vec<f32>> {
        Context::new()
            .dev(dev)
            .run(|| -> wgrad::Result<Vec<Vec<f32>>> {
                grads()?.iter().map(|t| t.to_vec_f32()).collect()
            })
            .unwrap_or_else(|e| panic!("{dev}: {e}"))
    };
    assert_close(
        "weight gradient split on the CPU",
        &run(Device::Cpu),
        &run(Device::Interp),
    );
}

/// The kernels of a schedule, in order.
fn asts(items: &[ScheduleItem]) -> Vec<&wgrad::kernel::KernelAst> {
    items
        .iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            _ => None,
        })
        .collect()
}

/// `ast`'s default CPU plan, at 8 lanes and at 16, computes vectors whose operands are loaded
/// whole or broadcast, none gathered lane by lane.
fn assert_cpu_vectors_gather_nothing(ast: &wgrad::kernel::KernelAst) {
    for lanes in [8, 16] {
        let target = Target {
            lanes,
            ..Target::new(OptTarget::Cpu)
        };
        let plan = default_plan(ast, &target);
        let k = &compile_plan(ast, &plan).unwrap().stages[0].kernel;
        let packs = wgrad::codegen::vectorize::packs(k, lanes);
        assert!(!packs.is_empty(), "{plan:?}");
        let gathered = packs
            .iter()
            .filter(|p| format!("{:?}", p.expr).contains("Gather"))
            .count();
        assert_eq!(gathered, 0, "{lanes} lanes, {plan:?}: {packs:?}");
    }
}

/// Elements one invocation of `k` stores (a `StoreVec` stores four).
fn stored_elements(k: &LinearKernel) -> usize {
    k.insts
        .iter()
        .map(|i| match i {
            wgrad::codegen::Inst::Store { .. } => 1,
            wgrad::codegen::Inst::StoreVec { vals, .. } => vals.len(),
            _ => 0,
        })
        .sum()
}

/// A CPU copy that transposes (a weight copied into row order for a matmul, attention's keys)
/// reads rows of its input and stores rows of its output: each invocation a tile, every output
/// stored in a vector of up to 8 built from one column of the tile, none scattered lane by
/// lane (a 1024x1024 transpose: 1.0 ms in such tiles, 5-7 ms storing each output on its own;
/// the medium GPT's key copies 2x faster). The values equal the interpreter's.
#[test]
fn cpu_transposed_copies_store_whole_vectors() {
    let copy = || -> wgrad::Result<Tensor> {
        let v: Vec<f32> = (0..96 * 256).map(|i| (i * 7919 % 1009) as f32).collect();
        Ok(Tensor::from_vec(v, &[96, 256])?.t()?.contiguous())
    };
    Context::new().dev(Device::Interp).run(|| {
        let t = copy().unwrap();
        let items = Tensor::schedule_all(&[&t]).unwrap();
        let kernels = asts(&items);
        assert_eq!(kernels.len(), 1);
        for lanes in [8, 16] {
            let target = Target {
                lanes,
                registers: if lanes == 16 { 32 } else { 16 },
                ..Target::new(OptTarget::Cpu)
            };
            let k = &compile(kernels[0], &target).stages[0].kernel;
            let stores = stored_elements(k);
            let packs = wgrad::codegen::vectorize::store_packs(k, lanes);
            assert!(stores >= 32, "{} outputs per invocation", stores);
            assert_eq!(
                packs.iter().map(|p| p.width).sum::<usize>(),
                stores,
                "{lanes} lanes: every store packed: {packs:?}"
            );
            assert!(packs.iter().all(|p| p.width >= 4), "{packs:?}");
        }
    });
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "cpu transposed copies", "no C compiler");
    }
    let run = |dev: Device| -> Vec<Vec<f32>> {
        let v = Context::new().dev(dev).run(|| copy()?.to_vec_f32());
        vec![v.unwrap_or_else(|e| panic!("{dev}: {e}"))]
    };
    let (cpu, interp) = (run(Device::Cpu), run(Device::Interp));
    let differ = cpu[0]
        .iter()
        .zip(&interp[0])
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(
        differ, 0,
        "elements where the CPU's transposed copy differs"
    );
    assert_eq!(interp[0][1], 256.0 * 7919.0 % 1009.0, "w[1][0] at [0][1]");
}

/// A CPU matmul whose right operand is read across its rows (`x @ W.T` with `W` stored
/// (out, in), as `nn::Linear` keeps it) copies it into row order first: the matmul's vectors
/// of outputs then load it whole instead of gathering it lane by lane, at 8 lanes and at 16.
/// The backward pass reads `W` itself (its products vectorize in `W`'s order), and the
/// gradients equal those of the plain product.
#[test]
fn cpu_matmuls_read_their_right_operand_in_row_order() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(3);
        let x = Tensor::randn(&[64, 128]).unwrap().realize().unwrap();
        let w = Tensor::randn(&[256, 128]).unwrap().realize().unwrap();
        let y = x.linear(&w.t().unwrap(), None).unwrap();
        let items = Tensor::schedule_all(&[&y]).unwrap();
        let kernels = asts(&items);
        assert_eq!(kernels.len(), 2, "the copy of W.T, then the matmul");
        assert_cpu_vectors_gather_nothing(kernels[1]);
        // Gradients through the copy equal those of the product written out.
        let backward = |y: Tensor| {
            y.square()
                .unwrap()
                .sum((), false)
                .unwrap()
                .backward()
                .unwrap()
        };
        x.set_requires_grad(true);
        w.set_requires_grad(true);
        backward(x.linear(&w.t().unwrap(), None).unwrap());
        let (gx, gw) = (x.grad().unwrap(), w.grad().unwrap());
        let (px, pw) = (x.detach(), w.detach());
        px.set_requires_grad(true);
        pw.set_requires_grad(true);
        let product = px
            .unsqueeze(1)
            .unwrap()
            .mul(pw.unsqueeze(0).unwrap())
            .unwrap();
        backward(product.sum(-1, false).unwrap());
        let v = |t: Tensor| t.to_vec::<f32>().unwrap();
        assert_eq!(v(gx), v(px.grad().unwrap()));
        assert_eq!(v(gw), v(pw.grad().unwrap()));
    })
}

/// Attention's scores `q @ k.T` on the CPU, `q` and `k` slices of one projection's output (a
/// reduce, computed in the same step): `k.T` is copied into row order too, so the scores' vectors
/// load it whole, and the backward pass reads the projection through the copy (its gradients
/// equal those of the product written out, the projection computed once).
#[test]
fn cpu_attention_scores_read_the_keys_in_row_order() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(5);
        let x = Tensor::randn(&[2, 64, 32]).unwrap().realize().unwrap();
        let w = Tensor::randn(&[32, 64]).unwrap().realize().unwrap();
        let scores = |x: &Tensor, w: &Tensor, written_out: bool| {
            let qk = x.matmul(w).unwrap();
            let q = qk.shrink(&[(0, 2), (0, 64), (0, 32)]).unwrap();
            let k = qk.shrink(&[(0, 2), (0, 64), (32, 64)]).unwrap();
            if written_out {
                // (2, 64, 1, 32) * (2, 1, 64, 32) summed over the last axis: no copy.
                let p = q
                    .unsqueeze(2)
                    .unwrap()
                    .mul(k.unsqueeze(1).unwrap())
                    .unwrap();
                p.sum(-1, false).unwrap()
            } else {
                q.matmul(&k.transpose(-1, -2).unwrap()).unwrap()
            }
        };
        let s = scores(&x, &w, false);
        let items = Tensor::schedule_all(&[&s]).unwrap();
        let kernels = asts(&items);
        let what = "the projection, the copy of k.T, the scores";
        assert_eq!(kernels.len(), 3, "{what}");
        assert_cpu_vectors_gather_nothing(kernels[2]);
        let grads = |written_out: bool| {
            let (x, w) = (x.detach(), w.detach());
            x.set_requires_grad(true);
            w.set_requires_grad(true);
            let s = scores(&x, &w, written_out);
            let loss = s.square().unwrap().sum((), false).unwrap();
            loss.backward().unwrap();
            let v = |t: Tensor| t.to_vec::<f32>().unwrap();
            (v(s), v(x.grad().unwrap()), v(w.grad().unwrap()))
        };
        assert_eq!(grads(false), grads(true));
    })
}

/// On the CPU, a Linear's weight gradient after a LayerNorm, `dW = dyᵀ (x̂ · γ)` (the GPT's
/// q/k/v and MLP weights), is vectorized so its multiply-adds broadcast loaded values (`dy`,
/// one broadcast load each), with `x̂ · γ` one vector product per step (γ's load hoisted),
/// not along the other axis, where every step computes each row's `x̂ · γ` as a scalar and
/// broadcasts it with a shuffle (1.5x slower in the medium GPT's q/k/v weight gradient). At
/// 8 lanes; at 16 this kernel's two orientations cost within the search's 5% margin.
#[test]
fn cpu_weight_gradients_broadcast_loaded_values() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(4);
        let dy = Tensor::randn(&[4096, 384]).unwrap().realize().unwrap();
        let xhat = Tensor::randn(&[4096, 128]).unwrap().realize().unwrap();
        let gamma = Tensor::randn(&[128]).unwrap().realize().unwrap();
        let dw = dy.t().unwrap().matmul(&xhat.mul(&gamma).unwrap()).unwrap();
        let items = Tensor::schedule_all(&[&dw]).unwrap();
        let mut checked = 0;
        for lanes in [8] {
            let target = Target {
                lanes,
                ..Target::new(OptTarget::Cpu)
            };
            for item in &items {
                let ScheduleItem::Kernel { ast, .. } = item else {
                    continue;
                };
                for s in compile(ast, &target).stages {
                    let k = &s.kernel;
                    use wgrad::codegen::linearize::Inst;
                    let loaded: Vec<String> = k
                        .insts
                        .iter()
                        .flat_map(|i| match i {
                            Inst::Load { dst, .. } => vec![*dst],
                            Inst::LoadVec { dsts, .. } => dsts.to_vec(),
                            _ => vec![],
                        })
                        .map(|dst| format!("Splat({dst})"))
                        .collect();
                    for p in wgrad::codegen::vectorize::packs(k, lanes) {
                        let e = format!("{:?}", p.expr);
                        if !e.contains("Mul") {
                            continue;
                        }
                        checked += 1;
                        for splat in e.match_indices("Splat(").map(|(i, _)| {
                            let end = i + e[i..].find(')').unwrap_or(0) + 1;
                            &e[i..end]
                        }) {
                            assert!(
                                loaded.iter().any(|l| l == splat),
                                "{} at {lanes} lanes broadcasts a computed value: {e}",
                                k.name
                            );
                        }
                    }
                }
            }
        }
        assert!(checked > 0, "no vectorized multiply-add");
    })
}

/// Row reductions along a contiguous row (a softmax's max and sum, a layer norm's mean and
/// variance, over 128 elements) keep each row's partial results in vector lanes on the CPU
/// (`Opts::lanes`): their packed steps load whole vectors of one row and gather nothing (an
/// upcast across rows gathered every lane from another row: 10 GOP/s in the medium GPT). The C
/// backend and the interpreter running these plans compute what the unoptimized kernels do,
/// within rounding (the partials add in another order).
#[test]
fn cpu_row_reductions_keep_rows_in_vector_lanes() {
    let outs = || -> wgrad::Result<Vec<Tensor>> {
        Tensor::manual_seed(6);
        let s = Tensor::randn(&[8, 4, 128, 128])?.realize()?;
        let x = Tensor::randn(&[512, 128])?.mul(3.0)?.add(1.0)?.realize()?;
        Ok(vec![s.softmax(-1)?, x.layernorm(-1, 1e-5)?])
    };
    Context::new().dev(Device::Interp).run(|| {
        let outs = outs().unwrap();
        let items = Tensor::schedule_all(&outs.iter().collect::<Vec<_>>()).unwrap();
        for lanes in [8, 16] {
            let target = Target {
                lanes,
                ..Target::new(OptTarget::Cpu)
            };
            let mut rows = 0;
            for item in &items {
                let ScheduleItem::Kernel { ast, .. } = item else {
                    continue;
                };
                if ast.root.shape.last() != Some(&1) {
                    continue;
                }
                rows += 1;
                let o = wgrad::codegen::opt::default_opts(ast, &target);
                let name = format!("{:?} at {lanes} lanes: {o:?}", ast.root.shape);
                assert!(
                    o.lanes.is_some_and(|l| l.0 == ast.root.shape.len() - 1),
                    "{name}"
                );
                for s in compile(ast, &target).stages {
                    let packs = wgrad::codegen::vectorize::packs(&s.kernel, lanes);
                    assert!(!packs.is_empty(), "{name}: nothing packed");
                    for p in packs {
                        let e = format!("{:?}", p.expr);
                        assert!(e.contains("Load") && !e.contains("Gather"), "{name}: {e}");
                    }
                }
            }
            assert_eq!(
                rows, 4,
                "a softmax's max and sum, a layer norm's mean and variance"
            );
        }
    });
    assert_cpu_plans_compute_the_same(outs);
}

/// CPU elementwise kernels compute a row of outputs per invocation along their last axis
/// (`opt::elementwise_rows`: four vectors' worth where it divides), so their index arithmetic
/// (a causal mask's row and column, a softmax's row) is done once a row and the C dialect writes
/// whole vectors: the causal attention's softmax kernels, forward and backward, at 8 and 16
/// lanes. The C backend and the interpreter running these plans compute what the unoptimized
/// kernels do.
#[test]
fn cpu_elementwise_kernels_compute_rows() {
    let outs = || -> wgrad::Result<Vec<Tensor>> {
        Tensor::manual_seed(7);
        let qkv: Vec<Tensor> = (0..3)
            .map(|_| Tensor::randn(&[2, 4, 128, 32])?.realize())
            .collect::<wgrad::Result<_>>()?;
        for t in &qkv {
            t.set_requires_grad(true);
        }
        let o = qkv[0].scaled_dot_product_attention(&qkv[1], &qkv[2], None, 0.0, true, false)?;
        o.square()?.sum((), false)?.backward()?;
        let mut v = vec![o.detach()];
        v.extend(qkv.iter().map(|t| t.grad().expect("grad")));
        Ok(v)
    };
    Context::new().dev(Device::Interp).run(|| {
        let outs = outs().unwrap();
        let items = Tensor::schedule_all(&outs.iter().collect::<Vec<_>>()).unwrap();
        for lanes in [8, 16] {
            let target = Target {
                lanes,
                ..Target::new(OptTarget::Cpu)
            };
            let mut rows = 0;
            for item in &items {
                let ScheduleItem::Kernel { ast, .. } = item else {
                    continue;
                };
                let elementwise = ast
                    .root
                    .find(
                        &|n| matches!(n.op, wgrad::kernel::AstOp::Reduce(..)),
                        &|_| false,
                    )
                    .is_none();
                if !elementwise || ast.root.shape != [2, 4, 128, 128] {
                    continue;
                }
                rows += 1;
                let o = wgrad::codegen::opt::default_opts(ast, &target);
                assert_eq!(o.upcast, [(3, 4 * lanes)], "at {lanes} lanes");
                let k = &compile(ast, &target).stages[0].kernel;
                let c = wgrad::codegen::render::render(k, &CRenderer { lanes });
                assert!(
                    c.contains(&format!("st{lanes}(b")),
                    "{} at {lanes} lanes stores no vector:\n{c}",
                    k.name
                );
            }
            assert!(
                rows >= 2,
                "the softmax's kernels forward and backward: {rows}"
            );
        }
    });
    assert_cpu_plans_compute_the_same(outs);
}

/// A reciprocal in a CPU elementwise row is computed as a vector (`1.0f / v`), like the other
/// arithmetic (it fell back to scalar code before: a sigmoid written with `reciprocal` made a
/// GELU kernel 10x slower), and equals the interpreter's bit for bit, in C and in WebAssembly
/// (whose rows step as f32x4).
#[test]
fn cpu_elementwise_rows_vectorize_reciprocals() {
    let out = || {
        Tensor::manual_seed(8);
        let x = Tensor::rand(&[64, 128])?.add(0.5)?.realize()?;
        x.reciprocal()?.mul(&x.add(1.0)?)
    };
    Context::new().dev(Device::Interp).run(|| {
        let y = out().unwrap();
        let items = Tensor::schedule_all(&[&y]).unwrap();
        for lanes in [8, 16] {
            let target = Target {
                lanes,
                ..Target::new(OptTarget::Cpu)
            };
            let ScheduleItem::Kernel { ast, .. } = items.last().expect("a kernel") else {
                panic!("not a kernel")
            };
            let k = &compile(ast, &target).stages[0].kernel;
            let c = wgrad::codegen::render::render(k, &CRenderer { lanes });
            let stores = c.matches(&format!("st{lanes}(b0")).count();
            assert!(
                stores > 0,
                "{} at {lanes} lanes stores no vector:\n{c}",
                k.name
            );
            assert!(
                !c.contains("b0[") && !c.contains("= (1.0f / v") && c.contains("(1.0f / ld"),
                "{} at {lanes} lanes stores or divides a scalar:\n{c}",
                k.name
            );
        }
    });
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "reciprocal rows", "no C compiler");
    }
    let run = |dev: Device| {
        Context::new()
            .dev(dev)
            .opt_target(OptTarget::Cpu)
            .run(|| out().unwrap().to_vec::<f32>().unwrap())
    };
    let interp = run(Device::Interp);
    for dev in [Device::Cpu, Device::Wasm] {
        if common::usable(dev) {
            let got = run(dev);
            let differ = got.iter().zip(&interp).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 0, "elements where {dev} and the interpreter differ");
        }
    }
}

/// A CPU weight gradient `dW = dyᵀ x` (a Linear's, with `dy` in memory) shares each vector
/// it loads among at least four multiply-adds, broadcasting as many loaded values of the other
/// operand. The lowering loads runs of four consecutive scalars together (`LoadVec`); the
/// CPU cost model once took broadcasts of those for computed values (a shuffle each) and chose
/// two parts of the split at once instead, loading two vectors per two multiply-adds: 1.5x
/// slower on the medium GPT's weight gradients. Its vector lanes run along the gradient's
/// rows, so each vector is stored whole: the mirror image, as costly in its loops, put them
/// down its columns, and the C compiler transposed every register tile before storing it
/// (the medium GPT's weight gradients 10% slower).
#[test]
fn cpu_weight_gradients_share_vector_loads() {
    Context::new().dev(Device::Interp).run(|| {
        Tensor::manual_seed(9);
        let x = Tensor::randn(&[32, 128, 128]).unwrap().realize().unwrap();
        let w = Tensor::randn(&[512, 128]).unwrap().realize().unwrap();
        let g = Tensor::randn(&[32, 128, 512]).unwrap().realize().unwrap();
        w.set_requires_grad(true);
        x.linear(&w.t().unwrap(), None)
            .unwrap()
            .mul(&g)
            .unwrap()
            .sum((), false)
            .unwrap()
            .backward()
            .unwrap();
        let gw = w.grad().unwrap();
        let items = Tensor::schedule_all(&[&gw]).unwrap();
        let mut checked = 0;
        for lanes in [8, 16] {
            let target = Target {
                lanes,
                registers: if lanes == 16 { 32 } else { 16 },
                ..Target::new(OptTarget::Cpu)
            };
            for item in &items {
                let ScheduleItem::Kernel { ast, .. } = item else {
                    continue;
                };
                if ast.root.shape.iter().product::<usize>() != 512 * 128 {
                    continue;
                }
                let k = &compile(ast, &target).stages[0].kernel;
                let packs = wgrad::codegen::vectorize::packs(k, lanes);
                let mut loads = std::collections::HashSet::new();
                for p in &packs {
                    let e = format!("{:?}", p.expr);
                    for (i, _) in e.match_indices("Load {") {
                        loads.insert(e[i..i + e[i..].find('}').unwrap_or(0)].to_string());
                    }
                }
                assert!(
                    !loads.is_empty(),
                    "{} at {lanes} lanes: no vector load",
                    k.name
                );
                assert!(
                    packs.len() >= 4 * loads.len(),
                    "{} at {lanes} lanes: {} multiply-adds for {} vector loads",
                    k.name,
                    packs.len(),
                    loads.len()
                );
                // Its vector lanes are consecutive outputs, stored as they are: no transpose.
                let stores = wgrad::codegen::vectorize::acc_lane_stores(k, &packs);
                assert!(
                    !stores.is_empty() && stores.values().all(|&in_order| in_order),
                    "{} at {lanes} lanes: lanes stored across rows ({} of {} stores)",
                    k.name,
                    stores.values().filter(|&&o| !o).count(),
                    stores.len()
                );
                checked += 1;
            }
        }
        assert_eq!(
            checked, 2,
            "the weight gradient's first kernel at 8 and 16 lanes"
        );
    });
}

/// A matmul's gradient with respect to a row-major right operand (attention's values, sliced
/// from a projection's output; a weight stored (in, out)) is written in the operand's own
/// order: the product's axes follow its layout. So the CPU kernel that assembles the
/// projection's gradient from its slices (pads added: a concatenation) loads and stores whole
/// vectors, each slice's run under one condition, nothing gathered lane by lane. (Ordered the
/// other way, the reduce wrote the values' gradient transposed and the concatenation read it
/// across rows: the medium GPT's q/k/v gradient, scalar code, 4x slower.)
#[test]
fn cpu_concatenated_gradients_load_and_store_whole_vectors() {
    let grad = || -> wgrad::Result<Tensor> {
        Tensor::manual_seed(7);
        let p = Tensor::randn(&[2, 16, 12])?.realize()?;
        let w = Tensor::randn(&[2, 16, 64])?.realize()?;
        let x = Tensor::randn(&[12, 384])?.realize()?;
        x.set_requires_grad(true);
        // Slices of x as two heads of 64, as attention splits its values: each gradient comes
        // back through the heads' permute, so its reduce has a buffer of its own.
        let heads = |lo: usize| -> wgrad::Result<Tensor> {
            let h = x.shrink(&[(0, 12), (lo, lo + 128)])?;
            h.reshape(&[12, 2, 64])?.permute(&[1, 0, 2])
        };
        let mut loss = Tensor::zeros(&[])?;
        for (k, s) in [(0, 1.0), (1, -0.5), (2, 0.25)] {
            let y = p.matmul(&heads(128 * k)?)?.mul(&w)?.mul(s)?;
            loss = loss.add(&y.sum((), false)?)?;
        }
        loss.backward()?;
        Ok(x.grad().expect("gradient"))
    };
    Context::new().dev(Device::Interp).run(|| {
        let g = grad().unwrap();
        let items = Tensor::schedule_all(&[&g]).unwrap();
        let ast = &asts(&items)[items.len() - 1];
        assert_eq!(ast.root.shape, [12, 384]);
        assert!(ast
            .root
            .find(
                &|n| matches!(n.op, wgrad::kernel::AstOp::Reduce(..)),
                &|_| false
            )
            .is_none());
        let target = Target::new(OptTarget::Cpu);
        let plan = default_plan(ast, &target);
        let k = &compile_plan(ast, &plan).unwrap().stages[0].kernel;
        let packs = wgrad::codegen::vectorize::store_packs(k, 16);
        // 384 outputs a row in vectors of 16 (a row of up to 64 per invocation).
        assert!(!packs.is_empty(), "{plan:?}");
        let stores = stored_elements(k);
        assert_eq!(
            packs.iter().map(|p| p.width).sum::<usize>(),
            stores,
            "every store packed"
        );
        for p in &packs {
            let e = format!("{:?}", p.expr);
            assert!(!e.contains("Gather"), "{e}");
            assert!(
                e.contains("gate: Some"),
                "each slice loaded under its condition: {e}"
            );
        }
    });
    if !common::usable(Device::Cpu) {
        return common::skip(&["cpu"], "cpu concatenated gradients", "no C compiler");
    }
    let run = |dev: Device| -> Vec<Vec<f32>> {
        let v = Context::new().dev(dev).run(|| grad()?.to_vec_f32());
        vec![v.unwrap_or_else(|e| panic!("{dev}: {e}"))]
    };
    assert_close(
        "concatenated gradients on the CPU",
        &run(Device::Cpu),
        &run(Device::Interp),
    );
}
