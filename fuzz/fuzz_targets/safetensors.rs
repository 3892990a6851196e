//! Fuzz target: safetensors parsing (`nn::state::safe_load_bytes`, and `safe_load` on the same
//! bytes written to a file). Never a panic; what loads saves and loads again to the same names,
//! shapes, dtypes and bytes, and the file loader agrees with the byte loader.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wgrad::nn::state::{safe_load, safe_load_bytes, safe_save_bytes};
use wgrad::Tensor;

type Entry = (String, Vec<usize>, wgrad::DType, Vec<u8>);

fn contents(state: &[(String, Tensor)]) -> Vec<Entry> {
    state
        .iter()
        .map(|(n, t)| {
            let bytes = wgrad::runtime::block_on(t.bytes_async()).expect("read back");
            (n.clone(), t.shape(), t.dtype(), bytes)
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let loaded = safe_load_bytes(data);
    // One file per process: libFuzzer runs inputs one after another in a process.
    let path = std::env::temp_dir().join(format!("wgrad-fuzz-{}.safetensors", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let from_file = safe_load(&path);
        assert_eq!(
            loaded.as_ref().map(|s| contents(s)).map_err(|e| e.kind),
            from_file.as_ref().map(|s| contents(s)).map_err(|e| e.kind),
            "safe_load and safe_load_bytes disagree"
        );
    }
    let Ok(state) = loaded else {
        return;
    };
    let first = contents(&state);
    let saved = safe_save_bytes(&state).expect("a loaded state saves");
    let again = safe_load_bytes(&saved).expect("a saved state loads");
    assert_eq!(contents(&again), first, "save and load changed the state");
});
