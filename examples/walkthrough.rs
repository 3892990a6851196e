//! One small graph taken through every stage of the pipeline, printing each (in the spirit of
//! tinygrad's `docs/abstractions3.py`): a lazy `Tensor` → its `UOp` graph → the schedule →
//! the kernel IR (`KernelAst`) → the lowered and optimized `KGraph` → the linearized kernel →
//! its C, WGSL and CUDA source → compiled and launched by hand on a backend, checked against
//! `realize()`. `DEV` picks the backend that launches it (the interpreter by default).
//!
//!     cargo run --example walkthrough

use wgrad::codegen::{self, c::render_c, cuda::render_cuda, wgsl::render_wgsl};
use wgrad::runtime::{block_on, Buffer};
use wgrad::schedule::ScheduleItem;
use wgrad::{Context, Device, Result, Tensor};

fn stage(n: usize, what: &str) {
    println!("\n=== {n}. {what}");
}

fn main() -> Result<()> {
    let dev = match std::env::var("DEV") {
        Ok(d) if !d.trim().is_empty() => d.parse::<Device>()?,
        _ => Device::Interp,
    };
    Context::new().dev(dev).run(|| {
        stage(1, "Tensor: ops build a lazy graph; nothing has run yet");
        let a = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3])?;
        let b = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3])?;
        let out = a.mul(&b)?.relu()?.sum(1, false)?;
        // Printing `out` with `{:?}` would realize it (it prints the values): show its type only.
        println!(
            "out = relu(a * b).sum(axis=1): shape {:?}, {:?}, not realized",
            out.shape(),
            out.dtype()
        );

        stage(2, "UOp graph (broadcasting is an Expand, a view of b)");
        print!("{}", out.node().tree());

        stage(3, "schedule: the whole graph fuses into kernels");
        let items = out.schedule()?;
        println!("{} kernel(s)", items.len());
        let Some(ScheduleItem::Kernel { ast, inputs, .. }) = items.first() else {
            unreachable!("a graph over realized inputs schedules at least one kernel");
        };

        stage(
            4,
            "kernel IR: loads through views, elementwise ops, one reduce",
        );
        print!("{ast}");

        let target = wgrad::realize::target(dev);
        stage(
            5,
            &format!(
                "lowered and optimized for {:?}: scalar ops with explicit index arithmetic",
                target.kind
            ),
        );
        print!("{}", codegen::opt::optimize(ast, &target).graph);

        stage(
            6,
            "linearized: one flat instruction list with the reduce loop",
        );
        let kernel = codegen::linear_kernel(ast, &target);
        print!("{kernel}");

        stage(7, "rendered: C (the cpu backend), WGSL (WebGPU) and CUDA");
        println!("{}", render_c(&kernel));
        println!("{}", render_wgsl(&kernel));
        println!("{}", render_cuda(&kernel));

        stage(8, &format!("compiled and launched on {dev}"));
        let be = dev.backend();
        let program = be.compile(&kernel)?;
        let (dtype, numel) = ast.bufs[0];
        let output = be.alloc(numel * dtype.size())?;
        let input_bufs: Vec<std::sync::Arc<Buffer>> = inputs
            .iter()
            .map(|u| {
                u.buffer()
                    .expect("the inputs of the first kernel are realized")
            })
            .collect();
        let mut bufs: Vec<&Buffer> = vec![&output];
        bufs.extend(input_bufs.iter().map(|b| b.as_ref()));
        be.launch(&program, &bufs)?;
        be.synchronize()?;
        let bytes = block_on(be.copy_out(&output))?;
        let by_hand: Vec<f32> = bytes[..numel * 4]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        println!("by hand:   {by_hand:?}");
        let realized = out.to_vec::<f32>()?;
        println!("realize(): {realized:?}");
        assert_eq!(
            by_hand, realized,
            "the hand-launched kernel matches realize()"
        );
        Ok(())
    })
}
