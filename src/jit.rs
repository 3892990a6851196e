//! TinyJit: capture a step once, then replay its recorded launches. Call 1 runs the function;
//! call 2 runs it while every kernel launch (program, buffers) is recorded; from call 3 the
//! function is not run at all: the inputs' buffers are swapped into the recorded launches and
//! the list is replayed (on the CPU: a flat list of function calls). Intermediates are
//! memory-planned into shared buffers (`memory.rs`). `JIT=0` turns it off.

use crate::context::debug;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::realize::{capturing, end_capture, run_launch, start_capture};
use crate::runtime::{Buffer, Device, Graph, Launch};
use crate::tensor::Tensor;
use std::collections::HashSet;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
struct Spec {
    shape: Vec<usize>,
    dtype: DType,
    /// One per shard (one for a tensor on one device).
    devices: Vec<Device>,
    axis: Option<usize>,
}

struct Captured {
    launches: Vec<Launch>,
    /// For every input buffer (each shard of each input tensor, in order): the (launch,
    /// argument) positions where it is used.
    input_slots: Vec<Vec<(usize, usize)>>,
    inputs: Vec<Spec>,
    /// Every output's buffers (one per shard).
    outputs: Vec<(Vec<Arc<Buffer>>, Spec)>,
    plan: crate::memory::PlanStats,
    graph: Option<GraphReplay>,
}

/// The step as a backend graph (one submit on WebGPU). The graph binds private copies of the
/// inputs, so a replay copies the caller's inputs in first (and back out, for inputs the step
/// writes) instead of rebinding.
struct GraphReplay {
    graph: Box<dyn Graph>,
    /// Per input: the private buffer the graph reads, if the step uses that input.
    private: Vec<Option<Arc<Buffer>>>,
    written: Vec<bool>,
    counts: Vec<(u64, u64)>,
}

/// Build a backend graph for a captured step when every launch is on one device whose backend
/// supports graphs. A step on several devices (a sharded one) is replayed launch by launch, in
/// the order it was captured: a copy between devices waits for its source's device and lands
/// before the destination's later launches, as when it was captured.
fn build_graph(
    launches: &[Launch],
    inputs: &[Arc<Buffer>],
    input_slots: &[Vec<(usize, usize)>],
) -> Result<Option<GraphReplay>> {
    let dev = match launches.first() {
        Some(Launch::Kernel { dev, .. }) => *dev,
        Some(Launch::Copy { src, .. }) => src.device,
        None => return Ok(None),
    };
    let one_device = launches.iter().all(|l| match l {
        Launch::Kernel { dev: d, .. } => *d == dev,
        Launch::Copy { src, dst } => src.device == dev && dst.device == dev,
    }) && inputs.iter().all(|b| b.device == dev);
    if !one_device {
        return Ok(None);
    }
    let be = dev.backend();
    let mut launches = launches.to_vec();
    let mut private = vec![];
    let mut written = vec![];
    for (ib, slots) in inputs.iter().zip(input_slots) {
        if slots.is_empty() {
            private.push(None);
            written.push(false);
            continue;
        }
        let p = Arc::new(be.alloc(ib.size)?);
        let mut w = false;
        for &(li, ai) in slots {
            w |= match &launches[li] {
                Launch::Kernel { .. } => ai == 0,
                Launch::Copy { .. } => ai == 1,
            };
            *launches[li].buffers_mut()[ai] = p.clone();
        }
        private.push(Some(p));
        written.push(w);
    }
    // Counter updates per replayed kernel: (ops, bytes).
    let counts = launches
        .iter()
        .filter_map(|l| match l {
            Launch::Kernel { prog, bufs, .. } => {
                Some((prog.ops, bufs.iter().map(|b| b.size as u64).sum()))
            }
            Launch::Copy { .. } => None,
        })
        .collect();
    Ok(be.graph(&launches)?.map(|graph| GraphReplay {
        graph,
        private,
        written,
        counts,
    }))
}

/// A function captured once and replayed afterwards (see the module docs).
pub struct TinyJit<F> {
    f: F,
    calls: usize,
    captured: Option<Captured>,
}

fn enabled() -> bool {
    std::env::var("JIT")
        .map(|v| v.trim() != "0")
        .unwrap_or(true)
}

fn spec(t: &Tensor) -> Spec {
    Spec {
        shape: t.shape(),
        dtype: t.dtype(),
        devices: t.devices(),
        axis: t.shard_axis(),
    }
}

/// The buffers of a realized tensor, one per shard.
fn buffers(t: &Tensor) -> Option<Vec<Arc<Buffer>>> {
    t.shards().iter().map(|s| s.node().buffer()).collect()
}

impl<F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>> TinyJit<F> {
    pub fn new(f: F) -> Self {
        TinyJit {
            f,
            calls: 0,
            captured: None,
        }
    }

    /// Forget the capture: the next call runs and the one after captures again.
    pub fn reset(&mut self) {
        self.calls = 0;
        self.captured = None;
    }

    /// Kernels and copies replayed per call (0 before capture).
    pub fn launches(&self) -> usize {
        self.captured.as_ref().map_or(0, |c| c.launches.len())
    }

    /// Bytes of intermediate buffers a replay uses, before and after memory planning.
    pub fn planned_bytes(&self) -> Option<(usize, usize)> {
        self.captured
            .as_ref()
            .map(|c| (c.plan.bytes_before, c.plan.bytes_after))
    }

    pub fn call(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        if capturing() {
            // The same error start_capture gives, raised before anything runs.
            start_capture()?;
        }
        let inputs: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        if !inputs.is_empty() {
            Tensor::realize_all(&inputs.iter().collect::<Vec<_>>())?;
        }
        let mut bufs: Vec<Arc<Buffer>> = vec![];
        for t in &inputs {
            bufs.extend(buffers(t).ok_or_else(|| {
                crate::Error::new(crate::ErrorKind::Jit, "TinyJit: input has no buffer")
            })?);
        }
        for i in 0..bufs.len() {
            for j in 0..i {
                if Arc::ptr_eq(&bufs[i], &bufs[j]) {
                    bail!(Jit, "TinyJit: inputs {j} and {i} are the same buffer (duplicate inputs are not allowed)");
                }
            }
        }
        if !enabled() {
            return self.run(&inputs);
        }
        if let Some(c) = &self.captured {
            return self.replay(c, &inputs, &bufs);
        }
        self.calls += 1;
        if self.calls == 1 {
            return self.run(&inputs);
        }
        // Capture.
        start_capture()?;
        let out = self.run(&inputs);
        let rec = end_capture();
        let out = out?;
        if rec.launches.is_empty() {
            self.calls = 0;
            bail!(
                Jit,
                "TinyJit: the captured function launched no kernel (did it realize its outputs?)"
            );
        }
        let mut launches = rec.launches;
        let outputs: Vec<(Vec<Arc<Buffer>>, Spec)> = out
            .iter()
            .map(|t| buffers(t).map(|b| (b, spec(t))))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                crate::Error::new(crate::ErrorKind::Jit, "TinyJit: an output was not realized")
            })?;
        // Buffers that must keep their identity: inputs, outputs, and every buffer that a live
        // tensor's gradient holds.
        let mut hold: HashSet<usize> = bufs
            .iter()
            .chain(outputs.iter().flat_map(|(b, _)| b))
            .map(|b| Arc::as_ptr(b) as usize)
            .collect();
        for t in crate::tensor::grad_tensors() {
            for s in t
                .shards()
                .into_iter()
                .chain(t.grad().map(|g| g.shards()).unwrap_or_default())
            {
                if let Some(b) = s.node().buffer() {
                    hold.insert(Arc::as_ptr(&b) as usize);
                }
            }
        }
        let plan = crate::memory::plan(&mut launches, &rec.allocated, &hold)?;
        let input_slots: Vec<Vec<(usize, usize)>> = bufs
            .iter()
            .map(|ib| {
                let mut v = vec![];
                for (li, l) in launches.iter().enumerate() {
                    for (ai, b) in l.buffers().into_iter().enumerate() {
                        if Arc::ptr_eq(b, ib) {
                            v.push((li, ai));
                        }
                    }
                }
                v
            })
            .collect();
        if debug() >= 1 {
            crate::context::log(&format!(
                "TinyJit: captured {} launches; intermediates {} -> {} bytes after memory planning",
                launches.len(),
                plan.bytes_before,
                plan.bytes_after
            ));
        }
        let graph = build_graph(&launches, &bufs, &input_slots)?;
        if debug() >= 1 && graph.is_some() {
            crate::context::log(&format!(
                "TinyJit: replaying as one {} graph",
                launches[0].buffers()[0].device
            ));
        }
        self.captured = Some(Captured {
            graph,
            launches,
            input_slots,
            inputs: inputs.iter().map(spec).collect(),
            outputs,
            plan,
        });
        Ok(out)
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let out = (self.f)(inputs)?;
        Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
        Ok(out)
    }

    fn replay(&self, c: &Captured, inputs: &[Tensor], bufs: &[Arc<Buffer>]) -> Result<Vec<Tensor>> {
        if inputs.len() != c.inputs.len() {
            bail!(
                Jit,
                "TinyJit: called with {} inputs, captured with {}",
                inputs.len(),
                c.inputs.len()
            );
        }
        for (i, (t, s)) in inputs.iter().zip(&c.inputs).enumerate() {
            let now = spec(t);
            if now != *s {
                let on = |s: &Spec| match s.axis {
                    Some(a) if s.devices.len() > 1 => {
                        format!("{:?} split along axis {a}", s.devices)
                    }
                    _ => format!("{:?}", s.devices),
                };
                bail!(
                    Jit,
                    "TinyJit: input {i} is {:?} {} on {}, but the capture had {:?} {} on {} (call reset() to capture again)",
                    now.shape,
                    now.dtype,
                    on(&now),
                    s.shape,
                    s.dtype,
                    on(s)
                );
            }
        }
        match &c.graph {
            // DEBUG>=2 times each kernel, so it replays launch by launch.
            Some(g) if debug() < 2 => {
                let pairs = |copy_in: bool| -> Vec<(&Buffer, &Buffer)> {
                    bufs.iter()
                        .zip(&g.private)
                        .zip(&g.written)
                        .filter_map(|((b, p), &w)| {
                            let p = p.as_ref()?;
                            match copy_in {
                                true => Some((b.as_ref(), p.as_ref())),
                                false if w => Some((p.as_ref(), b.as_ref())),
                                false => None,
                            }
                        })
                        .collect()
                };
                g.graph.run(&pairs(true), &pairs(false))?;
                for &(ops, bytes) in &g.counts {
                    crate::context::GlobalCounters::record(ops, bytes, 0);
                }
                return Ok(self.outputs(c));
            }
            _ => {}
        }
        let mut launches = c.launches.clone();
        for (slots, b) in c.input_slots.iter().zip(bufs) {
            for &(li, ai) in slots {
                *launches[li].buffers_mut()[ai] = b.clone();
            }
        }
        for l in &launches {
            run_launch(l)?;
        }
        Ok(self.outputs(c))
    }

    fn outputs(&self, c: &Captured) -> Vec<Tensor> {
        c.outputs
            .iter()
            .map(|(b, s)| Tensor::from_buffers(b, s.dtype, &s.shape, s.axis))
            .collect()
    }
}

// Native only: they read values back synchronously, which wasm32 cannot (wasm-pack test builds
// the library's unit tests too).
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::context::Context;

    fn input(v: f32) -> Tensor {
        Tensor::from_vec(vec![v; 8], &[8])
            .expect("tensor")
            .realize()
            .expect("realize")
    }

    #[test]
    fn capture_records_where_each_input_is_bound_and_replays_with_new_ones() {
        Context::new().dev(Device::Interp).run(|| {
            let mut jit = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].mul(&x[1])?.add(1.0)?]));
            for (i, v) in [1.0f32, 2.0, 3.0, 4.0].into_iter().enumerate() {
                let (a, b) = (input(v), input(10.0));
                let out = jit.call(&[&a, &b]).expect("call")[0].clone();
                assert_eq!(out.to_vec::<f32>().expect("read"), vec![v * 10.0 + 1.0; 8]);
                let c = jit.captured.as_ref();
                assert_eq!(c.is_some(), i >= 1, "captured on call 2");
            }
            let c = jit.captured.as_ref().expect("captured");
            assert_eq!(c.launches.len(), 1, "one fused kernel");
            // Both inputs are read by launch 0, as arguments 1 and 2 (0 is the output).
            let mut slots = c.input_slots.clone();
            slots.iter_mut().for_each(|s| s.sort());
            assert_eq!(slots, vec![vec![(0, 1)], vec![(0, 2)]]);
            assert_eq!(c.outputs.len(), 1);
            assert!(Arc::ptr_eq(&c.outputs[0].0[0], c.launches[0].buffers()[0]));
            assert_eq!(c.inputs[0].shape, vec![8]);
        })
    }

    #[test]
    fn a_replay_with_another_shape_is_refused() {
        Context::new().dev(Device::Interp).run(|| {
            let mut jit = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].add(1.0)?]));
            for _ in 0..2 {
                jit.call(&[&input(1.0)]).expect("call");
            }
            let other = Tensor::from_vec(vec![1.0f32; 4], &[4]).expect("tensor");
            let e = jit
                .call(&[&other])
                .expect_err("a different shape is an error");
            assert!(e.msg.contains("capture had"), "{}", e.msg);
        })
    }
}
