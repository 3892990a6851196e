//! Named tensors of a model, like tinygrad's `nn.state`: the `State` trait walks a model's
//! tensors with their dotted names ("l1.weight", "layers.0.bias"), `state!` implements it for a
//! struct from its field list, and on top of it:
//!
//! * `get_state_dict` (every tensor, named, in field order), `get_parameters` (the tensors that
//!   require gradients, for an optimizer) and `get_buffers` (the others, e.g. BatchNorm running
//!   statistics, to realize together with a training step);
//! * `load_state_dict`: assign values into the model's own tensors (they keep their buffers);
//! * safetensors files (`safe_save` / `safe_load`, and `safe_save_bytes` / `safe_load_bytes`):
//!   an 8-byte little-endian header length, a JSON header `{name: {"dtype", "shape",
//!   "data_offsets": [begin, end]}, "__metadata__": {..}}` padded with spaces to a multiple of 8
//!   bytes, then the little-endian data; `safe_load_metadata` reads `__metadata__`, and
//!   `safe_save_with_metadata` writes it;
//! * PyTorch checkpoints (`torch_load` / `torch_load_bytes`: what `torch.save` writes), read
//!   without Python and converted like safetensors data.
//!
//! ```
//! use wgrad::nn::{state, Linear};
//! struct Mlp {
//!     l1: Linear,
//!     l2: Linear,
//! }
//! wgrad::state!(Mlp { l1, l2 });
//! # fn main() -> wgrad::Result<()> {
//! let m = Mlp { l1: Linear::new(4, 8)?, l2: Linear::new(8, 2)? };
//! let names: Vec<String> = state::get_state_dict(&m).into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["l1.weight", "l1.bias", "l2.weight", "l2.bias"]);
//! # Ok(())
//! # }
//! ```

use crate::dtype::DType;
use crate::error::{bail, Error, ErrorKind, Result};
use crate::nn::{
    BatchNorm, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, Embedding, GroupNorm,
    InstanceNorm, LayerNorm, LayerNorm2d, Linear, LstmCell, RmsNorm,
};
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

pub use super::torch_load::{torch_load, torch_load_bytes};

/// Something holding named tensors: a tensor, a layer, a model, or a container of them.
pub trait State {
    /// Call `f(name, tensor)` for every tensor held, in a fixed order. `prefix` is the name of
    /// this value itself ("" at the top); a child is named `prefix.child` (see `join`).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor));
}

/// `prefix.name`, or `name` when the prefix is empty.
pub fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl State for Tensor {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        f(prefix, self)
    }
}

impl<T: State> State for Option<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        if let Some(v) = self {
            v.visit(prefix, f)
        }
    }
}

/// Elements are named by their index: "layers.0.weight".
impl<T: State> State for [T] {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        for (i, v) in self.iter().enumerate() {
            v.visit(&join(prefix, &i.to_string()), f)
        }
    }
}

impl<T: State> State for Vec<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        self.as_slice().visit(prefix, f)
    }
}

impl<T: State, const N: usize> State for [T; N] {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        self.as_slice().visit(prefix, f)
    }
}

/// Entries are named by their key, in key order.
impl<T: State> State for BTreeMap<String, T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        for (k, v) in self {
            v.visit(&join(prefix, k), f)
        }
    }
}

impl<T: State + ?Sized> State for Box<T> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        (**self).visit(prefix, f)
    }
}

impl<T: State + ?Sized> State for &T {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &Tensor)) {
        (**self).visit(prefix, f)
    }
}

/// Implement `wgrad::nn::state::State` for a struct from the list of its fields that hold
/// tensors (anything implementing `State`: tensors, layers, `Option`s, `Vec`s, arrays, other
/// models). Each field is named by its identifier (or tuple index): `state!(Net { conv, fcs })`
/// gives "conv.weight", "conv.bias", "fcs.0.weight", ... Fields left out are not visited. For a
/// generic struct, implement the trait by hand the same way.
#[macro_export]
macro_rules! state {
    ($ty:ty { $($field:tt),* $(,)? }) => {
        impl $crate::nn::state::State for $ty {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &$crate::Tensor)) {
                let _ = (&prefix, &f);
                $(
                    $crate::nn::state::State::visit(
                        &self.$field,
                        &$crate::nn::state::join(prefix, stringify!($field)),
                        f,
                    );
                )*
            }
        }
    };
}

// Parameter order follows torch's state dicts.
crate::state!(Conv2d { weight, bias });
crate::state!(Linear { weight, bias });
crate::state!(BatchNorm {
    weight,
    bias,
    running_mean,
    running_var,
    num_batches_tracked
});
crate::state!(LayerNorm { weight, bias });
crate::state!(GroupNorm { weight, bias });
crate::state!(Embedding { weight });
crate::state!(Conv1d { weight, bias });
crate::state!(ConvTranspose1d { weight, bias });
crate::state!(ConvTranspose2d { weight, bias });
crate::state!(InstanceNorm { weight, bias });
crate::state!(LayerNorm2d { weight, bias });
crate::state!(RmsNorm { weight });
crate::state!(LstmCell {
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh
});

/// Every tensor of `model` with its name, in visiting order (deterministic). A tensor reachable
/// under two names (tied weights) appears under both.
pub fn get_state_dict(model: &(impl State + ?Sized)) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    model.visit("", &mut |name, t| out.push((name.to_string(), t.clone())));
    out
}

fn unique(model: &(impl State + ?Sized), keep: impl Fn(&Tensor) -> bool) -> Vec<Tensor> {
    let mut out: Vec<Tensor> = Vec::new();
    model.visit("", &mut |_, t| {
        if keep(t) && !out.iter().any(|o| o.same(t)) {
            out.push(t.clone())
        }
    });
    out
}

/// The tensors of `model` that require gradients (each once), in visiting order: what an
/// optimizer updates.
pub fn get_parameters(model: &(impl State + ?Sized)) -> Vec<Tensor> {
    unique(model, |t| t.requires_grad())
}

/// The tensors of `model` that do not require gradients (each once), e.g. BatchNorm running
/// statistics: realize them with a training step so their in-place updates run.
pub fn get_buffers(model: &(impl State + ?Sized)) -> Vec<Tensor> {
    unique(model, |t| !t.requires_grad())
}

/// Assign the values of `state` into the tensors of `model` with the same names, then realize
/// them: the model's tensors keep their identity and buffers (so optimizers and captured steps
/// still see them). Values are moved to each target's device. Every name, shape and dtype is
/// checked before anything is written, so on an error the model is unchanged.
///
/// With `strict`, the names must match exactly (no model tensor missing from `state`, no name
/// in `state` unknown to the model); without it, model tensors missing from `state` keep their
/// values and unknown names are ignored.
/// ```
/// # wgrad::context::set_default_device(Some(wgrad::Device::Interp));
/// use wgrad::nn::state::{get_state_dict, load_state_dict, safe_load_bytes, safe_save_bytes};
/// use wgrad::nn::Linear;
/// let (a, b) = (Linear::new(3, 2)?, Linear::new(3, 2)?);
/// let names: Vec<String> = get_state_dict(&a).into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// let bytes = safe_save_bytes(&get_state_dict(&a))?; // a safetensors file
/// load_state_dict(&b, &safe_load_bytes(&bytes)?, true)?;
/// assert_eq!(b.weight.to_vec::<f32>()?, a.weight.to_vec::<f32>()?);
/// let wrong = vec![("weight".to_string(), wgrad::Tensor::zeros(&[2, 2])?)];
/// assert!(load_state_dict(&b, &wrong, false).is_err()); // shape [2, 2], not [2, 3]
/// # Ok::<(), wgrad::Error>(())
/// ```
pub fn load_state_dict(
    model: &(impl State + ?Sized),
    state: &[(String, Tensor)],
    strict: bool,
) -> Result<()> {
    let own = get_state_dict(model);
    let mut given: HashMap<&str, &Tensor> = HashMap::new();
    for (name, t) in state {
        if given.insert(name.as_str(), t).is_some() {
            bail!(
                Other,
                "load_state_dict: name '{name}' appears twice in the state"
            );
        }
    }
    if strict {
        let own_names: HashSet<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
        let missing: Vec<&str> = own
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !given.contains_key(n))
            .collect();
        let unexpected: Vec<&str> = state
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !own_names.contains(n))
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            bail!(
                Other,
                "load_state_dict: names do not match the model: missing {missing:?}, \
                 unexpected {unexpected:?}"
            );
        }
    }
    let mut pairs: Vec<(&Tensor, &Tensor)> = Vec::new();
    for (name, t) in &own {
        let Some(&v) = given.get(name.as_str()) else {
            continue;
        };
        if v.shape() != t.shape() {
            bail!(
                Shape,
                "load_state_dict: '{name}' has shape {:?} in the state, the model's is {:?}",
                v.shape(),
                t.shape()
            );
        }
        if v.dtype() != t.dtype() {
            bail!(
                DType,
                "load_state_dict: '{name}' has dtype {} in the state, the model's is {}",
                v.dtype(),
                t.dtype()
            );
        }
        if !v.same(t) {
            pairs.push((t, v));
        }
    }
    for (t, v) in &pairs {
        // Onto the model's devices, split like its tensor (copied through a fresh node: the
        // scheduler cannot yet copy a realized buffer to another device directly).
        let v = if v.devices() == t.devices() {
            (*v).clone()
        } else {
            v.contiguous()
        };
        let v = v.shard(&t.devices(), t.shard_axis().map(|a| a as isize))?;
        t.assign(&v)?;
    }
    let targets: Vec<&Tensor> = pairs.iter().map(|(t, _)| *t).collect();
    Tensor::realize_all(&targets)
}

// ---- snapshots ------------------------------------------------------------------------------

#[cfg(not(target_arch = "wasm32"))]
/// A checkpoint in host memory: a model's state dict and an optimizer's state (learning rate,
/// moments, step counters) as safetensors bytes. It outlives the device the tensors were on:
/// after a device loss, make the model and optimizer again (on any device) and `restore`.
/// Take one every few steps with `Snapshots`; `bytes()` can be written to disk as well.
/// Native only: it reads the tensors back synchronously.
pub struct Snapshot {
    /// The training step it was taken after.
    pub step: u64,
    bytes: Vec<u8>,
}

#[cfg(not(target_arch = "wasm32"))]
const OPT_PREFIX: &str = "optimizer.";

#[cfg(not(target_arch = "wasm32"))]
impl Snapshot {
    /// Read back `model`'s state dict and `opt`'s state now.
    pub fn take(
        step: u64,
        model: &(impl State + ?Sized),
        opt: &dyn crate::nn::optim::Optimizer,
    ) -> Result<Snapshot> {
        let mut state = get_state_dict(model);
        for (i, t) in opt.state().into_iter().enumerate() {
            state.push((format!("{OPT_PREFIX}{i}"), t));
        }
        Ok(Snapshot {
            step,
            bytes: safe_save_bytes(&state)?,
        })
    }

    /// Load into a model and an optimizer of the same structure (strictly: every name, shape
    /// and dtype must match), on whatever device they are on.
    pub fn restore(
        &self,
        model: &(impl State + ?Sized),
        opt: &dyn crate::nn::optim::Optimizer,
    ) -> Result<()> {
        // Loaded onto the model's device (the default may be the one that was lost).
        let dev = get_state_dict(model).first().map(|(_, t)| t.device());
        let load = || safe_load_bytes(&self.bytes);
        let loaded = match dev {
            Some(d) => crate::Context::new().dev(d).run(load)?,
            None => load()?,
        };
        let (opt_part, model_part): (Vec<_>, Vec<_>) = loaded
            .into_iter()
            .partition(|(n, _)| n.starts_with(OPT_PREFIX));
        load_state_dict(model, &model_part, true)?;
        let own = opt.state();
        if own.len() != opt_part.len() {
            bail!(
                Other,
                "Snapshot::restore: the optimizer has {} state tensors, the snapshot {}",
                own.len(),
                opt_part.len()
            );
        }
        let named: Vec<(String, Tensor)> = own
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("{OPT_PREFIX}{i}"), t))
            .collect();
        load_state_dict(
            &named.iter().cloned().collect::<BTreeMap<_, _>>(),
            &opt_part,
            true,
        )
    }

    /// The snapshot as safetensors bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(not(target_arch = "wasm32"))]
/// Snapshots every `n` steps, keeping the last.
pub struct Snapshots {
    every: u64,
    last: Option<Snapshot>,
}

#[cfg(not(target_arch = "wasm32"))]
impl Snapshots {
    /// Keep a snapshot every `n` steps (at least 1).
    pub fn every(n: u64) -> Snapshots {
        Snapshots {
            every: n.max(1),
            last: None,
        }
    }
    /// Call after each training step (counted from 1): takes a snapshot when `step` is a
    /// multiple of `n`.
    pub fn after_step(
        &mut self,
        step: u64,
        model: &(impl State + ?Sized),
        opt: &dyn crate::nn::optim::Optimizer,
    ) -> Result<()> {
        if step % self.every == 0 {
            self.last = Some(Snapshot::take(step, model, opt)?);
        }
        Ok(())
    }
    /// The last snapshot taken, if any.
    pub fn last(&self) -> Option<&Snapshot> {
        self.last.as_ref()
    }
}

// ---- safetensors ---------------------------------------------------------------------------

/// Largest header accepted (as the reference implementation: 100 MB).
const MAX_HEADER: u64 = 100_000_000;

fn st_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I32 => "I32",
        DType::U32 => "U32",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
    }
}

/// A stored dtype: one of ours, or one converted on load (by `load_stored`, the one conversion
/// path of every file format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stored {
    Native(DType),
    I64,
    F64,
}

impl Stored {
    fn parse(s: &str) -> Option<Stored> {
        Some(match s {
            "F32" => Stored::Native(DType::F32),
            "F16" => Stored::Native(DType::F16),
            "I32" => Stored::Native(DType::I32),
            "U32" => Stored::Native(DType::U32),
            "U8" => Stored::Native(DType::U8),
            "BOOL" => Stored::Native(DType::Bool),
            "I64" => Stored::I64,
            "F64" => Stored::F64,
            "BF16" => Stored::Native(DType::BF16),
            _ => return None,
        })
    }
    /// Bytes per stored element.
    pub(super) fn size(self) -> usize {
        match self {
            Stored::Native(d) => d.size(),
            Stored::I64 | Stored::F64 => 8,
        }
    }
}

fn st_err(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Io, format!("safetensors: {}", msg.into()))
}

/// Serialize realized tensor data (one byte vector per entry) into a safetensors file image;
/// `__metadata__` comes first when there is any.
fn encode(
    state: &[(String, Tensor)],
    data: &[Vec<u8>],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let mut header = String::from("{");
    if !metadata.is_empty() {
        let m = serde_json::to_string(metadata).map_err(|e| st_err(e.to_string()))?;
        header.push_str(&format!("\"__metadata__\":{m}"));
    }
    let mut offset = 0usize;
    for ((name, t), d) in state.iter().zip(data) {
        if header.len() > 1 {
            header.push(',');
        }
        let key = serde_json::to_string(name).map_err(|e| st_err(e.to_string()))?;
        let shape: Vec<String> = t.shape().iter().map(|d| d.to_string()).collect();
        header.push_str(&format!(
            "{key}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            st_name(t.dtype()),
            shape.join(","),
            offset,
            offset + d.len()
        ));
        offset += d.len();
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for d in data {
        out.extend_from_slice(d);
    }
    Ok(out)
}

fn check_names(state: &[(String, Tensor)]) -> Result<()> {
    let mut seen = HashSet::new();
    for (name, _) in state {
        if name == "__metadata__" {
            bail!(
                Io,
                "safetensors: '__metadata__' is reserved, not a tensor name"
            );
        }
        if !seen.insert(name.as_str()) {
            bail!(Io, "safetensors: name '{name}' appears twice");
        }
    }
    Ok(())
}

/// The safetensors file image of `state` (names in the given order), awaiting the devices
/// (works in the browser).
pub async fn safe_save_bytes_async(state: &[(String, Tensor)]) -> Result<Vec<u8>> {
    safe_save_bytes_with_metadata_async(state, &BTreeMap::new()).await
}

/// `safe_save_bytes_async` with a `__metadata__` map of strings written into the header (as
/// tinygrad's `safe_save(tensors, fn, metadata)`; read it back with `safe_load_metadata`).
pub async fn safe_save_bytes_with_metadata_async(
    state: &[(String, Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    check_names(state)?;
    let ts: Vec<&Tensor> = state.iter().map(|(_, t)| t).collect();
    Tensor::realize_all(&ts)?;
    let mut data = Vec::with_capacity(state.len());
    for t in ts {
        data.push(t.bytes_async().await?);
    }
    encode(state, &data, metadata)
}

/// Blocking form of `safe_save_bytes_async` (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn safe_save_bytes(state: &[(String, Tensor)]) -> Result<Vec<u8>> {
    safe_save_bytes_with_metadata(state, &BTreeMap::new())
}

/// Blocking form of `safe_save_bytes_with_metadata_async` (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn safe_save_bytes_with_metadata(
    state: &[(String, Tensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    crate::runtime::block_on(safe_save_bytes_with_metadata_async(state, metadata))
}

/// Write `state` to a safetensors file at `path` (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn safe_save(state: &[(String, Tensor)], path: impl AsRef<Path>) -> Result<()> {
    safe_save_with_metadata(state, &BTreeMap::new(), path)
}

/// Write `state` to a safetensors file at `path` with a `__metadata__` map of strings in its
/// header (native only).
///
/// ```no_run
/// # fn main() -> wgrad::Result<()> {
/// use std::collections::BTreeMap;
/// use wgrad::nn::state::{safe_load_metadata, safe_save_with_metadata};
/// let w = wgrad::Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let meta = BTreeMap::from([("step".to_string(), "100".to_string())]);
/// safe_save_with_metadata(&[("w".to_string(), w)], &meta, "model.safetensors")?;
/// assert_eq!(safe_load_metadata("model.safetensors")?, meta);
/// # Ok(())
/// # }
/// ```
#[cfg(not(target_arch = "wasm32"))]
pub fn safe_save_with_metadata(
    state: &[(String, Tensor)],
    metadata: &BTreeMap<String, String>,
    path: impl AsRef<Path>,
) -> Result<()> {
    let path = path.as_ref();
    let bytes = safe_save_bytes_with_metadata(state, metadata)?;
    std::fs::write(path, bytes).map_err(|e| st_err(format!("cannot write {}: {e}", path.display())))
}

/// Read a file and parse it with `parse`; errors name the file.
pub(super) fn read_with<T>(
    path: &Path,
    format: &str,
    parse: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("{format}: cannot read {}: {e}", path.display()),
        )
    })?;
    parse(&bytes).map_err(|e| Error::new(e.kind, format!("{} (file {})", e.msg, path.display())))
}

/// Read a safetensors file.
pub fn safe_load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    read_with(path.as_ref(), "safetensors", safe_load_bytes)
}

/// The `__metadata__` map of a safetensors file's header (empty when it has none).
pub fn safe_load_metadata(path: impl AsRef<Path>) -> Result<BTreeMap<String, String>> {
    read_with(path.as_ref(), "safetensors", safe_load_metadata_bytes)
}

/// The `__metadata__` map of a safetensors file image (empty when it has none), without loading
/// any tensor. The format says its values are strings; a value of another JSON type (written
/// by a tool that does not follow it) is returned as its JSON text.
pub fn safe_load_metadata_bytes(bytes: &[u8]) -> Result<BTreeMap<String, String>> {
    let (header, _) = parse_header(bytes)?;
    let Some(meta) = header.get("__metadata__") else {
        return Ok(BTreeMap::new());
    };
    let meta = meta
        .as_object()
        .ok_or_else(|| st_err("__metadata__ is not a JSON object"))?;
    Ok(meta
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            (k.clone(), v)
        })
        .collect())
}

fn json_usize(v: &serde_json::Value, what: &str, name: &str) -> Result<usize> {
    v.as_u64()
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| {
            st_err(format!(
                "'{name}': {what} {v} is not a non-negative integer"
            ))
        })
}

/// Make a tensor of `shape` on the default device from contiguous little-endian data stored as
/// `stored`: i64 narrows to i32 (an error naming the tensor if a value does not fit), f64
/// rounds to f32; bool bytes become 0 or 1. The one conversion path of
/// every file format (safetensors, `torch_load`); errors name `name`, the caller names the
/// format.
pub(super) fn load_stored(
    stored: Stored,
    raw: &[u8],
    shape: &[usize],
    name: &str,
) -> Result<Tensor> {
    let (dtype, data) = convert(stored, raw, name)?;
    Tensor::from_raw(&data, dtype, shape)
        .map_err(|e| Error::new(e.kind, format!("'{name}': {}", e.msg)))
}

fn convert<'r>(stored: Stored, raw: &'r [u8], name: &str) -> Result<(DType, Cow<'r, [u8]>)> {
    Ok(match stored {
        Stored::Native(DType::Bool) => (
            DType::Bool,
            raw.iter()
                .map(|&b| (b != 0) as u8)
                .collect::<Vec<u8>>()
                .into(),
        ),
        Stored::Native(d) => (d, Cow::Borrowed(raw)),
        Stored::I64 => {
            let mut out = Vec::with_capacity(raw.len() / 2);
            for c in raw.chunks_exact(8) {
                let v = i64::from_le_bytes(c.try_into().expect("8 bytes"));
                let Ok(v) = i32::try_from(v) else {
                    bail!(DType, "'{name}': int64 value {v} does not fit in i32");
                };
                out.extend_from_slice(&v.to_le_bytes());
            }
            (DType::I32, out.into())
        }
        Stored::F64 => {
            let mut out = Vec::with_capacity(raw.len() / 2);
            for c in raw.chunks_exact(8) {
                let v = f64::from_le_bytes(c.try_into().expect("8 bytes"));
                out.extend_from_slice(&(v as f32).to_le_bytes());
            }
            (DType::F32, out.into())
        }
    })
}

/// Parse a safetensors file image into named tensors on the default device, in the order of
/// their data in the file. Nothing blocks (works in the browser). Dtypes F32, F16, BF16, I32,
/// U32, U8 and BOOL load as they are; I64 loads as i32 (if every value fits), F64 as f32.
/// `__metadata__` is checked to be an object and skipped (`safe_load_metadata_bytes` reads
/// it). A truncated or malformed file is an error.
pub fn safe_load_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let (obj, data) = parse_header(bytes)?;
    let mut out: Vec<(usize, String, Tensor)> = Vec::with_capacity(obj.len());
    for (name, info) in &obj {
        if name == "__metadata__" {
            if !info.is_object() {
                return Err(st_err("__metadata__ is not a JSON object"));
            }
            continue;
        }
        let info = info
            .as_object()
            .ok_or_else(|| st_err(format!("'{name}': entry is not a JSON object")))?;
        let dt = info
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or_else(|| st_err(format!("'{name}': no dtype string")))?;
        let stored = Stored::parse(dt).ok_or_else(|| {
            st_err(format!(
                "'{name}': unsupported dtype {dt} (F32, F16, I32, U32, U8, BOOL, I64, F64, BF16)"
            ))
        })?;
        let shape = info
            .get("shape")
            .and_then(|s| s.as_array())
            .ok_or_else(|| st_err(format!("'{name}': no shape array")))?
            .iter()
            .map(|d| json_usize(d, "dimension", name))
            .collect::<Result<Vec<usize>>>()?;
        let offs = info
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .filter(|a| a.len() == 2)
            .ok_or_else(|| st_err(format!("'{name}': data_offsets is not [begin, end]")))?;
        let (b, e) = (
            json_usize(&offs[0], "offset", name)?,
            json_usize(&offs[1], "offset", name)?,
        );
        if b > e || e > data.len() {
            return Err(st_err(format!(
                "'{name}': data_offsets [{b}, {e}] are out of range of {} data bytes",
                data.len()
            )));
        }
        let want = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(stored.size()));
        if want != Some(e - b) {
            return Err(st_err(format!(
                "'{name}': {} data bytes do not hold shape {shape:?} of {dt}",
                e - b
            )));
        }
        let t = load_stored(stored, &data[b..e], &shape, name)
            .map_err(|err| Error::new(err.kind, format!("safetensors: {}", err.msg)))?;
        out.push((b, name.clone(), t));
    }
    out.sort_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
    Ok(out.into_iter().map(|(_, n, t)| (n, t)).collect())
}

/// The header of a safetensors file image as a JSON object, and the data after it.
fn parse_header(bytes: &[u8]) -> Result<(serde_json::Map<String, serde_json::Value>, &[u8])> {
    let Some(len) = bytes.get(..8) else {
        return Err(st_err(format!(
            "{} bytes is too short for the 8-byte header length",
            bytes.len()
        )));
    };
    let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
    let avail = (bytes.len() - 8) as u64;
    if n > MAX_HEADER || n > avail {
        return Err(st_err(format!(
            "header length {n} is larger than the {avail} bytes after it (or than {MAX_HEADER})"
        )));
    }
    let end = 8 + n as usize;
    let header = std::str::from_utf8(&bytes[8..end])
        .map_err(|e| st_err(format!("header is not UTF-8: {e}")))?;
    let header = header.trim_end_matches([' ', '\0']);
    let value: serde_json::Value =
        serde_json::from_str(header).map_err(|e| st_err(format!("bad header JSON: {e}")))?;
    let serde_json::Value::Object(obj) = value else {
        return Err(st_err("header is not a JSON object"));
    };
    Ok((obj, &bytes[end..]))
}
