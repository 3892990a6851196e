//! TinyJit: capture a step once, then replay its recorded launches. Call 1 runs the function;
//! call 2 runs it while every kernel launch (program, buffers) is recorded; from call 3 the
//! function is not run at all: the inputs' buffers are swapped into the recorded launches and
//! the list is replayed (on the CPU: a flat list of function calls). Intermediates are
//! memory-planned into shared buffers (`memory.rs`). `JIT=0` turns it off.
//!
//! `JIT_VERIFY=n` (or `Context::jit_verify`) checks every `n`th replay: the buffers the step
//! writes are saved, the replay runs, they are put back, and the function runs eagerly on copies
//! of the inputs while its launches are recorded. A launch that runs another kernel or binds
//! another outside buffer than the capture did, or an output or updated buffer whose bytes
//! differ, is an error naming it. A replay cannot see what changed outside its buffers (a host
//! number baked into a kernel, a tensor the function reads that was replaced): this finds them.

use crate::context::debug;
use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::realize::read_now;
use crate::realize::{capturing, end_capture, run_launch, start_capture};
use crate::runtime::{Buffer, Device, Graph, Launch};
use crate::tensor::Tensor;
use crate::uop::UOp;
use std::collections::{HashMap, HashSet};
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
    /// Buffers the launches bind that existed before the capture (parameters, optimizer state,
    /// the random counter, tensors the function read from outside): a replay binds exactly these.
    external: HashSet<usize>,
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

/// One launch of a captured step, as `TinyJit::kernels` lists it.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    /// The kernel's name, or "copy" for a copy between buffers.
    pub name: String,
    /// Invocations launched.
    pub global_size: usize,
    /// Invocations per workgroup (1: a flat kernel).
    pub local_size: usize,
    /// The rendered source (WGSL on WebGPU; empty for the interpreter and for copies).
    pub source: String,
    /// Bytes of the buffers it binds (a copy: the bytes copied).
    pub bytes: usize,
    /// Scalar ops per launch.
    pub ops: u64,
}

/// How `TinyJit::replay_profiled` timed each launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// The device's timestamp queries around each kernel.
    Device,
    /// The host clock from each launch until a readback of its output completed.
    Host,
}

/// The per-launch nanoseconds of a profiled replay, with how they were timed.
pub type ProfileFuture = crate::runtime::BoxFuture<'static, Result<(Timer, Vec<u64>)>>;

/// The captured launches with the caller's input buffers bound in place of the captured ones.
fn bound(c: &Captured, bufs: &[Arc<Buffer>]) -> Vec<Launch> {
    let mut launches = c.launches.clone();
    for (slots, b) in c.input_slots.iter().zip(bufs) {
        for &(li, ai) in slots {
            if let Some(slot) = launches
                .get_mut(li)
                .and_then(|l| l.buffers_mut().into_iter().nth(ai))
            {
                *slot = b.clone();
            }
        }
    }
    launches
}

/// Counter updates for launches queued without `run_launch`.
fn record_counts(launches: &[Launch]) {
    for l in launches {
        if let Launch::Kernel { prog, bufs, .. } = l {
            let bytes = bufs.iter().map(|b| b.size as u64).sum();
            crate::context::GlobalCounters::record(prog.ops, bytes, 0);
        }
    }
}

/// The inputs of a call, realized (in one schedule).
fn realized(inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let inputs: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    if !inputs.is_empty() {
        Tensor::realize_all(&inputs.iter().collect::<Vec<_>>())?;
    }
    Ok(inputs)
}

/// The realized inputs' buffers (no two the same).
fn input_buffers(inputs: &[Tensor]) -> Result<Vec<Arc<Buffer>>> {
    let mut bufs: Vec<Arc<Buffer>> = vec![];
    for (i, t) in inputs.iter().enumerate() {
        bufs.extend(buffers(t).ok_or_else(|| {
            let why = if t.numel() == 0 {
                format!(
                    "is empty (shape {:?}): it has no buffer to replay with; make it a constant of the function",
                    t.shape()
                )
            } else {
                "has no buffer".to_string()
            };
            crate::Error::new(crate::ErrorKind::Jit, format!("TinyJit: input {i} {why}"))
        })?);
    }
    for i in 0..bufs.len() {
        for j in 0..i {
            if Arc::ptr_eq(&bufs[i], &bufs[j]) {
                bail!(Jit, "TinyJit: inputs {j} and {i} are the same buffer (duplicate inputs are not allowed)");
            }
        }
    }
    Ok(bufs)
}

fn key(b: &Arc<Buffer>) -> usize {
    Arc::as_ptr(b) as usize
}

/// What a launch argument binds, to compare an eager run's launches with the capture's.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    Input(usize),
    /// Allocated by the step itself (an intermediate, an output, a gradient).
    Internal,
    /// A buffer from before the step, by identity.
    External(usize),
}

fn role_name(r: Role) -> String {
    match r {
        Role::Input(i) => format!("input {i}"),
        Role::Internal => "a buffer the step allocates".into(),
        Role::External(_) => "a tensor from outside the function".into(),
    }
}

/// The argument a launch writes (a kernel's output is argument 0, a copy's destination 1).
fn written_arg(l: &Launch) -> usize {
    match l {
        Launch::Kernel { .. } => 0,
        Launch::Copy { .. } => 1,
    }
}

fn launch_name(l: &Launch) -> String {
    match l {
        Launch::Kernel { prog, .. } => format!("kernel {}", prog.name),
        Launch::Copy { src, dst } => format!("a copy {} -> {}", src.device, dst.device),
    }
}

/// Where two buffers' bytes first differ (as 32-bit elements when the size allows), or `None`.
fn first_difference(replay: &[u8], eager: &[u8]) -> Option<String> {
    if replay.len() != eager.len() {
        return Some(format!("{} bytes against {}", replay.len(), eager.len()));
    }
    let w = if replay.len() % 4 == 0 { 4 } else { 1 };
    let pairs = || replay.chunks(w).zip(eager.chunks(w));
    let i = pairs().position(|(a, b)| a != b)?;
    let differ = pairs().filter(|(a, b)| a != b).count();
    let show = |c: &[u8]| match c {
        [a, b, c, d] => {
            let bits = u32::from_le_bytes([*a, *b, *c, *d]);
            format!("{} (bits 0x{bits:08x})", f32::from_bits(bits))
        }
        _ => format!("byte {}", c[0]),
    };
    Some(format!(
        "{differ} of {} elements differ, the first at element {i}: replay {}, eager {}",
        replay.len() / w,
        show(&replay[i * w..][..w]),
        show(&eager[i * w..][..w])
    ))
}

/// A function captured once and replayed afterwards (see the module docs).
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::{Tensor, TinyJit};
/// let mut f = TinyJit::new(|x: &[Tensor]| Ok(vec![x[0].mul(2.0)?.add(1.0)?.realize()?]));
/// for i in 0..4 {
///     let x = Tensor::from_slice(&[i as f32, 10.0], &[2])?;
///     let y = f.call(&[&x])?.remove(0);
///     assert_eq!(y.to_vec::<f32>()?, vec![2.0 * i as f32 + 1.0, 21.0]);
/// }
/// assert_eq!(f.launches(), 1); // calls 3 and 4 replayed the one captured kernel
/// assert!(f.call(&[&Tensor::from_slice(&[0.0f32; 3], &[3])?]).is_err()); // not the captured shape
/// # Ok::<(), wgrad::Error>(())
/// ```
pub struct TinyJit<F> {
    f: F,
    calls: usize,
    captured: Option<Captured>,
    replays: u64,
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
    /// A TinyJit of `f`, which takes the inputs and returns realized outputs.
    pub fn new(f: F) -> Self {
        TinyJit {
            f,
            calls: 0,
            captured: None,
            replays: 0,
        }
    }

    /// Forget the capture: the next call runs and the one after captures again.
    pub fn reset(&mut self) {
        self.calls = 0;
        self.captured = None;
        self.replays = 0;
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

    /// The captured step's launches in order (empty before capture), for inspectors.
    pub fn kernels(&self) -> Vec<KernelInfo> {
        let Some(c) = &self.captured else {
            return vec![];
        };
        c.launches
            .iter()
            .map(|l| match l {
                Launch::Kernel { prog, bufs, .. } => KernelInfo {
                    name: prog.name.clone(),
                    global_size: prog.global_size,
                    local_size: prog.local_size,
                    source: prog.source.clone(),
                    bytes: bufs.iter().map(|b| b.size).sum(),
                    ops: prog.ops,
                },
                Launch::Copy { src, dst } => KernelInfo {
                    name: "copy".into(),
                    global_size: 0,
                    local_size: 0,
                    source: String::new(),
                    bytes: src.size.min(dst.size),
                    ops: 0,
                },
            })
            .collect()
    }

    /// Replay the captured step once, launch by launch, with every launch timed, and return its
    /// outputs and a future of how each launch (in `kernels()` order) was timed. On a device with
    /// timestamp queries the step is queued at once and the future reads the timestamps back;
    /// otherwise the future runs the launches one at a time, each timed on the host clock from
    /// its launch until a readback of its output completes (an upper bound: it includes the
    /// submit and the readback). Await the future before the next call.
    pub fn replay_profiled(&self, inputs: &[&Tensor]) -> Result<(Vec<Tensor>, ProfileFuture)> {
        let Some(c) = &self.captured else {
            bail!(
                Jit,
                "TinyJit: nothing captured yet (call the function twice first)"
            );
        };
        // Launches an async call held back run first (the replay launches directly).
        crate::realize::flush_deferred()?;
        let inputs = realized(inputs)?;
        let bufs = input_buffers(&inputs)?;
        self.check_inputs(c, &inputs)?;
        let launches = bound(c, &bufs);
        let dev = match launches.first() {
            Some(Launch::Kernel { dev, .. }) => Some(*dev),
            _ => None,
        };
        let one_device = launches.iter().all(|l| match l {
            Launch::Kernel { dev: d, .. } => Some(*d) == dev,
            Launch::Copy { src, dst } => Some(src.device) == dev && Some(dst.device) == dev,
        });
        if let (Some(dev), true) = (dev, one_device) {
            if let Some(f) = dev.backend().launch_profiled(&launches)? {
                record_counts(&launches);
                let fut: ProfileFuture = Box::pin(async move { Ok((Timer::Device, f.await?)) });
                return Ok((self.outputs(c), fut));
            }
        }
        let fut: ProfileFuture = Box::pin(async move {
            let mut ns = Vec::with_capacity(launches.len());
            for l in &launches {
                let t0 = crate::runtime::host_clock_ns();
                run_launch(l)?;
                // What the launch writes: argument 0 of a kernel, the destination of a copy.
                let out = match l {
                    Launch::Copy { dst, .. } => Some(dst),
                    Launch::Kernel { bufs, .. } => bufs.first(),
                };
                if let Some(b) = out {
                    b.device.backend().copy_out(b).await?;
                }
                ns.push(crate::runtime::host_clock_ns().saturating_sub(t0).max(1));
            }
            Ok((Timer::Host, ns))
        });
        Ok((self.outputs(c), fut))
    }

    /// Call the function: the first call runs it, the second runs and captures its launches, later
    /// calls copy `inputs` into the captured input buffers and replay the launches without running
    /// `f`. A replay's outputs are the captured output buffers, which the next replay overwrites:
    /// read what you need before calling again. Errors when the inputs' shapes, dtypes or devices
    /// differ from the capture's, when an input appears twice, when `f` reads a value back while
    /// capturing, or when `f` fails.
    pub fn call(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        // Launches an async call held back run first (a replay launches directly).
        crate::realize::flush_deferred()?;
        if capturing() {
            // The same error start_capture gives, raised before anything runs.
            start_capture()?;
        }
        let inputs = realized(inputs)?;
        let bufs = input_buffers(&inputs)?;
        if !enabled() {
            return self.run(&inputs);
        }
        if self.captured.is_some() {
            self.replays += 1;
            let n = crate::context::jit_verify() as u64;
            if n > 0 && self.replays % n == 0 {
                return self.verified_replay(&inputs, &bufs);
            }
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
        let allocated: HashSet<usize> = rec.allocated.iter().map(key).collect();
        let external: HashSet<usize> = launches
            .iter()
            .flat_map(|l| l.buffers().into_iter().map(key))
            .filter(|k| !allocated.contains(k))
            .collect();
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
            external,
        });
        Ok(out)
    }

    /// `call`, for a caller that can wait: a call that runs the function without capturing (the
    /// first call, or every call while the JIT is disabled) holds its kernel launches back
    /// until all of them are compiled (`Tensor::realize_all_async`), so on WebGPU in a browser
    /// the step's pipelines compile at once on the browser's threads while the page waits,
    /// without blocking; other calls are `call`. Await it before calling again.
    pub async fn call_async(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        match self.run_deferred(inputs)? {
            Some(out) => {
                crate::realize::launch_deferred().await?;
                Ok(out)
            }
            None => self.call(inputs),
        }
    }

    /// The first half of `call_async` (the JS binding awaits the second without holding the
    /// TinyJit): when this call runs the function without capturing, run it with its launches
    /// held back (`realize::defer`) and return its outputs; otherwise do nothing.
    pub(crate) fn run_deferred(&mut self, inputs: &[&Tensor]) -> Result<Option<Vec<Tensor>>> {
        let runs = self.captured.is_none() && (!enabled() || self.calls == 0);
        if capturing() || !runs {
            return Ok(None);
        }
        crate::realize::flush_deferred()?;
        let inputs = realized(inputs)?;
        input_buffers(&inputs)?;
        if enabled() {
            self.calls += 1;
        }
        crate::realize::defer(|| self.run(&inputs)).map(Some)
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let out = (self.f)(inputs)?;
        Tensor::realize_all(&out.iter().collect::<Vec<_>>())?;
        Ok(out)
    }

    fn check_inputs(&self, c: &Captured, inputs: &[Tensor]) -> Result<()> {
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
        Ok(())
    }

    fn replay(&self, c: &Captured, inputs: &[Tensor], bufs: &[Arc<Buffer>]) -> Result<Vec<Tensor>> {
        self.check_inputs(c, inputs)?;
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
        for l in &bound(c, bufs) {
            run_launch(l)?;
        }
        Ok(self.outputs(c))
    }

    fn verified_replay(&mut self, inputs: &[Tensor], bufs: &[Arc<Buffer>]) -> Result<Vec<Tensor>> {
        let Some(c) = self.captured.take() else {
            bail!(Jit, "TinyJit: nothing captured to verify");
        };
        let r = self.verify_with(&c, inputs, bufs);
        self.captured = Some(c);
        r
    }

    /// Replay, put back what it wrote, run the function eagerly (recorded) on copies of the
    /// inputs, and compare launches, updated buffers and outputs. On success the replay's
    /// writes are kept; on an error the eager run's are.
    fn verify_with(
        &mut self,
        c: &Captured,
        inputs: &[Tensor],
        bufs: &[Arc<Buffer>],
    ) -> Result<Vec<Tensor>> {
        if bufs.len() != inputs.len() || c.outputs.iter().any(|o| o.0.len() != 1) {
            bail!(
                Jit,
                "JIT_VERIFY: a step over sharded tensors cannot be verified (yet); verify it on \
                 one device"
            );
        }
        // A browser reads WebGPU buffers back only after returning to the event loop.
        #[cfg(target_arch = "wasm32")]
        if c.launches
            .iter()
            .any(|l| l.buffers().iter().any(|b| b.device != Device::Interp))
        {
            bail!(
                Jit,
                "JIT_VERIFY: in the browser only steps on the cpu device can be verified \
                 (WebGPU reads back asynchronously); run them under withContext({{ DEVICE: \"cpu\" }})"
            );
        }
        let slot_input: HashMap<(usize, usize), usize> = c
            .input_slots
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.iter().map(move |&p| (p, i)))
            .collect();
        let captured_role = |li: usize, ai: usize, b: &Arc<Buffer>| match slot_input.get(&(li, ai))
        {
            Some(&i) => Role::Input(i),
            None if c.external.contains(&key(b)) => Role::External(key(b)),
            None => Role::Internal,
        };
        // What the step writes that outlives it (inputs and outside buffers), each once, named
        // by its first writer.
        let mut written: Vec<(Arc<Buffer>, Role, String)> = vec![];
        let mut seen = HashSet::new();
        for (li, l) in c.launches.iter().enumerate() {
            let ai = written_arg(l);
            let b = l.buffers()[ai];
            let (b, role) = match captured_role(li, ai, b) {
                Role::Input(i) => (bufs[i].clone(), Role::Input(i)),
                Role::Internal => continue,
                r => (b.clone(), r),
            };
            if seen.insert(key(&b)) {
                written.push((b, role, format!("launch {li} ({})", launch_name(l))));
            }
        }
        let read_all = |bs: &mut dyn Iterator<Item = &Arc<Buffer>>| -> Result<Vec<Vec<u8>>> {
            bs.map(|b| read_now(b)).collect()
        };
        let restore = |data: &[Vec<u8>]| -> Result<()> {
            for ((b, ..), d) in written.iter().zip(data) {
                b.device.backend().copy_in(b, d)?;
            }
            Ok(())
        };
        let before = read_all(&mut written.iter().map(|w| &w.0))?;
        let out = self.replay(c, inputs, bufs)?;
        let replayed = read_all(&mut written.iter().map(|w| &w.0))?;
        let replayed_out = read_all(&mut c.outputs.iter().map(|o| &o.0[0]))?;
        restore(&before)?;
        let copies: Vec<Tensor> = inputs
            .iter()
            .zip(bufs)
            .map(|(t, b)| {
                let nb = Arc::new(b.device.backend().alloc(b.size)?);
                nb.device.backend().copy_in(&nb, &read_now(b)?)?;
                let t2 = Tensor::from_node(UOp::from_buffer(nb, t.dtype(), t.shape()));
                t2.set_requires_grad(t.requires_grad());
                Ok(t2)
            })
            .collect::<Result<_>>()?;
        start_capture()?;
        let eager = self.run(&copies);
        let rec = end_capture();
        let eager = eager?;

        let copy_of: HashMap<usize, usize> = copies
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((key(&t.node().buffer()?), i)))
            .collect();
        let fresh: HashSet<usize> = rec.allocated.iter().map(key).collect();
        let eager_role = |b: &Arc<Buffer>| match copy_of.get(&key(b)) {
            Some(&i) => Role::Input(i),
            None if fresh.contains(&key(b)) => Role::Internal,
            None => Role::External(key(b)),
        };
        for (li, (lc, le)) in c.launches.iter().zip(&rec.launches).enumerate() {
            let same = match (lc, le) {
                (
                    Launch::Kernel {
                        prog: p, dev: d, ..
                    },
                    Launch::Kernel {
                        prog: q, dev: e, ..
                    },
                ) => p.same_kernel(q) && d == e,
                (Launch::Copy { .. }, Launch::Copy { .. }) => true,
                _ => false,
            };
            if !same {
                bail!(
                    Jit,
                    "JIT_VERIFY: launch {li}: the function now runs {} where the capture ran {} \
                     (a host value baked into the capture changed, such as a Rust or JS number; \
                     make it a tensor, or call reset() to capture again)",
                    launch_name(le),
                    launch_name(lc)
                );
            }
            for (ai, (bc, be)) in lc.buffers().into_iter().zip(le.buffers()).enumerate() {
                let (rc, re) = (captured_role(li, ai, bc), eager_role(be));
                if rc != re {
                    bail!(
                        Jit,
                        "JIT_VERIFY: launch {li} ({}), argument {ai}: the function now binds {} \
                         where the capture bound {} (a tensor the function reads from outside \
                         was replaced since the capture; pass it as an input, or update it in \
                         place with assign)",
                        launch_name(lc),
                        role_name(re),
                        role_name(rc)
                    );
                }
            }
        }
        if rec.launches.len() != c.launches.len() {
            bail!(
                Jit,
                "JIT_VERIFY: the function now makes {} launches where the capture made {} \
                 (call reset() to capture again)",
                rec.launches.len(),
                c.launches.len()
            );
        }
        for ((b, role, writer), r) in written.iter().zip(&replayed) {
            let eb = match role {
                Role::Input(i) => copies[*i].node().buffer().unwrap_or_else(|| b.clone()),
                _ => b.clone(),
            };
            if let Some(d) = first_difference(r, &read_now(&eb)?) {
                bail!(
                    Jit,
                    "JIT_VERIFY: {} written by {writer} differs between the replay and an eager run: {d}",
                    role_name(*role)
                );
            }
        }
        for (i, ((t, r), (_, s))) in eager.iter().zip(&replayed_out).zip(&c.outputs).enumerate() {
            let Some(b) = t.node().buffer() else {
                bail!(
                    Jit,
                    "JIT_VERIFY: output {i} of the eager run was not realized"
                );
            };
            let n = s.shape.iter().product::<usize>() * s.dtype.size();
            let e = read_now(&b)?;
            if let Some(d) = first_difference(&r[..n.min(r.len())], &e[..n.min(e.len())]) {
                bail!(
                    Jit,
                    "JIT_VERIFY: output {i} differs between the replay and an eager run: {d}"
                );
            }
        }
        if eager.len() != c.outputs.len() {
            bail!(
                Jit,
                "JIT_VERIFY: the function now returns {} tensors where the capture returned {}",
                eager.len(),
                c.outputs.len()
            );
        }
        restore(&replayed)?;
        Ok(out)
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
