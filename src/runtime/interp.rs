//! The interpreter backend: executes a `LinearKernel` directly, a block of invocations at a
//! time in lockstep (every instruction for every invocation of the block before the next), with
//! the op semantics of `ops::exec_*`. A kernel with workgroups runs one workgroup per block, so
//! lockstep is what a barrier asks for and the workgroup arrays live with the block. It is the reference every other backend is
//! diffed against, and it runs everywhere (wasm included). Loads and stores are bounds-checked:
//! a bad index is an error, never undefined behaviour.

use super::{
    host_copy_in, host_copy_out, Backend, BoxFuture, Buffer, Device, HostMem, Mem, Program,
    ProgramImpl,
};
use crate::codegen::{Inst, LinearKernel};
use crate::dtype::{read_f64, write_f64, DType};
use crate::error::{bail, Result};
use crate::ops::{
    compute_dtype, exec_binary, exec_cast, exec_unary, round_result, BinaryOp, ReduceOp,
};
use std::sync::Arc;

/// One interpreter instance (`INTERP:n`): its own buffers, the same semantics.
pub struct Interp {
    device: Device,
}

impl Interp {
    pub(crate) fn new(device: Device) -> Interp {
        Interp { device }
    }
}

impl Backend for Interp {
    fn device(&self) -> Device {
        self.device
    }
    fn max_buffers(&self) -> usize {
        usize::MAX
    }
    /// The host's, with subgroups of 8 (a GPU plan's grouped sums go through them, as on a GPU
    /// with subgroups: the reference runs that path too; CPU plans have no groups).
    fn target(&self) -> super::Target {
        super::Target {
            subgroup: if crate::context::subgroups() { 8 } else { 0 },
            ..super::host_target()
        }
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        Ok(Buffer::new(
            self.device,
            bytes,
            Mem::Host(HostMem::new(bytes)?),
        ))
    }
    fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
        host_copy_in(buf, data)
    }
    fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move { host_copy_out(buf) })
    }
    fn compile(&self, k: &LinearKernel) -> Result<Program> {
        if crate::context::debug() >= 4 {
            crate::context::log(&format!("{} ({} invocations):", k.name, k.global_size));
            for i in &k.insts {
                crate::context::log(&format!("  {i:?}"));
            }
        }
        Ok(Program {
            name: k.name.clone(),
            source: String::new(),
            global_size: k.global_size,
            local_size: k.local_size,
            ops: k.ops_per_item() * k.global_size as u64,
            imp: ProgramImpl::Interp(Arc::new(k.clone())),
        })
    }
    fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
        match &p.imp {
            ProgramImpl::Interp(k) => run(k, bufs),
            #[allow(unreachable_patterns)]
            _ => bail!(
                Backend,
                "interp: cannot launch a program compiled for another backend"
            ),
        }
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

const LANES: usize = 64;

/// Run `k` over host buffers (also used by other host backends as a fallback).
pub fn run(k: &LinearKernel, bufs: &[&Buffer]) -> Result<()> {
    if bufs.len() != k.bufs.len() {
        bail!(
            Backend,
            "kernel {} takes {} buffers, got {}",
            k.name,
            k.bufs.len(),
            bufs.len()
        );
    }
    let mem: Vec<(*mut u8, usize)> = bufs
        .iter()
        .map(|b| b.host().map(|h| (h.ptr(), b.size)))
        .collect::<Result<_>>()?;
    // Matching EndLoop of every Loop.
    let mut ends = vec![0usize; k.insts.len()];
    let mut stack = vec![];
    for (i, inst) in k.insts.iter().enumerate() {
        match inst {
            Inst::Loop { .. } => stack.push(i),
            Inst::EndLoop => {
                let Some(s) = stack.pop() else {
                    bail!(Backend, "kernel {}: unbalanced loops", k.name)
                };
                ends[s] = i;
                ends[i] = s;
            }
            _ => {}
        }
    }
    let width = if k.local_size > 1 {
        k.local_size
    } else {
        LANES
    };
    let mut regs = vec![0f64; k.nregs * width];
    let mut shared: Vec<Vec<f64>> = k.shared.iter().map(|&(_, n)| vec![0.0; n]).collect();
    let mut start = 0;
    while start < k.global_size {
        let lanes = width.min(k.global_size - start);
        let b = Block {
            start,
            n: lanes,
            width,
        };
        block(k, &mem, &ends, &mut regs, &mut shared, b)?;
        start += lanes;
    }
    Ok(())
}

/// The invocations `start .. start + n` of a kernel, run together; registers are `width` wide.
#[derive(Clone, Copy)]
struct Block {
    start: usize,
    n: usize,
    width: usize,
}

fn block(
    k: &LinearKernel,
    mem: &[(*mut u8, usize)],
    ends: &[usize],
    regs: &mut [f64],
    shared: &mut [Vec<f64>],
    b: Block,
) -> Result<()> {
    let (start, n, width) = (b.start, b.n, b.width);
    let mut pc = 0;
    let mut loops: Vec<(usize, u32, u32)> = vec![]; // (pc of Loop, counter, size)
    let r = |x: u32| x as usize * width;
    while pc < k.insts.len() {
        match &k.insts[pc] {
            Inst::Const { dst, bits, .. } => regs[r(*dst)..r(*dst) + n].fill(f64::from_bits(*bits)),
            Inst::Gidx { dst } => {
                for l in 0..n {
                    regs[r(*dst) + l] = (start + l) as f64;
                }
            }
            // One workgroup per block: the lane is the local index.
            Inst::Lidx { dst } => {
                for l in 0..n {
                    regs[r(*dst) + l] = l as f64;
                }
            }
            Inst::Wgid { dst } => regs[r(*dst)..r(*dst) + n].fill((start / width) as f64),
            Inst::LoadShared { dst, id, idx, .. } => {
                let s = &shared[*id as usize];
                for l in 0..n {
                    let i = regs[r(*idx) + l];
                    if i < 0.0 || i as usize >= s.len() {
                        bail!(
                            Backend,
                            "kernel {}: workgroup array {id} read at {i}, out of bounds",
                            k.name
                        );
                    }
                    regs[r(*dst) + l] = s[i as usize];
                }
            }
            Inst::StoreShared { id, idx, val, .. } => {
                let s = &mut shared[*id as usize];
                for l in 0..n {
                    let i = regs[r(*idx) + l];
                    if i < 0.0 || i as usize >= s.len() {
                        bail!(
                            Backend,
                            "kernel {}: workgroup array {id} written at {i}, out of bounds",
                            k.name
                        );
                    }
                    s[i as usize] = regs[r(*val) + l];
                }
            }
            // Lockstep: every invocation of the workgroup is here already.
            Inst::Barrier => {}
            Inst::SubgroupSum {
                dst,
                dtype,
                size,
                a,
            } => {
                let (dt, size) = (compute_dtype(*dtype), *size as usize);
                for s in (0..n).step_by(size.max(1)) {
                    let lanes = s..(s + size).min(n);
                    let mut sum = 0.0;
                    for l in lanes.clone() {
                        sum = exec_binary(BinaryOp::Add, dt, sum, regs[r(*a) + l]);
                    }
                    for l in lanes {
                        regs[r(*dst) + l] = sum;
                    }
                }
            }
            Inst::Unary { dst, op, dtype, a } => {
                let dt = compute_dtype(*dtype);
                for l in 0..n {
                    regs[r(*dst) + l] = exec_unary(*op, dt, regs[r(*a) + l]);
                }
            }
            Inst::Binary {
                dst,
                op,
                dtype,
                a,
                b,
            } => {
                let dt = compute_dtype(*dtype);
                for l in 0..n {
                    regs[r(*dst) + l] = exec_binary(*op, dt, regs[r(*a) + l], regs[r(*b) + l]);
                }
            }
            Inst::Where { dst, c, a, b, .. } => {
                for l in 0..n {
                    regs[r(*dst) + l] = if regs[r(*c) + l] != 0.0 {
                        regs[r(*a) + l]
                    } else {
                        regs[r(*b) + l]
                    };
                }
            }
            Inst::Cast { dst, from, to, a } => {
                let from = compute_dtype(*from);
                for l in 0..n {
                    regs[r(*dst) + l] = exec_cast(from, *to, regs[r(*a) + l]);
                }
            }
            Inst::Load {
                dst,
                slot,
                dtype,
                idx,
                gate,
            } => {
                for l in 0..n {
                    if gate.is_some_and(|g| regs[r(g) + l] == 0.0) {
                        regs[r(*dst) + l] = 0.0;
                        continue;
                    }
                    regs[r(*dst) + l] = load(k, mem, *slot, *dtype, regs[r(*idx) + l])?;
                }
            }
            Inst::LoadVec {
                dsts,
                slot,
                dtype,
                idx,
            } => {
                for l in 0..n {
                    let i = regs[r(*idx) + l];
                    for (j, dst) in dsts.iter().enumerate() {
                        regs[r(*dst) + l] = load(k, mem, *slot, *dtype, i + j as f64)?;
                    }
                }
            }
            Inst::StoreVec {
                slot,
                dtype,
                idx,
                vals,
            } => {
                for l in 0..n {
                    let i = regs[r(*idx) + l];
                    for (j, v) in vals.iter().enumerate() {
                        store(k, mem, *slot, *dtype, i + j as f64, regs[r(*v) + l])?;
                    }
                }
            }
            Inst::DefAcc { dst, op, dtype } => regs[r(*dst)..r(*dst) + n].fill(op.identity(*dtype)),
            Inst::Loop { dst, size } => {
                if *size == 0 {
                    pc = ends[pc] + 1;
                    continue;
                }
                loops.push((pc, 0, *size));
                regs[r(*dst)..r(*dst) + n].fill(0.0);
            }
            Inst::EndLoop => {
                let Some(top) = loops.last_mut() else {
                    bail!(Backend, "kernel {}: unbalanced loops", k.name)
                };
                top.1 += 1;
                if top.1 < top.2 {
                    let (lpc, cnt) = (top.0, top.1);
                    if let Inst::Loop { dst, .. } = &k.insts[lpc] {
                        regs[r(*dst)..r(*dst) + n].fill(cnt as f64);
                    }
                    pc = lpc + 1;
                    continue;
                }
                loops.pop();
            }
            Inst::Acc {
                acc,
                fused: Some((x, y)),
                ..
            } => {
                // Registers hold f32 values exactly; `mul_add` rounds once, as an FMA does.
                for l in 0..n {
                    let (a, x, y) = (regs[r(*acc) + l], regs[r(*x) + l], regs[r(*y) + l]);
                    regs[r(*acc) + l] = (x as f32).mul_add(y as f32, a as f32) as f64;
                }
            }
            Inst::Acc {
                acc,
                op,
                dtype,
                val,
                fused: None,
            } => {
                let dt = compute_dtype(*dtype);
                for l in 0..n {
                    let (a, v) = (regs[r(*acc) + l], regs[r(*val) + l]);
                    regs[r(*acc) + l] = match op {
                        ReduceOp::Sum => round_result(dt, a + v),
                        ReduceOp::Max => a.max(v),
                        ReduceOp::Prod => exec_binary(BinaryOp::Mul, dt, a, v),
                    };
                }
            }
            Inst::Store {
                slot,
                dtype,
                idx,
                val,
                gate,
            } => {
                for l in 0..n {
                    if gate.is_some_and(|g| regs[r(g) + l] == 0.0) {
                        continue;
                    }
                    store(k, mem, *slot, *dtype, regs[r(*idx) + l], regs[r(*val) + l])?;
                }
            }
        }
        pc += 1;
    }
    Ok(())
}

/// Element `i` of buffer `slot`, bounds-checked.
fn load(
    k: &LinearKernel,
    mem: &[(*mut u8, usize)],
    slot: u32,
    dtype: DType,
    i: f64,
) -> Result<f64> {
    let (ptr, size) = mem[slot as usize];
    let w = dtype.size();
    if i < 0.0 || (i as usize + 1) * w > size {
        bail!(
            Backend,
            "kernel {}: load of element {i} out of bounds of buffer {slot} ({size} bytes)",
            k.name
        );
    }
    // SAFETY: bounds checked above; buffers outlive the launch.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.add(i as usize * w), w) };
    Ok(read_f64(dtype, bytes))
}

/// Write element `i` of buffer `slot`, bounds-checked.
fn store(
    k: &LinearKernel,
    mem: &[(*mut u8, usize)],
    slot: u32,
    dtype: DType,
    i: f64,
    v: f64,
) -> Result<()> {
    let (ptr, size) = mem[slot as usize];
    let w = dtype.size();
    if i < 0.0 || (i as usize + 1) * w > size {
        bail!(
            Backend,
            "kernel {}: store of element {i} out of bounds of buffer {slot}",
            k.name
        );
    }
    let mut tmp = [0u8; 4];
    write_f64(dtype, v, &mut tmp);
    // SAFETY: bounds checked above; no Rust reference to this memory is alive.
    unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), ptr.add(i as usize * w), w) };
    Ok(())
}
