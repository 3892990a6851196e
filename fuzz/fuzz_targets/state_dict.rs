//! Fuzz target: `nn::state::load_state_dict` into a small model (a Linear layer and a
//! BatchNorm: f32 and i32 tensors, a 0-d one), strict or not, from a state parsed out of the
//! input as a safetensors file or built from it directly (names drawn from the model's, unknown
//! and repeated ones; random shapes and dtypes). Never a panic; an `Err` leaves the model
//! unchanged; an `Ok` leaves every named tensor holding the given value (NaN payloads aside), the others theirs, and
//! a strict load succeeds only when the names match exactly.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wgrad::nn::state::{get_state_dict, load_state_dict, safe_load_bytes};
use wgrad::nn::{BatchNorm, Linear};
use wgrad::{DType, Tensor};

struct Model {
    l1: Linear,
    bn: BatchNorm,
}
wgrad::state!(Model { l1, bn });

const NAMES: [&str; 9] = [
    "l1.weight",
    "l1.bias",
    "bn.weight",
    "bn.bias",
    "bn.running_mean",
    "bn.running_var",
    "bn.num_batches_tracked",
    "l1",
    "unknown.weight",
];
const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::I32,
    DType::U32,
    DType::U8,
    DType::Bool,
];

thread_local! {
    static MODEL: Model = Model {
        l1: Linear::new(3, 2).expect("linear"),
        bn: BatchNorm::new(2).expect("batchnorm"),
    };
}

fn bytes(t: &Tensor) -> Vec<u8> {
    wgrad::runtime::block_on(t.bytes_async()).expect("read back")
}

/// The values of a tensor, with every float NaN as one canonical NaN: a copy kernel may quiet a
/// signalling NaN (the interpreter computes in f64), which changes its bits but not its value.
fn values(t: &Tensor) -> Vec<u8> {
    let b = bytes(t);
    match t.dtype() {
        DType::F32 => b
            .chunks_exact(4)
            .flat_map(|c| {
                let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if v.is_nan() { f32::NAN } else { v }.to_le_bytes()
            })
            .collect(),
        DType::F16 => b
            .chunks_exact(2)
            .flat_map(|c| {
                let nan = c[1] & 0x7c == 0x7c && (c[1] & 0x03 != 0 || c[0] != 0);
                if nan {
                    [0x00, 0x7e]
                } else {
                    [c[0], c[1]]
                }
            })
            .collect(),
        _ => b,
    }
}

/// A state built from the bytes: per entry a name, a rank, dimensions, a dtype, then data.
fn structured(mut data: &[u8]) -> Vec<(String, Tensor)> {
    let mut next = move || {
        let (b, rest) = data.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        data = rest;
        b
    };
    let mut out = vec![];
    for _ in 0..(next() % 6) {
        let name = NAMES[next() as usize % NAMES.len()];
        let rank = next() % 3;
        let shape: Vec<usize> = (0..rank).map(|_| (next() % 4) as usize).collect();
        let dtype = DTYPES[next() as usize % DTYPES.len()];
        let n: usize = shape.iter().product::<usize>() * dtype.size();
        let raw: Vec<u8> = (0..n).map(|_| next()).collect();
        if let Ok(t) = Tensor::from_raw(&raw, dtype, &shape) {
            out.push((name.to_string(), t));
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let strict = flags & 1 != 0;
    let state = if flags & 2 != 0 {
        structured(rest)
    } else {
        match safe_load_bytes(rest) {
            Ok(s) => s,
            Err(_) => return,
        }
    };
    MODEL.with(|model| {
        let own = get_state_dict(model);
        let before: Vec<Vec<u8>> = own.iter().map(|(_, t)| values(t)).collect();
        let result = load_state_dict(model, &state, strict);
        for ((name, t), old) in own.iter().zip(&before) {
            assert_eq!(t.shape(), model_shape(name), "'{name}' changed shape");
            let now = values(t);
            match (&result, state.iter().find(|(n, _)| n == name)) {
                (Ok(()), Some((_, v))) => assert_eq!(now, values(v), "'{name}' not loaded"),
                _ => assert_eq!(&now, old, "'{name}' changed ({result:?})"),
            }
        }
        if result.is_ok() && strict {
            let mut given: Vec<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
            let mut names: Vec<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
            given.sort();
            names.sort();
            assert_eq!(given, names, "a strict load accepted other names");
        }
    });
});

fn model_shape(name: &str) -> Vec<usize> {
    match name {
        "l1.weight" => vec![2, 3],
        "bn.num_batches_tracked" => vec![],
        _ => vec![2],
    }
}
