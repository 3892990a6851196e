//! `std::ops` operators on tensors, so that a chain reads as math: `+ - * /` between tensors
//! (by value or reference) and with scalars on either side (`f64`, `f32`, `i32` on the right;
//! `f64` and `i32` on the left, so that a literal there infers), and unary
//! `-`. Each returns `Result<Tensor>` (broadcasting and dtypes can fail), and a `Result<Tensor>`
//! on the left takes a tensor on the right, so `(&a + &b)? * 2.0` and `(&a * &b + &c)?` work.
//! Broadcasting and promotion are those of `add`, `sub`, `mul` and `div`.

use super::{Operand, Tensor};
use crate::error::Result;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// `op` for every pairing of tensor-like operands.
macro_rules! binary_operators {
    ($($trait:ident $method:ident),*) => {$(
        impl<R: Into<Operand>> $trait<R> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: R) -> Result<Tensor> {
                Tensor::$method(&self, rhs)
            }
        }
        impl<R: Into<Operand>> $trait<R> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: R) -> Result<Tensor> {
                Tensor::$method(self, rhs)
            }
        }
        impl $trait<Result<Tensor>> for Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Result<Tensor>) -> Result<Tensor> {
                Tensor::$method(&self, rhs?)
            }
        }
        impl $trait<Result<Tensor>> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Result<Tensor>) -> Result<Tensor> {
                Tensor::$method(self, rhs?)
            }
        }
        impl $trait<Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$method(&self?, rhs)
            }
        }
        impl $trait<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$method(&self?, rhs)
            }
        }
        // A scalar on the left (f64 or i32: one type each, so that literals infer): the scalar
        // takes the tensor's dtype, as on the right.
        impl $trait<Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                let lhs = rhs.operand(self)?;
                Tensor::$method(&lhs, &rhs)
            }
        }
        impl $trait<&Tensor> for f64 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                let lhs = rhs.operand(self)?;
                Tensor::$method(&lhs, rhs)
            }
        }
        impl $trait<Tensor> for i32 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                let lhs = rhs.operand(self)?;
                Tensor::$method(&lhs, &rhs)
            }
        }
        impl $trait<&Tensor> for i32 {
            type Output = Result<Tensor>;
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                let lhs = rhs.operand(self)?;
                Tensor::$method(&lhs, rhs)
            }
        }
    )*};
}

binary_operators!(Add add, Sub sub, Mul mul, Div div);

impl Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::{Context, Device};

    #[test]
    fn operators_compute_what_the_methods_do() -> Result<()> {
        Context::new().dev(Device::Interp).run(|| {
            let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
            let b = Tensor::from_slice(&[4.0f32, 5.0, 6.0], &[3])?;
            let y = (((&a * &b + &a)? / 2.0)? - 1.0)?;
            assert_eq!(y.to_vec::<f32>()?, [1.5, 5.0, 9.5]);
            let z = (10.0 - &a)?;
            assert_eq!(z.to_vec::<f32>()?, [9.0, 8.0, 7.0]);
            let w = (2 * (-&b)?)?;
            assert_eq!(w.to_vec::<f32>()?, [-8.0, -10.0, -12.0]);
            let i = Tensor::from_slice(&[7i32, -7], &[2])?;
            assert_eq!((&i / 2)?.dtype(), crate::DType::F32);
            assert_eq!((1.0 / &a)?.to_vec::<f32>()?, [1.0, 0.5, 1.0 / 3.0]);
            // Broadcasting errors come back as errors.
            let c = Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
            assert!((&a + &c).is_err());
            Ok(())
        })
    }

    /// A scalar takes its tensor operand's dtype, in `where_` too (the condition's does not
    /// count): f16 stays f16, and so does an f16 cross-entropy with an ignored label.
    #[test]
    fn scalars_take_the_other_operands_dtype() -> Result<()> {
        use crate::DType;
        Context::new().dev(Device::Interp).run(|| {
            let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3])?.cast(DType::F16)?;
            let m = x.gt(0.0)?;
            assert_eq!(m.where_(&x, 0.0)?.dtype(), DType::F16);
            assert_eq!(m.where_(0.5, &x)?.dtype(), DType::F16);
            assert_eq!(m.where_(1.0, 0.0)?.dtype(), DType::F32);
            let u = Tensor::from_slice(&[1u8, 2, 3], &[3])?;
            assert_eq!(m.where_(&u, 7)?.dtype(), DType::U8);
            let logits =
                Tensor::from_slice(&[0.5f32, 1.0, -1.0, 2.0], &[2, 2])?.cast(DType::F16)?;
            let y = Tensor::from_slice(&[1i32, -100], &[2])?;
            let opts = crate::CrossEntropyOpts {
                ignore_index: Some(-100),
                ..Default::default()
            };
            let loss = logits.sparse_categorical_crossentropy(&y, &opts)?;
            assert_eq!(loss.dtype(), DType::F16);
            Ok(())
        })
    }
}
