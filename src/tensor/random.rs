//! Random numbers computed on the device: Threefry-2x32 (20 rounds) over a counter that lives
//! in a device buffer and is advanced in place by every draw. Because the draw and the counter
//! update are kernels like any other, a replayed (JIT) step draws fresh numbers.

use super::{check_shape, Tensor};
use crate::context::default_float;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{bail, ErrorKind, Result};
use std::cell::RefCell;

struct Rng {
    seed: u64,
    counters: Vec<(Device, Tensor)>,
    /// Realized `(1,)` u32 tensors holding a draw's length, by device: what advances the
    /// counter (one buffer per length, so a captured step binds the same one every call).
    lengths: Vec<(Device, u32, Tensor)>,
}

// Per thread, like the rest of the engine's mutable state: a tensor graph is built and
// realized by one thread.
thread_local! {
    static RNG: RefCell<Rng> = const {
        RefCell::new(Rng { seed: 0, counters: Vec::new(), lengths: Vec::new() })
    };
}

fn rotl(x: &Tensor, r: u32) -> Result<Tensor> {
    x.lshift(r as i64)?.bitwise_or(&x.rshift((32 - r) as i64)?)
}

/// Threefry-2x32 with 20 rounds on u32 tensors.
fn threefry(x0: &Tensor, x1: &Tensor, key: (u32, u32)) -> Result<(Tensor, Tensor)> {
    const R: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [key.0, key.1, key.0 ^ key.1 ^ 0x1BD1_1BDA];
    let mut x0 = x0.add(ks[0] as i64)?;
    let mut x1 = x1.add(ks[1] as i64)?;
    for i in 0..5 {
        for r in 0..4 {
            x0 = x0.add(&x1)?;
            x1 = rotl(&x1, R[(i % 2) * 4 + r])?.bitwise_xor(&x0)?;
        }
        x0 = x0.add(ks[(i + 1) % 3] as i64)?;
        x1 = x1.add(ks[(i + 2) % 3].wrapping_add(i as u32 + 1) as i64)?;
    }
    Ok((x0, x1))
}

/// `n` random u32 values on `device`, advancing that device's counter.
fn random_bits(n: usize, device: Device) -> Result<Tensor> {
    if n > u32::MAX as usize {
        bail!(Shape, "rand: {n} values is more than one draw can produce");
    }
    let seed = RNG.with(|r| r.borrow().seed);
    let existing = RNG.with(|r| {
        r.borrow()
            .counters
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, c)| c.clone())
    });
    let fresh = || -> Result<Tensor> {
        let c = crate::context::Context::new()
            .dev(device)
            .run(|| Tensor::from_slice(&[0u32], &[1]))?;
        RNG.with(|r| {
            let mut st = r.borrow_mut();
            st.counters.retain(|(d, _)| *d != device);
            st.counters.push((device, c.clone()));
            st.lengths.retain(|(d, ..)| *d != device);
        });
        Ok(c)
    };
    // Snapshot the counter, then advance it in place; both run now (and are captured by a
    // JIT), so draws never see a counter that a later draw already advanced.
    let (counter, base) = match existing.map(|c| (c.contiguous().realize(), c)) {
        Some((Ok(base), c)) => (c, base),
        Some((Err(e), _)) if e.kind != ErrorKind::DeviceLost => return Err(e),
        // The first draw on `device`, or its counter went with a lost device (initialised
        // again since): a new counter.
        _ => {
            let c = fresh()?;
            (c.clone(), c.contiguous().realize()?)
        }
    };
    // The draw's length comes from a buffer, not a constant in the kernel: one compiled
    // update serves draws of every length (a constant made a new kernel, a compiler run on
    // the CPU, for each new length: a training step's batch and dropout sizes).
    counter
        .assign(&counter.add(&length(n as u32, device)?)?)?
        .realize()?;
    let ctr = Tensor::iota(n, device).cast(DType::U32)?.add(&base)?;
    let hi = ctr.zeros_like();
    let (a, _) = threefry(&ctr, &hi, (seed as u32, (seed >> 32) as u32))?;
    Ok(a)
}

/// The realized `(1,)` u32 tensor holding `n` on `device` (made once per length and device).
fn length(n: u32, device: Device) -> Result<Tensor> {
    let known = RNG.with(|r| {
        let st = r.borrow();
        st.lengths
            .iter()
            .find(|(d, m, _)| *d == device && *m == n)
            .map(|(.., t)| t.clone())
    });
    if let Some(t) = known {
        return Ok(t);
    }
    let t = crate::context::Context::new()
        .dev(device)
        .run(|| Tensor::from_slice(&[n], &[1]))?;
    RNG.with(|r| r.borrow_mut().lengths.push((device, n, t.clone())));
    Ok(t)
}

impl Tensor {
    /// Seed this thread's generator (every device) and restart its counters.
    pub fn manual_seed(seed: u64) {
        let counters: Vec<Tensor> = RNG.with(|r| {
            let mut st = r.borrow_mut();
            st.seed = seed;
            st.counters.iter().map(|(_, c)| c.clone()).collect()
        });
        for c in counters {
            // Reset in place, so captured steps keep reading the same buffer.
            let _ = c.assign(&c.zeros_like()).and_then(|c| c.realize());
        }
    }
    pub(crate) fn rand_on(shape: &[usize], device: Device) -> Result<Tensor> {
        check_shape("rand", shape)?;
        let n: usize = shape.iter().product();
        let bits = random_bits(n, device)?;
        // 24 random mantissa bits -> [0, 1).
        let f = bits
            .rshift(8)?
            .cast(DType::F32)?
            .mul(1.0 / (1u32 << 24) as f64)?;
        f.reshape_u(shape)
    }
    /// Uniform in [0, 1), f32 (the default float dtype: f16 under `HALF=1`, drawn in f32 and
    /// rounded, as every random float below).
    pub fn rand(shape: &[usize]) -> Result<Tensor> {
        Tensor::rand_on(shape, Device::default())?.cast(default_float())
    }
    /// Uniform in [low, high), f32 (the default float dtype).
    pub fn uniform(shape: &[usize], low: f64, high: f64) -> Result<Tensor> {
        if low.partial_cmp(&high) != Some(std::cmp::Ordering::Less) {
            bail!(Shape, "uniform: low {low} must be below high {high}");
        }
        Tensor::rand_on(shape, Device::default())?
            .mul(high - low)?
            .add(low)?
            .cast(default_float())
    }
    /// Standard normal in f32 (Box-Muller).
    fn randn_f32(shape: &[usize]) -> Result<Tensor> {
        let u1 = Tensor::rand_on(shape, Device::default())?;
        let u2 = Tensor::rand_on(shape, Device::default())?;
        let r = u1.neg()?.add(1.0)?.log()?.mul(-2.0)?.sqrt()?;
        r.mul(&u2.mul(2.0 * std::f64::consts::PI)?.cos()?)
    }
    /// Standard normal, f32 (the default float dtype; Box-Muller).
    pub fn randn(shape: &[usize]) -> Result<Tensor> {
        Tensor::randn_f32(shape)?.cast(default_float())
    }
    /// Integers uniform in [low, high), i32.
    pub fn randint(shape: &[usize], low: i64, high: i64) -> Result<Tensor> {
        if low >= high || high - low > i32::MAX as i64 {
            bail!(Shape, "randint: invalid range [{low}, {high})");
        }
        let f = Tensor::rand_on(shape, Device::default())?.mul((high - low) as f64)?;
        f.cast(DType::I32)?.add(low)
    }
    /// Uniform in [0, 1) with this tensor's shape and float dtype (the default float for non-floats), on its
    /// device.
    pub fn rand_like(&self) -> Result<Tensor> {
        let dt = if self.dtype().is_float() {
            self.dtype()
        } else {
            default_float()
        };
        self.placed_like(Tensor::rand_on(&self.shape(), self.device())?)?
            .cast(dt)
    }
    /// Standard normal with this tensor's shape and float dtype, on its device.
    pub fn randn_like(&self) -> Result<Tensor> {
        let dt = if self.dtype().is_float() {
            self.dtype()
        } else {
            default_float()
        };
        let x = crate::context::Context::new()
            .dev(self.device())
            .run(|| Tensor::randn_f32(&self.shape()))?;
        self.placed_like(x)?.cast(dt)
    }
    /// Normal with mean `mean` and standard deviation `std`, f32 (the default float dtype).
    pub fn normal(shape: &[usize], mean: f64, std: f64) -> Result<Tensor> {
        if !(std >= 0.0 && std.is_finite() && mean.is_finite()) {
            bail!(
                Shape,
                "normal: mean {mean} and std {std} must be finite, std >= 0"
            );
        }
        Tensor::randn_f32(shape)?
            .mul(std)?
            .add(mean)?
            .cast(default_float())
    }
}

// Native only: reading a tensor back is asynchronous in the browser.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::realize::record_kernels;

    #[test]
    fn draws_of_any_length_advance_the_counter_with_the_same_kernels() {
        crate::context::Context::new()
            .dev(Device::Interp)
            .run(|| -> Result<()> {
                Tensor::manual_seed(1);
                // The counter's kernels: one invocation each (the draws' own are longer).
                let counter_kernels = |n: usize| -> Result<Vec<_>> {
                    record_kernels(true);
                    Tensor::rand(&[n])?.realize()?;
                    let ks = record_kernels(false);
                    Ok(ks.into_iter().filter(|k| k.global_size == 1).collect())
                };
                let five = counter_kernels(5)?;
                let seven = counter_kernels(7)?;
                assert!(!five.is_empty());
                assert_eq!(five, seven);
                // And the counter advanced by both lengths.
                let c = RNG.with(|r| r.borrow().counters[0].1.clone());
                assert_eq!(c.to_vec::<u32>()?, vec![12]);
                Ok(())
            })
            .unwrap();
    }
}
