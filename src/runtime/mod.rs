//! Backends. `Device` is the single list of them (each behind its cargo feature); a backend
//! implements `Backend`: allocate, copy in, copy out (async), compile a linearized kernel into a
//! `Program`, launch it, synchronize. Ops never reach a backend: they live in the IR.

pub mod interp;

#[cfg(feature = "cpu")]
pub mod cpu;

#[cfg(feature = "wgpu")]
pub mod wgpu;

#[cfg(feature = "cuda")]
pub mod cuda;

#[cfg(feature = "wasm")]
pub mod wasm;

use crate::codegen::{LinearKernel, OptTarget, Target};
pub use crate::device::{Device, DeviceKind};
use crate::error::{bail, Result};
use std::alloc::Layout;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

/// Compiles that a step waits for, under way (`foreground`); background builds (the CPU
/// backend's optimized tier) wait until there are none.
static FOREGROUND: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Run `f`, a compile a step waits for, counted in `FOREGROUND`.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn foreground<R>(f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::Ordering;
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            FOREGROUND.fetch_sub(1, Ordering::AcqRel);
        }
    }
    FOREGROUND.fetch_add(1, Ordering::AcqRel);
    let _done = Done;
    f()
}

/// Whether a compile a step waits for is under way.
#[cfg_attr(not(feature = "cpu"), allow(dead_code))]
pub(crate) fn foreground_busy() -> bool {
    FOREGROUND.load(std::sync::atomic::Ordering::Acquire) > 0
}

/// Wait until every kernel compiled in a quick tier runs its fully optimized build (the CPU
/// backend compiles a large batch of new kernels quickly first and the optimized build on a
/// background thread: `TIERED`). Results do not depend on it; a benchmark calls it before
/// timing steady steps.
pub fn finish_compiles() {
    #[cfg(feature = "cpu")]
    cpu::finish_compiles();
}

impl Device {
    /// Whether this device can run here (e.g. a C compiler exists for `CPU`, `CUDA:1` needs a
    /// second GPU), with the reason when it cannot.
    pub fn available(self) -> std::result::Result<(), String> {
        match self.kind {
            DeviceKind::Interp => Ok(()),
            #[cfg(feature = "cpu")]
            DeviceKind::Cpu => cpu::available(),
            #[cfg(feature = "wgpu")]
            DeviceKind::Wgpu => wgpu::available(self.index),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => cuda::available(self.index),
            #[cfg(feature = "wasm")]
            DeviceKind::Wasm => wasm::available(),
        }
    }
    /// The backend instance behind this device (for tools that compile and launch kernels by
    /// hand, as `examples/walkthrough.rs` does; everything else goes through `realize`).
    pub fn backend(self) -> &'static dyn Backend {
        static INTERP: Instances<interp::Interp> = Instances::new();
        #[cfg(feature = "cpu")]
        static CPU: Instances<cpu::Cpu> = Instances::new();
        #[cfg(feature = "wasm")]
        static WASM: Instances<wasm::Wasm> = Instances::new();
        match self.kind {
            DeviceKind::Interp => INTERP.get(self.index, || interp::Interp::new(self)),
            #[cfg(feature = "cpu")]
            DeviceKind::Cpu => CPU.get(self.index, || cpu::Cpu::new(self)),
            #[cfg(feature = "wgpu")]
            DeviceKind::Wgpu => wgpu::instance(self.index),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => cuda::instance(self.index),
            #[cfg(feature = "wasm")]
            DeviceKind::Wasm => WASM.get(self.index, || wasm::Wasm::new(self)),
        }
    }
    /// The best available device (`DEV` overrides it; see `Context`): an NVIDIA GPU through
    /// CUDA, else a hardware GPU through WebGPU, else compiled C, else the interpreter. A
    /// software WebGPU adapter (lavapipe) is slower than the C backend, so it is only chosen by
    /// name.
    pub fn best() -> Device {
        static BEST: OnceLock<Device> = OnceLock::new();
        *BEST.get_or_init(|| {
            let rank = |d: &Device| match d.kind {
                #[cfg(feature = "cuda")]
                DeviceKind::Cuda => 5,
                #[cfg(feature = "wgpu")]
                DeviceKind::Wgpu => match wgpu::adapter_info() {
                    Some(a) if a.device_type != "Cpu" => 4,
                    _ => 0,
                },
                // Natively an interpreter of WebAssembly: faster than INTERP, slower than C.
                #[cfg(feature = "wasm")]
                DeviceKind::Wasm => 2,
                DeviceKind::Interp => 1,
                #[allow(unreachable_patterns)]
                _ => 3,
            };
            let d = Device::all()
                .into_iter()
                .filter(|d| d.available().is_ok())
                .max_by_key(rank)
                .unwrap_or(Device::Interp);
            if crate::context::debug() >= 1 {
                crate::context::log(&format!("wgrad: default device {d}"));
            }
            d
        })
    }
}

/// The instances of one backend, one per device index, each created on first use and kept for
/// the life of the process (buffers and programs refer back to their instance).
pub(crate) struct Instances<T: 'static> {
    first: OnceLock<&'static T>,
    more: std::sync::Mutex<Vec<(u8, &'static T)>>,
}

impl<T: Send + Sync> Instances<T> {
    pub(crate) const fn new() -> Self {
        Instances {
            first: OnceLock::new(),
            more: std::sync::Mutex::new(Vec::new()),
        }
    }
    /// Instance `index`, made by `make` the first time.
    pub(crate) fn get(&self, index: u8, make: impl FnOnce() -> T) -> &'static T {
        let leak = |t: T| -> &'static T { Box::leak(Box::new(t)) };
        if index == 0 {
            return self.first.get_or_init(|| leak(make()));
        }
        let mut more = self.more.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, t)) = more.iter().find(|(i, _)| *i == index) {
            return t;
        }
        let t = leak(make());
        more.push((index, t));
        t
    }
    /// Instance `index` if it was made already (the browser's WebGPU devices).
    #[cfg_attr(not(all(feature = "wgpu", target_arch = "wasm32")), allow(dead_code))]
    pub(crate) fn existing(&self, index: u8) -> Option<&'static T> {
        if index == 0 {
            return self.first.get().copied();
        }
        let more = self.more.lock().unwrap_or_else(|e| e.into_inner());
        more.iter().find(|(i, _)| *i == index).map(|&(_, t)| t)
    }
    /// Store instance `index` unless one exists (the browser creates devices asynchronously,
    /// before first use).
    #[cfg(all(feature = "wgpu", target_arch = "wasm32"))]
    pub(crate) fn set(&self, index: u8, t: T) {
        if self.existing(index).is_none() {
            let _ = self.get(index, || t);
        }
    }
}

impl Default for Device {
    /// The device of the innermost `Context` that names one, else `DEV`, else the process
    /// default (`set_default_device`, which the browser's `init` sets), else `Device::best()`.
    fn default() -> Self {
        crate::context::device_override().unwrap_or_else(Device::best)
    }
}

/// Readable bytes every host allocation has after its end: a C kernel's vector of a short run
/// of outputs (three of four lanes, `codegen::vectorize`) loads one element past the last one
/// it uses, three when it loads every other element, and the last one may be a buffer's last
/// element (the spare lane is discarded).
pub const HOST_SLACK: usize = 64;

/// Host memory, 64-byte aligned, shared by the interpreter and the CPU backend, with
/// `HOST_SLACK` zeroed bytes after its `len`.
pub struct HostMem {
    ptr: NonNull<u8>,
    layout: Layout,
    len: usize,
}

// SAFETY: HostMem owns its allocation; concurrent access is coordinated by the runtime (kernels
// run one at a time, and threads of one kernel write disjoint output elements).
unsafe impl Send for HostMem {}
// SAFETY: see above.
unsafe impl Sync for HostMem {}

impl HostMem {
    /// `bytes` zeroed bytes, 64-byte aligned. Errors when the size overflows or the allocation
    /// fails.
    pub fn new(bytes: usize) -> Result<HostMem> {
        let layout = match bytes
            .checked_add(HOST_SLACK)
            .map(|n| Layout::from_size_align(n, 64))
        {
            Some(Ok(l)) => l,
            _ => bail!(Device, "cannot allocate {bytes} bytes"),
        };
        // SAFETY: layout has non-zero size (the slack).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        match NonNull::new(ptr) {
            Some(ptr) => Ok(HostMem {
                ptr,
                layout,
                len: bytes,
            }),
            None => bail!(Device, "out of memory allocating {bytes} bytes"),
        }
    }
    /// The start of the memory.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// Its size in bytes (without the slack).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// # Safety
    /// No kernel may be writing this memory while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes; the caller rules out concurrent writes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    /// # Safety
    /// No other reference to this memory may be used while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes; the caller guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Device memory. Freed on drop.
pub struct Buffer {
    /// The device the memory is on.
    pub device: Device,
    /// Size in bytes.
    pub size: usize,
    pub(crate) mem: Mem,
}

pub(crate) enum Mem {
    Host(HostMem),
    #[cfg(feature = "wgpu")]
    Wgpu(wgpu::GpuMem),
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaMem),
    #[cfg(feature = "wasm")]
    Wasm(wasm::WasmMem),
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer({}, {} bytes)", self.device, self.size)
    }
}

static LIVE_BUFFERS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
static LIVE_BYTES: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Buffers alive on every device now, and their bytes (to check that loops do not leak).
pub fn live_buffers() -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (
        LIVE_BUFFERS.load(Relaxed).max(0) as u64,
        LIVE_BYTES.load(Relaxed).max(0) as u64,
    )
}

impl Drop for Buffer {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        LIVE_BUFFERS.fetch_sub(1, Relaxed);
        LIVE_BYTES.fetch_sub(self.size as i64, Relaxed);
    }
}

impl Buffer {
    /// Wrap a backend's memory (counted as live until dropped).
    pub(crate) fn new(device: Device, size: usize, mem: Mem) -> Buffer {
        use std::sync::atomic::Ordering::Relaxed;
        LIVE_BUFFERS.fetch_add(1, Relaxed);
        LIVE_BYTES.fetch_add(size as i64, Relaxed);
        Buffer { device, size, mem }
    }
    pub(crate) fn host(&self) -> Result<&HostMem> {
        match &self.mem {
            Mem::Host(h) => Ok(h),
            #[allow(unreachable_patterns)]
            _ => bail!(Device, "a {} buffer is not in host memory", self.device),
        }
    }
}

/// A compiled kernel.
pub struct Program {
    /// The kernel's name (`LinearKernel::name`).
    pub name: String,
    /// Rendered source, empty for the interpreter.
    pub source: String,
    /// Invocations per launch.
    pub global_size: usize,
    /// Invocations per workgroup (1: a flat kernel).
    pub local_size: usize,
    /// Scalar ops per launch (for `GlobalCounters`).
    pub ops: u64,
    pub(crate) imp: ProgramImpl,
}

impl Program {
    /// Whether `self` and `other` run the same kernel: one program, or two compilations of the
    /// same source (or, on the interpreter, of the same linear kernel) with the same launch sizes.
    pub fn same_kernel(&self, other: &Program) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        let same_code = match (&self.imp, &other.imp) {
            (ProgramImpl::Interp(a), ProgramImpl::Interp(b)) => a == b,
            #[allow(unreachable_patterns)]
            _ => !self.source.is_empty() && self.source == other.source,
        };
        same_code
            && self.name == other.name
            && self.global_size == other.global_size
            && self.local_size == other.local_size
    }
}

pub(crate) enum ProgramImpl {
    Interp(Arc<LinearKernel>),
    #[cfg(feature = "cpu")]
    Cpu(cpu::CpuProgram),
    #[cfg(feature = "wgpu")]
    Wgpu(wgpu::WgpuProgram),
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaProgram),
    #[cfg(feature = "wasm")]
    Wasm(wasm::WasmProgram),
}

/// One recorded launch: a kernel with the buffers it binds, or a copy between buffers. The engine
/// records these while a TinyJit captures; memory planning rewrites their buffers and backends
/// build replay graphs from them.
#[derive(Clone)]
pub enum Launch {
    /// A kernel launch.
    Kernel {
        /// The device it runs on.
        dev: Device,
        /// The compiled kernel.
        prog: Arc<Program>,
        /// The buffer bound to each slot.
        bufs: Vec<Arc<Buffer>>,
    },
    /// A copy of `src`'s bytes into `dst` (possibly on another device).
    Copy {
        /// Read from.
        src: Arc<Buffer>,
        /// Written to.
        dst: Arc<Buffer>,
    },
}

impl Launch {
    /// The launch's buffers, to rebind them (memory planning).
    pub fn buffers_mut(&mut self) -> Vec<&mut Arc<Buffer>> {
        match self {
            Launch::Kernel { bufs, .. } => bufs.iter_mut().collect(),
            Launch::Copy { src, dst } => vec![src, dst],
        }
    }
    /// The launch's buffers.
    pub fn buffers(&self) -> Vec<&Arc<Buffer>> {
        match self {
            Launch::Kernel { bufs, .. } => bufs.iter().collect(),
            Launch::Copy { src, dst } => vec![src, dst],
        }
    }
}

/// A captured step prepared by a backend for replay (pipelines and bindings made once).
pub trait Graph: Send + Sync {
    /// Replay: copy each `before` pair (src, dst), run the step, then copy each `after` pair.
    fn run(&self, before: &[(&Buffer, &Buffer)], after: &[(&Buffer, &Buffer)]) -> Result<()>;
}

/// A boxed future (readback is asynchronous in the browser).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a backend provides. Every method that can fail returns an error, never panics.
/// The optimizer target of a backend that runs kernels on the host's cores (the interpreter,
/// the CPU backend): no limit on workgroups worth the name, the vector registers and lanes of
/// the machine the C backend compiles for, so that the interpreter plans kernels as it does.
pub(crate) fn host_target() -> Target {
    Target {
        kind: OptTarget::Cpu,
        max_local: 1024,
        max_shared: 1 << 20,
        registers: vector_registers(),
        lanes: vector_lanes(),
        ..Target::new(OptTarget::Cpu)
    }
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

/// The f32 lanes of the widest vectors kernels use (`Target::lanes`): 16 where the machine has
/// AVX-512 (`-march=native` enables it; its two 512-bit FMA units do twice the multiply-adds per
/// cycle of 256-bit vectors), else 8; `CPU_LANES=8` keeps 256-bit vectors (and 16 is taken
/// only where the machine has AVX-512).
pub(crate) fn vector_lanes() -> usize {
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    // 16 only with AVX-512: elsewhere a 512-bit vector has no register to be pinned in.
    crate::context::cpu_lanes()
        .filter(|&l| l <= 8 || avx512)
        .unwrap_or(if avx512 {
            16
        } else {
            crate::codegen::c::VECTOR_LANES
        })
}

/// A backend: allocate buffers, copy in and out, compile linear kernels, launch them. Ops are
/// not here: they live in the IR and codegen.
pub trait Backend: Send + Sync {
    /// The device this backend instance drives.
    fn device(&self) -> Device;
    /// The most buffers one kernel may bind (the renderer's limit).
    fn max_buffers(&self) -> usize;
    /// What identifies this device's kernel timings (backend, hardware, driver, limits), for
    /// caches of tuned kernels: a different key means the cached choice may not hold.
    fn cache_key(&self) -> String {
        self.device().name().to_string()
    }
    /// What kernels for this device are shaped for, with its limits.
    fn target(&self) -> Target {
        host_target()
    }
    /// The largest buffer this device can allocate and bind, in bytes (checked before a
    /// schedule runs, so a tensor that cannot fit is an error before anything is allocated).
    fn max_buffer_bytes(&self) -> usize {
        isize::MAX as usize
    }
    /// A buffer of `bytes` bytes; errors when the device cannot allocate it.
    fn alloc(&self, bytes: usize) -> Result<Buffer>;
    /// Write `data` at the start of `buf`.
    fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()>;
    /// Read all of `buf` back (asynchronous: the browser has no blocking readback).
    fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>>;
    /// Render `k` in the backend's dialect and compile it; errors carry the compiler's message.
    fn compile(&self, k: &LinearKernel) -> Result<Program>;
    /// `compile` for several kernels at once (a backend may compile them together: the C
    /// backend runs one compiler process for many kernels).
    fn compile_batch(&self, ks: &[LinearKernel]) -> Vec<Result<Program>> {
        ks.iter().map(|k| self.compile(k)).collect()
    }
    /// Which kernels `compile_batch` compiles best together: a batch of one class costs it one
    /// compiler run (the C backend compiles kernels with different flags in separate runs).
    fn batch_class(&self, _k: &LinearKernel) -> u8 {
        0
    }
    /// Compile `ks` and resolve when they are compiled, so that `compile` then finds them ready
    /// (`realize::launch_deferred` awaits it before launching what it held back). For a
    /// backend whose compiler runs elsewhere and asynchronously (WebGPU in a browser: pipelines
    /// made through `createComputePipelineAsync` compile on the browser's threads, all at once,
    /// while the page waits without blocking). By default nothing: `compile` does the work.
    fn precompile<'a>(&'a self, _ks: &'a [LinearKernel]) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
    /// Whether an awaiting realize holds this backend's launches back (`realize::defer`) until
    /// `precompile` has compiled them: where `precompile` does the work.
    fn compiles_async(&self) -> bool {
        false
    }
    /// Whether this backend's `compile` may run on several threads at once, for a schedule's
    /// kernels compiled before it runs (`realize::prepare`): worth it where compiling is slow
    /// and independent per kernel (a C compiler process each).
    fn compiles_in_parallel(&self) -> bool {
        false
    }
    /// Whether `p`, compiled earlier for this device, still runs on it (not when the device was
    /// lost and created again since): program caches compile again otherwise.
    fn can_run(&self, _p: &Program) -> bool {
        true
    }
    /// Queue `p` with `bufs` bound to its slots in order (it may run after this returns).
    fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()>;
    /// Launch and wait, returning the kernel's device time where the backend can measure it
    /// (`DEBUG>=2`); `None` lets the caller time it on the host.
    fn launch_timed(&self, p: &Program, bufs: &[&Buffer]) -> Result<Option<u64>> {
        self.launch(p, bufs)?;
        self.synchronize()?;
        Ok(None)
    }
    /// Wait until every queued launch and copy has finished.
    fn synchronize(&self) -> Result<()>;
    /// Queue `launches` (kernels and copies on this device, in order) with each kernel timed by
    /// the device's timestamp queries, and return a future of the nanoseconds per launch (0 for
    /// a copy). `None` when the device has no timestamp queries: nothing was queued then.
    fn launch_profiled(
        &self,
        _launches: &[Launch],
    ) -> Result<Option<BoxFuture<'static, Result<Vec<u64>>>>> {
        Ok(None)
    }
    /// Prepare a captured step (kernels of this device, copies between its buffers) for replay,
    /// or `None` to have TinyJit replay it launch by launch.
    fn graph(&self, _launches: &[Launch]) -> Result<Option<Box<dyn Graph>>> {
        Ok(None)
    }
}

/// Where a backend caches compiled kernels: `WGRAD_CACHE_DIR`, else `~/.cache/wgrad/<backend>`.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn cache_dir(backend: &str) -> std::path::PathBuf {
    use std::path::PathBuf;
    if let Ok(d) = std::env::var("WGRAD_CACHE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|_| std::env::temp_dir());
    base.join("wgrad").join(backend)
}

/// A unique temporary name in `dir` for this process and thread (write there, then rename).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn temp_name(dir: &std::path::Path, key: &str) -> std::path::PathBuf {
    let tag = format!(
        "{key}.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    )
    .replace(['(', ')'], "");
    dir.join(format!("{tag}.tmp"))
}

/// Write `data` to `path` in `dir` atomically: to a temporary name, then renamed, so a reader
/// never sees half a file.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn write_atomic(
    dir: &std::path::Path,
    path: &std::path::Path,
    data: &[u8],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = temp_name(dir, &path.file_name().unwrap_or_default().to_string_lossy());
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// FNV-1a, 128 bits as two differently seeded 64-bit halves: stable across runs and versions.
pub fn stable_hash(s: impl AsRef<[u8]>) -> String {
    let mut h = [0xcbf29ce484222325u64, 0x84222325cbf29ce4u64];
    for &b in s.as_ref() {
        for x in h.iter_mut() {
            *x ^= b as u64;
            *x = x.wrapping_mul(0x100000001b3);
        }
    }
    format!("{:016x}{:016x}", h[0], h[1])
}

/// Copy out of host memory (the interpreter and the CPU backend share it).
pub(crate) fn host_copy_out(buf: &Buffer) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    // Out of memory is an Err, not the abort of `to_vec`.
    if out.try_reserve_exact(buf.size).is_err() {
        bail!(
            Device,
            "reading back {} bytes from {}: out of host memory",
            buf.size,
            buf.device
        );
    }
    // SAFETY: kernels run synchronously on host backends; none is running now.
    out.extend_from_slice(&unsafe { buf.host()?.as_slice() }[..buf.size]);
    Ok(out)
}

/// Launches of fewer operations run on the calling thread alone in the host backends (C and
/// WebAssembly): waking other threads costs more than they would save.
#[cfg(any(feature = "cpu", feature = "wasm"))]
pub(crate) const PARALLEL_MIN_OPS: u64 = 200_000;

/// That `data` fits in `buf` (every backend's `copy_in` checks it first).
pub(crate) fn check_copy_in(buf: &Buffer, data: &[u8]) -> Result<()> {
    if data.len() > buf.size {
        bail!(
            Device,
            "copy_in: {} bytes into a buffer of {}",
            data.len(),
            buf.size
        );
    }
    Ok(())
}

pub(crate) fn host_copy_in(buf: &Buffer, data: &[u8]) -> Result<()> {
    check_copy_in(buf, data)?;
    // SAFETY: host backends run kernels synchronously; nothing else holds this memory now.
    unsafe { buf.host()?.as_mut_slice()[..data.len()].copy_from_slice(data) };
    Ok(())
}

/// The host's monotonic clock in nanoseconds (in the browser `performance.now()`, on a page or
/// in a worker; its resolution may be coarsened to 0.1 ms there).
pub fn host_clock_ns() -> u64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static T0: OnceLock<std::time::Instant> = OnceLock::new();
        T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
    #[cfg(target_arch = "wasm32")]
    {
        use js_sys::{Array, Function, Reflect};
        let perf = Reflect::get(&js_sys::global(), &"performance".into()).ok();
        // A `now` that is not a function makes `apply` throw, which is an Err here.
        let now = perf.as_ref().and_then(|p| {
            let f = Function::from(Reflect::get(p, &"now".into()).ok()?);
            Reflect::apply(&f, p, &Array::new()).ok()?.as_f64()
        });
        (now.unwrap_or_else(js_sys::Date::now) * 1e6) as u64
    }
}

/// Run a future to completion in the background on this thread (the browser's event loop), for
/// results nothing waits on, such as a kernel's timestamps printed at `DEBUG>=2`.
#[cfg(target_arch = "wasm32")]
pub fn spawn(f: impl Future<Output = ()> + 'static) {
    wasm_bindgen_futures::spawn_local(f);
}

/// Drive a future to completion on this thread (native only; the browser awaits instead).
pub fn block_on<F: Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
    fn noop(_: *const ()) {}
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions do nothing with the data pointer.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
