//! The user docs stay true to the code without running anything: the README's Rust example is
//! `examples/readme.rs` (which `cargo test` builds, and which runs as an example), and every
//! relative link in README.md and docs/*.md names a file or folder of the repository. Every
//! `export` of the JS declarations (js/wgrad.d.ts) carries a TSDoc comment, and their header
//! names files that exist.

use std::path::{Path, PathBuf};

/// The code of examples/readme.rs after its `//!` header.
fn example_code() -> String {
    let src = std::fs::read_to_string("examples/readme.rs").expect("examples/readme.rs");
    let body: Vec<&str> = src
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .collect();
    body.join("\n") + "\n"
}

#[test]
fn the_readme_shows_examples_readme_rs() {
    let readme = std::fs::read_to_string("README.md").expect("README.md");
    let start = readme
        .find("```rust\n")
        .expect("README.md has a ```rust block")
        + 8;
    let end = start
        + readme[start..]
            .find("```\n")
            .expect("the ```rust block ends");
    assert_eq!(
        &readme[start..end],
        example_code(),
        "README.md's Rust example must be examples/readme.rs's code (copy it over)"
    );
}

/// `](target)` links that are not URLs or anchors, with any `#anchor` removed.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(j) = rest.find(')') else { break };
        let target = rest[..j].split('#').next().unwrap_or("").trim();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
    }
    out
}

#[test]
fn relative_links_in_the_docs_resolve() {
    let mut pages: Vec<PathBuf> = vec![PathBuf::from("README.md")];
    for e in std::fs::read_dir("docs").expect("docs/") {
        let p = e.expect("docs/ entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a docs page");
        let dir = page.parent().unwrap_or(Path::new(""));
        for link in relative_links(&text) {
            if !dir.join(&link).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// The line indices of `export`s in `text` not directly preceded by a `/** ... */` comment.
fn undocumented_exports(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.starts_with("export ") {
            continue;
        }
        let mut j = i;
        let documented = loop {
            if j == 0 {
                break false;
            }
            j -= 1;
            let l = lines[j].trim();
            if j == i - 1 && !l.ends_with("*/") {
                break false;
            }
            if let Some(k) = l.find("/*") {
                break l[k..].starts_with("/**");
            }
        };
        if !documented {
            out.push(format!("line {}: {line}", i + 1));
        }
    }
    out
}

#[test]
fn every_export_of_the_js_declarations_has_tsdoc() {
    let dts = std::fs::read_to_string("js/wgrad.d.ts").expect("js/wgrad.d.ts");
    assert!(dts.lines().filter(|l| l.starts_with("export ")).count() >= 10);
    let missing = undocumented_exports(&dts);
    assert!(
        missing.is_empty(),
        "js/wgrad.d.ts: exports without a /** */ comment: {missing:#?}"
    );
    // The types src/web/ adds to the generated declarations (pkg/web/wgrad.d.ts) by hand.
    let web = std::fs::read_to_string("src/web/mod.rs").expect("src/web/mod.rs");
    let start = web
        .find("const TS_TYPES: &str = r#\"")
        .expect("TS_TYPES in src/web/mod.rs");
    let types = &web[start..start + web[start..].find("\"#;").expect("TS_TYPES ends")];
    assert!(types.lines().filter(|l| l.starts_with("export ")).count() >= 10);
    let missing = undocumented_exports(types);
    assert!(
        missing.is_empty(),
        "src/web/mod.rs TS_TYPES: exports without a /** */ comment: {missing:#?}"
    );
    // The check itself: a plain comment, or none, is not TSDoc.
    let bad = "/** ok */\nexport const a: number;\n// plain\nexport const b: number;\n\nexport const c: number;\n/* not doc */\nexport const d: number;\n";
    assert_eq!(undocumented_exports(bad).len(), 3);
    // The header names files of the repository that exist.
    for word in dts
        .lines()
        .take_while(|l| l.starts_with("//"))
        .flat_map(|l| l.split_whitespace())
    {
        let path = word.trim_matches(|c: char| !(c.is_alphanumeric() || "/._-".contains(c)));
        if path.starts_with("src/") || path.starts_with("js/") {
            assert!(
                Path::new(path.trim_end_matches('.')).exists(),
                "js/wgrad.d.ts's header names {path}, which does not exist"
            );
        }
    }
}
