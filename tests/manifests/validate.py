#!/usr/bin/env python3
"""Validate Kubernetes manifests offline; driven by tests/manifests.rs.

    python3 tests/manifests/validate.py --crds k8s/crds-for-tests FILE...  ('-' = stdin)
    python3 tests/manifests/validate.py --dockerfile Dockerfile

The second form parses a Dockerfile with the PyPI package `dockerfile` (which
wraps Docker's own Go parser) and prints its instructions as JSON, for the Rust
test to compare with the Deployment and the CI scripts.

Every YAML document must be a Kubernetes object and validate against:
- built-in kinds: the Kubernetes OpenAPI schemas bundled in the PyPI package
  `kubernetes-validate` (strict: unknown fields are errors), for the release
  named by --kubernetes-version (default: the newest the package bundles);
- kinds defined by a CRD in --crds (KEDA's ScaledObject, TriggerAuthentication):
  the CRD's openAPIV3Schema, made strict the way an API server with
  `--validate=strict` treats a structural schema (unknown fields are errors),
  plus its `x-kubernetes-validations` rules; a rule this script does not know
  fails the run, so a new CRD rule cannot pass unnoticed;
- monitoring.coreos.com/v1 ServiceMonitor: no schema is available offline, so a
  small hand-written schema of the fields used here (see SERVICE_MONITOR).

Duplicate mapping keys are errors (kubectl refuses them too). Nothing here
touches the network: both schema sources are local files.

Prints one line per document, `ok ...` or `FAIL ...`, then a summary line
`validate.py: N passed, M failed`; exits 1 if any failed, 2 on a usage error.
"""

import argparse
import importlib.metadata
import os
import re
import sys

try:
    import jsonschema
    import kubernetes_validate
    import yaml
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(
        f"validate.py: missing Python module ({e}); run `bash .ci/install-deps` "
        "(installs kubernetes-validate from PyPI)",
        file=sys.stderr,
    )
    sys.exit(2)


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys in a mapping."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

# ObjectMeta fields a manifest may set, for objects validated against a CRD
# (whose schema says only `metadata: {type: object}`).
OBJECT_META = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN},
        "namespace": {"type": "string", "maxLength": 63, "pattern": DNS1123_LABEL},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

# The fields of a ServiceMonitor this repository uses, and their types
# (prometheus-operator's monitoring.coreos.com/v1 API).
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": OBJECT_META,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": {"type": "string", "pattern": r"^\d+(ms|s|m|h)$"},
                            "scrapeTimeout": {
                                "type": "string",
                                "pattern": r"^\d+(ms|s|m|h)$",
                            },
                            "scheme": {"enum": ["http", "https"]},
                            "honorLabels": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}

# `x-kubernetes-validations` rules (CEL) of the CRDs, implemented here. The key
# is the rule text exactly as the CRD has it; `obj` is the object the rule is
# attached to (ScaledObject: `spec`).
CEL_RULES = {
    "!has(self.minReplicaCount) || self.minReplicaCount <= (has(self.maxReplicaCount) ? self.maxReplicaCount : 100)":
        lambda obj: "minReplicaCount" not in obj
        or obj["minReplicaCount"] <= obj.get("maxReplicaCount", 100),
}


def strict(schema):
    """A copy of a structural schema in which objects refuse unknown fields."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def cel_rules(schema, path=()):
    """(path, rule, message) of every x-kubernetes-validations rule in a schema."""
    found = []
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations", []):
            found.append((path, rule["rule"], rule.get("message", rule["rule"])))
        for name, sub in schema.get("properties", {}).items():
            found.extend(cel_rules(sub, path + (name,)))
        if "items" in schema:
            found.extend(cel_rules(schema["items"], path + ("[]",)))
    return found


def load_crds(directory):
    """{(apiVersion, kind): (schema, rules, origin)} for every served version."""
    crds = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
            for doc in yaml.load_all(f, Loader=StrictLoader):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                group = doc["spec"]["group"]
                kind = doc["spec"]["names"]["kind"]
                for version in doc["spec"]["versions"]:
                    if not version.get("served", True):
                        continue
                    schema = version["schema"]["openAPIV3Schema"]
                    rules = cel_rules(schema)
                    schema = strict(schema)
                    schema.setdefault("properties", {})["metadata"] = OBJECT_META
                    schema.setdefault("required", [])
                    for field in ("apiVersion", "kind", "metadata"):
                        if field not in schema["required"]:
                            schema["required"].append(field)
                    crds[(f"{group}/{version['name']}", kind)] = (schema, rules, name)
    return crds


def at(obj, path):
    """The values at a schema path (`[]` walks list items) of an object."""
    values = [obj]
    for part in path:
        nxt = []
        for v in values:
            if part == "[]" and isinstance(v, list):
                nxt.extend(v)
            elif isinstance(v, dict) and part in v:
                nxt.append(v[part])
        values = nxt
    return values


def error_text(e):
    where = "/".join(str(p) for p in e.absolute_path) or "(root)"
    return f"{where}: {e.message}"


def validate_doc(doc, crds, version):
    """Returns (schema description, [errors])."""
    if not isinstance(doc, dict):
        return "-", ["not a mapping"]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return "-", ["apiVersion and kind are required strings"]
    if (api_version, kind) in crds:
        schema, rules, origin = crds[(api_version, kind)]
        validator = jsonschema.Draft7Validator(schema)
        errors = [error_text(e) for e in sorted(validator.iter_errors(doc), key=str)]
        if not errors:
            for path, rule, message in rules:
                check = CEL_RULES.get(rule)
                if check is None:
                    errors.append(
                        f"{'/'.join(path)}: CRD rule not implemented in validate.py: {rule}"
                    )
                    continue
                for value in at(doc, path):
                    if not check(value):
                        errors.append(f"{'/'.join(path)}: {message}")
        return f"CRD {origin}", errors
    if (api_version, kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
        validator = jsonschema.Draft7Validator(SERVICE_MONITOR)
        errors = [error_text(e) for e in validator.iter_errors(doc)]
        return "ServiceMonitor fields (hand-written, see validate.py)", errors
    try:
        used = kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as e:
        return "-", [e.message]
    except kubernetes_validate.ValidationError as e:
        return f"Kubernetes {e.version} strict", [error_text(e)]
    return f"Kubernetes {used} strict", []


def dump_dockerfile(path):
    """Print the instructions of a Dockerfile as JSON (Docker's own parser)."""
    import json

    try:
        import dockerfile
    except ImportError as e:
        print(
            f"validate.py: missing Python module ({e}); run `bash .ci/install-deps` "
            "(installs dockerfile from PyPI)",
            file=sys.stderr,
        )
        return 2
    try:
        commands = dockerfile.parse_file(path)
    except (dockerfile.GoParseError, dockerfile.GoIOError) as e:
        print(f"FAIL {path}: {e}")
        return 1
    print(
        json.dumps(
            [
                {"cmd": c.cmd.upper(), "flags": list(c.flags), "value": list(c.value),
                 "json": c.json, "line": c.start_line}
                for c in commands
            ]
        )
    )
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--dockerfile":
        return dump_dockerfile(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crds", required=True, help="directory of CRD YAML files")
    parser.add_argument(
        "--kubernetes-version",
        default=kubernetes_validate.latest_version(),
        help="Kubernetes release whose schemas apply (default: newest bundled)",
    )
    parser.add_argument("files", nargs="+", help="YAML files; '-' reads stdin")
    args = parser.parse_args()

    if not os.path.isdir(args.crds):
        print(f"validate.py: CRD directory {args.crds} does not exist", file=sys.stderr)
        return 2
    crds = load_crds(args.crds)
    print(
        f"validate.py: kubernetes-validate {importlib.metadata.version('kubernetes-validate')}"
        f" (bundled schemas, Kubernetes {args.kubernetes_version}),"
        f" jsonschema {importlib.metadata.version('jsonschema')},"
        f" CRDs: {', '.join(sorted(k for _, k in crds)) or 'none'}"
    )
    passed = failed = 0
    for name in args.files:
        try:
            if name == "-":
                text = sys.stdin.read()
            else:
                with open(name, encoding="utf-8") as f:
                    text = f.read()
            docs = list(yaml.load_all(text, Loader=StrictLoader))
        except (OSError, yaml.YAMLError) as e:
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            what = "{}/{}".format(
                doc.get("kind", "?") if isinstance(doc, dict) else "?",
                (doc.get("metadata") or {}).get("name", "?") if isinstance(doc, dict) else "?",
            )
            schema, errors = validate_doc(doc, crds, args.kubernetes_version)
            if errors:
                failed += 1
                for error in errors:
                    print(f"FAIL {name} [document {index}] {what} ({schema}): {error}")
            else:
                passed += 1
                print(f"ok   {name} [document {index}] {what} ({schema})")
    print(f"validate.py: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
