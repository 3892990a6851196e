//! Build script: a fingerprint of the sources that decide kernel plans (src/codegen,
//! src/kernel), so plans a build cached on disk are never taken for another build's
//! (`search::heuristic_plan`).

fn main() {
    let mut files = vec![];
    for dir in ["src/codegen", "src/kernel"] {
        println!("cargo:rerun-if-changed={dir}");
        if let Ok(entries) = std::fs::read_dir(dir) {
            files.extend(entries.flatten().map(|e| e.path()));
        }
    }
    files.sort();
    // FNV-1a over each file's name and bytes.
    let mut h: u64 = 0xcbf29ce484222325;
    for f in &files {
        let name = f.to_string_lossy().into_owned().into_bytes();
        for b in name.iter().chain(&std::fs::read(f).unwrap_or_default()) {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    println!("cargo:rustc-env=WGRAD_PLANS_FINGERPRINT={h:016x}");
}
