#!/usr/bin/env python3
"""Write fuzz/corpus/<target>/ seeds from the project's own fixtures.

Run from anywhere: `python3 fuzz/make_seeds.py`. The seeds are committed; the
corpus libFuzzer grows on top of them goes to fuzz/corpus-run/ (ignored).
Sources: tests/golden/ expositions, k8s/ and README YAML (ScaledObjects and the
scaler config), and the samples inlined in the parsers' unit tests.
"""
import hashlib
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus"
CHUNK = 4096  # bytes; libFuzzer's default max_len, so seeds are not truncated


def write(target, text):
    data = text.encode()
    if not data:
        return
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "'": "'"}


def unescape(lit):
    """Undo a Rust string literal's escapes (\\n, \\", \\u{..}, ...)."""
    def one(m):
        e = m.group(1)
        if e.startswith("u{"):
            return chr(int(e[2:-1], 16))
        if e.startswith("x"):
            return chr(int(e[1:], 16))
        return ESCAPES.get(e, "\\" + e)
    return re.sub(r"\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)", one, lit)


def raw_strings(path):
    """Rust raw strings r#"..."# and plain "..." literals with escapes undone."""
    src = path.read_text()
    out = re.findall(r'r#"(.*?)"#', src, re.S)
    for lit in re.findall(r'(?<![r#\w])"((?:[^"\\\n]|\\.)*)"', src):
        out.append(unescape(lit))
    return out


# --- exposition: golden files cut at metric-family boundaries ---------------
for golden in sorted((ROOT / "tests" / "golden").glob("*.txt")):
    chunk = ""
    for family in re.split(r"(?m)^(?=# HELP )", golden.read_text()):
        if chunk and len(chunk) + len(family) > CHUNK:
            write("prom_text", chunk)
            chunk = ""
        chunk += family[:CHUNK]
    write("prom_text", chunk)
for s in raw_strings(ROOT / "src" / "source" / "prom_text.rs"):
    if re.search(r"\d", s) and len(s) > 3:
        write("prom_text", s)

# --- PromQL JSON: the bodies the unit and integration tests use -------------
for path in [*sorted((ROOT / "src/source/prometheus").rglob("*.rs")), ROOT / "tests/signals.rs"]:
    for s in raw_strings(path):
        if '"status"' in s or s.startswith("<"):
            write("promql_json", s)
for body in [
    '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"vllm:num_requests_waiting","pod":"p-0","namespace":"inference"},"value":[1733000000.123,"7"]}]}}',
    '{"status":"success","data":{"resultType":"scalar","result":[1733000000,"-Inf"]}}',
    '{"status":"success","data":{"resultType":"string","result":[1733000000,"x"]}}',
    '{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}',
    '{"status":"success","warnings":["PromQL info: metric might not be a counter"],"data":{"resultType":"vector","result":[]}}',
]:
    write("promql_json", body)

# --- YAML: ScaledObject trigger metadata and scaler configs -----------------
CONFIG_KEYS = {"coldStartBudgetMillis", "idleTimeoutSeconds", "maxResponseBytes",
               "maxTriggers", "outbound", "profiles"}
yaml_texts = [p.read_text() for p in sorted((ROOT / "k8s").rglob("*.yaml"))]
yaml_texts += re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def metadata_seed(md):
    lines = []
    for k, v in md.items():
        v = "" if v is None else str(v)
        first, *rest = v.split("\n")
        lines.append(f"{k}={first}")
        lines += [" " + r for r in rest]
    return "\n".join(lines)


def walk(node):
    if isinstance(node, dict):
        if isinstance(node.get("metadata"), dict) and "type" in node:
            write("trigger_metadata", metadata_seed(node["metadata"]))
        for v in node.values():
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)


for text in yaml_texts:
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        continue
    for doc in docs:
        if isinstance(doc, dict) and doc and set(doc) <= CONFIG_KEYS:
            write("scaler_config", yaml.safe_dump(doc, sort_keys=False))
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            for v in (doc.get("data") or {}).values():
                write("scaler_config", str(v))
        walk(doc)
write("scaler_config", (ROOT / "k8s" / "scaler-config.yaml").read_text())
for path in [ROOT / "src/guard/config.rs", ROOT / "src/guard/outbound.rs",
             *sorted((ROOT / "src/guard/credentials").glob("*.rs"))]:
    for s in raw_strings(path):
        if re.match(r"^\s*[a-zA-Z]+:", s) and "\n" in s:
            write("scaler_config", s)

# Metadata tables in the trigger tests: runs of ("key", "value") tuples.
pair = r'\(\s*"([A-Za-z]+)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)'
for path in sorted((ROOT / "src" / "trigger").rglob("*.rs")) + [ROOT / "tests/keda_keys.rs"]:
    src = path.read_text()
    for m in re.finditer(r"\[\s*(?:" + pair + r"\s*,?\s*){2,}\]", src):
        pairs = re.findall(pair, m.group(0))
        write("trigger_metadata", "\n".join(f"{k}={v}" for k, v in pairs))

# --- simulator traces: the heads of the committed traces, the tests' rows ---
for trace in sorted((ROOT / "sim" / "traces").glob("*.*sv")) + sorted(
        (ROOT / "sim" / "traces").glob("*.jsonl")):
    lines = trace.read_text().splitlines(keepends=True)
    write("sim_trace", "".join(lines[:30]))
    write("sim_trace", "# a comment first\n\n" + "".join(lines[:3]))
for s in raw_strings(ROOT / "src" / "sim" / "trace" / "tests.rs"):
    if re.search(r"\d", s) and ("," in s or "{" in s) and len(s) > 4:
        write("sim_trace", s)

for target in sorted(p.name for p in OUT.iterdir()):
    print(target, len(list((OUT / target).iterdir())), "seeds")
