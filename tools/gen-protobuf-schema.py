#!/usr/bin/env python3
"""Generate crates/apiserver/src/protobuf/messages.json from the k8s-pb crate.

The API server decodes Kubernetes protobuf request bodies (what kubectl's typed
commands send) without compiled message types: it walks the wire format with a
table of messages. This script builds that table once, from two crates in the
local cargo registry:

* k8s-pb (prost-generated Rust): message names, field tags, wire types,
  repeated/map-ness and referenced message types.
* k8s-openapi: the exact JSON field names (`hostIPC`, `podIP`, `type`), since
  prost's snake_case names do not round-trip to upstream's JSON names.

Output: a compact JSON object, message full name -> [[tag, jsonName, type,
repeated], ...], where type is a scalar name (string, int32, int64, bool, bytes,
double), a message full name, or "map:<value type>" (keys are always strings),
and an empty jsonName marks a Go embedded struct whose fields are inlined.

Usage: python3 tools/gen-protobuf-schema.py [--registry DIR] [--out FILE]
Fields whose JSON name had to be guessed are printed on stderr.
"""

import argparse
import glob
import json
import os
import re
import sys

# The packages the server needs; anything they reference is pulled in too.
ROOT_MODULES = [
    "api.core.v1",
    "api.apps.v1",
    "api.policy.v1",
    "api.autoscaling.v1",
    "api.coordination.v1",
    "api.events.v1",
    "api.autoscaling.v2",
    "api.batch.v1",
    "api.certificates.v1",
    "api.discovery.v1",
    "api.networking.v1",
    "api.rbac.v1",
    "api.scheduling.v1",
    "api.storage.v1",
    "api.node.v1",
    "api.admissionregistration.v1",
    # TokenRequest and the review kinds (kubectl create token, auth can-i, auth whoami).
    "api.authentication.v1",
    "api.authorization.v1",
    "apimachinery.pkg.apis.meta.v1",
    "apimachinery.pkg.api.resource",
    "apimachinery.pkg.util.intstr",
    "apimachinery.pkg.runtime",
]

K8S_PB = "k8s-pb-0.9.0"
K8S_OPENAPI = "k8s-openapi-0.29.0"
# Every API version k8s-openapi ships is read, newest last so its names win.
OPENAPI_VERSIONS = ["v1_33", "v1_34", "v1_35", "v1_36", "v1_37"]

# JSON names no k8s-openapi type carries and lowerCamelCase gets wrong.
OVERRIDES = {
    "api.core.v1.PodLogOptions.insecure_skip_tls_verify_backend": "insecureSkipTLSVerifyBackend",
}

SCALARS = {"string", "int32", "int64", "bool", "bytes", "double"}


def find_crate(registry, name):
    hits = sorted(glob.glob(os.path.join(registry, "*", name)))
    if not hits:
        sys.exit(f"{name} not found under {registry}/*: run `cargo fetch` in a crate depending on it")
    return hits[-1]


def strip_comments(text):
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))


def module_of(src_root, path):
    rel = os.path.relpath(os.path.dirname(path), src_root)
    return rel.replace(os.sep, ".")


def resolve(module, rust_path):
    """Resolves a prost type path (`super::super::core::v1::X`, `X`) to a full name."""
    rust_path = rust_path.strip()
    parts = rust_path.split("::")
    base = module.split(".")
    while parts and parts[0] == "super":
        parts.pop(0)
        base = base[:-1]
    return ".".join(base + parts)


def unwrap_type(ty):
    """Strips Option<>, Vec<>, Box<> wrappers from a prost field type."""
    ty = re.sub(r"\s+", "", ty)
    # rustfmt breaks a long type over lines with a trailing comma (`Vec<\n    X,\n>`).
    ty = ty.replace(",>", ">")
    changed = True
    while changed:
        changed = False
        for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
            if ty.startswith(wrapper) and ty.endswith(">"):
                ty = ty[len(wrapper):-1]
                changed = True
    return ty


STRUCT_RE = re.compile(r"pub struct (\w+) \{(.*?)\n\}", re.S)
STRUCT_EMPTY_RE = re.compile(r"pub struct (\w+) \{\}")
FIELD_RE = re.compile(r"#\[prost\((.*?)\)\]\s*pub\s+(?:r#)?(\w+)\s*:\s*(.*?),\s*(?=#\[|$)", re.S)


def parse_k8s_pb(src_root):
    """Returns {full message name: [(tag, rust_name, type, repeated)]}."""
    messages = {}
    for path in glob.glob(os.path.join(src_root, "**", "mod.rs"), recursive=True):
        module = module_of(src_root, path)
        text = strip_comments(open(path, encoding="utf-8").read())
        for m in STRUCT_EMPTY_RE.finditer(text):
            messages[f"{module}.{m.group(1)}"] = []
        for m in STRUCT_RE.finditer(text):
            name, body = m.group(1), m.group(2).strip() + "\n"
            fields = []
            for f in FIELD_RE.finditer(body):
                attrs, rust_name, ty = f.group(1), f.group(2), f.group(3)
                tag = int(re.search(r'tag = "(\d+)"', attrs).group(1))
                kind = attrs.split(",")[0].strip()
                repeated = "repeated" in [a.strip() for a in attrs.split(",")]
                if kind.startswith("btree_map"):
                    key, value = re.search(r'btree_map = "(\w+), (\w+)"', attrs).groups()
                    if key != "string":
                        sys.exit(f"{module}.{name}.{rust_name}: map key {key} unsupported")
                    if value == "message":
                        inner = re.sub(r"\s+", "", ty)
                        vm = re.search(r"BTreeMap<::prost::alloc::string::String,(.*?),?>$", inner)
                        value = resolve(module, vm.group(1))
                    ftype, repeated = f"map:{value}", False
                elif kind.startswith("bytes"):
                    ftype = "bytes"
                elif kind == "message":
                    ftype = resolve(module, unwrap_type(ty))
                elif kind in SCALARS:
                    ftype = kind
                else:
                    sys.exit(f"{module}.{name}.{rust_name}: prost kind {kind!r} unsupported")
                fields.append((tag, rust_name, ftype, repeated))
            if not fields and body.strip():
                sys.exit(f"{module}.{name}: could not parse fields")
            messages[f"{module}.{name}"] = fields
    return messages


def normalize(name):
    return name.replace("_", "").lower()


def parse_k8s_openapi(src_roots):
    """Returns ({lowercased full message name: {normalized: json}}, {normalized: {json names}}).

    Message names are matched case-insensitively: k8s-openapi keeps Go's
    initialisms (`HTTPGetAction`) where prost does not (`HttpGetAction`).
    """
    per_type, global_names = {}, {}
    paths = [
        (src_root, path)
        for src_root in src_roots
        for path in sorted(glob.glob(os.path.join(src_root, "**", "*.rs"), recursive=True))
    ]
    for src_root, path in paths:
        text = open(path, encoding="utf-8").read()
        sm = re.search(r"pub struct (\w+)", text)
        if not sm:
            continue
        module = module_of(src_root, path)
        names = {}
        for jm in re.finditer(r'"([A-Za-z0-9$_-]+)" => Field::Key_(\w+),', text):
            json_name = jm.group(1)
            names[normalize(json_name)] = json_name
            global_names.setdefault(normalize(json_name), set()).add(json_name)
        per_type.setdefault(f"{module}.{sm.group(1)}".lower(), {}).update(names)
    return per_type, global_names


def embedded(typed, messages, rust_name, ftype, repeated):
    """Whether a field is a Go embedded struct, inlined into its parent's JSON.

    True when the parent's k8s-openapi type has no field of this name but carries
    every field of the field's message instead (`Probe.handler` -> `httpGet`, ...).
    """
    if repeated or ftype not in messages or normalize(rust_name) in typed:
        return False
    children = messages[ftype]
    return bool(typed) and bool(children) and all(normalize(c[1]) in typed for c in children)


def lower_camel(rust_name):
    head, *rest = rust_name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def closure(messages):
    wanted = [n for n in messages if n.rsplit(".", 1)[0] in ROOT_MODULES]
    seen = set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        if name not in messages:
            sys.exit(f"referenced message {name} not found")
        seen.add(name)
        for _, _, ftype, _ in messages[name]:
            target = ftype[4:] if ftype.startswith("map:") else ftype
            if target not in SCALARS:
                wanted.append(target)
    return sorted(seen)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", default=os.path.expanduser("~/.cargo/registry/src"))
    parser.add_argument(
        "--out",
        default=os.path.normpath(os.path.join(here, "..", "crates", "apiserver", "src", "protobuf", "messages.json")),
    )
    args = parser.parse_args()

    pb_src = os.path.join(find_crate(args.registry, K8S_PB), "src")
    oa_crate = find_crate(args.registry, K8S_OPENAPI)
    oa_srcs = [os.path.join(oa_crate, "src", v) for v in OPENAPI_VERSIONS if os.path.isdir(os.path.join(oa_crate, "src", v))]
    messages = parse_k8s_pb(pb_src)
    per_type, global_names = parse_k8s_openapi(oa_srcs)

    out, guessed = {}, 0
    for name in closure(messages):
        typed = per_type.get(name.lower(), {})
        rows = []
        for tag, rust_name, ftype, repeated in messages[name]:
            key = normalize(rust_name)
            if f"{name}.{rust_name}" in OVERRIDES:
                json_name = OVERRIDES[f"{name}.{rust_name}"]
            elif key in typed:
                json_name = typed[key]
            elif embedded(typed, messages, rust_name, ftype, repeated):
                # A Go embedded struct (`VolumeSource` in `Volume`): its fields
                # are inlined into the parent's JSON object, marked by "".
                json_name = ""
                print(f"inlined {name}.{rust_name} ({ftype})", file=sys.stderr)
            elif len(global_names.get(key, ())) == 1:
                json_name = next(iter(global_names[key]))
            else:
                json_name = lower_camel(rust_name)
                guessed += 1
                print(f"guessed {name}.{rust_name} -> {json_name}", file=sys.stderr)
            rows.append([tag, json_name, ftype, 1 if repeated else 0])
        out[name] = rows

    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("{\n")
        items = list(out.items())
        for i, (name, rows) in enumerate(items):
            sep = "," if i + 1 < len(items) else ""
            fh.write(f"{json.dumps(name)}:{json.dumps(rows, separators=(',', ':'))}{sep}\n")
        fh.write("}\n")
    print(f"wrote {len(out)} messages to {args.out} ({guessed} field names guessed)", file=sys.stderr)


if __name__ == "__main__":
    main()
