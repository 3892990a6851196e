//! Coverage of tinygrad's public `Tensor` API (tests/fixtures/tinygrad_api.txt, pinned from
//! tinygrad's source by scripts/tinygrad_api.py): prints which of its names wgrad has in Rust
//! and in JavaScript (the table is tests/common/api_map.rs), checks that every name the table
//! claims is defined (Rust: a `pub fn` in src/; JS: an op-table row, a `js_name` or a method of
//! src/web/, or js/wgrad.js), and that the README states the counts this test computes.
//! tests/web.rs checks the JS names on the real objects in a browser.

#![cfg(not(target_arch = "wasm32"))]

#[path = "common/api_map.rs"]
mod api_map;

use std::collections::BTreeSet;

fn pinned() -> Vec<String> {
    include_str!("fixtures/tinygrad_api.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect()
}

fn sources(dir: &str) -> String {
    let mut out = String::new();
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())) {
            let path = e.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs" || x == "js") {
                out.push_str(&std::fs::read_to_string(&path).expect("source"));
                out.push('\n');
            }
        }
    }
    out
}

/// The JavaScript names of the op table's rows.
fn table_js() -> BTreeSet<&'static str> {
    let mut names = BTreeSet::new();
    macro_rules! name {
        ($(#[$doc:meta])* $(static)? $js:literal $rs:ident $($rest:tt)*) => {
            names.insert($js);
        };
    }
    wgrad::for_each_op!(name);
    names
}

fn rust_defined(src: &str, name: &str) -> bool {
    ["pub fn ", "pub async fn "].iter().any(|p| {
        [format!("{p}{name}("), format!("{p}{name}<")]
            .iter()
            .any(|pat| src.contains(pat.as_str()))
    })
}

fn js_defined(web: &str, js: &str, table: &BTreeSet<&str>, name: &str) -> bool {
    table.contains(name)
        || web.contains(&format!("js_name = \"{name}\""))
        || web.contains(&format!("js_name = {name})"))
        || web.contains(&format!("js_name = {name},"))
        || web.contains(&format!("pub fn {name}("))
        || js.contains(&format!("Tensor.prototype.{name} ="))
        || js.contains(&format!("Tensor.{name} ="))
}

fn coverage() -> (usize, usize, Vec<String>, Vec<String>) {
    let names = pinned();
    let map: Vec<&(&str, &str, &str)> = api_map::API.iter().collect();
    let mapped: BTreeSet<&str> = map.iter().map(|e| e.0).collect();
    let listed: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(
        mapped.len(),
        map.len(),
        "tests/common/api_map.rs names a tinygrad name twice"
    );
    assert_eq!(
        mapped, listed,
        "tests/common/api_map.rs must list exactly the pinned names"
    );
    let rust_src = sources("src");
    let web_src = sources("src/web");
    let js_src = std::fs::read_to_string("js/wgrad.js").expect("js/wgrad.js");
    let table = table_js();
    let mut undefined = vec![];
    let (mut rust, mut js) = (0, 0);
    let (mut no_rust, mut no_js) = (vec![], vec![]);
    for &&(tg, r, j) in &map {
        if r.is_empty() {
            no_rust.push(tg.to_string());
        } else if rust_defined(&rust_src, r) {
            rust += 1;
        } else {
            undefined.push(format!("Rust {r} (tinygrad {tg})"));
        }
        if j.is_empty() {
            no_js.push(tg.to_string());
        } else if js_defined(&web_src, &js_src, &table, j) {
            js += 1;
        } else {
            undefined.push(format!("JS {j} (tinygrad {tg})"));
        }
    }
    assert!(
        undefined.is_empty(),
        "tests/common/api_map.rs names functions wgrad does not define: {undefined:?}"
    );
    (rust, js, no_rust, no_js)
}

#[test]
fn tinygrad_tensor_api_coverage() {
    let total = pinned().len();
    let (rust, js, no_rust, no_js) = coverage();
    eprintln!("tinygrad Tensor API: {rust} of {total} names in Rust, {js} in JavaScript");
    eprintln!("missing in Rust: {}", no_rust.join(" "));
    eprintln!("missing in JavaScript: {}", no_js.join(" "));
    assert!(
        rust >= 200 && js >= 200,
        "coverage fell: Rust {rust}, JS {js} of {total}"
    );
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let claim =
        format!("{rust} of its {total} public `Tensor` names in Rust and {js} in JavaScript");
    assert!(
        readme.contains(&claim),
        "README.md must state the coverage as \"{claim}\" (tests/api_coverage.rs computes it)"
    );
}
