//! README.md's Rust quickstart is this crate's example `examples/quickstart.rs`, which
//! `cargo test --workspace` builds and `proxy/tests/middleware.rs` runs against the Discord
//! imitation: the two must stay the same text, so the README's block compiles and runs as pasted.

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

#[test]
fn the_readme_rust_quickstart_is_the_crate_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).expect("README.md beside the crate");
    let example = std::fs::read_to_string(root.join("examples/quickstart.rs")).expect("the quickstart example");
    let block = rust_block_after(&readme, "## Quickstart: Rust").expect("README.md has a Rust quickstart");
    let example: Vec<String> = example.lines().map(|l| l.trim_end().to_string()).collect();
    assert_eq!(block, example, "README.md's Rust quickstart and tokio/examples/quickstart.rs differ");
}
