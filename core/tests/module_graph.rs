//! The core's top-level modules form a DAG: no module reaches itself through the code paths
//! (`crate::module...`) the others name. `types` (the boundary values every binding passes)
//! and `error` are leaves; a module's children naming their parent does not count (it is one
//! module).
//!
//! Read from the sources, outside comments (doc links may point anywhere); tests inside a
//! module count, since a test module that needs another module's internals is a circle too.
//!
//! Inside `limiter/`, the engine's rooms keep their doors closed (issue 43): only the files
//! that hold transitions across sub-states know `Limiter` (`impl Limiter`, `use super::*`);
//! the sub-state files name each other one way only; the bucket, identity and store types
//! keep their fields private.

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
    // `rng` too: the engine's jitter and the simulator draw from it.
    for leaf in ["types", "error", "rng"] {
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

/// The files that hold the limiter's transitions across sub-states: the only ones that may
/// know `Limiter` itself.
const TRANSITIONS: [&str; 3] = ["mod.rs", "shared.rs", "snapshot.rs"];

/// The sub-state types whose fields are their own (no `pub(super)` field): (file, type).
const PRIVATE_FIELDS: [(&str, &str); 16] = [
    ("bucket.rs", "Bucket"),
    ("global.rs", "Identity"),
    ("global.rs", "Lease"),
    ("global.rs", "LearnedCap"),
    ("global.rs", "RoundTrips"),
    ("outage.rs", "Store"),
    ("outage.rs", "SendLog"),
    ("outage.rs", "Recovery"),
    ("costs.rs", "Budget"),
    ("costs.rs", "Margins"),
    ("host.rs", "EdgeBan"),
    ("host.rs", "InvalidBudget"),
    ("contact.rs", "Contacts"),
    ("contact.rs", "Contact"),
    ("global.rs", "FirstWindow"),
    ("routes.rs", "Routes"),
];

/// Each `.rs` file of `limiter/` by file name, with its text outside comments (`//` lines).
fn limiter_files() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join("limiter");
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(&dir).expect("limiter/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a readable source");
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        let name = path.file_name().and_then(|n| n.to_str()).expect("a file name").to_string();
        files.insert(name, code.join("\n"));
    }
    files
}

/// The code of `text` before its unit tests (`#[cfg(test)]` at the top level), which may name
/// the file's own items through `super`.
fn outside_tests(text: &str) -> &str {
    text.find("\n#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The sibling modules a file of `limiter/` names through `super::` (`use super::x::..`,
/// `use super::{x, y}`, `super::x::item`), given the siblings' names; `*` for a glob import
/// of the parent.
fn siblings_named(code: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        rest = &rest[at + "super::".len()..];
        let parts: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end].split(',').map(|p| p.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()).collect()
        } else if rest.starts_with('*') {
            vec!["*".to_string()]
        } else {
            vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()]
        };
        names.extend(parts.into_iter().filter(|p| p == "*" || siblings.contains(p)));
    }
    names
}

#[test]
fn only_the_transition_files_know_the_limiter() {
    let files = limiter_files();
    for (name, code) in &files {
        // A unit test module's glob of its own file counts too: the sub-state files name what
        // they use, tests included.
        let knows = outside_tests(code).lines().any(|l| l.starts_with("impl Limiter"))
            || code.lines().any(|l| l.trim() == "use super::*;");
        assert!(
            !knows || TRANSITIONS.contains(&name.as_str()),
            "limiter/{name} knows Limiter (impl Limiter or use super::*): only {TRANSITIONS:?} may"
        );
    }
    for name in TRANSITIONS {
        assert!(files.contains_key(name), "limiter/{name} is gone: update TRANSITIONS");
    }
}

#[test]
fn no_two_limiter_modules_name_each_other() {
    let files = limiter_files();
    let modules: BTreeSet<String> =
        files.keys().filter(|f| *f != "mod.rs").map(|f| f.trim_end_matches(".rs").to_string()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, code) in &files {
        if name == "mod.rs" {
            continue;
        }
        let module = name.trim_end_matches(".rs").to_string();
        let mut named = siblings_named(outside_tests(code), &modules);
        named.remove(&module);
        edges.insert(module, named);
    }
    for (a, named) in &edges {
        for b in named {
            if b == "*" {
                continue; // a glob of the parent: `only_the_transition_files_know_the_limiter`
            }
            assert!(!edges[b].contains(a), "limiter/{a}.rs and limiter/{b}.rs name each other");
        }
    }
}

#[test]
fn the_sub_state_types_keep_their_fields_private() {
    let files = limiter_files();
    for (file, ty) in PRIVATE_FIELDS {
        let code = &files[file];
        let start = code.find(&format!("struct {ty} {{")).unwrap_or_else(|| panic!("limiter/{file} defines {ty}"));
        let body = &code[start..start + code[start..].find("\n}").expect("the struct ends")];
        let open: Vec<&str> = body.lines().filter(|l| l.trim_start().starts_with("pub")).collect();
        assert!(open.is_empty(), "{ty} (limiter/{file}) has fields others may write: {open:?}");
    }
}

#[test]
fn the_limiter_reader_sees_siblings_and_globs() {
    let siblings: BTreeSet<String> = ["bucket", "timelog", "outage"].map(String::from).into();
    assert_eq!(siblings_named("use super::timelog::TimeLog;", &siblings), ["timelog".to_string()].into());
    assert_eq!(
        siblings_named("use super::{bucket, outage::share_of};", &siblings),
        ["bucket".to_string(), "outage".to_string()].into()
    );
    assert_eq!(siblings_named("use super::*;", &siblings), ["*".to_string()].into());
    assert!(siblings_named("use super::Limiter;", &siblings).is_empty());
    assert_eq!(outside_tests("fn a() {}\n#[cfg(test)]\nmod tests { use super::*; }"), "fn a() {}");
}
