//! Fuzz target: the IDX loader (`nn::datasets::parse_idx`, raw and gzipped, and
//! `mnist_from_bytes` with the input as one of its four files). Never a panic; a parse that
//! succeeds is self-consistent (the dimensions describe the data), the gzipped form of a raw
//! file parses to the same result, and MNIST accepts only what parses.

#![no_main]

use flate2::{write::GzEncoder, Compression};
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use wgrad::nn::datasets::{mnist_from_bytes, parse_idx};

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).expect("gzip into memory");
    e.finish().expect("gzip into memory")
}

/// An IDX file of unsigned bytes with these dimensions and data.
fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        f.extend_from_slice(&d.to_be_bytes());
    }
    f.extend_from_slice(data);
    f
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_idx(data);
    if let Ok((dims, payload)) = &parsed {
        let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        assert_eq!(
            n,
            Some(payload.len()),
            "dimensions {dims:?} do not describe the data"
        );
    }
    let gzipped = data.starts_with(&[0x1f, 0x8b]);
    if !gzipped {
        let again = parse_idx(&gz(data));
        match (&parsed, &again) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "gzip changed the parse"),
            (Err(_), Err(_)) => {}
            _ => panic!("raw {:?} but gzipped {:?}", parsed.is_ok(), again.is_ok()),
        }
    }
    // The input as one of the four MNIST files, the others a single valid example.
    let images = idx(&[1, 28, 28], &[7; 784]);
    let labels = idx(&[1], &[3]);
    let mut files = [images.clone(), labels.clone(), images, labels];
    let slot = data.len() % 4;
    files[slot] = data.to_vec();
    if let Ok(m) = mnist_from_bytes(&files[0], &files[1], &files[2], &files[3]) {
        assert!(parsed.is_ok(), "MNIST accepted a file parse_idx rejects");
        let n = m.x_train.shape()[0];
        assert_eq!(m.x_train.shape(), [n, 1, 28, 28]);
        assert_eq!(m.y_train.shape(), [n]);
        assert_eq!(m.x_test.shape()[1..], [1, 28, 28]);
    }
});
