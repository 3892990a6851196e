//! The layering rule, enforced: a module of `src/` may refer (`crate::…`) only to modules of its
//! own layer or of layers below it. `LAYERS` is the one place the order is written down (DESIGN.md
//! describes it); a module missing from it is an error too, so a new module has to be placed.
//!
//! Every `crate::name` path counts, in `use` lists (`use crate::{a::X, b}`), in expressions and
//! in unit-test modules alike; comments and string literals do not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lowest first. Modules on one line form one layer and may use each other.
const LAYERS: &[&[&str]] = &[
    // Helpers that know nothing of the pipeline.
    &["error", "dtype", "device", "context"],
    // The op vocabulary and its semantics; views.
    &["ops", "shape"],
    // The kernel IR handed from the scheduler to codegen, with its rewrite rules.
    &["kernel"],
    // optimize -> linearize -> render.
    &["codegen"],
    // Backends: buffers, programs, launches.
    &["runtime"],
    // The lazy graph's node (it owns buffers) and the scheduler that fuses it into kernels.
    &["uop", "schedule"],
    // Realizing schedules, the capture hook, memory planning.
    &["realize", "memory", "search"],
    // The user-facing tensor (grad, movement, reduce, functional, random and the op table
    // live under it).
    &[
        "tensor",
        "grad",
        "movement",
        "reduce",
        "functional",
        "random",
        "table",
    ],
    &["jit"],
    &["nn"],
    &["web"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module a file belongs to: the first path component under `src/` (`codegen/wgsl.rs` is
/// `codegen`, `tensor.rs` is `tensor`); `None` for the crate root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("file under src/");
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib").then_some(name)
}

/// The source with comments, string and char literals blanked out (lines kept).
fn code_only(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let blank = |c: u8| if c == b'\n' { '\n' } else { ' ' };
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                out.push(' ');
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if b[i] == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) {
            // Raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let mut k = j + 1;
                while k < b.len() && !b[k..].starts_with(&close) {
                    k += 1;
                }
                let end = (k + close.len()).min(b.len());
                for &c in &b[i..end] {
                    out.push(blank(c));
                }
                i = end;
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    out.push(' ');
                    i += 1;
                }
                out.push(blank(b[i]));
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('x', '\n', '\''); lifetimes ('a) are left alone.
            let mut j = i + 1;
            if b[j] == b'\\' {
                j += 1;
            }
            j += 1;
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            for _ in i..=j.min(b.len() - 1) {
                out.push(' ');
            }
            i = j + 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn ident_at(b: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&b[start..i]).into_owned(), i)
}

/// The top-level module named by every `crate::` path in `code`, with its line number.
fn crate_refs(code: &str) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let line_of = |i: usize| code[..i].matches('\n').count() + 1;
    let mut out = vec![];
    let mut i = 0;
    while let Some(p) = code[i..].find("crate::") {
        let at = i + p;
        i = at + "crate::".len();
        // `$crate::` in macros and `crate::` both count; `foo_crate::` does not.
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        if b.get(i) == Some(&b'{') {
            // `crate::{a::X, b, c::{Y, Z}}`: the first identifier of each top-level item.
            let mut depth = 0;
            let mut j = i;
            let mut expect_item = true;
            while j < b.len() {
                match b[j] {
                    b'{' => {
                        depth += 1;
                        j += 1;
                    }
                    b'}' => {
                        depth -= 1;
                        j += 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        expect_item = true;
                        j += 1;
                    }
                    c if depth == 1 && expect_item && (c.is_ascii_alphabetic() || c == b'_') => {
                        let (name, k) = ident_at(b, j);
                        out.push((name, line_of(j)));
                        expect_item = false;
                        j = k;
                    }
                    _ => j += 1,
                }
            }
            i = j;
        } else {
            let (name, k) = ident_at(b, i);
            out.push((name, line_of(at)));
            i = k;
        }
    }
    out
}

/// Items re-exported at the crate root (`crate::Tensor`) resolve to the module they come from.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in code_only(lib).split(';') {
        let s = stmt.trim();
        let Some(rest) = s.strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.split_whitespace().last().unwrap_or("").trim();
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() {
                map.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    map
}

#[test]
fn no_module_refers_to_a_higher_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let exports = root_exports(&lib);
    let mut problems = vec![];
    for f in &files {
        let Some(module) = module_of(&src, f) else {
            continue;
        };
        let rel = f.strip_prefix(root).unwrap_or(f).display().to_string();
        let Some(from) = layer_of(&module) else {
            problems.push(format!(
                "{rel}: module `{module}` is not in tests/layers.rs's LAYERS"
            ));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("source file");
        for (name, line) in crate_refs(&code_only(&text)) {
            let target = exports.get(&name).cloned().unwrap_or(name.clone());
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(to) if to > from => problems.push(format!(
                    "{rel}:{line}: `{module}` (layer {from}) uses `crate::{name}` of `{target}` (layer {to})"
                )),
                Some(_) => {}
                // Crate-root items that are not modules (macros, the `Result` alias) and
                // names that are not modules at all are out of scope.
                None => {}
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} upward references:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_scanner_sees_use_lists_and_ignores_comments() {
    let code = code_only(
        "use crate::{a::X, b, c::{Y, Z}};\n// crate::hidden\nlet s = \"crate::str\";\nx = crate::d::f();\n",
    );
    let names: Vec<String> = crate_refs(&code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    let ex = root_exports("pub use tensor::{Axes, Tensor};\npub use jit::TinyJit;\n");
    assert_eq!(ex.get("Tensor").map(String::as_str), Some("tensor"));
    assert_eq!(ex.get("TinyJit").map(String::as_str), Some("jit"));
}
