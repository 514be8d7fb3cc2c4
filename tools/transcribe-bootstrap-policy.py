#!/usr/bin/env python3
"""Writes crates/authz/src/bootstrap/policy.json from upstream's bootstrap policy.

Upstream's own test (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy_test.go) holds the
objects its policy code builds, sorted by name, in testdata/*.yaml. This reads those (from a
v1.28.4 checkout) and keeps what differs between objects: every bootstrap object carries the
`kubernetes.io/bootstrapping: rbac-defaults` label and the autoupdate annotation, which
`authz::bootstrap` adds back.

    tools/transcribe-bootstrap-policy.py /work/upstream/src > crates/authz/src/bootstrap/policy.json
"""
import json
import sys

import yaml

BOOTSTRAP_LABEL = ("kubernetes.io/bootstrapping", "rbac-defaults")
AUTOUPDATE = ("rbac.authorization.kubernetes.io/autoupdate", "true")


def load(root, name):
    path = f"{root}/plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/{name}"
    with open(path) as f:
        return yaml.safe_load(f)["items"]


def compact(item):
    meta = item["metadata"]
    assert meta["annotations"] == dict([AUTOUPDATE]), meta
    labels = dict(meta["labels"])
    assert labels.pop(BOOTSTRAP_LABEL[0]) == BOOTSTRAP_LABEL[1]
    out = {"name": meta["name"]}
    if "namespace" in meta:
        out["namespace"] = meta["namespace"]
    if labels:
        out["labels"] = labels
    for key in ("aggregationRule", "roleRef", "subjects", "rules"):
        if item.get(key) is not None:
            out[key] = item[key]
    if item["kind"] in ("ClusterRole", "Role") and "rules" not in out:
        out["rules"] = []
    return out


def main():
    root = sys.argv[1]
    policy = {
        "clusterRoles": [compact(i) for i in load(root, "cluster-roles.yaml")],
        "controllerRoles": [compact(i) for i in load(root, "controller-roles.yaml")],
        "clusterRoleBindings": [compact(i) for i in load(root, "cluster-role-bindings.yaml")],
        "controllerRoleBindings": [compact(i) for i in load(root, "controller-role-bindings.yaml")],
        "roles": [compact(i) for i in load(root, "namespace-roles.yaml")],
        "roleBindings": [compact(i) for i in load(root, "namespace-role-bindings.yaml")],
    }
    # One object per line group, one rule or subject per line: small, and diffs read well.
    out = ["{"]
    sections = list(policy.items())
    for si, (section, items) in enumerate(sections):
        out.append(f'  "{section}": [')
        for ii, obj in enumerate(items):
            out.append("    {")
            keys = list(obj.items())
            for ki, (k, v) in enumerate(keys):
                comma = "," if ki + 1 < len(keys) else ""
                if k in ("rules", "subjects") and v:
                    out.append(f'      "{k}": [')
                    for ri, r in enumerate(v):
                        rc = "," if ri + 1 < len(v) else ""
                        out.append("        " + json.dumps(r, separators=(",", ":")) + rc)
                    out.append("      ]" + comma)
                else:
                    out.append(f'      "{k}": ' + json.dumps(v, separators=(",", ":")) + comma)
            out.append("    }" + ("," if ii + 1 < len(items) else ""))
        out.append("  ]" + ("," if si + 1 < len(sections) else ""))
    out.append("}")
    print("\n".join(out))


main()
