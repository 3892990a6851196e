//! BEAM search: tune one scheduled kernel on the device that will run it. Candidates are plans
//! (`codegen::Plan`: split the reduce or not, then each kernel's actions: upcast, local, group,
//! unroll) built from the heuristic's plan by one action at a time; each is compiled, run on
//! random inputs, checked against the heuristic plan's output, and timed (device timers
//! where the backend has them, the host clock otherwise). A beam of the `width` fastest is kept
//! per round, until a round improves nothing or the time budget (`BEAM_BUDGET_MS`) is spent.
//! The winner is cached on disk per (device, kernel) (`~/.cache/wgrad/beam`, `WGRAD_CACHE_DIR`;
//! `IGNORE_BEAM_CACHE=1` skips it), so the next run searches nothing.
//!
//! Sits beside `realize` in the engine: it launches kernels directly on the backend, outside
//! any capture, so a TinyJit capturing a step records only the chosen kernels.

use crate::codegen::lower::{aligned_reduce, check, Opts};
use crate::codegen::{compile_plan, default_plan, split, BufRef, OptTarget, Plan, Target};
use crate::context::{beam_budget_ms, debug, ignore_beam_cache, log};
use crate::device::Device;
use crate::dtype::{read_f64, DType};
use crate::error::Result;
use crate::kernel::{AstOp, KernelAst};
use crate::runtime::{Backend, Buffer, Program};
use std::collections::HashSet;
use std::sync::Arc;

// Per thread, as searches run on the thread that asks for the plan (tests count their own
// searches while other threads search too).
thread_local! {
    static TIMED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Candidates timed by searches on this thread (a search answered by the cache times none).
pub fn candidates_timed() -> u64 {
    TIMED.with(|t| t.get())
}

/// The cache key of a kernel on a device, searched at `width` for `target`.
fn key(dev: Device, ast: &KernelAst, target: &Target, width: u32) -> String {
    // The lanes too: a plan searched for 512-bit vectors is not the one for 256-bit ones
    // (`CPU_LANES`).
    format!(
        "{}\nwidth {width}\n{:?} lanes {}\n{}",
        dev.backend().cache_key(),
        target.kind,
        target.lanes,
        ast.key()
    )
}

/// The key of the heuristic plan of a kernel: the plan depends only on the kernel, the target
/// (its limits included), the cores (the CPU heuristics spread work over them) and the
/// optimizer's code, which the build fingerprints.
fn heuristic_key(dev: Device, ast: &KernelAst, target: &Target) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "{}
heuristic {}
cores {cores}
{target:?}
{}",
        dev.backend().cache_key(),
        env!("WGRAD_PLANS_FINGERPRINT"),
        ast.key()
    )
}

/// The heuristic plan remembered for `ast` (in this process, or on disk by an earlier one:
/// `~/.cache/wgrad/plans`), so a kernel is planned once per build, not once per process: the
/// CPU's upcast search is most of a first step's time. `None` when there is none; the caller
/// plans and `remember_heuristic_plan`s it. A plan that no longer applies is the caller's to
/// replace.
pub fn cached_heuristic_plan(dev: Device, ast: &KernelAst, target: &Target) -> Option<Plan> {
    if ignore_beam_cache() {
        return None;
    }
    cache::load(&heuristic_key(dev, ast, target))
}

/// Remember the heuristic plan of `ast` (see `cached_heuristic_plan`).
pub fn remember_heuristic_plan(dev: Device, ast: &KernelAst, target: &Target, plan: &Plan) {
    if !ignore_beam_cache() {
        cache::store(&heuristic_key(dev, ast, target), plan);
    }
}

/// The cached plan for this kernel, if one applies to it.
fn cached(key: &str, ast: &KernelAst) -> Option<Plan> {
    if ignore_beam_cache() {
        return None;
    }
    let p = cache::load(key)?;
    if compile_plan(ast, &p).is_ok() {
        return Some(p);
    }
    log("wgrad: BEAM cache entry does not apply to its kernel any more; searching again");
    None
}

/// The plan for `ast` on `dev`: from the cache, or searched (and cached). In the browser a
/// search cannot block (a GPU's results arrive only once control returns to the event loop),
/// so a kernel not in the cache runs with the heuristic's plan and is queued for `tune`.
pub fn plan(dev: Device, ast: &KernelAst, target: &Target, width: u32) -> Result<Plan> {
    let key = key(dev, ast, target, width);
    if let Some(p) = cached(&key, ast) {
        return Ok(p);
    }
    #[cfg(target_arch = "wasm32")]
    {
        pending::push(dev, ast, target, width);
        Ok(default_plan(ast, target))
    }
    #[cfg(not(target_arch = "wasm32"))]
    crate::runtime::block_on(search_and_store(dev, ast, target, width, &key))
}

async fn search_and_store(
    dev: Device,
    ast: &KernelAst,
    target: &Target,
    width: u32,
    key: &str,
) -> Result<Plan> {
    let be = dev.backend();
    let w = width.max(1) as usize;
    let deadline = now_ms() + beam_budget_ms();
    let base = default_plan(ast, target);
    let plan = search(be, ast, target, w, deadline, 0).await?;
    if debug() >= 2 {
        let bench = Bench::new(be, ast, target).await?;
        let (t0, t1) = (bench.time(&base).await, bench.time(&plan).await);
        if let (Some(t0), Some(t1)) = (t0, t1) {
            log(&format!(
                "BEAM {}: {base:?} -> {plan:?}: {:.3} -> {:.3} ms ({:.2}x)",
                ast.root
                    .shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("_"),
                t0 as f64 / 1e6,
                t1 as f64 / 1e6,
                t0 as f64 / t1.max(1) as f64
            ));
        }
    }
    cache::store(key, &plan);
    Ok(plan)
}

/// Search every kernel queued by `plan` (in the browser) and cache the results; returns how
/// many were searched. The programs compiled with the heuristic's plans stay in use until the
/// program cache is asked again for the same kernel at this width — a TinyJit captured before
/// tuning keeps its kernels: reset it to capture the tuned ones.
pub async fn tune() -> Result<usize> {
    let jobs = pending::take();
    let n = jobs.len();
    for (dev, ast, target, width) in jobs {
        let key = key(dev, &ast, &target, width);
        if cached(&key, &ast).is_none() {
            search_and_store(dev, &ast, &target, width, &key).await?;
        }
    }
    crate::realize::forget_programs();
    Ok(n)
}

/// The plans known in this process as JSON, for the browser to keep in IndexedDB.
pub fn export_cache() -> String {
    cache::export()
}

/// Take plans exported by `export_cache` (in an earlier session); returns how many applied.
pub fn import_cache(json: &str) -> usize {
    cache::import(json)
}

/// How many plans this process knows (searched, planned, read or imported): what
/// `export_cache` would write.
pub fn cache_len() -> usize {
    cache::len()
}

/// The fingerprint of the optimizer's code in this build: heuristic plans of another build are
/// never used (their keys differ), so a store of exported plans is kept per fingerprint.
pub fn plans_fingerprint() -> &'static str {
    env!("WGRAD_PLANS_FINGERPRINT")
}

/// Kernels a browser run met that the cache could not answer.
mod pending {
    use super::*;
    use std::sync::Mutex;

    type Job = (Device, Arc<KernelAst>, Target, u32);
    static JOBS: Mutex<Vec<Job>> = Mutex::new(Vec::new());

    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub fn push(dev: Device, ast: &KernelAst, target: &Target, width: u32) {
        let ast = Arc::new(KernelAst {
            root: ast.root.clone(),
            bufs: ast.bufs.clone(),
        });
        JOBS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((dev, ast, *target, width));
    }

    pub fn take() -> Vec<Job> {
        std::mem::take(&mut *JOBS.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn now_ms() -> u64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now() as u64
    }
}

/// Search `ast`'s plans: first whether (and how) to split its reduce, then the actions of each
/// resulting kernel.
fn search<'a>(
    be: &'a dyn Backend,
    ast: &'a KernelAst,
    target: &'a Target,
    width: usize,
    deadline: u64,
    depth: u32,
) -> crate::runtime::BoxFuture<'a, Result<Plan>> {
    Box::pin(search_level(be, ast, target, width, deadline, depth))
}

async fn search_level(
    be: &dyn Backend,
    ast: &KernelAst,
    target: &Target,
    width: usize,
    deadline: u64,
    depth: u32,
) -> Result<Plan> {
    let bench = Bench::new(be, ast, target).await?;
    let base = if depth == 0 {
        default_plan(ast, target)
    } else {
        Plan::One(crate::codegen::opt::default_opts(ast, target))
    };
    // The split: the heuristic's choice, none, or a few others.
    let mut splits = vec![base.clone()];
    let one = Plan::One(crate::codegen::opt::default_opts(ast, target));
    if depth < 2 {
        splits.push(one.clone());
        for (axis, parts) in split_candidates(ast) {
            if let Some(s) = split::split(ast, axis, parts) {
                splits.push(Plan::Split {
                    axis,
                    parts,
                    first: Box::new(Plan::One(crate::codegen::opt::default_opts(
                        &s.first, target,
                    ))),
                    second: Box::new(Plan::One(crate::codegen::opt::default_opts(
                        &s.second, target,
                    ))),
                });
            }
        }
    }
    let mut best: Option<(u64, Plan)> = None;
    let mut seen = HashSet::new();
    for p in splits {
        if !seen.insert(p.clone()) || now_ms() > deadline && best.is_some() {
            continue;
        }
        if let Some(t) = bench.time(&p).await {
            if best.as_ref().is_none_or(|b| t < b.0) {
                best = Some((t, p));
            }
        }
    }
    let Some((_, chosen)) = best else {
        // Nothing ran (e.g. the device is lost): the heuristic's plan.
        return Ok(base);
    };
    match chosen {
        Plan::One(o) => Ok(Plan::One(
            beam_opts(&bench, ast, target, o, width, deadline).await,
        )),
        Plan::Split { axis, parts, .. } => {
            let s = split::split(ast, axis, parts).expect("a timed split applies");
            Ok(Plan::Split {
                axis,
                parts,
                first: Box::new(search(be, &s.first, target, width, deadline, depth + 1).await?),
                second: Box::new(search(be, &s.second, target, width, deadline, depth + 1).await?),
            })
        }
    }
}

/// A few splits to try: parts that are powers of two (and the whole axis) dividing a reduce
/// axis, leaving more than one element.
fn split_candidates(ast: &KernelAst) -> Vec<(usize, usize)> {
    let Some(r) = ast
        .root
        .find(&|n| matches!(n.op, AstOp::Reduce(..)), &|_| false)
    else {
        return vec![];
    };
    let AstOp::Reduce(_, axes) = &r.op else {
        return vec![];
    };
    let mut out = vec![];
    for &a in axes {
        let size = r.src[0].shape[a];
        for parts in [4, 16, 64, 256] {
            if size % parts == 0 && parts < size {
                out.push((a, parts));
            }
        }
    }
    out
}

/// One round after another: every member of the beam with one more action, the `width`
/// fastest kept.
async fn beam_opts(
    bench: &Bench<'_>,
    ast: &KernelAst,
    target: &Target,
    start: Opts,
    width: usize,
    deadline: u64,
) -> Opts {
    let mut seen: HashSet<Opts> = HashSet::new();
    let mut beam: Vec<(u64, Opts)> = vec![];
    for o in [start, Opts::default()] {
        if seen.insert(o.clone()) {
            if let Some(t) = bench.time(&Plan::One(o.clone())).await {
                beam.push((t, o));
            }
        }
    }
    beam.sort_by_key(|b| b.0);
    let Some(mut best) = beam.first().map(|b| b.0) else {
        return Opts::default();
    };
    while now_ms() < deadline {
        let mut round = vec![];
        for (_, o) in &beam {
            for c in neighbours(ast, target, o) {
                if now_ms() > deadline {
                    break;
                }
                if !seen.insert(c.clone()) {
                    continue;
                }
                if let Some(t) = bench.time(&Plan::One(c.clone())).await {
                    round.push((t, c));
                }
            }
        }
        beam.extend(round);
        beam.sort_by_key(|b| b.0);
        beam.truncate(width);
        // A round that does not gain 1% ends the search.
        if beam[0].0 * 100 >= best * 99 {
            break;
        }
        best = beam[0].0;
    }
    beam.swap_remove(0).1
}

/// `o` with one more action, every one that applies to `ast` on `target`.
fn neighbours(ast: &KernelAst, target: &Target, o: &Opts) -> Vec<Opts> {
    let mut out = vec![];
    let shape = &ast.root.shape;
    let upcasts: usize = o.upcast.iter().map(|u| u.1).product();
    let gpu = matches!(target.kind, OptTarget::Gpu);
    for axis in 0..shape.len() {
        for n in [2, 3, 4, 8, 16] {
            if upcasts * n <= 64 {
                let mut c = o.clone();
                c.upcast.push((axis, n));
                out.push(c);
            }
        }
        if gpu {
            for n in [2, 4, 8, 16, 32, 64] {
                if o.local_size() * n <= target.max_local {
                    let mut c = o.clone();
                    c.local.push((axis, n));
                    out.push(c);
                }
            }
        }
    }
    if let Some(r) = aligned_reduce(ast) {
        let AstOp::Reduce(_, axes) = &r.op else {
            unreachable!("aligned_reduce returns a reduce")
        };
        for &axis in axes {
            if gpu && o.group.is_none() {
                for n in [2, 4, 8, 16, 32, 64, 128, 256] {
                    let shared = upcasts * o.local_size() * n * 4;
                    if o.local_size() * n <= target.max_local && shared <= target.max_shared {
                        let mut c = o.clone();
                        c.group = Some((axis, n));
                        out.push(c);
                    }
                }
            }
            if gpu && target.tiles && o.stage.is_none() && o.local_size() > 1 {
                for n in [4, 8, 16, 32] {
                    let mut c = o.clone();
                    c.stage = Some((axis, n));
                    out.push(c);
                }
            }
            if o.unroll.is_none() {
                for n in [2, 3, 4, 8] {
                    let mut c = o.clone();
                    c.unroll = Some((axis, n));
                    out.push(c);
                }
            }
            if o.lanes.is_none() && !gpu {
                for n in [4, 8, 16] {
                    let mut c = o.clone();
                    c.lanes = Some((axis, n));
                    out.push(c);
                }
            }
        }
    }
    let tile_bytes = |c: &Opts| -> usize {
        let elems: usize = crate::codegen::lower::tiles(ast, c)
            .iter()
            .map(|t| t.iter().product::<usize>())
            .sum();
        elems * 4
    };
    out.retain(|c| check(ast, c).is_ok() && tile_bytes(c) <= target.max_shared);
    out
}

/// A kernel's buffers filled with test data, and the output of the heuristic's plan to compare
/// with (the unoptimized kernel is not a safe reference on every device: on lavapipe an
/// unsplit long reduce stops early; the heuristic's plans are the ones tests check against the
/// interpreter).
struct Bench<'a> {
    be: &'a dyn Backend,
    ast: &'a KernelAst,
    target: Target,
    inputs: Vec<Arc<Buffer>>,
    reference: Vec<u8>,
}

impl<'a> Bench<'a> {
    async fn new(be: &'a dyn Backend, ast: &'a KernelAst, target: &Target) -> Result<Bench<'a>> {
        let mut inputs = vec![];
        let mut seed = 0x9e3779b97f4a7c15u64;
        for &(dt, n) in &ast.bufs[1..] {
            let b = be.alloc(n * dt.size())?;
            be.copy_in(&b, &test_data(dt, n, &mut seed))?;
            inputs.push(Arc::new(b));
        }
        let mut bench = Bench {
            be,
            ast,
            target: *target,
            inputs,
            reference: vec![],
        };
        bench.reference = bench.run(&default_plan(ast, target), 1).await?.1;
        Ok(bench)
    }

    /// Run `plan` `reps` times: (the fastest run's ns, the output bytes). Device timers where
    /// the backend has them; else the host clock around launches and a wait (in the browser,
    /// the readback's: runs are repeated until the millisecond clock can see them).
    async fn run(&self, plan: &Plan, reps: usize) -> Result<(u64, Vec<u8>)> {
        let compiled = match crate::codegen::compile_plan_for(self.ast, plan, &self.target) {
            Ok(c) => c,
            Err(e) => crate::error::bail!(Other, "BEAM: {e}"),
        };
        let progs: Vec<Program> = compiled
            .stages
            .iter()
            .map(|s| self.be.compile(&s.kernel))
            .collect::<Result<_>>()?;
        let (dt, n) = self.ast.bufs[0];
        let out = Arc::new(self.be.alloc(n * dt.size())?);
        let scratch: Vec<Arc<Buffer>> = compiled
            .scratch
            .iter()
            .map(|&(dt, n)| self.be.alloc(n * dt.size()).map(Arc::new))
            .collect::<Result<_>>()?;
        let bufs: Vec<Vec<Arc<Buffer>>> = compiled
            .stages
            .iter()
            .map(|s| {
                s.bufs
                    .iter()
                    .map(|r| match *r {
                        BufRef::Arg(0) => out.clone(),
                        BufRef::Arg(i) => self.inputs[i - 1].clone(),
                        BufRef::Scratch(i) => scratch[i].clone(),
                    })
                    .collect()
            })
            .collect();
        let launch_all = |timed: bool| -> Result<Option<u64>> {
            let mut device = Some(0u64);
            for (p, b) in progs.iter().zip(&bufs) {
                let refs: Vec<&Buffer> = b.iter().map(|b| b.as_ref()).collect();
                if timed {
                    let t = self.be.launch_timed(p, &refs)?;
                    device = device.zip(t).map(|(a, b)| a + b);
                } else {
                    self.be.launch(p, &refs)?;
                }
            }
            Ok(device.filter(|_| timed))
        };
        let mut best = u64::MAX;
        if cfg!(target_arch = "wasm32") {
            // Warm up, then as many runs as fill 20 ms, timed to the readback that waits for them.
            launch_all(false)?;
            self.be.copy_out(&out).await?;
            let mut runs = 0u64;
            let t0 = now_ms();
            while runs < reps as u64 || now_ms() < t0 + 20 {
                launch_all(false)?;
                self.be.copy_out(&out).await?;
                runs += 1;
            }
            best = (now_ms() - t0) * 1_000_000 / runs;
        } else {
            for _ in 0..reps {
                self.be.synchronize()?;
                let t0 = host_ns();
                let device = launch_all(true)?;
                self.be.synchronize()?;
                let t = device.unwrap_or_else(|| host_ns().saturating_sub(t0));
                best = best.min(t.max(1));
            }
        }
        let bytes = self.be.copy_out(&out).await?;
        Ok((best.max(1), bytes))
    }

    /// The time of `plan`, or `None` when it fails to compile or run, or computes something
    /// else than the unoptimized kernel.
    async fn time(&self, plan: &Plan) -> Option<u64> {
        TIMED.with(|t| t.set(t.get() + 1));
        let (t, bytes) = self.run(plan, 3).await.ok()?;
        same(self.ast.bufs[0].0, &bytes, &self.reference).then_some(t)
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn host_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

#[cfg(target_arch = "wasm32")]
fn host_ns() -> u64 {
    0
}

/// Test inputs: floats in [-1, 1); integers and bools 0 (they may be indices: 0 is always in
/// range).
fn test_data(dt: DType, n: usize, seed: &mut u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dt.size());
    for _ in 0..n {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = ((*seed >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0;
        match dt {
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f32(v as f32).to_le_bytes()),
            _ => out.extend(std::iter::repeat_n(0u8, dt.size())),
        }
    }
    out
}

/// Whether two outputs agree: integers exactly, floats within what reordering a sum changes.
fn same(dt: DType, got: &[u8], want: &[u8]) -> bool {
    if got.len() != want.len() {
        return false;
    }
    if !dt.is_float() {
        return got == want;
    }
    let w = dt.size();
    let vals = |b: &[u8]| -> Vec<f64> { b.chunks_exact(w).map(|c| read_f64(dt, c)).collect() };
    let (g, r) = (vals(got), vals(want));
    let scale = (r.iter().map(|x| x * x).sum::<f64>() / r.len().max(1) as f64).sqrt();
    g.iter().zip(&r).all(|(&a, &b)| {
        (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-3 * b.abs() + 1e-3 * scale + 1e-6
    })
}

/// The on-disk cache of plans (searched, and the heuristic's): one small JSON file per
/// (device, kernel), named by a hash of the key and holding the key itself, so a hash collision
/// or a file from another device is recognised and ignored. Written atomically, so processes
/// sharing the directory never read half a file.
mod cache {
    use super::*;
    use serde_json::{json, Value};

    #[cfg(not(target_arch = "wasm32"))]
    fn path(key: &str) -> std::path::PathBuf {
        // Heuristic plans beside the searched ones, in a directory of their own.
        let kind = if key.contains("\nheuristic ") {
            "plans"
        } else {
            "beam"
        };
        crate::runtime::cache_dir(kind)
            .join(format!("{kind}-{}.json", crate::runtime::stable_hash(key)))
    }

    /// Plans known in this process (searched, read from disk, or imported from the browser's
    /// IndexedDB by the JS layer), by key.
    static MEM: std::sync::Mutex<Vec<(String, Value)>> = std::sync::Mutex::new(Vec::new());

    fn mem() -> std::sync::MutexGuard<'static, Vec<(String, Value)>> {
        MEM.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember(key: &str, plan: Value) {
        let mut m = mem();
        m.retain(|(k, _)| k != key);
        m.push((key.to_string(), plan));
    }

    /// The plan cached for `key`. Natively the disk is the source of truth (a file edited or
    /// corrupted between two searches is read again, not shadowed by memory); plans imported
    /// from the browser, and every plan in the browser, live in memory.
    pub fn load(key: &str) -> Option<Plan> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let p = path(key);
            if let Ok(text) = std::fs::read_to_string(&p) {
                let parsed: Option<Plan> = serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(|v| v["key"].as_str() == Some(key))
                    .and_then(|v| from_json(&v["plan"]));
                match &parsed {
                    Some(plan) => remember(key, to_json(plan)),
                    None => log(&format!(
                        "wgrad: ignoring the plan cache file {} (corrupt or for another kernel)",
                        p.display()
                    )),
                }
                return parsed;
            }
        }
        let p = mem().iter().find(|(k, _)| k == key).map(|e| e.1.clone())?;
        from_json(&p)
    }

    pub fn store(key: &str, plan: &Plan) {
        remember(key, to_json(plan));
        #[cfg(not(target_arch = "wasm32"))]
        {
            let p = path(key);
            let v = json!({ "key": key, "plan": to_json(plan) });
            if let Some(dir) = p.parent() {
                if let Err(e) = crate::runtime::write_atomic(dir, &p, v.to_string().as_bytes()) {
                    log(&format!(
                        "wgrad: cannot write the plan cache {}: {e}",
                        p.display()
                    ));
                }
            }
        }
    }

    pub fn len() -> usize {
        mem().len()
    }

    /// Every plan known in this process, as JSON (`[{"key", "plan"}, ...]`).
    pub fn export() -> String {
        let entries: Vec<Value> = mem()
            .iter()
            .map(|(k, p)| json!({ "key": k, "plan": p }))
            .collect();
        Value::Array(entries).to_string()
    }

    /// Add plans exported before; entries that do not parse are skipped. Returns how many were
    /// taken.
    pub fn import(text: &str) -> usize {
        let Ok(Value::Array(entries)) = serde_json::from_str::<Value>(text) else {
            log("wgrad: ignoring a BEAM cache that is not a JSON array");
            return 0;
        };
        let mut n = 0;
        for e in entries {
            if let (Some(k), Some(_)) = (e["key"].as_str(), from_json(&e["plan"])) {
                remember(k, e["plan"].clone());
                n += 1;
            }
        }
        n
    }

    fn pairs(v: &[(usize, usize)]) -> Value {
        json!(v.iter().map(|&(a, n)| json!([a, n])).collect::<Vec<_>>())
    }

    pub fn to_json(p: &Plan) -> Value {
        match p {
            Plan::One(o) => json!({ "one": {
                "upcast": pairs(&o.upcast),
                "local": pairs(&o.local),
                "group": o.group.map(|g| json!([g.0, g.1])),
                "unroll": o.unroll.map(|u| json!([u.0, u.1])),
                "stage": o.stage.map(|u| json!([u.0, u.1])),
                "lanes": o.lanes.map(|u| json!([u.0, u.1])),
            }}),
            Plan::Split {
                axis,
                parts,
                first,
                second,
            } => {
                json!({ "split": [axis, parts], "first": to_json(first), "second": to_json(second) })
            }
        }
    }

    fn pair(v: &Value) -> Option<(usize, usize)> {
        let a = v.as_array()?;
        match a.as_slice() {
            [x, y] => Some((x.as_u64()? as usize, y.as_u64()? as usize)),
            _ => None,
        }
    }

    fn list(v: &Value) -> Option<Vec<(usize, usize)>> {
        v.as_array()?.iter().map(pair).collect()
    }

    fn opt_pair(v: &Value) -> Option<Option<(usize, usize)>> {
        if v.is_null() {
            Some(None)
        } else {
            pair(v).map(Some)
        }
    }

    pub fn from_json(v: &Value) -> Option<Plan> {
        if let Some(o) = v.get("one") {
            return Some(Plan::One(Opts {
                upcast: list(&o["upcast"])?,
                local: list(&o["local"])?,
                group: opt_pair(&o["group"])?,
                unroll: opt_pair(&o["unroll"])?,
                // Absent from plans saved before staging (lanes) existed.
                stage: opt_pair(&o["stage"])?,
                lanes: opt_pair(&o["lanes"])?,
                // From the target when lowered, never saved.
                subgroup: None,
            }));
        }
        let (axis, parts) = pair(v.get("split")?)?;
        Some(Plan::Split {
            axis,
            parts,
            first: Box::new(from_json(&v["first"])?),
            second: Box::new(from_json(&v["second"])?),
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn plans_round_trip_through_json() {
            let p = Plan::Split {
                axis: 1,
                parts: 16,
                first: Box::new(Plan::One(Opts {
                    upcast: vec![(0, 4)],
                    local: vec![(2, 8)],
                    group: Some((1, 32)),
                    unroll: None,
                    stage: None,
                    lanes: None,
                    subgroup: None,
                })),
                second: Box::new(Plan::One(Opts {
                    local: vec![(0, 16), (2, 16)],
                    stage: Some((1, 16)),
                    ..Opts::default()
                })),
            };
            assert_eq!(from_json(&to_json(&p)), Some(p));
            let p = Plan::One(Opts {
                upcast: vec![(0, 4)],
                lanes: Some((2, 16)),
                ..Opts::default()
            });
            assert_eq!(from_json(&to_json(&p)), Some(p));
            // A plan saved before `stage` existed.
            let old = json!({"one": {"upcast": [], "local": [], "group": null, "unroll": null}});
            assert_eq!(from_json(&old), Some(Plan::One(Opts::default())));
            assert_eq!(from_json(&json!({"one": {"upcast": [[0]]}})), None);
        }
    }
}
