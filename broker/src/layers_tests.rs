//! The broker's layers import one way: runtime → kafka → append → {log, convert, protocol}.
//! Read from the sources' `use crate::…` lines (and `crate::…` paths), file by file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Source files of `broker/src`, as module paths (`kafka::produce`, `runtime`, …).
fn modules(root: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                walk(&path, &format!("{prefix}{stem}::"), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = match stem.as_str() {
                    "mod" => prefix.trim_end_matches("::").to_string(),
                    _ => format!("{prefix}{stem}"),
                };
                out.insert(name, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out.remove("lib");
    out.remove("main");
    out
}

/// The modules `text` names as `crate::a::b…`, resolved to the longest known module path.
fn imports(text: &str, known: &BTreeMap<String, PathBuf>, this: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    // `super::x` inside `a::b` is `a::x` (or `a` itself).
    let parent = this.rsplit_once("::").map_or("", |(p, _)| p).to_string();
    let is_mod_file = known.get(this).is_some_and(|p| p.ends_with("mod.rs"));
    let super_base = if is_mod_file {
        parent
            .rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_string())
    } else {
        parent.clone()
    };
    let text: String = text
        .lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut push = |path: String| {
        let mut parts: Vec<&str> = path.split("::").collect();
        while !parts.is_empty() {
            let candidate = parts.join("::");
            if known.contains_key(&candidate) {
                if candidate != this {
                    found.insert(candidate);
                }
                return;
            }
            parts.pop();
        }
    };
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect::<String>()
            .trim_end_matches(':')
            .to_string()
    };
    for (index, _) in text.match_indices("crate::") {
        push(ident(&text[index + "crate::".len()..]));
    }
    for (index, _) in text.match_indices("super::") {
        if text[..index].ends_with("::") {
            continue;
        }
        let rest = ident(&text[index + "super::".len()..]);
        let base = if is_mod_file { &super_base } else { &parent };
        push(if base.is_empty() {
            rest
        } else {
            format!("{base}::{rest}")
        });
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let known = modules(&root);
    known
        .iter()
        .map(|(name, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            (name.clone(), imports(&text, &known, name))
        })
        .collect()
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap()
}

/// Groups of files that import each other (strongly connected components of size > 1).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    // Reachability by repeated search: the graph has well under a hundred files.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|n| (n, reach(n))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for node in graph.keys() {
        if !reachable[node].contains(node) || groups.iter().any(|g| g.contains(node)) {
            continue;
        }
        let group = graph
            .keys()
            .filter(|other| reachable[node].contains(*other) && reachable[*other].contains(node))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

#[test]
fn no_import_circles_between_files() {
    let graph = graph();
    assert!(
        graph["kafka::produce"].contains("append"),
        "the reader sees imports"
    );
    // None anywhere in broker/src.
    let circles = circles(&graph);
    assert!(circles.is_empty(), "files importing each other: {circles:?}");
}

#[test]
fn layers_point_one_way() {
    let graph = graph();
    for (module, imports) in &graph {
        for import in imports {
            let (from, to) = (layer(module), layer(import));
            let allowed = match from {
                // append → log, catalog's table types, config, telemetry; never up.
                "append" => !matches!(to, "kafka" | "runtime" | "admin" | "cli"),
                // kafka → append; of the runtime only its leaf types (runtime/mod.rs).
                "kafka" => match to {
                    "runtime" => import == "runtime",
                    _ => !matches!(to, "admin" | "cli"),
                },
                "log" | "catalog" | "scan" | "telemetry" | "repeat_log" | "config" => {
                    !matches!(to, "runtime" | "kafka" | "append")
                }
                // metrics reads only the Kafka API registry, a file that imports nothing.
                "metrics" => to != "runtime" && to != "append" && (to != "kafka" || import == "kafka::apis"),
                _ => true,
            };
            assert!(allowed, "{module} imports {import}");
        }
    }
    assert!(graph["runtime"]
        .iter()
        .all(|m| !m.starts_with("kafka") && !m.starts_with("append::")));
    assert!(graph["kafka::apis"].is_empty(), "{:?}", graph["kafka::apis"]);
}
