#!/usr/bin/env python3
"""The side-by-side table of `tools/conformance perf` (issue 42): `rollwright bench phases` run on
upstream's control plane and on `rollwright up` in one sitting, ROUNDS times each.

    tools/perf-table.py DIR    # DIR/round-N/{upstream,rollwright}/phases.out (bench phases --json)

Per phase and side, the medians over the rounds: wall seconds, API requests, each process's CPU
seconds and peak RSS, and their totals. A total's median is the median of the rounds' totals, so it
need not be the sum of the medians beside it. The ratios are upstream's median over rollwright's:
wall, CPU with both sides' simulated kubelets, and CPU without upstream's (`rollwright nodes`, a
process of its own there; in `rollwright up` they run inside the one process and cannot be told
apart, so that ratio leaves them out of one side only). The rounds' own figures follow.

When the lines carry a physical limit (`bench phases --readiness-ms`, PERF_READINESS), a second
table puts each phase's median wall beside its ideal (waves x start + readiness): the multiple of
the ideal, flagged over issue 42's 1.1x, and the overhead per wave. Without one the output is as
before.
"""

import argparse
import json
import statistics
from pathlib import Path

SIDES = ("upstream", "rollwright")
KUBELETS = "nodes"
# Issue 42: a rollout within this multiple of its physical limit is at the limit.
LIMIT = 1.1


def load(out_dir):
    """{(side, round): {"phases": {n: record}, "load": [before, after]}} from the runs' outputs."""
    runs = {}
    for f in sorted(Path(out_dir).glob("round-*/*/phases.out")):
        side, rnd = f.parent.name, int(f.parent.parent.name.split("-", 1)[1])
        phases = {}
        for line in f.read_text().splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("bench") == "phases":
                    phases[r["phase"]] = r
        runs[(side, rnd)] = {"phases": phases, "load": load_averages(f.parent)}
    return runs


def load_averages(run_dir):
    """The 1-minute load average the run's script noted before and after it ("?" where absent)."""
    loads = []
    for name in ("loadavg-before", "loadavg-after"):
        p = Path(run_dir) / name
        loads.append(p.read_text().split()[0] if p.exists() else "?")
    return loads


def cpu(r, without=None):
    return sum(p["cpu_s"] for p in r["processes"] if p["name"] != without)


def rss(r):
    return sum(p["peak_rss_mib"] for p in r["processes"])


def proc(r, name):
    return next((p for p in r["processes"] if p["name"] == name), None)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return f"{a / b:.1f}x" if a is not None and b else "-"


def num(x, fmt=".2f"):
    return "-" if x is None else format(x, fmt)


def physical_limit(phases, phase_names, records):
    """The physical-limit table's lines (none when no run carried an ideal): per phase and side the
    ideal, the median wall, their ratio and the overhead per wave, (median wall - ideal) / waves."""
    if not any("ideal_s" in r for n in phases for side in SIDES for r in records(side, n)):
        return []
    out = ["", "Physical limit (issue 42: within %.1fx of waves x start + readiness):" % LIMIT, "",
           "| phase | side | waves | ideal s | wall s (median) | measured/ideal | overhead per wave s |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for n in phases:
        for side in SIDES:
            rs = [r for r in records(side, n) if "ideal_s" in r]
            if not rs:
                continue
            ideal, waves = median([r["ideal_s"] for r in rs]), median([r["waves"] for r in rs])
            wall = median([r["wall_s"] for r in rs])
            times = "-"
            if ideal:
                times = f"{wall / ideal:.2f}x" + (" OVER" if wall / ideal > LIMIT else "")
            overhead = (wall - ideal) / waves if waves else None
            cells = [phase_names[n] if side == SIDES[0] or not records(SIDES[0], n) else "",
                     side, num(waves, "g"), num(ideal), num(wall), times, num(overhead, ".3f")]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"OVER: the median wall is more than {LIMIT}x the ideal. The overhead per wave is what "
               "the control plane adds to each wave's waiting (API writes, scheduling, watches).")
    return out


def table(out_dir):
    runs = load(out_dir)
    rounds = sorted({rnd for _, rnd in runs})
    if not rounds:
        raise SystemExit(f"perf-table: no round-N/SIDE/phases.out under {out_dir}")
    names, phase_names = [], {}
    for side in SIDES:
        for rnd in rounds:
            for n, r in runs.get((side, rnd), {"phases": {}})["phases"].items():
                phase_names.setdefault(n, r["name"])
                for p in r["processes"]:
                    if p["name"] not in names:
                        names.append(p["name"])
    phases = sorted(phase_names)

    def records(side, n):
        return [runs[(side, rnd)]["phases"][n] for rnd in rounds
                if n in runs.get((side, rnd), {"phases": {}})["phases"]]

    out = []
    head = ["phase", "side", "runs", "wall s", "Events after s", "API requests"]
    head += [f"{n} CPU s / peak MiB" for n in names]
    head += ["total CPU s", "total peak MiB", "wall ratio", "CPU ratio",
             f"CPU ratio without upstream's {KUBELETS}"]
    out.append("| " + " | ".join(head) + " |")
    out.append("| --- | --- | ---: |" + " ---: |" * (len(head) - 3))
    medians = {}
    for n in phases:
        for side in SIDES:
            rs = records(side, n)
            m = {
                "wall": median([r["wall_s"] for r in rs]),
                "after": median([r.get("aftermath_s") for r in rs if r.get("aftermath_s") is not None]),
                "requests": median([r["requests"] for r in rs]),
                "cpu": median([cpu(r) for r in rs]),
                "cpu_without": median([cpu(r, KUBELETS) for r in rs]),
                "rss": median([rss(r) for r in rs]),
            }
            medians[(side, n)] = m
            cells = [phase_names[n] if side == SIDES[0] else "", side, str(len(rs)),
                     num(m["wall"]), num(m["after"]), num(m["requests"], ",.0f")]
            for name in names:
                ps = [proc(r, name) for r in rs]
                ps = [p for p in ps if p]
                cells.append(f"{num(median([p['cpu_s'] for p in ps]))} / "
                             f"{num(median([p['peak_rss_mib'] for p in ps]), '.0f')}" if ps else "")
            cells += [num(m["cpu"]), num(m["rss"], ".0f")]
            if side == SIDES[-1]:
                up = medians[(SIDES[0], n)]
                cells += [ratio(up["wall"], m["wall"]), ratio(up["cpu"], m["cpu"]),
                          ratio(up["cpu_without"], m["cpu"])]
            else:
                cells += ["", "", ""]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append(f"Medians over {len(rounds)} round(s); a total's median is the median of the rounds' "
               "totals. Ratios: upstream's median over rollwright's. Both sides' CPU includes their "
               f"simulated kubelets: upstream's are `rollwright nodes` (the `{KUBELETS}` column), "
               "rollwright's run inside `rollwright up`, which cannot be split; the last ratio leaves "
               "them out of upstream's side only. The peak RSS total is the sum of each process's "
               "peak in the phase (they need not peak at once). CPU, peak RSS and API requests run "
               "until the phase's Events stop (`Events after s`: how long after the rollout was done "
               "the simulated kubelets' Events went on being written, plus one quiet second).")
    out += physical_limit(phases, phase_names, records)
    out.append("")
    out.append("Upstream's CPU by process, share of its total (medians):")
    out.append("")
    for n in phases:
        rs = records(SIDES[0], n)
        shares = []
        for name in names:
            vals = [proc(r, name)["cpu_s"] / cpu(r) for r in rs if proc(r, name) and cpu(r)]
            if vals:
                shares.append(f"{name} {median(vals) * 100:.0f}%")
        out.append(f"- {phase_names[n]}: " + ", ".join(shares))
    out.append("")
    out.append("Each round:")
    out.append("")
    out.append("| round | phase | upstream wall s | upstream CPU s | upstream peak MiB | "
               "rollwright wall s | rollwright CPU s | rollwright peak MiB | wall ratio | CPU ratio |")
    out.append("| ---: | --- |" + " ---: |" * 8)
    for rnd in rounds:
        for n in phases:
            u = runs.get((SIDES[0], rnd), {"phases": {}})["phases"].get(n)
            w = runs.get((SIDES[1], rnd), {"phases": {}})["phases"].get(n)
            cells = [str(rnd), phase_names[n]]
            for r in (u, w):
                cells += ([num(r["wall_s"]), num(cpu(r)), num(rss(r), ".0f")] if r
                          else ["-", "-", "-"])
            cells += [ratio(u and u["wall_s"], w and w["wall_s"]),
                      ratio(u and cpu(u), w and cpu(w))]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    loads = []
    for rnd in rounds:
        parts = [f"{side} {' -> '.join(runs[(side, rnd)]['load'])}"
                 for side in SIDES if (side, rnd) in runs]
        loads.append(f"round {rnd}: " + ", ".join(parts))
    out.append("Load average (1 min) before -> after each run: " + "; ".join(loads) + ".")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", help="tools/conformance perf's output (.conformance/runs/perf)")
    a = p.parse_args()
    print(table(a.dir))


if __name__ == "__main__":
    main()
