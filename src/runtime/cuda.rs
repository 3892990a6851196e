//! The CUDA backend: kernels rendered to CUDA C++ (`codegen::cuda`), compiled by NVRTC for the
//! device's compute capability (`nvrtc.rs`, CUBINs cached on disk), and run through the CUDA
//! driver API (cudarc's bindings). Both libraries are loaded at run time, so the build needs no
//! CUDA install; where no driver exists `available` says so (and nothing panics: cudarc panics
//! when it calls into a libcuda that is absent, so its presence is checked first).
//!
//! The first device, its primary context, and one non-blocking stream that every copy and launch
//! is queued on, in order, so nothing waits for the GPU except a readback or `synchronize`.
//! Memory is plain device allocations (`cuMemAlloc`), recycled through a pool of freed buffers
//! of the same size: a freed buffer is only handed out again for work queued later on the same
//! stream, so reusing it cannot race with the kernels still reading it. A TinyJit capture
//! becomes a CUDA graph (stream capture of the recorded launches, instantiated once); a replay
//! copies the new inputs in and launches the graph once.

pub mod nvrtc;

use super::{
    check_copy_in, Backend, BoxFuture, Buffer, Device, DeviceKind, Graph, Instances, Launch, Mem,
    Program, ProgramImpl,
};
use crate::codegen::cuda::{launch_dims, render_cuda};
use crate::codegen::linearize::LinearKernel;
use crate::codegen::{OptTarget, Target};
use crate::error::{bail, Error, ErrorKind, Result};
use cudarc::driver::{result as cu, sys};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Bytes of freed buffers kept for reuse.
const POOL_BYTES: usize = 1 << 30;

/// Counters of what this process asked the driver for, for tests and benchmarks (a JIT replay
/// must allocate nothing and launch one graph).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `cuMemAlloc` calls (a buffer from the pool is not one).
    pub allocs: u64,
    /// Kernels launched one by one.
    pub launches: u64,
    /// Graphs instantiated (one per TinyJit capture).
    pub graphs: u64,
    /// Graph launches (one per replay).
    pub graph_launches: u64,
    /// Kernels compiled by NVRTC or loaded from the disk cache.
    pub modules: u64,
}

struct Counters {
    allocs: AtomicU64,
    launches: AtomicU64,
    graphs: AtomicU64,
    graph_launches: AtomicU64,
    modules: AtomicU64,
}

static COUNTERS: Counters = Counters {
    allocs: AtomicU64::new(0),
    launches: AtomicU64::new(0),
    graphs: AtomicU64::new(0),
    graph_launches: AtomicU64::new(0),
    modules: AtomicU64::new(0),
};

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// What the CUDA backend has done so far (process-wide).
pub fn stats() -> Stats {
    let c = &COUNTERS;
    Stats {
        allocs: c.allocs.load(Ordering::Relaxed),
        launches: c.launches.load(Ordering::Relaxed),
        graphs: c.graphs.load(Ordering::Relaxed),
        graph_launches: c.graph_launches.load(Ordering::Relaxed),
        modules: c.modules.load(Ordering::Relaxed),
    }
}

/// The device in use.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// The GPU's name.
    pub name: String,
    /// Compute capability, e.g. (9, 0).
    pub capability: (i32, i32),
    /// Threads the GPU keeps resident at once: multiprocessors times threads each (270,336 on
    /// an H200), the optimizer's `Target::parallel`.
    pub resident_threads: usize,
    /// The `--gpu-architecture` kernels are compiled for, e.g. `sm_90`.
    pub arch: String,
    /// Device memory, in bytes.
    pub memory_bytes: usize,
    /// The driver's CUDA version (e.g. 12080 for 12.8).
    pub driver_version: i32,
    /// The NVRTC version and the library loaded ("12.9 (/path/libnvrtc.so.12)").
    pub nvrtc: String,
}

/// One GPU (`CUDA:n` is the driver's device `n`, with its primary context and a stream), or
/// the reason there is none.
pub struct Cuda {
    index: u8,
    gpu: std::result::Result<Gpu, String>,
}

struct Gpu {
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    info: DeviceInfo,
    pool: Mutex<Pool>,
}

// SAFETY: a CUDA context and stream may be used from any thread once the context is current
// there (`bind`); the driver serialises calls on them.
unsafe impl Send for Gpu {}
// SAFETY: see above.
unsafe impl Sync for Gpu {}

#[derive(Default)]
struct Pool {
    free: HashMap<usize, Vec<sys::CUdeviceptr>>,
    bytes: usize,
}

/// A device allocation; returned to the pool when dropped.
pub struct CudaMem {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    index: u8,
}

/// Instance `index` if it exists and has a GPU (for releasing what it allocated).
fn made(index: u8) -> Option<&'static Gpu> {
    INSTANCES.existing(index).and_then(|c| c.gpu.as_ref().ok())
}

impl Drop for CudaMem {
    fn drop(&mut self) {
        if let Some(gpu) = made(self.index) {
            gpu.release(self.ptr, self.bytes);
        }
    }
}

/// A loaded kernel: its module (unloaded on drop) and launch dimensions.
pub struct CudaProgram {
    module: sys::CUmodule,
    func: sys::CUfunction,
    blocks: u32,
    threads: u32,
    nbufs: usize,
    index: u8,
}

// SAFETY: module and function handles are valid in every thread of the context.
unsafe impl Send for CudaProgram {}
// SAFETY: see above.
unsafe impl Sync for CudaProgram {}

impl Drop for CudaProgram {
    fn drop(&mut self) {
        if let Some(gpu) = made(self.index) {
            // Kernels of this module may still be queued: let them finish first.
            if gpu.bind().is_ok() && gpu.sync().is_ok() {
                // SAFETY: the module was loaded by `compile` and is unloaded once; graphs that
                // launch it hold the Program, so none is left.
                let _ = unsafe { cu::module::unload(self.module) };
            }
        }
    }
}

static INSTANCES: Instances<Cuda> = Instances::new();

/// `CUDA:index` (created on first use).
pub fn instance(index: u8) -> &'static Cuda {
    INSTANCES.get(index, || Cuda {
        index,
        gpu: Gpu::create(index),
    })
}

/// Whether `CUDA:index` (and NVRTC) can be used here, with the reason when not.
pub fn available(index: u8) -> std::result::Result<(), String> {
    instance(index)
        .gpu
        .as_ref()
        .map(|_| ())
        .map_err(|e| e.clone())
}

/// `CUDA:0`, if there is one.
pub fn device_info() -> Option<DeviceInfo> {
    instance(0).info()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn err(what: &str, e: cu::DriverError) -> Error {
    Error::new(ErrorKind::Backend, format!("cuda: {what}: {e}"))
}

thread_local! {
    static BOUND: Cell<sys::CUcontext> = const { Cell::new(std::ptr::null_mut()) };
}

impl Gpu {
    fn create(ordinal: u8) -> std::result::Result<Gpu, String> {
        // SAFETY: only tries to dlopen libcuda.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver found (libcuda.so cannot be loaded)".into());
        }
        let fail = |what: &str, e: cu::DriverError| format!("{what}: {e}");
        cu::init().map_err(|e| fail("no usable CUDA driver (cuInit)", e))?;
        let count = cu::device::get_count().map_err(|e| fail("counting devices", e))?;
        if count < 1 {
            return Err("the CUDA driver found no device".into());
        }
        if ordinal as i32 >= count {
            return Err(format!(
                "CUDA:{ordinal} does not exist: the CUDA driver found {count} device(s)"
            ));
        }
        let dev =
            cu::device::get(ordinal as i32).map_err(|e| fail(&format!("device {ordinal}"), e))?;
        // SAFETY: `dev` is a device the driver returned.
        let ctx = unsafe { cu::primary_ctx::retain(dev) }.map_err(|e| fail("context", e))?;
        // SAFETY: `ctx` was just retained.
        unsafe { cu::ctx::set_current(ctx) }.map_err(|e| fail("context", e))?;
        BOUND.with(|b| b.set(ctx));
        let attr = |a| {
            // SAFETY: `dev` is a device the driver returned.
            unsafe { cu::device::get_attribute(dev, a) }.map_err(|e| fail("device attribute", e))
        };
        use sys::CUdevice_attribute::*;
        let capability = (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        nvrtc::available()?;
        let ((nv_major, nv_minor), nv_path) = nvrtc::version().map_err(|e| e.msg)?;
        let mut driver_version = 0;
        // SAFETY: writes one int.
        let _ = unsafe { sys::cuDriverGetVersion(&mut driver_version) };
        let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(|e| fail("creating a stream", e))?;
        let resident = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            * attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
        let info = DeviceInfo {
            name: cu::device::get_name(dev).unwrap_or_default(),
            capability,
            resident_threads: resident.max(1) as usize,
            arch: format!("sm_{}{}", capability.0, capability.1),
            // SAFETY: `dev` is a device the driver returned.
            memory_bytes: unsafe { cu::device::total_mem(dev) }.unwrap_or(0),
            driver_version,
            nvrtc: format!("{nv_major}.{nv_minor} ({nv_path})"),
        };
        if crate::context::debug() >= 1 {
            crate::context::log(&format!("wgrad: cuda device {info:?}"));
        }
        Ok(Gpu {
            ctx,
            stream,
            info,
            pool: Mutex::default(),
        })
    }

    /// Make the context current on this thread (once per thread).
    fn bind(&self) -> Result<()> {
        if BOUND.with(|b| b.get()) != self.ctx {
            // SAFETY: the context is retained for the life of the process.
            unsafe { cu::ctx::set_current(self.ctx) }.map_err(|e| err("binding the context", e))?;
            BOUND.with(|b| b.set(self.ctx));
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // SAFETY: the stream lives as long as the process.
        unsafe { cu::stream::synchronize(self.stream) }.map_err(|e| err("synchronize", e))
    }

    fn release(&self, ptr: sys::CUdeviceptr, bytes: usize) {
        let mut pool = lock(&self.pool);
        if pool.bytes + bytes <= POOL_BYTES {
            pool.bytes += bytes;
            pool.free.entry(bytes).or_default().push(ptr);
            return;
        }
        drop(pool);
        // Queued kernels may still use it: wait for them, then free.
        if self.bind().is_ok() && self.sync().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc and nothing uses it any more.
            let _ = unsafe { cu::free_sync(ptr) };
        }
    }

    fn alloc(&self, bytes: usize) -> Result<sys::CUdeviceptr> {
        if let Some(p) = {
            let mut pool = lock(&self.pool);
            let p = pool.free.get_mut(&bytes).and_then(|v| v.pop());
            if p.is_some() {
                pool.bytes -= bytes;
            }
            p
        } {
            return Ok(p);
        }
        self.bind()?;
        // SAFETY: a plain allocation; its contents are written before they are read.
        let r = unsafe { cu::malloc_sync(bytes) };
        let r = match r {
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                // Give the pool back and try once more.
                self.sync()?;
                let freed: Vec<_> = {
                    let mut pool = lock(&self.pool);
                    pool.bytes = 0;
                    pool.free.drain().flat_map(|(_, v)| v).collect()
                };
                for p in freed {
                    // SAFETY: pooled pointers came from cuMemAlloc and are unused.
                    let _ = unsafe { cu::free_sync(p) };
                }
                // SAFETY: as above.
                unsafe { cu::malloc_sync(bytes) }
            }
            r => r,
        };
        bump(&COUNTERS.allocs);
        r.map_err(|e| {
            Error::new(
                ErrorKind::Device,
                format!("cuda: allocating {bytes} bytes on {}: {e}", self.info.name),
            )
        })
    }

    fn launch_on(&self, p: &CudaProgram, bufs: &[&Buffer], stream: sys::CUstream) -> Result<()> {
        if bufs.len() != p.nbufs {
            bail!(
                Backend,
                "cuda: kernel takes {} buffers, got {}",
                p.nbufs,
                bufs.len()
            );
        }
        if p.blocks == 0 {
            return Ok(());
        }
        let mut args: Vec<sys::CUdeviceptr> = bufs
            .iter()
            .map(|b| mem(b).map(|m| m.ptr))
            .collect::<Result<_>>()?;
        let mut params: Vec<*mut c_void> = args
            .iter_mut()
            .map(|a| (a as *mut sys::CUdeviceptr).cast())
            .collect();
        // SAFETY: the kernel takes exactly `nbufs` pointer arguments, each a live allocation
        // sized by the scheduler for what the kernel indexes; `params` points at `args`, which
        // outlive the call (the driver copies the values before returning).
        unsafe {
            cu::launch_kernel(
                p.func,
                (p.blocks, 1, 1),
                (p.threads, 1, 1),
                0,
                stream,
                &mut params,
            )
        }
        .map_err(|e| err("launching a kernel", e))
    }
}

fn mem(b: &Buffer) -> Result<&CudaMem> {
    match &b.mem {
        Mem::Cuda(m) => Ok(m),
        #[allow(unreachable_patterns)]
        _ => bail!(Device, "cuda: a {} buffer was passed to CUDA", b.device),
    }
}

fn program(p: &Program) -> Result<&CudaProgram> {
    match &p.imp {
        ProgramImpl::Cuda(c) => Ok(c),
        #[allow(unreachable_patterns)]
        _ => bail!(Device, "cuda: program {} was not compiled for CUDA", p.name),
    }
}

impl Cuda {
    /// The GPU this device runs on, if it exists.
    pub fn info(&self) -> Option<DeviceInfo> {
        self.gpu.as_ref().ok().map(|g| g.info.clone())
    }
    fn dev(&self) -> Device {
        Device::new(DeviceKind::Cuda, self.index)
    }
    /// Refuse buffers of another device (each GPU has its own context and memory).
    fn own(&self, bufs: &[&Buffer]) -> Result<()> {
        for b in bufs {
            if b.device != self.dev() {
                bail!(
                    Device,
                    "cuda: a {} buffer was passed to {}",
                    b.device,
                    self.dev()
                );
            }
        }
        Ok(())
    }
    fn gpu(&self) -> Result<&Gpu> {
        match &self.gpu {
            Ok(g) => {
                g.bind()?;
                Ok(g)
            }
            Err(e) => bail!(Device, "cuda: {e}"),
        }
    }
}

/// `WGRAD_GPU_THREADS`: the resident threads the optimizer assumes instead of the device's
/// (`Target::parallel`), to compare the kernels planned for a smaller GPU.
fn threads_override() -> Option<usize> {
    static N: OnceLock<Option<usize>> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("WGRAD_GPU_THREADS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&n| n > 0)
    })
}

/// Allocations are rounded up to this (the driver's own granularity), so pooled buffers of
/// nearby sizes are shared.
fn rounded(bytes: usize) -> usize {
    bytes.max(1).div_ceil(256) * 256
}

impl Backend for Cuda {
    fn device(&self) -> Device {
        self.dev()
    }

    /// NVRTC compiles on any thread (its API is thread-safe) and each worker binds the context
    /// before loading its module: a schedule's new kernels compile on every core.
    fn compiles_in_parallel(&self) -> bool {
        self.gpu.is_ok()
    }

    fn target(&self) -> Target {
        // Every CUDA GPU since compute capability 2.0: 1024 threads and 48 KiB of static shared
        // memory per block.
        let base = Target::new(OptTarget::Gpu);
        Target {
            kind: OptTarget::Gpu,
            max_local: 1024,
            max_shared: 48 << 10,
            parallel: threads_override()
                .or_else(|| self.gpu.as_ref().ok().map(|g| g.info.resident_threads))
                .unwrap_or(base.parallel),
            // A warp.
            subgroup: if crate::context::subgroups() { 32 } else { 0 },
            ..base
        }
    }

    fn max_buffers(&self) -> usize {
        // 4 KiB of kernel parameters, 8 bytes a pointer, with room to spare.
        256
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let gpu = self.gpu()?;
        let size = rounded(bytes);
        let ptr = gpu.alloc(size)?;
        Ok(Buffer::new(
            self.dev(),
            bytes,
            Mem::Cuda(CudaMem {
                ptr,
                bytes: size,
                index: self.index,
            }),
        ))
    }

    fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
        let gpu = self.gpu()?;
        check_copy_in(buf, data)?;
        self.own(&[buf])?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the allocation holds at least `data.len()` bytes. From pageable host memory
        // the copy is staged before the call returns, so `data` may go away afterwards.
        unsafe { cu::memcpy_htod_async(mem(buf)?.ptr, data, gpu.stream) }
            .map_err(|e| err("copy to device", e))
    }

    fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move {
            let gpu = self.gpu()?;
            self.own(&[buf])?;
            let mut out = vec![0u8; buf.size];
            if out.is_empty() {
                return Ok(out);
            }
            // SAFETY: the allocation holds at least `buf.size` bytes; `out` is not touched
            // until the stream has finished with it below.
            unsafe { cu::memcpy_dtoh_async(&mut out, mem(buf)?.ptr, gpu.stream) }
                .map_err(|e| err("copy from device", e))?;
            gpu.sync()?;
            Ok(out)
        })
    }

    fn compile(&self, k: &LinearKernel) -> Result<Program> {
        let gpu = self.gpu()?;
        if k.global_size > i32::MAX as usize {
            bail!(
                Backend,
                "cuda: kernel {} has {} threads, more than 32-bit indexing allows",
                k.name,
                k.global_size
            );
        }
        let source = render_cuda(k);
        crate::context::dump_source(&source, "cu");
        let cubin = nvrtc::compile(&k.name, &source, &gpu.info.arch)?;
        // SAFETY: a CUBIN NVRTC produced for this device's architecture.
        let module = unsafe { cu::module::load_data(cubin.as_ptr().cast()) }
            .map_err(|e| err(&format!("loading kernel {}", k.name), e))?;
        let name = CString::new(k.name.as_str())
            .map_err(|_| Error::new(ErrorKind::Backend, "cuda: NUL in a kernel name"))?;
        // SAFETY: the module was just loaded; the kernel is `extern "C"` under this name.
        let func = match unsafe { cu::module::get_function(module, name) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: loaded above and not used by anything.
                let _ = unsafe { cu::module::unload(module) };
                return Err(err(&format!("kernel {}", k.name), e));
            }
        };
        bump(&COUNTERS.modules);
        let (blocks, threads) = launch_dims(k);
        Ok(Program {
            name: k.name.clone(),
            global_size: k.global_size,
            local_size: k.local_size,
            ops: k.ops_per_item() * k.global_size as u64,
            imp: ProgramImpl::Cuda(CudaProgram {
                module,
                func,
                blocks,
                threads,
                nbufs: k.bufs.len(),
                index: self.index,
            }),
            source,
        })
    }

    fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
        let gpu = self.gpu()?;
        self.own(bufs)?;
        gpu.launch_on(program(p)?, bufs, gpu.stream)?;
        bump(&COUNTERS.launches);
        Ok(())
    }

    fn launch_timed(&self, p: &Program, bufs: &[&Buffer]) -> Result<Option<u64>> {
        let gpu = self.gpu()?;
        self.own(bufs)?;
        let cp = program(p)?;
        let ev = || {
            cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| err("creating an event", e))
        };
        let (start, end) = (ev()?, ev()?);
        // SAFETY: both events were just created on this context and are destroyed below,
        // after `end` has completed.
        let ms = unsafe {
            let r = (|| {
                cu::event::record(start, gpu.stream).map_err(|e| err("recording an event", e))?;
                gpu.launch_on(cp, bufs, gpu.stream)?;
                cu::event::record(end, gpu.stream).map_err(|e| err("recording an event", e))?;
                cu::event::synchronize(end).map_err(|e| err("waiting for an event", e))?;
                cu::event::elapsed(start, end).map_err(|e| err("event timing", e))
            })();
            let _ = cu::event::destroy(start);
            let _ = cu::event::destroy(end);
            r?
        };
        bump(&COUNTERS.launches);
        Ok(Some((ms as f64 * 1e6) as u64))
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu()?.sync()
    }

    fn graph(&self, launches: &[Launch]) -> Result<Option<Box<dyn Graph>>> {
        let gpu = self.gpu()?;
        let mut progs = vec![];
        let mut bufs = vec![];
        for l in launches {
            if let Launch::Kernel { prog, .. } = l {
                program(prog)?;
                progs.push(prog.clone());
            }
            for b in l.buffers() {
                self.own(&[b])?;
                mem(b)?;
                bufs.push(b.clone());
            }
        }
        // Captured on a stream of its own, so work other threads queue meanwhile stays out.
        let cs = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(|e| err("creating a capture stream", e))?;
        // SAFETY: `cs` was just created; capture is ended below whatever happens in between,
        // and the stream is destroyed after it.
        let captured = unsafe {
            let r = cu::stream::begin_capture(
                cs,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
            .map_err(|e| err("starting a graph capture", e));
            let queued = r.and_then(|_| {
                for l in launches {
                    match l {
                        Launch::Kernel { prog, bufs, .. } => {
                            let refs: Vec<&Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
                            gpu.launch_on(program(prog)?, &refs, cs)?;
                        }
                        Launch::Copy { src, dst } => copy_dtod(src, dst, cs)?,
                    }
                }
                Ok(())
            });
            let graph = cu::stream::end_capture(cs).map_err(|e| err("ending a graph capture", e));
            let _ = cu::stream::destroy(cs);
            match (queued, graph) {
                (Ok(()), Ok(g)) => Ok(g),
                (Err(e), Ok(g)) => {
                    let _ = cu::graph::destroy(g);
                    Err(e)
                }
                (Err(e), Err(_)) | (Ok(()), Err(e)) => Err(e),
            }
        }?;
        // SAFETY: `captured` is the graph just captured; the executable graph is independent
        // of it, so it is destroyed right after.
        let exec = unsafe {
            let e = cu::graph::instantiate(captured, sys::CUgraphInstantiate_flags(0));
            let _ = cu::graph::destroy(captured);
            e
        }
        .map_err(|e| err("instantiating a graph", e))?;
        bump(&COUNTERS.graphs);
        Ok(Some(Box::new(CudaGraph {
            index: self.index,
            exec,
            _progs: progs,
            _bufs: bufs,
        })))
    }
}

/// Queue a device-to-device copy of the bytes both buffers hold.
fn copy_dtod(src: &Buffer, dst: &Buffer, stream: sys::CUstream) -> Result<()> {
    let n = src.size.min(dst.size);
    if n == 0 {
        return Ok(());
    }
    // SAFETY: both allocations hold at least `n` bytes.
    unsafe { cu::memcpy_dtod_async(mem(dst)?.ptr, mem(src)?.ptr, n, stream) }
        .map_err(|e| err("device copy", e))
}

/// A captured step as an instantiated CUDA graph. It holds the programs and buffers its nodes
/// refer to, so none is unloaded or recycled while it lives.
struct CudaGraph {
    index: u8,
    exec: sys::CUgraphExec,
    _progs: Vec<Arc<Program>>,
    _bufs: Vec<Arc<Buffer>>,
}

// SAFETY: an executable graph may be launched from any thread of its context.
unsafe impl Send for CudaGraph {}
// SAFETY: see above; launches are queued by the driver.
unsafe impl Sync for CudaGraph {}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if let Some(gpu) = made(self.index) {
            // A replay may still run: the programs and buffers dropped with the graph must
            // outlive it.
            if gpu.bind().is_ok() && gpu.sync().is_ok() {
                // SAFETY: instantiated in `graph` and destroyed once, with no launch in flight.
                let _ = unsafe { cu::graph::exec_destroy(self.exec) };
            }
        }
    }
}

impl Graph for CudaGraph {
    fn run(&self, before: &[(&Buffer, &Buffer)], after: &[(&Buffer, &Buffer)]) -> Result<()> {
        let gpu = instance(self.index).gpu()?;
        for (s, d) in before {
            copy_dtod(s, d, gpu.stream)?;
        }
        // SAFETY: the graph's kernels and buffers are held by `self`.
        unsafe { cu::graph::launch(self.exec, gpu.stream) }
            .map_err(|e| err("launching a graph", e))?;
        bump(&COUNTERS.graph_launches);
        for (s, d) in after {
            copy_dtod(s, d, gpu.stream)?;
        }
        Ok(())
    }
}
