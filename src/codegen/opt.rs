//! Kernel optimization between lowering and linearizing: choose which output axes to upcast
//! (compute several outputs per invocation so loads not depending on those axes are shared and
//! the reduce loop carries several accumulators), by lowering candidates and keeping the one
//! with the fewest loads per output.

use super::lower::{loads_per_output, lower, Lowered, Upcast};
use crate::kernel::KernelAst;

/// Outputs one invocation may compute (accumulators beyond the register file spill to L1,
/// which still beats re-streaming the reduce's inputs from memory).
const MAX_UPCAST: usize = 36;

/// Lower a kernel, choosing the upcasts (up to three output axes, at most `MAX_UPCAST` outputs
/// per invocation) that need the fewest loads per output element. Only kernels with a reduce loop
/// benefit; elementwise kernels are lowered as they are.
pub fn optimize(ast: &KernelAst) -> Lowered {
    let plain = lower(ast, &[]);
    let has_loop = plain.graph.ranges.iter().any(|&r| r != 0);
    if !has_loop || !crate::context::upcast_enabled() {
        return plain;
    }
    let options = |chosen: &[Upcast]| -> Vec<Vec<Upcast>> {
        let used: usize = chosen.iter().map(|u| u.amount).product();
        let mut out = vec![];
        for (axis, &size) in ast.root.shape.iter().enumerate() {
            if chosen.iter().any(|u| u.axis == axis) {
                continue;
            }
            for amount in [16, 9, 8, 4, 3, 2] {
                if size % amount == 0 && used * amount <= MAX_UPCAST {
                    let mut v = chosen.to_vec();
                    v.push(Upcast { axis, amount });
                    out.push(v);
                }
            }
        }
        out
    };
    let mut best = (loads_per_output(&plain), plain, vec![]);
    for _round in 0..3 {
        let chosen = best.2.clone();
        let mut improved = false;
        for cand in options(&chosen) {
            let l = lower(ast, &cand);
            let cost = loads_per_output(&l);
            if cost < best.0 * 0.95 {
                best = (cost, l, cand);
                improved = true;
            }
        }
        if !improved {
            break;
        }
    }
    best.1
}
