//! NVRTC, NVIDIA's runtime CUDA compiler: CUDA C++ source to a CUBIN for one GPU architecture.
//! It needs no GPU and no driver, so kernels are compiled to machine code on any Linux machine
//! that has the library (tests/cuda.rs compiles every generated kernel this way).
//!
//! The library is loaded with dlopen on first use, from `WGRAD_NVRTC` (the library file or the
//! folder holding it) if set, else by name (`libnvrtc.so`, then the CUDA 13, 12 and 11 sonames)
//! from the loader's search path and the usual toolkit folders (`candidates`). Only the NVRTC
//! API that every version since CUDA 11.1 shares is used, so any of them will do. CUBINs are
//! cached on disk by a hash of the NVRTC version, the options and the source: a cached CUBIN is
//! one this NVRTC produced from exactly this source before.

use crate::error::{bail, Error, ErrorKind, Result};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

type Prog = *mut c_void;
type Res = c_int;

struct Api {
    // Keeps the library loaded for as long as the function pointers are used (the process).
    _lib: libloading::Library,
    path: String,
    version: (c_int, c_int),
    error_string: unsafe extern "C" fn(Res) -> *const c_char,
    create: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Res,
    destroy: unsafe extern "C" fn(*mut Prog) -> Res,
    compile: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Res,
    log_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    log: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> Res,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> Res,
}

/// Where to look, in order: `WGRAD_NVRTC` (a file, or a folder holding one of the names), then
/// the names on the loader's search path (LD_LIBRARY_PATH, the ld.so cache), then the toolkit's
/// usual folders.
fn candidates() -> Vec<PathBuf> {
    const NAMES: &[&str] = &[
        "libnvrtc.so",
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11.2",
    ];
    let mut out = vec![];
    if let Some(p) = std::env::var_os("WGRAD_NVRTC").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            out.extend(NAMES.iter().map(|n| p.join(n)));
        } else {
            out.push(p);
        }
    }
    out.extend(NAMES.iter().map(PathBuf::from));
    let mut dirs: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|d| Path::new(&d).join("lib64"))
        .collect();
    dirs.push("/usr/local/cuda/lib64".into());
    for d in dirs {
        out.extend(NAMES.iter().map(|n| d.join(n)));
    }
    out
}

fn load() -> std::result::Result<Api, String> {
    let mut first_err = None;
    for c in candidates() {
        // SAFETY: loading NVRTC runs its initialisers, which only set up the library itself.
        match unsafe { libloading::Library::new(&c) } {
            Ok(lib) => return api(lib, c.display().to_string()),
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    let set = std::env::var("WGRAD_NVRTC").unwrap_or_default();
    Err(format!(
        "NVRTC not found (WGRAD_NVRTC={set:?}, libnvrtc.so on the loader's path, CUDA_PATH, /usr/local/cuda/lib64; first error: {}); \
         set WGRAD_NVRTC to libnvrtc.so's path (bash scripts/setup_nvrtc.sh installs one into .nvrtc/)",
        first_err.unwrap_or_default()
    ))
}

fn api(lib: libloading::Library, path: String) -> std::result::Result<Api, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol is NVRTC's C function of that name; the field's type is its
            // signature from nvrtc.h.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{path}: no {}: {e}", $name))?
        };
    }
    let version_fn: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Res = sym!("nvrtcVersion");
    let mut version = (0, 0);
    // SAFETY: nvrtcVersion writes two ints.
    unsafe { version_fn(&mut version.0, &mut version.1) };
    Ok(Api {
        version,
        error_string: sym!("nvrtcGetErrorString"),
        create: sym!("nvrtcCreateProgram"),
        destroy: sym!("nvrtcDestroyProgram"),
        compile: sym!("nvrtcCompileProgram"),
        log_size: sym!("nvrtcGetProgramLogSize"),
        log: sym!("nvrtcGetProgramLog"),
        cubin_size: sym!("nvrtcGetCUBINSize"),
        cubin: sym!("nvrtcGetCUBIN"),
        path,
        _lib: lib,
    })
}

fn lib() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    match API.get_or_init(load) {
        Ok(a) => Ok(a),
        Err(e) => bail!(Device, "cuda: {e}"),
    }
}

/// Whether NVRTC can be loaded, with the reason when it cannot.
pub fn available() -> std::result::Result<(), String> {
    lib().map(|_| ()).map_err(|e| e.msg)
}

/// The NVRTC in use: its version and where it was loaded from.
pub fn version() -> Result<((i32, i32), String)> {
    let a = lib()?;
    Ok((a.version, a.path.clone()))
}

/// The options every kernel is compiled with, besides the architecture: IEEE division and
/// square root and no flush of subnormals are NVRTC's defaults, so nothing is needed.
fn options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}")]
}

/// Compile `src` (a kernel file named `name.cu` in messages) to a CUBIN for `arch` (`sm_90`),
/// or fetch it from the disk cache. A compile error carries NVRTC's log, each line it points at
/// quoted from the source.
pub fn compile(name: &str, src: &str, arch: &str) -> Result<Vec<u8>> {
    let a = lib()?;
    let opts = options(arch);
    let key = super::super::stable_hash(format!(
        "nvrtc {}.{}\n{}\n{src}",
        a.version.0,
        a.version.1,
        opts.join(" ")
    ));
    let dir = super::super::cache_dir("cuda");
    let path = dir.join(format!("{key}.cubin"));
    if let Ok(bin) = std::fs::read(&path) {
        if !bin.is_empty() {
            return Ok(bin);
        }
    }
    let bin = compile_uncached(a, name, src, &opts)?;
    // A cache that cannot be written only costs a compile next time.
    let _ = super::super::write_atomic(&dir, &path, &bin);
    Ok(bin)
}

fn check(a: &Api, r: Res, what: &str) -> Result<()> {
    if r == 0 {
        return Ok(());
    }
    // SAFETY: nvrtcGetErrorString returns a static string for any result code.
    let msg = unsafe { CStr::from_ptr((a.error_string)(r)) }.to_string_lossy();
    bail!(Backend, "cuda: nvrtc {what}: {msg}")
}

fn compile_uncached(a: &Api, name: &str, src: &str, opts: &[String]) -> Result<Vec<u8>> {
    let csrc = CString::new(src).map_err(|_| Error::new(ErrorKind::Backend, "NUL in source"))?;
    let file = format!("{name}.cu");
    let cname = CString::new(file.as_str())
        .map_err(|_| Error::new(ErrorKind::Backend, "NUL in kernel name"))?;
    let copts: Vec<CString> = opts
        .iter()
        .filter_map(|o| CString::new(o.as_str()).ok())
        .collect();
    let ptrs: Vec<*const c_char> = copts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: Prog = std::ptr::null_mut();
    // SAFETY: the strings outlive the call; no headers are passed.
    let r = unsafe {
        (a.create)(
            &mut prog,
            csrc.as_ptr(),
            cname.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    check(a, r, "creating a program")?;
    struct Guard<'a>(&'a Api, Prog);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            // SAFETY: the program was created above and is destroyed once.
            unsafe { (self.0.destroy)(&mut self.1) };
        }
    }
    let g = Guard(a, prog);
    // SAFETY: the program is live; the option pointers outlive the call.
    let r = unsafe { (a.compile)(g.1, ptrs.len() as c_int, ptrs.as_ptr()) };
    if r != 0 {
        let log = program_log(a, g.1);
        bail!(
            Backend,
            "cuda: NVRTC could not compile kernel {name} ({}):\n{}",
            opts.join(" "),
            annotate(&log, &file, src)
        );
    }
    let mut n = 0usize;
    // SAFETY: the program compiled; nvrtcGetCUBINSize writes one size_t.
    check(a, unsafe { (a.cubin_size)(g.1, &mut n) }, "CUBIN size")?;
    let mut bin = vec![0u8; n];
    // SAFETY: `bin` has the size NVRTC reported.
    check(
        a,
        unsafe { (a.cubin)(g.1, bin.as_mut_ptr().cast()) },
        "CUBIN",
    )?;
    Ok(bin)
}

fn program_log(a: &Api, prog: Prog) -> String {
    let mut n = 0usize;
    // SAFETY: the program is live; nvrtcGetProgramLogSize writes one size_t.
    if unsafe { (a.log_size)(prog, &mut n) } != 0 || n == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; n];
    // SAFETY: `buf` has the size NVRTC reported, NUL included.
    unsafe { (a.log)(prog, buf.as_mut_ptr().cast()) };
    String::from_utf8_lossy(&buf)
        .trim_end_matches('\0')
        .trim_end()
        .to_string()
}

/// NVRTC's log with the source line each message points at (`NAME.cu(12): error: ...`) quoted
/// under it.
pub fn annotate(log: &str, file: &str, src: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::new();
    for l in log.lines() {
        out.push_str(l);
        out.push('\n');
        let at = l
            .strip_prefix(file)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.split_once(')'))
            .and_then(|(n, _)| n.parse::<usize>().ok());
        if let Some(src_line) = at.and_then(|n| lines.get(n.wrapping_sub(1))) {
            out.push_str(&format!("  {} | {src_line}\n", at.unwrap_or(0)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_quote_the_source_line() {
        let src = "int a;\nint b = c;\n";
        let log = "k.cu(2): error: identifier \"c\" is undefined\n1 error detected";
        let out = super::annotate(log, "k.cu", src);
        assert!(out.contains("  2 | int b = c;"), "{out}");
        assert!(out.contains("1 error detected"), "{out}");
    }
}
