//! File formats of the state module beyond safetensors round trips (tests/nn.rs has those):
//!
//! * `torch_load` against PyTorch: the checkpoints of tests/fixtures/torch/ (written once by
//!   hand with `python3 scripts/gen_torch_checkpoints.py`, which also writes every tensor's
//!   dtype, shape and values to expected.json) load with the same names, shapes and values, in
//!   every dtype, whatever the layout (views, strides, offsets, shared storages), nested,
//!   pickled with protocol 4, deflated, big-endian; a torch model's state dict loads into the
//!   same wgrad model, which then computes torch's output.
//! * `torch_load` errors: truncated and corrupt archives, bad pickles, storages too short,
//!   missing storage files, int64 values that do not fit, the legacy format: each an `Err`
//!   naming the problem.
//! * safetensors `__metadata__`: written by `safe_save_with_metadata`, read by
//!   `safe_load_metadata`.
//! * int64 tensors (labels) from either format load as i32 when every value fits.

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use wgrad::nn::state::{
    load_state_dict, safe_load_bytes, safe_load_metadata, safe_load_metadata_bytes,
    safe_save_bytes, safe_save_bytes_with_metadata, safe_save_with_metadata, torch_load,
    torch_load_bytes,
};
use wgrad::nn::{BatchNorm, Conv2d, Linear};
use wgrad::{Context, CrossEntropyOpts, DType, Device, ErrorKind, Tensor};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/torch")
        .join(name)
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn interp<T>(f: impl FnOnce() -> T) -> T {
    Context::new().dev(Device::Interp).run(f)
}

/// The dtype a torch dtype loads as.
fn loaded_dtype(torch: &str) -> DType {
    match torch {
        "float32" | "float64" => DType::F32,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "int64" | "int32" => DType::I32,
        "uint32" => DType::U32,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        d => panic!("no fixture dtype {d}"),
    }
}

/// A tensor's values as f64, whatever its dtype.
fn values(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::F16 | DType::BF16 => t
            .cast(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I32 => t
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::U32 => t
            .to_vec::<u32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::U8 => t
            .to_vec::<u8>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::Bool => t
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|b| b as u8 as f64)
            .collect(),
    }
}

/// Every tensor of `file` has the name, dtype, shape and values torch gave it, exactly (float64
/// rounded to f32 as the loader does).
fn check_file(file: &str, loaded: &[(String, Tensor)], want: &Value) {
    let want = want[file]["tensors"].as_array().unwrap();
    let names: Vec<&str> = loaded.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, want_names, "{file}: names and their order");
    for ((name, t), w) in loaded.iter().zip(want) {
        let dt = w["dtype"].as_str().unwrap();
        assert_eq!(t.dtype(), loaded_dtype(dt), "{file}: '{name}' ({dt})");
        let shape: Vec<usize> = w["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(t.shape(), shape, "{file}: '{name}' shape");
        let want_values: Vec<f64> = w["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| match v {
                Value::Bool(b) => *b as u8 as f64,
                // Floats are f32 values (float64 rounds to them on load); JSON's decimal text
                // may parse an ulp off in f64, never in f32.
                v if dt.starts_with("float") || dt == "bfloat16" => {
                    v.as_f64().unwrap() as f32 as f64
                }
                v => v.as_f64().unwrap(),
            })
            .collect();
        assert_eq!(values(t), want_values, "{file}: '{name}' values");
    }
}

const GOOD: [&str; 8] = [
    "dtypes.pt",
    "views.pt",
    "nested.pt",
    "module.pt",
    "params.pt",
    "proto4.pt",
    "deflated.pt",
    "bigendian.pt",
];

#[test]
fn torch_load_matches_torch() {
    let want = expected();
    interp(|| {
        for file in GOOD {
            let loaded = torch_load(fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            check_file(file, &loaded, &want);
            let bytes = std::fs::read(fixture(file)).unwrap();
            let from_bytes = torch_load_bytes(&bytes).unwrap();
            check_file(file, &from_bytes, &want);
            assert!(loaded.iter().all(|(_, t)| t.device() == Device::Interp));
        }
    });
}

#[test]
fn torch_load_views_and_names() {
    interp(|| {
        let st = torch_load(fixture("views.pt")).unwrap();
        let get = |n: &str| &st.iter().find(|(name, _)| name == n).unwrap().1;
        // One tensor under two names stays one tensor; views of one storage are their own.
        assert!(get("tied_a").same(get("tied_b")));
        assert!(!get("base").same(get("t")));
        assert_eq!(
            get("t").to_vec::<f32>().unwrap()[..4],
            [0.0, 6.0, 12.0, 18.0]
        );
        assert_eq!(
            get("tail").to_vec::<i32>().unwrap(),
            vec![1000, 2000, 3000, 4000, 5000, 6000]
        );

        // Nested dicts flatten to dotted names (integer keys too); non-tensors are left out.
        let st = torch_load(fixture("nested.pt")).unwrap();
        let names: Vec<&str> = st.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "model.weight",
                "model.bias",
                "hist.0",
                "hist.1",
                "opt.state.0.exp_avg",
                "opt.state.0.step"
            ]
        );
    });
}

/// `Sequential(Conv2d, BatchNorm2d, ReLU, Flatten, Linear)` as torch names it.
struct Seq(Conv2d, BatchNorm, (), (), Linear);
wgrad::state!(Seq { 0, 1, 4 });

#[test]
fn torch_state_dict_runs_in_wgrad() {
    let want = expected();
    let case = &want["module.pt"];
    let floats = |v: &Value| -> Vec<f32> {
        v["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    for dev in [Device::Interp, Device::Cpu] {
        Context::new().dev(dev).run(|| {
            let m = Seq(
                Conv2d::new(1, 2, (3, 3)).unwrap(),
                BatchNorm::new(2).unwrap(),
                (),
                (),
                Linear::new(8, 3).unwrap(),
            );
            let st = torch_load(fixture("module.pt")).unwrap();
            load_state_dict(&m, &st, true).unwrap();
            assert_eq!(m.1.num_batches_tracked.item::<i32>().unwrap(), 1);
            let x = Tensor::from_vec(floats(&case["x"]), &[2, 1, 4, 4]).unwrap();
            let h =
                m.1.forward(&m.0.forward(&x).unwrap())
                    .unwrap()
                    .relu()
                    .unwrap();
            let y = m.4.forward(&h.reshape(&[2, 8]).unwrap()).unwrap();
            let want_y = floats(&case["y"]);
            for (g, w) in y.to_vec::<f32>().unwrap().iter().zip(&want_y) {
                assert!(
                    (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
                    "{dev}: {g} vs torch {w}"
                );
            }

            // The named parameters (nn.Parameter objects) load into the same model.
            let params = torch_load(fixture("params.pt")).unwrap();
            assert_eq!(params.len(), 6);
            load_state_dict(&m, &params, false).unwrap();
        });
    }
}

fn err(r: wgrad::Result<Vec<(String, Tensor)>>) -> wgrad::Error {
    match r {
        Ok(st) => panic!("loaded {} tensors", st.len()),
        Err(e) => e,
    }
}

fn assert_msg(e: &wgrad::Error, parts: &[&str]) {
    assert!(e.msg.starts_with("torch_load: "), "{}", e.msg);
    for p in parts {
        assert!(e.msg.contains(p), "'{}' does not say {p:?}", e.msg);
    }
}

#[test]
fn torch_load_bad_files() {
    interp(|| {
        let load = |f: &str| err(torch_load(fixture(f)));
        assert_msg(
            &load("bad_opcode.pt"),
            &["unsupported pickle opcode 0xff", "byte 2"],
        );
        assert_msg(
            &load("short_storage.pt"),
            &["'w'", "shape [5]", "past the 4 elements"],
        );
        assert_msg(&load("missing_data.pt"), &["no file dtypes/data/1"]);
        let e = load("i64_overflow.pt");
        assert_msg(
            &e,
            &["'big'", "int64 value 1099511627776 does not fit in i32"],
        );
        assert_eq!(e.kind, ErrorKind::DType);
        assert_msg(&load("legacy.pt"), &["not a zip archive", "PyTorch 1.6"]);
        let e = err(torch_load(fixture("no-such-file.pt")));
        assert_msg(&e, &["cannot read", "no-such-file.pt"]);
        assert_eq!(e.kind, ErrorKind::Io);

        // Every truncation fails, naming the archive.
        let good = std::fs::read(fixture("dtypes.pt")).unwrap();
        for cut in [
            0,
            4,
            30,
            100,
            good.len() / 2,
            good.len() - 30,
            good.len() - 1,
        ] {
            assert_msg(&err(torch_load_bytes(&good[..cut])), &["zip archive"]);
        }
        // A changed byte fails the CRC.
        let at = good.windows(12).position(|w| w == b"FloatStorage").unwrap();
        let mut bad = good.clone();
        bad[at] ^= 1;
        assert_msg(&err(torch_load_bytes(&bad)), &["dtypes/data.pkl", "CRC-32"]);
    });
}

/// A zip archive of stored entries, as torch.save lays it out.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in entries {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let head = |sig: u32, central: bool| {
            let mut h = sig.to_le_bytes().to_vec();
            if central {
                h.extend_from_slice(&20u16.to_le_bytes());
            }
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            h.extend_from_slice(&crc.sum().to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&[0, 0]);
            h
        };
        let mut c = head(0x0201_4b50, true);
        c.extend_from_slice(&[0; 10]); // comment length, disk, attributes
        c.extend_from_slice(&(out.len() as u32).to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&c);
        out.extend_from_slice(&head(0x0403_4b50, false));
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
    }
    let at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let n = (entries.len() as u16).to_le_bytes();
    out.extend_from_slice(&[n[0], n[1], n[0], n[1]]);
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

#[test]
fn torch_load_bad_pickles() {
    interp(|| {
        let with_pickle = |pkl: &[u8]| torch_load_bytes(&zip_of(&[("a/data.pkl", pkl)]));
        // The test's zip writer is right: an empty dict loads to nothing.
        assert!(with_pickle(b"\x80\x02}q\x00.").unwrap().is_empty());
        let cases: [(&[u8], &str); 8] = [
            (b"\x80\x02}q\x00", "no STOP opcode"),
            (
                b"\x80\x02X\x10\x00\x00\x00ab.",
                "needs 16 bytes, 3 are left",
            ),
            (b"\x80\x02h\x05.", "memo key 5 was never stored"),
            (b"\x80\x02(s.", "stack is empty"),
            (b"\x80\x09}.", "pickle protocol 9"),
            // A list appended to itself: the flattening stops.
            (b"\x80\x02]q\x00h\x00a.", "nested deeper than 64 levels"),
            (b"\x80\x02N\x85Q.", "persistent id"),
            (
                b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n)R.",
                "takes (storage, storage_offset, size, stride",
            ),
        ];
        for (pkl, says) in cases {
            assert_msg(&err(with_pickle(pkl)), &[says]);
        }
        assert_msg(
            &err(torch_load_bytes(&zip_of(&[("a/x", b"")]))),
            &["no a/data.pkl"],
        );
        assert_msg(
            &err(torch_load_bytes(&zip_of(&[("data.pkl", b".")]))),
            &["not in a folder"],
        );
    });
}

#[test]
fn safetensors_metadata() {
    interp(|| {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let st = vec![("w".to_string(), w)];
        let meta = BTreeMap::from([
            ("format".to_string(), "pt".to_string()),
            ("note".to_string(), "quotes \" and ünïcode".to_string()),
        ]);
        let bytes = safe_save_bytes_with_metadata(&st, &meta).unwrap();
        assert_eq!(safe_load_metadata_bytes(&bytes).unwrap(), meta);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert!(bytes[8..8 + n].starts_with(b"{\"__metadata__\":{"));
        let back = safe_load_bytes(&bytes).unwrap();
        assert_eq!(back[0].1.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        // No metadata: an empty map, and the file is as safe_save_bytes writes it.
        let plain = safe_save_bytes(&st).unwrap();
        assert!(safe_load_metadata_bytes(&plain).unwrap().is_empty());
        assert_eq!(
            safe_save_bytes_with_metadata(&st, &BTreeMap::new()).unwrap(),
            plain
        );

        let path = std::env::temp_dir().join(format!(
            "wgrad-state-meta-{}.safetensors",
            std::process::id()
        ));
        safe_save_with_metadata(&st, &meta, &path).unwrap();
        assert_eq!(safe_load_metadata(&path).unwrap(), meta);
        std::fs::remove_file(&path).unwrap();

        // Values other than strings (outside the format) come back as their JSON text; a
        // metadata entry that is not an object is an error.
        let hand = |h: &str| {
            let mut h = h.to_string();
            while h.len() % 8 != 0 {
                h.push(' ');
            }
            let mut b = (h.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(h.as_bytes());
            b
        };
        let m = safe_load_metadata_bytes(&hand(r#"{"__metadata__":{"n":3,"l":[1,"a"]}}"#)).unwrap();
        assert_eq!(m["n"], "3");
        assert_eq!(m["l"], r#"[1,"a"]"#);
        let e = safe_load_metadata_bytes(&hand(r#"{"__metadata__":[1]}"#)).unwrap_err();
        assert!(
            e.msg.contains("__metadata__ is not a JSON object"),
            "{}",
            e.msg
        );
        assert!(safe_load_metadata_bytes(&[1, 2, 3]).is_err());
    });
}

#[test]
fn int64_labels_load_as_i32() {
    interp(|| {
        // From torch: int64 tensors (labels, counters) become i32 with their values.
        let st = torch_load(fixture("dtypes.pt")).unwrap();
        let i64s = &st.iter().find(|(n, _)| n == "i64").unwrap().1;
        assert_eq!(i64s.dtype(), DType::I32);
        assert_eq!(
            i64s.to_vec::<i32>().unwrap(),
            vec![0, -1, i32::MAX, i32::MIN, 7]
        );
        // From safetensors: the same, and they work as labels.
        let mut data = Vec::new();
        for v in [2i64, 0, 1] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let mut h = r#"{"y":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}}"#.to_string();
        while h.len() % 8 != 0 {
            h.push(' ');
        }
        let mut file = (h.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(h.as_bytes());
        file.extend_from_slice(&data);
        let y = safe_load_bytes(&file).unwrap().remove(0).1;
        assert_eq!(y.dtype(), DType::I32);
        let logits = Tensor::from_vec(
            vec![0.0f32, 0.0, 9.0, 9.0, 0.0, 0.0, 0.0, 9.0, 0.0],
            &[3, 3],
        )
        .unwrap();
        let loss = logits
            .sparse_categorical_crossentropy(&y, &CrossEntropyOpts::default())
            .unwrap();
        assert!(loss.item::<f32>().unwrap() < 1e-3);
        // A value past i32 is an error naming the tensor, from either format.
        let big = file.len() - 8;
        file[big..].copy_from_slice(&(1i64 << 33).to_le_bytes());
        let e = safe_load_bytes(&file).unwrap_err();
        assert!(
            e.msg
                .contains("'y': int64 value 8589934592 does not fit in i32"),
            "{}",
            e.msg
        );
        assert_eq!(e.kind, ErrorKind::DType);
    });
}
