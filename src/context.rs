//! Knobs, like tinygrad's: `DEBUG`, `TRAINING`, `DEV`, `JIT` from the environment, overridable
//! for a scope with `Context`; and `GlobalCounters` (kernels launched, FLOPs, bytes, time).

use crate::device::Device;
use crate::dtype::DType;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[derive(Clone, Default, Debug)]
struct Frame {
    debug: Option<u32>,
    training: Option<bool>,
    dev: Option<Device>,
    no_grad: Option<bool>,
    max_buffers: Option<usize>,
    opt_target: Option<OptTarget>,
    beam: Option<u32>,
    jit_verify: Option<u32>,
    default_float: Option<DType>,
}

/// What the kernel optimizer shapes kernels for. Each device has its own default; `OPT_TARGET`
/// (env, `Context::opt_target`) forces one, e.g. GPU-shaped kernels on a software adapter or
/// on the CPU, where they are checked against the interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptTarget {
    /// A GPU: many invocations in flight, short loops per invocation, cheap workgroup memory.
    Gpu,
    /// A WebGPU adapter that runs on the CPU (lavapipe, SwiftShader): long reduces split as on
    /// the CPU (which keeps loops far below the 65,535 iterations after which llvmpipe stops an
    /// invocation's loops), no barriers (they are very expensive there), register blocking
    /// costed by the loads each invocation gathers.
    SoftGpu,
    /// Compiled C (and the interpreter) on the host's cores.
    Cpu,
    /// No optimization (`NOOPT=1`): one invocation per output, plain loops.
    None,
}

impl std::str::FromStr for OptTarget {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<OptTarget> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "gpu" => OptTarget::Gpu,
            "soft" | "softgpu" | "cpu_adapter" => OptTarget::SoftGpu,
            "cpu" | "c" => OptTarget::Cpu,
            "none" | "noopt" => OptTarget::None,
            _ => {
                return Err(crate::Error::new(
                    crate::ErrorKind::Other,
                    format!("OPT_TARGET: unknown target '{s}' (gpu, soft, cpu or none)"),
                ))
            }
        })
    }
}

thread_local! {
    static STACK: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

fn lookup<T>(f: impl Fn(&Frame) -> Option<T>) -> Option<T> {
    STACK.with(|s| s.borrow().iter().rev().find_map(&f))
}

/// Scoped settings: `Context::new().training(true).run(|| step())`. Unset fields inherit.
/// Settings are per thread and nest: an inner context overrides what it sets and inherits the
/// rest; leaving `run` restores the outer settings. Outside any context, the environment
/// (`DEBUG`, `DEV`, `TRAINING`, `BEAM`, …) gives the defaults.
///
/// ```
/// use wgrad::{context, Context, Device, Tensor};
/// let t = Context::new().dev(Device::Interp).run(|| Tensor::ones(&[2]))?;
/// assert_eq!(t.device(), Device::Interp);
/// Context::new().training(true).run(|| {
///     assert!(context::training());
///     Context::new().no_grad(true).run(|| assert!(context::training() && context::no_grad()));
/// });
/// assert!(!context::no_grad());
/// # Ok::<(), wgrad::Error>(())
/// ```
#[derive(Clone, Default, Debug)]
pub struct Context {
    frame: Frame,
}

impl Context {
    /// A context that changes nothing (every setting inherited); chain the setters on it.
    pub fn new() -> Self {
        Self::default()
    }
    /// 1: device chosen; 2: every kernel launched with its time; 3: the schedule; 4: sources.
    pub fn debug(mut self, level: u32) -> Self {
        self.frame.debug = Some(level);
        self
    }
    /// Training mode: dropout is active and optimizers may step.
    pub fn training(mut self, on: bool) -> Self {
        self.frame.training = Some(on);
        self
    }
    /// The device new tensors are created on.
    pub fn dev(mut self, d: Device) -> Self {
        self.frame.dev = Some(d);
        self
    }
    /// Ops created inside do not track gradients.
    pub fn no_grad(mut self, on: bool) -> Self {
        self.frame.no_grad = Some(on);
        self
    }
    /// Cap the buffers one kernel may bind below the device's own limit (for testing the
    /// scheduler's splitting as a device with few storage buffers would need it).
    pub fn max_buffers(mut self, n: usize) -> Self {
        self.frame.max_buffers = Some(n);
        self
    }
    /// Shape kernels for this target instead of the device's own (see `OptTarget`).
    pub fn opt_target(mut self, t: OptTarget) -> Self {
        self.frame.opt_target = Some(t);
        self
    }
    /// Tune every kernel compiled inside by a beam search of width `n` over the optimizer's
    /// actions, timed on the device (0 turns it off); like `BEAM=n`.
    pub fn beam(mut self, n: u32) -> Self {
        self.frame.beam = Some(n);
        self
    }
    /// Verify TinyJit replays: every `n`th replay also runs the function eagerly and compares
    /// (0 turns it off); like `JIT_VERIFY=n`.
    pub fn jit_verify(mut self, n: u32) -> Self {
        self.frame.jit_verify = Some(n);
        self
    }
    /// The dtype of float tensors made without one (`zeros`, `rand`, layer weights, ints made
    /// float); f32 unless changed. f16 and bf16 are stored in two bytes and computed in f32;
    /// optimizers keep f32 master copies of such parameters. Like `DEFAULT_FLOAT=f16`. A
    /// non-float dtype is ignored with a warning (a chained setter cannot fail).
    pub fn default_float(mut self, dt: DType) -> Self {
        if dt.is_float() {
            self.frame.default_float = Some(dt);
        } else {
            log(&format!(
                "wgrad: Context::default_float({dt}) ignored: not a float dtype"
            ));
        }
        self
    }
    /// Mixed precision (`HALF=1`): float tensors made without a dtype are f16 (activations and
    /// weights in two bytes, arithmetic and accumulation in f32, f32 master weights in the
    /// optimizer); `false` goes back to f32.
    pub fn half(self, on: bool) -> Self {
        self.default_float(if on { DType::F16 } else { DType::F32 })
    }
    /// Run `f` with these settings in force on this thread.
    pub fn run<R>(self, f: impl FnOnce() -> R) -> R {
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                STACK.with(|s| s.borrow_mut().pop());
            }
        }
        STACK.with(|s| s.borrow_mut().push(self.frame));
        let _pop = Pop;
        f()
    }
}

static PROCESS_DEBUG: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// Set the debug level outside any `Context` (overrides `DEBUG` from the environment; `None`
/// goes back to it). The browser has no environment, so `setDebug` uses this.
pub fn set_debug(level: Option<u32>) {
    PROCESS_DEBUG.store(level.map_or(-1, |l| l as i64), Ordering::Relaxed);
}

/// The debug level in force: the innermost `Context::debug`, else `set_debug`, else `DEBUG`
/// from the environment, else 0.
pub fn debug() -> u32 {
    static ENV: OnceLock<u32> = OnceLock::new();
    lookup(|f| f.debug).unwrap_or_else(|| match PROCESS_DEBUG.load(Ordering::Relaxed) {
        l if l >= 0 => l as u32,
        _ => *ENV.get_or_init(|| env_u32("DEBUG").unwrap_or(0)),
    })
}

static LOG_SINK: OnceLock<fn(&str)> = OnceLock::new();

/// Where debug output goes: stderr, unless a sink was installed (the browser's console).
pub fn set_log_sink(f: fn(&str)) {
    let _ = LOG_SINK.set(f);
}

/// Write one line of debug output.
pub fn log(msg: &str) {
    match LOG_SINK.get() {
        Some(f) => f(msg),
        None => eprintln!("{msg}"),
    }
}

static PROCESS_FLOAT: std::sync::Mutex<Option<DType>> = std::sync::Mutex::new(None);

/// Set the default float dtype outside any `Context` (overrides `HALF`/`DEFAULT_FLOAT` from the
/// environment; `None` goes back to them). The browser has no environment, so `init({ half })`
/// uses this. A non-float dtype is an error.
pub fn set_default_float(dt: Option<DType>) -> crate::Result<()> {
    if let Some(d) = dt.filter(|d| !d.is_float()) {
        return Err(crate::Error::new(
            crate::ErrorKind::DType,
            format!("set_default_float: {d} is not a float dtype (f32, f16 or bf16)"),
        ));
    }
    *PROCESS_FLOAT.lock().unwrap_or_else(|e| e.into_inner()) = dt;
    Ok(())
}

/// The dtype of float tensors made without one: the innermost `Context::default_float`/`half`,
/// else `set_default_float`, else `DEFAULT_FLOAT` (`f32`, `f16`, `bf16`) or `HALF=1` (f16) from
/// the environment, else f32.
pub fn default_float() -> DType {
    static ENV: OnceLock<DType> = OnceLock::new();
    lookup(|f| f.default_float)
        .or_else(|| *PROCESS_FLOAT.lock().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_else(|| {
            *ENV.get_or_init(|| {
                let named =
                    std::env::var("DEFAULT_FLOAT")
                        .ok()
                        .and_then(|v| match v.parse::<DType>() {
                            Ok(d) if d.is_float() => Some(d),
                            _ => {
                                log(&format!(
                                    "wgrad: DEFAULT_FLOAT={v} ignored: not a float dtype"
                                ));
                                None
                            }
                        });
                named.unwrap_or(if env_u32("HALF").unwrap_or(0) != 0 {
                    DType::F16
                } else {
                    DType::F32
                })
            })
        })
}

/// Whether training mode is on (`Context::training`, else `TRAINING=1`): dropout is active and
/// optimizers may step only then.
pub fn training() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    lookup(|f| f.training)
        .unwrap_or_else(|| *ENV.get_or_init(|| env_u32("TRAINING").unwrap_or(0) != 0))
}

/// The beam width asked for (`Context::beam`, else `BEAM`); 0 is off.
pub fn beam() -> u32 {
    static ENV: OnceLock<u32> = OnceLock::new();
    lookup(|f| f.beam).unwrap_or_else(|| *ENV.get_or_init(|| env_u32("BEAM").unwrap_or(0)))
}

/// How often a TinyJit replay is verified against an eager run (`Context::jit_verify`, else
/// `JIT_VERIFY`): every `n`th replay; 0 is off.
pub fn jit_verify() -> u32 {
    static ENV: OnceLock<u32> = OnceLock::new();
    lookup(|f| f.jit_verify)
        .unwrap_or_else(|| *ENV.get_or_init(|| env_u32("JIT_VERIFY").unwrap_or(0)))
}

/// `IGNORE_BEAM_CACHE=1`: search again instead of reusing cached choices.
pub fn ignore_beam_cache() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("IGNORE_BEAM_CACHE").unwrap_or(0) != 0)
}

/// `BEAM_BUDGET_MS`: the time a search may spend on one kernel (default 10 s).
pub fn beam_budget_ms() -> u64 {
    static ENV: OnceLock<u64> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("BEAM_BUDGET_MS").map_or(10_000, u64::from))
}

/// `TIERED` (default 1): the CPU backend compiles a large batch of new kernels quickly first
/// and replaces their code with the fully optimized build when it is ready (`TIERED=0`
/// compiles fully optimized at once and waits for it).
pub fn tiered() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("TIERED").is_none_or(|v| v != 0))
}

/// `CPU_LANES` (8 or 16): the f32 lanes of the CPU backend's widest vectors, in place of the
/// machine's (16 with AVX-512, else 8), to compare (16 is taken only with AVX-512).
pub fn cpu_lanes() -> Option<usize> {
    static ENV: OnceLock<Option<usize>> = OnceLock::new();
    *ENV.get_or_init(|| match env_u32("CPU_LANES") {
        Some(v @ (8 | 16)) => Some(v as usize),
        Some(v) => {
            log(&format!("CPU_LANES={v} ignored: it takes 8 or 16"));
            None
        }
        None => None,
    })
}

/// Whether GPU kernels may stage operand tiles in workgroup memory (`TILES=0` turns it off,
/// to compare).
pub fn tiles() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("TILES").is_none_or(|v| v != 0))
}

/// Whether GPU reduces may combine partial results through subgroups where the device has
/// them (`SUBGROUPS=0` keeps them in workgroup memory only, to compare).
pub fn subgroups() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("SUBGROUPS").is_none_or(|v| v != 0))
}

/// Whether WebGPU kernels may store f16 natively where the adapter has `shader-f16`
/// (`SHADER_F16=0` packs f16 into words as on adapters without it, to compare).
pub fn shader_f16() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("SHADER_F16").is_none_or(|v| v != 0))
}

/// Whether WebAssembly kernels may use relaxed SIMD where the engine has it (`RELAXED_SIMD=0`
/// keeps fused vector steps a multiply then an add, to compare or to get the same bits on
/// every machine).
pub fn relaxed_simd() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    *ENV.get_or_init(|| env_u32("RELAXED_SIMD").is_none_or(|v| v != 0))
}

/// The optimizer target asked for, if any: a `Context`'s, else `OPT_TARGET`, else `None` for
/// `NOOPT=1`.
pub fn opt_target() -> Option<OptTarget> {
    static ENV: OnceLock<Option<OptTarget>> = OnceLock::new();
    lookup(|f| f.opt_target).or_else(|| {
        *ENV.get_or_init(|| {
            if env_u32("NOOPT").unwrap_or(0) != 0 {
                return Some(OptTarget::None);
            }
            let v = std::env::var("OPT_TARGET")
                .ok()
                .filter(|v| !v.trim().is_empty())?;
            match v.parse() {
                Ok(t) => Some(t),
                Err(e) => {
                    log(&format!("wgrad: ignoring {e}"));
                    None
                }
            }
        })
    })
}

/// The cap on buffers per kernel set by `Context::max_buffers`, if any.
pub fn max_buffers() -> Option<usize> {
    lookup(|f| f.max_buffers)
}

/// Whether gradient tracking is off (`Context::no_grad`).
pub fn no_grad() -> bool {
    lookup(|f| f.no_grad).unwrap_or(false)
}

/// `DEV` from the environment, if set and valid.
pub fn env_device() -> Option<Device> {
    static ENV: OnceLock<Option<Device>> = OnceLock::new();
    *ENV.get_or_init(|| {
        let v = std::env::var("DEV").ok().filter(|v| !v.trim().is_empty())?;
        match v.parse::<Device>() {
            Ok(d) => Some(d),
            Err(e) => {
                log(&format!("wgrad: ignoring DEV={v}: {e}"));
                None
            }
        }
    })
}

static PROCESS_DEFAULT: std::sync::Mutex<Option<Device>> = std::sync::Mutex::new(None);

/// Set the device used when neither a `Context` nor `DEV` names one (the browser's `init` sets
/// it to the device it got; otherwise the runtime picks the best one).
pub fn set_default_device(d: Option<Device>) {
    *PROCESS_DEFAULT.lock().unwrap_or_else(|e| e.into_inner()) = d;
}

/// The device asked for, if any: the innermost `Context` that names one, else `DEV`, else the
/// process default. `Device::default()` falls back to the best available device.
pub fn device_override() -> Option<Device> {
    lookup(|f| f.dev)
        .or_else(env_device)
        .or_else(|| *PROCESS_DEFAULT.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Write a kernel's source into `$WGRAD_DUMP` (one file per kernel, named by hash) and print it
/// at `DEBUG>=4`. Backends call it with what they compile; when `WGRAD_DUMP_AS` names a dialect,
/// the engine writes that dialect's rendering of every kernel instead (`dump_file`), and the
/// backends' own sources are not written.
pub fn dump_source(src: &str, ext: &str) {
    if debug() >= 4 {
        log(src);
    }
    if dump_as().is_none() {
        dump_file(src, ext);
    }
}

/// `WGRAD_DUMP_AS`: the dialect every kernel's source is dumped in, whatever device runs it.
pub fn dump_as() -> Option<String> {
    #[cfg(target_arch = "wasm32")]
    return None;
    #[cfg(not(target_arch = "wasm32"))]
    {
        static ENV: OnceLock<Option<String>> = OnceLock::new();
        ENV.get_or_init(|| {
            std::env::var("WGRAD_DUMP_AS")
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
        .clone()
    }
}

/// Write one source file into `$WGRAD_DUMP`, if set (named by the source's hash).
pub fn dump_file(src: &str, ext: &str) {
    #[cfg(target_arch = "wasm32")]
    let _ = (src, ext);
    #[cfg(not(target_arch = "wasm32"))]
    if let Ok(dir) = std::env::var("WGRAD_DUMP") {
        let h = {
            let mut x = 0xcbf29ce484222325u64;
            for b in src.bytes() {
                x ^= b as u64;
                x = x.wrapping_mul(0x100000001b3);
            }
            x
        };
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("{h:016x}.{ext}")),
            src,
        );
    }
}

/// Counters over everything this thread launched since the last `reset`.
pub struct GlobalCounters;

/// The stages of getting kernels to run, each timed on the host (`GlobalCounters::stage_ns`):
/// what a first step waits for before its kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Turning the lazy graph into kernels (`realize`'s schedule).
    Schedule,
    /// Choosing each new kernel's plan (the heuristics, the remembered plans, or BEAM).
    Plan,
    /// Lowering each new kernel by its plan and linearizing it.
    Lower,
    /// Rendering and compiling it on its backend (the C compiler, NVRTC, a WebGPU pipeline)
    /// and loading the result.
    Compile,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 4] = [Stage::Schedule, Stage::Plan, Stage::Lower, Stage::Compile];
    /// The stage's lower-case name (`"schedule"`, `"plan"`, `"lower"`, `"compile"`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Schedule => "schedule",
            Stage::Plan => "plan",
            Stage::Lower => "lower",
            Stage::Compile => "compile",
        }
    }
}

// Per thread: work is launched from the thread that realizes it, and tests run in parallel.
thread_local! {
    static KERNELS: AtomicU64 = const { AtomicU64::new(0) };
    static OPS: AtomicU64 = const { AtomicU64::new(0) };
    static BYTES: AtomicU64 = const { AtomicU64::new(0) };
    static TIME_NS: AtomicU64 = const { AtomicU64::new(0) };
    static STAGE_NS: [AtomicU64; 4] = const { [const { AtomicU64::new(0) }; 4] };
}

/// `GlobalCounters::background_compile_ns`: process-wide (one background thread serves every
/// thread's kernels).
static BACKGROUND_NS: AtomicU64 = AtomicU64::new(0);

impl GlobalCounters {
    /// Set every counter of this thread to zero.
    pub fn reset() {
        for c in [&KERNELS, &OPS, &BYTES, &TIME_NS] {
            c.with(|c| c.store(0, Ordering::Relaxed));
        }
        STAGE_NS.with(|s| s.iter().for_each(|c| c.store(0, Ordering::Relaxed)));
    }
    /// Host time spent in a stage of getting kernels to run (scheduling, planning, lowering,
    /// compiling), in nanoseconds; kernels compiled on other threads for this thread's schedule
    /// count here too.
    pub fn stage_ns(stage: Stage) -> u64 {
        STAGE_NS.with(|s| s[stage as usize].load(Ordering::Relaxed))
    }
    pub(crate) fn add_stage(stage: Stage, ns: u64) {
        STAGE_NS.with(|s| s[stage as usize].fetch_add(ns, Ordering::Relaxed));
    }
    /// Host time the CPU backend's background thread has spent building optimized (`-O3`)
    /// code for kernels that started on a quick build (tiered compilation), in nanoseconds,
    /// for the whole process since it started (`reset` leaves it). No step waits for it, so it
    /// is in no `Stage`.
    pub fn background_compile_ns() -> u64 {
        BACKGROUND_NS.load(Ordering::Relaxed)
    }
    #[cfg_attr(not(feature = "cpu"), allow(dead_code))]
    pub(crate) fn add_background_compile(ns: u64) {
        BACKGROUND_NS.fetch_add(ns, Ordering::Relaxed);
    }
    /// Kernels launched.
    pub fn kernel_count() -> u64 {
        KERNELS.with(|c| c.load(Ordering::Relaxed))
    }
    /// Scalar ops executed (FLOPs and integer ops).
    pub fn global_ops() -> u64 {
        OPS.with(|c| c.load(Ordering::Relaxed))
    }
    /// Bytes of buffers bound to launched kernels.
    pub fn global_mem() -> u64 {
        BYTES.with(|c| c.load(Ordering::Relaxed))
    }
    /// Time spent in kernels (measured when timing is on: `DEBUG>=2`), in nanoseconds.
    pub fn time_ns() -> u64 {
        TIME_NS.with(|c| c.load(Ordering::Relaxed))
    }
    /// Device time measured after the launch was counted (the browser's timestamps).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn add_time(ns: u64) {
        TIME_NS.with(|c| c.fetch_add(ns, Ordering::Relaxed));
    }
    pub(crate) fn record(ops: u64, bytes: u64, ns: u64) {
        KERNELS.with(|c| c.fetch_add(1, Ordering::Relaxed));
        OPS.with(|c| c.fetch_add(ops, Ordering::Relaxed));
        BYTES.with(|c| c.fetch_add(bytes, Ordering::Relaxed));
        TIME_NS.with(|c| c.fetch_add(ns, Ordering::Relaxed));
    }
}

/// Run `job(i)` for every `i` below `n` on up to `threads` threads, each taking the next `i`
/// as it finishes one; the stage times each thread spent.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn on_threads(threads: usize, n: usize, job: impl Fn(usize) + Sync) -> Vec<[u64; 4]> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(n))
            .map(|_| {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        job(i);
                    }
                    Stage::ALL.map(GlobalCounters::stage_ns)
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    })
}
