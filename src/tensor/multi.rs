//! Tensors on several devices, as tinygrad's multi-device tensors: what a `Tensor` handle points
//! at is a `Lazy`, one lazy graph per device. Either every graph computes the whole value
//! (replicated), or each computes an equal part along one axis (sharded; part `i` lives on
//! device `i`). An ordinary tensor is the case of one device.
//!
//! Ops are built per shard by one rule per op kind (`apply`): elementwise ops pair the shards
//! (a replicated operand is cut to the sharded one's parts, a view), movement ops map the axis
//! (or refuse to move elements between devices), and a reduction over the sharded axis reduces
//! each part, then all-reduces: every device adds copies of all partial results in device
//! order, so the replicas it produces are bitwise equal. Graphs that read no buffer (constants,
//! `arange`) are rebuilt on each device rather than copied.
//!
//! Autograd needs nothing of its own: it runs on the per-device graphs, which the copies of the
//! all-reduce connect. A sharded leaf's gradient is its parts' gradients; a replicated leaf's is
//! the sum of its replicas' gradients, all-reduced (`leaf_grad`).

use super::{norm_axis, Tensor};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{bail, Error, ErrorKind, Result};
use crate::ops::{BinaryOp, Op, ReduceOp};
use crate::runtime::Buffer;
use crate::uop::UOp;
use std::collections::HashMap;
use std::sync::Arc;

/// The lazy graphs a tensor handle points at: one per device.
#[derive(Clone, Debug)]
pub(crate) struct Lazy {
    /// One node per device, in device order (one for an ordinary tensor).
    pub(crate) shards: Vec<Arc<UOp>>,
    /// The axis the shards split in equal parts, or `None`: each holds the whole value.
    pub(crate) axis: Option<usize>,
    /// The shape of the whole value.
    pub(crate) shape: Vec<usize>,
}

impl Lazy {
    pub(crate) fn one(n: Arc<UOp>) -> Lazy {
        Lazy {
            shape: n.shape.clone(),
            shards: vec![n],
            axis: None,
        }
    }
    /// Shards of equal shape split along `axis` (or replicas for `None`).
    pub(crate) fn multi(shards: Vec<Arc<UOp>>, axis: Option<usize>) -> Lazy {
        let mut shape = shards[0].shape.clone();
        if let Some(a) = axis {
            shape[a] *= shards.len();
        }
        Lazy {
            shards,
            axis,
            shape,
        }
    }
    pub(crate) fn is_multi(&self) -> bool {
        self.shards.len() > 1
    }
    pub(crate) fn devices(&self) -> Vec<Device> {
        self.shards.iter().map(|s| s.device).collect()
    }
    /// The same placement with other nodes.
    pub(crate) fn with(&self, shards: Vec<Arc<UOp>>) -> Lazy {
        Lazy {
            shards,
            axis: self.axis,
            shape: self.shape.clone(),
        }
    }
    /// Where the value lives, for messages: `CPU:0` or `CPU:0, CPU:1 (split along axis 0)`.
    pub(crate) fn placement(&self) -> String {
        let devs = list(&self.devices());
        match (self.is_multi(), self.axis) {
            (false, _) => devs,
            (true, Some(a)) => format!("{devs} (split along axis {a})"),
            (true, None) => format!("{devs} (replicated)"),
        }
    }
}

/// `CPU:0, CPU:1`.
pub(crate) fn list(devices: &[Device]) -> String {
    devices
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shape of one of `n` parts of `shape` split along `axis`.
fn part(shape: &[usize], axis: Option<usize>, n: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    if let Some(a) = axis {
        s[a] /= n;
    }
    s
}

fn node(op: Op, dtype: DType, shape: Vec<usize>, device: Device, src: Vec<Arc<UOp>>) -> Arc<UOp> {
    UOp::new(op, dtype, shape, device, src)
}

/// Part `i` of `n` of `x` along `axis`, as a view. A broadcast along `axis` (a replicated
/// weight meeting a split batch) or a constant is rebuilt at the part's size instead: a shrink
/// of it would make its gradient a pad to the whole size, and every device would then reduce
/// over the whole batch, mostly zeros.
fn cut(x: &Arc<UOp>, axis: usize, i: usize, n: usize) -> Arc<UOp> {
    let s = x.shape[axis] / n;
    let mut shape = x.shape.clone();
    shape[axis] = s;
    match (&x.op, x.src().as_slice()) {
        (Op::Expand, [src]) if src.shape[axis] == 1 => {
            return node(Op::Expand, x.dtype, shape, x.device, vec![src.clone()]);
        }
        (Op::Const(_), []) => return node(x.op.clone(), x.dtype, shape, x.device, vec![]),
        _ => {}
    }
    let arg: Vec<(usize, usize)> = x
        .shape
        .iter()
        .enumerate()
        .map(|(a, &d)| {
            if a == axis {
                (i * s, (i + 1) * s)
            } else {
                (0, d)
            }
        })
        .collect();
    let mut shape = x.shape.clone();
    shape[axis] = s;
    node(Op::Shrink(arg), x.dtype, shape, x.device, vec![x.clone()])
}

/// Whether `n` computes its value without reading a buffer (constants, iota and ops on them).
fn device_free(n: &Arc<UOp>, memo: &mut HashMap<u64, bool>) -> bool {
    if let Some(&v) = memo.get(&n.id) {
        return v;
    }
    let v = !n.is_realized()
        && match n.op {
            Op::Buffer | Op::Copy | Op::Assign => false,
            Op::Const(_) | Op::Iota => true,
            _ => n.src().iter().all(|s| device_free(s, memo)),
        };
    memo.insert(n.id, v);
    v
}

/// The same device-free graph built on `device`.
fn rebuild(n: &Arc<UOp>, device: Device, memo: &mut HashMap<u64, Arc<UOp>>) -> Arc<UOp> {
    if let Some(r) = memo.get(&n.id) {
        return r.clone();
    }
    let src = n.src().iter().map(|s| rebuild(s, device, memo)).collect();
    let r = node(n.op.clone(), n.dtype, n.shape.clone(), device, src);
    memo.insert(n.id, r.clone());
    r
}

/// `x` (one device) placed on `device`: rebuilt there if it reads no buffer, else copied.
fn place(x: &Arc<UOp>, device: Device) -> Arc<UOp> {
    if x.device == device {
        x.clone()
    } else if device_free(x, &mut HashMap::new()) {
        rebuild(x, device, &mut HashMap::new())
    } else {
        node(Op::Copy, x.dtype, x.shape.clone(), device, vec![x.clone()])
    }
}

/// `x` (one device) on each of `devices`: whole (`axis` `None`) or its parts along `axis`.
pub(crate) fn distribute(x: &Arc<UOp>, devices: &[Device], axis: Option<usize>) -> Lazy {
    let n = devices.len();
    let shards = devices
        .iter()
        .enumerate()
        .map(|(i, &d)| match axis {
            Some(a) => place(&cut(x, a, i, n), d),
            None => place(x, d),
        })
        .collect();
    Lazy {
        shards,
        axis,
        shape: x.shape.clone(),
    }
}

/// A replicated value cut into the parts of a split along `axis` (views, no copy).
fn to_split(x: &Lazy, axis: usize) -> Lazy {
    let n = x.shards.len();
    let shards = x
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| cut(s, axis, i, n))
        .collect();
    Lazy {
        shards,
        axis: Some(axis),
        shape: x.shape.clone(),
    }
}

/// Bring every operand onto the devices of the multi-device ones: an ordinary operand that
/// reads no buffer is rebuilt on each device; any other is an error (so is a different device
/// list).
fn align(name: &str, srcs: &[Arc<Lazy>]) -> Result<Vec<Lazy>> {
    let Some(multi) = srcs.iter().find(|l| l.is_multi()) else {
        return Ok(srcs.iter().map(|l| (**l).clone()).collect());
    };
    let devices = multi.devices();
    srcs.iter()
        .map(|l| {
            if l.is_multi() {
                if l.devices() != devices {
                    bail!(
                        Device,
                        "{name}: operands on different devices ({} and {})",
                        multi.placement(),
                        l.placement()
                    );
                }
                return Ok((**l).clone());
            }
            let x = &l.shards[0];
            if !device_free(x, &mut HashMap::new()) {
                bail!(
                    Device,
                    "{name}: mixing a tensor on {} with an unsharded one on {}; shard it too \
                     (shard) or move the sharded one to one device (to)",
                    multi.placement(),
                    l.placement()
                );
            }
            Ok(distribute(x, &devices, None))
        })
        .collect()
}

/// Check that two operands can meet in an elementwise op (the frontend's early check, which
/// names the user's op).
pub(crate) fn check_operands(name: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    let (la, lb) = (a.lazy(), b.lazy());
    if !la.is_multi() && !lb.is_multi() {
        let (da, db) = (la.shards[0].device, lb.shards[0].device);
        if da != db {
            bail!(
                Device,
                "{name}: operands on different devices ({da} and {db})"
            );
        }
        return Ok(());
    }
    let ls = align(name, &[la, lb])?;
    if let (Some(x), Some(y)) = (ls[0].axis, ls[1].axis) {
        if x != y {
            bail!(
                Device,
                "{name}: operands split along different axes ({x} and {y}); move one to one \
                 device (to) and shard it like the other"
            );
        }
    }
    Ok(())
}

/// The name an op's errors go by.
fn op_name(op: &Op) -> String {
    match op {
        Op::Reshape => "reshape".into(),
        Op::Permute(_) => "permute".into(),
        Op::Expand => "expand".into(),
        Op::Pad(_) => "pad".into(),
        Op::Shrink(_) => "shrink".into(),
        Op::Flip(_) => "flip".into(),
        Op::Where => "where".into(),
        Op::Cast(_) => "cast".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

/// `op` with output `shape` over sources of which at least one is on several devices.
pub(crate) fn apply(op: Op, dtype: DType, shape: Vec<usize>, srcs: &[Arc<Lazy>]) -> Result<Lazy> {
    let name = op_name(&op);
    let srcs = align(&name, srcs)?;
    let n = srcs[0].shards.len();
    let devices = srcs[0].devices();
    if op.is_elementwise() || matches!(op, Op::Contiguous | Op::Detach) {
        let mut axis = None;
        for s in &srcs {
            match (axis, s.axis) {
                (Some(a), Some(b)) if a != b => bail!(
                    Device,
                    "{name}: operands split along different axes ({a} and {b})"
                ),
                (None, b) => axis = b,
                _ => {}
            }
        }
        let srcs: Vec<Lazy> = srcs
            .into_iter()
            .map(|s| match (axis, s.axis) {
                (Some(a), None) => to_split(&s, a),
                _ => s,
            })
            .collect();
        let shards = (0..n)
            .map(|i| {
                let src = srcs.iter().map(|s| s.shards[i].clone()).collect();
                node(op.clone(), dtype, part(&shape, axis, n), devices[i], src)
            })
            .collect();
        return Ok(Lazy {
            shards,
            axis,
            shape,
        });
    }
    let x = &srcs[0];
    if let Op::Reduce(r, axes) = &op {
        return Ok(reduce(x, *r, axes, dtype));
    }
    if !op.is_movement() {
        bail!(Other, "internal: {name} cannot be applied per shard");
    }
    let Some(a) = x.axis else {
        let shards = x
            .shards
            .iter()
            .map(|s| node(op.clone(), dtype, shape.clone(), s.device, vec![s.clone()]))
            .collect();
        return Ok(Lazy {
            shards,
            axis: None,
            shape,
        });
    };
    let refuse = |what: &str| -> Error {
        Error::new(
            ErrorKind::Shape,
            format!(
                "{name}: cannot {what} axis {a} of {:?}, which is split over {}; move it to one \
                 device first (to)",
                x.shape,
                list(&devices)
            ),
        )
    };
    let (axis, arg) = match &op {
        Op::Reshape => {
            // The new axis starts after the same elements as the old one, and splits evenly:
            // then every device keeps exactly its elements.
            let before: usize = x.shape[..a].iter().product();
            let mut acc = 1;
            let mut found = None;
            for (b, &d) in shape.iter().enumerate() {
                if acc == before && d % n == 0 {
                    found = Some(b);
                    break;
                }
                acc *= d;
            }
            let Some(b) = found else {
                bail!(
                    Shape,
                    "reshape: {:?} into {shape:?} would move elements between the devices \
                     {:?} is split over along axis {a} ({}); move it to one device first (to)",
                    x.shape,
                    x.shape,
                    list(&devices)
                )
            };
            (b, Op::Reshape)
        }
        Op::Permute(p) => (p.iter().position(|&q| q == a).unwrap_or(a), op.clone()),
        Op::Expand => {
            if shape[a] != x.shape[a] {
                return Err(refuse("expand"));
            }
            (a, Op::Expand)
        }
        Op::Pad(p) => {
            if p[a] != (0, 0) {
                return Err(refuse("pad"));
            }
            (a, op.clone())
        }
        Op::Shrink(arg) => {
            if arg[a] != (0, x.shape[a]) {
                return Err(refuse("shrink"));
            }
            let mut arg = arg.clone();
            arg[a] = (0, x.shape[a] / n);
            (a, Op::Shrink(arg))
        }
        Op::Flip(f) => {
            if f[a] {
                return Err(refuse("flip"));
            }
            (a, op.clone())
        }
        _ => unreachable!("movement ops are matched above"),
    };
    let shards = x
        .shards
        .iter()
        .map(|s| {
            node(
                arg.clone(),
                dtype,
                part(&shape, Some(axis), n),
                s.device,
                vec![s.clone()],
            )
        })
        .collect();
    Ok(Lazy {
        shards,
        axis: Some(axis),
        shape,
    })
}

/// `op` on every shard of one source, each output shaped like its input (unary ops, contiguous,
/// detach): these never mix shards.
pub(crate) fn each(x: &Lazy, f: impl Fn(&Arc<UOp>) -> Arc<UOp>) -> Lazy {
    x.with(x.shards.iter().map(f).collect())
}

/// Reduce `axes` of every shard; over the split axis the partial results are all-reduced.
pub(crate) fn reduce(x: &Lazy, r: ReduceOp, axes: &[usize], dtype: DType) -> Lazy {
    let parts: Vec<Arc<UOp>> = x
        .shards
        .iter()
        .map(|s| {
            let mut shape = s.shape.clone();
            for &a in axes {
                shape[a] = 1;
            }
            node(
                Op::Reduce(r, axes.to_vec()),
                dtype,
                shape,
                s.device,
                vec![s.clone()],
            )
        })
        .collect();
    let combine = r.combine();
    match x.axis {
        Some(a) if axes.contains(&a) => Lazy::multi(all_reduce(&parts, combine), None),
        axis => Lazy::multi(parts, axis),
    }
}

/// On every device, `op` over copies of all `parts` in device order (a naive all-reduce: the
/// result is the same bits everywhere).
fn all_reduce(parts: &[Arc<UOp>], op: BinaryOp) -> Vec<Arc<UOp>> {
    // Each part in a buffer of its own: it is read by its device's sum and by the copies, and
    // fused into the sum it would be computed twice.
    let parts: Vec<Arc<UOp>> = parts
        .iter()
        .map(|p| {
            if p.is_realized() || p.op == Op::Contiguous {
                p.clone()
            } else {
                node(
                    Op::Contiguous,
                    p.dtype,
                    p.shape.clone(),
                    p.device,
                    vec![p.clone()],
                )
            }
        })
        .collect();
    parts
        .iter()
        .map(|home| {
            let mut acc: Option<Arc<UOp>> = None;
            for p in &parts {
                let x = place(p, home.device);
                acc = Some(match acc {
                    None => x,
                    Some(a) => node(
                        Op::Binary(op),
                        a.dtype,
                        a.shape.clone(),
                        home.device,
                        vec![a, x],
                    ),
                });
            }
            acc.unwrap_or_else(|| home.clone())
        })
        .collect()
}

/// The gradient of a leaf placed as `leaf` from the gradients of its shards (one per shard, on
/// the shard's device): a split leaf's gradient is split the same way; a replicated leaf's is
/// the sum over its replicas, on every device.
pub(crate) fn leaf_grad(leaf: &Lazy, grads: Vec<Arc<UOp>>) -> Lazy {
    match leaf.axis {
        Some(_) => leaf.with(grads),
        None if grads.len() > 1 => leaf.with(all_reduce(&grads, BinaryOp::Add)),
        None => leaf.with(grads),
    }
}

/// The whole value of `x` on `device` (a copy of one replica, or the parts copied and joined).
pub(crate) fn gather(x: &Lazy, device: Device) -> Result<Tensor> {
    let Some(a) = x.axis else {
        let s = x
            .shards
            .iter()
            .find(|s| s.device == device)
            .unwrap_or(&x.shards[0]);
        return Ok(Tensor::from_node(place(s, device)));
    };
    let parts: Vec<Tensor> = x
        .shards
        .iter()
        .map(|s| Tensor::from_node(place(s, device)))
        .collect();
    Tensor::cat(&parts.iter().collect::<Vec<_>>(), a as isize)
}

impl Tensor {
    /// A tensor over realized buffers, one per device: the parts of a split along `axis`, or
    /// replicas (a TinyJit replay's outputs).
    pub(crate) fn from_buffers(
        bufs: &[Arc<Buffer>],
        dtype: DType,
        shape: &[usize],
        axis: Option<usize>,
    ) -> Tensor {
        let axis = if bufs.len() > 1 { axis } else { None };
        let each = part(shape, axis, bufs.len());
        let shards = bufs
            .iter()
            .map(|b| UOp::from_buffer(b.clone(), dtype, each.clone()))
            .collect();
        Tensor::from_lazy(Lazy::multi(shards, axis))
    }
    /// `assign` where the target or the value is on several devices: the value must be placed
    /// like the target (a replicated value is cut to a split target's parts).
    pub(crate) fn assign_multi(&self, value: &Tensor) -> Result<Tensor> {
        let (t, v) = (self.lazy(), value.lazy());
        if t.shape != v.shape || self.dtype() != value.dtype() {
            let kind = if t.shape != v.shape {
                ErrorKind::Shape
            } else {
                ErrorKind::DType
            };
            return Err(Error::new(
                kind,
                format!(
                    "assign: value {:?} {} does not match target {:?} {}",
                    v.shape,
                    value.dtype(),
                    t.shape,
                    self.dtype()
                ),
            ));
        }
        let v = align("assign", &[t.clone(), v])?.remove(1);
        let v = match (t.axis, v.axis) {
            (Some(a), None) if t.is_multi() => to_split(&v, a),
            _ => v,
        };
        if v.devices() != t.devices() || (t.is_multi() && v.axis != t.axis) {
            bail!(
                Device,
                "assign: value on {} does not match target on {}",
                v.placement(),
                t.placement()
            );
        }
        if t.shards
            .iter()
            .any(|n| !n.is_realized() && n.op != Op::Assign)
        {
            // The target must own buffers to write into (pending assigns will have them).
            self.realize()?;
        }
        let t = self.lazy();
        let shards = t
            .shards
            .iter()
            .zip(&v.shards)
            .map(|(n, x)| {
                node(
                    Op::Assign,
                    n.dtype,
                    n.shape.clone(),
                    n.device,
                    vec![n.clone(), x.clone()],
                )
            })
            .collect();
        self.set_lazy(t.with(shards));
        Ok(self.clone())
    }
}

/// Check a device list for `shard` and normalize the axis.
pub(crate) fn check_shard(
    shape: &[usize],
    devices: &[Device],
    axis: Option<isize>,
) -> Result<Option<usize>> {
    if devices.is_empty() {
        bail!(Device, "shard: no devices given");
    }
    for (i, d) in devices.iter().enumerate() {
        if devices[..i].contains(d) {
            bail!(Device, "shard: device {d} is listed twice");
        }
        if let Err(e) = d.available() {
            bail!(Device, "shard: device {d} is unavailable: {e}");
        }
    }
    let Some(axis) = axis else {
        return Ok(None);
    };
    let a = norm_axis("shard", axis, shape.len())?;
    if shape.is_empty() {
        bail!(
            Shape,
            "shard: a 0-dimensional tensor has no axis {axis} to split"
        );
    }
    let n = devices.len();
    if shape[a] % n != 0 {
        bail!(
            Shape,
            "shard: axis {a} of shape {shape:?} (size {}) does not split evenly over {n} devices",
            shape[a]
        );
    }
    Ok(Some(a))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    fn devs() -> Vec<Device> {
        (0..2).map(|i| Device::Interp.with_index(i)).collect()
    }

    fn data(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
        crate::context::Context::new()
            .dev(Device::Interp)
            .run(|| Tensor::from_vec(v, shape).expect("tensor"))
    }

    #[test]
    fn reshapes_keep_the_split_axis_where_no_element_moves() {
        let x = data(&[4, 3, 2]).shard(&devs(), Some(0)).expect("shard");
        let y = x.reshape(&[4, 6]).expect("reshape");
        assert_eq!(y.lazy().axis, Some(0));
        assert_eq!(y.lazy().shards[0].shape, vec![2, 6]);
        let z = x
            .reshape(&[1, 24])
            .expect("flatten the split axis into the next");
        assert_eq!(
            (z.lazy().axis, z.lazy().shards[0].shape.clone()),
            (Some(1), vec![1, 12])
        );
        let e = x.reshape(&[3, 8]).expect_err("rows would cross devices");
        assert!(e.msg.contains("reshape") && e.msg.contains("move"), "{e}");
        let p = x.permute(&[2, 0, 1]).expect("permute");
        assert_eq!(p.lazy().axis, Some(1));
        assert_eq!(
            p.to_vec::<f32>().expect("read"),
            data(&[4, 3, 2])
                .permute(&[2, 0, 1])
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        );
    }

    #[test]
    fn a_reduction_over_the_split_axis_all_reduces() {
        let x = data(&[4, 3]).shard(&devs(), Some(0)).expect("shard");
        let s = x.sum(0, false).expect("sum");
        let l = s.lazy();
        assert_eq!((l.axis, l.devices()), (None, devs()));
        for shard in s.shards() {
            assert_eq!(shard.to_vec::<f32>().expect("read"), vec![18.0, 22.0, 26.0]);
        }
        let rows = x.sum(1, false).expect("sum over the other axis");
        assert_eq!(rows.lazy().axis, Some(0));
        assert_eq!(
            rows.to_vec::<f32>().expect("read"),
            vec![3.0, 12.0, 21.0, 30.0]
        );
    }
}
