//! The module layout of `src/`, checked by reading the source as text.
//!
//! The compiler accepts import circles between files and imports that climb
//! the layer stack; both make the layers meaningless, so this test reads every
//! `src/**/*.rs`, finds the paths each file uses (`use` trees, `crate::`,
//! `super::`, `self::` and child-module paths in code), resolves each to the
//! file that defines the item (following `pub use` re-exports), and checks the
//! resulting file graph. A hand-written scanner, not `syn`: std only, so it
//! also runs alone (`rustc --edition 2024 --test tests/layout.rs`).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

/// Which layer folders each layer folder may use (a folder may always use
/// itself; `"*"` is every folder). Mirrors the layer map at the top of
/// `src/lib.rs`: change both together.
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
/// A `pub use` loop must not hang the test; real chains are 1–2 deep.
const REEXPORT_DEPTH: usize = 8;

/// Why an edge exists: the line and the path as written, so it can be fixed.
#[derive(Clone, Debug, PartialEq)]
struct Why {
    line: usize,
    text: String,
}

/// File graph: nodes are paths relative to `src/` (plus pseudo-modules).
#[derive(Default, Debug)]
struct Graph {
    nodes: BTreeSet<String>,
    edges: BTreeMap<String, BTreeMap<String, Vec<Why>>>,
}

struct Tok {
    s: String,
    line: usize,
}

/// A path one file uses, with the (possibly inline) module it is written in.
struct Ref {
    module: Vec<String>,
    segs: Vec<String>,
    why: Why,
}

/// What one file says, before resolution.
#[derive(Default)]
struct Scan {
    children: BTreeSet<String>,
    /// Names of items defined here: a glob re-export never shadows them.
    defined: BTreeSet<String>,
    /// Top-level `pub use`: bound name (`None` for a glob) → path as written.
    reexports: Vec<(Option<String>, Vec<String>)>,
    refs: Vec<Ref>,
}

#[derive(Default)]
struct Tree {
    modules: BTreeMap<Vec<String>, String>,
    module_of: BTreeMap<String, Vec<String>>,
    scans: BTreeMap<String, Scan>,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// End of a raw (byte/C) string starting at `i`, if one starts there.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    // The prefix must start a token: `r#ident` and `bar"` are not strings.
    if i > 0 && is_ident_char(c[i - 1]) {
        return None;
    }
    let mut j = i + usize::from(matches!(c.get(i), Some('b' | 'c')));
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    j += hashes;
    if c.get(j) != Some(&'"') {
        return None;
    }
    for k in j + 1..c.len() {
        let closes = c
            .get(k + 1..k + 1 + hashes)
            .is_some_and(|h| h.iter().all(|&x| x == '#'));
        if c[k] == '"' && closes {
            return Some(k + 1 + hashes);
        }
    }
    Some(c.len())
}

/// Comments and string/char literals replaced by spaces (newlines kept, so
/// line numbers survive): paths in them are not dependencies.
fn blank(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        let start = i;
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0; // block comments nest
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    (depth, i) = (depth + 1, i + 2);
                } else if at(i) == '*' && at(i + 1) == '/' {
                    (depth, i) = (depth - 1, i + 2);
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&c, i) {
            i = end;
        } else if at(i) == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if at(i) == '\'' && at(i + 1) == '\\' {
            i += 3; // `'\''`: the escaped char may itself be a quote
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if at(i) == '\'' && at(i + 2) == '\'' {
            i += 3; // `'x'`; a lifetime `'a` has no closing quote
        } else {
            out.push(c[i]);
            i += 1;
            continue;
        }
        let end = i.min(c.len());
        out.extend(
            c[start..end]
                .iter()
                .map(|&ch| if ch == '\n' { '\n' } else { ' ' }),
        );
        i = end;
    }
    out
}

/// Identifiers (raw `r#x` as `x`), `::`, and single punctuation characters.
fn tokenize(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let start = i;
        if c[i].is_whitespace() {
            line += usize::from(c[i] == '\n');
            i += 1;
            continue;
        }
        if is_ident_char(c[i]) {
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
        } else {
            i += if c[i] == ':' && c.get(i + 1) == Some(&':') {
                2
            } else {
                1
            };
        }
        let s: String = c[start..i].iter().collect();
        if s == "r" && c.get(i) == Some(&'#') && c.get(i + 1).is_some_and(|&x| is_ident_char(x)) {
            i += 1;
            continue;
        }
        out.push(Tok { s, line });
    }
    out
}

fn tok(toks: &[Tok], i: usize) -> &str {
    toks.get(i).map_or("", |t| t.s.as_str())
}

/// One leaf of a `use` tree: full path, bound name (`None` for a glob), text.
type UseItem = (Vec<String>, Option<String>, String);

/// Expands a use tree (`a::{b, c::{d as e}, self, *}`) into its leaves.
fn use_tree(toks: &[Tok], i: &mut usize, mut path: Vec<String>, out: &mut Vec<UseItem>) {
    loop {
        match tok(toks, *i) {
            "::" => *i += 1,
            "{" => {
                *i += 1;
                while !matches!(tok(toks, *i), "}" | ";" | "") {
                    let before = *i;
                    use_tree(toks, i, path.clone(), out);
                    if tok(toks, *i) == "," || *i == before {
                        *i += 1; // also steps over anything unexpected, so no hang
                    }
                }
                *i += usize::from(tok(toks, *i) == "}");
                return;
            }
            "*" => {
                *i += 1;
                let text = format!("{}::*", path.join("::"));
                out.push((path, None, text));
                return;
            }
            s if is_ident(s) => {
                path.push(s.to_owned());
                *i += 1;
                if tok(toks, *i) == "::" {
                    continue;
                }
                if s == "self" {
                    path.pop(); // `a::{self}` is `a`
                }
                let mut text = path.join("::");
                let mut name = path.last().cloned();
                if tok(toks, *i) == "as" {
                    name = Some(tok(toks, *i + 1).to_owned());
                    let _ = write!(text, " as {}", tok(toks, *i + 1));
                    *i += 2;
                }
                out.push((path, name, text));
                return;
            }
            _ => return,
        }
    }
}

/// Whether the `use` at `i` has a visibility: `pub`, `pub(crate)`, `pub(in …)`.
fn is_pub(toks: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).map(|p| tok(toks, p)) {
        Some("pub") => true,
        Some(")") => {
            let mut p = i - 1;
            while p > 0 && toks[p].s != "(" {
                p -= 1;
            }
            p > 0 && toks[p - 1].s == "pub"
        }
        _ => false,
    }
}

const ITEM_KEYWORDS: &[&str] = &[
    "struct", "enum", "fn", "trait", "type", "const", "static", "union",
];

fn scan(text: &str, file_mod: &[String]) -> Scan {
    let toks = tokenize(&blank(text));
    let t = |i: usize| tok(&toks, i);
    let mut out = Scan::default();
    // First pass: children and item names, so a path above `mod x;` counts too.
    let mut depth = 0usize;
    for i in 0..toks.len() {
        match t(i) {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "mod" if depth == 0 && is_ident(t(i + 1)) && t(i + 2) == ";" => {
                out.children.insert(t(i + 1).to_owned());
            }
            kw if ITEM_KEYWORDS.contains(&kw) && is_ident(t(i + 1)) => {
                out.defined.insert(t(i + 1).to_owned());
            }
            _ => {}
        }
    }
    // Inline `mod x { … }` stack (name, brace depth outside it): `super::`
    // inside `mod tests {}` is the file's own module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let current = |inline: &[(String, usize)]| -> Vec<String> {
        file_mod
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect()
    };
    let (mut depth, mut i) = (0usize, 0usize);
    while i < toks.len() {
        let prev = if i == 0 { "" } else { t(i - 1) };
        match t(i) {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if is_ident(t(i + 1)) && t(i + 2) == "{" => {
                inline.push((t(i + 1).to_owned(), depth));
                i += 2;
                continue;
            }
            "use" if t(i + 1) != "<" => {
                // `pub use` re-exports: resolved through, never an edge itself.
                let reexport = is_pub(&toks, i);
                let (line, mut items) = (toks[i].line, Vec::new());
                i += 1;
                use_tree(&toks, &mut i, Vec::new(), &mut items);
                for (segs, name, text) in items {
                    if !reexport {
                        let why = Why {
                            line,
                            text: format!("use {text}"),
                        };
                        out.refs.push(Ref {
                            module: current(&inline),
                            segs,
                            why,
                        });
                    } else if inline.is_empty() {
                        out.reexports.push((name, segs));
                    }
                }
                continue;
            }
            s if t(i + 1) == "::"
                && !matches!(prev, "::" | "$" | ".")
                && (matches!(s, "crate" | "super" | "self") || out.children.contains(s)) =>
            {
                let (line, mut segs, mut j) = (toks[i].line, vec![s.to_owned()], i + 1);
                while t(j) == "::" && is_ident(t(j + 1)) {
                    segs.push(t(j + 1).to_owned());
                    j += 2;
                }
                let why = Why {
                    line,
                    text: segs.join("::"),
                };
                out.refs.push(Ref {
                    module: current(&inline),
                    segs,
                    why,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `lib.rs` → `[]`, `a.rs`/`a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_of(rel: &str) -> Option<Vec<String>> {
    // `main.rs` and `bin/*` are binary crate roots, not modules of the library.
    if rel == "main.rs" || rel.starts_with("bin/") {
        return None;
    }
    let mut segs: Vec<String> = rel
        .strip_suffix(".rs")?
        .split('/')
        .map(String::from)
        .collect();
    if segs == ["lib"] || segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    Some(segs)
}

/// A written path made absolute (segments under `crate`), if it is in-crate.
fn absolutize(cur: &[String], file: &str, tree: &Tree, segs: &[String]) -> Option<Vec<String>> {
    let (head, mut rest) = segs.split_first()?;
    let mut base = match head.as_str() {
        "crate" => Vec::new(),
        "self" => cur.to_vec(),
        "super" => cur.split_last()?.1.to_vec(),
        name if tree.scans[file].children.contains(name) => {
            let mut m = tree.module_of[file].clone();
            m.push(name.to_owned());
            m
        }
        _ => return None, // another crate
    };
    while head == "super" && rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn resolve(
    tree: &Tree,
    cur: &[String],
    file: &str,
    segs: &[String],
    depth: usize,
) -> Option<String> {
    let abs = absolutize(cur, file, tree, segs)?;
    locate(tree, &abs, depth)
}

/// The file defining the item at an absolute path: the deepest module file on
/// the path, or, when the next segment is re-exported there, its target.
fn locate(tree: &Tree, abs: &[String], depth: usize) -> Option<String> {
    if let Some(first) = abs.first()
        && PSEUDO.contains(&first.as_str())
        && !tree.modules.contains_key(&abs[..1])
    {
        return Some(first.clone());
    }
    let mut k = 0;
    while k < abs.len() && tree.modules.contains_key(&abs[..=k]) {
        k += 1;
    }
    let file = tree.modules.get(&abs[..k])?;
    let Some(name) = abs.get(k).filter(|_| depth < REEXPORT_DEPTH) else {
        return Some(file.clone());
    };
    let (scan, here) = (&tree.scans[file], &tree.module_of[file]);
    for (bound, target) in &scan.reexports {
        if bound.as_ref() == Some(name) {
            let path = [target.as_slice(), &abs[k + 1..]].concat();
            if let Some(to) = resolve(tree, here, file, &path, depth + 1) {
                return Some(to);
            }
        }
    }
    // A glob re-export may hold the name, unless this file defines it.
    if !scan.defined.contains(name) {
        for (_, target) in scan.reexports.iter().filter(|(bound, _)| bound.is_none()) {
            let path = [target.as_slice(), &abs[k..]].concat();
            if let Some(to) = resolve(tree, here, file, &path, depth + 1).filter(|to| to != file) {
                return Some(to);
            }
        }
    }
    Some(file.clone())
}

/// The file graph of a tree given as path relative to `src/` → source text.
fn analyze(files: &BTreeMap<String, String>) -> Graph {
    let mut tree = Tree::default();
    for rel in files.keys() {
        if let Some(m) = module_of(rel) {
            tree.modules.insert(m.clone(), rel.clone());
            tree.module_of.insert(rel.clone(), m);
        }
    }
    let scans = tree
        .module_of
        .iter()
        .map(|(rel, m)| (rel.clone(), scan(&files[rel], m)));
    tree.scans = scans.collect();
    let mut g = Graph {
        nodes: tree.module_of.keys().cloned().collect(),
        ..Graph::default()
    };
    for (file, s) in &tree.scans {
        for r in &s.refs {
            let Some(to) = resolve(&tree, &r.module, file, &r.segs, 0) else {
                continue;
            };
            if to != *file {
                g.nodes.insert(to.clone());
                let whys = g
                    .edges
                    .entry(file.clone())
                    .or_default()
                    .entry(to)
                    .or_default();
                if !whys.contains(&r.why) {
                    whys.push(r.why.clone());
                }
            }
        }
    }
    g
}

fn show(node: &str) -> String {
    if PSEUDO.contains(&node) {
        format!("crate::{node} (inline in src/lib.rs)")
    } else {
        format!("src/{node}")
    }
}

fn targets<'g>(g: &'g Graph, from: &str) -> impl Iterator<Item = &'g String> {
    g.edges.get(from).into_iter().flat_map(|m| m.keys())
}

/// Strongly connected components (Tarjan), each sorted.
fn components(g: &Graph) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct State<'g> {
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(g: &'g Graph, st: &mut State<'g>, v: &'g str) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        for w in targets(g, v) {
            let w = w.as_str();
            let reach = if !st.index.contains_key(w) {
                visit(g, st, w);
                st.low[w]
            } else if st.stack.contains(&w) {
                st.index[w]
            } else {
                continue; // finished, in another component
            };
            let low = st.low.get_mut(v).expect("visited");
            *low = (*low).min(reach);
        }
        if st.low[v] == st.index[v] {
            let at = st.stack.iter().rposition(|&x| x == v).expect("on stack");
            let mut comp: Vec<String> = st.stack.drain(at..).map(String::from).collect();
            comp.sort();
            st.out.push(comp);
        }
    }
    let mut st = State::default();
    for v in &g.nodes {
        if !st.index.contains_key(v.as_str()) {
            visit(g, &mut st, v);
        }
    }
    st.out
}

/// One shortest cycle through the component's first file (BFS inside it).
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
            if w != start && !prev.contains_key(w) {
                prev.insert(w, u);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

/// Each import circle: its files and a report naming one cycle and, per edge,
/// the lines that create it.
fn circles(g: &Graph) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for comp in components(g).into_iter().filter(|c| c.len() > 1) {
        let cycle = cycle_in(g, &comp);
        let names: Vec<String> = comp.iter().map(|n| show(n)).collect();
        let steps: Vec<String> = cycle.iter().map(|n| show(n)).collect();
        let mut s = format!(
            "{} files: {}\n  cycle: {}\n",
            comp.len(),
            names.join(", "),
            steps.join(" → ")
        );
        for pair in cycle.windows(2) {
            let _ = writeln!(s, "    {} → {}:", show(&pair[0]), show(&pair[1]));
            for why in &g.edges[&pair[0]][&pair[1]] {
                let _ = writeln!(s, "      line {}: {}", why.line, why.text);
            }
        }
        out.push((comp, s));
    }
    out
}

/// `source/x.rs` → `source`, `cache.rs` → `cache`.
fn layer_of(node: &str) -> &str {
    node.split('/')
        .next()
        .unwrap_or(node)
        .trim_end_matches(".rs")
}

fn edge_report(from: &str, to: &str, whys: &[Why], rule: &str) -> String {
    let mut s = format!("{} → {} ({rule})", show(from), show(to));
    for why in whys {
        let _ = write!(s, "\n    line {}: {}", why.line, why.text);
    }
    s
}

fn layer_violations(g: &Graph) -> Vec<String> {
    let allowed = |layer: &str| LAYERS.iter().find(|(l, _)| *l == layer).map(|(_, a)| *a);
    let mut unknown: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for n in g
        .nodes
        .iter()
        .filter(|n| *n != "lib.rs" && !PSEUDO.contains(&n.as_str()))
    {
        if allowed(layer_of(n)).is_none() {
            unknown.entry(layer_of(n)).or_default().push(n);
        }
    }
    let mut out: Vec<String> = unknown.iter().map(|(layer, files)| {
        let files = files.iter().map(|f| show(f)).collect::<Vec<_>>().join(", ");
        format!("new layer folder `{layer}` ({files}): add it to the table and to lib.rs's layer map")
    }).collect();
    for (from, tos) in &g.edges {
        // The crate root only declares modules: its own edges are unrestricted.
        let Some(ok) = allowed(layer_of(from)).filter(|_| from != "lib.rs") else {
            continue;
        };
        for (to, whys) in tos {
            let (fl, tl) = (
                layer_of(from),
                if to == "lib.rs" {
                    "the crate root"
                } else {
                    layer_of(to)
                },
            );
            if tl == fl || ok.contains(&tl) || (ok.contains(&"*") && to != "lib.rs") {
                continue;
            }
            let may = if ok.is_empty() {
                "nothing".to_owned()
            } else {
                ok.join(", ")
            };
            let mut rule = format!("`{fl}` may use only: {may}");
            if to == "lib.rs" {
                rule.push_str(
                    "; a path that stops at the crate root is stale or names a lib.rs item",
                );
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
            out.push(edge_report(
                from,
                to,
                whys,
                "a source never knows about triggers",
            ));
        }
    }
    out
}

fn oversized(files: &BTreeMap<String, String>) -> Vec<String> {
    let long = files
        .iter()
        .filter(|(p, _)| !LONG_FILES.contains(&p.as_str()));
    let counted = long.map(|(p, text)| (p, text.lines().count()));
    counted
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(p, n)| format!("src/{p}: {n} lines"))
        .collect()
}

/// Every `*.rs` under `src/`, keyed by its path relative to `src/`.
fn read_src() -> BTreeMap<String, String> {
    // Under plain `rustc --test` there is no CARGO_MANIFEST_DIR: run from the crate.
    let root = Path::new(option_env!("CARGO_MANIFEST_DIR").unwrap_or(".")).join("src");
    let (mut out, mut dirs) = (BTreeMap::new(), vec![root.clone()]);
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for path in entries.map(|e| e.expect("directory entry").path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(&root)
                    .expect("under src/")
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.insert(rel, text);
            }
        }
    }
    assert!(
        out.contains_key("lib.rs"),
        "no lib.rs in {}",
        root.display()
    );
    out
}

fn fail_if_any(what: &str, found: &[String]) {
    assert!(
        found.is_empty(),
        "{} {what}:\n\n{}\n",
        found.len(),
        found.join("\n\n")
    );
}

#[test]
fn no_import_circles_between_files() {
    let found: Vec<String> = circles(&analyze(&read_src()))
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    fail_if_any(
        "import circle(s) between files in src/ (break one edge of each)",
        &found,
    );
}

#[test]
fn layers_import_only_downward() {
    fail_if_any(
        "layer violation(s)",
        &layer_violations(&analyze(&read_src())),
    );
}

#[test]
fn source_never_imports_trigger() {
    fail_if_any(
        "import(s) from src/source/ into src/trigger/",
        &source_to_trigger(&analyze(&read_src())),
    );
}

#[test]
fn no_file_over_600_lines() {
    fail_if_any(
        &format!("file(s) over {MAX_LINES} lines (split by responsibility)"),
        &oversized(&read_src()),
    );
}

/// The analyzer on small in-memory trees, so each rule above is seen to fail.
mod self_tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect()
    }

    fn texts(g: &Graph, from: &str, to: &str) -> Vec<String> {
        let whys = g.edges.get(from).and_then(|m| m.get(to));
        whys.into_iter().flatten().map(|w| w.text.clone()).collect()
    }

    #[test]
    fn cycle_through_use_super() {
        let g = analyze(&tree(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "pub mod x;\npub mod y;"),
            ("a/x.rs", "use super::y::B;\npub struct Y;"),
            ("a/y.rs", "use std::fmt;\nuse super::x::Y;\npub struct B;"),
        ]));
        let found = circles(&g);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, ["a/x.rs", "a/y.rs"]);
        assert!(
            found[0].1.contains("line 2: use super::x::Y"),
            "{}",
            found[0].1
        );
        assert!(
            found[0]
                .1
                .contains("cycle: src/a/x.rs → src/a/y.rs → src/a/x.rs"),
            "{}",
            found[0].1
        );
    }

    #[test]
    fn cycle_through_inline_crate_path() {
        let g = analyze(&tree(&[
            ("lib.rs", "pub mod a;\npub mod b;"),
            ("a.rs", "pub fn f() { crate::b::g() }"),
            ("b.rs", "pub fn g() { let _ = crate :: a :: f; }"),
        ]));
        assert_eq!(circles(&g).len(), 1);
        assert_eq!(texts(&g, "b.rs", "a.rs"), ["crate::a::f"]);
    }

    #[test]
    fn reexport_in_mod_rs_is_followed_not_counted() {
        let g = analyze(&tree(&[
            ("lib.rs", "pub mod m;"),
            (
                "m/mod.rs",
                "pub mod a;\npub mod b;\npub use a::Item;\npub(crate) use b::{Other as O};",
            ),
            ("m/a.rs", "pub struct Item;"),
            (
                "m/b.rs",
                "use super::Item;\npub struct Other;\n#[cfg(test)]\nmod tests { use super::*; }",
            ),
        ]));
        assert!(circles(&g).is_empty(), "{:?}", circles(&g));
        assert!(g.edges.get("m/mod.rs").is_none(), "{:?}", g.edges);
        assert_eq!(texts(&g, "m/b.rs", "m/a.rs"), ["use super::Item"]);
        assert_eq!(g.edges.len(), 1, "{:?}", g.edges);
    }

    #[test]
    fn comments_and_literals_are_ignored() {
        let a = r####"
            // use crate::b::X;
            /* crate::b::y() /* nested */ crate::b::z() */
            /// doc: crate::b::doc
            const S: &str = "crate::b::s \" crate::b::t";
            const R: &str = r##"crate::b::"# raw "##;
            fn f<'a>(x: &'a str) -> char { let _ = (b"crate::b", br#"crate::b"#); '"' }
            fn g() -> char { let _ = '\''; crate::c::h(); 'x' }
        "####;
        let g = analyze(&tree(&[
            ("lib.rs", "pub mod a; pub mod b; pub mod c;"),
            ("a.rs", a),
            ("b.rs", ""),
            ("c.rs", ""),
        ]));
        assert!(texts(&g, "a.rs", "b.rs").is_empty(), "{:?}", g.edges);
        assert_eq!(texts(&g, "a.rs", "c.rs"), ["crate::c::h"]);
    }

    #[test]
    fn source_to_trigger_breaks_the_layers() {
        let g = analyze(&tree(&[
            ("lib.rs", "pub mod source;\npub mod trigger;"),
            ("source/mod.rs", "pub mod x;"),
            ("source/x.rs", "fn f() { let _ = crate::trigger::y::Spec; }"),
            ("trigger/mod.rs", "pub mod y;"),
            ("trigger/y.rs", "pub struct Spec;"),
        ]));
        let layers = layer_violations(&g);
        assert_eq!(layers.len(), 1, "{layers:?}");
        assert!(
            layers[0].starts_with("src/source/x.rs → src/trigger/y.rs"),
            "{}",
            layers[0]
        );
        assert!(
            layers[0].contains("line 1: crate::trigger::y::Spec"),
            "{}",
            layers[0]
        );
        assert_eq!(source_to_trigger(&g).len(), 1);
    }

    #[test]
    fn unknown_folder_and_long_file_fail() {
        let long = "fn f() {}\n".repeat(MAX_LINES + 1);
        let files = tree(&[
            ("lib.rs", "pub mod misc;"),
            ("misc.rs", &long),
            ("source/prom_text.rs", &long),
        ]);
        let layers = layer_violations(&analyze(&files));
        assert!(
            layers.len() == 1 && layers[0].starts_with("new layer folder `misc`"),
            "{layers:?}"
        );
        assert_eq!(
            oversized(&files),
            [format!("src/misc.rs: {} lines", MAX_LINES + 1)]
        );
    }

    #[test]
    fn brace_groups_children_and_tests_files() {
        let g = analyze(&tree(&[
            (
                "lib.rs",
                "pub mod a; pub mod b; pub mod e; pub mod proto { }",
            ),
            (
                "a.rs",
                "use crate::{b::{self, c::{Deep, Other as O}, d::*}, e};\nuse crate::proto::X;",
            ),
            (
                "b/mod.rs",
                "pub(crate) mod c;\npub mod d;\nfn f() { c::deep(); x::c::no(); }",
            ),
            ("b/c.rs", "pub struct Deep;\n#[cfg(test)]\nmod tests;"),
            ("b/c/tests.rs", "use super::*;\nuse super::super::d::Thing;"),
            ("b/d.rs", ""),
            ("e.rs", ""),
        ]));
        assert_eq!(texts(&g, "a.rs", "b/mod.rs"), ["use crate::b"]);
        assert_eq!(
            texts(&g, "a.rs", "b/c.rs"),
            ["use crate::b::c::Deep", "use crate::b::c::Other as O"]
        );
        assert_eq!(texts(&g, "a.rs", "b/d.rs"), ["use crate::b::d::*"]);
        assert_eq!(texts(&g, "a.rs", "e.rs"), ["use crate::e"]);
        assert_eq!(texts(&g, "a.rs", "proto"), ["use crate::proto::X"]);
        assert_eq!(texts(&g, "b/mod.rs", "b/c.rs"), ["c::deep"]);
        assert_eq!(texts(&g, "b/c/tests.rs", "b/c.rs"), ["use super::*"]);
        assert_eq!(
            texts(&g, "b/c/tests.rs", "b/d.rs"),
            ["use super::super::d::Thing"]
        );
    }
}
