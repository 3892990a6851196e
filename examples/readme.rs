//! The README's Rust example, kept here so that it compiles and runs (tests/readme.rs checks
//! that the README shows this file's code): a two-layer MLP trained with Adam, the step captured
//! by `TinyJit` and replayed with new inputs.
//!
//!     cargo run --release --example readme

use wgrad::nn::{
    optim::{Adam, Optimizer},
    state::get_parameters,
    Linear,
};
use wgrad::{Context, CrossEntropyOpts, Result, Tensor, TinyJit};

fn main() -> Result<()> {
    let (l1, l2) = (Linear::new(4, 16)?, Linear::new(16, 3)?);
    let mut opt = Adam::new(get_parameters(&[&l1, &l2]))?.lr(0.05);
    let mut step = TinyJit::new(|xy: &[Tensor]| {
        Context::new().training(true).run(|| {
            opt.zero_grad();
            let logits = l2.forward(&l1.forward(&xy[0])?.relu()?)?; // lazy: nothing has run yet
            let loss =
                logits.sparse_categorical_crossentropy(&xy[1], &CrossEntropyOpts::default())?;
            loss.backward()?; // the gradient is a lazy graph too
            opt.step()?;
            Ok(vec![loss.realize()?]) // one schedule: forward, backward and update, fused
        })
    });
    let x = Tensor::randn(&[64, 4])?.realize()?;
    let y = Tensor::randint(&[64], 0, 3)?.realize()?; // random labels: the MLP memorizes them
    for i in 0..50 {
        let loss = step.call(&[&x, &y])?.remove(0); // call 1 runs, 2 captures, then replays
        if i % 10 == 0 {
            println!("step {i:2}  loss {:.4}", loss.item::<f32>()?);
        }
    }
    Ok(())
}
