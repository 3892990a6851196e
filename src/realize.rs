//! The engine: realize target nodes by scheduling them, compiling each kernel once per device
//! (programs are cached by their linearized form), allocating outputs and launching. It also
//! holds the capture hook: while a capture is open, every allocation and launch is recorded
//! (TinyJit, a layer above, opens one around the call it captures, as tinygrad's `capturing`
//! list does). What realizing needs to know about the frontend (which nodes a gradient may
//! still flow through) is passed in by the caller.

use crate::codegen::{self, BufRef, LinearKernel, Target};
use crate::context::{debug, GlobalCounters, Stage};
use crate::dtype::DType;
use crate::error::{bail, Error, ErrorKind, Result};
use crate::kernel::KernelAst;
use crate::ops::Op;
use crate::runtime::{Buffer, Device, Launch, Program};
use crate::schedule::ScheduleItem;
use crate::uop::UOp;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

// ---- the capture hook

/// What a capture recorded: every launch, and every buffer allocated while it was open.
#[derive(Default)]
pub struct Capture {
    /// Every launch, in order.
    pub launches: Vec<Launch>,
    /// Every buffer allocated while the capture was open (the candidates for memory planning).
    pub allocated: Vec<Arc<Buffer>>,
}

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Whether a capture is open on this thread.
pub fn capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// Open a capture: launches and allocations from now on are recorded until `end_capture`.
pub fn start_capture() -> Result<()> {
    if capturing() {
        bail!(Jit, "TinyJit: a jitted function cannot be called while another one is capturing (nested JIT)");
    }
    CAPTURE.with(|c| *c.borrow_mut() = Some(Capture::default()));
    Ok(())
}

/// Close the capture and return what it recorded (empty if none was open).
pub fn end_capture() -> Capture {
    CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

fn record(l: Launch) {
    CAPTURE.with(|c| {
        if let Some(r) = c.borrow_mut().as_mut() {
            r.launches.push(l);
        }
    });
}

fn record_alloc(b: &Arc<Buffer>) {
    CAPTURE.with(|c| {
        if let Some(r) = c.borrow_mut().as_mut() {
            r.allocated.push(b.clone());
        }
    });
}

/// Reading values back while capturing would not happen on replay: refuse it.
pub fn check_readback() -> Result<()> {
    if capturing() {
        bail!(
            Jit,
            "TinyJit: reading a tensor's value during capture is not allowed (a replay would not read it); \
             return the tensor from the jitted function and read it afterwards"
        );
    }
    Ok(())
}

// ---- compiling

type ProgramCache = Mutex<HashMap<(Device, LinearKernel), Arc<Program>>>;

type AstCache = Mutex<HashMap<(Device, Target, u32, String), Arc<Executable>>>;

/// Forget which program each kernel compiled to (the compiled programs stay cached), so the
/// next realize chooses again: after BEAM tuning found better plans.
pub fn forget_programs() {
    ast_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

/// Forget every program compiled in this process too, as a new process starts: the next
/// realize loads its kernels from the disk cache (or compiles them).
pub fn forget_compiled() {
    forget_programs();
    cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

fn ast_cache() -> &'static AstCache {
    static C: OnceLock<AstCache> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn cache() -> &'static ProgramCache {
    static C: OnceLock<ProgramCache> = OnceLock::new();
    C.get_or_init(Default::default)
}

thread_local! {
    static KERNEL_LOG: std::cell::RefCell<Option<Vec<LinearKernel>>> =
        const { std::cell::RefCell::new(None) };
}

/// Start (or stop) recording every kernel this thread runs, for tools and tests that check
/// generated code (e.g. validating every WGSL rendering with naga). Returns what was recorded.
/// While recording, kernels are lowered even when their program is cached, so the log does not
/// depend on what ran before.
pub fn record_kernels(on: bool) -> Vec<LinearKernel> {
    KERNEL_LOG.with(|log| {
        let mut log = log.borrow_mut();
        let out = log.take().unwrap_or_default();
        if on {
            *log = Some(vec![]);
        }
        out
    })
}

/// A scheduled kernel compiled for one device: its programs in launch order with the buffers
/// each binds, and the scratch buffers they pass results through (a split reduce).
pub struct Executable {
    /// Each program with the buffer bound to each of its slots.
    pub stages: Vec<(Arc<Program>, Vec<BufRef>)>,
    /// The scratch buffers the stages share: (dtype, elements).
    pub scratch: Vec<(DType, usize)>,
}

impl Executable {
    /// The name of the kernel (of its last stage, which writes the output).
    pub fn name(&self) -> &str {
        self.stages.last().map_or("", |s| s.0.name.as_str())
    }
}

/// The optimizer target for `device`: the device's own, unless a `Context` or `OPT_TARGET`
/// asks for another kind (the device's limits still hold).
pub fn target(device: Device) -> Target {
    let mut t = device.backend().target();
    if let Some(kind) = crate::context::opt_target() {
        t.kind = kind;
    }
    t.tiles &= crate::context::tiles();
    t
}

/// Compile (or fetch from the cache) the programs for a kernel on `device`.
pub fn program(device: Device, ast: &KernelAst) -> Result<Arc<Executable>> {
    program_for(device, ast, target(device), crate::context::beam())
}

/// `program` for an explicit target and BEAM width (what `program` reads from the `Context`,
/// which is the calling thread's: `prepare` passes them to its worker threads).
fn program_for(device: Device, ast: &KernelAst, t: Target, width: u32) -> Result<Arc<Executable>> {
    if let Some(p) = cached_program(device, ast, t, width) {
        return Ok(p);
    }
    let compiled = compiled_for(device, ast, &t, width)?;
    install(device, ast, t, width, compiled)
}

/// The program `program_for` made earlier for these arguments, if the device still runs it
/// (none while kernels are being recorded: the log wants every kernel).
fn cached_program(
    device: Device,
    ast: &KernelAst,
    t: Target,
    width: u32,
) -> Option<Arc<Executable>> {
    if KERNEL_LOG.with(|l| l.borrow().is_some()) {
        return None;
    }
    let backend = device.backend();
    ast_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(device, t, width, ast.key()))
        .filter(|e| e.stages.iter().all(|(p, _)| backend.can_run(p)))
        .cloned()
}

/// Compile the lowered kernels of `ast` (or fetch them from the program cache) and remember
/// the program for `cached_program`.
fn install(
    device: Device,
    ast: &KernelAst,
    t: Target,
    width: u32,
    compiled: codegen::Compiled,
) -> Result<Arc<Executable>> {
    let backend = device.backend();
    let akey = (device, t, width, ast.key());
    for s in &compiled.stages {
        dump_as(&s.kernel);
    }
    KERNEL_LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.extend(compiled.stages.iter().map(|s| s.kernel.clone()));
        }
    });
    let mut stages = vec![];
    for stage in compiled.stages {
        let key = (device, stage.kernel);
        let cached = cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .filter(|p| backend.can_run(p))
            .cloned();
        let p = match cached {
            Some(p) => p,
            None => {
                let p = Arc::new(timed(Stage::Compile, || backend.compile(&key.1))?);
                // Another thread may have compiled it meanwhile: the first program stays, so a
                // kernel is one program in a process (captures compare programs); a stale one
                // is replaced.
                let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
                match c.get(&key) {
                    Some(q) if backend.can_run(q) => q.clone(),
                    _ => {
                        c.insert(key, p.clone());
                        p
                    }
                }
            }
        };
        stages.push((p, stage.bufs));
    }
    let exe = Arc::new(Executable {
        stages,
        scratch: compiled.scratch,
    });
    let mut c = ast_cache().lock().unwrap_or_else(|e| e.into_inner());
    // A stale entry (a program the backend can no longer run) is replaced; a fresh one that
    // another thread made meanwhile stays.
    let exe = match c.get(&akey) {
        Some(e) if e.stages.iter().all(|(p, _)| backend.can_run(p)) => e.clone(),
        _ => {
            c.insert(akey, exe.clone());
            exe
        }
    };
    Ok(exe)
}

/// The kernels of `ast` for `device`: planned (by BEAM at `width` > 0, else by the heuristics,
/// whose plan is remembered) and lowered; not compiled.
fn compiled_for(
    device: Device,
    ast: &KernelAst,
    t: &Target,
    width: u32,
) -> Result<codegen::Compiled> {
    let lower =
        |plan: &codegen::Plan| timed(Stage::Lower, || codegen::compile_plan_for(ast, plan, t));
    Ok(if width > 0 {
        let plan = timed(Stage::Plan, || crate::search::plan(device, ast, t, width))?;
        lower(&plan).map_err(|e| Error::new(ErrorKind::Other, format!("BEAM: {e}")))?
    } else {
        let remembered = timed(Stage::Plan, || {
            crate::search::cached_heuristic_plan(device, ast, t)
        });
        match remembered.map(|plan| lower(&plan)) {
            Some(Ok(c)) => c,
            // None remembered, or one that no longer applies: plan, and remember it.
            _ => {
                let plan = timed(Stage::Plan, || {
                    let plan = codegen::default_plan(ast, t);
                    crate::search::remember_heuristic_plan(device, ast, t, &plan);
                    plan
                });
                lower(&plan).unwrap_or_else(|e| unreachable!("the default plan applies: {e}"))
            }
        }
    })
}

/// Run `f`, adding its host time to `stage` in `GlobalCounters::stage_ns`.
fn timed<T>(stage: Stage, f: impl FnOnce() -> T) -> T {
    let t0 = crate::runtime::host_clock_ns();
    let out = f();
    GlobalCounters::add_stage(stage, crate::runtime::host_clock_ns().saturating_sub(t0));
    out
}

/// `WGRAD_DUMP_AS=dialect`: write the kernel as that dialect would render it, whatever device
/// runs it (an unknown name is reported once and ignored, like a bad `DEV`).
fn dump_as(lk: &LinearKernel) {
    let Some(name) = crate::context::dump_as() else {
        return;
    };
    match codegen::dialect(&name) {
        Some(d) => crate::context::dump_file(&(d.render)(lk), d.ext),
        None => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                let known: Vec<&str> = codegen::DIALECTS.iter().map(|d| d.name).collect();
                crate::context::log(&format!(
                    "wgrad: ignoring WGRAD_DUMP_AS={name}: the dialects are {}",
                    known.join(", ")
                ));
            });
        }
    }
}

// ---- realizing

/// Nodes whose sources must be kept after realization because a gradient may flow through them
/// to one of `roots` (the nodes of tensors that require gradients).
fn grad_relevant(targets: &[Arc<UOp>], roots: &HashSet<u64>) -> HashSet<u64> {
    let mut memo: HashMap<u64, bool> = HashMap::new();
    fn visit(n: &Arc<UOp>, roots: &HashSet<u64>, memo: &mut HashMap<u64, bool>) -> bool {
        if let Some(&v) = memo.get(&n.id) {
            return v;
        }
        memo.insert(n.id, false);
        let mut v = roots.contains(&n.id);
        if n.op != Op::Detach {
            for s in n.src() {
                v |= visit(&s, roots, memo);
            }
        }
        memo.insert(n.id, v);
        v
    }
    for t in targets {
        visit(t, roots, &mut memo);
    }
    memo.into_iter()
        .filter(|&(_, v)| v)
        .map(|(k, _)| k)
        .collect()
}

/// The schedule that realizing `targets` would run (nothing is launched), binding no more
/// buffers per kernel than their devices (and a `Context`'s `max_buffers`) allow.
pub fn schedule(targets: &[Arc<UOp>]) -> Result<Vec<ScheduleItem>> {
    // An empty node is never computed (it has no buffer: see `schedule`).
    let nodes: Vec<Arc<UOp>> = targets
        .iter()
        .filter(|n| !n.is_realized() && n.numel() > 0)
        .cloned()
        .collect();
    let max_bufs = nodes
        .iter()
        .map(|t| t.device.backend().max_buffers())
        .chain(crate::context::max_buffers())
        .min()
        .unwrap_or(usize::MAX);
    crate::schedule::schedule(&nodes, max_bufs)
}

/// The unrealized nodes of these graphs (ids), and the buffers (addresses) their pending
/// assigns will overwrite. The frontend uses it to find live tensors that still read those
/// buffers and must be realized before the write.
pub fn graph_and_assigned(targets: &[Arc<UOp>]) -> (HashSet<u64>, HashSet<usize>) {
    let mut seen = HashSet::new();
    let mut out = HashSet::new();
    let mut stack: Vec<Arc<UOp>> = targets.to_vec();
    while let Some(n) = stack.pop() {
        if n.is_realized() || !seen.insert(n.id) {
            continue;
        }
        let src = n.src();
        if n.op == Op::Assign {
            if let Some(b) = src.first().and_then(|t| t.buffer()) {
                out.insert(Arc::as_ptr(&b) as usize);
            }
        }
        stack.extend(src);
    }
    (seen, out)
}

/// Realize every target node (compute and store its buffer), in one schedule. `grad_roots`
/// are the nodes gradients may still be taken with respect to: realized nodes on a path to one
/// of them keep their sources for autograd, every other realized node forgets its graph.
pub fn realize(targets: &[Arc<UOp>], grad_roots: &HashSet<u64>) -> Result<()> {
    if !DEFERRING.with(|d| d.get()) {
        flush_deferred()?;
    }
    let todo: Vec<Arc<UOp>> = targets
        .iter()
        .filter(|t| !t.is_realized() && t.numel() > 0)
        .cloned()
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let stages0 = Stage::ALL.map(GlobalCounters::stage_ns);
    let items = timed(Stage::Schedule, || schedule(&todo))?;
    check_sizes(&items)?;
    if debug() >= 3 {
        crate::context::log(&format!("schedule: {} items", items.len()));
        for (i, it) in items.iter().enumerate() {
            match it {
                ScheduleItem::Kernel { ast, .. } => crate::context::log(&format!(
                    "  {i}: kernel {:?} bufs {:?}",
                    ast.root.shape, ast.bufs
                )),
                ScheduleItem::Copy { out, src } => {
                    crate::context::log(&format!("  {i}: copy {} -> {}", src.device, out.device))
                }
            }
        }
    }
    let keep = if grad_roots.is_empty() {
        HashSet::new()
    } else {
        grad_relevant(&todo, grad_roots)
    };
    prepare(&items);
    for item in &items {
        run_item(item, &keep)?;
    }
    if debug() >= 2 {
        // What this realize spent before its kernels could run, when it compiled anything.
        let spent = Stage::ALL.map(|s| GlobalCounters::stage_ns(s) - stages0[s as usize]);
        if spent[Stage::Compile as usize] + spent[Stage::Plan as usize] > 0 {
            let parts: Vec<String> = Stage::ALL
                .iter()
                .map(|&s| format!("{} {:.1} ms", s.name(), spent[s as usize] as f64 / 1e6))
                .collect();
            crate::context::log(&format!("realize: {}", parts.join(", ")));
        }
    }
    Ok(())
}

/// Kernel launches held back by `defer` (on devices whose backend compiles asynchronously:
/// WebGPU in a browser) until `launch_deferred` has compiled them all at once. Everything else
/// a realize does (allocating, binding buffers to nodes) happens at once, so holding a launch
/// back changes nothing but when the device runs it: whatever needs its result first (a copy,
/// a readback, a realize outside `defer`, a TinyJit call) launches the held-back ones, in order.
struct Deferred {
    dev: Device,
    ast: KernelAst,
    /// The target when it was held back (a `Context` inside the deferred function may set it).
    target: Target,
    bufs: Vec<Arc<Buffer>>,
}

thread_local! {
    static DEFERRING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with the launches of its realizes held back where the device compiles
/// asynchronously (not under BEAM, whose search times kernels as it plans them, nor while a
/// TinyJit captures: `run_item` decides per launch); then `launch_deferred` compiles and runs
/// them.
pub fn defer<T>(f: impl FnOnce() -> T) -> T {
    let was = DEFERRING.with(|d| d.get());
    DEFERRING.with(|d| d.set(true));
    let out = f();
    DEFERRING.with(|d| d.set(was));
    out
}

/// Compile the held-back launches' kernels (planned and lowered here, compiled by
/// `Backend::precompile` all at once while the caller awaits, without blocking), then launch
/// them in order. A launch that something needed meanwhile has run already (compiled then).
pub async fn launch_deferred() -> Result<()> {
    // Launched whatever happens, so an error is reported here, once.
    let compiled = compile_deferred().await;
    let launched = flush_deferred();
    compiled.and(launched)
}

/// The first half of `launch_deferred`: every held-back kernel compiled (none while kernels
/// are recorded: the log wants each launch's kernel once, as `flush_deferred` makes it).
async fn compile_deferred() -> Result<()> {
    if KERNEL_LOG.with(|l| l.borrow().is_some()) {
        return Ok(());
    }
    let todo: Vec<(Device, KernelAst, Target)> = DEFERRED.with(|d| {
        let mut seen = HashSet::new();
        d.borrow()
            .iter()
            .filter(|l| seen.insert((l.dev, l.target, l.ast.key())))
            .map(|l| (l.dev, l.ast.clone(), l.target))
            .collect()
    });
    let width = 0;
    let mut lowered = vec![];
    let mut kernels: HashMap<Device, Vec<LinearKernel>> = HashMap::new();
    for (dev, ast, t) in todo {
        if cached_program(dev, &ast, t, width).is_some() {
            continue;
        }
        let c = compiled_for(dev, &ast, &t, width)?;
        let ks = kernels.entry(dev).or_default();
        ks.extend(c.stages.iter().map(|s| s.kernel.clone()));
        lowered.push((dev, ast, t, c));
    }
    if !kernels.is_empty() {
        let t0 = crate::runtime::host_clock_ns();
        for (dev, ks) in &kernels {
            dev.backend().precompile(ks).await;
        }
        GlobalCounters::add_stage(
            Stage::Compile,
            crate::runtime::host_clock_ns().saturating_sub(t0),
        );
    }
    for (dev, ast, t, c) in lowered {
        if cached_program(dev, &ast, t, width).is_none() {
            install(dev, &ast, t, width, c)?;
        }
    }
    Ok(())
}

/// Launch every held-back launch now, in order, compiling what is not compiled yet. On an
/// error the launches after the failing one are dropped, and the error says so: the tensors
/// they compute were given buffers when they were held back, and hold no values.
pub fn flush_deferred() -> Result<()> {
    let held = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
    let n = held.len();
    for (i, l) in held.into_iter().enumerate() {
        let launched = program_for(l.dev, &l.ast, l.target, 0)
            .and_then(|exe| launch_exe(l.dev, &exe, &l.bufs));
        if let Err(e) = launched {
            let dropped = n - i - 1;
            if dropped == 0 {
                return Err(e);
            }
            return Err(Error::new(
                e.kind,
                format!(
                    "{e} (and the {dropped} kernel launches held back after it were dropped: \
                     the tensors they compute hold no values)"
                ),
            ));
        }
    }
    Ok(())
}

/// Plan and compile a schedule's new kernels before it runs, on every core, where the backend
/// compiles in parallel (the C compiler, a process per kernel): a first step's kernels cost
/// the slowest thread's share instead of their sum. Identical kernels are compiled once. A
/// kernel that fails here is left to `run_item`, which compiles it again and reports the
/// error in order. Only the plain case runs here: no BEAM search (it times kernels on the
/// device), no kernel recording or debug output (the calling thread's).
fn prepare(items: &[ScheduleItem]) {
    #[cfg(target_arch = "wasm32")]
    let _ = items;
    #[cfg(not(target_arch = "wasm32"))]
    {
        let kernels = items
            .iter()
            .filter(|i| matches!(i, ScheduleItem::Kernel { .. }))
            .count();
        let recording = KERNEL_LOG.with(|l| l.borrow().is_some());
        if kernels < 2 || recording || crate::context::beam() > 0 || crate::context::debug() > 2 {
            return;
        }
        let mut seen = HashSet::new();
        let mut todo = vec![];
        for it in items {
            let ScheduleItem::Kernel { ast, out, .. } = it else {
                continue;
            };
            let dev = out.device;
            if !dev.backend().compiles_in_parallel() {
                continue;
            }
            let t = target(dev);
            let key = (dev, t, 0, ast.key());
            let cached = ast_cache()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&key);
            if !cached && seen.insert(key.clone()) {
                todo.push((key, ast));
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if todo.len() < 2 || threads < 2 {
            return;
        }
        // The longest searches first (a stable sort: ties keep the schedule's order).
        todo.sort_by_key(|(_, ast)| std::cmp::Reverse(codegen::opt::search_size(ast)));
        // Plan and lower every new kernel on every core, and compile what no cache holds in
        // batches (`Backend::compile_batch`), a few per core: a thread with no kernel left to
        // plan compiles a batch of those planned, so compiling fills the cores planning's
        // tail (one long search) leaves idle; what is left when the last plan ends is split
        // into even batches, two per core. `program` then finds them all.
        let lowered: Vec<Mutex<Option<codegen::Compiled>>> =
            todo.iter().map(|_| Mutex::new(None)).collect();
        let per_batch = todo.len().div_ceil(2 * threads);
        let work = Mutex::new(Pipeline::default());
        let changed = std::sync::Condvar::new();
        let lock = || work.lock().unwrap_or_else(|e| e.into_inner());
        let spent = crate::runtime::foreground(|| {
            crate::context::on_threads(threads, threads, |_| loop {
                // The next job: a kernel to plan, else a batch ready to compile, else wait
                // for the plans under way (their kernels may make a batch), else done.
                let job = {
                    let mut w = lock();
                    loop {
                        if w.next < todo.len() {
                            w.next += 1;
                            w.planning += 1;
                            break Some(Job::Plan(w.next - 1));
                        }
                        if let Some(((dev, _), ks)) = w.ready.pop() {
                            break Some(Job::Compile(dev, ks));
                        }
                        if w.planning == 0 {
                            break None;
                        }
                        w = changed.wait(w).unwrap_or_else(|e| e.into_inner());
                    }
                };
                match job {
                    None => break,
                    Some(Job::Plan(i)) => {
                        let ((dev, t, ..), ast) = &todo[i];
                        let c = compiled_for(*dev, ast, t, 0).ok();
                        let mut w = lock();
                        for s in c.iter().flat_map(|c| &c.stages) {
                            let key = (*dev, s.kernel.clone());
                            let known = cache()
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .contains_key(&key);
                            if !known && w.seen.insert(key) {
                                let class = (*dev, dev.backend().batch_class(&s.kernel));
                                let pending = w.pending.entry(class).or_default();
                                pending.push(s.kernel.clone());
                                if pending.len() >= per_batch {
                                    let b = std::mem::take(pending);
                                    w.ready.push((class, b));
                                }
                            }
                        }
                        w.planning -= 1;
                        if w.next == todo.len() && w.planning == 0 {
                            // The last batches: everything not yet compiling, split into
                            // even batches, two per core (so none waits on another's long
                            // batch), each of one class.
                            let mut left: HashMap<(Device, u8), Vec<LinearKernel>> =
                                w.pending.drain().collect();
                            for (class, ks) in std::mem::take(&mut w.ready) {
                                left.entry(class).or_default().extend(ks);
                            }
                            let weight = |k: &LinearKernel| k.insts.len();
                            let size = |ks: &[LinearKernel]| ks.iter().map(weight).sum::<usize>();
                            let total: usize = left.values().map(|ks| size(ks)).sum();
                            for (class, ks) in left {
                                let parts = (2 * threads * size(&ks)).div_ceil(total.max(1));
                                w.ready
                                    .extend(balanced(ks, parts, weight).map(|b| (class, b)));
                            }
                        }
                        *lowered[i].lock().unwrap_or_else(|e| e.into_inner()) = c;
                        changed.notify_all();
                    }
                    Some(Job::Compile(dev, ks)) => {
                        let ps = timed(Stage::Compile, || dev.backend().compile_batch(&ks));
                        for (k, p) in ks.iter().zip(ps) {
                            if let Ok(p) = p {
                                let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
                                let key = (dev, k.clone());
                                if !c.get(&key).is_some_and(|q| dev.backend().can_run(q)) {
                                    c.insert(key, Arc::new(p));
                                }
                            }
                        }
                    }
                }
            })
        });
        let lowered: Vec<Option<codegen::Compiled>> = lowered
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        // Each kernel's program, as `program` would make it (which then finds it at once).
        for ((key, _), c) in todo.into_iter().zip(lowered) {
            let Some(c) = c else { continue };
            let dev = key.0;
            let n = c.stages.len();
            let mut stages = vec![];
            for s in c.stages {
                dump_as(&s.kernel);
                let p = cache()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&(dev, s.kernel))
                    .cloned();
                stages.extend(p.map(|p| (p, s.bufs)));
            }
            // A kernel that failed to compile is compiled (and its error reported) by `program`.
            if stages.len() == n {
                let exe = Arc::new(Executable {
                    stages,
                    scratch: c.scratch,
                });
                let mut c = ast_cache().lock().unwrap_or_else(|e| e.into_inner());
                let backend = dev.backend();
                let live = |e: &Executable| e.stages.iter().all(|(p, _)| backend.can_run(p));
                if !c.get(&key).is_some_and(|e| live(e)) {
                    c.insert(key, exe);
                }
            }
        }
        // The workers' stage times (their own threads' counters) are added to this thread's.
        for w in spent {
            for s in Stage::ALL {
                GlobalCounters::add_stage(s, w[s as usize]);
            }
        }
    }
}

/// `items` in at most `parts` batches of about equal `weight` (the heaviest placed first, each
/// on the lightest batch so far); no batch is empty.
#[cfg(not(target_arch = "wasm32"))]
fn balanced<T>(
    mut items: Vec<T>,
    parts: usize,
    weight: impl Fn(&T) -> usize,
) -> impl Iterator<Item = Vec<T>> {
    items.sort_by_key(|k| std::cmp::Reverse(weight(k)));
    let mut bins: Vec<(usize, Vec<T>)> = (0..parts.max(1)).map(|_| (0, vec![])).collect();
    for k in items {
        if let Some(b) = bins.iter_mut().min_by_key(|b| b.0) {
            b.0 += weight(&k);
            b.1.push(k);
        }
    }
    bins.into_iter().map(|b| b.1).filter(|b| !b.is_empty())
}

/// A job of `prepare`'s threads: plan kernel `i` of its list, or compile a batch.
#[cfg(not(target_arch = "wasm32"))]
enum Job {
    Plan(usize),
    Compile(Device, Vec<LinearKernel>),
}

/// What `prepare`'s threads share: the next kernel to plan, plans under way, planned kernels
/// not yet in a batch and batches ready to compile (by device and `Backend::batch_class`), and
/// the kernels already taken.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Default)]
struct Pipeline {
    next: usize,
    planning: usize,
    pending: HashMap<(Device, u8), Vec<LinearKernel>>,
    ready: Vec<((Device, u8), Vec<LinearKernel>)>,
    seen: HashSet<(Device, LinearKernel)>,
}

/// Every buffer a schedule will allocate fits its device, checked before any of them is: a
/// tensor too large for a buffer (or whose byte size overflows) fails with nothing run.
fn check_sizes(items: &[ScheduleItem]) -> Result<()> {
    for it in items {
        let out = it.out();
        if out.op == Op::Assign {
            continue;
        }
        let max = out.device.backend().max_buffer_bytes();
        let bytes = out.numel().checked_mul(out.dtype.size());
        if bytes.is_none_or(|b| b > max) {
            let what = match bytes {
                Some(b) => format!("{b} bytes"),
                None => "more bytes than this platform can address".into(),
            };
            bail!(
                Device,
                "realize: a {} tensor of shape {:?} needs {what}, more than the largest buffer {} \
                 allows ({max} bytes); nothing was run",
                out.dtype,
                out.shape,
                out.device
            );
        }
    }
    Ok(())
}

fn input_buffer(n: &UOp) -> Result<Arc<Buffer>> {
    n.buffer().ok_or_else(|| {
        Error::new(
            ErrorKind::Other,
            format!("internal: input {:?} {:?} was not realized", n.op, n.shape),
        )
    })
}

fn run_item(item: &ScheduleItem, keep: &HashSet<u64>) -> Result<()> {
    match item {
        ScheduleItem::Copy { out, src } => {
            flush_deferred()?;
            let sb = input_buffer(src)?;
            let buf = Arc::new(out.device.backend().alloc(out.numel() * out.dtype.size())?);
            record_alloc(&buf);
            copy(&sb, &buf)?;
            record(Launch::Copy {
                src: sb,
                dst: buf.clone(),
            });
            out.set_buffer(buf, keep.contains(&out.id));
        }
        ScheduleItem::Kernel { ast, out, inputs } => {
            let dev = out.device;
            let be = dev.backend();
            let out_buf = if out.op == Op::Assign {
                input_buffer(&out.src()[0])?
            } else {
                let b = Arc::new(be.alloc(out.numel() * out.dtype.size())?);
                record_alloc(&b);
                b
            };
            let mut bufs: Vec<Arc<Buffer>> = vec![out_buf.clone()];
            for i in inputs {
                let b = input_buffer(i)?;
                if b.device != dev {
                    return Err(Error::new(
                        ErrorKind::Device,
                        format!(
                            "a kernel on {dev} computing {:?} reads a buffer on {}; use .to() to move it",
                            out.shape, b.device
                        ),
                    ));
                }
                bufs.push(b);
            }
            // Held back where asked (not under BEAM: its search times kernels as it plans; not
            // while a TinyJit captures: it records launches as they run).
            let hold = DEFERRING.with(|d| d.get())
                && be.compiles_async()
                && crate::context::beam() == 0
                && !capturing();
            if hold {
                DEFERRED.with(|d| {
                    d.borrow_mut().push(Deferred {
                        dev,
                        ast: ast.clone(),
                        target: target(dev),
                        bufs,
                    })
                });
            } else {
                // After what is held back, which it may read.
                flush_deferred()?;
                launch_exe(dev, &*program(dev, ast)?, &bufs)?;
            }
            out.set_buffer(out_buf, keep.contains(&out.id));
        }
    }
    Ok(())
}

/// Launch the stages of a kernel's program on `bufs` (its slots in order) and the scratch
/// buffers it needs.
fn launch_exe(dev: Device, exe: &Executable, bufs: &[Arc<Buffer>]) -> Result<()> {
    let be = dev.backend();
    let mut scratch = vec![];
    for &(dt, n) in &exe.scratch {
        let b = Arc::new(be.alloc(n * dt.size())?);
        record_alloc(&b);
        scratch.push(b);
    }
    for (prog, slots) in &exe.stages {
        let stage_bufs: Vec<Arc<Buffer>> = slots
            .iter()
            .map(|s| match *s {
                BufRef::Arg(i) => bufs[i].clone(),
                BufRef::Scratch(i) => scratch[i].clone(),
            })
            .collect();
        launch(dev, prog, &stage_bufs)?;
        record(Launch::Kernel {
            dev,
            prog: prog.clone(),
            bufs: stage_bufs,
        });
    }
    Ok(())
}

/// Run one recorded launch again (a TinyJit replay without a backend graph).
pub fn run_launch(l: &Launch) -> Result<()> {
    match l {
        Launch::Kernel { dev, prog, bufs } => launch(*dev, prog, bufs),
        Launch::Copy { src, dst } => copy(src, dst),
    }
}

/// A buffer's bytes, read now (natively this waits; in the browser only host memory is ready
/// at once).
pub fn read_now(buf: &Buffer) -> Result<Vec<u8>> {
    flush_deferred()?;
    ready_now(buf.device.backend().copy_out(buf))
}

/// Copy the contents of one buffer into another (possibly on another device).
pub fn copy(src: &Buffer, dst: &Buffer) -> Result<()> {
    flush_deferred()?;
    let data = ready_now(src.device.backend().copy_out(src))?;
    dst.device
        .backend()
        .copy_in(dst, &data[..src.size.min(dst.size)])
}

/// Launch a program and update the counters (timed at `DEBUG>=2`: a line per kernel).
pub fn launch(dev: Device, prog: &Arc<Program>, bufs: &[Arc<Buffer>]) -> Result<()> {
    let be = dev.backend();
    let refs: Vec<&Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
    let bytes: u64 = bufs.iter().map(|b| b.size as u64).sum();
    if debug() < 2 {
        be.launch(prog, &refs)?;
        GlobalCounters::record(prog.ops, bytes, 0);
        return Ok(());
    }
    let line = {
        let (name, ops) = (prog.name.clone(), prog.ops);
        move |n: u64, ns: u64| {
            format!(
                "{n:>4} {:<6} {name:<28} {ops:>10} ops {:>9.3} ms",
                dev.name(),
                ns as f64 / 1e6
            )
        }
    };
    // The browser cannot wait for a timestamp: the kernel runs with timestamp queries and its
    // line is printed when they are read back.
    #[cfg(target_arch = "wasm32")]
    {
        let one = [Launch::Kernel {
            dev,
            prog: prog.clone(),
            bufs: bufs.to_vec(),
        }];
        if let Some(later) = be.launch_profiled(&one)? {
            GlobalCounters::record(prog.ops, bytes, 0);
            let n = GlobalCounters::kernel_count();
            crate::runtime::spawn(async move {
                match later.await {
                    Ok(ns) => {
                        let ns = ns.first().copied().unwrap_or(0);
                        GlobalCounters::add_time(ns);
                        crate::context::log(&line(n, ns));
                    }
                    Err(e) => crate::context::log(&format!("{n:>4} timing failed: {e}")),
                }
            });
            return Ok(());
        }
    }
    let mut device_ns = None;
    let host_ns = elapsed_ns(|| {
        device_ns = be.launch_timed(prog, &refs)?;
        Ok(())
    })?;
    let ns = device_ns.unwrap_or(host_ns);
    GlobalCounters::record(prog.ops, bytes, ns);
    crate::context::log(&line(GlobalCounters::kernel_count(), ns));
    Ok(())
}

/// Run `f` and return the host time it took (in the browser `performance.now()`, whose
/// resolution may be coarsened to 0.1 ms).
fn elapsed_ns(f: impl FnOnce() -> Result<()>) -> Result<u64> {
    let t0 = crate::runtime::host_clock_ns();
    f()?;
    Ok(crate::runtime::host_clock_ns().saturating_sub(t0))
}

/// Wait for a readback. Natively that blocks; in the browser a GPU readback completes only once
/// control returns to the event loop, so one that is not ready at once is an error there.
#[cfg(not(target_arch = "wasm32"))]
fn ready_now<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    crate::runtime::block_on(f)
}

#[cfg(target_arch = "wasm32")]
fn ready_now<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => Err(Error::new(
            ErrorKind::Device,
            "copy: moving data off WEBGPU needs an await in the browser; read it with `await t.data()` and build a new tensor",
        )),
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::balanced;

    #[test]
    fn batches_are_balanced_by_weight_and_keep_every_item() {
        let items = vec![9, 1, 1, 1, 4, 4, 2, 2, 3, 3];
        let bins: Vec<Vec<usize>> = balanced(items.clone(), 3, |&w| w).collect();
        assert_eq!(bins.len(), 3);
        let sums: Vec<usize> = bins.iter().map(|b| b.iter().sum()).collect();
        assert_eq!(sums.iter().sum::<usize>(), 30);
        assert!(sums.iter().all(|&s| s == 10), "{sums:?}");
        let mut all: Vec<usize> = bins.concat();
        all.sort();
        let mut want = items;
        want.sort();
        assert_eq!(all, want);
        // Fewer items than parts: no empty batch.
        assert_eq!(balanced(vec![5, 7], 4, |&w| w).count(), 2);
        assert_eq!(balanced(Vec::<usize>::new(), 4, |&w| w).count(), 0);
    }
}
