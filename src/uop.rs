//! The node of the lazy graph: an `Op` with its dtype, shape, device and sources, and once
//! realized the buffer holding its value. Tensors are handles to these; the scheduler turns the
//! graph below some targets into kernels.

use crate::device::Device;
use crate::dtype::DType;
use crate::ops::Op;
use crate::runtime::Buffer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A node of the lazy graph. `src` is dropped once the node is realized and no gradient can
/// flow through it any more, so long training loops do not keep old graphs alive.
#[derive(Debug)]
pub struct UOp {
    /// Unique within the process, in creation order (sources have smaller ids).
    pub id: u64,
    /// What the node computes.
    pub op: Op,
    /// The element type of its value.
    pub dtype: DType,
    /// The shape of its value.
    pub shape: Vec<usize>,
    /// The device its value lives on.
    pub device: Device,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    src: Vec<Arc<UOp>>,
    buffer: Option<Arc<Buffer>>,
}

impl UOp {
    /// A new node (not realized) computing `op` over `src`.
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
    /// A realized leaf holding `buf`, viewed as `shape` elements of `dtype`.
    pub fn from_buffer(buf: Arc<Buffer>, dtype: DType, shape: Vec<usize>) -> Arc<UOp> {
        let u = UOp::new(Op::Buffer, dtype, shape, buf.device, vec![]);
        u.lock().buffer = Some(buf);
        u
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The node's sources (empty once it is realized and autograd no longer needs them).
    pub fn src(&self) -> Vec<Arc<UOp>> {
        self.lock().src.clone()
    }
    /// The buffer holding the node's value, once realized.
    pub fn buffer(&self) -> Option<Arc<Buffer>> {
        self.lock().buffer.clone()
    }
    /// Whether the node's value is in a buffer.
    pub fn is_realized(&self) -> bool {
        self.lock().buffer.is_some()
    }
    /// The number of elements of its shape.
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

impl UOp {
    /// The graph below this node, one line per node (sources first); realized nodes are leaves.
    pub fn tree(&self) -> String {
        use std::collections::HashSet;
        use std::fmt::Write;
        fn visit(n: &UOp, seen: &mut HashSet<u64>, out: &mut String) {
            if !seen.insert(n.id) {
                return;
            }
            let src = if n.is_realized() { vec![] } else { n.src() };
            for s in &src {
                visit(s, seen, out);
            }
            let ids: Vec<u64> = src.iter().map(|s| s.id).collect();
            let what = if n.is_realized() {
                "realized".to_string()
            } else {
                format!("{ids:?}")
            };
            let _ = writeln!(
                out,
                "  #{} {:?} {} {:?} on {} <- {what}",
                n.id, n.op, n.dtype, n.shape, n.device
            );
        }
        let mut out = String::new();
        visit(self, &mut HashSet::new(), &mut out);
        out
    }
}
