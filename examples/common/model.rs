//! The tutorial's CNN, shared by the examples and tests/mnist.rs: Conv2d(1,32,3) → relu → max_pool2d(2) →
//! Conv2d(32,64,3) → relu → max_pool2d(2) → flatten → dropout(0.5) → Linear(1600,10).

// Not every user of this file needs every helper.
#![allow(dead_code)]

use wgrad::context::default_float;
use wgrad::nn::optim::Optimizer;
use wgrad::nn::{Conv2d, Linear};
use wgrad::{Context, CrossEntropyOpts, DType, Device, Result, Tensor};

pub struct Model {
    pub l1: Conv2d,
    pub l2: Conv2d,
    pub l3: Linear,
}
wgrad::state!(Model { l1, l2, l3 });

impl Model {
    pub fn new() -> Result<Model> {
        Ok(Model {
            l1: Conv2d::new(1, 32, (3, 3))?,
            l2: Conv2d::new(32, 64, (3, 3))?,
            l3: Linear::new(1600, 10)?,
        })
    }
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.l1.forward(x)?.relu()?.max_pool2d((2, 2), None)?;
        let x = self.l2.forward(&x)?.relu()?.max_pool2d((2, 2), None)?;
        self.l3.forward(&x.flatten(1)?.dropout(0.5)?)
    }
}

/// Test accuracy in percent, evaluated in chunks (dropout is off outside training). A model on
/// several devices gets each chunk split over them (or whole on each, if it does not split).
pub fn accuracy(model: &Model, x: &Tensor, y: &Tensor) -> Result<f64> {
    let devices = model.l1.weight.devices();
    let n = x.shape()[0];
    // Chunks keep the fused convolution's index space within 32 bits.
    let chunk = 250;
    let mut correct = 0i64;
    let mut start = 0;
    while start < n {
        let end = (start + chunk).min(n);
        let mut xs = x
            .slice(0, start as isize, end as isize, 1)?
            .cast(default_float())?;
        let mut ys = y
            .slice(0, start as isize, end as isize, 1)?
            .cast(DType::I32)?;
        if devices.len() > 1 {
            let axis = ((end - start) % devices.len() == 0).then_some(0);
            (xs, ys) = (xs.shard(&devices, axis)?, ys.shard(&devices, axis)?);
        }
        let hit = model
            .forward(&xs)?
            .argmax(Some(1), false)?
            .eq(&ys)?
            .sum((), false)?;
        correct += hit.item::<i32>()? as i64;
        start = end;
    }
    Ok(correct as f64 * 100.0 / n as f64)
}

/// One training step of the tutorial (the function `TinyJit` captures): a batch of `bs` drawn
/// with `randint`, forward, cross-entropy, backward and the optimizer's update, in training
/// mode. Returns the realized loss.
pub fn train_step(
    model: &Model,
    opt: &mut dyn Optimizer,
    x_train: &Tensor,
    y_train: &Tensor,
    bs: usize,
) -> Result<Tensor> {
    train_step_sharded(model, opt, x_train, y_train, bs, &[])
}

/// `train_step` with the batch split over `devices` along axis 0 (none: on one device), for a
/// model whose parameters were replicated on them (`p.shard_(devices, None)`).
pub fn train_step_sharded(
    model: &Model,
    opt: &mut dyn Optimizer,
    x_train: &Tensor,
    y_train: &Tensor,
    bs: usize,
    devices: &[Device],
) -> Result<Tensor> {
    Context::new().training(true).run(|| {
        let samples = Tensor::randint(&[bs], 0, x_train.shape()[0] as i64)?;
        let mut x = x_train.index(&samples)?.cast(default_float())?;
        let mut y = y_train.index(&samples)?;
        if devices.len() > 1 {
            // The tutorial's second line of multi-device training.
            (x, y) = (x.shard(devices, Some(0))?, y.shard(devices, Some(0))?);
        }
        opt.zero_grad();
        let loss = model
            .forward(&x)?
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())?;
        loss.backward()?;
        opt.step()?;
        loss.realize()
    })
}
