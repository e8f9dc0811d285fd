//! README.md's Rust quickstart is this crate's documented example, which `cargo test` runs as a
//! doctest: the two must stay the same text, so the README's block compiles and runs as pasted.

use std::path::Path;

/// The lines of the first fenced block opening with "```rust" after `heading` in `text`.
fn rust_block_after(text: &str, heading: &str) -> Option<Vec<String>> {
    let from = text.find(heading)?;
    let mut lines = text[from..].lines().skip_while(|l| l.trim() != "```rust").skip(1);
    let mut out = Vec::new();
    for line in lines.by_ref() {
        if line.trim() == "```" {
            return Some(out);
        }
        out.push(line.trim_end().to_string());
    }
    None
}

/// The lines of the crate documentation's first example (its `//! ` prefix removed).
fn doc_example(lib: &str) -> Vec<String> {
    let doc: Vec<&str> = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.strip_prefix("//! ").unwrap_or(l.strip_prefix("//!").unwrap_or(l)))
        .collect();
    let start = doc.iter().position(|l| l.trim() == "```").expect("the crate docs have an example") + 1;
    let end = start + doc[start..].iter().position(|l| l.trim() == "```").expect("the example ends");
    doc[start..end].iter().map(|l| l.trim_end().to_string()).collect()
}

#[test]
fn the_readme_rust_quickstart_is_the_crate_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).expect("README.md beside the crate");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let block = rust_block_after(&readme, "## Quickstart: Rust").expect("README.md has a Rust quickstart");
    assert!(block.iter().any(|l| l.contains("ratelane_tokio")), "the quickstart uses ratelane-tokio");
    assert_eq!(block, doc_example(&lib), "README.md's Rust quickstart and tokio/src/lib.rs's example differ");
}
