//! Helpers shared by the integration tests: which backends to run on, skipping one whose
//! hardware or driver is missing (reported with the reason; `WGRAD_REQUIRE=wgpu,cpu,nvrtc` turns
//! such a skip into a failure, as CI does), naga validation of WGSL and NVRTC compilation of
//! CUDA (no GPU needed).

#![allow(dead_code)]

use wgrad::Device;

/// Whether `dev` can run here. Prints why not; panics instead when `WGRAD_REQUIRE` names it.
pub fn usable(dev: Device) -> bool {
    let Err(why) = dev.available() else {
        return true;
    };
    let names = match dev.name() {
        "WEBGPU" => vec!["webgpu", "wgpu"],
        other => vec![other],
    };
    skip(&names, &format!("on {dev}"), &why);
    false
}

/// Report a skipped check (`SKIPPED what: why`), or panic when `WGRAD_REQUIRE` lists one of
/// `names` (case-insensitive).
pub fn skip(names: &[&str], what: &str, why: &str) {
    let required = std::env::var("WGRAD_REQUIRE").unwrap_or_default();
    let wanted = required
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .any(|r| names.iter().any(|n| n.eq_ignore_ascii_case(&r)));
    if wanted {
        panic!("{what}: required by WGRAD_REQUIRE={required} but unavailable: {why}");
    }
    eprintln!("SKIPPED {what}: {why}");
}

/// Every backend in this build that can run here (skips reported as above).
pub fn devices() -> Vec<Device> {
    Device::all().into_iter().filter(|&d| usable(d)).collect()
}

/// Parse and validate a WGSL module with naga, as WebGPU implementations do (no capabilities
/// beyond the baseline: the browser may lack `shader-f16`).
/// Kernels that sum through subgroups validate with that capability: only native wgpu with the
/// `SUBGROUP` feature gets them (the browser never does).
pub fn validate_wgsl(src: &str) -> Result<(), String> {
    let caps = if src.contains("subgroupAdd(") {
        naga::valid::Capabilities::SUBGROUP
    } else {
        naga::valid::Capabilities::empty()
    };
    validate_wgsl_with(src, caps)
}

/// `validate_wgsl` for a device with `caps` (`SHADER_FLOAT16` where it has `shader-f16`).
pub fn validate_wgsl_with(src: &str, caps: naga::valid::Capabilities) -> Result<(), String> {
    use naga::valid::{ValidationFlags, Validator};
    // naga accepts a bitcast of a literal to inf/NaN; browsers (Tint) reject it as a constant
    // expression that f32 cannot represent.
    if let Some(i) = src.find("bitcast<f32>(0x") {
        let line = src[..i].lines().count();
        return Err(format!(
            "line {line}: bitcast of a literal to f32 (Tint rejects inf/NaN constants)"
        ));
    }
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string(src))?;
    Ok(())
}

/// Compile every kernel's CUDA rendering to a CUBIN for each of `archs` with NVRTC (no GPU or
/// driver needed), distinct sources once, on all cores. Returns how many distinct sources were
/// compiled, or `None` (reported as a skip, a failure under `WGRAD_REQUIRE=nvrtc`) where NVRTC
/// is missing. Panics listing the first failures.
#[cfg(feature = "cuda")]
pub fn compile_cuda(kernels: &[wgrad::codegen::LinearKernel], archs: &[&str]) -> Option<usize> {
    use wgrad::codegen::cuda::render_cuda;
    use wgrad::runtime::cuda::nvrtc;
    if let Err(why) = nvrtc::available() {
        skip(&["nvrtc"], "compiling CUDA kernels with NVRTC", &why);
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let jobs: Vec<(String, String)> = kernels
        .iter()
        .map(|k| (k.name.clone(), render_cuda(k)))
        .filter(|(_, s)| seen.insert(s.clone()))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, src)) = jobs.get(i) else {
                    break;
                };
                for arch in archs {
                    match nvrtc::compile(name, src, arch) {
                        Ok(bin) if bin.len() > 16 && bin.starts_with(b"\x7fELF") => {}
                        Ok(bin) => failures.lock().unwrap().push(format!(
                            "{name} ({arch}): not an ELF CUBIN ({} bytes)",
                            bin.len()
                        )),
                        Err(e) => failures.lock().unwrap().push(format!("{e}\n{src}")),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} CUDA compilations failed; the first:\n{}",
        failures.len(),
        jobs.len() * archs.len(),
        failures[..failures.len().min(3)].join("\n")
    );
    Some(jobs.len())
}
