//! Datasets: the IDX file format (raw or gzip) and MNIST / Fashion-MNIST as u8 tensors, loaded
//! from the data directory (`$WGRAD_DATA`, else `./data`, filled by `bash scripts/data.sh`), from
//! any directory, from bytes, or (native only) from a URL into a checksummed on-disk cache.
//!
//! The URL loader needs no HTTP crate: `http://` is a small HTTP/1.1 client over
//! `std::net::TcpStream` (Content-Length, chunked or read-to-close bodies, redirects), and
//! `https://` is fetched by the system's `curl`.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dtype::DType;
use crate::error::{bail, Result};
use crate::tensor::Tensor;

/// The four MNIST-layout files, in the order train images, train labels, test images, test
/// labels (the order of the sha256 arrays too).
pub const MNIST_FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

/// The MNIST mirror tinygrad and TensorFlow use (yann.lecun.com no longer serves the files).
pub const MNIST_URL: &str = "https://storage.googleapis.com/cvdf-datasets/mnist/";
/// SHA-256 of the four MNIST `.gz` files (`MNIST_FILES` order).
pub const MNIST_SHA256: Option<[&str; 4]> = Some([
    "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
]);
/// Zalando's Fashion-MNIST bucket.
pub const FASHION_URL: &str = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
/// SHA-256 of the four Fashion-MNIST `.gz` files as Zalando publishes them (`MNIST_FILES` order).
/// Debian's `dataset-fashion-mnist` recompressed them: same IDX content, other `.gz` bytes.
pub const FASHION_SHA256: Option<[&str; 4]> = Some([
    "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
]);

/// The largest IDX payload accepted (after decompression): guards against gzip bombs and
/// headers that promise absurd sizes.
pub const MAX_IDX_BYTES: usize = 1 << 30;
/// The largest IDX file: the payload limit plus the longest header (255 dimensions).
const MAX_IDX_FILE: usize = MAX_IDX_BYTES + 4 + 4 * 255;

const HINT: &str =
    "run `bash scripts/data.sh` to create it, or set WGRAD_DATA to a folder holding \
                    mnist/ and fashion-mnist/";

/// Parses an IDX file (gzip-compressed or not; gzip is recognised by its magic `1f 8b`) of
/// unsigned bytes: returns its dimensions and its data (row-major). Any malformed input is an
/// `Err` (kind `Io`) saying what is wrong; it never panics.
pub fn parse_idx(bytes: &[u8]) -> Result<(Vec<usize>, Vec<u8>)> {
    if bytes.len() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b {
        let raw = gunzip(bytes)?;
        return parse_idx_raw(&raw);
    }
    parse_idx_raw(bytes)
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let dec = flate2::read::MultiGzDecoder::new(bytes);
    match dec.take(MAX_IDX_FILE as u64 + 1).read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) => bail!(
            Io,
            "IDX: the gzip data ({} bytes) is corrupt or truncated: {e}",
            bytes.len()
        ),
    }
    if out.len() > MAX_IDX_FILE {
        bail!(
            Io,
            "IDX: the gzip data decompresses to more than {MAX_IDX_FILE} bytes (the limit)"
        );
    }
    Ok(out)
}

fn parse_idx_raw(bytes: &[u8]) -> Result<(Vec<usize>, Vec<u8>)> {
    if bytes.len() < 4 {
        bail!(
            Io,
            "IDX: truncated: {} bytes, shorter than the 4-byte magic number",
            bytes.len()
        );
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        bail!(
            Io,
            "IDX: wrong magic number {:02x} {:02x} {:02x} {:02x}: an IDX file starts with 00 00, \
             then the dtype and the number of dimensions",
            bytes[0],
            bytes[1],
            bytes[2],
            bytes[3]
        );
    }
    let dtype = bytes[2];
    if dtype != 0x08 {
        let name = match dtype {
            0x09 => "signed byte",
            0x0b => "i16",
            0x0c => "i32",
            0x0d => "f32",
            0x0e => "f64",
            _ => "unknown",
        };
        bail!(
            Io,
            "IDX: dtype 0x{dtype:02x} ({name}) is not supported: only 0x08 (unsigned byte)"
        );
    }
    let ndim = bytes[3] as usize;
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        bail!(
            Io,
            "IDX: truncated header: {ndim} dimensions need {header} header bytes, the file has {}",
            bytes.len()
        );
    }
    let dims: Vec<usize> = bytes[4..header]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let numel = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_IDX_BYTES);
    let Some(numel) = numel else {
        bail!(
            Io,
            "IDX: dimensions {dims:?} describe more than {MAX_IDX_BYTES} bytes (the limit)"
        );
    };
    let data = &bytes[header..];
    if data.len() < numel {
        bail!(
            Io,
            "IDX: truncated: dimensions {dims:?} need {numel} data bytes, the file has {}",
            data.len()
        );
    }
    if data.len() > numel {
        bail!(
            Io,
            "IDX: oversized: dimensions {dims:?} need {numel} data bytes, the file has {} ({} \
             extra)",
            data.len(),
            data.len() - numel
        );
    }
    Ok((dims, data.to_vec()))
}

/// MNIST-layout data as u8 tensors: images (N, 1, 28, 28) with pixels 0..=255, labels (N,) with
/// classes 0..=9.
pub struct Mnist {
    /// Training images (N, 1, 28, 28), u8.
    pub x_train: Tensor,
    /// Training labels (N,), u8.
    pub y_train: Tensor,
    /// Test images (N, 1, 28, 28), u8.
    pub x_test: Tensor,
    /// Test labels (N,), u8.
    pub y_test: Tensor,
}

impl Mnist {
    /// `(x_train, y_train, x_test, y_test)`, as tinygrad's `mnist()` returns them.
    pub fn into_tuple(self) -> (Tensor, Tensor, Tensor, Tensor) {
        (self.x_train, self.y_train, self.x_test, self.y_test)
    }
}

/// The data directory: `$WGRAD_DATA` if set (and not empty), else `./data`.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("WGRAD_DATA") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from("data"),
    }
}

/// MNIST (`fashion == false`, the folder `mnist`) or Fashion-MNIST (`fashion-mnist`) from the
/// data directory (`data_dir()`), which `bash scripts/data.sh` fills.
pub fn mnist(fashion: bool) -> Result<Mnist> {
    mnist_in(&data_dir(), fashion)
}

/// `mnist(fashion)` with another data directory: reads `data/mnist` or `data/fashion-mnist`.
pub fn mnist_in(data: &Path, fashion: bool) -> Result<Mnist> {
    let (name, sub) = if fashion {
        ("Fashion-MNIST", "fashion-mnist")
    } else {
        ("MNIST", "mnist")
    };
    let dir = data.join(sub);
    let missing: Vec<&str> = MNIST_FILES
        .iter()
        .filter(|f| find_file(&dir, f).is_none())
        .copied()
        .collect();
    if !missing.is_empty() {
        bail!(
            Io,
            "{name}: {} missing {} in {}: {HINT}",
            missing.len(),
            if missing.len() == 1 { "file" } else { "files" },
            dir.display()
        );
    }
    mnist_from_dir(&dir).map_err(|mut e| {
        e.msg = format!("{name}: {} (to recreate the data, {HINT})", e.msg);
        e
    })
}

/// `dir/name` or, if that is absent, the name without or with `.gz`.
fn find_file(dir: &Path, gz_name: &str) -> Option<PathBuf> {
    let stem = gz_name.strip_suffix(".gz").unwrap_or(gz_name);
    [stem.to_string(), format!("{stem}.gz")]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// MNIST-layout data from a directory holding `train-images-idx3-ubyte`,
/// `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte` and `t10k-labels-idx1-ubyte`, each raw or
/// gzipped (with or without `.gz` in the name).
pub fn mnist_from_dir(dir: &Path) -> Result<Mnist> {
    let mut files: Vec<(Vec<u8>, String)> = Vec::with_capacity(4);
    for name in MNIST_FILES {
        let Some(path) = find_file(dir, name) else {
            let stem = name.trim_end_matches(".gz");
            bail!(
                Io,
                "MNIST: neither {stem} nor {stem}.gz is in {}",
                dir.display()
            );
        };
        match std::fs::read(&path) {
            Ok(b) => files.push((b, path.display().to_string())),
            Err(e) => bail!(Io, "MNIST: cannot read {}: {e}", path.display()),
        }
    }
    mnist_from_named_bytes([
        (files[0].0.as_slice(), files[0].1.as_str()),
        (&files[1].0, &files[1].1),
        (&files[2].0, &files[2].1),
        (&files[3].0, &files[3].1),
    ])
}

/// MNIST-layout data from the contents of the four IDX files (raw or gzipped): checks that the
/// images are N x 28 x 28, the labels N long with values 0..=9, for each split.
/// Errors (kind `Io`) name the file and what is wrong with it.
///
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::nn::datasets::mnist_from_bytes;
/// // An IDX file of u8: 00 00 08 <ndim>, each dimension as a big-endian u32, the data.
/// fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
///     let mut b = vec![0, 0, 8, dims.len() as u8];
///     for d in dims {
///         b.extend_from_slice(&d.to_be_bytes());
///     }
///     b.extend_from_slice(data);
///     b
/// }
/// let images = idx(&[2, 28, 28], &[255; 2 * 784]);
/// let labels = idx(&[2], &[3, 7]);
/// let m = mnist_from_bytes(&images, &labels, &images, &labels)?;
/// assert_eq!(m.x_train.shape(), vec![2, 1, 28, 28]);
/// assert_eq!(m.y_test.to_vec::<u8>()?, vec![3, 7]);
/// assert!(mnist_from_bytes(&images, &idx(&[2], &[3, 12]), &images, &labels).is_err()); // 12 > 9
/// # Ok::<(), wgrad::Error>(())
/// ```
pub fn mnist_from_bytes(
    train_images: &[u8],
    train_labels: &[u8],
    test_images: &[u8],
    test_labels: &[u8],
) -> Result<Mnist> {
    mnist_from_named_bytes([
        (train_images, "train images"),
        (train_labels, "train labels"),
        (test_images, "test images"),
        (test_labels, "test labels"),
    ])
}

fn mnist_from_named_bytes(files: [(&[u8], &str); 4]) -> Result<Mnist> {
    let (x_train, y_train) = split(files[0], files[1])?;
    let (x_test, y_test) = split(files[2], files[3])?;
    Ok(Mnist {
        x_train,
        y_train,
        x_test,
        y_test,
    })
}

fn parse_named(bytes: &[u8], what: &str) -> Result<(Vec<usize>, Vec<u8>)> {
    parse_idx(bytes).map_err(|mut e| {
        e.msg = format!("{what}: {}", e.msg);
        e
    })
}

fn split(images: (&[u8], &str), labels: (&[u8], &str)) -> Result<(Tensor, Tensor)> {
    let (idims, idata) = parse_named(images.0, images.1)?;
    let (ldims, ldata) = parse_named(labels.0, labels.1)?;
    if idims.len() != 3 || idims[1] != 28 || idims[2] != 28 {
        bail!(
            Shape,
            "MNIST: {} have dimensions {idims:?}, expected [N, 28, 28]",
            images.1
        );
    }
    if ldims.len() != 1 {
        bail!(
            Shape,
            "MNIST: {} have dimensions {ldims:?}, expected [N]",
            labels.1
        );
    }
    if idims[0] != ldims[0] {
        bail!(
            Shape,
            "MNIST: {} hold {} images but {} hold {} labels",
            images.1,
            idims[0],
            labels.1,
            ldims[0]
        );
    }
    if let Some(pos) = ldata.iter().position(|&l| l > 9) {
        bail!(
            Shape,
            "MNIST: {} has label {} at index {pos}, expected 0..=9",
            labels.1,
            ldata[pos]
        );
    }
    let n = idims[0];
    let x = Tensor::from_raw(&idata, DType::U8, &[n, 1, 28, 28])?;
    let y = Tensor::from_raw(&ldata, DType::U8, &[n])?;
    Ok((x, y))
}

/// MNIST-layout data from `base_url` (`http://` natively, `https://` through `curl`), cached in
/// `cache_dir`: each of `MNIST_FILES` is downloaded once (to a temporary file, then renamed),
/// later calls read the cache. With `sha256` (hex, `MNIST_FILES` order; e.g. `MNIST_SHA256`)
/// every file is checked: a download that does not match is an error and is not cached, a cached
/// file that does not match is fetched again.
#[cfg(not(target_arch = "wasm32"))]
pub fn mnist_from_url(
    base_url: &str,
    cache_dir: &Path,
    sha256: Option<[&str; 4]>,
) -> Result<Mnist> {
    if let Err(e) = std::fs::create_dir_all(cache_dir) {
        bail!(
            Io,
            "MNIST: cannot create the cache folder {}: {e}",
            cache_dir.display()
        );
    }
    let mut files: Vec<Vec<u8>> = Vec::with_capacity(4);
    for (i, name) in MNIST_FILES.iter().enumerate() {
        let want = sha256.map(|s| s[i].trim().to_ascii_lowercase());
        files.push(cached_download(base_url, cache_dir, name, want.as_deref())?);
    }
    mnist_from_named_bytes([
        (files[0].as_slice(), MNIST_FILES[0]),
        (&files[1], MNIST_FILES[1]),
        (&files[2], MNIST_FILES[2]),
        (&files[3], MNIST_FILES[3]),
    ])
}

#[cfg(not(target_arch = "wasm32"))]
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(not(target_arch = "wasm32"))]
fn cached_download(
    base_url: &str,
    cache_dir: &Path,
    name: &str,
    sha256: Option<&str>,
) -> Result<Vec<u8>> {
    let path = cache_dir.join(name);
    if let Ok(bytes) = std::fs::read(&path) {
        match sha256 {
            Some(want) if sha256_hex(&bytes) != want => {
                // A stale or corrupt cache entry: drop it and fetch the file again.
                let _ = std::fs::remove_file(&path);
            }
            _ => return Ok(bytes),
        }
    }
    let url = if base_url.ends_with('/') {
        format!("{base_url}{name}")
    } else {
        format!("{base_url}/{name}")
    };
    let bytes = http::fetch(&url)?;
    if let Some(want) = sha256 {
        let got = sha256_hex(&bytes);
        if got != want {
            bail!(
                Io,
                "download {url}: sha256 mismatch: got {got}, expected {want} ({} bytes; not cached)",
                bytes.len()
            );
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = cache_dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, &bytes).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        bail!(Io, "cannot cache {url} as {}: {e}", path.display());
    }
    Ok(bytes)
}

/// A minimal HTTP/1.1 GET client (plain `http://`), and `https://` through `curl`.
#[cfg(not(target_arch = "wasm32"))]
impl Tensor {
    /// The bytes at `url` (http:// or https://) as a 1-D u8 tensor, gunzipped first with
    /// `gunzip` (tinygrad's `from_url`; blocking, native only: JavaScript has
    /// `Tensor.fromUrl`).
    pub fn from_url(url: &str, gunzip: bool) -> Result<Tensor> {
        let body = http::fetch(url)?;
        let bytes = if gunzip {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(body.as_slice())
                .read_to_end(&mut out)
                .map_err(|e| {
                    crate::Error::new(
                        crate::ErrorKind::Io,
                        format!("from_url: {url}: the gzip data is corrupt or truncated: {e}"),
                    )
                })?;
            out
        } else {
            body
        };
        Tensor::from_raw(&bytes, DType::U8, &[bytes.len()])
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod http {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Duration;

    use crate::error::{bail, Result};

    /// The largest body accepted.
    const MAX_BODY: u64 = 1 << 30;
    const MAX_HEADER_LINE: u64 = 16 * 1024;
    const MAX_HEADERS: usize = 200;
    const MAX_REDIRECTS: usize = 5;
    const TIMEOUT: Duration = Duration::from_secs(60);

    /// The body of a GET of `url`, following redirects; a status other than 200 is an error.
    pub fn fetch(url: &str) -> Result<Vec<u8>> {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            if url.starts_with("https://") {
                return curl(&url);
            }
            if !url.starts_with("http://") {
                bail!(
                    Io,
                    "download {url}: unsupported URL scheme (only http:// and https://)"
                );
            }
            match get(&url)? {
                Response::Body(b) => return Ok(b),
                Response::Redirect(to) => url = resolve(&url, &to),
            }
        }
        bail!(Io, "download {url}: more than {MAX_REDIRECTS} redirects")
    }

    enum Response {
        Body(Vec<u8>),
        Redirect(String),
    }

    /// `(host, port, host header, path)` of an `http://` URL.
    fn split_url(url: &str) -> Result<(String, u16, String, String)> {
        let rest = &url["http://".len()..];
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = path.split('#').next().unwrap_or("/");
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        if authority.contains('@') {
            bail!(
                Io,
                "download {url}: credentials in the URL are not supported"
            );
        }
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            // [v6]:port
            let Some(end) = r.find(']') else {
                bail!(Io, "download {url}: bad IPv6 host");
            };
            let port = r[end + 1..].strip_prefix(':');
            (r[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        let port = match port {
            None | Some("") => 80,
            Some(p) => match p.parse::<u16>() {
                Ok(p) => p,
                Err(_) => bail!(Io, "download {url}: bad port {p:?}"),
            },
        };
        if host.is_empty() {
            bail!(Io, "download {url}: no host");
        }
        Ok((host, port, authority.to_string(), path))
    }

    /// `to` (a Location header) relative to `from`.
    fn resolve(from: &str, to: &str) -> String {
        if to.starts_with("http://") || to.starts_with("https://") {
            return to.to_string();
        }
        let scheme_end = from.find("://").map(|i| i + 3).unwrap_or(0);
        let host_end = from[scheme_end..]
            .find('/')
            .map(|i| i + scheme_end)
            .unwrap_or(from.len());
        if let Some(rest) = to.strip_prefix("//") {
            return format!("{}{rest}", &from[..scheme_end]);
        }
        if to.starts_with('/') {
            return format!("{}{to}", &from[..host_end]);
        }
        let dir_end = from
            .rfind('/')
            .filter(|&i| i >= host_end)
            .unwrap_or(host_end);
        format!("{}/{to}", &from[..dir_end])
    }

    fn io_err(url: &str, what: &str, e: std::io::Error) -> crate::error::Error {
        crate::error::Error::new(
            crate::error::ErrorKind::Io,
            format!("download {url}: {what}: {e}"),
        )
    }

    fn read_line<R: BufRead>(r: &mut R, url: &str) -> Result<String> {
        let mut line = Vec::new();
        r.by_ref()
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(url, "reading the response", e))?;
        if line.last() != Some(&b'\n') {
            if line.is_empty() {
                bail!(Io, "download {url}: the connection closed mid-response");
            }
            bail!(
                Io,
                "download {url}: a response line is too long or cut short"
            );
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    fn get(url: &str) -> Result<Response> {
        let (host, port, host_header, path) = split_url(url)?;
        let addrs: Vec<_> = match (host.as_str(), port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(io_err(url, &format!("cannot resolve {host}"), e)),
        };
        let mut last = None;
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, TIMEOUT) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let Some(mut stream) = stream else {
            match last {
                Some(e) => return Err(io_err(url, &format!("cannot connect to {host}:{port}"), e)),
                None => bail!(Io, "download {url}: {host} has no address"),
            }
        };
        let _ = stream.set_read_timeout(Some(TIMEOUT));
        let _ = stream.set_write_timeout(Some(TIMEOUT));
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: wgrad\r\nAccept: */*\r\n\
             Accept-Encoding: identity\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| io_err(url, "sending the request", e))?;
        let mut r = BufReader::new(stream);

        let status_line = read_line(&mut r, url)?;
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        let code = parts.next().and_then(|c| c.parse::<u16>().ok());
        let reason = parts.next().unwrap_or("");
        let Some(code) = code.filter(|_| version.starts_with("HTTP/")) else {
            bail!(Io, "download {url}: not an HTTP response: {status_line:?}");
        };
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut location = None;
        for n in 0.. {
            if n > MAX_HEADERS {
                bail!(Io, "download {url}: more than {MAX_HEADERS} header lines");
            }
            let line = read_line(&mut r, url)?;
            if line.is_empty() {
                break;
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => match v.parse::<u64>() {
                    Ok(n) => length = Some(n),
                    Err(_) => bail!(Io, "download {url}: bad Content-Length {v:?}"),
                },
                "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
                "location" => location = Some(v.to_string()),
                _ => {}
            }
        }
        if matches!(code, 301 | 302 | 303 | 307 | 308) {
            match location {
                Some(l) => return Ok(Response::Redirect(l)),
                None => bail!(
                    Io,
                    "download {url}: HTTP {code} {reason} without a Location"
                ),
            }
        }
        if code != 200 {
            bail!(Io, "download {url}: HTTP {code} {reason}");
        }
        let body = if chunked {
            read_chunked(&mut r, url)?
        } else if let Some(n) = length {
            if n > MAX_BODY {
                bail!(
                    Io,
                    "download {url}: {n} bytes is over the {MAX_BODY}-byte limit"
                );
            }
            let mut body = Vec::with_capacity(n.min(64 << 20) as usize);
            r.by_ref()
                .take(n)
                .read_to_end(&mut body)
                .map_err(|e| io_err(url, "reading the body", e))?;
            if (body.len() as u64) < n {
                bail!(
                    Io,
                    "download {url}: the connection closed after {} of {n} bytes",
                    body.len()
                );
            }
            body
        } else {
            let mut body = Vec::new();
            r.by_ref()
                .take(MAX_BODY + 1)
                .read_to_end(&mut body)
                .map_err(|e| io_err(url, "reading the body", e))?;
            if body.len() as u64 > MAX_BODY {
                bail!(
                    Io,
                    "download {url}: the body is over the {MAX_BODY}-byte limit"
                );
            }
            body
        };
        Ok(Response::Body(body))
    }

    fn read_chunked<R: BufRead>(r: &mut R, url: &str) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = read_line(r, url)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let Ok(n) = u64::from_str_radix(size, 16) else {
                bail!(Io, "download {url}: bad chunk size line {line:?}");
            };
            if n == 0 {
                // Trailers, up to the empty line (a server that just closes is fine too).
                for _ in 0..MAX_HEADERS {
                    match read_line(r, url) {
                        Ok(l) if !l.is_empty() => continue,
                        _ => break,
                    }
                }
                return Ok(body);
            }
            if body.len() as u64 + n > MAX_BODY {
                bail!(
                    Io,
                    "download {url}: the body is over the {MAX_BODY}-byte limit"
                );
            }
            let before = body.len();
            r.by_ref()
                .take(n)
                .read_to_end(&mut body)
                .map_err(|e| io_err(url, "reading a chunk", e))?;
            if ((body.len() - before) as u64) < n {
                bail!(Io, "download {url}: the connection closed inside a chunk");
            }
            if !read_line(r, url)?.is_empty() {
                bail!(Io, "download {url}: a chunk is not followed by CRLF");
            }
        }
    }

    /// `curl -fsSL url`, the body from its standard output.
    fn curl(url: &str) -> Result<Vec<u8>> {
        let out = std::process::Command::new("curl")
            .args(["-fsSL", "--retry", "2", "--", url])
            .stdin(std::process::Stdio::null())
            .output();
        match out {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                Io,
                "download {url}: https:// needs curl, which is not installed (or use an http:// \
                 mirror)"
            ),
            Err(e) => bail!(Io, "download {url}: cannot run curl: {e}"),
            Ok(o) if !o.status.success() => bail!(
                Io,
                "download {url}: curl failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Ok(o) => Ok(o.stdout),
        }
    }
}
