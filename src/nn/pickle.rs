//! A pickle virtual machine for what `torch.save` writes (protocol 2 by default; the opcodes of
//! protocols 0 to 5 that describe plain data are read too): numbers, strings, tuples, lists,
//! dicts, memo references, globals and calls, persistent ids. Python is never run: a global is
//! a name, and calling one asks the `Host` (the torch loader builds storages and tensors there);
//! `collections.OrderedDict` becomes a dict, and anything else the host does not model becomes
//! an opaque object whose contents are dropped.
//!
//! Tuples, lists and dicts live in an arena and values refer to them by index: later opcodes
//! change lists and dicts in place (memo references share them), and a deeply nested pickle
//! cannot overflow the stack when it is dropped. Every length read from the input is checked
//! against the bytes left, and each opcode adds at most one object, so memory stays
//! proportional to the input. Errors carry no prefix: the caller names the format.

use crate::error::{bail, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// A value on the machine's stack.
#[derive(Clone, Debug)]
pub(super) enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// A global (`module`, `name`), as GLOBAL / STACK_GLOBAL name it.
    Global(Rc<str>, Rc<str>),
    /// A tuple, list, dict or opaque object: an index into the arena.
    Obj(usize),
    /// A value the host made (an index into the host's own table).
    Host(usize),
    /// A value not modelled (an integer wider than 64 bits).
    Opaque,
}

/// Values as Python writes them, for error messages (containers by kind only).
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::None => f.write_str("None"),
            Value::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{:?}", &**s),
            Value::Bytes(b) => write!(f, "{} bytes", b.len()),
            Value::Global(m, n) => write!(f, "{m}.{n}"),
            Value::Obj(_) => f.write_str("a container"),
            Value::Host(_) => f.write_str("a storage or tensor"),
            Value::Opaque => f.write_str("an integer wider than 64 bits"),
        }
    }
}

/// An object of the arena.
pub(super) enum Obj {
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Dict),
    /// The result of calling a global nobody models; what is added to it is dropped.
    Other,
}

/// A dict in insertion order (as Python's); string and integer keys replace earlier equal ones.
#[derive(Default)]
pub(super) struct Dict {
    pub entries: Vec<(Value, Value)>,
    index: HashMap<Key, usize>,
}

#[derive(Hash, PartialEq, Eq)]
enum Key {
    Str(Rc<str>),
    Int(i64),
}

impl Dict {
    fn insert(&mut self, k: Value, v: Value) {
        let key = match &k {
            Value::Str(s) => Some(Key::Str(s.clone())),
            Value::Int(i) => Some(Key::Int(*i)),
            Value::Bool(b) => Some(Key::Int(*b as i64)),
            _ => None,
        };
        match key.as_ref().and_then(|key| self.index.get(key)) {
            Some(&i) => self.entries[i].1 = v,
            None => {
                if let Some(key) = key {
                    self.index.insert(key, self.entries.len());
                }
                self.entries.push((k, v));
            }
        }
    }
}

/// What a loaded pickle refers to outside plain data.
pub(super) trait Host {
    /// The object for a persistent id (BINPERSID / PERSID).
    fn persistent_load(&mut self, objs: &[Obj], pid: &Value) -> Result<Value>;
    /// Call the global `module.name` with `args`: `Some(result)`, or `None` when the host does
    /// not model it (the result is then an opaque object).
    fn call(
        &mut self,
        objs: &[Obj],
        module: &str,
        name: &str,
        args: &[Value],
    ) -> Result<Option<Value>>;
}

/// The elements of a tuple or list value.
pub(super) fn items<'o>(objs: &'o [Obj], v: &Value) -> Option<&'o [Value]> {
    match v {
        Value::Obj(i) => match &objs[*i] {
            Obj::Tuple(t) | Obj::List(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// Run the pickle `data` to its STOP: the value it produced and the arena its objects live in.
pub(super) fn load(data: &[u8], host: &mut dyn Host) -> Result<(Value, Vec<Obj>)> {
    let mut vm = Vm {
        data,
        pos: 0,
        op_at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        objs: Vec::new(),
        host,
    };
    let top = vm.run()?;
    Ok((top, vm.objs))
}

struct Vm<'a, 'h> {
    data: &'a [u8],
    pos: usize,
    /// Where the opcode being run starts (for errors).
    op_at: usize,
    stack: Vec<Value>,
    /// Stack lengths at each MARK.
    marks: Vec<usize>,
    memo: HashMap<u64, Value>,
    objs: Vec<Obj>,
    host: &'h mut dyn Host,
}

/// Opcode names for error messages.
fn op_name(op: u8) -> &'static str {
    match op {
        b'S' => "STRING",
        b'V' => "UNICODE",
        b'i' => "INST",
        b'o' => "OBJ",
        0x82..=0x84 => "EXT",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "unknown",
    }
}

impl<'a> Vm<'a, '_> {
    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let data: &'a [u8] = self.data;
        let left = self.data.len() - self.pos;
        if n > left as u64 {
            bail!(
                Io,
                "pickle truncated: the opcode at byte {} needs {n} bytes, {left} are left",
                self.op_at
            );
        }
        let s = &data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    fn arg<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N as u64)?.try_into().expect("N bytes"))
    }
    fn line(&mut self) -> Result<String> {
        let data: &'a [u8] = self.data;
        let rest = &data[self.pos..];
        let Some(n) = rest.iter().position(|&b| b == b'\n') else {
            bail!(
                Io,
                "pickle truncated: the opcode at byte {} has no end of line",
                self.op_at
            );
        };
        self.pos += n + 1;
        Ok(String::from_utf8_lossy(&rest[..n]).into_owned())
    }
    fn err_at(&self, what: impl std::fmt::Display) -> crate::error::Error {
        crate::error::Error::new(
            crate::error::ErrorKind::Io,
            format!("pickle: byte {}: {what}", self.op_at),
        )
    }
    fn pop(&mut self) -> Result<Value> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(self.err_at("the stack is empty (underflow)"));
        }
        Ok(self.stack.pop().expect("checked"))
    }
    fn top(&self) -> Result<&Value> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(self.err_at("the stack is empty (underflow)"));
        }
        Ok(self.stack.last().expect("checked"))
    }
    /// The values pushed since the last MARK, which is dropped.
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let Some(m) = self.marks.pop() else {
            return Err(self.err_at("no MARK to pop to"));
        };
        Ok(self.stack.split_off(m))
    }
    fn new_obj(&mut self, o: Obj) -> Value {
        self.objs.push(o);
        Value::Obj(self.objs.len() - 1)
    }
    fn string(&mut self, n: u64) -> Result<Value> {
        let b = self.take(n)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(Value::Str(Rc::from(s))),
            Err(e) => Err(self.err_at(format!("a string is not UTF-8: {e}"))),
        }
    }
    fn bytes(&mut self, n: u64) -> Result<Value> {
        Ok(Value::Bytes(Rc::from(self.take(n)?)))
    }
    /// A little-endian two's-complement integer (LONG1 / LONG4).
    fn long(&mut self, n: u64) -> Result<Value> {
        let b = self.take(n)?;
        if b.len() > 8 {
            return Ok(Value::Opaque);
        }
        let neg = b.last().is_some_and(|&x| x & 0x80 != 0);
        let mut w = [if neg { 0xff } else { 0 }; 8];
        w[..b.len()].copy_from_slice(b);
        Ok(Value::Int(i64::from_le_bytes(w)))
    }
    fn memo_get(&self, k: u64) -> Result<Value> {
        self.memo
            .get(&k)
            .cloned()
            .ok_or_else(|| self.err_at(format!("memo key {k} was never stored")))
    }
    fn memo_put(&mut self, k: u64) -> Result<()> {
        let v = self.top()?.clone();
        self.memo.insert(k, v);
        Ok(())
    }
    fn append(&mut self, list: &Value, values: Vec<Value>) -> Result<()> {
        match list {
            Value::Obj(i) => match &mut self.objs[*i] {
                Obj::List(l) => l.extend(values),
                Obj::Other => {}
                _ => return Err(self.err_at("APPEND to something that is not a list")),
            },
            _ => return Err(self.err_at("APPEND to something that is not a list")),
        }
        Ok(())
    }
    fn set_items(&mut self, dict: &Value, kv: Vec<Value>) -> Result<()> {
        if kv.len() % 2 != 0 {
            return Err(self.err_at("SETITEMS with an odd number of values"));
        }
        match dict {
            Value::Obj(i) => match &mut self.objs[*i] {
                Obj::Dict(d) => {
                    let mut it = kv.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        d.insert(k, v)
                    }
                }
                Obj::Other => {}
                _ => return Err(self.err_at("SETITEM on something that is not a dict")),
            },
            _ => return Err(self.err_at("SETITEM on something that is not a dict")),
        }
        Ok(())
    }
    /// REDUCE / NEWOBJ: call `func` with the tuple `args`.
    fn call(&mut self, func: Value, args: Value) -> Result<Value> {
        let Some(args) = items(&self.objs, &args).map(<[Value]>::to_vec) else {
            return Err(self.err_at("a call's arguments are not a tuple"));
        };
        let Value::Global(module, name) = func else {
            return Ok(self.new_obj(Obj::Other));
        };
        if (&*module, &*name) == ("collections", "OrderedDict") {
            let mut d = Dict::default();
            // OrderedDict([(key, value), ...]); torch's pickles pass no argument and SETITEMS.
            for pair in args
                .first()
                .and_then(|a| items(&self.objs, a))
                .unwrap_or(&[])
            {
                if let Some([k, v]) = items(&self.objs, pair) {
                    d.insert(k.clone(), v.clone());
                }
            }
            return Ok(self.new_obj(Obj::Dict(d)));
        }
        match self
            .host
            .call(&self.objs, &module, &name, &args)
            .map_err(|e| self.err_at(format!("{module}.{name}: {}", e.msg)))?
        {
            Some(v) => Ok(v),
            None => Ok(self.new_obj(Obj::Other)),
        }
    }

    fn run(&mut self) -> Result<Value> {
        loop {
            self.op_at = self.pos;
            let Some(&op) = self.data.get(self.pos) else {
                bail!(
                    Io,
                    "pickle truncated: no STOP opcode in its {} bytes",
                    self.data.len()
                );
            };
            self.pos += 1;
            let v = match op {
                0x80 => {
                    let [p] = self.arg::<1>()?;
                    if p > 5 {
                        return Err(self.err_at(format!("pickle protocol {p} (0 to 5 are read)")));
                    }
                    continue;
                }
                0x95 => {
                    self.arg::<8>()?; // FRAME: the frame's length; frames need no handling.
                    continue;
                }
                b'.' => return self.pop(),
                b'(' => {
                    self.marks.push(self.stack.len());
                    continue;
                }
                b'0' => {
                    if self.stack.len() > self.marks.last().copied().unwrap_or(0) {
                        self.stack.pop();
                    } else {
                        self.pop_mark()?;
                    }
                    continue;
                }
                b'1' => {
                    self.pop_mark()?;
                    continue;
                }
                b'2' => self.top()?.clone(),
                b'N' => Value::None,
                0x88 => Value::Bool(true),
                0x89 => Value::Bool(false),
                b'J' => Value::Int(i32::from_le_bytes(self.arg()?) as i64),
                b'K' => Value::Int(self.arg::<1>()?[0] as i64),
                b'M' => Value::Int(u16::from_le_bytes(self.arg()?) as i64),
                0x8a => {
                    let [n] = self.arg::<1>()?;
                    self.long(n as u64)?
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.arg()?);
                    if n < 0 {
                        return Err(self.err_at(format!("LONG4 of negative length {n}")));
                    }
                    self.long(n as u64)?
                }
                b'I' | b'L' => {
                    let l = self.line()?;
                    match l.trim_end_matches('L') {
                        "00" if op == b'I' => Value::Bool(false),
                        "01" if op == b'I' => Value::Bool(true),
                        t => match t.parse::<i64>() {
                            Ok(i) => Value::Int(i),
                            Err(_)
                                if t.trim_start_matches('-')
                                    .bytes()
                                    .all(|c| c.is_ascii_digit())
                                    && !t.is_empty() =>
                            {
                                Value::Opaque
                            }
                            Err(_) => return Err(self.err_at(format!("bad integer {l:?}"))),
                        },
                    }
                }
                b'F' => {
                    let l = self.line()?;
                    match l.parse::<f64>() {
                        Ok(f) => Value::Float(f),
                        Err(_) => return Err(self.err_at(format!("bad float {l:?}"))),
                    }
                }
                b'G' => Value::Float(f64::from_be_bytes(self.arg()?)),
                b'X' => {
                    let n = u32::from_le_bytes(self.arg()?);
                    self.string(n as u64)?
                }
                0x8c => {
                    let [n] = self.arg::<1>()?;
                    self.string(n as u64)?
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.arg()?);
                    self.string(n)?
                }
                // Protocol 0-2 byte strings: text (torch loads them as UTF-8).
                b'T' | b'U' => {
                    let n = if op == b'T' {
                        let n = i32::from_le_bytes(self.arg()?);
                        u64::try_from(n)
                            .map_err(|_| self.err_at(format!("BINSTRING of negative length {n}")))?
                    } else {
                        self.arg::<1>()?[0] as u64
                    };
                    Value::Str(Rc::from(String::from_utf8_lossy(self.take(n)?).as_ref()))
                }
                b'B' => {
                    let n = u32::from_le_bytes(self.arg()?);
                    self.bytes(n as u64)?
                }
                b'C' => {
                    let [n] = self.arg::<1>()?;
                    self.bytes(n as u64)?
                }
                0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.arg()?);
                    self.bytes(n)?
                }
                b')' => self.new_obj(Obj::Tuple(vec![])),
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut t = vec![Value::None; n];
                    for slot in t.iter_mut().rev() {
                        *slot = self.pop()?;
                    }
                    self.new_obj(Obj::Tuple(t))
                }
                b't' => {
                    let t = self.pop_mark()?;
                    self.new_obj(Obj::Tuple(t))
                }
                // FROZENSET: a set is read as a tuple of its elements.
                0x91 => {
                    let t = self.pop_mark()?;
                    self.new_obj(Obj::Tuple(t))
                }
                b']' | 0x8f => self.new_obj(Obj::List(vec![])),
                b'l' => {
                    let l = self.pop_mark()?;
                    self.new_obj(Obj::List(l))
                }
                b'}' => self.new_obj(Obj::Dict(Dict::default())),
                b'd' => {
                    let kv = self.pop_mark()?;
                    let d = self.new_obj(Obj::Dict(Dict::default()));
                    self.set_items(&d, kv)?;
                    d
                }
                b'a' => {
                    let v = self.pop()?;
                    let l = self.top()?.clone();
                    self.append(&l, vec![v])?;
                    continue;
                }
                // APPENDS, and ADDITEMS (a set is read as a list).
                b'e' | 0x90 => {
                    let vs = self.pop_mark()?;
                    let l = self.top()?.clone();
                    self.append(&l, vs)?;
                    continue;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?.clone();
                    self.set_items(&d, vec![k, v])?;
                    continue;
                }
                b'u' => {
                    let kv = self.pop_mark()?;
                    let d = self.top()?.clone();
                    self.set_items(&d, kv)?;
                    continue;
                }
                b'q' => {
                    let [k] = self.arg::<1>()?;
                    self.memo_put(k as u64)?;
                    continue;
                }
                b'r' => {
                    let k = u32::from_le_bytes(self.arg()?);
                    self.memo_put(k as u64)?;
                    continue;
                }
                b'p' => {
                    let l = self.line()?;
                    let k = l
                        .parse::<u64>()
                        .map_err(|_| self.err_at(format!("bad PUT key {l:?}")))?;
                    self.memo_put(k)?;
                    continue;
                }
                0x94 => {
                    let k = self.memo.len() as u64;
                    self.memo_put(k)?;
                    continue;
                }
                b'h' => {
                    let [k] = self.arg::<1>()?;
                    self.memo_get(k as u64)?
                }
                b'j' => {
                    let k = u32::from_le_bytes(self.arg()?);
                    self.memo_get(k as u64)?
                }
                b'g' => {
                    let l = self.line()?;
                    let k = l
                        .parse::<u64>()
                        .map_err(|_| self.err_at(format!("bad GET key {l:?}")))?;
                    self.memo_get(k)?
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    Value::Global(Rc::from(module), Rc::from(name))
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (module, name) else {
                        return Err(self.err_at("STACK_GLOBAL of values that are not strings"));
                    };
                    Value::Global(module, name)
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.call(func, args)?
                }
                0x92 => {
                    self.pop()?; // keyword arguments
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.call(func, args)?
                }
                // BUILD: the state set on an object (e.g. a state dict's `_metadata`) is
                // dropped; the object stays on the stack.
                b'b' => {
                    self.pop()?;
                    self.top()?;
                    continue;
                }
                b'Q' => {
                    let pid = self.pop()?;
                    self.persistent_load(pid)?
                }
                b'P' => {
                    let pid = Value::Str(Rc::from(self.line()?));
                    self.persistent_load(pid)?
                }
                _ => {
                    return Err(self.err_at(format!(
                        "unsupported pickle opcode 0x{op:02x} ({})",
                        op_name(op)
                    )))
                }
            };
            self.stack.push(v);
        }
    }
    fn persistent_load(&mut self, pid: Value) -> Result<Value> {
        self.host
            .persistent_load(&self.objs, &pid)
            .map_err(|e| self.err_at(e.msg))
    }
}
