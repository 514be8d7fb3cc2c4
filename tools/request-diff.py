#!/usr/bin/env python3
"""The writes an API server served between two scrapes of its /metrics, by verb, resource,
subresource and code (`apiserver_request_total`; lists and watches left out).

    tools/request-diff.py BEFORE AFTER [RESOURCE...]

RESOURCE (default: pods daemonsets statefulsets replicasets deployments controllerrevisions)
limits the rows to those resources. Python 3 standard library only.
"""

import collections
import re
import sys

DEFAULT = ("pods", "daemonsets", "statefulsets", "replicasets", "deployments",
           "controllerrevisions")


def counts(path, resources):
    c = collections.Counter()
    for line in open(path):
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("resource") not in resources:
            continue
        key = (labels["verb"].upper(), labels["resource"], labels.get("subresource", ""),
               labels["code"])
        c[key] += float(line.rsplit(" ", 1)[1])
    return c


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    resources = set(sys.argv[3:]) or set(DEFAULT)
    before, after = counts(sys.argv[1], resources), counts(sys.argv[2], resources)
    print("| requests | verb | resource | subresource | code |")
    print("| ---: | --- | --- | --- | --- |")
    for key in sorted(after):
        n = after[key] - before.get(key, 0)
        if n and key[0] not in ("LIST", "WATCH"):
            print(f"| {int(n)} | {' | '.join(key)} |")


if __name__ == "__main__":
    main()
