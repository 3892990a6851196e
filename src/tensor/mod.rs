//! `Tensor`: the user-facing lazy handle. Every op checks its arguments (returning an `Err` that
//! names the op, shapes and dtypes), then adds nodes to the lazy graph of `ops.rs`; nothing runs
//! until `realize()`, `to_vec()` or `item()` (or their async forms). Handles are cheap clones
//! sharing one identity, so an optimizer can update the parameters a model holds.

use crate::device::Device;
use crate::dtype::{read_f64, DType, Element};
use crate::error::{bail, Error, ErrorKind, Result};
use crate::ops::{BinaryOp, Op, UnaryOp};
use crate::schedule::ScheduleItem;
pub use crate::shape::MAX_NUMEL;
use crate::uop::UOp;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub mod conv;
mod einsum;
mod format;
pub mod functional;
pub mod grad;
mod indexing;
pub use indexing::Index;
mod math;
mod movement;
mod multi;
mod operators;
mod random;
mod reduce;
mod scan;
mod sort;
mod table;

use multi::Lazy;

pub(crate) struct Inner {
    lazy: Mutex<Arc<Lazy>>,
    requires_grad: AtomicBool,
    grad: Mutex<Option<Tensor>>,
}

/// A lazy n-dimensional array on a device, or split over several (`shard`).
///
/// Ops build a graph and return at once; nothing runs until a value is needed (`realize`,
/// `to_vec`, `item`), when the scheduler fuses the graph into a few kernels for the tensor's
/// device. Every op that can fail on its arguments returns `Err` naming the op and the shapes
/// or dtypes involved. Gradients are lazy graphs too: `backward` fills `grad` of every tensor
/// that requires one.
///
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::Tensor;
/// let w = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3])?;
/// w.set_requires_grad(true);
/// let x = Tensor::from_slice(&[2.0f32, 2.0, 2.0], &[3])?;
/// let loss = w.mul(&x)?.square()?.sum((), false)?; // sum((w x)^2) = 4 + 16 + 36
/// assert_eq!(loss.item::<f32>()?, 56.0);
/// loss.backward()?;
/// let g = w.grad().expect("w requires grad");
/// assert_eq!(g.to_vec::<f32>()?, vec![8.0, -16.0, 24.0]); // 2 (w x) x
/// # Ok::<(), wgrad::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<Inner>);

static LIVE_TENSORS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Tensors alive in the process now (distinct handles: clones share one), to check that loops
/// do not leak them; `runtime::live_buffers()` counts their memory.
pub fn live_tensors() -> u64 {
    LIVE_TENSORS.load(Ordering::Relaxed).max(0) as u64
}

impl Drop for Inner {
    fn drop(&mut self) {
        LIVE_TENSORS.fetch_sub(1, Ordering::Relaxed);
    }
}

static GRAD_TENSORS: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Live tensors that require gradients.
pub(crate) fn grad_tensors() -> Vec<Tensor> {
    let mut reg = lock(&GRAD_TENSORS);
    reg.retain(|w| w.strong_count() > 0);
    reg.iter()
        .filter_map(|w| w.upgrade())
        .map(Tensor)
        .filter(|t| t.requires_grad())
        .collect()
}

/// Every tensor this thread created (weakly), so that realizing an assign can find lazy
/// tensors that still read the old contents of the buffer it overwrites.
#[derive(Default)]
struct Live {
    tensors: Vec<Weak<Inner>>,
    prune_at: usize,
}

thread_local! {
    static LIVE: std::cell::RefCell<Live> = std::cell::RefCell::new(Live::default());
}

/// The graphs of live, unrealized tensors (other than `skip`) that read one of `bufs` through a
/// realized node, i.e. would see the value an assign is about to overwrite. Realizing them in
/// the assign's schedule lets them read the old value (the scheduler orders reads before the
/// in-place write), as their author meant: `opt.step()` followed by `loss.item()` gives the
/// loss of the weights the step started from.
pub(crate) fn readers_of(bufs: &HashSet<usize>, skip: &HashSet<u64>) -> Vec<Arc<UOp>> {
    let live: Vec<Tensor> = LIVE.with(|l| {
        let mut l = l.borrow_mut();
        l.tensors.retain(|w| w.strong_count() > 0);
        l.tensors
            .iter()
            .filter_map(|w| w.upgrade())
            .map(Tensor)
            .collect()
    });
    let mut memo: HashMap<u64, bool> = HashMap::new();
    fn reads(n: &Arc<UOp>, bufs: &HashSet<usize>, memo: &mut HashMap<u64, bool>) -> bool {
        if let Some(&v) = memo.get(&n.id) {
            return v;
        }
        let v = match n.buffer() {
            Some(b) => bufs.contains(&(Arc::as_ptr(&b) as usize)),
            // A pending assign is the new value: reading through it is meant.
            None if n.op == Op::Assign => false,
            None => n.src().iter().any(|s| reads(s, bufs, memo)),
        };
        memo.insert(n.id, v);
        v
    }
    let mut out: Vec<Arc<UOp>> = vec![];
    for t in live {
        for n in t.lazy().shards.iter() {
            if n.is_realized() || n.op == Op::Assign || skip.contains(&n.id) {
                continue;
            }
            if reads(n, bufs, &mut memo) && !out.iter().any(|o| o.id == n.id) {
                out.push(n.clone());
            }
        }
    }
    out
}

/// Node ids of the live tensors that require gradients (every shard's).
pub(crate) fn grad_leaf_ids() -> HashSet<u64> {
    grad_tensors()
        .iter()
        .flat_map(|t| t.lazy().shards.iter().map(|n| n.id).collect::<Vec<_>>())
        .collect()
}

/// A right-hand operand: a tensor or a scalar (which takes the tensor's dtype).
#[derive(Clone)]
pub enum Operand {
    /// A tensor (broadcast against the other operand).
    Tensor(Tensor),
    /// A float scalar: takes the tensor's dtype, or the default float (f32) against an integer
    /// tensor.
    Float(f64),
    /// An integer scalar: takes the tensor's dtype (i32 against a bool tensor).
    Int(i64),
}

impl From<&Tensor> for Operand {
    fn from(t: &Tensor) -> Self {
        Operand::Tensor(t.clone())
    }
}
impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Self {
        Operand::Tensor(t)
    }
}
impl From<f64> for Operand {
    fn from(v: f64) -> Self {
        Operand::Float(v)
    }
}
impl From<f32> for Operand {
    fn from(v: f32) -> Self {
        Operand::Float(v as f64)
    }
}
impl From<i32> for Operand {
    fn from(v: i32) -> Self {
        Operand::Int(v as i64)
    }
}
impl From<i64> for Operand {
    fn from(v: i64) -> Self {
        Operand::Int(v)
    }
}
impl From<usize> for Operand {
    fn from(v: usize) -> Self {
        Operand::Int(v as i64)
    }
}
impl From<bool> for Operand {
    fn from(v: bool) -> Self {
        Operand::Int(v as i64)
    }
}

/// Which axes a reduction runs over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axes {
    /// Every axis.
    All,
    /// These axes (negative counts from the end).
    Some(Vec<isize>),
}

impl From<()> for Axes {
    fn from(_: ()) -> Self {
        Axes::All
    }
}
impl From<isize> for Axes {
    fn from(a: isize) -> Self {
        Axes::Some(vec![a])
    }
}
impl From<i32> for Axes {
    fn from(a: i32) -> Self {
        Axes::Some(vec![a as isize])
    }
}
impl From<usize> for Axes {
    fn from(a: usize) -> Self {
        Axes::Some(vec![a as isize])
    }
}
impl From<Vec<isize>> for Axes {
    fn from(a: Vec<isize>) -> Self {
        Axes::Some(a)
    }
}
impl From<&[isize]> for Axes {
    fn from(a: &[isize]) -> Self {
        Axes::Some(a.to_vec())
    }
}
impl<const N: usize> From<[isize; N]> for Axes {
    fn from(a: [isize; N]) -> Self {
        Axes::Some(a.to_vec())
    }
}
impl From<Option<isize>> for Axes {
    fn from(a: Option<isize>) -> Self {
        a.map_or(Axes::All, |a| Axes::Some(vec![a]))
    }
}

/// Reserve `bytes` of host memory in `v`: running out is an `Err` (`Vec`'s own growth aborts
/// the process).
pub(crate) fn host_reserve(v: &mut Vec<u8>, bytes: usize, op: &str) -> Result<()> {
    v.try_reserve_exact(bytes).map_err(|_| {
        Error::new(
            ErrorKind::Device,
            format!("{op}: out of host memory reserving {bytes} bytes"),
        )
    })
}

pub(crate) fn check_shape(op: &str, shape: &[usize]) -> Result<()> {
    check_shape_below(op, shape, MAX_NUMEL)
}

/// Broadcast views may be larger than any buffer (they are never materialized as such: a
/// kernel reduces over them); their element count only has to stay far from overflow.
pub(crate) const MAX_VIEW_NUMEL: usize = {
    const LIMIT: u64 = 1 << 50;
    if LIMIT > usize::MAX as u64 {
        usize::MAX
    } else {
        LIMIT as usize
    }
};

/// Checks that `shape` has at most `max` elements. A dimension may be 0: such a tensor is empty,
/// and its value is a constant (no buffer, no kernel; see `Tensor::empty_of`).
pub(crate) fn check_shape_below(op: &str, shape: &[usize], max: usize) -> Result<()> {
    let mut n: usize = 1;
    for &d in shape {
        n = match n.checked_mul(d) {
            Some(v) if v <= max => v,
            _ => bail!(Shape, "{op}: shape {shape:?} has more than {max} elements"),
        };
    }
    Ok(())
}

/// `axis` (negative counts from the end) as an index into a shape of `ndim` dimensions, always
/// `< ndim`: a 0-dimensional tensor has no axis (as in numpy), so every op taking one rejects
/// it there; only `flatten` accepts its start 0 (or -1) on a 0-d tensor.
pub(crate) fn norm_axis(op: &str, axis: isize, ndim: usize) -> Result<usize> {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        bail!(
            Shape,
            "{op}: axis {axis} is out of range for a tensor of {ndim} dimensions"
        );
    }
    Ok(a as usize)
}

/// Whether every kernel that inlines `n` computes the same bits: below materialized values
/// (buffers, reductions, which the scheduler computes once, and contiguous copies) there are
/// only ops that round the same wherever they run. Not so a float sum with a product operand
/// (contracted into an FMA or not), divisions and transcendental functions (their precision is
/// not fixed in WGSL, and vectorized libm differs from scalar).
fn recomputes_exactly(n: &Arc<UOp>) -> bool {
    let product = |s: &Arc<UOp>| {
        let mut s = s.clone();
        while !s.is_realized() && (s.op.is_movement() || s.op == Op::Unary(UnaryOp::Neg)) {
            s = s.src()[0].clone();
        }
        !s.is_realized() && s.op == Op::Binary(BinaryOp::Mul)
    };
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack = vec![n.clone()];
    while let Some(n) = stack.pop() {
        if n.is_realized() || !seen.insert(n.id) {
            continue;
        }
        let src = n.src();
        let float = n.dtype.is_float();
        let exact = match &n.op {
            Op::Buffer
            | Op::Const(_)
            | Op::Iota
            | Op::Reduce(..)
            | Op::Contiguous
            | Op::Assign
            | Op::Copy => continue,
            Op::Unary(UnaryOp::Neg | UnaryOp::Trunc) => true,
            Op::Unary(_) => !float,
            Op::Binary(BinaryOp::Add) => !float || !src.iter().any(product),
            Op::Binary(BinaryOp::Div | BinaryOp::Mod) => !float,
            Op::Binary(_) | Op::Where | Op::Cast(_) | Op::Detach => true,
            op => op.is_movement(),
        };
        if !exact {
            return false;
        }
        stack.extend(src);
    }
    true
}

/// Numpy broadcasting of two shapes.
pub(crate) fn broadcast_shape(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => bail!(
                Shape,
                "{op}: shapes {a:?} and {b:?} cannot be broadcast together"
            ),
        };
    }
    Ok(out)
}

impl Tensor {
    // ---- handle plumbing -------------------------------------------------------------------

    pub(crate) fn from_node(n: Arc<UOp>) -> Tensor {
        Tensor::from_lazy(Lazy::one(n))
    }
    pub(crate) fn from_lazy(l: Lazy) -> Tensor {
        LIVE_TENSORS.fetch_add(1, Ordering::Relaxed);
        let t = Tensor(Arc::new(Inner {
            lazy: Mutex::new(Arc::new(l)),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(None),
        }));
        LIVE.with(|l| {
            let mut l = l.borrow_mut();
            l.tensors.push(Arc::downgrade(&t.0));
            if l.tensors.len() >= l.prune_at {
                l.tensors.retain(|w| w.strong_count() > 0);
                l.prune_at = (l.tensors.len() * 2).max(1024);
            }
        });
        t
    }
    /// The lazy-graph node this handle points at now (an in-place `assign` moves it); for a
    /// tensor on several devices, the node of its first shard.
    pub fn node(&self) -> Arc<UOp> {
        self.lazy().shards[0].clone()
    }
    /// The lazy graphs of every device.
    pub(crate) fn lazy(&self) -> Arc<Lazy> {
        lock(&self.0.lazy).clone()
    }
    pub(crate) fn set_lazy(&self, l: Lazy) {
        *lock(&self.0.lazy) = Arc::new(l);
    }
    /// The size of each axis (`[]` for a scalar).
    pub fn shape(&self) -> Vec<usize> {
        self.lazy().shape.clone()
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.node().dtype
    }
    /// The device this tensor lives on (the first one, for a tensor on several: see `devices`).
    pub fn device(&self) -> Device {
        self.node().device
    }
    /// Every device this tensor lives on, in shard order (one unless it was sharded).
    pub fn devices(&self) -> Vec<Device> {
        self.lazy().devices()
    }
    /// The axis a sharded tensor is split along (`None` when replicated or on one device).
    pub fn shard_axis(&self) -> Option<usize> {
        let l = self.lazy();
        if l.is_multi() {
            l.axis
        } else {
            None
        }
    }
    /// Each device's part (or replica) as a tensor of its own, in device order (the tensor
    /// itself when it lives on one device).
    pub fn shards(&self) -> Vec<Tensor> {
        self.lazy()
            .shards
            .iter()
            .map(|n| Tensor::from_node(n.clone()))
            .collect()
    }
    /// The number of elements (the product of the shape).
    pub fn numel(&self) -> usize {
        self.lazy().shape.iter().product()
    }
    /// The number of axes.
    pub fn ndim(&self) -> usize {
        self.lazy().shape.len()
    }
    /// Whether the value is computed and held in buffers (on every device it lives on).
    pub fn is_realized(&self) -> bool {
        self.lazy().shards.iter().all(|s| s.is_realized())
    }
    /// Whether two handles are the same tensor.
    pub fn same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A new node `op` over `src` (on every device, when a source is on several).
    pub(crate) fn mk(op: Op, dtype: DType, shape: Vec<usize>, src: &[&Tensor]) -> Result<Tensor> {
        let lz: Vec<Arc<Lazy>> = src.iter().map(|s| s.lazy()).collect();
        if lz.iter().any(|l| l.is_multi()) {
            return Ok(Tensor::from_lazy(multi::apply(op, dtype, shape, &lz)?));
        }
        let device = lz.first().map(|l| l.shards[0].device).unwrap_or_default();
        let nodes = lz.iter().map(|l| l.shards[0].clone()).collect();
        Ok(Tensor::from_node(UOp::new(op, dtype, shape, device, nodes)))
    }
    /// `op` on each shard of this tensor, shaped like it (never mixes shards, cannot fail).
    pub(crate) fn each(&self, op: Op, dtype: DType) -> Tensor {
        Tensor::from_lazy(multi::each(&self.lazy(), |n| {
            UOp::new(
                op.clone(),
                dtype,
                n.shape.clone(),
                n.device,
                vec![n.clone()],
            )
        }))
    }

    // ---- autograd handles ------------------------------------------------------------------

    /// Whether gradients are tracked for this tensor (`set_requires_grad`).
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }
    /// Track gradients for this tensor (a leaf such as a parameter).
    pub fn set_requires_grad(&self, on: bool) {
        let was = self.0.requires_grad.swap(on, Ordering::Relaxed);
        if on && !was {
            lock(&GRAD_TENSORS).push(Arc::downgrade(&self.0));
        }
    }
    /// The accumulated gradient, after `backward()`.
    pub fn grad(&self) -> Option<Tensor> {
        lock(&self.0.grad).clone()
    }
    /// Replace the accumulated gradient (`None` clears it, as `Optimizer::zero_grad` does).
    pub fn set_grad(&self, g: Option<Tensor>) {
        *lock(&self.0.grad) = g;
    }
    /// The same values, cut off from autograd.
    pub fn detach(&self) -> Tensor {
        Tensor::from_lazy(multi::each(&self.lazy(), |n| match n.buffer() {
            Some(b) => UOp::from_buffer(b, n.dtype, n.shape.clone()),
            None => UOp::new(
                Op::Detach,
                n.dtype,
                n.shape.clone(),
                n.device,
                vec![n.clone()],
            ),
        }))
    }
    /// Compute gradients of this (scalar) tensor with respect to every tensor that requires
    /// them, lazily: the gradients are graphs that realize together with whatever uses them.
    pub fn backward(&self) -> Result<Tensor> {
        grad::backward(self, None)?;
        Ok(self.clone())
    }
    /// `backward` from a tensor of any shape, given the gradient flowing into it.
    pub fn backward_with(&self, gradient: &Tensor) -> Result<Tensor> {
        grad::backward(self, Some(gradient))?;
        Ok(self.clone())
    }
    /// The gradients of this tensor (a scalar, or any shape given `gradient`, the gradient
    /// flowing into it) with respect to `targets`, as lazy tensors; unlike `backward`, nothing
    /// is stored in `.grad` and the targets need not require gradients (tinygrad's `gradient`,
    /// jax's `grad`).
    pub fn gradient(&self, targets: &[&Tensor], gradient: Option<&Tensor>) -> Result<Vec<Tensor>> {
        grad::gradient(self, targets, gradient)
    }

    // ---- creation -------------------------------------------------------------------------

    fn from_bytes(bytes: &[u8], dtype: DType, shape: &[usize], op: &str) -> Result<Tensor> {
        check_shape(op, shape)?;
        if shape.contains(&0) {
            return Ok(Tensor::empty_of(shape, dtype, Device::default()));
        }
        let device = Device::default();
        let be = device.backend();
        let buf = Arc::new(be.alloc(bytes.len())?);
        be.copy_in(&buf, bytes)?;
        Ok(Tensor::from_node(UOp::from_buffer(
            buf,
            dtype,
            shape.to_vec(),
        )))
    }

    /// A tensor holding `data` (row-major) with the given shape, on the default device.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        check_shape("from_slice", shape)?;
        let n: usize = shape.iter().product();
        if n != data.len() {
            bail!(
                Shape,
                "from_slice: {} values do not fill shape {shape:?} ({n} elements)",
                data.len()
            );
        }
        let mut bytes = Vec::new();
        host_reserve(&mut bytes, data.len() * T::DTYPE.size(), "from_slice")?;
        for &v in data {
            v.write_le(&mut bytes);
        }
        Tensor::from_bytes(&bytes, T::DTYPE, shape, "from_slice")
    }
    /// `from_slice` taking ownership of the data.
    ///
    /// Errors when `data.len()` is not the product of `shape`.
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(t.shape(), vec![2, 3]);
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert!(Tensor::from_vec(vec![1.0f32, 2.0], &[3]).is_err());
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_slice(&data, shape)
    }
    /// Raw little-endian bytes of `dtype` elements (e.g. IDX image data as u8).
    pub fn from_raw(bytes: &[u8], dtype: DType, shape: &[usize]) -> Result<Tensor> {
        check_shape("from_raw", shape)?;
        let n: usize = shape.iter().product();
        if n.checked_mul(dtype.size()) != Some(bytes.len()) {
            bail!(
                Shape,
                "from_raw: {} bytes do not fill shape {shape:?} of {dtype}",
                bytes.len()
            );
        }
        Tensor::from_bytes(bytes, dtype, shape, "from_raw")
    }
    /// A tensor with no elements (`shape` has a 0): a constant, so it never needs a buffer or
    /// a kernel. Ops whose result is empty compute nothing, a reduction over an empty axis is its
    /// identity, and padding an empty tensor gives the pad value (see `schedule`).
    pub(crate) fn empty_of(shape: &[usize], dtype: DType, device: Device) -> Tensor {
        Tensor::from_node(UOp::new(
            Op::Const(0.0),
            dtype,
            shape.to_vec(),
            device,
            vec![],
        ))
    }
    /// A 0-dimensional f32 tensor.
    pub fn scalar(v: f32) -> Tensor {
        Tensor::from_node(UOp::new(
            Op::Const(DType::F32.normalize(v as f64)),
            DType::F32,
            vec![],
            Device::default(),
            vec![],
        ))
    }
    /// `value` broadcast to `shape` with `dtype`, without a buffer.
    pub fn full_dtype(shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        check_shape("full", shape)?;
        Tensor::mk(
            Op::Const(dtype.normalize(value)),
            dtype,
            shape.to_vec(),
            &[],
        )
    }
    /// `value` broadcast to `shape`, f32 (a constant: no buffer until it is used). Here and in
    /// every constructor that takes no dtype, f32 is the default float dtype
    /// (`context::default_float`: f16 under `HALF=1`).
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let t = Tensor::full(&[2, 2], 1.5)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.5; 4]);
    /// assert_eq!(Tensor::zeros(&[3])?.sum((), false)?.item::<f32>()?, 0.0);
    /// assert_eq!(Tensor::ones(&[2, 3])?.sum((), false)?.item::<f32>()?, 6.0);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn full(shape: &[usize], value: f64) -> Result<Tensor> {
        Tensor::full_dtype(shape, value, crate::context::default_float())
    }
    /// Zeros of `shape`, f32 (the default float dtype).
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 0.0)
    }
    /// Ones of `shape`, f32 (the default float dtype).
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 1.0)
    }
    /// Zeros with this tensor's shape, dtype and devices.
    pub fn zeros_like(&self) -> Tensor {
        self.const_like(0.0)
    }
    /// Ones with this tensor's shape, dtype and devices.
    pub fn ones_like(&self) -> Tensor {
        self.const_like(1.0)
    }
    /// `v` with this tensor's shape, dtype and devices.
    pub fn full_like(&self, v: f64) -> Tensor {
        self.const_like(v)
    }
    /// A constant with this tensor's shape, dtype and devices (split like it): `full_like`.
    pub fn const_like(&self, v: f64) -> Tensor {
        Tensor::from_lazy(multi::each(&self.lazy(), |n| {
            UOp::new(
                Op::Const(n.dtype.normalize(v)),
                n.dtype,
                n.shape.clone(),
                n.device,
                vec![],
            )
        }))
    }
    /// A constant of `shape` on this tensor's devices (replicated on each).
    pub(crate) fn const_shaped(&self, v: f64, dtype: DType, shape: &[usize]) -> Tensor {
        let l = self.lazy();
        let shards = l
            .shards
            .iter()
            .map(|n| {
                UOp::new(
                    Op::Const(dtype.normalize(v)),
                    dtype,
                    shape.to_vec(),
                    n.device,
                    vec![],
                )
            })
            .collect();
        Tensor::from_lazy(Lazy::multi(shards, None))
    }
    /// `0, 1, ..., n-1` as i32 on the default device (no buffer).
    pub(crate) fn iota(n: usize, device: Device) -> Tensor {
        Tensor::from_node(UOp::new(Op::Iota, DType::I32, vec![n], device, vec![]))
    }
    /// `start, start+step, ...` below `stop`.
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            bail!(
                Shape,
                "arange: invalid start {start}, stop {stop}, step {step}"
            );
        }
        let n = ((stop - start) / step).ceil();
        if n < 0.0 {
            bail!(
                Shape,
                "arange: start {start} and stop {stop} are not in the direction of step {step}"
            );
        }
        check_shape("arange", &[n as usize])?;
        let i = Tensor::iota(n as usize, Device::default());
        let ct = if dtype.is_float() { DType::F32 } else { dtype };
        i.cast(ct)?.mul(step)?.add(start)?.cast(dtype)
    }
    /// `steps` values from `start` to `stop` inclusive, evenly spaced (computed in f32, then
    /// cast to `dtype`).
    pub fn linspace(start: f64, stop: f64, steps: usize, dtype: DType) -> Result<Tensor> {
        if !start.is_finite() || !stop.is_finite() {
            bail!(
                Shape,
                "linspace: needs finite ends, got {start}, {stop}, {steps}"
            );
        }
        if dtype == DType::Bool {
            bail!(DType, "linspace: bool is not a numeric dtype");
        }
        if steps == 0 {
            return Tensor::full_dtype(&[0], start, dtype);
        }
        if steps == 1 {
            return Tensor::full_dtype(&[1], start, dtype);
        }
        check_shape("linspace", &[steps])?;
        let step = (stop - start) / (steps - 1) as f64;
        Tensor::iota(steps, Device::default())
            .cast(DType::F32)?
            .mul(step)?
            .add(start)?
            .cast(dtype)
    }
    /// A tensor whose contents are whatever its new buffer holds (allocated, not written):
    /// for outputs written before they are read.
    pub fn empty(shape: &[usize], dtype: DType) -> Result<Tensor> {
        check_shape("empty", shape)?;
        let n: usize = shape.iter().product();
        let device = Device::default();
        if n == 0 {
            return Ok(Tensor::empty_of(shape, dtype, device));
        }
        let buf = Arc::new(device.backend().alloc(n * dtype.size())?);
        Ok(Tensor::from_node(UOp::from_buffer(
            buf,
            dtype,
            shape.to_vec(),
        )))
    }
    /// `empty` with this tensor's shape and dtype, on the default device.
    pub fn empty_like(&self) -> Result<Tensor> {
        Tensor::empty(&self.shape(), self.dtype())
    }
    /// The n×n identity matrix (f32, the default float dtype).
    pub fn eye(n: usize) -> Result<Tensor> {
        check_shape("eye", &[n, n])?;
        let i = Tensor::iota(n, Device::default());
        let r = i.reshape(&[n as isize, 1])?;
        let c = i.reshape(&[1, n as isize])?;
        r.eq(&c)?.cast(crate::context::default_float())
    }

    // ---- reading back ----------------------------------------------------------------------

    /// Compute this tensor now.
    pub fn realize(&self) -> Result<Tensor> {
        Tensor::realize_all(&[self])?;
        Ok(self.clone())
    }
    /// Realize several tensors in one schedule (so shared work is done once). Live lazy
    /// tensors outside these graphs that still read a buffer an assign here overwrites (a loss
    /// read after `opt.step()`) are realized in the same schedule, before the write. (Tensors
    /// inside the graphs, such as the assigned value or a forward activation the gradient uses,
    /// are not materialized for this: read them before the step if they are needed.)
    pub fn realize_all(ts: &[&Tensor]) -> Result<()> {
        // An empty tensor is a constant: realizing it does nothing.
        let mut nodes: Vec<Arc<UOp>> = ts
            .iter()
            .flat_map(|t| t.lazy().shards.clone())
            .filter(|n| !n.is_realized() && n.numel() > 0)
            .collect();
        if nodes.is_empty() {
            return Ok(());
        }
        let (graph, assigned) = crate::realize::graph_and_assigned(&nodes);
        if !assigned.is_empty() {
            nodes.extend(readers_of(&assigned, &graph));
        }
        crate::realize::realize(&nodes, &grad_leaf_ids())?;
        // Assigned tensors now are their (in-place written) buffers.
        for t in ts {
            let l = t.lazy();
            if l.shards.iter().any(|n| n.op == Op::Assign) {
                let shards = l
                    .shards
                    .iter()
                    .map(|n| match (n.op == Op::Assign, n.buffer()) {
                        (true, Some(b)) => UOp::from_buffer(b, n.dtype, n.shape.clone()),
                        _ => n.clone(),
                    })
                    .collect();
                t.set_lazy(l.with(shards));
            }
        }
        Ok(())
    }
    /// `realize_all`, for a caller that can wait: where a device compiles asynchronously
    /// (WebGPU in a browser) the kernels are launched once all of them are compiled, at once on
    /// the browser's threads, while the caller awaits without blocking; elsewhere
    /// `realize_all`.
    pub async fn realize_all_async(ts: &[&Tensor]) -> Result<()> {
        crate::realize::defer(|| Tensor::realize_all(ts))?;
        crate::realize::launch_deferred().await
    }
    /// `realize`, awaiting (see `realize_all_async`).
    pub async fn realize_async(&self) -> Result<Tensor> {
        Tensor::realize_all_async(&[self]).await?;
        Ok(self.clone())
    }
    /// Raw bytes of the realized tensor, awaiting the device.
    pub async fn bytes_async(&self) -> Result<Vec<u8>> {
        crate::realize::check_readback()?;
        if self.numel() == 0 {
            return Ok(vec![]);
        }
        // A tensor on several devices is read whole from its first one.
        let t = if self.lazy().is_multi() {
            self.to(self.device())?
        } else {
            self.clone()
        };
        t.realize_async().await?;
        let n = t.node();
        let buf = n.buffer().ok_or_else(|| {
            Error::new(ErrorKind::Other, "internal: realized tensor has no buffer")
        })?;
        let mut b = n.device.backend().copy_out(&buf).await?;
        b.truncate(n.numel() * n.dtype.size());
        Ok(b)
    }
    /// The values as `T`, which must match the dtype, except that f16 and bf16 also read as f32
    /// (exactly: a mixed-precision loss reads as `item::<f32>()`) (async: works in the browser).
    pub async fn to_vec_async<T: Element>(&self) -> Result<Vec<T>> {
        let dt = self.dtype();
        let widen = T::DTYPE == DType::F32 && matches!(dt, DType::F16 | DType::BF16);
        if T::DTYPE != dt && !widen {
            bail!(
                DType,
                "to_vec: tensor has dtype {dt}, asked for {}",
                T::DTYPE
            );
        }
        let b = self.bytes_async().await?;
        let values = b.chunks_exact(dt.size());
        Ok(if widen {
            values
                .map(|c| T::read_le(&(read_f64(dt, c) as f32).to_le_bytes()))
                .collect()
        } else {
            values.map(T::read_le).collect()
        })
    }
    /// The values converted to f32, whatever the dtype (async).
    pub async fn to_f32_vec_async(&self) -> Result<Vec<f32>> {
        let dt = self.dtype();
        let b = self.bytes_async().await?;
        Ok(b.chunks_exact(dt.size())
            .map(|c| read_f64(dt, c) as f32)
            .collect())
    }
    /// Blocking form of `to_vec_async` (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        crate::runtime::block_on(self.to_vec_async())
    }
    #[cfg(not(target_arch = "wasm32"))]
    /// Blocking form of `to_f32_vec_async` (native only): the values converted to f32.
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        crate::runtime::block_on(self.to_f32_vec_async())
    }
    /// The single value of a one-element tensor.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn item<T: Element>(&self) -> Result<T> {
        crate::runtime::block_on(self.item_async())
    }
    /// The single value of a one-element tensor (async); errors when it has more or fewer
    /// elements, or when `T` is not its dtype (f16 and bf16 read as f32 too).
    pub async fn item_async<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            bail!(
                Shape,
                "item: tensor of shape {:?} has {} elements, not 1",
                self.shape(),
                self.numel()
            );
        }
        Ok(self.to_vec_async::<T>().await?[0])
    }
    /// Copy to another device (a sharded tensor is gathered there whole).
    pub fn to(&self, device: Device) -> Result<Tensor> {
        let l = self.lazy();
        if !l.is_multi() && device == self.device() {
            return Ok(self.clone());
        }
        device.available().map_err(|e| {
            Error::new(
                ErrorKind::Device,
                format!("to: device {device} unavailable: {e}"),
            )
        })?;
        if l.is_multi() {
            return multi::gather(&l, device);
        }
        let n = self.node();
        Ok(Tensor::from_node(UOp::new(
            Op::Copy,
            n.dtype,
            n.shape.clone(),
            device,
            vec![n],
        )))
    }
    /// The kernels realizing this tensor would run (nothing is launched).
    pub fn schedule(&self) -> Result<Vec<ScheduleItem>> {
        Tensor::schedule_all(&[self])
    }
    /// The kernels realizing these tensors together would run (nothing is launched).
    pub fn schedule_all(ts: &[&Tensor]) -> Result<Vec<ScheduleItem>> {
        let nodes: Vec<Arc<UOp>> = ts.iter().flat_map(|t| t.lazy().shards.clone()).collect();
        crate::realize::schedule(&nodes)
    }
    /// Force this value into its own buffer when realized (breaks fusion here).
    pub fn contiguous(&self) -> Tensor {
        self.each(Op::Contiguous, self.dtype())
    }

    // ---- several devices -------------------------------------------------------------------

    /// This tensor on several devices: split along `axis` into equal parts, part `i` on
    /// `devices[i]`, or with `axis` `None` a whole replica on each. Ops on sharded tensors run
    /// on every device (a reduction over the split axis combines the parts), `backward` gives
    /// gradients placed like their parameters, and `to`/`to_vec` gather the whole value. An
    /// axis that does not split evenly, an axis out of range and an unavailable device are
    /// errors.
    pub fn shard(&self, devices: &[Device], axis: Option<isize>) -> Result<Tensor> {
        let axis = multi::check_shard(&self.shape(), devices, axis)?;
        let l = self.lazy();
        let axis = if devices.len() > 1 { axis } else { None };
        if l.devices() == devices && (!l.is_multi() || l.axis == axis) {
            return Ok(self.clone());
        }
        let x = if l.is_multi() {
            self.to(self.device())?.node()
        } else {
            l.shards[0].clone()
        };
        Ok(Tensor::from_lazy(multi::distribute(&x, devices, axis)))
    }
    /// `shard` in place: this handle (and every clone of it, e.g. a model's parameter held by
    /// an optimizer) moves to the devices. A realized tensor is copied there now and stays a
    /// leaf (its gradient-tracking is kept).
    pub fn shard_(&self, devices: &[Device], axis: Option<isize>) -> Result<Tensor> {
        let t = self.shard(devices, axis)?;
        let realized = self.lazy().shards.iter().all(|n| n.is_realized());
        if realized {
            t.realize()?;
            self.set_lazy((*t.detach().lazy()).clone());
        } else {
            self.set_lazy((*t.lazy()).clone());
        }
        Ok(self.clone())
    }
    /// `t` (on one device, with this tensor's shape) placed like this tensor: on its devices,
    /// split the same way.
    pub(crate) fn placed_like(&self, t: Tensor) -> Result<Tensor> {
        let l = self.lazy();
        if !l.is_multi() {
            return Ok(t);
        }
        t.shard(&l.devices(), l.axis.map(|a| a as isize))
    }
    /// This value in a form every kernel reads with the same bits, for comparing it with a
    /// reduction of itself (max backward, argmax): the scheduler inlines an elementwise
    /// expression into each kernel that reads it, and two compilations of one expression need
    /// not round alike (a C, WGSL or CUDA compiler may contract `a * b + c` into an FMA in one
    /// kernel and not in another; libm and GPU transcendentals differ between vectorized and
    /// scalar code). So unless recomputing it is exact, it is materialized.
    pub(crate) fn pinned(&self) -> Tensor {
        if self.lazy().shards.iter().all(recomputes_exactly) {
            self.clone()
        } else {
            self.contiguous()
        }
    }
    /// Write `value` into this tensor's buffer in place (same shape and dtype). The tensor keeps
    /// its identity (and buffer), which is what lets a captured step update parameters.
    pub fn assign(&self, value: &Tensor) -> Result<Tensor> {
        if self.lazy().is_multi() || value.lazy().is_multi() {
            return self.assign_multi(value);
        }
        let (n, v) = (self.node(), value.node());
        if n.shape != v.shape || n.dtype != v.dtype || n.device != v.device {
            let kind = if n.shape != v.shape {
                ErrorKind::Shape
            } else if n.dtype != v.dtype {
                ErrorKind::DType
            } else {
                ErrorKind::Device
            };
            return Err(Error::new(
                kind,
                format!(
                    "assign: value {:?} {} on {} does not match target {:?} {} on {}",
                    v.shape, v.dtype, v.device, n.shape, n.dtype, n.device
                ),
            ));
        }
        if n.numel() == 0 {
            // Nothing to write: an empty tensor has no buffer.
            return Ok(self.clone());
        }
        if !n.is_realized() && n.op != Op::Assign {
            // The target must own a buffer to write into (a pending assign will have one).
            self.realize()?;
        }
        let n = self.node();
        let a = UOp::new(Op::Assign, n.dtype, n.shape.clone(), n.device, vec![n, v]);
        self.set_lazy(Lazy::one(a));
        Ok(self.clone())
    }

    // ---- primitive builders ----------------------------------------------------------------

    pub(crate) fn unary(&self, op: UnaryOp) -> Tensor {
        self.each(Op::Unary(op), self.dtype())
    }
    fn float_unary(&self, name: &str, op: UnaryOp) -> Result<Tensor> {
        Ok(self.to_float(name)?.unary(op))
    }
    /// This tensor as a float (ints and bools cast to f32, the default float dtype).
    pub(crate) fn to_float(&self, _op: &str) -> Result<Tensor> {
        if self.dtype().is_float() {
            Ok(self.clone())
        } else {
            self.cast(crate::context::default_float())
        }
    }

    /// Turn an operand into a tensor compatible with `self` (scalars take self's dtype, or the
    /// default float dtype for a float scalar with an integer tensor).
    pub(crate) fn operand(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        Ok(match rhs.into() {
            Operand::Tensor(t) => t,
            Operand::Float(v) => {
                let dt = if self.dtype().is_float() {
                    self.dtype()
                } else {
                    crate::context::default_float()
                };
                self.const_shaped(v, dt, &[])
            }
            Operand::Int(v) => {
                let dt = if self.dtype() == DType::Bool {
                    DType::I32
                } else {
                    self.dtype()
                };
                self.const_shaped(v as f64, dt, &[])
            }
        })
    }

    /// Broadcast and promote two operands to a common shape and dtype.
    pub(crate) fn broadcast_pair(
        &self,
        op: &str,
        rhs: impl Into<Operand>,
    ) -> Result<(Tensor, Tensor)> {
        let b = self.operand(rhs)?;
        multi::check_operands(op, self, &b)?;
        let shape = broadcast_shape(op, &self.shape(), &b.shape())?;
        let dt = DType::promote(self.dtype(), b.dtype());
        let a = self.cast(dt)?.broadcast_to(&shape)?;
        let b = b.cast(dt)?.broadcast_to(&shape)?;
        Ok((a, b))
    }

    pub(crate) fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let s = self.shape();
        if s == shape {
            return Ok(self.clone());
        }
        if s.len() > shape.len() {
            bail!(Shape, "expand: cannot broadcast {s:?} to {shape:?}");
        }
        let mut padded = vec![1usize; shape.len() - s.len()];
        padded.extend_from_slice(&s);
        let t = self.reshape_u(&padded)?;
        t.expand_u(shape)
    }

    pub(crate) fn binary(
        &self,
        op: BinaryOp,
        name: &str,
        rhs: impl Into<Operand>,
    ) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair(name, rhs)?;
        let dt = if op.is_cmp() { DType::Bool } else { a.dtype() };
        Tensor::mk(Op::Binary(op), dt, a.shape(), &[&a, &b])
    }

    // ---- elementwise -----------------------------------------------------------------------

    /// `self + rhs`, elementwise. Both operands are broadcast to a common shape and promoted to a
    /// common dtype (`DType::promote`); a scalar takes the tensor's dtype. Errors when the shapes
    /// do not broadcast or the tensors are on different devices.
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let b = Tensor::from_slice(&[10.0f32, 20.0], &[2])?; // broadcast along the rows
    /// assert_eq!(a.add(&b)?.to_vec::<f32>()?, vec![11.0, 22.0, 13.0, 24.0]);
    /// assert_eq!(a.mul(2.0)?.sub(1.0)?.to_vec::<f32>()?, vec![1.0, 3.0, 5.0, 7.0]);
    /// assert!(a.add(&Tensor::zeros(&[3])?).is_err()); // [2, 2] and [3] do not broadcast
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn add(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::Add, "add", rhs)
    }
    /// `self - rhs`, elementwise, broadcast and promoted as `add`.
    pub fn sub(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("sub", rhs)?;
        a.add(&b.neg()?)
    }
    /// `self * rhs`, elementwise, broadcast and promoted as `add`.
    pub fn mul(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, "mul", rhs)
    }
    /// True division for floats (integers are promoted to f32); see `idiv` for integers.
    pub fn div(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("div", rhs)?;
        a.to_float("div")?
            .binary(BinaryOp::Div, "div", &b.to_float("div")?)
    }
    /// Integer division truncating toward zero.
    pub fn idiv(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("idiv", rhs)?;
        if a.dtype().is_float() {
            bail!(DType, "idiv: needs integer operands, got {}", a.dtype());
        }
        a.binary(BinaryOp::Div, "idiv", &b)
    }
    /// Remainder with the sign of the dividend (C's `%` and `fmod`; PyTorch's `fmod`).
    pub fn fmod(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::Mod, "fmod", rhs)
    }
    /// Remainder with the sign of the divisor, `self - rhs * floor(self / rhs)` (Python's `%`,
    /// tinygrad's `mod`, PyTorch's `remainder`): `-7 mod 3 = 2`. Named `mod_` because `mod` is
    /// a Rust keyword. An integer division by zero gives 0 (as `idiv`).
    pub fn mod_(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("mod", rhs)?;
        let r = a.binary(BinaryOp::Mod, "mod", &b)?;
        if a.dtype().is_unsigned() {
            return Ok(r);
        }
        // The truncated remainder moves by one divisor where its sign differs from the divisor's.
        let fix = r.ne(0)?.logical_and(&r.lt(0)?.bitwise_xor(&b.lt(0)?)?)?;
        fix.where_(&r.add(&b)?, &r)
    }
    /// `-self` (`logical_not` for bool; wrapping for integers).
    pub fn neg(&self) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            return self.logical_not();
        }
        Ok(self.unary(UnaryOp::Neg))
    }
    /// The larger of `self` and `rhs`, elementwise (broadcast and promoted as `add`).
    pub fn maximum(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::Max, "maximum", rhs)
    }
    /// The smaller of `self` and `rhs`, elementwise (broadcast and promoted as `add`).
    pub fn minimum(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("minimum", rhs)?;
        a.neg()?.maximum(&b.neg()?)?.neg()
    }
    /// `self < rhs`, elementwise, as a bool tensor (broadcast and promoted as `add`).
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::{DType, Tensor};
    /// let x = Tensor::from_slice(&[-1.0f32, 0.0, 2.0], &[3])?;
    /// let m = x.lt(0.5)?;
    /// assert_eq!(m.dtype(), DType::Bool);
    /// assert_eq!(m.to_vec::<bool>()?, vec![true, true, false]);
    /// assert_eq!(m.where_(&x, 9.0)?.to_vec::<f32>()?, vec![-1.0, 0.0, 9.0]);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn lt(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::CmpLt, "lt", rhs)
    }
    /// `self > rhs`, elementwise, as a bool tensor.
    pub fn gt(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair("gt", rhs)?;
        b.lt(&a)
    }
    /// `self <= rhs`, elementwise, as a bool tensor.
    pub fn le(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.gt(rhs)?.logical_not()
    }
    /// `self >= rhs`, elementwise, as a bool tensor.
    pub fn ge(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.lt(rhs)?.logical_not()
    }
    /// `self == rhs`, elementwise, as a bool tensor.
    pub fn eq(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::CmpEq, "eq", rhs)
    }
    /// `self != rhs`, elementwise, as a bool tensor.
    pub fn ne(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.binary(BinaryOp::CmpNe, "ne", rhs)
    }
    /// Logical not of a bool tensor; errors on other dtypes (`bitwise_not` flips integer bits).
    pub fn logical_not(&self) -> Result<Tensor> {
        if self.dtype() != DType::Bool {
            bail!(
                DType,
                "logical_not: needs a bool tensor, got {}",
                self.dtype()
            );
        }
        self.ne(true)
    }
    /// Logical and of two bool tensors (broadcast); errors on other dtypes.
    pub fn logical_and(&self, rhs: &Tensor) -> Result<Tensor> {
        if self.dtype() != DType::Bool || rhs.dtype() != DType::Bool {
            bail!(
                DType,
                "logical_and: needs bool tensors, got {} and {}",
                self.dtype(),
                rhs.dtype()
            );
        }
        self.binary(BinaryOp::And, "logical_and", rhs)
    }
    /// Logical or of two bool tensors (broadcast); errors on other dtypes.
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        if self.dtype() != DType::Bool || rhs.dtype() != DType::Bool {
            bail!(
                DType,
                "logical_or: needs bool tensors, got {} and {}",
                self.dtype(),
                rhs.dtype()
            );
        }
        self.binary(BinaryOp::Or, "logical_or", rhs)
    }
    /// Bitwise ops on integer tensors.
    pub fn bitwise_xor(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.int_binary(BinaryOp::Xor, "xor", rhs)
    }
    /// Bitwise and of integer (or bool) tensors; errors on floats.
    pub fn bitwise_and(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.int_binary(BinaryOp::And, "bitand", rhs)
    }
    /// Bitwise or of integer (or bool) tensors; errors on floats.
    pub fn bitwise_or(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.int_binary(BinaryOp::Or, "bitor", rhs)
    }
    /// `self << rhs` on integer tensors (the shift taken modulo 32); errors on floats.
    pub fn lshift(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.int_binary(BinaryOp::Shl, "shl", rhs)
    }
    /// `self >> rhs` on integer tensors, zero-filling (the shift taken modulo 32); errors on
    /// floats.
    pub fn rshift(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        self.int_binary(BinaryOp::Shr, "shr", rhs)
    }
    /// Every bit flipped (`!x`); `logical_not` for bool.
    pub fn bitwise_not(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::Bool => self.logical_not(),
            DType::I32 => self.bitwise_xor(-1),
            DType::U32 => self.bitwise_xor(u32::MAX as i64),
            DType::U8 => self.bitwise_xor(u8::MAX as i64),
            dt => bail!(
                DType,
                "bitwise_not: needs an integer or bool tensor, got {dt}"
            ),
        }
    }
    fn int_binary(&self, op: BinaryOp, name: &str, rhs: impl Into<Operand>) -> Result<Tensor> {
        let t = self.binary(op, name, rhs)?;
        if t.dtype().is_float() {
            bail!(DType, "{name}: needs integer operands, got {}", t.dtype());
        }
        Ok(t)
    }
    /// `self ? a : b`, elementwise; self is a bool condition.
    pub fn where_(&self, a: impl Into<Operand>, b: impl Into<Operand>) -> Result<Tensor> {
        let cond = if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne(0)?
        };
        // A scalar branch takes the other branch's dtype (`where(m, x16, 0.0)` stays f16).
        let (a, b) = match (a.into(), b.into()) {
            (Operand::Tensor(a), b) => {
                let b = a.operand(b)?;
                (a, b)
            }
            (a, Operand::Tensor(b)) => (b.operand(a)?, b),
            (a, b) => (cond.operand(a)?, cond.operand(b)?),
        };
        let (a, b) = match (a.dtype().is_float(), b.dtype().is_float()) {
            (true, false) => (a.clone(), b.cast(a.dtype())?),
            (false, true) => (a.cast(b.dtype())?, b.clone()),
            _ => (a.clone(), b.clone()),
        };
        let (a, b) = a.broadcast_pair("where", &b)?;
        let shape = broadcast_shape("where", &cond.shape(), &a.shape())?;
        let (c, a, b) = (
            cond.broadcast_to(&shape)?,
            a.broadcast_to(&shape)?,
            b.broadcast_to(&shape)?,
        );
        multi::check_operands("where", &c, &a)?;
        Tensor::mk(Op::Where, a.dtype(), shape, &[&c, &a, &b])
    }
    /// `cast(F32)`.
    pub fn float(&self) -> Result<Tensor> {
        self.cast(DType::F32)
    }
    /// `cast(F16)`.
    pub fn half(&self) -> Result<Tensor> {
        self.cast(DType::F16)
    }
    /// `cast(BF16)`.
    pub fn bfloat16(&self) -> Result<Tensor> {
        self.cast(DType::BF16)
    }
    /// `cast(I32)`.
    pub fn int(&self) -> Result<Tensor> {
        self.cast(DType::I32)
    }
    /// `cast(Bool)`.
    pub fn bool(&self) -> Result<Tensor> {
        self.cast(DType::Bool)
    }
    /// Convert to `dtype` (a no-op when it already is). Float to integer truncates toward zero and
    /// saturates, NaN giving 0; integer to integer wraps; to bool tests non-zero.
    /// ```
    /// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
    /// use wgrad::{DType, Tensor};
    /// let x = Tensor::from_slice(&[-1.7f32, 0.2, 2.9], &[3])?;
    /// assert_eq!(x.cast(DType::I32)?.to_vec::<i32>()?, vec![-1, 0, 2]);
    /// assert_eq!(x.cast(DType::Bool)?.to_vec::<bool>()?, vec![true, true, true]);
    /// # Ok::<(), wgrad::Error>(())
    /// ```
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        Ok(self.each(Op::Cast(dtype), dtype))
    }

    /// `2^x`, elementwise (integers are cast to f32 first, as for every float op below).
    pub fn exp2(&self) -> Result<Tensor> {
        self.float_unary("exp2", UnaryOp::Exp2)
    }
    /// `log2(x)`, elementwise: NaN below 0, `-inf` at 0.
    pub fn log2(&self) -> Result<Tensor> {
        self.float_unary("log2", UnaryOp::Log2)
    }
    /// `e^x`, elementwise.
    pub fn exp(&self) -> Result<Tensor> {
        self.to_float("exp")?.mul(std::f64::consts::LOG2_E)?.exp2()
    }
    /// The natural logarithm, elementwise: NaN below 0, `-inf` at 0.
    pub fn log(&self) -> Result<Tensor> {
        self.log2()?.mul(std::f64::consts::LN_2)
    }
    /// The square root, elementwise: NaN below 0.
    pub fn sqrt(&self) -> Result<Tensor> {
        self.float_unary("sqrt", UnaryOp::Sqrt)
    }
    /// `1 / sqrt(x)`, elementwise.
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.sqrt()?.reciprocal()
    }
    /// `1 / x`, elementwise.
    pub fn reciprocal(&self) -> Result<Tensor> {
        self.float_unary("reciprocal", UnaryOp::Recip)
    }
    /// The sine of `x` in radians, elementwise.
    pub fn sin(&self) -> Result<Tensor> {
        self.float_unary("sin", UnaryOp::Sin)
    }
    /// The cosine of `x` in radians, elementwise.
    pub fn cos(&self) -> Result<Tensor> {
        self.to_float("cos")?
            .neg()?
            .add(std::f64::consts::FRAC_PI_2)?
            .sin()
    }
    /// The tangent of `x` in radians, elementwise.
    pub fn tan(&self) -> Result<Tensor> {
        self.sin()?.div(&self.cos()?)
    }
    /// `x` rounded toward zero, elementwise.
    pub fn trunc(&self) -> Result<Tensor> {
        self.float_unary("trunc", UnaryOp::Trunc)
    }
    /// `x` rounded down, elementwise.
    pub fn floor(&self) -> Result<Tensor> {
        let t = self.trunc()?;
        let adj = t.gt(self)?.where_(1.0, 0.0)?;
        t.sub(&adj)
    }
    /// `x` rounded up, elementwise.
    pub fn ceil(&self) -> Result<Tensor> {
        let t = self.trunc()?;
        let adj = t.lt(self)?.where_(1.0, 0.0)?;
        t.add(&adj)
    }
    /// `x` rounded to the nearest integer, halves to even (numpy's `round`), elementwise.
    pub fn round(&self) -> Result<Tensor> {
        // Half to even, like numpy.
        let f = self.floor()?;
        let d = self.sub(&f)?;
        let even = f.fmod(2.0)?.eq(0.0)?;
        let up = d
            .gt(0.5)?
            .logical_or(&d.eq(0.5)?.logical_and(&even.logical_not()?)?)?;
        f.add(&up.where_(1.0, 0.0)?)
    }
    /// `x * x`, elementwise.
    pub fn square(&self) -> Result<Tensor> {
        self.mul(self)
    }
    /// `|x|`; its derivative at 0 is 0, as in PyTorch, and `abs(-0.0)` is `+0.0`.
    pub fn abs(&self) -> Result<Tensor> {
        let x = self.eq(0)?.where_(self.zeros_like(), self)?;
        self.lt(0)?.where_(&self.neg()?, &x)
    }
    /// -1, 0 or 1 by the sign of `x`, in `x`'s dtype.
    pub fn sign(&self) -> Result<Tensor> {
        let neg = self.lt(0)?.where_(-1.0, 1.0)?.cast(self.dtype())?;
        self.eq(0)?.where_(self.zeros_like(), &neg)
    }
    /// `self ** rhs`. Negative bases work for integer exponents. A scalar integer exponent
    /// multiplies (exact, and its gradient at 0 is right: no `log2(0)` on the way). Otherwise
    /// `exp2(b * log2|a|)`, with the log taken of 1 where `a == 0` so that the branch not taken
    /// cannot poison the gradient with 0·inf: at `a == 0` the derivative in `a` is then 0 (PyTorch:
    /// `b * 0**(b-1)`, which differs for `b <= 1`) and the derivative in `b` is 0, as in PyTorch.
    pub fn pow(&self, rhs: impl Into<Operand>) -> Result<Tensor> {
        let rhs = rhs.into();
        let int_exp = match rhs {
            Operand::Float(v) if v.fract() == 0.0 && v.abs() <= 64.0 => Some(v as i64),
            Operand::Int(v) if v.abs() <= 64 => Some(v),
            _ => None,
        };
        if let Some(n) = int_exp {
            return self.to_float("pow")?.powi(n);
        }
        let (a, b) = self.broadcast_pair("pow", rhs)?;
        let (a, b) = (a.to_float("pow")?, b.to_float("pow")?);
        let (zero, abs) = (a.eq(0.0)?, a.abs()?);
        let mag = zero.where_(1.0, &abs)?.log2()?.mul(&b)?.exp2()?;
        // 0 ** b: 0 for b > 0, 1 for b == 0, inf for b < 0.
        let at_zero = b
            .lt(0.0)?
            .where_(f64::INFINITY, &b.eq(0.0)?.where_(1.0, 0.0)?)?;
        // Negative base: the sign flips for odd integer exponents (NaN for non-integers).
        let b_int = b.trunc()?.eq(&b)?;
        let odd = b.fmod(2.0)?.abs()?.eq(1.0)?;
        let neg = a.lt(0.0)?;
        let sign = neg.logical_and(&odd)?.where_(-1.0, 1.0)?;
        let nan = neg.logical_and(&b_int.logical_not()?)?;
        let r = zero.where_(&at_zero, &mag.mul(&sign)?)?;
        let r = nan.where_(f64::NAN, &r)?;
        // x ** 0 is 1 for infinite and NaN bases too (finite ones get it from exp2(0)).
        let inf_or_nan = abs.lt(f64::INFINITY)?.logical_not()?;
        b.eq(0.0)?.logical_and(&inf_or_nan)?.where_(1.0, &r)
    }
    /// `self ** n` by repeated squaring.
    fn powi(&self, n: i64) -> Result<Tensor> {
        let (mut base, mut k) = (self.clone(), n.unsigned_abs());
        let mut acc: Option<Tensor> = None;
        while k > 0 {
            if k & 1 == 1 {
                acc = Some(match acc {
                    Some(a) => a.mul(&base)?,
                    None => base.clone(),
                });
            }
            k >>= 1;
            if k > 0 {
                base = base.square()?;
            }
        }
        match acc {
            // 1 everywhere, from a comparison with x (which passes no gradient) so that x
            // stays in the graph and gets a zero gradient, as in PyTorch.
            None => self.eq(self)?.where_(1.0, 1.0),
            Some(a) if n < 0 => a.reciprocal(),
            Some(a) => Ok(a),
        }
    }
    /// `max(x, 0)`; the derivative at 0 is 0 (PyTorch).
    pub fn relu(&self) -> Result<Tensor> {
        self.gt(0)?.where_(self, 0)
    }
    /// `hardtanh(x, 0, 6)`: the derivative is 0 at 0 and at 6 (PyTorch).
    pub fn relu6(&self) -> Result<Tensor> {
        self.clip(0.0, 6.0)
    }
    /// The derivative at 0 is `neg_slope` (PyTorch).
    pub fn leaky_relu(&self, neg_slope: f64) -> Result<Tensor> {
        self.gt(0)?.where_(self, &self.mul(neg_slope)?)
    }
    /// The derivative at 0 is `alpha` (PyTorch).
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        let x = self.to_float("elu")?;
        let pos = x.gt(0)?;
        // exp of the non-positive part only: the branch not taken must not overflow, or its
        // zero gradient times an infinite exp poisons the where with NaN.
        let e = pos.where_(0.0, &x)?.exp()?.sub(1.0)?.mul(alpha)?;
        pos.where_(&x, &e)
    }
    /// `1 / (1 + exp(-x))` as `1 / (1 + e)` or `e / (1 + e)` with `e = exp(-|x|)`: nothing
    /// overflows at saturated inputs, forward or backward (the derivative via the primitives
    /// stays finite), and the tail keeps its tiny values. The quotient is a product with the
    /// reciprocal, whose derivative reuses it (`-r²`): the backward pass divides once per
    /// element, where a quotient's rule divides twice more (`g / d`, `g·n / d²`).
    pub fn sigmoid(&self) -> Result<Tensor> {
        let x = self.to_float("sigmoid")?;
        // The branch is chosen by the sign of x, not through |x|, whose kink at 0 would cut the
        // derivative there.
        let pos = x.ge(0.0)?;
        let e = pos.where_(&x.neg()?, &x)?.exp()?;
        pos.where_(1.0, &e)?.mul(&e.add(1.0)?.reciprocal()?)
    }
    /// The hyperbolic tangent, elementwise.
    pub fn tanh(&self) -> Result<Tensor> {
        self.mul(2.0)?.sigmoid()?.mul(2.0)?.sub(1.0)
    }
    /// GELU, tanh approximation.
    pub fn gelu(&self) -> Result<Tensor> {
        let x = self.to_float("gelu")?;
        // 0.5 x (1 + tanh(u)), u = √(2/π) (x + 0.044715 x³), computed as x σ(2u): the same
        // function (1 + tanh(u) = 2σ(2u)) without the round trip `2σ - 1 + 1`. Its gradient
        // takes 38 vector operations per 16 outputs where the tanh form took 46 (the medium
        // GPT's MLP input gradient computes it after 128 multiply-adds per output).
        let inner = x
            .mul(&x.square()?.mul(0.044715)?.add(1.0)?)?
            .mul(2.0 * (2.0 / std::f64::consts::PI).sqrt())?;
        x.mul(&inner.sigmoid()?)
    }
    /// `x * sigmoid(x)` (SiLU), elementwise.
    pub fn silu(&self) -> Result<Tensor> {
        self.mul(&self.sigmoid()?)
    }
    /// `silu` under its other name.
    pub fn swish(&self) -> Result<Tensor> {
        self.silu()
    }
    /// log(1 + exp(x)), computed stably as `max(x, 0) + log(1 + exp(-|x|))`; the tie of the
    /// `max` at 0 gives the derivative sigmoid(0) = 1/2 there.
    pub fn softplus(&self) -> Result<Tensor> {
        let x = self.to_float("softplus")?;
        x.maximum(0.0)?.add(&x.log1p_exp_neg_abs()?)
    }
    /// `log(1 + exp(-|x|))`, which never overflows.
    pub(crate) fn log1p_exp_neg_abs(&self) -> Result<Tensor> {
        self.abs()?.neg()?.exp()?.add(1.0)?.log()
    }
    /// `x * tanh(softplus(x))` (Mish), elementwise.
    pub fn mish(&self) -> Result<Tensor> {
        self.mul(&self.softplus()?.tanh()?)
    }
    /// `clip(x, min, max)`: the derivative is 0 at the bounds (PyTorch).
    pub fn hardtanh(&self, min: f64, max: f64) -> Result<Tensor> {
        self.clip(min, max)
    }
    /// `clip(x / 6 + 1/2, 0, 1)`: the derivative is 0 at ±3 (PyTorch).
    pub fn hardsigmoid(&self) -> Result<Tensor> {
        self.div(6.0)?.add(0.5)?.clip(0.0, 1.0)
    }
    /// `x * relu6(x + 3) / 6`: the derivative is 0 at -3 and 1 at 3 (PyTorch).
    pub fn hardswish(&self) -> Result<Tensor> {
        self.mul(&self.add(3.0)?.relu6()?)?.div(6.0)
    }
    /// `clip` with either bound optional (tinygrad's and PyTorch's `clamp`).
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        match (min, max) {
            (Some(lo), Some(hi)) => self.clip(lo, hi),
            (Some(lo), None) => self.clip(lo, f64::INFINITY),
            (None, Some(hi)) => self.clip(f64::NEG_INFINITY, hi),
            (None, None) => bail!(Shape, "clamp: needs min, max or both"),
        }
    }
    /// Values below `min` become `min`, above `max` become `max`; NaN stays NaN. As PyTorch's
    /// `clamp` with scalar bounds, the derivative at either bound is 0.
    pub fn clip(&self, min: f64, max: f64) -> Result<Tensor> {
        if min > max {
            bail!(Shape, "clip: min {min} is greater than max {max}");
        }
        let hi = self.ge(max)?.where_(max, self)?;
        self.le(min)?.where_(min, &hi)
    }
}

impl Tensor {
    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.dtype().size()
    }
    /// Bytes of the whole tensor's data.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.element_size()
    }
    /// Whether the dtype is a float (`F16`, `BF16` or `F32`).
    pub fn is_floating_point(&self) -> bool {
        self.dtype().is_float()
    }
    /// The size of axis `axis` (negative counts from the end).
    pub fn size(&self, axis: isize) -> Result<usize> {
        Ok(self.shape()[norm_axis("size", axis, self.ndim())?])
    }
    /// Axes 0 and 1 swapped (tinygrad's `T`, the transpose of a matrix; see `t` for the last
    /// two axes).
    #[allow(non_snake_case)]
    pub fn T(&self) -> Result<Tensor> {
        self.transpose(1, 0)
    }
    /// `to` in place: this handle (and its clones) moves to `device`; a realized tensor is
    /// copied there now and stays a leaf.
    pub fn to_(&self, device: Device) -> Result<Tensor> {
        let t = self.to(device)?;
        if self.lazy().shards.iter().all(|n| n.is_realized()) {
            t.realize()?;
            self.set_lazy((*t.detach().lazy()).clone());
        } else {
            self.set_lazy((*t.lazy()).clone());
        }
        Ok(self.clone())
    }
    /// This tensor placed like `other`: on its devices, split the same way.
    pub fn shard_like(&self, other: &Tensor) -> Result<Tensor> {
        if self.shape() != other.shape() {
            bail!(
                Shape,
                "shard_like: shape {:?} differs from {:?}",
                self.shape(),
                other.shape()
            );
        }
        let l = other.lazy();
        self.shard(
            &l.devices(),
            l.axis.filter(|_| l.is_multi()).map(|a| a as isize),
        )
    }
    /// Apply `layers` in order (tinygrad's `sequential`).
    pub fn sequential<F: Fn(&Tensor) -> Result<Tensor>>(&self, layers: &[F]) -> Result<Tensor> {
        layers.iter().try_fold(self.clone(), |x, f| f(&x))
    }
}
