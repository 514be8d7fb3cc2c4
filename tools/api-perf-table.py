#!/usr/bin/env python3
"""The side-by-side table of `tools/conformance api-perf` (issue 42): `rollwright bench api
--kubeconfig` run on upstream's kube-apiserver + etcd and on `rollwright apiserver` in one sitting,
ROUNDS times each.

    tools/api-perf-table.py DIR    # DIR/round-N/{upstream,rollwright}/api.out (bench api --json)

Per side, the medians over the rounds: creates/s, create latency p50/p99, the list's time and
size, the watch fan-out delay, each process's CPU seconds and peak RSS over the run, and their
totals (a total's median is the median of the rounds' totals). The last column says how many times
better rollwright did: upstream's median over rollwright's for times, CPU and memory, rollwright's
over upstream's for creates/s. The rounds' own figures follow.
"""

import argparse
import importlib.util
import json
from pathlib import Path

# The medians and number formats are perf-table.py's (its name has a '-', hence the loader).
_spec = importlib.util.spec_from_file_location("perf_table", Path(__file__).with_name("perf-table.py"))
perf_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_table)
median, num, ratio, SIDES = perf_table.median, perf_table.num, perf_table.ratio, perf_table.SIDES
cpu, rss, load_averages = perf_table.cpu, perf_table.rss, perf_table.load_averages

# (label, key, format, higher is better; None: no verdict, e.g. a size that is each server's encoding)
FIGURES = [
    ("creates/s", "creates_per_s", ",.0f", True),
    ("create p50 ms", "create_p50_ms", ".2f", False),
    ("create p99 ms", "create_p99_ms", ".2f", False),
    ("list s", "list_s", ".3f", False),
    ("list MB", "list_mb", ".1f", None),
    ("fan-out delay p50 ms", "fanout_p50_ms", ".2f", False),
    ("fan-out delay p99 ms", "fanout_p99_ms", ".2f", False),
]


def load(out_dir):
    """{(side, round): {"run": record or None, "load": [before, after]}} from the runs' outputs."""
    runs = {}
    for f in sorted(Path(out_dir).glob("round-*/*/api.out")):
        side, rnd = f.parent.name, int(f.parent.parent.name.split("-", 1)[1])
        record = None
        for line in f.read_text().splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("bench") == "api":
                    r["list_mb"] = r["list_bytes"] / 1e6
                    record = r
        runs[(side, rnd)] = {"run": record, "load": load_averages(f.parent)}
    return runs


def proc(r, name, key):
    p = perf_table.proc(r, name)
    return p[key] if p else None


def better(up, rw, higher_is_better):
    """How many times better rollwright did (> 1: better), as `ratio` prints it."""
    if higher_is_better is None:
        return ""
    return ratio(rw, up) if higher_is_better else ratio(up, rw)


def table(out_dir):
    runs = load(out_dir)
    rounds = sorted({rnd for _, rnd in runs})
    if not rounds:
        raise SystemExit(f"api-perf-table: no round-N/SIDE/api.out under {out_dir}")
    recs = {side: [runs[(side, rnd)]["run"] for rnd in rounds
                   if (side, rnd) in runs and runs[(side, rnd)]["run"]] for side in SIDES}
    names = {side: [] for side in SIDES}
    for side in SIDES:
        for r in recs[side]:
            for p in r["processes"]:
                if p["name"] not in names[side]:
                    names[side].append(p["name"])
    pods = sorted({r["pods"] for side in SIDES for r in recs[side]})
    out = []
    out.append("| | " + " | ".join(SIDES) + " | rollwright better by |")
    out.append("| --- |" + " ---: |" * (len(SIDES) + 1))
    out.append("| runs | " + " | ".join(str(len(recs[s])) for s in SIDES) + " | |")
    for label, key, fmt, higher in FIGURES:
        m = {s: median([r[key] for r in recs[s]]) for s in SIDES}
        out.append(f"| {label} | " + " | ".join(num(m[s], fmt) for s in SIDES)
                   + f" | {better(m['upstream'], m['rollwright'], higher)} |")
    for what, key, total, fmt in (("CPU s", "cpu_s", cpu, ".2f"),
                                  ("peak RSS MiB", "peak_rss_mib", rss, ".0f")):
        for side in SIDES:
            for name in names[side]:
                cells = [num(median([proc(r, name, key) for r in recs[s]]), fmt) if s == side
                         else "" for s in SIDES]
                out.append(f"| {name} {what} | " + " | ".join(cells) + " | |")
        m = {s: median([total(r) for r in recs[s]]) for s in SIDES}
        out.append(f"| total {what} | " + " | ".join(num(m[s], fmt) for s in SIDES)
                   + f" | {better(m['upstream'], m['rollwright'], False)} |")
    out.append("")
    out.append(f"Medians over {len(rounds)} round(s) of {', '.join(f'{p:,}' for p in pods)} pods; "
               "a total's median is the median of the rounds' totals, the peak RSS total the sum "
               "of each process's peak (they need not peak at once). CPU and peak RSS cover the "
               "three phases (creates, list, fan-out), not the servers' start-up.")
    out.append("")
    out.append("Each round:")
    out.append("")
    out.append("| round | side | creates/s | p50 / p99 ms | list s | fan-out p50 / p99 ms | "
               "CPU s | peak MiB | load before -> after |")
    out.append("| ---: | --- |" + " ---: |" * 7)
    for rnd in rounds:
        for side in SIDES:
            run = runs.get((side, rnd))
            if not run:
                continue
            r, loads = run["run"], " -> ".join(run["load"])
            if not r:
                out.append(f"| {rnd} | {side} | did not finish | | | | | | {loads} |")
                continue
            out.append(f"| {rnd} | {side} | {num(r['creates_per_s'], ',.0f')} | "
                       f"{num(r['create_p50_ms'])} / {num(r['create_p99_ms'])} | "
                       f"{num(r['list_s'], '.3f')} | "
                       f"{num(r['fanout_p50_ms'])} / {num(r['fanout_p99_ms'])} | "
                       f"{num(cpu(r))} | {num(rss(r), '.0f')} | {loads} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="tools/conformance api-perf's output (.conformance/runs/api-perf)")
    a = p.parse_args()
    print(table(a.dir))


if __name__ == "__main__":
    main()
