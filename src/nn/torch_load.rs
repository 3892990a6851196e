//! `torch_load`: the tensors of a PyTorch checkpoint (`.pt` / `.pth`, written by `torch.save`
//! since PyTorch 1.6), without Python. The file is a zip archive `<name>/data.pkl` (the pickled
//! object), `<name>/data/<key>` (one file per storage: raw elements), `<name>/byteorder`,
//! `<name>/version`. The pickle runs on a small machine (`pickle`) whose host here turns
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` (and `_v3`,
//! `_rebuild_parameter`) into a description of a tensor; the object is then flattened into
//! dotted names and each tensor's elements are gathered from its storage along its strides (so
//! views, transposes and several tensors of one storage load with their own values), converted
//! by the loader shared with safetensors (`state::load_stored`).

use super::pickle::{self, items, Host, Obj, Value};
use super::state::{join, load_stored, read_with, Stored};
use super::zip;
use crate::dtype::DType;
use crate::error::{bail, Error, Result};
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Read a PyTorch checkpoint file: `torch_load_bytes` on its contents.
pub fn torch_load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    read_with(path.as_ref(), "torch_load", torch_load_bytes)
}

/// The tensors of a checkpoint written by `torch.save` (PyTorch 1.6 or later: a zip archive),
/// on the default device, in the pickle's order. Nothing blocks (works in the browser).
///
/// tinygrad's `torch_load` returns the unpickled object itself; here the object is flattened
/// the way tinygrad's `get_state_dict` names one: dict keys (strings and integers) and list or
/// tuple indices joined by dots. So `torch.save(model.state_dict())` gives `"fc.weight"`, and
/// `torch.save({"model": sd, "step": 3})` gives `"model.fc.weight"`. Values that are not
/// tensors (`step`) are left out, and so are tensors inside pickled objects other than dicts,
/// lists and tuples (save a model's state dict, not the model).
///
/// ```no_run
/// # fn main() -> wgrad::Result<()> {
/// use wgrad::nn::state::{load_state_dict, torch_load};
/// let model = wgrad::nn::Linear::new(4, 2)?;
/// // torch.save(torch.nn.Linear(4, 2).state_dict(), "linear.pt")
/// load_state_dict(&model, &torch_load("linear.pt")?, true)?;
/// # Ok(())
/// # }
/// ```
///
/// Tensors keep their values whatever their layout (views with offsets and strides, several
/// tensors sharing one storage); a tensor reached twice in the object (tied weights) is one
/// `Tensor` under both names. Dtypes: float32, float16, bfloat16, int32, uint32, uint8 and bool
/// load as they are; int64 loads as i32 (an error naming the tensor if a value does not fit),
/// float64 as f32 — as `safe_load` does. Other dtypes (int8, int16, complex, float8) are
/// an error naming the tensor. Storages written big-endian are byte-swapped.
///
/// A malformed file (truncated archive, corrupt data, a pickle opcode outside what `torch.save`
/// writes, a storage too short for a tensor's shape and strides, a missing storage file) is an
/// `Err` saying what is wrong. The pre-1.6 format (a bare pickle stream) is not read: load it
/// in PyTorch and save it again.
pub fn torch_load_bytes(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    load(bytes).map_err(|e| Error::new(e.kind, format!("torch_load: {}", e.msg)))
}

/// A storage, from its persistent id `('storage', type, key, location, numel)`.
struct Storage {
    /// The element type of a typed storage (`torch.FloatStorage`); `None` for
    /// `torch.storage.UntypedStorage`, whose numel counts bytes.
    typed: Option<std::result::Result<Stored, String>>,
    key: String,
    numel: u64,
}

/// A tensor as `_rebuild_tensor_v2` describes it, in elements of its dtype.
struct TensorRef {
    storage: usize,
    /// The dtype (an unsupported one by its torch name).
    stored: std::result::Result<Stored, String>,
    offset: u64,
    size: Vec<usize>,
    stride: Vec<u64>,
}

enum Item {
    Storage(Storage),
    Tensor(TensorRef),
}

#[derive(Default)]
struct Torch {
    items: Vec<Item>,
}

const SUPPORTED: &str = "float32, float16, bfloat16, float64, int64, int32, uint32, uint8, bool";

/// The dtype of a legacy typed storage class (`torch.FloatStorage`), as torch.save names it.
fn storage_dtype(name: &str) -> std::result::Result<Stored, String> {
    Ok(match name {
        "FloatStorage" => Stored::Native(DType::F32),
        "HalfStorage" => Stored::Native(DType::F16),
        "BFloat16Storage" => Stored::Native(DType::BF16),
        "DoubleStorage" => Stored::F64,
        "LongStorage" => Stored::I64,
        "IntStorage" => Stored::Native(DType::I32),
        "ByteStorage" => Stored::Native(DType::U8),
        "BoolStorage" => Stored::Native(DType::Bool),
        _ => return Err(format!("torch.{name}")),
    })
}

/// A `torch.<dtype>` global (`_rebuild_tensor_v3`'s dtype argument).
fn torch_dtype(name: &str) -> std::result::Result<Stored, String> {
    Ok(match name {
        "float32" | "float" => Stored::Native(DType::F32),
        "float16" | "half" => Stored::Native(DType::F16),
        "bfloat16" => Stored::Native(DType::BF16),
        "float64" | "double" => Stored::F64,
        "int64" | "long" => Stored::I64,
        "int32" | "int" => Stored::Native(DType::I32),
        "uint32" => Stored::Native(DType::U32),
        "uint8" => Stored::Native(DType::U8),
        "bool" => Stored::Native(DType::Bool),
        _ => return Err(format!("torch.{name}")),
    })
}

fn int(v: &Value, what: &str) -> Result<u64> {
    match v {
        Value::Int(i) if *i >= 0 => Ok(*i as u64),
        Value::Bool(b) => Ok(*b as u64),
        _ => bail!(Io, "{what} is {v}, not a non-negative integer"),
    }
}

fn ints(objs: &[Obj], v: &Value, what: &str) -> Result<Vec<u64>> {
    let Some(xs) = items(objs, v) else {
        bail!(Io, "{what} is not a tuple");
    };
    xs.iter().map(|x| int(x, what)).collect()
}

impl Torch {
    /// `_rebuild_tensor(_v2/_v3)(storage, storage_offset, size, stride, ...)`; v3 passes the
    /// dtype of an untyped storage.
    fn rebuild(&mut self, objs: &[Obj], args: &[Value], dtype: Option<&Value>) -> Result<Value> {
        let [storage, offset, size, stride, ..] = args else {
            bail!(
                Io,
                "takes (storage, storage_offset, size, stride, ...), got {} arguments",
                args.len()
            );
        };
        let storage = match storage {
            Value::Host(i) if matches!(self.items[*i], Item::Storage(_)) => *i,
            _ => bail!(Io, "the storage argument is not a persistent storage"),
        };
        let Item::Storage(st) = &self.items[storage] else {
            unreachable!("checked above")
        };
        let stored = match (dtype, &st.typed) {
            (Some(Value::Global(m, n)), _) if &**m == "torch" => torch_dtype(n),
            (Some(d), _) => bail!(Io, "the dtype argument is {d}, not a torch dtype"),
            (None, Some(t)) => t.clone(),
            (None, None) => bail!(Io, "an untyped storage without a dtype"),
        };
        let offset = int(offset, "storage_offset")?;
        let size = ints(objs, size, "size")?;
        let stride = ints(objs, stride, "stride")?;
        if size.len() != stride.len() {
            bail!(Io, "size {size:?} and stride {stride:?} differ in length");
        }
        let Ok(size) = size.iter().map(|&d| usize::try_from(d)).collect() else {
            bail!(Io, "size {size:?} does not fit in memory");
        };
        self.items.push(Item::Tensor(TensorRef {
            storage,
            stored,
            offset,
            size,
            stride,
        }));
        Ok(Value::Host(self.items.len() - 1))
    }
}

impl Host for Torch {
    fn persistent_load(&mut self, objs: &[Obj], pid: &Value) -> Result<Value> {
        let bad = || {
            Error::new(
                crate::error::ErrorKind::Io,
                format!(
                    "persistent id {pid} is not ('storage', type, key, location, numel), what \
                     torch.save writes"
                ),
            )
        };
        let Some([Value::Str(tag), Value::Global(m, n), key, _location, numel]) = items(objs, pid)
        else {
            return Err(bad());
        };
        if &**tag != "storage" {
            return Err(bad());
        }
        let key = match key {
            Value::Str(s) => s.to_string(),
            Value::Int(i) => i.to_string(),
            _ => return Err(bad()),
        };
        let typed = match (&**m, &**n) {
            ("torch.storage", "UntypedStorage") => None,
            ("torch", name) => Some(storage_dtype(name)),
            _ => Some(Err(format!("{m}.{n}"))),
        };
        let numel = int(numel, "the storage's size")?;
        self.items
            .push(Item::Storage(Storage { typed, key, numel }));
        Ok(Value::Host(self.items.len() - 1))
    }

    fn call(
        &mut self,
        objs: &[Obj],
        module: &str,
        name: &str,
        args: &[Value],
    ) -> Result<Option<Value>> {
        Ok(Some(match (module, name) {
            ("torch._utils", "_rebuild_tensor" | "_rebuild_tensor_v2") => {
                self.rebuild(objs, args, None)?
            }
            ("torch._utils", "_rebuild_tensor_v3") => {
                let Some(dtype) = args.get(6) else {
                    bail!(Io, "takes 7 or 8 arguments, got {}", args.len());
                };
                self.rebuild(objs, args, Some(dtype))?
            }
            // A Parameter is its tensor here (`requires_grad` is the model's business).
            ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state")
            | ("torch", "Size") => match args.first() {
                Some(v) => v.clone(),
                None => bail!(Io, "takes at least 1 argument, got none"),
            },
            _ => return Ok(None),
        }))
    }
}

/// Deepest nesting of containers followed.
const MAX_DEPTH: usize = 64;

/// Name the tensors reachable from `v` through dicts, lists and tuples (each reached once per
/// path): `(name, index of the tensor)`. `budget` bounds the containers visited, so a pickle
/// whose containers refer to each other over and over cannot make it run forever.
fn flatten(
    objs: &[Obj],
    torch: &Torch,
    v: &Value,
    prefix: &str,
    depth: usize,
    budget: &mut usize,
    out: &mut Vec<(String, usize)>,
) -> Result<()> {
    if *budget == 0 {
        bail!(
            Io,
            "the pickle's containers refer to each other too many times (a cycle, or nesting \
             that multiplies)"
        );
    }
    *budget -= 1;
    if depth > MAX_DEPTH {
        bail!(Io, "'{prefix}' is nested deeper than {MAX_DEPTH} levels");
    }
    match v {
        Value::Host(i) if matches!(torch.items[*i], Item::Tensor(_)) => {
            out.push((prefix.to_string(), *i))
        }
        Value::Obj(i) => match &objs[*i] {
            Obj::Dict(d) => {
                for (k, v) in &d.entries {
                    let key = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        _ => continue,
                    };
                    flatten(objs, torch, v, &join(prefix, &key), depth + 1, budget, out)?;
                }
            }
            Obj::List(xs) | Obj::Tuple(xs) => {
                for (j, v) in xs.iter().enumerate() {
                    flatten(
                        objs,
                        torch,
                        v,
                        &join(prefix, &j.to_string()),
                        depth + 1,
                        budget,
                        out,
                    )?;
                }
            }
            Obj::Other => {}
        },
        _ => {}
    }
    Ok(())
}

fn load(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    if !zip::is_zip(bytes) {
        bail!(
            Io,
            "not a zip archive: torch.save has written zip archives since PyTorch 1.6; the older \
             format is not read (load it in PyTorch and save it again)"
        );
    }
    let entries = zip::entries(bytes)?;
    let Some(base) = entries
        .first()
        .and_then(|e| e.name.split_once('/'))
        .map(|(b, _)| b.to_string())
    else {
        bail!(
            Io,
            "the archive is empty or its first entry is not in a folder: not a torch.save \
             checkpoint"
        );
    };
    let files: HashMap<&str, &zip::Entry> = entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let file = |name: &str| files.get(format!("{base}/{name}").as_str()).copied();
    let Some(pkl) = file("data.pkl") else {
        bail!(
            Io,
            "no {base}/data.pkl in the archive: not a torch.save checkpoint"
        );
    };
    let big_endian = match file("byteorder") {
        None => false, // written before PyTorch 1.10: little-endian
        Some(e) => match &*e.data()? {
            b"little" => false,
            b"big" => true,
            other => bail!(
                Io,
                "{base}/byteorder is {:?}, not \"little\" or \"big\"",
                String::from_utf8_lossy(other)
            ),
        },
    };
    let pkl = pkl.data()?;
    let mut torch = Torch::default();
    let (top, objs) = pickle::load(&pkl, &mut torch)?;
    let mut named = Vec::new();
    let mut budget = pkl.len() + 1024;
    flatten(&objs, &torch, &top, "", 0, &mut budget, &mut named)?;

    let mut seen = HashSet::new();
    let mut storages: HashMap<&str, Cow<[u8]>> = HashMap::new();
    let mut made: HashMap<usize, Tensor> = HashMap::new();
    // Views of one storage may overlap: bound what they add up to by the file's size, so a
    // small file cannot ask for a huge allocation.
    let mut left = bytes.len().saturating_mul(16).saturating_add(1 << 24);
    let mut out = Vec::with_capacity(named.len());
    for (name, i) in named {
        if !seen.insert(name.clone()) {
            bail!(
                Io,
                "'{name}' appears twice (nested keys flatten to the same dotted name)"
            );
        }
        if let Some(t) = made.get(&i) {
            out.push((name, t.clone()));
            continue;
        }
        let Item::Tensor(t) = &torch.items[i] else {
            unreachable!("flatten names tensors only")
        };
        let Item::Storage(st) = &torch.items[t.storage] else {
            unreachable!("rebuild checks its storage")
        };
        let stored = match &t.stored {
            Ok(s) => *s,
            Err(dt) => bail!(
                DType,
                "'{name}': dtype {dt} is not supported ({SUPPORTED} are)"
            ),
        };
        if !storages.contains_key(st.key.as_str()) {
            let Some(e) = file(&format!("data/{}", st.key)) else {
                bail!(
                    Io,
                    "'{name}': its storage '{}' has no file {base}/data/{} in the archive",
                    st.key,
                    st.key
                );
            };
            storages.insert(&st.key, e.data()?);
        }
        let data = &storages[st.key.as_str()];
        let unit = match st.typed {
            Some(_) => stored.size() as u64,
            None => 1,
        };
        if st.numel.checked_mul(unit) != Some(data.len() as u64) {
            bail!(
                Io,
                "'{name}': storage '{}' has {} bytes, its record says {} elements of {unit} bytes",
                st.key,
                data.len(),
                st.numel
            );
        }
        let raw = gather(t, stored.size(), data, big_endian, &mut left)
            .map_err(|e| Error::new(e.kind, format!("'{name}': {}", e.msg)))?;
        let tensor = load_stored(stored, &raw, &t.size, &name)?;
        made.insert(i, tensor.clone());
        out.push((name, tensor));
    }
    Ok(out)
}

/// The elements of `t` in row-major order, `size` bytes each, from its storage's bytes `data`
/// (checked to hold every element its shape and strides reach), little-endian.
fn gather<'d>(
    t: &TensorRef,
    size: usize,
    data: &'d [u8],
    big_endian: bool,
    left: &mut usize,
) -> Result<Cow<'d, [u8]>> {
    let elements = data.len() / size;
    let n = t.size.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let reach = |n: usize| -> Option<u64> {
        // The last element reached, plus one.
        if n == 0 {
            return Some(0);
        }
        t.size
            .iter()
            .zip(&t.stride)
            .try_fold(t.offset, |a, (&d, &s)| {
                a.checked_add((d as u64 - 1).checked_mul(s)?)
            })?
            .checked_add(1)
    };
    let (Some(n), Some(end)) = (n, n.and_then(reach)) else {
        bail!(
            Io,
            "shape {:?} with strides {:?} overflows",
            t.size,
            t.stride
        );
    };
    if end > elements as u64 {
        bail!(
            Io,
            "shape {:?} with strides {:?} at offset {} reaches element {}, past the {elements} \
             elements of its storage",
            t.size,
            t.stride,
            t.offset,
            end - 1
        );
    }
    // Stride 0 (an expanded tensor) repeats elements: `n` may exceed the storage.
    let bytes = match n.checked_mul(size) {
        Some(b) if b <= *left => b,
        _ => bail!(
            Io,
            "shape {:?} with strides {:?}: the tensors add up to more than 16 times the file's \
             size (views repeating one storage over and over)",
            t.size,
            t.stride
        ),
    };
    *left -= bytes;
    let mut row_major = true;
    let mut want = 1u64;
    for (&d, &s) in t.size.iter().zip(&t.stride).rev() {
        row_major &= d == 1 || s == want;
        want = want.saturating_mul(d as u64);
    }
    let at = |e: u64| e as usize * size;
    let mut out = if n == 0 {
        Cow::Borrowed(&[][..])
    } else if row_major {
        Cow::Borrowed(&data[at(t.offset)..at(t.offset) + bytes])
    } else {
        let mut out = Vec::with_capacity(bytes);
        // Walk the index in row-major order (last axis fastest), tracking the element it is at.
        let mut idx = vec![0usize; t.size.len()];
        let mut e = t.offset;
        for _ in 0..n {
            out.extend_from_slice(&data[at(e)..at(e) + size]);
            for k in (0..t.size.len()).rev() {
                idx[k] += 1;
                e += t.stride[k];
                if idx[k] < t.size[k] {
                    break;
                }
                e -= t.stride[k] * t.size[k] as u64;
                idx[k] = 0;
            }
        }
        Cow::Owned(out)
    };
    if big_endian && size > 1 {
        for c in out.to_mut().chunks_exact_mut(size) {
            c.reverse();
        }
    }
    Ok(out)
}
