//! The core's top-level modules form a DAG: no module reaches itself through the code paths
//! (`crate::module...`) the others name. `types` (the boundary values every binding passes)
//! and `error` are leaves; a module's children naming their parent does not count (it is one
//! module).
//!
//! Read from the sources, outside comments (doc links may point anywhere); tests inside a
//! module count, since a test module that needs another module's internals is a circle too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("core/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`limiter.rs` and `limiter/x.rs`: `limiter`), or
/// `None` for the crate root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under core/src");
    let first = relative.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib").then_some(name)
}

/// The names after `crate::` in `code`: one path segment, or each name of a `crate::{...}`
/// group.
fn named(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.push(name);
            }
        } else {
            names.push(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect());
        }
    }
    names
}

/// Module -> the other top-level modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in &files {
        let Some(module) = module_of(&src, file) else { continue };
        let text = fs::read_to_string(file).expect("a readable source");
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for name in named(code) {
                if name != module && modules.contains(&name) {
                    edges.get_mut(&module).expect("a known module").insert(name);
                }
            }
        }
    }
    edges
}

/// A circle through `at`, if the depth-first walk finds one: the modules in order.
fn circle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    at: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(start) = path.iter().position(|m| m == at) {
        let mut found = path[start..].to_vec();
        found.push(at.to_string());
        return Some(found);
    }
    if done.contains(at) {
        return None;
    }
    path.push(at.to_string());
    for next in &edges[at] {
        if let Some(found) = circle(edges, next, path, done) {
            return Some(found);
        }
    }
    path.pop();
    done.insert(at.to_string());
    None
}

#[test]
fn the_top_level_modules_form_a_dag() {
    let edges = graph();
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        if let Some(found) = circle(&edges, module, &mut Vec::new(), &mut done) {
            panic!("a module circle: {}\nthe graph: {edges:#?}", found.join(" -> "));
        }
    }
}

#[test]
fn the_boundary_values_and_errors_are_leaves() {
    let edges = graph();
    for leaf in ["types", "error"] {
        assert!(edges[leaf].is_empty(), "{leaf} names {:?}", edges[leaf]);
    }
    // The server-side limiters know nothing of the client engine or its shared mode.
    for client_side in ["limiter", "shared", "sim", "headers"] {
        assert!(!edges["server"].contains(client_side), "server names {client_side}");
    }
}

#[test]
fn the_reader_sees_paths_and_groups() {
    assert_eq!(named("use crate::types::{Nanos, SECOND};"), ["types"]);
    assert_eq!(named("use crate::{Limiter, sim};"), ["Limiter", "sim"]);
    assert_eq!(named("let x = crate::server::saturate(crate::prior::x());"), ["server", "prior"]);
}
