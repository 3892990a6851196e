//! The primitive ops and the lazy graph they form. Every Tensor op is built from these; movement
//! ops are nodes here too and become views (`shape::ShapeTracker`) when the scheduler folds them.

use crate::dtype::DType;
use crate::runtime::{Buffer, Device};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Exp2,
    Log2,
    Sin,
    Sqrt,
    Recip,
    Trunc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Mul,
    /// True division for floats, truncating division for integers.
    Div,
    Mod,
    Max,
    CmpLt,
    CmpEq,
    CmpNe,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

impl BinaryOp {
    pub fn is_cmp(self) -> bool {
        matches!(self, BinaryOp::CmpLt | BinaryOp::CmpEq | BinaryOp::CmpNe)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
}

impl ReduceOp {
    pub fn identity(self, dtype: DType) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => dtype.min_value(),
        }
    }
}

/// One node kind of the lazy graph.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A realized buffer (a leaf).
    Buffer,
    /// A scalar broadcast to the node's shape.
    Const(f64),
    /// `0, 1, 2, ...` along a 1-D shape (i32): the only index-valued leaf, used by arange,
    /// one-hot indexing and argmax so that the rewrite rules can see through them.
    Iota,
    Unary(UnaryOp),
    Binary(BinaryOp),
    Where,
    Cast(DType),
    /// Reduce the given axes to size 1 (keepdim shape).
    Reduce(ReduceOp, Vec<usize>),
    Reshape,
    Permute(Vec<usize>),
    Expand,
    Pad(Vec<(usize, usize)>),
    Shrink(Vec<(usize, usize)>),
    Flip(Vec<bool>),
    /// Force the source into its own buffer.
    Contiguous,
    /// Identity that stops gradients.
    Detach,
    /// Write src[1] into src[0]'s buffer in place; the node's value is the written buffer.
    Assign,
    /// Move src[0] to this node's device.
    Copy,
}

impl Op {
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape | Op::Permute(_) | Op::Expand | Op::Pad(_) | Op::Shrink(_) | Op::Flip(_)
        )
    }
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_))
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A node of the lazy graph. `src` is dropped once the node is realized and no gradient can
/// flow through it any more, so long training loops do not keep old graphs alive.
#[derive(Debug)]
pub struct UOp {
    pub id: u64,
    pub op: Op,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub device: Device,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    src: Vec<Arc<UOp>>,
    buffer: Option<Arc<Buffer>>,
}

impl UOp {
    pub fn new(
        op: Op,
        dtype: DType,
        shape: Vec<usize>,
        device: Device,
        src: Vec<Arc<UOp>>,
    ) -> Arc<UOp> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Arc::new(UOp {
            id,
            op,
            dtype,
            shape,
            device,
            state: Mutex::new(State { src, buffer: None }),
        })
    }
    pub fn from_buffer(buf: Arc<Buffer>, dtype: DType, shape: Vec<usize>) -> Arc<UOp> {
        let u = UOp::new(Op::Buffer, dtype, shape, buf.device, vec![]);
        u.lock().buffer = Some(buf);
        u
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn src(&self) -> Vec<Arc<UOp>> {
        self.lock().src.clone()
    }
    pub fn buffer(&self) -> Option<Arc<Buffer>> {
        self.lock().buffer.clone()
    }
    pub fn is_realized(&self) -> bool {
        self.lock().buffer.is_some()
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// Record the buffer holding this node's value; forget the sources unless autograd may
    /// still need them.
    pub fn set_buffer(&self, buf: Arc<Buffer>, keep_src: bool) {
        let mut st = self.lock();
        st.buffer = Some(buf);
        if !keep_src {
            st.src.clear();
        }
    }
}
