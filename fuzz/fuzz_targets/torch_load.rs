//! Fuzz target: PyTorch checkpoint parsing (`nn::state::torch_load_bytes`, and `torch_load` on
//! the same bytes written to a file). The first byte picks the mode:
//!
//! * bit 0 clear: the rest is the file (the zip reader first: archives, zip64 records,
//!   deflate, CRCs);
//! * bit 0 set: the rest is a pickle (a little-endian u16 length, then its bytes) and storage
//!   files (each a u16 length and its bytes: `data/0`, `data/1`, ...), zipped here with correct
//!   CRCs so that mutations reach the pickle machine and the tensor rebuilding; bit 1 writes
//!   `byteorder` "big".
//!
//! Never a panic; the file loader agrees with the byte loader; every tensor loaded reads back
//! with as many bytes as its shape and dtype say.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wgrad::nn::state::{torch_load, torch_load_bytes};
use wgrad::Tensor;

type Entry = (String, Vec<usize>, wgrad::DType, Vec<u8>);

fn contents(state: &[(String, Tensor)]) -> Vec<Entry> {
    state
        .iter()
        .map(|(n, t)| {
            let bytes = wgrad::runtime::block_on(t.bytes_async()).expect("read back");
            let numel: usize = t.shape().iter().product();
            assert_eq!(bytes.len(), numel * t.dtype().size(), "'{n}': bytes for its shape");
            (n.clone(), t.shape(), t.dtype(), bytes)
        })
        .collect()
}

/// A zip archive of stored entries (as torch.save writes, without the alignment padding).
fn zip_of(entries: &[(String, &[u8])]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in entries {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let head = |sig: u32, central: bool| {
            let mut h = sig.to_le_bytes().to_vec();
            if central {
                h.extend_from_slice(&20u16.to_le_bytes()); // version made by
            }
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // version, flags, method, time
            h.extend_from_slice(&crc.sum().to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&[0, 0]); // extra field length
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

/// Split `data` into chunks, each a u16 length and its bytes (the last one cut short).
fn chunks(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = vec![];
    while data.len() >= 2 {
        let n = u16::from_le_bytes([data[0], data[1]]) as usize;
        let rest = &data[2..];
        let (c, r) = rest.split_at(n.min(rest.len()));
        out.push(c);
        data = r;
    }
    out
}

fn structured(flags: u8, data: &[u8]) -> Vec<u8> {
    let parts = chunks(data);
    let mut entries: Vec<(String, &[u8])> = vec![];
    entries.push(("a/data.pkl".into(), parts.first().copied().unwrap_or(&[])));
    for (i, s) in parts.iter().skip(1).enumerate() {
        entries.push((format!("a/data/{i}"), s));
    }
    entries.push((
        "a/byteorder".into(),
        if flags & 2 != 0 { b"big" } else { b"little" },
    ));
    zip_of(&entries)
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let file = if flags & 1 != 0 {
        structured(flags, rest)
    } else {
        rest.to_vec()
    };
    let loaded = torch_load_bytes(&file);
    // One file per process: libFuzzer runs inputs one after another in a process.
    let path = std::env::temp_dir().join(format!("wgrad-fuzz-{}.pt", std::process::id()));
    if std::fs::write(&path, &file).is_ok() {
        let from_file = torch_load(&path);
        assert_eq!(
            loaded.as_ref().map(|s| contents(s)).map_err(|e| e.kind),
            from_file.as_ref().map(|s| contents(s)).map_err(|e| e.kind),
            "torch_load and torch_load_bytes disagree"
        );
    }
    if let Ok(state) = loaded {
        contents(&state);
    }
});
