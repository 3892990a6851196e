//! Memory planning for captured steps: buffers that only live inside one replay (allocated
//! during capture, not inputs, outputs or held by live tensors) are packed into a few shared
//! buffers, reusing one as soon as the last launch reading the previous occupant has run.

use crate::error::Result;
use crate::runtime::{Buffer, Device, Launch};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Default)]
/// What memory planning saved.
pub struct PlanStats {
    /// Bytes of the planned intermediates as captured.
    pub bytes_before: usize,
    /// Bytes of the shared buffers that replace them.
    pub bytes_after: usize,
}

/// Plan the intermediates of a captured step: the buffers of `allocated` that are not in `hold`
/// (keyed by address: inputs, outputs, buffers of live tensors) are packed into shared buffers,
/// each reused once the last launch reading its previous occupant has run, and `launches` are
/// rewritten to bind them. Errors if a shared buffer cannot be allocated.
pub fn plan(
    launches: &mut [Launch],
    allocated: &[Arc<Buffer>],
    hold: &HashSet<usize>,
) -> Result<PlanStats> {
    let key = |b: &Arc<Buffer>| Arc::as_ptr(b) as usize;
    // Lifetimes (first and last launch) of the plannable buffers.
    let candidates: HashSet<usize> = allocated
        .iter()
        .map(key)
        .filter(|k| !hold.contains(k))
        .collect();
    let mut life: HashMap<usize, (usize, usize, Arc<Buffer>)> = HashMap::new();
    for (i, l) in launches.iter().enumerate() {
        for b in l.buffers() {
            let k = key(b);
            if candidates.contains(&k) {
                life.entry(k)
                    .and_modify(|e| e.1 = i)
                    .or_insert((i, i, b.clone()));
            }
        }
    }
    let mut order: Vec<(usize, usize, usize, Arc<Buffer>)> = life
        .into_iter()
        .map(|(k, (s, e, b))| (s, e, k, b))
        .collect();
    order.sort_by_key(|x| (x.0, x.2));
    // Slots of the shared pool: (device, size, free after launch index). A slot grows to its
    // largest occupant.
    let mut slots: Vec<(Device, usize, usize)> = vec![];
    let mut assign: Vec<(usize, usize)> = vec![]; // (buffer key, slot)
    let mut stats = PlanStats::default();
    for (start, end, k, b) in order {
        stats.bytes_before += b.size;
        // A free slot on the same device: the smallest that fits, else the largest (grown).
        let free: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].0 == b.device && slots[i].2 < start)
            .collect();
        let fit = free
            .iter()
            .copied()
            .filter(|&i| slots[i].1 >= b.size)
            .min_by_key(|&i| slots[i].1);
        let pick = fit.or_else(|| free.iter().copied().max_by_key(|&i| slots[i].1));
        let i = match pick {
            Some(i) => i,
            None => {
                slots.push((b.device, 0, 0));
                slots.len() - 1
            }
        };
        slots[i].1 = slots[i].1.max(b.size);
        slots[i].2 = end;
        assign.push((k, i));
    }
    let mut pool: Vec<Arc<Buffer>> = vec![];
    for &(dev, size, _) in &slots {
        pool.push(Arc::new(dev.backend().alloc(size)?));
        stats.bytes_after += size;
    }
    let remap: HashMap<usize, Arc<Buffer>> = assign
        .into_iter()
        .map(|(k, i)| (k, pool[i].clone()))
        .collect();
    if crate::context::debug() >= 3 {
        crate::context::log(&format!(
            "memory plan: {} intermediates, {} shared buffers",
            remap.len() + pool.len(),
            pool.len()
        ));
    }
    for l in launches.iter_mut() {
        for b in l.buffers_mut() {
            if let Some(nb) = remap.get(&key(b)) {
                *b = nb.clone();
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::LinearKernel;
    use crate::runtime::Program;

    fn program() -> Arc<Program> {
        let k = LinearKernel {
            name: "k".into(),
            insts: vec![],
            bufs: vec![],
            global_size: 1,
            local_size: 1,
            shared: vec![],
            nregs: 0,
        };
        Arc::new(Device::Interp.backend().compile(&k).expect("compile"))
    }
    fn buf(bytes: usize) -> Arc<Buffer> {
        Arc::new(Device::Interp.backend().alloc(bytes).expect("alloc"))
    }
    fn kernel(bufs: &[&Arc<Buffer>]) -> Launch {
        Launch::Kernel {
            dev: Device::Interp,
            prog: program(),
            bufs: bufs.iter().map(|b| (*b).clone()).collect(),
        }
    }
    fn key(b: &Arc<Buffer>) -> usize {
        Arc::as_ptr(b) as usize
    }

    #[test]
    fn buffers_with_disjoint_lifetimes_share_one() {
        // x -> a -> b -> c -> out: a dies after launch 1, so c can reuse its memory; b overlaps
        // both and needs its own.
        let (x, out) = (buf(64), buf(64));
        let (a, b, c) = (buf(64), buf(48), buf(64));
        let mut ls = vec![
            kernel(&[&a, &x]),
            kernel(&[&b, &a]),
            kernel(&[&c, &b]),
            kernel(&[&out, &c]),
        ];
        let hold = HashSet::from([key(&x), key(&out)]);
        let allocated = [a.clone(), b.clone(), c.clone(), out.clone()];
        let stats = plan(&mut ls, &allocated, &hold).expect("plan");
        assert_eq!(stats.bytes_before, 64 + 48 + 64);
        assert_eq!(stats.bytes_after, 64 + 48, "c reuses a's buffer");
        let (pa, pb, pc) = (ls[0].buffers()[0], ls[1].buffers()[0], ls[2].buffers()[0]);
        assert!(Arc::ptr_eq(pa, pc), "a and c share");
        assert!(!Arc::ptr_eq(pa, pb), "b overlaps a");
        assert!(
            Arc::ptr_eq(ls[1].buffers()[1], pa),
            "readers follow the remap"
        );
        assert!(
            Arc::ptr_eq(ls[3].buffers()[0], &out),
            "held buffers keep their identity"
        );
        assert!(Arc::ptr_eq(ls[0].buffers()[1], &x));
    }

    #[test]
    fn a_reused_slot_grows_to_its_largest_occupant() {
        let x = buf(16);
        let (a, c) = (buf(32), buf(128));
        let mut ls = vec![kernel(&[&a, &x]), kernel(&[&x, &a]), kernel(&[&c, &x])];
        let stats = plan(&mut ls, &[a, c], &HashSet::from([key(&x)])).expect("plan");
        assert_eq!((stats.bytes_before, stats.bytes_after), (160, 128));
        assert!(Arc::ptr_eq(ls[0].buffers()[0], ls[2].buffers()[0]));
        assert!(ls[2].buffers()[0].size >= 128);
    }
}
