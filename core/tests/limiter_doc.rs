//! The limiter's module doc sorts every public method of `Limiter` into inputs, outputs and
//! getters ("Call order"): the methods it names there are exactly the public ones, so a method
//! added without its place in the call order (or one renamed away) shows here.
//!
//! Read from the sources: the `//!` lines of `core/src/limiter/mod.rs` up to its first
//! chapter after "Call order", and the `pub fn` items of every `impl Limiter` block under
//! `core/src/limiter/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn limiter_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join("limiter")
}

/// The methods named as `[`Limiter::name`]` in the "Call order" chapter of the module doc.
fn documented() -> BTreeSet<String> {
    let text = fs::read_to_string(limiter_dir().join("mod.rs")).expect("limiter/mod.rs is readable");
    let doc: Vec<&str> = text.lines().take_while(|l| l.starts_with("//!")).collect();
    let start = doc.iter().position(|l| l.trim() == "//! # Call order").expect("a \"Call order\" chapter");
    let mut names = BTreeSet::new();
    for line in doc[start + 1..].iter().take_while(|l| !l.starts_with("//! # ")) {
        let mut rest = *line;
        while let Some(at) = rest.find("[`Limiter::") {
            rest = &rest[at + "[`Limiter::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            names.insert(name);
        }
    }
    names
}

/// The public methods of `Limiter`: `pub fn` at the top level of an `impl Limiter` block.
fn public() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in fs::read_dir(limiter_dir()).expect("limiter/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a readable source");
        let mut in_limiter = false;
        for line in text.lines() {
            if line.starts_with("impl ") {
                in_limiter = line.starts_with("impl Limiter ");
            } else if line.starts_with('}') {
                in_limiter = false;
            } else if in_limiter && let Some(rest) = line.strip_prefix("    pub fn ") {
                names.insert(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
            }
        }
    }
    names
}

#[test]
fn the_call_order_names_every_public_method_and_no_other() {
    let documented = documented();
    let public = public();
    assert!(public.contains("enqueue") && public.contains("snapshot"), "the reader found {public:?}");
    let undocumented: Vec<_> = public.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&public).collect();
    assert!(undocumented.is_empty(), "public methods missing from the call order: {undocumented:?}");
    assert!(stale.is_empty(), "the call order names methods that are not public: {stale:?}");
}
