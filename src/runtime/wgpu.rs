//! The WebGPU backend: kernels rendered to WGSL (`codegen::wgsl`) and run through wgpu, on
//! Vulkan/Metal/DX12 natively and on the browser's WebGPU on wasm32.
//!
//! Launches are encoded into one pending command encoder and submitted when something needs the
//! results (a readback, a write from the host, `synchronize`) or after `MAX_PENDING` dispatches.
//! Buffers come from a pool of freed buffers of the same (word-rounded) size. wgpu reports
//! errors asynchronously: native device creation, compilation and allocation run inside error
//! scopes; everything else lands in the uncaptured-error handler and is returned as an `Err` by
//! the next call (device loss stays an error for that device). After a loss, `init_device`
//! creates a fresh device in its place: buffers, kernels and captured steps of the lost one stay
//! errors naming the loss, new work runs on the new one. A TinyJit capture becomes a `Graph`:
//! pipelines and bind groups are made once, and a replay encodes the whole list into one encoder
//! with one submit.

use super::{
    check_copy_in, Backend, BoxFuture, Buffer, Device, DeviceKind, Graph, Instances, Launch, Mem,
    Program, ProgramImpl,
};
use crate::codegen::linearize::LinearKernel;
use crate::codegen::wgsl::{
    dispatch_size, render_wgsl_for, workgroup_size, Features, MAX_WORKGROUPS_PER_DIM,
};
use crate::codegen::{OptTarget, Target};
use crate::error::{bail, Error, ErrorKind, Result};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{Context, Poll, Waker};

/// Dispatches encoded before the pending encoder is submitted anyway (bounds its memory).
const MAX_PENDING: usize = 512;
/// Bytes of freed buffers kept for reuse.
const POOL_BYTES: u64 = 512 << 20;

/// Counters of the GPU objects this process created, for tests and benchmarks (a JIT replay must
/// not create pipelines, bind groups or buffers, and submits once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Compute pipelines created.
    pub pipelines: u64,
    /// Bind groups created.
    pub bind_groups: u64,
    /// Buffers created (not reused from the pool).
    pub buffers: u64,
    /// Command buffers submitted.
    pub submits: u64,
    /// Dispatches encoded.
    pub dispatches: u64,
    /// Compute passes begun (an eager launch is a pass; a replay puts every dispatch in one).
    pub passes: u64,
    /// Buffer-to-buffer copies encoded (inputs into a replay, readbacks, copies between buffers).
    pub copies: u64,
    /// Host time spent encoding launches and replays, in total (ns; 0 where no clock exists).
    pub encode_ns: u64,
    /// Host time spent in `Queue::submit` (finishing and validating command buffers), in total.
    pub submit_ns: u64,
    /// Host time spent encoding the last graph replay (ns; 0 where no clock exists).
    pub last_replay_encode_ns: u64,
}

#[derive(Default)]
struct Counters {
    pipelines: AtomicU64,
    bind_groups: AtomicU64,
    buffers: AtomicU64,
    submits: AtomicU64,
    dispatches: AtomicU64,
    passes: AtomicU64,
    copies: AtomicU64,
    encode_ns: AtomicU64,
    submit_ns: AtomicU64,
    last_replay_encode_ns: AtomicU64,
}

static COUNTERS: Counters = Counters {
    pipelines: AtomicU64::new(0),
    bind_groups: AtomicU64::new(0),
    buffers: AtomicU64::new(0),
    submits: AtomicU64::new(0),
    dispatches: AtomicU64::new(0),
    passes: AtomicU64::new(0),
    copies: AtomicU64::new(0),
    encode_ns: AtomicU64::new(0),
    submit_ns: AtomicU64::new(0),
    last_replay_encode_ns: AtomicU64::new(0),
};

/// What the WebGPU backend has created so far (process-wide).
pub fn stats() -> Stats {
    let c = &COUNTERS;
    Stats {
        pipelines: c.pipelines.load(Ordering::Relaxed),
        bind_groups: c.bind_groups.load(Ordering::Relaxed),
        buffers: c.buffers.load(Ordering::Relaxed),
        submits: c.submits.load(Ordering::Relaxed),
        dispatches: c.dispatches.load(Ordering::Relaxed),
        passes: c.passes.load(Ordering::Relaxed),
        copies: c.copies.load(Ordering::Relaxed),
        encode_ns: c.encode_ns.load(Ordering::Relaxed),
        submit_ns: c.submit_ns.load(Ordering::Relaxed),
        last_replay_encode_ns: c.last_replay_encode_ns.load(Ordering::Relaxed),
    }
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Finish an encoder and submit it, counting the submit and its host time.
fn submit_one(queue: &wgpu::Queue, enc: wgpu::CommandEncoder) {
    let t0 = now();
    queue.submit([enc.finish()]);
    bump(&COUNTERS.submits, 1);
    bump(&COUNTERS.submit_ns, since(t0));
}

/// Host nanoseconds since `t0` (natively; the browser's clock is not reachable from here).
#[cfg(not(target_arch = "wasm32"))]
type Clock = std::time::Instant;
#[cfg(not(target_arch = "wasm32"))]
fn now() -> Clock {
    std::time::Instant::now()
}
#[cfg(not(target_arch = "wasm32"))]
fn since(t0: Clock) -> u64 {
    t0.elapsed().as_nanos() as u64
}
#[cfg(target_arch = "wasm32")]
type Clock = u64;
#[cfg(target_arch = "wasm32")]
fn now() -> Clock {
    0
}
#[cfg(target_arch = "wasm32")]
fn since(_: Clock) -> u64 {
    0
}

/// The adapter a device was created on.
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    /// The adapter's name (e.g. "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// The graphics API under it ("Vulkan", "Metal", "Dx12", "BrowserWebGpu").
    pub backend: String,
    /// "DiscreteGpu", "IntegratedGpu", "Cpu" (a software rasterizer such as lavapipe), ...
    pub device_type: String,
    /// The driver's name and version, where the adapter reports them.
    pub driver: String,
    /// Storage buffers a kernel may bind (the scheduler splits kernels that would bind more).
    pub max_storage_buffers_per_stage: u32,
    /// The largest storage buffer binding, in bytes.
    pub max_storage_binding_bytes: u64,
    /// Whether kernels can be timed by timestamp queries.
    pub timestamps: bool,
    /// Whether kernels store f16 natively (`shader-f16`; `SHADER_F16=0` turns it off).
    pub shader_f16: bool,
    /// The subgroup size grouped reduces sum through, where the adapter has `subgroups` of one
    /// size (its smallest and largest agree), else 0 (`SUBGROUPS=0` turns them off).
    pub subgroup_size: u32,
}

/// One WebGPU device (`WEBGPU:n`, each a wgpu device of its own, created on the preferred
/// adapter), or the reason there is none.
pub struct Wgpu {
    index: u8,
    /// The current device (each one leaked: buffers and kernels point at the device they were
    /// made on), replaced by `init_device` after a loss.
    gpu: RwLock<&'static GpuOrWhy>,
}

type GpuOrWhy = std::result::Result<Gpu, String>;

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: AdapterInfo,
    /// Whether kernels that use subgroups must say `enable subgroups;` (browsers).
    subgroups_directive: bool,
    limits: wgpu::Limits,
    state: Mutex<State>,
    errors: Arc<Mutex<Errors>>,
}

#[derive(Default)]
struct Errors {
    pending: Vec<String>,
    lost: Option<String>,
}

#[derive(Default)]
struct State {
    encoder: Option<wgpu::CommandEncoder>,
    pending: usize,
    pool: HashMap<u64, Vec<wgpu::Buffer>>,
    pooled_bytes: u64,
    layouts: HashMap<Vec<bool>, Arc<(wgpu::BindGroupLayout, wgpu::PipelineLayout)>>,
    pipelines: HashMap<String, Arc<wgpu::ComputePipeline>>,
}

impl State {
    /// The pending encoder (started on first use).
    fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
        })
    }
}

/// Encode one kernel as a compute pass of its own.
fn encode_dispatch(
    enc: &mut wgpu::CommandEncoder,
    wp: &WgpuProgram,
    bg: &wgpu::BindGroup,
    timestamp_writes: Option<wgpu::ComputePassTimestampWrites>,
) {
    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: None,
        timestamp_writes,
    });
    pass.set_pipeline(&wp.pipeline);
    pass.set_bind_group(0, bg, &[]);
    pass.dispatch_workgroups(wp.grid.0, wp.grid.1, wp.grid.2);
    bump(&COUNTERS.dispatches, 1);
    bump(&COUNTERS.passes, 1);
}

/// A compiled kernel: its pipeline, bind group layout and grid.
pub struct WgpuProgram {
    gpu: &'static Gpu,
    pipeline: Arc<wgpu::ComputePipeline>,
    layout: Arc<(wgpu::BindGroupLayout, wgpu::PipelineLayout)>,
    grid: (u32, u32, u32),
    nbufs: usize,
}

/// A device buffer; returned to its device's pool when dropped.
pub struct GpuMem {
    buf: Option<wgpu::Buffer>,
    gpu: &'static Gpu,
}

impl Drop for GpuMem {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.gpu.release(b);
        }
    }
}

static INSTANCES: Instances<Wgpu> = Instances::new();

/// WebGPU device `index` (`WEBGPU:index`). Natively it is created on first use; in the browser
/// `init_device` must have been awaited first (adapter and device requests are asynchronous
/// there).
pub fn instance(index: u8) -> &'static Wgpu {
    #[cfg(not(target_arch = "wasm32"))]
    {
        INSTANCES.get(index, || super::block_on(Wgpu::create(index)))
    }
    #[cfg(target_arch = "wasm32")]
    {
        static NOT_YET: GpuOrWhy = Err(String::new());
        static NOT_READY: Wgpu = Wgpu {
            index: 0,
            gpu: RwLock::new(&NOT_YET),
        };
        INSTANCES.existing(index).unwrap_or(&NOT_READY)
    }
}

/// Create `WEBGPU:0` (once). Returns the adapter it got, or why there is none.
pub async fn init() -> Result<AdapterInfo> {
    init_device(0).await
}

/// Create `WEBGPU:index` (once, or again after its device was lost): a wgpu device of its own.
/// Returns its adapter, or why there is none. After a loss the tensors of the lost device stay
/// errors; training continues on the new one from a snapshot (`nn::state::Snapshot`).
pub async fn init_device(index: u8) -> Result<AdapterInfo> {
    #[cfg(target_arch = "wasm32")]
    if INSTANCES.existing(index).is_none() {
        INSTANCES.set(index, Wgpu::create(index).await);
    }
    let w = instance(index);
    if let Ok(old) = w.current() {
        if old.lost().is_some() {
            let fresh = leak(Gpu::create().await);
            *w.gpu.write().unwrap_or_else(|e| e.into_inner()) = fresh;
            if crate::context::debug() >= 1 {
                crate::context::log(&format!(
                    "wgrad: {} re-created after a device loss",
                    w.dev()
                ));
            }
        }
    }
    match w.current() {
        Ok(g) => Ok(g.info.clone()),
        Err(e) if e.is_empty() => bail!(Device, "webgpu: not initialised"),
        Err(e) => bail!(Device, "webgpu: {e}"),
    }
}

/// Whether `WEBGPU:index` exists, with the reason when it does not.
pub fn available(index: u8) -> std::result::Result<(), String> {
    match instance(index).current() {
        Ok(_) => Ok(()),
        Err(e) if e.is_empty() => Err(format!(
            "webgpu: WEBGPU:{index} is not initialised (await init() first)"
        )),
        Err(e) => Err(e.clone()),
    }
}

/// Destroy `WEBGPU:0`'s device, as a driver reset or `GPUDevice.destroy()` would (for tests of device
/// loss): from now on every WEBGPU call is an error naming the loss, and the WEBGPU tensors'
/// contents are gone. Training resumes from a host snapshot (`nn::state::Snapshot`) on a new
/// WebGPU device (`init` again) or on another device.
pub fn lose_device() -> Result<()> {
    let g = match instance(0).current() {
        Ok(g) => g,
        Err(e) => bail!(Device, "webgpu: {e}"),
    };
    g.device.destroy();
    lock(&g.errors)
        .lost
        .get_or_insert_with(|| "device lost (Destroyed)".into());
    let mut st = lock(&g.state);
    st.pool.clear();
    st.pooled_bytes = 0;
    Ok(())
}

/// Why this JavaScript environment has no WebGPU for wgpu, checked before wgpu looks: wgpu's
/// instance panics (killing the wasm instance) outside a browser window or dedicated worker,
/// such as in Node.js, instead of reporting it.
#[cfg(target_arch = "wasm32")]
fn no_browser_gpu() -> Option<String> {
    use js_sys::Reflect;
    let global = js_sys::global();
    let has = |obj: &js_sys::Object, key: &str| {
        Reflect::get(obj, &key.into())
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null())
            .map(js_sys::Object::from)
    };
    if has(&global, "Window").is_none() && has(&global, "WorkerGlobalScope").is_none() {
        return Some(
            "not a browser window or worker (Node.js or another runtime without WebGPU for wgpu)"
                .into(),
        );
    }
    match has(&global, "navigator").and_then(|n| has(&n, "gpu")) {
        Some(_) => None,
        None => Some(
            "navigator.gpu is missing (this browser lacks WebGPU or has it switched off)".into(),
        ),
    }
}

/// Subgroups in the browser, which wgpu's WebGPU backend does not know.
#[cfg(target_arch = "wasm32")]
mod browser {
    use js_sys::{Function, Object, Promise, Reflect};
    use wasm_bindgen::{JsCast, JsValue};

    /// `on[method](arg)`, as JavaScript calls it (WebGPU methods wgpu has no binding for).
    pub fn call(on: &JsValue, method: &str, arg: &JsValue) -> Result<JsValue, JsValue> {
        let f: Function = Reflect::get(on, &method.into())?.dyn_into()?;
        f.call1(on, arg)
    }

    /// A plain JavaScript object with these fields (a WebGPU descriptor).
    pub fn object(fields: &[(&str, &JsValue)]) -> JsValue {
        let o = Object::new();
        for (k, v) in fields {
            let _ = Reflect::set(&o, &(*k).into(), v);
        }
        o.into()
    }

    /// Wrap `GPUAdapter.prototype.requestDevice` so that devices made until the returned
    /// function restores it also ask for `subgroups` where their adapter has it. `None` where
    /// the page forbids making functions from source (a content security policy) or has no
    /// `GPUAdapter`: the device is then made without subgroups.
    pub fn ask_for_subgroups() -> Option<Function> {
        let wrap = Function::new_no_args(
            "const P = globalThis.GPUAdapter && GPUAdapter.prototype;
             if (!P || !P.requestDevice) return null;
             const plain = P.requestDevice;
             P.requestDevice = function (desc) {
               const wanted = Array.from((desc && desc.requiredFeatures) || []);
               if (this.features.has('subgroups') && !wanted.includes('subgroups')) {
                 wanted.push('subgroups');
               }
               return plain.call(this, Object.assign({}, desc, { requiredFeatures: wanted }));
             };
             return () => { P.requestDevice = plain; };",
        );
        wrap.call0(&JsValue::NULL).ok()?.dyn_into().ok()
    }

    /// Whether WGSL on `device` sums through subgroups: `Some(true)` where kernels must say
    /// `enable subgroups;` (Chromium), `Some(false)` where they must not (naga: Deno), `None`
    /// where neither compiles (the device lacks the feature).
    pub async fn probe_subgroups(device: &wgpu::Device) -> Option<bool> {
        let device: &JsValue = device.as_webgpu()?.as_ref();
        let call = |on: &JsValue, method: &str, arg: &JsValue| call(on, method, arg).ok();
        let features = Reflect::get(device, &"features".into()).ok()?;
        if call(&features, "has", &"subgroups".into())?.as_bool() != Some(true) {
            return None;
        }
        let body = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) {
  o[i] = subgroupAdd(f32(i));
}";
        for directive in [true, false] {
            let code = if directive {
                format!("enable subgroups;\n{body}")
            } else {
                body.to_string()
            };
            let desc = object(&[("code", &code.into())]);
            // The failing probe's error is caught here, not reported as the device's.
            call(device, "pushErrorScope", &"validation".into())?;
            let module = call(device, "createShaderModule", &desc)?;
            let none = JsValue::UNDEFINED;
            let info: Promise = call(&module, "getCompilationInfo", &none)?
                .dyn_into()
                .ok()?;
            let info = wasm_bindgen_futures::JsFuture::from(info).await.ok()?;
            let popped: Promise = call(device, "popErrorScope", &none)?.dyn_into().ok()?;
            wasm_bindgen_futures::JsFuture::from(popped).await.ok()?;
            let messages: js_sys::Array = Reflect::get(&info, &"messages".into())
                .ok()?
                .dyn_into()
                .ok()?;
            let error = messages.iter().any(|m| {
                Reflect::get(&m, &"type".into())
                    .ok()
                    .and_then(|t| t.as_string())
                    == Some("error".into())
            });
            if !error {
                return Some(directive);
            }
        }
        None
    }
}

fn leak(g: GpuOrWhy) -> &'static GpuOrWhy {
    Box::leak(Box::new(g))
}

/// The adapter `WEBGPU:0` runs on, if any.
pub fn adapter_info() -> Option<AdapterInfo> {
    instance(0).info()
}

impl Wgpu {
    async fn create(index: u8) -> Wgpu {
        Wgpu {
            index,
            gpu: RwLock::new(leak(Gpu::create().await)),
        }
    }
    fn current(&self) -> &'static GpuOrWhy {
        *self.gpu.read().unwrap_or_else(|e| e.into_inner())
    }
    /// The adapter this device runs on, if it exists.
    pub fn info(&self) -> Option<AdapterInfo> {
        self.current().as_ref().ok().map(|g| g.info.clone())
    }
    fn dev(&self) -> Device {
        Device::new(DeviceKind::Wgpu, self.index)
    }
    /// Refuse buffers of another device (a wgpu resource is only valid on its own device).
    fn own(&self, bufs: &[&Buffer]) -> Result<()> {
        for b in bufs {
            if b.device != self.dev() {
                bail!(
                    Device,
                    "webgpu: a {} buffer was passed to {}",
                    b.device,
                    self.dev()
                );
            }
        }
        Ok(())
    }
    fn gpu(&self) -> Result<&'static Gpu> {
        match self.current() {
            Ok(g) => {
                g.check()?;
                Ok(g)
            }
            Err(e) if e.is_empty() => {
                bail!(
                    Device,
                    "webgpu: not initialised (await init() before using WEBGPU)"
                )
            }
            Err(e) => bail!(Device, "webgpu: {e}"),
        }
    }
}

/// Mesa's device-select Vulkan layer asks libwayland for a compositor while the instance lists
/// the GPUs, and where no desktop session runs (a server, a container, CI) libwayland prints
/// "error: XDG_RUNTIME_DIR is invalid or not set in the environment." twice. Without a reachable
/// compositor the layer has nothing to select by, so it is told to step aside
/// (`NODEVICE_SELECT=1`) unless the user set that variable; wgpu still picks the adapter.
#[cfg(not(target_arch = "wasm32"))]
fn quiet_mesa_device_select() {
    use std::env::var_os;
    // libwayland's own test: a socket handed over, an absolute display path, or a runtime dir
    // that is an absolute path.
    let absolute = |k: &str| var_os(k).is_some_and(|v| std::path::Path::new(&v).is_absolute());
    let compositor = var_os("WAYLAND_SOCKET").is_some()
        || absolute("WAYLAND_DISPLAY")
        || absolute("XDG_RUNTIME_DIR");
    if !compositor && var_os("NODEVICE_SELECT").is_none() {
        // Runs once, before this process loads any Vulkan code (the only C code that reads the
        // environment here); Rust's own readers take the same lock as `set_var`.
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gpu {
    async fn create() -> std::result::Result<Gpu, String> {
        #[cfg(not(target_arch = "wasm32"))]
        quiet_mesa_device_select();
        #[cfg(target_arch = "wasm32")]
        if let Some(why) = no_browser_gpu() {
            return Err(why);
        }
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| format!("no adapter ({e}); natively install a Vulkan driver (e.g. Debian's mesa-vulkan-drivers), in a browser enable WebGPU"))?;
        let ai = adapter.get_info();
        let limits = adapter.limits();
        let mut wanted = wgpu::Features::TIMESTAMP_QUERY;
        if crate::context::shader_f16() {
            wanted |= wgpu::Features::SHADER_F16;
        }
        // A kernel is planned for one subgroup size: adapters whose size varies get none.
        let one_size = ai.subgroup_min_size == ai.subgroup_max_size && ai.subgroup_min_size > 1;
        let subgroups = crate::context::subgroups() && one_size;
        if subgroups {
            wanted |= wgpu::Features::SUBGROUP;
        }
        let features = adapter.features() & wanted;
        // wgpu's WebGPU backend has no name for `subgroups`: the browser's device asks for it
        // through a wrapped `requestDevice` while this one is made.
        #[cfg(target_arch = "wasm32")]
        let restore = subgroups.then(browser::ask_for_subgroups).flatten();
        let made = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgrad"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await;
        #[cfg(target_arch = "wasm32")]
        if let Some(f) = restore {
            let _ = f.call0(&wasm_bindgen::JsValue::NULL);
        }
        let (device, queue) =
            made.map_err(|e| format!("cannot create a device on {}: {e}", ai.name))?;
        // Natively the feature says it all; in the browser a probe kernel finds whether WGSL
        // there takes subgroups, and whether it wants `enable subgroups;` (Chromium does).
        #[cfg(not(target_arch = "wasm32"))]
        let probed = features.contains(wgpu::Features::SUBGROUP).then_some(false);
        #[cfg(target_arch = "wasm32")]
        let probed = match subgroups {
            true => browser::probe_subgroups(&device).await,
            false => None,
        };
        let (subgroup_size, subgroups_directive) =
            probed.map_or((0, false), |directive| (ai.subgroup_min_size, directive));
        let errors: Arc<Mutex<Errors>> = Arc::default();
        let e2 = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&e2).pending.push(e.to_string());
        }));
        let e3 = errors.clone();
        device.set_device_lost_callback(move |reason, msg| {
            lock(&e3).lost = Some(
                format!("device lost ({reason:?}): {msg}")
                    .trim_end_matches(": ")
                    .into(),
            );
        });
        let info = AdapterInfo {
            name: ai.name.clone(),
            backend: format!("{:?}", ai.backend),
            device_type: format!("{:?}", ai.device_type),
            driver: format!("{} {}", ai.driver, ai.driver_info)
                .trim()
                .to_string(),
            max_storage_buffers_per_stage: limits.max_storage_buffers_per_shader_stage,
            max_storage_binding_bytes: limits.max_storage_buffer_binding_size,
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroup_size,
        };
        if crate::context::debug() >= 1 {
            crate::context::log(&format!("wgrad: webgpu adapter {info:?}"));
        }
        Ok(Gpu {
            device,
            queue,
            info,
            subgroups_directive,
            limits,
            state: Mutex::default(),
            errors,
        })
    }

    /// Why this device was lost, if it was.
    fn lost(&self) -> Option<String> {
        lock(&self.errors).lost.clone()
    }

    fn lost_error(&self, l: &str) -> Error {
        Error::new(
            ErrorKind::DeviceLost,
            format!(
                "webgpu: {l}; the tensors on it are gone: initialise WebGPU again (init) or use \
                 another device, and continue from a snapshot (nn::state::Snapshot)"
            ),
        )
    }

    /// Turn errors wgpu reported since the last call into an `Err`.
    fn check(&self) -> Result<()> {
        let mut e = lock(&self.errors);
        if let Some(l) = &e.lost {
            return Err(self.lost_error(l));
        }
        if !e.pending.is_empty() {
            // Later errors are mostly echoes of the first ("invalid due to a previous error").
            let mut msgs = std::mem::take(&mut e.pending);
            msgs.dedup();
            let more = msgs.len().saturating_sub(3);
            msgs.truncate(3);
            let tail = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            bail!(Backend, "webgpu: {}{tail}", msgs.join("; "));
        }
        Ok(())
    }

    /// Run `f` inside validation and out-of-memory error scopes and turn what they catch into an
    /// `Err`. In the browser popping a scope is asynchronous, so errors arrive through the
    /// uncaptured-error handler instead.
    fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let v = f();
            let e1 = super::block_on(val.pop());
            let e2 = super::block_on(oom.pop());
            if let Some(e) = e1.or(e2) {
                bail!(Backend, "webgpu: {what}: {e}");
            }
            Ok(v)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = what;
            Ok(f())
        }
    }

    fn submit(&self, st: &mut State) {
        if let Some(enc) = st.encoder.take() {
            submit_one(&self.queue, enc);
            st.pending = 0;
        }
    }

    fn release(&self, b: wgpu::Buffer) {
        if self.lost().is_some() {
            return;
        }
        let mut st = lock(&self.state);
        let size = b.size();
        if st.pooled_bytes + size <= POOL_BYTES {
            st.pooled_bytes += size;
            st.pool.entry(size).or_default().push(b);
        }
    }

    fn new_buffer(&self, bytes: u64) -> Result<wgpu::Buffer> {
        if let Some(b) = {
            let mut st = lock(&self.state);
            let b = st.pool.get_mut(&bytes).and_then(|v| v.pop());
            if b.is_some() {
                st.pooled_bytes -= bytes;
            }
            b
        } {
            return Ok(b);
        }
        let b = self.scoped("allocating a buffer", || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        bump(&COUNTERS.buffers, 1);
        Ok(b)
    }

    fn layout(
        &self,
        writes: Vec<bool>,
    ) -> Result<Arc<(wgpu::BindGroupLayout, wgpu::PipelineLayout)>> {
        if let Some(l) = lock(&self.state).layouts.get(&writes) {
            return Ok(l.clone());
        }
        let entries: Vec<wgpu::BindGroupLayoutEntry> = writes
            .iter()
            .enumerate()
            .map(|(i, &w)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: !w },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let l = self.scoped("creating a bind group layout", || {
            let bgl = self
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: None,
                    entries: &entries,
                });
            let pl = self
                .device
                .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: None,
                    bind_group_layouts: &[Some(&bgl)],
                    immediate_size: 0,
                });
            Arc::new((bgl, pl))
        })?;
        lock(&self.state).layouts.insert(writes, l.clone());
        Ok(l)
    }

    fn bind_group(&self, p: &WgpuProgram, bufs: &[&Buffer]) -> Result<wgpu::BindGroup> {
        if bufs.len() != p.nbufs {
            bail!(
                Backend,
                "webgpu: kernel takes {} buffers, got {}",
                p.nbufs,
                bufs.len()
            );
        }
        let mems = bufs
            .iter()
            .map(|b| self.mem(b))
            .collect::<Result<Vec<_>>>()?;
        let entries: Vec<wgpu::BindGroupEntry> = mems
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        bump(&COUNTERS.bind_groups, 1);
        Ok(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &p.layout.0,
            entries: &entries,
        }))
    }

    /// Wait for everything submitted (natively; the browser resolves map callbacks on its own).
    fn wait(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            bail!(Backend, "webgpu: waiting for the device: {e}");
        }
        Ok(())
    }

    /// Map `staging` for reading and return its bytes.
    async fn read_staging(&self, staging: wgpu::Buffer, len: usize) -> Result<Vec<u8>> {
        let signal = Signal::default();
        let s2 = signal.clone();
        staging.map_async(wgpu::MapMode::Read, .., move |r| s2.set(r));
        self.wait()?;
        if let Err(e) = signal.await {
            self.check()?;
            bail!(Backend, "webgpu: reading a buffer back failed: {e}");
        }
        let out = match staging.get_mapped_range(..) {
            Ok(v) => v[..len].to_vec(),
            Err(e) => bail!(Backend, "webgpu: mapping a buffer: {e}"),
        };
        staging.unmap();
        Ok(out)
    }

    fn staging(&self, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }
}

impl Gpu {
    /// The wgpu buffer of `b`, which must have been allocated on this device (not on one lost
    /// since).
    fn mem<'a>(&self, b: &'a Buffer) -> Result<&'a wgpu::Buffer> {
        let m = match &b.mem {
            Mem::Wgpu(m) => m,
            #[allow(unreachable_patterns)]
            _ => bail!(Device, "webgpu: a {} buffer was passed to WEBGPU", b.device),
        };
        if !std::ptr::eq(m.gpu, self) {
            let why = m.gpu.lost().unwrap_or_else(|| "device lost".into());
            return Err(m.gpu.lost_error(&why));
        }
        m.buf
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Device, "webgpu: buffer already released"))
    }

    /// The WGSL of `k` for this device, or why the device cannot run it (too many buffers, too
    /// large a workgroup or too much workgroup memory, too many invocations for one dispatch).
    fn source(&self, k: &LinearKernel) -> Result<String> {
        let limits = &self.limits;
        if k.bufs.len() > limits.max_storage_buffers_per_shader_stage as usize {
            bail!(
                Device,
                "webgpu: kernel {} binds {} buffers; this device allows {}",
                k.name,
                k.bufs.len(),
                limits.max_storage_buffers_per_shader_stage
            );
        }
        let ws = workgroup_size(k);
        if ws > limits.max_compute_invocations_per_workgroup
            || ws > limits.max_compute_workgroup_size_x
        {
            bail!(
                Device,
                "webgpu: kernel {} has workgroups of {ws} invocations; this device allows {}",
                k.name,
                limits.max_compute_invocations_per_workgroup
            );
        }
        let shared: usize = k.shared.iter().map(|(dt, n)| n * dt.size().max(4)).sum();
        if shared > limits.max_compute_workgroup_storage_size as usize {
            bail!(
                Device,
                "webgpu: kernel {} needs {shared} bytes of workgroup memory; this device allows {}",
                k.name,
                limits.max_compute_workgroup_storage_size
            );
        }
        let groups = k.global_size.div_ceil(ws as usize);
        let max = MAX_WORKGROUPS_PER_DIM as usize;
        if groups > max * max {
            bail!(
                Device,
                "webgpu: kernel {} has {} invocations, more than one dispatch can cover",
                k.name,
                k.global_size
            );
        }
        Ok(render_wgsl_for(
            k,
            Features {
                shader_f16: self.info.shader_f16,
                subgroups_directive: self.subgroups_directive,
            },
        ))
    }

    /// The pipeline of WGSL `src` with `layout`: made once per source (identical kernels share
    /// it), through the synchronous path.
    fn pipeline(
        &self,
        name: &str,
        src: &str,
        layout: &(wgpu::BindGroupLayout, wgpu::PipelineLayout),
    ) -> Result<Arc<wgpu::ComputePipeline>> {
        if let Some(p) = lock(&self.state).pipelines.get(src) {
            return Ok(p.clone());
        }
        let p = self.scoped(&format!("compiling kernel {name}"), || {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(src.into()),
                });
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(name),
                    layout: Some(&layout.1),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
        })?;
        bump(&COUNTERS.pipelines, 1);
        let p = Arc::new(p);
        lock(&self.state)
            .pipelines
            .insert(src.to_string(), p.clone());
        Ok(p)
    }

    /// The browser's pipelines for `ks`, made through `createComputePipelineAsync`, all at once:
    /// the browser compiles them on its own threads while the worker waits without blocking.
    /// wgpu has no asynchronous path, so each is then made again through it, synchronously: the
    /// browser's pipeline cache (Chromium's Dawn) returns the finished one, since the descriptor
    /// (source, layout by content, entry point) is the same. Kernels that fail here are left to
    /// `compile`, which reports them.
    #[cfg(target_arch = "wasm32")]
    async fn create_pipelines_async(&self, ks: &[LinearKernel]) {
        use js_sys::{Array, Reflect};
        use wasm_bindgen::{JsCast, JsValue};
        // Only Chromium's WebGPU (Dawn) hands wgpu's twin the finished pipeline from its cache;
        // in other browsers each pipeline would be compiled twice, so they make them as
        // `compile` does.
        let agent = Reflect::get(&js_sys::global(), &"navigator".into())
            .and_then(|n| Reflect::get(&n, &"userAgent".into()))
            .ok()
            .and_then(|a| a.as_string())
            .unwrap_or_default();
        let Some(device) = self
            .device
            .as_webgpu()
            .filter(|_| agent.contains("Chrome/"))
        else {
            return;
        };
        let device: &JsValue = device.as_ref();
        let (call, object) = (browser::call, browser::object);
        // The pipeline layout for each pattern of written bindings, as `layout` makes it.
        let mut layouts: HashMap<Vec<bool>, JsValue> = HashMap::new();
        let mut started = vec![];
        let mut seen = std::collections::HashSet::new();
        for k in ks {
            let Ok(src) = self.source(k) else { continue };
            if lock(&self.state).pipelines.contains_key(&src) || !seen.insert(src.clone()) {
                continue;
            }
            let writes: Vec<bool> = k.bufs.iter().map(|b| b.writes).collect();
            let layout = match layouts.get(&writes) {
                Some(l) => l.clone(),
                None => {
                    let entries: Array = writes
                        .iter()
                        .enumerate()
                        .map(|(i, &w)| {
                            let kind = if w { "storage" } else { "read-only-storage" };
                            let buffer = object(&[("type", &kind.into())]);
                            object(&[
                                ("binding", &(i as u32).into()),
                                ("visibility", &wgpu::ShaderStages::COMPUTE.bits().into()),
                                ("buffer", &buffer),
                            ])
                        })
                        .collect();
                    let made = call(
                        device,
                        "createBindGroupLayout",
                        &object(&[("entries", &entries)]),
                    )
                    .and_then(|bgl| {
                        let groups: Array = std::iter::once(bgl).collect();
                        call(
                            device,
                            "createPipelineLayout",
                            &object(&[("bindGroupLayouts", &groups)]),
                        )
                    });
                    let Ok(l) = made else { continue };
                    layouts.insert(writes.clone(), l.clone());
                    l
                }
            };
            let module = call(
                device,
                "createShaderModule",
                &object(&[
                    ("label", &k.name.as_str().into()),
                    ("code", &src.as_str().into()),
                ]),
            );
            let Ok(module) = module else { continue };
            let compute = object(&[("module", &module), ("entryPoint", &"main".into())]);
            let desc = object(&[
                ("label", &k.name.as_str().into()),
                ("layout", &layout),
                ("compute", &compute),
            ]);
            if let Ok(p) = call(device, "createComputePipelineAsync", &desc) {
                if let Ok(p) = p.dyn_into::<js_sys::Promise>() {
                    started.push((k, src, wasm_bindgen_futures::JsFuture::from(p)));
                }
            }
        }
        // Await them all, keeping each finished pipeline alive (the browser's cache holds live
        // pipelines only) until wgpu's twin is made.
        let mut done = vec![];
        for (k, src, p) in started {
            if let Ok(p) = p.await {
                done.push((k, src, p));
            }
        }
        for (k, src, _browsers) in &done {
            if let Ok(layout) = self.layout(k.bufs.iter().map(|b| b.writes).collect()) {
                let _ = self.pipeline(&k.name, src, &layout);
            }
        }
    }

    /// The compiled form of `p`, which must have been compiled on this device.
    fn program<'a>(&self, p: &'a Program) -> Result<&'a WgpuProgram> {
        let w = match &p.imp {
            ProgramImpl::Wgpu(w) => w,
            #[allow(unreachable_patterns)]
            _ => bail!(
                Device,
                "webgpu: program {} was not compiled for WEBGPU",
                p.name
            ),
        };
        if !std::ptr::eq(w.gpu, self) {
            let why = w.gpu.lost().unwrap_or_else(|| "device lost".into());
            return Err(w.gpu.lost_error(&why));
        }
        Ok(w)
    }
}

/// A one-shot value set by a wgpu callback and awaited by the caller.
struct Signal<T>(Arc<Mutex<(Option<T>, Option<Waker>)>>);

impl<T> Default for Signal<T> {
    fn default() -> Self {
        Signal(Arc::new(Mutex::new((None, None))))
    }
}

impl<T> Clone for Signal<T> {
    fn clone(&self) -> Self {
        Signal(self.0.clone())
    }
}

impl<T> Signal<T> {
    fn set(&self, v: T) {
        let mut s = lock(&self.0);
        s.0 = Some(v);
        if let Some(w) = s.1.take() {
            w.wake();
        }
    }
}

impl<T> Future for Signal<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = lock(&self.0);
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// The size of a buffer of `bytes` on the device: whole 16-byte units, so any buffer can be
/// bound as an array of `vec4` (kernels load four elements at a time), and never empty.
fn storage_size(bytes: usize) -> u64 {
    (bytes.div_ceil(16).max(1) * 16) as u64
}

impl Backend for Wgpu {
    fn device(&self) -> Device {
        self.dev()
    }

    fn target(&self) -> Target {
        match self.current() {
            Ok(g) => Target {
                // Software adapters (lavapipe, SwiftShader) run every invocation on the CPU.
                kind: if g.info.device_type == "Cpu" {
                    OptTarget::SoftGpu
                } else {
                    OptTarget::Gpu
                },
                max_local: (g.limits.max_compute_invocations_per_workgroup as usize)
                    .min(g.limits.max_compute_workgroup_size_x as usize),
                max_shared: g.limits.max_compute_workgroup_storage_size as usize,
                subgroup: g.info.subgroup_size as usize,
                ..Target::new(OptTarget::Gpu)
            },
            Err(_) => Target::new(OptTarget::Gpu),
        }
    }

    fn max_buffers(&self) -> usize {
        match self.current() {
            Ok(g) => g.limits.max_storage_buffers_per_shader_stage as usize,
            // WebGPU's guaranteed minimum is 8; 4 in wgpu's downlevel defaults.
            Err(_) => 4,
        }
    }

    fn max_buffer_bytes(&self) -> usize {
        match self.current() {
            Ok(g) => {
                let max = g
                    .limits
                    .max_storage_buffer_binding_size
                    .min(g.limits.max_buffer_size);
                // Buffers are rounded up to whole 16-byte units (`storage_size`).
                usize::try_from(max / 16 * 16).unwrap_or(usize::MAX)
            }
            Err(_) => usize::MAX,
        }
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let gpu = self.gpu()?;
        let size = storage_size(bytes);
        let max = gpu
            .limits
            .max_storage_buffer_binding_size
            .min(gpu.limits.max_buffer_size);
        if size > max {
            bail!(
                Device,
                "webgpu: a buffer of {bytes} bytes exceeds this device's largest storage binding ({max} bytes, adapter {})",
                gpu.info.name
            );
        }
        let b = gpu.new_buffer(size)?;
        Ok(Buffer::new(
            self.dev(),
            bytes,
            Mem::Wgpu(GpuMem { buf: Some(b), gpu }),
        ))
    }

    fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
        let gpu = self.gpu()?;
        check_copy_in(buf, data)?;
        self.own(&[buf])?;
        let b = gpu.mem(buf)?;
        // Commands encoded so far must see the old contents: submit them first (a queue write
        // lands before the next submit's commands).
        gpu.submit(&mut lock(&gpu.state));
        let whole = data.len() / 4 * 4;
        if whole > 0 {
            gpu.queue.write_buffer(b, 0, &data[..whole]);
        }
        if whole < data.len() {
            let mut tail = [0u8; 4];
            tail[..data.len() - whole].copy_from_slice(&data[whole..]);
            gpu.queue.write_buffer(b, whole as u64, &tail);
        }
        Ok(())
    }

    fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move {
            let gpu = self.gpu()?;
            self.own(&[buf])?;
            let src = gpu.mem(buf)?;
            let size = storage_size(buf.size);
            let staging = gpu.staging(size);
            {
                let mut st = lock(&gpu.state);
                st.encoder(&gpu.device)
                    .copy_buffer_to_buffer(src, 0, &staging, 0, size);
                bump(&COUNTERS.copies, 1);
                gpu.submit(&mut st);
            }
            let out = gpu.read_staging(staging, buf.size).await?;
            gpu.check()?;
            Ok(out)
        })
    }

    fn compile(&self, k: &LinearKernel) -> Result<Program> {
        let gpu = self.gpu()?;
        let src = gpu.source(k)?;
        crate::context::dump_source(&src, "wgsl");
        let layout = gpu.layout(k.bufs.iter().map(|b| b.writes).collect())?;
        let pipeline = gpu.pipeline(&k.name, &src, &layout)?;
        Ok(Program {
            name: k.name.clone(),
            global_size: k.global_size,
            local_size: k.local_size,
            ops: k.ops_per_item() * k.global_size as u64,
            imp: ProgramImpl::Wgpu(WgpuProgram {
                gpu,
                pipeline,
                layout,
                grid: dispatch_size(k.global_size, workgroup_size(k)),
                nbufs: k.bufs.len(),
            }),
            source: src,
        })
    }

    fn compiles_async(&self) -> bool {
        true
    }

    /// In the browser, `Gpu::create_pipelines_async`; natively wgpu has no asynchronous path,
    /// so the pipelines are made here one by one (the same work `compile` would do).
    fn precompile<'a>(&'a self, ks: &'a [LinearKernel]) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Ok(gpu) = self.gpu() else { return };
            #[cfg(target_arch = "wasm32")]
            gpu.create_pipelines_async(ks).await;
            #[cfg(not(target_arch = "wasm32"))]
            for k in ks {
                let made = gpu.source(k).and_then(|src| {
                    let layout = gpu.layout(k.bufs.iter().map(|b| b.writes).collect())?;
                    gpu.pipeline(&k.name, &src, &layout)
                });
                // An error is `compile`'s to report, when the kernel is launched.
                drop(made);
            }
        })
    }

    fn can_run(&self, p: &Program) -> bool {
        match (self.current(), &p.imp) {
            (Ok(g), ProgramImpl::Wgpu(w)) => std::ptr::eq(w.gpu, g),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
        let t0 = now();
        let gpu = self.gpu()?;
        self.own(bufs)?;
        let wp = gpu.program(p)?;
        let bg = gpu.bind_group(wp, bufs)?;
        let mut st = lock(&gpu.state);
        encode_dispatch(st.encoder(&gpu.device), wp, &bg, None);
        st.pending += 1;
        if st.pending >= MAX_PENDING {
            gpu.submit(&mut st);
        }
        bump(&COUNTERS.encode_ns, since(t0));
        Ok(())
    }

    fn launch_timed(&self, p: &Program, bufs: &[&Buffer]) -> Result<Option<u64>> {
        let gpu = self.gpu()?;
        if !gpu.info.timestamps || cfg!(target_arch = "wasm32") {
            self.launch(p, bufs)?;
            return Ok(None);
        }
        self.own(bufs)?;
        let wp = gpu.program(p)?;
        let bg = gpu.bind_group(wp, bufs)?;
        let qs = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = gpu.staging(16);
        {
            let mut st = lock(&gpu.state);
            let enc = st.encoder(&gpu.device);
            let writes = wgpu::ComputePassTimestampWrites {
                query_set: &qs,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            };
            encode_dispatch(enc, wp, &bg, Some(writes));
            enc.resolve_query_set(&qs, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, 16);
            gpu.submit(&mut st);
        }
        let raw = super::block_on(gpu.read_staging(staging, 16))?;
        let t0 = u64::from_le_bytes(raw[0..8].try_into().unwrap_or_default());
        let t1 = u64::from_le_bytes(raw[8..16].try_into().unwrap_or_default());
        let ns = t1.saturating_sub(t0) as f64 * gpu.queue.get_timestamp_period() as f64;
        Ok(Some(ns as u64))
    }

    fn synchronize(&self) -> Result<()> {
        let gpu = self.gpu()?;
        gpu.submit(&mut lock(&gpu.state));
        gpu.wait()?;
        gpu.check()
    }

    fn launch_profiled(
        &self,
        launches: &[Launch],
    ) -> Result<Option<BoxFuture<'static, Result<Vec<u64>>>>> {
        let gpu = self.gpu()?;
        // Two timestamps per launch, in one query set (WebGPU allows 4096 queries per set).
        let count = 2 * launches.len().max(1);
        if !gpu.info.timestamps || count > 4096 {
            return Ok(None);
        }
        let qs = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count: count as u32,
        });
        let bytes = 8 * count as u64;
        let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = gpu.staging(bytes);
        // Bind groups first: a failure leaves nothing half-encoded.
        let mut groups = vec![];
        for l in launches {
            groups.push(match l {
                Launch::Kernel { prog, bufs, .. } => {
                    let wp = gpu.program(prog)?;
                    let refs: Vec<&Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
                    Some((wp, gpu.bind_group(wp, &refs)?))
                }
                Launch::Copy { .. } => None,
            });
        }
        {
            let mut st = lock(&gpu.state);
            gpu.submit(&mut st);
            let enc = st.encoder(&gpu.device);
            for (i, (l, g)) in launches.iter().zip(&groups).enumerate() {
                match (l, g) {
                    (_, Some((wp, bg))) => {
                        let writes = wgpu::ComputePassTimestampWrites {
                            query_set: &qs,
                            beginning_of_pass_write_index: Some(2 * i as u32),
                            end_of_pass_write_index: Some(2 * i as u32 + 1),
                        };
                        encode_dispatch(enc, wp, bg, Some(writes));
                    }
                    // Unwritten queries resolve to 0: a copy reads as 0 ns.
                    (Launch::Copy { src, dst }, None) => encode_copy(gpu, enc, src, dst)?,
                    (Launch::Kernel { .. }, None) => {}
                }
            }
            enc.resolve_query_set(&qs, 0..count as u32, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &staging, 0, bytes);
            gpu.submit(&mut st);
        }
        let n = launches.len();
        Ok(Some(Box::pin(async move {
            gpu.check()?;
            let raw = gpu.read_staging(staging, bytes as usize).await?;
            let period = gpu.queue.get_timestamp_period() as f64;
            let at = |i: usize| {
                let b = raw.get(8 * i..8 * i + 8).and_then(|b| b.try_into().ok());
                u64::from_le_bytes(b.unwrap_or_default())
            };
            Ok((0..n)
                .map(|i| (at(2 * i + 1).saturating_sub(at(2 * i)) as f64 * period) as u64)
                .collect())
        })))
    }

    fn graph(&self, launches: &[Launch]) -> Result<Option<Box<dyn Graph>>> {
        let gpu = self.gpu()?;
        let mut steps = Vec::with_capacity(launches.len());
        for l in launches {
            self.own(
                &l.buffers()
                    .into_iter()
                    .map(|b| b.as_ref())
                    .collect::<Vec<_>>(),
            )?;
            steps.push(match l {
                Launch::Kernel { prog, bufs, .. } => {
                    let wp = gpu.program(prog)?;
                    let refs: Vec<&Buffer> = bufs.iter().map(|b| b.as_ref()).collect();
                    Step::Dispatch {
                        pipeline: wp.pipeline.clone(),
                        bind_group: gpu.bind_group(wp, &refs)?,
                        grid: wp.grid,
                        _bufs: bufs.clone(),
                    }
                }
                Launch::Copy { src, dst } => Step::Copy {
                    src: src.clone(),
                    dst: dst.clone(),
                },
            });
        }
        Ok(Some(Box::new(WgpuGraph { gpu, steps })))
    }
}

enum Step {
    Dispatch {
        pipeline: Arc<wgpu::ComputePipeline>,
        bind_group: wgpu::BindGroup,
        grid: (u32, u32, u32),
        // The bind group refers to these; holding them keeps them out of the pool.
        _bufs: Vec<Arc<Buffer>>,
    },
    Copy {
        src: Arc<Buffer>,
        dst: Arc<Buffer>,
    },
}

/// A captured step: bind groups made once, replayed as one encoder and one submit.
struct WgpuGraph {
    gpu: &'static Gpu,
    steps: Vec<Step>,
}

fn encode_copy(
    gpu: &Gpu,
    enc: &mut wgpu::CommandEncoder,
    src: &Buffer,
    dst: &Buffer,
) -> Result<()> {
    let n = storage_size(src.size.min(dst.size));
    enc.copy_buffer_to_buffer(gpu.mem(src)?, 0, gpu.mem(dst)?, 0, n);
    bump(&COUNTERS.copies, 1);
    Ok(())
}

impl Graph for WgpuGraph {
    fn run(&self, before: &[(&Buffer, &Buffer)], after: &[(&Buffer, &Buffer)]) -> Result<()> {
        let gpu = self.gpu;
        gpu.check()?;
        let t0 = now();
        let mut st = lock(&gpu.state);
        // What was queued before (eager launches, the previous replay) goes to the device now;
        // this replay stays pending until the next replay or sync point, so a readback right
        // after it shares its submit while queued replays keep the device one step ahead.
        gpu.submit(&mut st);
        let enc = st.encoder(&gpu.device);
        for (s, d) in before {
            encode_copy(gpu, enc, s, d)?;
        }
        let mut i = 0;
        while i < self.steps.len() {
            if let Step::Copy { src, dst } = &self.steps[i] {
                encode_copy(gpu, enc, src, dst)?;
                i += 1;
                continue;
            }
            // Consecutive dispatches share one compute pass (each dispatch is its own usage
            // scope, so a dispatch sees the writes of the one before).
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            bump(&COUNTERS.passes, 1);
            while let Some(Step::Dispatch {
                pipeline,
                bind_group,
                grid,
                ..
            }) = self.steps.get(i)
            {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[]);
                pass.dispatch_workgroups(grid.0, grid.1, grid.2);
                bump(&COUNTERS.dispatches, 1);
                i += 1;
            }
        }
        for (s, d) in after {
            encode_copy(gpu, enc, s, d)?;
        }
        st.pending += self.steps.len();
        let ns = since(t0);
        bump(&COUNTERS.encode_ns, ns);
        COUNTERS.last_replay_encode_ns.store(ns, Ordering::Relaxed);
        Ok(())
    }
}
