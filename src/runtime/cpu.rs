//! The CPU backend: kernels rendered to C, compiled by the system C compiler (`cc`, or `$CC`)
//! into a shared object, loaded with dlopen, and run over the global range in chunks that the
//! calling thread and a pool of worker threads (one per further core) claim in turn. Compiled
//! objects are cached on disk by a hash of source and compiler command, written atomically
//! (compile to a temporary name, then rename).
//!
//! Compilation is tiered: a large batch of new kernels is compiled at `-O1` (with GCC's
//! vectorizers) so the first step can start, and again at `-O3` on a background thread, whose
//! functions then replace the quick ones in place (`Entry`): every program, cache entry and
//! captured JIT launch runs the optimized code from its next launch. Both builds compute the
//! same bits (IEEE semantics, no contraction: optimization levels change speed only).

use super::{
    cache_dir, host_copy_in, host_copy_out, stable_hash, temp_name, Backend, BoxFuture, Buffer,
    Device, HostMem, Mem, Program, ProgramImpl,
};
use crate::codegen::{c::CRenderer, render::render, Inst, LinearKernel, Target};
use crate::error::{bail, Error, ErrorKind, Result};
use crate::ops::ReduceOp;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

type KernelFn = unsafe extern "C" fn(*const *mut u8, i32, i32);

/// A C kernel compiled into a shared object and loaded: the function the CPU backend calls on
/// its worker threads.
pub struct CpuProgram {
    entry: Arc<Entry>,
}

/// A kernel's current function: the quick build's until the optimized one replaces it.
struct Entry {
    func: AtomicPtr<()>,
    // Every object a function of it came from, kept loaded: a launch may still be in one.
    libs: Mutex<Vec<Arc<libloading::Library>>>,
}

impl Entry {
    fn new(lib: &Arc<libloading::Library>, f: KernelFn) -> Arc<Entry> {
        Arc::new(Entry {
            func: AtomicPtr::new(f as *mut ()),
            libs: Mutex::new(vec![lib.clone()]),
        })
    }
    fn get(&self) -> KernelFn {
        let p = self.func.load(Ordering::Acquire);
        // SAFETY: `func` only ever holds `KernelFn` values (`new`, `replace`), whose objects
        // `libs` keeps loaded.
        unsafe { std::mem::transmute::<*mut (), KernelFn>(p) }
    }
    fn replace(&self, lib: &Arc<libloading::Library>, f: KernelFn) {
        lock(&self.libs).push(lib.clone());
        self.func.store(f as *mut (), Ordering::Release);
    }
}

/// One logical CPU device (`CPU:n`): its own buffers; kernels run on the calling thread and
/// on worker threads.
pub struct Cpu {
    device: Device,
    threads: usize,
}

impl Cpu {
    /// The C dialect for this machine's vectors.
    fn renderer(&self) -> CRenderer {
        CRenderer {
            lanes: super::vector_lanes(),
        }
    }

    /// `compile_batch`: the kernels no cache holds compiled together.
    fn compile_together(&self, ks: &[LinearKernel]) -> Vec<Result<Program>> {
        if let Err(e) = available() {
            let e = Error::new(ErrorKind::Device, format!("cpu: {e}"));
            return ks.iter().map(|_| Err(e.clone())).collect();
        }
        let sources: Vec<String> = ks.iter().map(|k| render(k, &self.renderer())).collect();
        let mut out: Vec<Option<Result<Program>>> = ks.iter().map(|_| None).collect();
        // Kernels compiled before are loaded as they are; the rest are compiled together, one
        // translation unit per set of flags: one compiler process for many kernels (each
        // process costs about 35 ms before it compiles anything).
        let mut groups: Vec<(Vec<&str>, Vec<usize>)> = vec![];
        for (i, k) in ks.iter().enumerate() {
            crate::context::dump_source(&sources[i], "c");
            let fl = flags(k, &sources[i]);
            if let Some((so, symbol)) = cached_so(&so_key(&sources[i], &fl), &k.name) {
                out[i] =
                    Some(load(&so).and_then(|lib| program(k, sources[i].clone(), &lib, &symbol)));
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == fl) {
                Some(g) => g.1.push(i),
                None => groups.push((fl, vec![i])),
            }
        }
        // A call with much new code compiles it in two tiers (`QUICK_LINES`).
        let fresh: usize = groups
            .iter()
            .flat_map(|g| &g.1)
            .map(|&i| sources[i].lines().count())
            .sum();
        let quick = crate::context::tiered() && fresh >= QUICK_LINES;
        for (fl, members) in groups {
            let keys: Vec<String> = members.iter().map(|&i| so_key(&sources[i], &fl)).collect();
            let symbols: Vec<String> = keys.iter().map(|key| format!("k_{key}")).collect();
            let mut unit = String::from(crate::codegen::c::PRELUDE);
            for (&i, symbol) in members.iter().zip(&symbols) {
                let mut renamed = ks[i].clone();
                renamed.name = symbol.clone();
                let src = render(&renamed, &self.renderer());
                unit.push_str(src.strip_prefix(crate::codegen::c::PRELUDE).unwrap_or(&src));
            }
            let used = if quick { quick_flags(&fl) } else { fl.clone() };
            let batch = compile_so("a batch of kernels", &unit, &used)
                .and_then(|so| load(&so).map(|lib| (so, lib)));
            let mut entries = vec![];
            for (j, &i) in members.iter().enumerate() {
                out[i] = Some(match &batch {
                    Ok((so, lib)) => {
                        if !quick {
                            write_ref(&keys[j], so, &symbols[j]);
                        }
                        let p = program(&ks[i], sources[i].clone(), lib, &symbols[j]);
                        if let Ok(Program {
                            imp: ProgramImpl::Cpu(cp),
                            ..
                        }) = &p
                        {
                            entries.push(cp.entry.clone());
                        }
                        p
                    }
                    // One kernel's error would fail the batch: compile each alone for its own.
                    Err(_) => self.compile(&ks[i]),
                });
            }
            if quick && batch.is_ok() && entries.len() == members.len() {
                upgrade(Upgrade {
                    unit,
                    flags: fl,
                    keys,
                    symbols,
                    entries,
                });
            }
        }
        out.into_iter()
            .map(|p| p.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "cpu: batch"))))
            .collect()
    }

    pub(crate) fn new(device: Device) -> Cpu {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Cpu { device, threads }
    }
}

fn compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "cc".into())
}

const FLAGS: &[&str] = &[
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fno-math-errno",
    "-fno-trapping-math",
    // GCC contracts `a * b + c` into an FMA by default (GNU C). The interpreter and WGSL round
    // a product on its own (outside a fused reduce step), and a value a kernel recomputes in
    // two places can then differ from itself: softmax of x³ at x ≈ 1e4 gave [0, 1] for
    // [0.5, 0.5] (x³ - max(x³), contracted, is x³'s rounding error, about 6e4, not 0). Found by
    // tests/differential.rs. The fused multiply-adds the IR asks for (a reduce step adding a
    // product: `Inst::Acc::fused`) are written out as such, so every backend fuses the same
    // operations.
    "-ffp-contract=off",
    // The 512-bit vector helpers are in every kernel's prelude; without AVX-512 nothing uses
    // them, and GCC's note about their calling convention is noise.
    "-Wno-psabi",
];

/// Flags for kernels that sum floats, and for long ones (`LONG_BODY_LINES`). The loop
/// vectorizer turns such a sum into an in-order ("fold-left") vector reduction, since it may not reassociate float additions; GCC 12.2
/// (Debian 12's) merges a load permutation into that reduction and counts some elements twice
/// (GCC PR tree-optimization/110381, fixed upstream in 2023): the sum over a flipped axis of a
/// realized (5, 8, 5) tensor came out -11 instead of -6, from C without undefined behaviour. An
/// in-order sum gains little from the loop vectorizer (its additions stay sequential); the
/// tutorial's training step, whose time is in such kernels, runs as fast without it.
/// Elementwise kernels keep it.
const NO_LOOP_VECTORIZER: &[&str] = &["-fno-tree-loop-vectorize"];

/// Lines of C (after the prelude) above which a kernel compiles without the loop vectorizer. It
/// vectorizes the invocation loop across 8 or 16 invocations, and on a long body of scalar
/// compares and selects GCC 12's RTL combiner then takes most of a minute: a sort kernel of
/// 4,000 rows of 4 (3,300 lines) compiled in 51 s with it and 0.7 s without. The largest
/// kernels of the tutorial's step and of the GPT's (under 1,800 lines) compile in 0.5 s as
/// they are and stay under it.
const LONG_BODY_LINES: usize = 2000;

/// Whether `k` sums floats (it compiles without the loop vectorizer, `NO_LOOP_VECTORIZER`).
fn sums_floats(k: &LinearKernel) -> bool {
    k.insts
        .iter()
        .any(|i| matches!(i, Inst::Acc { op: ReduceOp::Sum, dtype, .. } if dtype.is_float()))
}

/// The compiler flags for a kernel rendered as `source`.
fn flags(k: &LinearKernel, source: &str) -> Vec<&'static str> {
    let float_sum = sums_floats(k);
    let body = source
        .strip_prefix(crate::codegen::c::PRELUDE)
        .unwrap_or(source);
    let long = body.lines().count() > LONG_BODY_LINES;
    let extra = if float_sum || long {
        NO_LOOP_VECTORIZER
    } else {
        &[]
    };
    FLAGS.iter().chain(extra).copied().collect()
}

/// Whether a C compiler can be run.
pub fn available() -> std::result::Result<(), String> {
    static OK: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    OK.get_or_init(
        || match Command::new(compiler()).arg("--version").output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!(
                "'{} --version' failed: {}",
                compiler(),
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => Err(format!("no C compiler '{}' ({e}); set CC", compiler())),
        },
    )
    .clone()
}

/// The on-disk cache key of kernel source `src` compiled with `flags`.
fn so_key(src: &str, flags: &[&str]) -> String {
    stable_hash(format!("{}\n{}\n{src}", compiler(), flags.join(" ")))
}

/// A kernel already compiled on disk: its own object (`KEY.so`, symbol `name`), or a batch's
/// (`KEY.ref` names the batch object and the kernel's symbol in it).
fn cached_so(key: &str, name: &str) -> Option<(PathBuf, String)> {
    let dir = cache_dir("cpu");
    let so = dir.join(format!("{key}.so"));
    if so.exists() {
        return Some((so, name.to_string()));
    }
    let r = std::fs::read_to_string(dir.join(format!("{key}.ref"))).ok()?;
    let (file, symbol) = r.trim().split_once(' ')?;
    let so = dir.join(file);
    // A reference to a batch object removed since is a miss.
    so.exists().then(|| (so, symbol.to_string()))
}

fn compile_so(name: &str, src: &str, flags: &[&str]) -> Result<PathBuf> {
    compile_so_as(name, src, flags, false)
}

/// `compile_so`; in the `background`, at a lower scheduling priority (`nice`, where it runs), so
/// that the optimized builds take the cores the training steps leave idle.
fn compile_so_as(name: &str, src: &str, flags: &[&str], background: bool) -> Result<PathBuf> {
    let cc = compiler();
    let key = so_key(src, flags);
    let dir = cache_dir("cpu");
    let so = dir.join(format!("{key}.so"));
    if so.exists() {
        return Ok(so);
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cpu: cannot create cache dir {}: {e}", dir.display()),
        )
    })?;
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| sweep_stale(&dir));
    let tmp = temp_name(&dir, &key);
    let c_path = tmp.with_extension("c");
    let tmp_so = tmp.with_extension("so.tmp");
    std::fs::write(&c_path, src)?;
    let run = |nice: bool| {
        let mut c = if nice {
            let mut c = Command::new("nice");
            c.args(["-n", "10", &cc]);
            c
        } else {
            Command::new(&cc)
        };
        c.args(flags).arg("-o").arg(&tmp_so).arg(&c_path).output()
    };
    let out = match run(background) {
        Err(e) if background && e.kind() == std::io::ErrorKind::NotFound => run(false),
        out => out,
    };
    let _ = std::fs::remove_file(&c_path);
    let out = out.map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("cpu: cannot run C compiler '{cc}': {e}"),
        )
    })?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp_so);
        bail!(
            Backend,
            "cpu: compiling kernel {name} failed:\n{}\n{src}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::rename(&tmp_so, &so)?;
    Ok(so)
}

/// Remove what compiles that never finished left in `dir`: a process that exits (or is killed)
/// while a compiler runs, as one may during a background build, leaves its temporary source
/// and object (`temp_name`'s names). Only files an hour old: no compile takes that long.
fn sweep_stale(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        if name.contains(".ThreadId") && old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Records that kernel `key` is function `symbol` of batch object `so`, for later processes.
fn write_ref(key: &str, so: &std::path::Path, symbol: &str) {
    let dir = cache_dir("cpu");
    let file = so.file_name().map(|f| f.to_string_lossy().into_owned());
    let tmp = temp_name(&dir, key).with_extension("ref.tmp");
    let line = format!("{} {symbol}", file.unwrap_or_default());
    if std::fs::write(&tmp, line).is_ok() {
        let _ = std::fs::rename(&tmp, dir.join(format!("{key}.ref")));
    }
}

/// Lines of new C (prelude included) in one `compile_batch` from which it compiles in two
/// tiers; below, `-O3` takes about 0.2 s or less and a quick build would save little.
const QUICK_LINES: usize = 1000;

/// The quick tier's flags: `-O1` with GCC's vectorizers (SLP everywhere, the loop vectorizer
/// where `flags` allow it) in place of `-O3`. It compiles the small GPT's kernels in 60% of
/// `-O3`'s time and runs its step within a few percent of `-O3`'s speed (`-O1` alone: 1.5x
/// slower).
fn quick_flags(flags: &[&'static str]) -> Vec<&'static str> {
    let loops = !flags.contains(&NO_LOOP_VECTORIZER[0]);
    let mut out = vec![];
    for &f in flags {
        if f == "-O3" {
            out.extend(["-O1", "-ftree-slp-vectorize"]);
            if loops {
                out.push("-ftree-loop-vectorize");
            }
        } else {
            out.push(f);
        }
    }
    out
}

/// A quick batch's optimized build, to make on the background thread.
struct Upgrade {
    unit: String,
    flags: Vec<&'static str>,
    keys: Vec<String>,
    symbols: Vec<String>,
    entries: Vec<Arc<Entry>>,
}

/// The background compiler's queue, and how many upgrades are queued or being built.
struct Upgrades {
    state: Mutex<(VecDeque<Upgrade>, usize)>,
    changed: Condvar,
    // Whether its thread started (without one, quick code stays).
    running: bool,
}

fn upgrades() -> &'static Upgrades {
    static U: OnceLock<Upgrades> = OnceLock::new();
    U.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("wgrad-cc".into())
            .spawn(upgrade_worker);
        if let Err(e) = &spawned {
            crate::context::log(&format!("cpu: no background compiler thread ({e})"));
        }
        Upgrades {
            state: Mutex::new((VecDeque::new(), 0)),
            changed: Condvar::new(),
            running: spawned.is_ok(),
        }
    })
}

/// Queue a quick batch's optimized build.
fn upgrade(u: Upgrade) {
    let q = upgrades();
    if !q.running {
        return;
    }
    let mut st = lock(&q.state);
    st.0.push_back(u);
    st.1 += 1;
    q.changed.notify_all();
}

/// The background compiler: builds each queued batch at `-O3`, records its kernels for later
/// processes and swaps their functions in. A failed build leaves the quick code in place.
fn upgrade_worker() {
    let q = upgrades();
    loop {
        let u = {
            let mut st = lock(&q.state);
            loop {
                if let Some(u) = st.0.pop_front() {
                    break u;
                }
                st = q.changed.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        // The first step's own compiles go first: an optimized build waits for them.
        while super::foreground_busy() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let t = Instant::now();
        let built = compile_so_as("a batch of kernels", &u.unit, &u.flags, true)
            .and_then(|so| load(&so).map(|lib| (so, lib)));
        crate::context::GlobalCounters::add_background_compile(t.elapsed().as_nanos() as u64);
        match built {
            Ok((so, lib)) => {
                for ((key, symbol), entry) in u.keys.iter().zip(&u.symbols).zip(&u.entries) {
                    if let Ok(f) = symbol_fn(&lib, symbol) {
                        write_ref(key, &so, symbol);
                        entry.replace(&lib, f);
                    }
                }
                if crate::context::debug() >= 2 {
                    let n = u.entries.len();
                    crate::context::log(&format!(
                        "cpu: {n} kernel{} now run{} -O3 build{} (compiled in {:.0} ms)",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "s its" } else { " their" },
                        if n == 1 { "" } else { "s" },
                        t.elapsed().as_secs_f64() * 1e3
                    ));
                }
            }
            Err(e) => crate::context::log(&format!("cpu: the -O3 build failed, keeping -O1: {e}")),
        }
        let mut st = lock(&q.state);
        st.1 -= 1;
        q.changed.notify_all();
    }
}

/// Wait until every kernel compiled quickly runs its optimized build (`TIERED`); at once when
/// none is pending.
pub fn finish_compiles() {
    let q = upgrades();
    let mut st = lock(&q.state);
    while st.1 > 0 {
        st = q.changed.wait(st).unwrap_or_else(|e| e.into_inner());
    }
}

/// Optimized builds queued or being made.
pub fn pending_compiles() -> usize {
    lock(&upgrades().state).1
}

/// A compiled object, loaded.
fn load(so: &std::path::Path) -> Result<Arc<libloading::Library>> {
    // SAFETY: the object was produced by our compiler invocation from our own source; its
    // initialisers are those of a plain C file.
    let lib = unsafe { libloading::Library::new(so) }.map_err(|e| {
        Error::new(
            ErrorKind::Backend,
            format!("cpu: dlopen {}: {e}", so.display()),
        )
    })?;
    Ok(Arc::new(lib))
}

/// Kernel `k` (rendered as `source`) as the function `symbol` of a loaded object.
fn program(
    k: &LinearKernel,
    source: String,
    lib: &Arc<libloading::Library>,
    symbol: &str,
) -> Result<Program> {
    let func = symbol_fn(lib, symbol)?;
    Ok(Program {
        name: k.name.clone(),
        source,
        global_size: k.global_size,
        local_size: k.local_size,
        ops: k.ops_per_item() * k.global_size as u64,
        imp: ProgramImpl::Cpu(CpuProgram {
            entry: Entry::new(lib, func),
        }),
    })
}

/// Kernel function `symbol` of a loaded object.
fn symbol_fn(lib: &libloading::Library, symbol: &str) -> Result<KernelFn> {
    // SAFETY: the symbol is a kernel we rendered, with exactly the `KernelFn` signature.
    Ok(unsafe {
        *lib.get::<KernelFn>(symbol.as_bytes())
            .map_err(|e| Error::new(ErrorKind::Backend, format!("cpu: symbol {symbol}: {e}")))?
    })
}

/// Chunks of a launch's range per thread, claimed in turn (see `launch`).
const CHUNKS_PER_THREAD: usize = 8;

/// One launch's range, run in chunks that threads claim in turn as they finish the last: on
/// a shared machine one core is often slowed by another process, and an even split would wait
/// for it.
struct Job {
    f: KernelFn,
    ptrs: *const *mut u8,
    n: usize,
    chunks: usize,
    next: AtomicUsize,
}

impl Job {
    fn work(&self) {
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks {
                return;
            }
            let (lo, hi) = (c * self.n / self.chunks, (c + 1) * self.n / self.chunks);
            // SAFETY: the kernel indexes only within the buffers the scheduler sized for it,
            // which outlive the launch; each chunk writes a disjoint range of output elements.
            unsafe { (self.f)(self.ptrs, lo as i32, hi as i32) };
        }
    }
}

/// Worker threads kept for every launch (spawning threads per launch cost 56-100 µs here,
/// a millisecond or two per training step). The launching thread works too; launches from
/// several threads take turns.
struct Pool {
    workers: AtomicUsize,
    /// Jobs published so far.
    generation: AtomicU64,
    /// Workers that have finished the current job.
    left: AtomicUsize,
    /// The current `Job`, as an address (valid until every worker has left it).
    job: Mutex<usize>,
    wake: Condvar,
    done: Condvar,
    turn: Mutex<()>,
}

/// How long a waiting thread spins before it sleeps: the kernels of a step follow each other
/// within microseconds, and waking a sleeping thread takes tens of them.
const SPIN: Duration = Duration::from_micros(100);

/// Spin until `ready()` or `SPIN` has passed; whether it became ready.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() > SPIN {
            return ready();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pool for `threads` threads in all (created on first use, with the first caller's count).
fn pool(threads: usize) -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            workers: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            left: AtomicUsize::new(0),
            job: Mutex::new(0),
            wake: Condvar::new(),
            done: Condvar::new(),
            turn: Mutex::new(()),
        }));
        // Workers the system cannot create (out of memory) are left out; none sees a job
        // before the count is set.
        let spawned = (1..threads)
            .filter(|i| {
                std::thread::Builder::new()
                    .name(format!("wgrad-cpu-{i}"))
                    .spawn(move || pool.serve())
                    .is_ok()
            })
            .count();
        pool.workers.store(spawned, Ordering::Release);
        pool
    })
}

impl Pool {
    /// Run `job` on every worker and the calling thread; returns when all have left it.
    fn run(&self, job: &Job) {
        let _turn = lock(&self.turn);
        let workers = self.workers.load(Ordering::Acquire);
        {
            // Under the lock, so that a worker about to sleep sees it (or is woken).
            let mut current = lock(&self.job);
            *current = job as *const Job as usize;
            self.left.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
        }
        self.wake.notify_all();
        job.work();
        let all_left = || self.left.load(Ordering::Acquire) == workers;
        if !spin_until(all_left) {
            let mut st = lock(&self.job);
            while !all_left() {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// A worker's loop: wait for a job, work on it, report.
    fn serve(&self) {
        let mut seen = 0;
        loop {
            let new = || self.generation.load(Ordering::Acquire) != seen;
            let job = if spin_until(new) {
                *lock(&self.job)
            } else {
                let mut st = lock(&self.job);
                while !new() {
                    st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                *st
            } as *const Job;
            seen = self.generation.load(Ordering::Acquire);
            // SAFETY: `run` keeps the job alive until every worker has reported leaving it.
            unsafe { (*job).work() };
            let _st = lock(&self.job);
            self.left.fetch_add(1, Ordering::Release);
            self.done.notify_one();
        }
    }
}

impl Backend for Cpu {
    fn compiles_in_parallel(&self) -> bool {
        true
    }
    fn device(&self) -> Device {
        self.device
    }
    fn target(&self) -> Target {
        Target {
            tiles: false,
            ..super::host_target()
        }
    }
    fn max_buffers(&self) -> usize {
        usize::MAX
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
        available().map_err(|e| Error::new(ErrorKind::Device, format!("cpu: {e}")))?;
        let source = render(k, &self.renderer());
        crate::context::dump_source(&source, "c");
        let fl = flags(k, &source);
        let (so, symbol) = match cached_so(&so_key(&source, &fl), &k.name) {
            Some(hit) => hit,
            None => (compile_so(&k.name, &source, &fl)?, k.name.clone()),
        };
        program(k, source, &load(&so)?, &symbol)
    }
    fn compile_batch(&self, ks: &[LinearKernel]) -> Vec<Result<Program>> {
        super::foreground(|| self.compile_together(ks))
    }
    /// Float sums and the rest: their flags differ (`flags`; a kernel over `LONG_BODY_LINES`
    /// of C, rare, is one more compiler run in its batch).
    fn batch_class(&self, k: &LinearKernel) -> u8 {
        u8::from(sums_floats(k))
    }
    fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
        let ProgramImpl::Cpu(cp) = &p.imp else {
            bail!(
                Backend,
                "cpu: cannot launch a program compiled for another backend"
            )
        };
        let ptrs: Vec<*mut u8> = bufs
            .iter()
            .map(|b| b.host().map(|h| h.ptr()))
            .collect::<Result<_>>()?;
        // A kernel with workgroups runs whole workgroups (C loops over their invocations).
        let n = if p.local_size > 1 {
            p.global_size / p.local_size
        } else {
            p.global_size
        };
        if n > i32::MAX as usize {
            bail!(
                Backend,
                "cpu: kernel {} has {n} invocations, more than 32-bit indexing allows",
                p.name
            );
        }
        let threads = if p.ops < super::PARALLEL_MIN_OPS {
            1
        } else {
            self.threads.min(n)
        };
        let f = cp.entry.get();
        if threads <= 1 {
            // SAFETY: the kernel indexes only within the buffers the scheduler sized for it.
            unsafe { f(ptrs.as_ptr(), 0, n as i32) };
            return Ok(());
        }
        let job = Job {
            f,
            ptrs: ptrs.as_ptr(),
            n,
            chunks: n.min(threads * CHUNKS_PER_THREAD),
            next: AtomicUsize::new(0),
        };
        pool(self.threads).run(&job);
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temporaries_are_swept_and_fresh_ones_kept() {
        let dir = std::env::temp_dir().join(format!("wgrad-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (old, fresh, other) = (
            dir.join("k.1.ThreadId2.so.tmp"),
            dir.join("k.3.ThreadId4.c"),
            dir.join("kernel.so"),
        );
        for f in [&old, &fresh, &other] {
            std::fs::write(f, b"x").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
        for f in [&old, &other] {
            let file = std::fs::File::options().write(true).open(f).unwrap();
            file.set_modified(two_hours_ago).unwrap();
        }
        sweep_stale(&dir);
        assert!(!old.exists(), "an hour-old temporary is removed");
        assert!(fresh.exists(), "a compile under way keeps its files");
        assert!(other.exists(), "cached objects stay, however old");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A stand-in kernel: adds 1 to each `u32` of its range of buffer 0.
    unsafe extern "C" fn bump(bufs: *const *mut u8, lo: i32, hi: i32) {
        // SAFETY: the test passes one buffer of at least `hi` u32s.
        let out = unsafe { *bufs } as *mut u32;
        for i in lo..hi {
            // SAFETY: as above; chunks are disjoint.
            unsafe { *out.add(i as usize) += 1 };
        }
    }

    /// A kernel whose C body is longer than `LONG_BODY_LINES` compiles without the loop
    /// vectorizer (as float sums do); a short elementwise one keeps it.
    #[test]
    fn long_kernels_compile_without_the_loop_vectorizer() {
        let k = LinearKernel {
            name: "E_1".into(),
            insts: vec![],
            bufs: vec![],
            global_size: 1,
            local_size: 1,
            shared: vec![],
            nregs: 0,
        };
        let short = format!("{}void E_1(void) {{}}\n", crate::codegen::c::PRELUDE);
        let long = format!("{short}{}", "  x += 1;\n".repeat(LONG_BODY_LINES));
        let off = "-fno-tree-loop-vectorize";
        assert!(!flags(&k, &short).contains(&off));
        assert!(flags(&k, &long).contains(&off));
    }

    /// Every element of every launch runs exactly once, with launches from several threads at
    /// once and ranges shorter than the chunks asked for.
    #[test]
    fn the_pool_runs_each_element_once() {
        let threads = 4;
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let n = [1, 3, 17, 1000, 4099][t % 5];
                    let mut data = vec![0u32; n];
                    let ptrs = [data.as_mut_ptr() as *mut u8];
                    for _ in 0..200 {
                        let job = Job {
                            f: bump,
                            ptrs: ptrs.as_ptr(),
                            n,
                            chunks: n.min(2 * CHUNKS_PER_THREAD),
                            next: AtomicUsize::new(0),
                        };
                        pool(3).run(&job);
                    }
                    assert!(data.iter().all(|&v| v == 200), "{n}: {data:?}");
                });
            }
        });
    }
}
