//! The tutorial's CNN, shared by the examples: Conv2d(1,32,3) → relu → max_pool2d(2) →
//! Conv2d(32,64,3) → relu → max_pool2d(2) → flatten → dropout(0.5) → Linear(1600,10).

use wgrad::nn::{Conv2d, Linear};
use wgrad::{Result, Tensor};

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
