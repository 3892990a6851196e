//! The user docs stay true to the code without running anything: the README's Rust example is
//! `examples/readme.rs` (which `cargo test` builds, and which runs as an example), and every
//! relative link in README.md and docs/*.md names a file or folder of the repository.

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
