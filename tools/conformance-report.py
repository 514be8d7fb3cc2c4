#!/usr/bin/env python3
"""The conformance runs' bookkeeping, for tools/conformance.

  conformance-report.py serial-focus DRY_RUN_REPORT.json
      prints a Ginkgo focus matching exactly the [Serial] specs of a dry run (v1.28's specs carry
      [Serial] in their names, not as a label, and Ginkgo cannot AND two focus expressions)
  conformance-report.py failed-focus SIDE_DIR parallel|serial [behind]
      prints a Ginkgo focus matching exactly the specs that failed in a side's last results
      (the [Serial] ones or the others; with `behind`, only those upstream passes), for
      `RERUN=1|behind tools/conformance run SIDE`
  conformance-report.py cross RUN_DIR
      prints the cross-run's table (tools/conformance cross-run): each end-to-end test's result
      on rollwright's API server and on upstream's
  conformance-report.py table RUNS_DIR CONFORMANCE.md
      reads each side's JUnit reports under RUNS_DIR/<side>/ and rewrites the table between the
      markers in CONFORMANCE.md: every selected spec, its result on each side, and the reason kept
      for a spec that cannot pass with simulated nodes (the REASONS section of the file)
"""

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

BEGIN = "<!-- results:begin (written by tools/conformance table) -->"
END = "<!-- results:end -->"
SIDES = ("rollwright", "upstream")


def serial_focus(report):
    names = []
    for suite in json.loads(Path(report).read_text()):
        for spec in suite.get("SpecReports") or []:
            # A dry run reports the specs it selected as passed and the others as skipped.
            if spec.get("LeafNodeType") != "It" or spec.get("State") != "passed":
                continue
            text = " ".join(spec.get("ContainerHierarchyTexts") or []) + " " + spec["LeafNodeText"]
            if "[Serial]" in text:
                names.append(re.escape(text))
    # A focus that matches nothing would run everything: say so instead.
    print("|".join(names) if names else "^$no serial specs^")


def results(side_dir):
    """Spec name -> passed | failed | skipped, from every JUnit report of one side's run."""
    out = {}
    # In the order they were written: a rerun's result replaces the earlier one.
    # Ginkgo's own reports (junit-*.xml), not the e2e framework's per-process junit_NN.xml.
    for report in sorted(side_dir.glob("junit-*.xml"), key=lambda p: p.stat().st_mtime):
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("name", "")
            # Specs only: not the suite's set-up and reporting nodes ([SynchronizedBeforeSuite] ...).
            if not name.startswith("[It] "):
                continue
            name = re.sub(r"^\[It\] ", "", name)
            # Ginkgo writes the state as an attribute (passed, failed, skipped, pending, ...).
            state = case.get("status", "")
            if state == "passed":
                status = "passed"
            elif state in ("skipped", "pending", "") and case.find("failure") is None:
                status = "skipped"
            else:
                status = "failed"
            # A spec skipped by a later run (it was not selected there) keeps its result.
            if status != "skipped" or name not in out:
                out[name] = status
    return out


def failed_focus(side_dir, which, only_behind=False):
    side_dir = Path(side_dir)
    names = [n for n, st in results(side_dir).items() if st == "failed"]
    if only_behind:
        # Only what the other side (upstream) passes.
        other = results(side_dir.parent / "upstream")
        names = [n for n in names if other.get(n) == "passed"]
    names = [n for n in names if ("[Serial]" in n) == (which == "serial")]
    print("|".join(re.escape(n) for n in names) if names else "^$nothing failed^")


def reasons(doc):
    """`- spec substring: reason` lines under the heading 'Why a spec cannot pass here'."""
    m = re.search(r"^## Why a spec cannot pass here\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    found = []
    for line in (m.group(1) if m else "").splitlines():
        mm = re.match(r"- `(.+?)`: (.+)", line)
        if mm:
            found.append((mm.group(1), mm.group(2)))
    return found


def table(runs_dir, doc_path):
    runs_dir, doc_path = Path(runs_dir), Path(doc_path)
    per_side = {s: results(runs_dir / s) for s in SIDES if (runs_dir / s).is_dir()}
    doc = doc_path.read_text() if doc_path.exists() else f"# Conformance\n\n{BEGIN}\n{END}\n"
    why = reasons(doc)
    names = sorted({n for r in per_side.values() for n in r})
    mark = {"passed": "pass", "failed": "**fail**", "skipped": "skip", None: "-"}
    lines = []
    for side in SIDES:
        r = per_side.get(side, {})
        ran = [v for v in r.values() if v != "skipped"]
        secs = runs_dir / side / "seconds"
        took = f", {secs.read_text().strip()} s" if secs.exists() else ""
        lines.append(f"- {side}: {ran.count('passed')} passed, {ran.count('failed')} failed of {len(ran)} run{took}")
    both = [n for n in names if per_side.get("upstream", {}).get(n) == "passed"]
    behind = [n for n in both if per_side.get("rollwright", {}).get(n) != "passed"]
    lines.append(f"- passing on upstream: {len(both)}; of those failing on rollwright: {len(behind)}")
    lines += ["", "| spec | rollwright | upstream | why |", "| --- | --- | --- | --- |"]
    for n in names:
        r = [mark[per_side.get(s, {}).get(n)] for s in SIDES]
        if r == ["skip", "skip"]:
            continue
        # A reason explains a failure; a spec passing on both needs none.
        reason = "" if r == ["pass", "pass"] else next((w for sub, w in why if sub in n), "")
        lines.append(f"| {n.replace('|', '/')} | {r[0]} | {r[1]} | {reason} |")
    body = "\n".join(lines)
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN) + len(BEGIN)] + "\n" + body + "\n" + doc[doc.index(END):]
    else:
        doc += f"\n{BEGIN}\n{body}\n{END}\n"
    doc_path.write_text(doc)
    print(f"wrote {doc_path}: {len(names)} specs")


def cross(run_dir):
    """The cross-run's table: each test with its result on rollwright's API server and on
    upstream's, from `cargo test`'s own lines (`test NAME ... ok|FAILED|ignored`)."""
    sides = ["rollwright", "upstream"]
    found = {}
    for side in sides:
        try:
            log = open(f"{run_dir}/{side}.log", encoding="utf-8", errors="replace").read()
        except FileNotFoundError:
            continue
        for name, result in re.findall(r"^test (\S+) \.\.\. (ok|FAILED|ignored)$", log, re.M):
            found.setdefault(name, {})[side] = {"ok": "pass", "FAILED": "FAIL"}.get(result, result)
    seconds = {}
    for side in sides:
        try:
            seconds[side] = open(f"{run_dir}/{side}-seconds").read().strip()
        except FileNotFoundError:
            seconds[side] = "?"
    print("| test | on rollwright's API server | on upstream's kube-apiserver |")
    print("| --- | --- | --- |")
    for name in sorted(found):
        row = [found[name].get(side, "not run") for side in sides]
        print(f"| `{name}` | {row[0]} | {row[1]} |")
    passed = [sum(1 for n in found if found[n].get(side) == "pass") for side in sides]
    print(f"| **passed** | **{passed[0]} of {len(found)}** ({seconds['rollwright']} s) "
          f"| **{passed[1]} of {len(found)}** ({seconds['upstream']} s) |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serial-focus":
        serial_focus(sys.argv[2])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "failed-focus":
        failed_focus(sys.argv[2], sys.argv[3], len(sys.argv) == 5 and sys.argv[4] == "behind")
    elif len(sys.argv) == 3 and sys.argv[1] == "cross":
        cross(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
