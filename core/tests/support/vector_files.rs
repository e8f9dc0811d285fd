//! The checked-in vector files (`tests/vectors/`) of the scenario-generated kinds (`client_`,
//! `store_`): where they live, how they are written, and the freshness check every generator
//! runs (`RATELANE_BLESS=1` rewrites them after an intended behaviour change).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

/// A vector as written: pretty JSON and a final newline.
pub fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("json");
    s.push('\n');
    s
}

/// Fails unless every `{prefix}{name}.json` equals the text the scenarios produce now and no
/// other `{prefix}*.json` exists (a file no scenario produces any more is stale too); with
/// `RATELANE_BLESS=1` rewrites and removes them instead. `files`: (name, text) per scenario;
/// `test` names the test binary for the message.
pub fn check_fresh(prefix: &str, files: Vec<(&str, String)>, what: &str, test: &str) {
    let bless = std::env::var("RATELANE_BLESS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    let mut names = BTreeSet::new();
    for (name, text) in files {
        assert!(names.insert(name), "duplicate vector file {name}");
        let path = vectors_dir().join(format!("{prefix}{name}.json"));
        if std::fs::read_to_string(&path).unwrap_or_default() != text {
            if bless {
                std::fs::write(&path, &text).expect("write vector");
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    for entry in std::fs::read_dir(vectors_dir()).expect("tests/vectors") {
        let file = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if let Some(stem) = file.strip_prefix(prefix).and_then(|n| n.strip_suffix(".json"))
            && !names.contains(stem)
        {
            if bless {
                std::fs::remove_file(vectors_dir().join(&file)).expect("remove");
            } else {
                stale.push(file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "these {what} files do not match the reference implementation: {stale:?}\n\
         If the behaviour change is intended, regenerate them with \
         `RATELANE_BLESS=1 cargo test -p ratelane --test {test}` and say why in the commit."
    );
}
