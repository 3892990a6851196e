//! The CPU backend: kernels rendered to C, compiled by the system C compiler (`cc`, or `$CC`)
//! into a shared object, loaded with dlopen, and run over the global range in chunks that the
//! calling thread and a pool of worker threads (one per further core) claim in turn. Compiled
//! objects are cached on disk by a hash of source and compiler command, written atomically
//! (compile to a temporary name, then rename).

use super::{
    cache_dir, host_copy_in, host_copy_out, stable_hash, temp_name, Backend, BoxFuture, Buffer,
    Device, HostMem, Mem, Program, ProgramImpl,
};
use crate::codegen::{c::CRenderer, render::render, Inst, LinearKernel, Target};
use crate::error::{bail, Error, ErrorKind, Result};
use crate::ops::ReduceOp;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

type KernelFn = unsafe extern "C" fn(*const *mut u8, i32, i32);

/// A C kernel compiled into a shared object and loaded: the function the CPU backend calls on
/// its worker threads.
pub struct CpuProgram {
    // Keeps the shared object loaded for as long as `func` may be called.
    _lib: Arc<libloading::Library>,
    func: KernelFn,
}

/// One logical CPU device (`CPU:n`): its own buffers; kernels run on the calling thread and
/// on worker threads.
pub struct Cpu {
    device: Device,
    threads: usize,
}

impl Cpu {
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

/// The compiler flags for a kernel rendered as `source`.
fn flags(k: &LinearKernel, source: &str) -> Vec<&'static str> {
    let float_sum = k
        .insts
        .iter()
        .any(|i| matches!(i, Inst::Acc { op: ReduceOp::Sum, dtype, .. } if dtype.is_float()));
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

/// The vector registers of this machine, which `-march=native` compiles for: 32 with AVX-512
/// (its VL extension gives 256-bit vectors the upper 16 too), 16 otherwise.
fn vector_registers() -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512vl") {
        return 32;
    }
    16
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
    let tmp = temp_name(&dir, &key);
    let c_path = tmp.with_extension("c");
    let tmp_so = tmp.with_extension("so.tmp");
    std::fs::write(&c_path, src)?;
    let out = Command::new(&cc)
        .args(flags)
        .arg("-o")
        .arg(&tmp_so)
        .arg(&c_path)
        .output();
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
    // SAFETY: the symbol is a kernel we rendered, with exactly the `KernelFn` signature.
    let func: KernelFn = unsafe {
        *lib.get::<KernelFn>(symbol.as_bytes())
            .map_err(|e| Error::new(ErrorKind::Backend, format!("cpu: symbol {symbol}: {e}")))?
    };
    Ok(Program {
        name: k.name.clone(),
        source,
        global_size: k.global_size,
        local_size: k.local_size,
        ops: k.ops_per_item() * k.global_size as u64,
        imp: ProgramImpl::Cpu(CpuProgram {
            _lib: lib.clone(),
            func,
        }),
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
            registers: vector_registers(),
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
        let source = render(k, &CRenderer);
        crate::context::dump_source(&source, "c");
        let fl = flags(k, &source);
        let (so, symbol) = match cached_so(&so_key(&source, &fl), &k.name) {
            Some(hit) => hit,
            None => (compile_so(&k.name, &source, &fl)?, k.name.clone()),
        };
        program(k, source, &load(&so)?, &symbol)
    }
    fn compile_batch(&self, ks: &[LinearKernel]) -> Vec<Result<Program>> {
        if let Err(e) = available() {
            let e = Error::new(ErrorKind::Device, format!("cpu: {e}"));
            return ks.iter().map(|_| Err(e.clone())).collect();
        }
        let sources: Vec<String> = ks.iter().map(|k| render(k, &CRenderer)).collect();
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
        for (fl, members) in groups {
            let keys: Vec<String> = members.iter().map(|&i| so_key(&sources[i], &fl)).collect();
            let symbols: Vec<String> = keys.iter().map(|key| format!("k_{key}")).collect();
            let mut unit = String::from(crate::codegen::c::PRELUDE);
            for (&i, symbol) in members.iter().zip(&symbols) {
                let mut renamed = ks[i].clone();
                renamed.name = symbol.clone();
                let src = render(&renamed, &CRenderer);
                unit.push_str(src.strip_prefix(crate::codegen::c::PRELUDE).unwrap_or(&src));
            }
            let batch = compile_so("a batch of kernels", &unit, &fl)
                .and_then(|so| load(&so).map(|lib| (so, lib)));
            for (j, &i) in members.iter().enumerate() {
                out[i] = Some(match &batch {
                    Ok((so, lib)) => {
                        // Later processes find the kernel by its own key.
                        let dir = cache_dir("cpu");
                        let file = so.file_name().map(|f| f.to_string_lossy().into_owned());
                        let tmp = temp_name(&dir, &keys[j]).with_extension("ref.tmp");
                        let line = format!("{} {}", file.unwrap_or_default(), symbols[j]);
                        if std::fs::write(&tmp, line).is_ok() {
                            let _ = std::fs::rename(&tmp, dir.join(format!("{}.ref", keys[j])));
                        }
                        program(&ks[i], sources[i].clone(), lib, &symbols[j])
                    }
                    // One kernel's error would fail the batch: compile each alone for its own.
                    Err(_) => self.compile(&ks[i]),
                });
            }
        }
        out.into_iter()
            .map(|p| p.unwrap_or_else(|| Err(Error::new(ErrorKind::Backend, "cpu: batch"))))
            .collect()
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
        let threads = if p.ops < 200_000 {
            1
        } else {
            self.threads.min(n)
        };
        let f = cp.func;
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
