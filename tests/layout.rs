//! The module layout of `src/`, checked by reading the source as text.
//!
//! The compiler accepts import circles between files and imports that climb the layer
//! stack; both make the layers meaningless. This test lexes every `src/**/*.rs`, finds the
//! paths each file uses (`use` trees; `crate::`, `super::`, `self::` and child-module paths
//! in code), resolves each to the file defining the item (through `pub use` re-exports) and
//! checks the file graph. A small hand-written lexer rather than `syn`: std only, so the
//! file also builds alone with `rustc --edition 2024 --test tests/layout.rs`.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// Which layer folders each layer folder may use (a folder may always use itself; `"*"` is
/// every folder). Mirrors the layer map at the top of `src/lib.rs`: change both together.
const LAYERS: &[(&str, &[&str])] = &[
    ("guard", &[]),
    ("source", &["guard"]),
    ("trigger", &["source", "guard"]),
    ("decide", &["trigger", "source", "guard"]),
    ("runtime", &["decide", "trigger", "source", "guard"]),
    (
        "api",
        &["runtime", "decide", "trigger", "source", "guard", "proto"],
    ),
    ("fake", &[]),
    ("sim", &["decide", "trigger", "source", "fake"]),
    ("cli", &["*", "proto"]),
];

const MAX_LINES: usize = 600;
/// The exposition parser is one state machine; splitting it would scatter it.
const LONG_FILES: &[&str] = &["source/prom_text.rs"];
/// Inline modules of `lib.rs` (generated code) that stand as their own node.
const PSEUDO: &[&str] = &["proto"];
/// A `use` loop must not hang the test; real chains of imports are one or two deep.
const FOLLOW_DEPTH: usize = 8;

/// Why an edge exists: the line and the path as written, so a reader can fix it.
type Why = (usize, String);

/// The file graph; nodes are paths relative to `src/`, plus pseudo-modules.
#[derive(Default, Debug)]
struct Graph {
    nodes: BTreeSet<String>,
    edges: BTreeMap<String, BTreeMap<String, Vec<Why>>>,
}

/// A path as written: the module it is written in (inline modules included), its
/// segments, and why it is there.
struct Ref(Vec<String>, Vec<String>, Why);

/// What one file declares and uses, before resolution.
#[derive(Default)]
struct Scan {
    /// `mod x;` at the top level.
    children: BTreeSet<String>,
    /// Top-level `use`, `pub` or not: bound name → path as written. A path through this
    /// module to that name leads where the `use` points (children see private imports).
    imports: BTreeMap<String, Vec<String>>,
    refs: Vec<Ref>,
}

#[derive(Default)]
struct Tree {
    file_of: BTreeMap<Vec<String>, String>,
    module_of: BTreeMap<String, Vec<String>>,
    scans: BTreeMap<String, Scan>,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_ident(s: &str) -> bool {
    s.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// End of the raw (byte, C) string starting at `i`, if one starts there.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    // The prefix must start a token: `r#ident` and `bar"` are no strings.
    if i > 0 && is_ident_char(c[i - 1]) {
        return None;
    }
    let mut j = i + usize::from(matches!(c.get(i), Some('b' | 'c')));
    if c.get(j) != Some(&'r') {
        return None;
    }
    let hashes = c[j + 1..].iter().take_while(|&&ch| ch == '#').count();
    j += 1 + hashes;
    if c.get(j) != Some(&'"') {
        return None;
    }
    let closes = |k: usize| c[k] == '"' && c[k + 1..].iter().take(hashes).all(|&h| h == '#');
    let end = (j + 1..c.len()).find(|&k| closes(k));
    Some(end.map_or(c.len(), |k| k + 1 + hashes))
}

/// Tokens with their line: identifiers (`r#x` as `x`), `::`, single punctuation. Comments
/// (nested, doc) and string/char literals are dropped, so paths in them are not
/// dependencies; a lifetime `'a` has no closing quote and stays as `'` `a`.
fn lex(src: &str) -> Vec<(String, usize)> {
    let c: Vec<char> = src.chars().collect();
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let (mut toks, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let start = i;
        if at(i) == '/' && at(i + 1) == '/' {
            i = (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len());
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                let step = (at(i), at(i + 1));
                depth += usize::from(step == ('/', '*'));
                depth -= usize::from(step == ('*', '/'));
                let pair = step == ('/', '*') || step == ('*', '/');
                i += 1 + usize::from(pair);
                if depth == 0 {
                    break;
                }
            }
        } else if let Some(end) = raw_string_end(&c, i) {
            i = end;
        } else if at(i) == '"' || (at(i) == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'')) {
            // A string or char literal: up to the unescaped closing quote.
            i += 1;
            while i < c.len() && c[i] != c[start] {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if is_ident_char(c[i]) {
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            let raw_ident = c[start..i] == ['r'] && at(i) == '#' && is_ident_char(at(i + 1));
            if raw_ident {
                i += 1; // the identifier after `r#` comes next
            } else {
                toks.push((c[start..i].iter().collect(), line));
            }
        } else if !c[i].is_whitespace() {
            i += 1 + usize::from(at(i) == ':' && at(i + 1) == ':');
            toks.push((c[start..i].iter().collect(), line));
        } else {
            i += 1;
        }
        let end = i.min(c.len());
        line += c[start..end].iter().filter(|&&ch| ch == '\n').count();
    }
    toks
}

/// Expands one use tree (`a::{b, c::{d as e}, self, *}`) into its leaves: full path,
/// bound name (`None` for a glob) and the leaf as text.
fn use_tree(t: &dyn Fn(usize) -> String, i: &mut usize, mut path: Vec<String>) -> Vec<UseLeaf> {
    let mut out = Vec::new();
    loop {
        match t(*i).as_str() {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                while !matches!(t(*i).as_str(), "}" | ";" | "") {
                    let before = *i;
                    out.extend(use_tree(t, i, path.clone()));
                    // Step over `,` and over anything unexpected, so nothing hangs.
                    *i += usize::from(t(*i) == "," || *i == before);
                }
                *i += usize::from(t(*i) == "}");
                return out;
            }
            "*" => {
                *i += 1;
                let text = format!("{}::*", path.join("::"));
                return vec![(path, None, text)];
            }
            s if is_ident(s) => {
                path.push(s.to_owned());
                *i += 1;
                if t(*i) == "::" {
                    continue;
                }
                if s == "self" {
                    path.pop(); // `a::{self}` is `a`
                }
                let (mut name, mut text) = (path.last().cloned(), path.join("::"));
                if t(*i) == "as" {
                    name = Some(t(*i + 1));
                    text = format!("{text} as {}", t(*i + 1));
                    *i += 2;
                }
                return vec![(path, name, text)];
            }
            _ => return out,
        }
    }
}

type UseLeaf = (Vec<String>, Option<String>, String);

fn scan(src: &str, file_module: &[String]) -> Scan {
    let toks = lex(src);
    let t = |i: usize| toks.get(i).map_or(String::new(), |(s, _)| s.clone());
    let mut out = Scan::default();
    // Children first, so a path written above its `mod x;` counts too.
    let mut depth = 0;
    for i in 0..toks.len() {
        match t(i).as_str() {
            "{" => depth += 1,
            "}" => depth -= usize::from(depth > 0),
            "mod" if depth == 0 && t(i + 2) == ";" => {
                out.children.insert(t(i + 1));
            }
            _ => {}
        }
    }
    // `pub use`, `pub(crate) use`, `pub(in …) use`: a re-export, not a dependency.
    let is_pub = |i: usize| {
        // Step back over a `(crate)`-style restriction, then look for `pub`.
        let mut before = Some(i);
        if t(i.wrapping_sub(1)) == ")" {
            before = toks[..i].iter().rposition(|(s, _)| s == "(");
        }
        before.is_some_and(|b| t(b.wrapping_sub(1)) == "pub")
    };
    // Inline `mod x { … }`s around the cursor, with the brace depth outside each: in
    // `mod tests { use super::*; }` super is the file's own module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let (mut depth, mut i) = (0, 0);
    while i < toks.len() {
        let mut module = file_module.to_vec();
        module.extend(inline.iter().map(|(name, _)| name.clone()));
        // Say so when a path sits in an inline module (usually test-only code).
        let within = inline
            .last()
            .map_or(String::new(), |(m, _)| format!(" (in mod {m})"));
        let (word, line, prev) = (t(i), toks[i].1, t(i.wrapping_sub(1)));
        let path_start =
            matches!(word.as_str(), "crate" | "super" | "self") || out.children.contains(&word);
        if word == "{" {
            depth += 1;
        } else if word == "}" {
            depth -= usize::from(depth > 0);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
        } else if word == "mod" && t(i + 2) == "{" {
            inline.push((t(i + 1), depth));
        } else if word == "use" && t(i + 1) != "<" {
            // (`use<'a>` is a precise-capture bound, not an import.)
            let reexport = is_pub(i);
            i += 1;
            for (segs, name, text) in use_tree(&t, &mut i, Vec::new()) {
                if let Some(name) = name.filter(|_| depth == 0) {
                    out.imports.insert(name, segs.clone());
                }
                if !reexport {
                    let why = (line, format!("use {text}{within}"));
                    out.refs.push(Ref(module.clone(), segs, why));
                }
            }
            continue;
        } else if path_start && t(i + 1) == "::" && !matches!(prev.as_str(), "::" | "$" | ".") {
            let mut segs = vec![word];
            while t(i + 1) == "::" && is_ident(&t(i + 2)) {
                segs.push(t(i + 2));
                i += 2;
            }
            let text = format!("{}{within}", segs.join("::"));
            out.refs.push(Ref(module, segs, (line, text)));
        }
        i += 1;
    }
    out
}

/// `lib.rs` → `[]`, `a.rs` and `a/mod.rs` → `[a]`, `a/b.rs` and `a/b/mod.rs` → `[a, b]`.
fn module_of(rel: &str) -> Option<Vec<String>> {
    // `main.rs` and `bin/*` are binary crate roots, not modules of the library.
    if rel == "main.rs" || rel.starts_with("bin/") {
        return None;
    }
    let segs = rel.strip_suffix(".rs")?.split('/');
    let mut segs: Vec<String> = segs.map(String::from).collect();
    if segs == ["lib"] || segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    Some(segs)
}

/// The file defining what `segs` names when written in module `cur` of `file`; `None`
/// when the path leaves the crate.
fn resolve(tree: &Tree, file: &str, cur: &[String], segs: &[String], n: usize) -> Option<String> {
    let (head, mut rest) = segs.split_first()?;
    let mut abs = match head.as_str() {
        "crate" => Vec::new(),
        "self" => cur.to_vec(),
        "super" => cur.split_last()?.1.to_vec(),
        child if tree.scans[file].children.contains(child) => {
            [&tree.module_of[file][..], &segs[..1]].concat()
        }
        _ => return None, // another crate
    };
    while head == "super" && rest.first().is_some_and(|s| s == "super") {
        abs.pop()?;
        rest = &rest[1..];
    }
    abs.extend_from_slice(rest);
    let pseudo = abs.first().filter(|m| PSEUDO.contains(&m.as_str()));
    if let Some(m) = pseudo.filter(|_| !tree.file_of.contains_key(&abs[..1])) {
        return Some(m.clone());
    }
    // The deepest module on the path that is a file…
    let mut k = 0;
    while k < abs.len() && tree.file_of.contains_key(&abs[..=k]) {
        k += 1;
    }
    let found = tree.file_of.get(&abs[..k])?;
    // …unless it imports the next segment (a `pub use` re-export, or a private `use` that a
    // child reaches through `super::`): then the item is where that `use` points.
    let imports = &tree.scans[found].imports;
    let import = abs.get(k).and_then(|name| imports.get(name));
    if let Some(target) = import.filter(|_| n < FOLLOW_DEPTH) {
        let path = [&target[..], &abs[k + 1..]].concat();
        let here = &tree.module_of[found];
        if let Some(to) = resolve(tree, found, here, &path, n + 1) {
            return Some(to);
        }
    }
    Some(found.clone())
}

/// The file graph of a tree given as path relative to `src/` → source text.
fn analyze(files: &BTreeMap<String, String>) -> Graph {
    let mut tree = Tree::default();
    for (rel, src) in files {
        let Some(module) = module_of(rel) else {
            continue;
        };
        tree.scans.insert(rel.clone(), scan(src, &module));
        tree.file_of.insert(module.clone(), rel.clone());
        tree.module_of.insert(rel.clone(), module);
    }
    let mut g = Graph::default();
    g.nodes.extend(tree.module_of.keys().cloned());
    for (file, scan) in &tree.scans {
        for Ref(cur, segs, why) in &scan.refs {
            let to = resolve(&tree, file, cur, segs, 0);
            let Some(to) = to.filter(|to| to != file) else {
                continue;
            };
            g.nodes.insert(to.clone());
            let from = g.edges.entry(file.clone()).or_default();
            let whys = from.entry(to).or_default();
            if !whys.contains(why) {
                whys.push(why.clone());
            }
        }
    }
    g
}

fn show(node: &str) -> String {
    if PSEUDO.contains(&node) {
        return format!("crate::{node} (inline in src/lib.rs)");
    }
    format!("src/{node}")
}

fn targets<'g>(g: &'g Graph, from: &str) -> impl Iterator<Item = &'g String> {
    g.edges.get(from).into_iter().flat_map(|m| m.keys())
}

/// Strongly connected components (Tarjan), each sorted.
fn components(g: &Graph) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct Tarjan<'g> {
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(g: &'g Graph, st: &mut Tarjan<'g>, v: &'g str) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        for w in targets(g, v).map(String::as_str) {
            let reach = if !st.index.contains_key(w) {
                visit(g, st, w);
                st.low[w]
            } else if st.stack.contains(&w) {
                st.index[w]
            } else {
                continue; // done, in another component
            };
            st.low.insert(v, st.low[v].min(reach));
        }
        if st.low[v] == n {
            let at = st.stack.iter().rposition(|&x| x == v);
            let at = at.expect("v is on the stack");
            let mut comp: Vec<String> = st.stack.drain(at..).map(String::from).collect();
            comp.sort();
            st.out.push(comp);
        }
    }
    let mut st = Tarjan::default();
    for v in &g.nodes {
        if !st.index.contains_key(v.as_str()) {
            visit(g, &mut st, v);
        }
    }
    st.out
}

/// A shortest cycle through the component's first file (breadth-first, inside it).
fn cycle_in(g: &Graph, comp: &[String]) -> Vec<String> {
    let start = &comp[0];
    let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(u) = queue.pop_front() {
        for w in targets(g, u).filter(|w| comp.contains(w)) {
            if w == start {
                let mut path = vec![start.clone(), u.clone()];
                while let Some(&p) = prev.get(path.last().expect("non-empty")) {
                    path.push(p.clone());
                }
                path.reverse();
                return path;
            }
            if !prev.contains_key(w) {
                prev.insert(w, u);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

fn list_whys(whys: &[Why], indent: &str) -> String {
    let line = |(n, text): &Why| format!("\n{indent}line {n}: {text}");
    whys.iter().map(line).collect()
}

/// Each import circle: its files, and a report naming one cycle and, per edge in it, the
/// lines that create the edge.
fn circles(g: &Graph) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for comp in components(g).into_iter().filter(|c| c.len() > 1) {
        let cycle = cycle_in(g, &comp);
        let names: Vec<String> = comp.iter().map(|n| show(n)).collect();
        let steps: Vec<String> = cycle.iter().map(|n| show(n)).collect();
        let mut s = format!("{} files: {}\n  cycle: ", comp.len(), names.join(", "));
        s += &steps.join(" → ");
        for pair in cycle.windows(2) {
            s += &format!("\n    {} → {}:", show(&pair[0]), show(&pair[1]));
            s += &list_whys(&g.edges[&pair[0]][&pair[1]], "      ");
        }
        // A big circle has more edges than its cycle: list them all, to pick which to cut.
        if comp.len() > 2 {
            s += "\n  every edge inside it (first path, count):";
        }
        for from in comp.iter().filter(|_| comp.len() > 2) {
            for (to, whys) in g.edges[from].iter().filter(|(to, _)| comp.contains(to)) {
                let (from, to, n) = (show(from), show(to), whys.len());
                s += &format!("\n    {from} → {to}: {} ({n})", whys[0].1);
            }
        }
        out.push((comp, s));
    }
    out
}

/// `source/x.rs` → `source`, `cache.rs` → `cache`, the crate root → `crate`.
fn layer_of(node: &str) -> &str {
    if node == "lib.rs" {
        return "crate";
    }
    let first = node.split('/').next().unwrap_or(node);
    first.trim_end_matches(".rs")
}

fn edge_report(from: &str, to: &str, whys: &[Why], rule: &str) -> String {
    let (from, to, whys) = (show(from), show(to), list_whys(whys, "    "));
    format!("{from} → {to} ({rule}){whys}")
}

fn layer_violations(g: &Graph) -> Vec<String> {
    let allowed = |layer: &str| LAYERS.iter().find(|(l, _)| *l == layer).map(|(_, a)| *a);
    let mut unknown: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for n in &g.nodes {
        let layered = n != "lib.rs" && !PSEUDO.contains(&n.as_str());
        if layered && allowed(layer_of(n)).is_none() {
            unknown.entry(layer_of(n)).or_default().push(show(n));
        }
    }
    let mut out: Vec<String> = Vec::new();
    for (layer, files) in unknown {
        let files = files.join(", ");
        let fix = "add it to the table and to lib.rs's layer map";
        out.push(format!("new layer folder `{layer}` ({files}): {fix}"));
    }
    for (from, tos) in &g.edges {
        // The crate root only declares modules: its own edges are unrestricted. A folder
        // not in the table is reported above, its edges once it is in.
        let fl = layer_of(from);
        let Some(ok) = allowed(fl).filter(|_| from != "lib.rs") else {
            continue;
        };
        for (to, whys) in tos {
            let tl = layer_of(to);
            if tl == fl || ok.contains(&tl) || (ok.contains(&"*") && tl != "crate") {
                continue;
            }
            let may = ok.join(", ");
            let may = if may.is_empty() { "nothing" } else { &may };
            let mut rule = format!("`{fl}` may use only: {may}");
            if tl == "crate" {
                rule += "; the path stops at the crate root: stale, or names an item in lib.rs";
            }
            out.push(edge_report(from, to, whys, &rule));
        }
    }
    out
}

fn source_to_trigger(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in g.edges.iter().filter(|(f, _)| layer_of(f) == "source") {
        for (to, whys) in tos.iter().filter(|(t, _)| layer_of(t) == "trigger") {
            let rule = "a source never knows about triggers";
            out.push(edge_report(from, to, whys, rule));
        }
    }
    out
}

fn oversized(files: &BTreeMap<String, String>) -> Vec<String> {
    let counted = files.iter().map(|(p, src)| (p, src.lines().count()));
    let over = counted.filter(|(p, n)| *n > MAX_LINES && !LONG_FILES.contains(&p.as_str()));
    over.map(|(p, n)| format!("src/{p}: {n} lines")).collect()
}

/// Every `*.rs` under `src/`, keyed by its path relative to `src/`.
fn read_src() -> BTreeMap<String, String> {
    // Plain `rustc --test` has no CARGO_MANIFEST_DIR: then run it from the crate.
    let root = Path::new(option_env!("CARGO_MANIFEST_DIR").unwrap_or(".")).join("src");
    let (mut out, mut dirs) = (BTreeMap::new(), vec![root.clone()]);
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        for path in entries.map(|e| e.expect("directory entry").path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&root).expect("under src/");
                let rel = rel.to_string_lossy().replace('\\', "/");
                let src = std::fs::read_to_string(&path);
                let src = src.unwrap_or_else(|e| panic!("{path:?}: {e}"));
                out.insert(rel, src);
            }
        }
    }
    assert!(out.contains_key("lib.rs"), "no lib.rs in {root:?}");
    out
}

fn fail_if_any(what: &str, found: &[String]) {
    let (n, all) = (found.len(), found.join("\n\n"));
    assert!(found.is_empty(), "{n} {what}:\n\n{all}\n");
}

#[test]
fn no_import_circles_between_files() {
    let found = circles(&analyze(&read_src()));
    let reports: Vec<String> = found.into_iter().map(|(_, report)| report).collect();
    fail_if_any("import circle(s) in src/ (break an edge in each)", &reports);
}

#[test]
fn layers_import_only_downward() {
    let found = layer_violations(&analyze(&read_src()));
    fail_if_any("layer violation(s)", &found);
}

#[test]
fn source_never_imports_trigger() {
    let found = source_to_trigger(&analyze(&read_src()));
    fail_if_any("import(s) from src/source/ into src/trigger/", &found);
}

#[test]
fn no_file_over_600_lines() {
    let found = oversized(&read_src());
    fail_if_any("file(s) over 600 lines (split by responsibility)", &found);
}

/// The analyzer on small in-memory trees, so each failure above is seen to happen.
mod self_tests {
    use super::*;

    /// A tree from `"path: source"` entries.
    fn tree(files: &[&str]) -> BTreeMap<String, String> {
        let split = files.iter().map(|f| f.split_once(": ").unwrap_or((f, "")));
        split
            .map(|(path, src)| (path.to_owned(), src.to_owned()))
            .collect()
    }

    fn pairs(g: &Graph) -> Vec<(&str, &str)> {
        let each = g
            .edges
            .iter()
            .map(|(from, tos)| tos.keys().map(move |to| (from, to)));
        each.flatten()
            .map(|(from, to)| (from.as_str(), to.as_str()))
            .collect()
    }

    fn texts(g: &Graph, from: &str, to: &str) -> Vec<String> {
        let whys = g.edges.get(from).and_then(|m| m.get(to)).cloned();
        whys.unwrap_or_default()
            .into_iter()
            .map(|(_, text)| text)
            .collect()
    }

    #[test]
    fn cycle_through_use_super() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod a;",
            "a/mod.rs: pub mod x;\npub mod y;",
            "a/x.rs: use super::y::B;\npub struct Y;",
            "a/y.rs: use std::fmt;\nuse super::x::Y;\npub struct B;",
        ]));
        let found = circles(&g);
        assert_eq!(found.len(), 1, "{found:?}");
        let (files, report) = &found[0];
        assert_eq!(files, &["a/x.rs", "a/y.rs"]);
        let cycle = "cycle: src/a/x.rs → src/a/y.rs → src/a/x.rs";
        assert!(report.contains(cycle), "{report}");
        assert!(report.contains("line 2: use super::x::Y"), "{report}");
    }

    #[test]
    fn cycle_through_inline_crate_path() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod a;\npub mod b;\npub mod c;",
            "a.rs: pub fn f() { crate::b::g() }",
            "b.rs: pub fn g() { let _ = crate :: a :: f; }\nmod tests { fn t() { crate::c::h() } }",
            "c.rs: pub fn h() { crate::b::g() }",
        ]));
        let found = circles(&g);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, ["a.rs", "b.rs", "c.rs"]);
        let report = &found[0].1;
        assert!(
            report.contains("src/b.rs → src/c.rs: crate::c::h (in mod tests) (1)"),
            "{report}"
        );
        assert_eq!(texts(&g, "b.rs", "a.rs"), ["crate::a::f"]);
    }

    #[test]
    fn reexport_in_mod_rs_is_followed_not_counted() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod m; pub mod z;",
            "m/mod.rs: pub mod a; pub mod b; pub use a::Item; pub(crate) use b::{Other as O};",
            "m/a.rs: pub struct Item;",
            "m/b.rs: use super::Item; pub struct Other; mod tests { use super::*; }",
        ]));
        assert!(circles(&g).is_empty(), "{:?}", circles(&g));
        assert_eq!(texts(&g, "m/b.rs", "m/a.rs"), ["use super::Item"]);
        assert_eq!(pairs(&g), [("m/b.rs", "m/a.rs")]);
    }

    #[test]
    fn private_import_is_a_dependency_and_followed() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod m; pub mod z;",
            "m/mod.rs: pub mod b; use crate::z::Z; fn f() { use crate::m::b::B; }",
            "m/b.rs: use super::Z; pub struct B;",
            "z.rs: pub struct Z;",
        ]));
        let expected = [
            ("m/b.rs", "z.rs"),
            ("m/mod.rs", "m/b.rs"),
            ("m/mod.rs", "z.rs"),
        ];
        assert_eq!(pairs(&g), expected);
    }

    #[test]
    fn comments_and_literals_are_ignored() {
        let a = r####"a.rs: // use crate::b::X;
            /* crate::b::y() /* nested */ crate::b::z() */
            /// doc: crate::b::doc
            const S: &str = "crate::b::s \" crate::b::t";
            const R: &str = r##"crate::b::"# raw "##;
            fn f<'a>(x: &'a str) -> char { let _ = (b"crate::b", br#"crate::b"#); '"' }
            fn g() -> char { let _ = '\''; crate::c::h(); 'x' }"####;
        let g = analyze(&tree(&[
            "lib.rs: pub mod a; pub mod b; pub mod c;",
            a,
            "b.rs",
            "c.rs",
        ]));
        assert_eq!(pairs(&g), [("a.rs", "c.rs")]);
        assert_eq!(g.edges["a.rs"]["c.rs"], [(7, "crate::c::h".to_owned())]);
    }

    #[test]
    fn source_to_trigger_breaks_the_layers() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod source;\npub mod trigger;",
            "source/mod.rs: pub mod x;",
            "source/x.rs: fn f() { let _ = crate::trigger::y::Spec; }",
            "trigger/mod.rs: pub mod y;",
            "trigger/y.rs: use crate::source::Reading;",
        ]));
        let found = layer_violations(&g);
        assert_eq!(found.len(), 1, "{found:?}");
        let (report, edge) = (&found[0], "src/source/x.rs → src/trigger/y.rs");
        assert!(report.starts_with(edge), "{report}");
        assert!(
            report.ends_with("line 1: crate::trigger::y::Spec"),
            "{report}"
        );
        assert_eq!(source_to_trigger(&g).len(), 1);
    }

    #[test]
    fn unknown_folder_and_long_file_fail() {
        let long = "fn f() {}\n".repeat(MAX_LINES + 1);
        let (misc, parser) = (
            format!("misc.rs: {long}"),
            format!("source/prom_text.rs: {long}"),
        );
        let files = tree(&["lib.rs", &misc, &parser]);
        let found = layer_violations(&analyze(&files));
        assert!(found.len() == 1 && found[0].starts_with("new layer folder `misc`"));
        let expected = format!("src/misc.rs: {} lines", MAX_LINES + 1);
        assert_eq!(oversized(&files), [expected]);
    }

    #[test]
    fn brace_groups_children_and_tests_files() {
        let g = analyze(&tree(&[
            "lib.rs: pub mod a; pub mod b; pub mod e; pub mod proto {}",
            "a.rs: use crate::{b::{self, c::{Deep, Other as O}, d::*}, e, proto::X};",
            "b/mod.rs: pub(crate) mod c; pub mod d; fn f() { c::deep(); x::c::no(); }",
            "b/c.rs: #[cfg(test)]\nmod tests;",
            "b/c/tests.rs: use super::*;\nuse super::super::d::Thing;",
            "b/d.rs",
            "e.rs",
        ]));
        let deep = ["use crate::b::c::Deep", "use crate::b::c::Other as O"];
        assert_eq!(texts(&g, "a.rs", "b/c.rs"), deep);
        assert_eq!(texts(&g, "a.rs", "b/mod.rs"), ["use crate::b"]);
        assert_eq!(texts(&g, "a.rs", "b/d.rs"), ["use crate::b::d::*"]);
        assert_eq!(texts(&g, "a.rs", "e.rs"), ["use crate::e"]);
        assert_eq!(texts(&g, "a.rs", "proto"), ["use crate::proto::X"]);
        assert_eq!(texts(&g, "b/mod.rs", "b/c.rs"), ["c::deep"]);
        assert_eq!(texts(&g, "b/c/tests.rs", "b/c.rs"), ["use super::*"]);
        let up = ["use super::super::d::Thing"];
        assert_eq!(texts(&g, "b/c/tests.rs", "b/d.rs"), up);
    }
}
