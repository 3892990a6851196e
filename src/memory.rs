//! Memory planning for captured steps: buffers that only live inside one replay (allocated
//! during capture, not inputs, outputs or held by live tensors) are packed into a few shared
//! buffers, reusing one as soon as the last launch reading the previous occupant has run.

use crate::error::Result;
use crate::jit::Launch;
use crate::runtime::{Buffer, Device};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Default)]
pub struct PlanStats {
    /// Bytes of the planned intermediates as captured.
    pub bytes_before: usize,
    /// Bytes of the shared buffers that replace them.
    pub bytes_after: usize,
}

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
