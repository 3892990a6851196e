//! The `WASM` backend: kernels compiled to WebAssembly modules (`codegen::wasm`) that read and
//! write the tensors in place in a linear memory they import. Natively the modules run in
//! `wasmi` (a WebAssembly interpreter: the op suite, the JIT tests and the fuzzer check the
//! dialect without a browser), over one memory the backend owns and carves buffers from. In a
//! browser, Node.js or Deno the engine is itself WebAssembly: on one thread buffers are its own
//! heap allocations and each module imports the engine's memory, instantiated with
//! `WebAssembly.Module` and `WebAssembly.Instance` and cached by its bytes; where shared memory
//! exists js/wgrad.js hands over a worker pool (`use_threads`), buffers are carved from a shared
//! memory of their own, every module is instantiated on each worker too and a launch's range is
//! split into chunks the threads claim (small launches stay on the calling thread).

use super::{Backend, BoxFuture, Buffer, Mem, Program, ProgramImpl};
use crate::codegen::wasm::Features;
use crate::codegen::{LinearKernel, OptTarget, Target};
use crate::device::Device;
use crate::error::{bail, Error, ErrorKind, Result};

/// WebAssembly's 32-bit addresses: the most memory the backend's buffers may take together.
pub const MAX_MEMORY: u64 = 1 << 32;

/// The most buffers a kernel binds: a WebAssembly function takes at most 1,000 parameters
/// (engines' limit), two of which are the invocation range.
const MAX_BUFFERS: usize = 900;

/// What kernels for WebAssembly are shaped for: the CPU's optimizer (upcasts, unrolls, splits
/// for the cores), with no workgroups (the dialect has none), 16 registers (x86-64's; in V8
/// the tutorial's step took 373 ms with 16, 456 ms with 8 and 390-433 ms with 32, 2026-12-04)
/// and no loop vectorizer (V8 compiles what the module says: elementwise kernels are upcast
/// into SIMD rows).
fn target() -> Target {
    Target {
        kind: OptTarget::Cpu,
        max_local: 1,
        max_shared: 0,
        registers: 16,
        tiles: false,
        loop_vectorizer: false,
        ..Target::new(OptTarget::Cpu)
    }
}

fn program(k: &LinearKernel, bytes: &[u8], imp: ProgramImpl) -> Program {
    // The module's bytes identify the kernel (`Program::same_kernel`); the source shown for it
    // is their size and hash.
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    Program {
        name: k.name.clone(),
        source: format!(
            "(module ;; {}: {} bytes, fnv {h:016x})",
            k.name,
            bytes.len()
        ),
        global_size: k.global_size,
        local_size: k.local_size,
        ops: k.ops_per_item() * k.global_size as u64,
        imp,
    }
}

/// Buffers start at multiples of this (the dialect's widest access is 16 bytes).
const ALIGN: u64 = 16;
/// A WebAssembly memory page.
const PAGE: u64 = 65536;

/// A linear memory carved into buffers: free ranges (start -> length, adjacent ones merged)
/// below the end of what was handed out.
#[derive(Default)]
struct Carve {
    free: std::collections::BTreeMap<u64, u64>,
    top: u64,
}

impl Carve {
    /// A range of `len` bytes (rounded up to `ALIGN`): the first free range that fits, else the
    /// end of the memory in use (which the caller grows the memory to cover). Its bytes may
    /// hold an earlier buffer's: the caller zeroes them.
    fn take(&mut self, len: u64) -> Result<u64> {
        let len = len.div_ceil(ALIGN) * ALIGN;
        if let Some((&at, &n)) = self.free.iter().find(|(_, &n)| n >= len) {
            self.free.remove(&at);
            if n > len {
                self.free.insert(at + len, n - len);
            }
            return Ok(at);
        }
        let at = self.top;
        if at + len > MAX_MEMORY {
            bail!(
                Device,
                "wasm: out of memory: {len} more bytes would take the buffers past the 4 GiB \
                 a 32-bit WebAssembly memory addresses ({at} bytes in use or free)"
            );
        }
        self.top = at + len;
        Ok(at)
    }

    /// Give back the range `take` returned for `len` bytes.
    fn give(&mut self, addr: u64, len: u64) {
        let len = len.div_ceil(ALIGN) * ALIGN;
        let (mut at, mut n) = (addr, len);
        // Merge with the free range just before and just after.
        if let Some((&p, &pn)) = self.free.range(..at).next_back() {
            if p + pn == at {
                self.free.remove(&p);
                at = p;
                n += pn;
            }
        }
        if let Some(&nn) = self.free.get(&(addr + len)) {
            self.free.remove(&(addr + len));
            n += nn;
        }
        if at + n == self.top {
            self.top = at;
        } else {
            self.free.insert(at, n);
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::*;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The backend: a wasmi store with the memory every buffer lives in.
    pub struct Wasm {
        device: Device,
        /// The store, or why it could not be made (every call reports it).
        vm: Result<Arc<Mutex<Vm>>>,
    }

    struct Vm {
        store: wasmi::Store<()>,
        memory: wasmi::Memory,
        linker: wasmi::Linker<()>,
        /// The memory's buffers.
        carve: Carve,
    }

    /// A buffer: a range of the backend's memory, given back when dropped.
    pub struct WasmMem {
        vm: Arc<Mutex<Vm>>,
        pub(crate) addr: u64,
        len: u64,
    }

    impl Drop for WasmMem {
        fn drop(&mut self) {
            if self.len > 0 {
                lock(&self.vm).release(self.addr, self.len);
            }
        }
    }

    /// A compiled kernel: its exported function in the backend's store.
    pub struct WasmProgram {
        func: wasmi::Func,
    }

    fn lock(vm: &Mutex<Vm>) -> std::sync::MutexGuard<'_, Vm> {
        vm.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl Vm {
        fn new() -> Result<Vm> {
            let engine = wasmi::Engine::default();
            let mut store = wasmi::Store::new(&engine, ());
            let ty = wasmi::MemoryType::new(0, Some((MAX_MEMORY / PAGE) as u32));
            let memory = wasmi::Memory::new(&mut store, ty)
                .map_err(|e| Error::new(ErrorKind::Device, format!("wasm: memory: {e}")))?;
            let mut linker = wasmi::Linker::new(&engine);
            let err = |e: wasmi::errors::LinkerError| {
                Error::new(ErrorKind::Device, format!("wasm: imports: {e}"))
            };
            linker.define("env", "memory", memory).map_err(err)?;
            // The host's f64 functions rounded to f32, as the interpreter computes them.
            linker
                .func_wrap("env", "log2", |x: f32| (x as f64).log2() as f32)
                .map_err(err)?;
            linker
                .func_wrap("env", "sin", |x: f32| (x as f64).sin() as f32)
                .map_err(err)?;
            linker
                .func_wrap("env", "fmod", |a: f32, b: f32| a % b)
                .map_err(err)?;
            Ok(Vm {
                store,
                memory,
                linker,
                carve: Carve::default(),
            })
        }

        /// A zeroed range of `len` bytes (`Carve::take`), the memory grown as needed.
        fn reserve(&mut self, len: u64) -> Result<u64> {
            let at = self.carve.take(len)?;
            let end = at + len.div_ceil(ALIGN) * ALIGN;
            let have = self.memory.size(&self.store) * PAGE;
            if end > have {
                let pages = (end - have).div_ceil(PAGE);
                if let Err(e) = self.memory.grow(&mut self.store, pages) {
                    self.carve.give(at, len);
                    bail!(Device, "wasm: cannot grow the memory to {end} bytes: {e}");
                }
            }
            let data = self.memory.data_mut(&mut self.store);
            data[at as usize..end as usize].fill(0);
            Ok(at)
        }

        fn release(&mut self, addr: u64, len: u64) {
            self.carve.give(addr, len);
        }
    }

    /// Whether the backend runs here: always natively (wasmi is compiled in).
    pub fn available() -> std::result::Result<(), String> {
        Ok(())
    }

    impl Wasm {
        /// The backend instance for `device`.
        pub fn new(device: Device) -> Wasm {
            Wasm {
                device,
                vm: Vm::new().map(|vm| Arc::new(Mutex::new(vm))),
            }
        }
        fn vm(&self) -> Result<std::sync::MutexGuard<'_, Vm>> {
            match &self.vm {
                Ok(vm) => Ok(lock(vm)),
                Err(e) => Err(e.clone()),
            }
        }
    }

    fn mem(buf: &Buffer) -> Result<&WasmMem> {
        match &buf.mem {
            Mem::Wasm(m) => Ok(m),
            #[allow(unreachable_patterns)]
            _ => bail!(
                Device,
                "a {} buffer is not in WebAssembly memory",
                buf.device
            ),
        }
    }

    impl Backend for Wasm {
        fn device(&self) -> Device {
            self.device
        }
        fn target(&self) -> Target {
            target()
        }
        fn max_buffers(&self) -> usize {
            MAX_BUFFERS
        }
        fn max_buffer_bytes(&self) -> usize {
            (MAX_MEMORY - PAGE) as usize
        }
        fn alloc(&self, bytes: usize) -> Result<Buffer> {
            let addr = if bytes == 0 {
                0
            } else {
                self.vm()?.reserve(bytes as u64)?
            };
            let mem = WasmMem {
                vm: self.vm.clone()?,
                addr,
                len: bytes as u64,
            };
            Ok(Buffer::new(self.device, bytes, Mem::Wasm(mem)))
        }
        fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
            let m = mem(buf)?;
            if data.len() as u64 > m.len {
                bail!(
                    Device,
                    "wasm: {} bytes do not fit a {}-byte buffer",
                    data.len(),
                    m.len
                );
            }
            let mut vm = self.vm()?;
            let memory = vm.memory;
            memory
                .write(&mut vm.store, m.addr as usize, data)
                .map_err(|e| Error::new(ErrorKind::Device, format!("wasm: copy in: {e}")))
        }
        fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>> {
            Box::pin(async move {
                let m = mem(buf)?;
                let vm = self.vm()?;
                let mut out = vec![0u8; m.len as usize];
                vm.memory
                    .read(&vm.store, m.addr as usize, &mut out)
                    .map_err(|e| Error::new(ErrorKind::Device, format!("wasm: copy out: {e}")))?;
                Ok(out)
            })
        }
        fn compile(&self, k: &LinearKernel) -> Result<Program> {
            // wasmi has relaxed SIMD (a fused multiply-add per lane).
            let features = Features {
                relaxed_simd: crate::context::relaxed_simd(),
                shared_memory: false,
            };
            let bytes = crate::codegen::wasm::module(k, features)?;
            let backend = |what: &str, e: &dyn std::fmt::Display| {
                Error::new(ErrorKind::Backend, format!("wasm: {what} {}: {e}", k.name))
            };
            let mut vm = self.vm()?;
            let module = wasmi::Module::new(vm.store.engine(), &bytes[..])
                .map_err(|e| backend("compiling", &e))?;
            let Vm { linker, store, .. } = &mut *vm;
            let instance = linker
                .instantiate_and_start(&mut *store, &module)
                .map_err(|e| backend("instantiating", &e))?;
            let func = instance
                .get_func(&*store, crate::codegen::wasm::EXPORT)
                .ok_or_else(|| backend("finding the kernel of", &"no export"))?;
            Ok(program(k, &bytes, ProgramImpl::Wasm(WasmProgram { func })))
        }
        fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
            let ProgramImpl::Wasm(wp) = &p.imp else {
                bail!(Backend, "wasm: {} was not compiled for WebAssembly", p.name);
            };
            let mut args = Vec::with_capacity(bufs.len() + 2);
            for b in bufs {
                args.push(wasmi::Val::I32(mem(b)?.addr as u32 as i32));
            }
            args.push(wasmi::Val::I32(0));
            args.push(wasmi::Val::I32(p.global_size as i32));
            let mut vm = self.vm()?;
            wp.func.call(&mut vm.store, &args, &mut []).map_err(|e| {
                Error::new(ErrorKind::Backend, format!("wasm: {} trapped: {e}", p.name))
            })
        }
        fn synchronize(&self) -> Result<()> {
            Ok(())
        }
    }
}

#[cfg(target_arch = "wasm32")]
pub use web::*;

#[cfg(target_arch = "wasm32")]
mod web {
    use super::*;
    use crate::runtime::HostMem;
    use js_sys::{Array, Function, Int32Array, Object, Reflect, Uint8Array, WebAssembly};
    use std::collections::HashMap;
    use std::sync::Mutex;
    use wasm_bindgen::{JsCast, JsValue};

    /// The backend. Single-threaded, kernels are instantiated over the engine's own memory and
    /// buffers are the engine's heap allocations (a buffer's address is its pointer). Given
    /// threads (`use_threads`: js/wgrad.js does so where shared memory exists), buffers live in
    /// a shared memory of their own that every worker's instances import too, and a launch is
    /// split among the threads (`Threads`).
    pub struct Wasm {
        device: Device,
        /// Kernels by module bytes: identical kernels compile once.
        modules: Mutex<HashMap<Vec<u8>, Js<JsValue>>>,
    }

    /// A JS object held by the backend.
    pub struct Js<T>(T);

    // SAFETY: the engine is built for wasm32 without atomics: one thread, so JS objects are
    // never shared between threads.
    unsafe impl<T> Send for Js<T> {}
    // SAFETY: as above.
    unsafe impl<T> Sync for Js<T> {}

    impl<T: Clone> Clone for Js<T> {
        fn clone(&self) -> Self {
            Js(self.0.clone())
        }
    }

    /// A compiled kernel: the module's exported function, or its number in the thread pool.
    pub struct WasmProgram {
        kernel: Js<JsValue>,
    }

    /// The thread pool of js/wgrad.js and the shared memory it runs kernels over.
    struct Threads {
        /// The pool: `addModule(module) -> id` and `run(id, args, total, chunks)`.
        pool: Js<JsValue>,
        /// The shared `WebAssembly.Memory` buffers live in.
        memory: Js<WebAssembly::Memory>,
        carve: Carve,
        /// Threads in all (the calling one included).
        count: u32,
    }

    static THREADS: Mutex<Option<Threads>> = Mutex::new(None);
    /// Whether a buffer was made in the engine's heap: threads cannot be turned on after.
    static HEAP_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    fn threads() -> std::sync::MutexGuard<'static, Option<Threads>> {
        THREADS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run WASM kernels on `count` threads of `pool` (js/wgrad.js's) over `memory` (shared,
    /// 4 GiB maximum) from now on. Refused (false) once a WASM buffer was made in the engine's
    /// heap, or with threads already set.
    pub fn use_threads(memory: WebAssembly::Memory, pool: JsValue, count: u32) -> bool {
        let mut t = threads();
        if t.is_some() || HEAP_USED.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        *t = Some(Threads {
            pool: Js(pool),
            memory: Js(memory),
            carve: Carve::default(),
            count: count.max(1),
        });
        true
    }

    /// A buffer in the shared memory, given back when dropped.
    pub struct WasmMem {
        pub(crate) addr: u64,
        len: u64,
    }

    impl Drop for WasmMem {
        fn drop(&mut self) {
            if let Some(t) = threads().as_mut() {
                t.carve.give(self.addr, self.len);
            }
        }
    }

    /// Whether the JS engine runs WebAssembly (it runs this engine, so it does).
    pub fn available() -> std::result::Result<(), String> {
        Ok(())
    }

    impl Wasm {
        /// The backend instance for `device`.
        pub fn new(device: Device) -> Wasm {
            Wasm {
                device,
                modules: Mutex::new(HashMap::new()),
            }
        }
    }

    fn js_err(what: &str, e: JsValue) -> Error {
        let msg = e
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| e.as_string())
            .unwrap_or_else(|| format!("{e:?}"));
        Error::new(ErrorKind::Backend, format!("wasm: {what}: {msg}"))
    }

    /// The imports every kernel module takes: the engine's memory and the host's functions.
    fn imports() -> std::result::Result<Object, JsValue> {
        let env = Object::new();
        let math = Reflect::get(&js_sys::global(), &"Math".into())?;
        Reflect::set(&env, &"memory".into(), &wasm_bindgen::memory())?;
        Reflect::set(&env, &"log2".into(), &Reflect::get(&math, &"log2".into())?)?;
        Reflect::set(&env, &"sin".into(), &Reflect::get(&math, &"sin".into())?)?;
        // JS's % of two numbers is C's fmod (exact, so rounding to f32 on return loses nothing).
        let fmod = Function::new_with_args("a, b", "return a % b");
        Reflect::set(&env, &"fmod".into(), &fmod)?;
        let all = Object::new();
        Reflect::set(&all, &"env".into(), &env)?;
        Ok(all)
    }

    /// What the JS engine supports, probed once (`WebAssembly.validate`).
    fn features(shared_memory: bool) -> Features {
        thread_local! {
            static RELAXED: bool = WebAssembly::validate(
                &Uint8Array::from(&crate::codegen::wasm::relaxed_simd_probe()[..]).into(),
            )
            .unwrap_or(false);
        }
        Features {
            relaxed_simd: crate::context::relaxed_simd() && RELAXED.with(|r| *r),
            shared_memory,
        }
    }

    fn instantiate(bytes: &[u8]) -> std::result::Result<JsValue, JsValue> {
        let module = WebAssembly::Module::new(&Uint8Array::from(bytes).into())?;
        let instance = WebAssembly::Instance::new(&module, &imports()?)?;
        Reflect::get(&instance.exports(), &crate::codegen::wasm::EXPORT.into())
    }

    /// `obj.name(args...)`.
    fn call(obj: &JsValue, name: &str, args: &Array) -> std::result::Result<JsValue, JsValue> {
        let f: Function = Reflect::get(obj, &name.into())?.dyn_into()?;
        f.apply(obj, args)
    }

    /// A view of `len` bytes at `addr` of the shared memory (its buffer fetched now: a grown
    /// memory has a new one).
    fn view(t: &Threads, addr: u64, len: usize) -> Uint8Array {
        Uint8Array::new_with_byte_offset_and_length(&t.memory.0.buffer(), addr as u32, len as u32)
    }

    fn shared(buf: &Buffer) -> Result<u64> {
        match &buf.mem {
            Mem::Wasm(m) => Ok(m.addr),
            _ => bail!(
                Device,
                "a {} buffer is not in the shared memory",
                buf.device
            ),
        }
    }

    impl Backend for Wasm {
        fn device(&self) -> Device {
            self.device
        }
        fn target(&self) -> Target {
            target()
        }
        fn max_buffers(&self) -> usize {
            MAX_BUFFERS
        }
        fn max_buffer_bytes(&self) -> usize {
            // The memory is 32-bit: its whole address space, less what the engine uses itself.
            i32::MAX as usize
        }
        fn alloc(&self, bytes: usize) -> Result<Buffer> {
            let mut t = threads();
            let Some(t) = t.as_mut() else {
                HEAP_USED.store(true, std::sync::atomic::Ordering::Relaxed);
                return Ok(Buffer::new(
                    self.device,
                    bytes,
                    Mem::Host(HostMem::new(bytes)?),
                ));
            };
            let len = bytes as u64;
            let at = t.carve.take(len)?;
            let end = at + len.div_ceil(ALIGN) * ALIGN;
            let have = t
                .memory
                .0
                .buffer()
                .unchecked_into::<js_sys::SharedArrayBuffer>()
                .byte_length() as u64;
            if end > have {
                let pages = (end - have).div_ceil(PAGE) as u32;
                // WebAssembly.Memory.grow throws where the engine cannot give the pages.
                let grown = Reflect::get(&t.memory.0, &"grow".into())
                    .and_then(|g| g.dyn_into::<Function>())
                    .and_then(|g| g.call1(&t.memory.0, &pages.into()));
                if let Err(e) = grown {
                    t.carve.give(at, len);
                    return Err(js_err(&format!("growing the memory to {end} bytes"), e));
                }
            }
            view(t, at, (end - at) as usize).fill(0, 0, (end - at) as u32);
            Ok(Buffer::new(
                self.device,
                bytes,
                Mem::Wasm(WasmMem { addr: at, len }),
            ))
        }
        fn copy_in(&self, buf: &Buffer, data: &[u8]) -> Result<()> {
            let t = threads();
            match (&buf.mem, t.as_ref()) {
                (Mem::Wasm(m), Some(t)) => {
                    super::super::check_copy_in(buf, data)?;
                    view(t, m.addr, data.len()).copy_from(data);
                    Ok(())
                }
                _ => super::super::host_copy_in(buf, data),
            }
        }
        fn copy_out<'a>(&'a self, buf: &'a Buffer) -> BoxFuture<'a, Result<Vec<u8>>> {
            Box::pin(async move {
                let t = threads();
                match (&buf.mem, t.as_ref()) {
                    (Mem::Wasm(m), Some(t)) => Ok(view(t, m.addr, buf.size).to_vec()),
                    _ => super::super::host_copy_out(buf),
                }
            })
        }
        fn compile(&self, k: &LinearKernel) -> Result<Program> {
            let t = threads();
            let bytes = crate::codegen::wasm::module(k, features(t.is_some()))?;
            let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            let kernel = match modules.get(&bytes) {
                Some(f) => f.clone(),
                None => {
                    let made = match t.as_ref() {
                        // The pool instantiates the module on every thread: its number.
                        Some(t) => WebAssembly::Module::new(&Uint8Array::from(&bytes[..]).into())
                            .and_then(|m| call(&t.pool.0, "addModule", &Array::of1(&m))),
                        None => instantiate(&bytes),
                    };
                    let f = Js(made.map_err(|e| js_err(&format!("compiling {}", k.name), e))?);
                    modules.insert(bytes.clone(), f.clone());
                    f
                }
            };
            Ok(program(
                k,
                &bytes,
                ProgramImpl::Wasm(WasmProgram { kernel }),
            ))
        }
        fn launch(&self, p: &Program, bufs: &[&Buffer]) -> Result<()> {
            let ProgramImpl::Wasm(wp) = &p.imp else {
                bail!(Backend, "wasm: {} was not compiled for WebAssembly", p.name);
            };
            let t = threads();
            let trapped = |e| js_err(&format!("{} trapped", p.name), e);
            if let Some(t) = t.as_ref() {
                let args = Int32Array::new_with_length(bufs.len() as u32);
                for (i, b) in bufs.iter().enumerate() {
                    args.set_index(i as u32, shared(b)? as u32 as i32);
                }
                // Small launches stay on this thread, as in the C backend.
                let n = p.global_size;
                let chunks = if p.ops < super::super::PARALLEL_MIN_OPS || t.count <= 1 {
                    1
                } else {
                    n.min(t.count as usize * 4)
                };
                let a = Array::of4(
                    &wp.kernel.0,
                    &args,
                    &(n as u32).into(),
                    &(chunks as u32).into(),
                );
                return call(&t.pool.0, "run", &a).map(|_| ()).map_err(trapped);
            }
            let args = Array::new();
            for b in bufs {
                args.push(&JsValue::from(b.host()?.ptr() as usize as u32));
            }
            args.push(&JsValue::from(0));
            args.push(&JsValue::from(p.global_size as u32));
            wp.kernel
                .0
                .unchecked_ref::<Function>()
                .apply(&JsValue::NULL, &args)
                .map(|_| ())
                .map_err(trapped)
        }
        fn synchronize(&self) -> Result<()> {
            Ok(())
        }
    }
}
