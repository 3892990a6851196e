//! Helpers shared by the integration tests: which backends to run on, skipping one whose
//! hardware or driver is missing (reported with the reason; `WGRAD_REQUIRE=wgpu,cpu` turns
//! such a skip into a failure, as CI does), and naga validation of WGSL (no GPU needed).

#![allow(dead_code)]

use wgrad::Device;

/// Whether `dev` can run here. Prints why not; panics instead when `WGRAD_REQUIRE` names it.
pub fn usable(dev: Device) -> bool {
    let Err(why) = dev.available() else {
        return true;
    };
    let required = std::env::var("WGRAD_REQUIRE").unwrap_or_default();
    let names = |d: Device| match d.name() {
        "WEBGPU" => vec!["webgpu", "wgpu"],
        other => vec![other],
    };
    let wanted = required
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .any(|r| names(dev).iter().any(|n| n.eq_ignore_ascii_case(&r)));
    if wanted {
        panic!("{dev} is required (WGRAD_REQUIRE={required}) but unavailable: {why}");
    }
    eprintln!("SKIPPED on {dev}: {why}");
    false
}

/// Every backend in this build that can run here (skips reported as above).
pub fn devices() -> Vec<Device> {
    Device::all().into_iter().filter(|&d| usable(d)).collect()
}

/// Parse and validate a WGSL module with naga, as WebGPU implementations do (no capabilities
/// beyond the baseline: the browser may lack `shader-f16`).
pub fn validate_wgsl(src: &str) -> Result<(), String> {
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    // naga accepts a bitcast of a literal to inf/NaN; browsers (Tint) reject it as a constant
    // expression that f32 cannot represent.
    if let Some(i) = src.find("bitcast<f32>(0x") {
        let line = src[..i].lines().count();
        return Err(format!(
            "line {line}: bitcast of a literal to f32 (Tint rejects inf/NaN constants)"
        ));
    }
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    Validator::new(ValidationFlags::all(), Capabilities::empty())
        .validate(&module)
        .map_err(|e| e.emit_to_string(src))?;
    Ok(())
}
