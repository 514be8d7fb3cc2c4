#!/usr/bin/env python3
"""How close `rollwright whatif` comes to the real thing (issue 39, item 3), for
`tools/conformance whatif-check`. Python 3 standard library and kubectl only.

  whatif-check.py cases [NAMES...]
      prints the cases (all, or those named) one a line: NAME NODES
  whatif-check.py profile READINESS_SECONDS START
      prints the simulated kubelets' profile: pods start START after their binding (a Go-style
      duration) and are Ready READINESS_SECONDS after they start
  whatif-check.py run --kubeconfig K --rollwright RW --case NAME --readiness S --dir DIR [--repeat N]
      on a cluster that runs nothing of ours yet: creates the case's workload and waits for it to
      be ready, then N times: `rollwright snapshot` of the cluster, `rollwright whatif` of the
      change (its JSON report's predicted duration, its verdict kept in DIR), the change made for
      real with kubectl and timed from `kubectl set image`'s answer until `kubectl rollout
      status` succeeds. Writes DIR/result.json.
  whatif-check.py again --rollwright RW RUNS_DIR
      rehearses every snapshot of RUNS_DIR's runs again with RW (the same change each repeat
      made), writes each run's again.json (result.json with RW's predictions) and prints their
      table: a change to `whatif` measured against the real durations already recorded
  whatif-check.py manifest NAME
      prints the case's workload as JSON, for kubectl apply -f -
  whatif-check.py table RUNS_DIR
      the markdown table of every RUNS_DIR/<side>/<case>-r<readiness>/result.json: side, case,
      readiness, real (median), predicted (median), error %

Every step has a time limit; a step over it ends the case with what it measured so far.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

NAMESPACE = "whatif-check"

# name: (kind, replicas, nodes, strategy, title)
CASES = {
    "deploy-40": ("deployment", 40, 50, None, "Deployment, 40 replicas"),
    "deploy-500": ("deployment", 500, 50, None, "Deployment, 500 replicas"),
    "deploy-2000": ("deployment", 2000, 50, None, "Deployment, 2,000 replicas"),
    "ds-maxunavailable": (
        "daemonset", 100, 100,
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "DaemonSet, 100 nodes, maxUnavailable 10%",
    ),
    "ds-maxsurge": (
        "daemonset", 100, 100,
        {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}},
        "DaemonSet, 100 nodes, maxSurge 10%",
    ),
    "sts-ordered": (
        "statefulset", 50, 50, {"type": "RollingUpdate"},
        "StatefulSet, 50 replicas, OrderedReady",
    ),
    "sts-parallel": (
        "statefulset", 50, 50,
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "StatefulSet, 50 replicas, Parallel, maxUnavailable 10%",
    ),
}
SHORT = {"deployment": "deploy", "daemonset": "ds", "statefulset": "sts"}
SIDE_TITLES = {
    "upstream": "upstream (KCM 20/30, scheduler 50/100)",
    "upstream-raised": "upstream (KCM and scheduler 1000/2000)",
    "rollwright": "rollwright up",
}


class StepFailed(Exception):
    pass


def sh(args, timeout, stdin=None):
    try:
        out = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{' '.join(args[:6])} ...: over {timeout} s")
    if out.returncode != 0:
        raise StepFailed(f"{' '.join(args[:6])} ...: {out.stderr.strip()[-2000:]}")
    return out.stdout


def manifest(name):
    kind, replicas, _, strategy, _ = CASES[name]
    labels = {"app": name}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": "registry.example/app:v0"}],
        },
    }
    spec = {"selector": {"matchLabels": labels}, "template": template}
    if kind == "deployment":
        spec["replicas"] = replicas
    elif kind == "daemonset":
        spec["updateStrategy"] = strategy
    else:
        spec["replicas"] = replicas
        spec["serviceName"] = name
        spec["updateStrategy"] = strategy
        spec["podManagementPolicy"] = (
            "Parallel" if "rollingUpdate" in strategy else "OrderedReady"
        )
    return {
        "apiVersion": "apps/v1",
        "kind": kind.capitalize().replace("set", "Set"),
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


def rollout_status(kc, ref, timeout):
    sh(["kubectl", "--kubeconfig", kc, "-n", NAMESPACE, "rollout", "status", ref,
        f"--timeout={timeout}s"], timeout + 30)


def settle(kc, name, want, timeout):
    """Waits until the workload has exactly its pods, none terminating (the next snapshot sees
    the cluster at rest)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = json.loads(sh(["kubectl", "--kubeconfig", kc, "-n", NAMESPACE, "get", "pods",
                              "-l", f"app={name}", "-o", "json"], 60))["items"]
        if len(pods) == want and not any(p["metadata"].get("deletionTimestamp") for p in pods):
            return
        time.sleep(1)


def run(a):
    kind, replicas, _, _, _ = CASES[a.case]
    ref = f"{SHORT[kind]}/{a.case}"
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    result = {"case": a.case, "side": a.side, "readiness": a.readiness, "repeats": [],
              "error": None}
    kc = a.kubeconfig

    def save():
        (d / "result.json").write_text(json.dumps(result, indent=2) + "\n")

    try:
        sh(["kubectl", "--kubeconfig", kc, "create", "namespace", NAMESPACE], 60)
        t0 = time.monotonic()
        sh(["kubectl", "--kubeconfig", kc, "apply", "-f", "-"], 60,
           stdin=json.dumps(manifest(a.case)))
        rollout_status(kc, ref, a.step_timeout)
        result["created_seconds"] = round(time.monotonic() - t0, 2)
        print(f"  created {ref} in {result['created_seconds']} s", flush=True)
        for i in range(1, a.repeat + 1):
            settle(kc, a.case, replicas, 120)
            snap = d / f"snapshot-{i}.json"
            sh([a.rollwright, "snapshot", "--kubeconfig", kc, "-n", NAMESPACE, "-o", str(snap)],
               300)
            change = f"set image {ref} app=registry.example/app:v{i} -n {NAMESPACE}"
            t = time.monotonic()
            verdict = sh([a.rollwright, "whatif", "--snapshot", str(snap), "--change", change,
                          "--timeout", f"{a.step_timeout}s",
                          "--report", str(d / f"whatif-{i}.json")], a.step_timeout + 120)
            rehearsal = time.monotonic() - t
            (d / f"whatif-{i}.txt").write_text(verdict)
            report = json.loads((d / f"whatif-{i}.json").read_text())
            # From the moment `kubectl set image` has its patch's answer (the change is made;
            # kubectl's own start-up, 0.3-1 s here, is not the rollout's) to `rollout status`'s
            # success.
            t = time.monotonic()
            sh(["kubectl", "--kubeconfig", kc, "-n", NAMESPACE, "set", "image", ref,
                f"app=registry.example/app:v{i}"], 60)
            changed = time.monotonic()
            rollout_status(kc, ref, a.step_timeout)
            real = time.monotonic() - changed
            rep = {
                "real_seconds": round(real, 2),
                "set_image_seconds": round(changed - t, 2),
                "predicted_seconds": report["predictedSeconds"],
                "finished": report["finished"],
                "rehearsal_wall_seconds": round(rehearsal, 1),
                "control_plane": report.get("controlPlane"),
            }
            result["repeats"].append(rep)
            save()
            print(f"  {i}: real {real:.2f} s, predicted {report['predictedSeconds']:.2f} s "
                  f"(rehearsed in {rehearsal:.0f} s)", flush=True)
    except StepFailed as e:
        result["error"] = str(e)
        print(f"  failed: {e}", file=sys.stderr, flush=True)
    save()
    return 0 if result["error"] is None else 1


def again(a):
    """Each run's snapshots rehearsed again with a.rollwright, against the reals recorded."""
    for f in sorted(Path(a.runs_dir).glob("*/*/result.json")):
        r = json.loads(f.read_text())
        kind = CASES[r["case"]][0]
        ref = f"{SHORT[kind]}/{r['case']}"
        for i, rep in enumerate(r["repeats"], 1):
            d = f.parent
            change = f"set image {ref} app=registry.example/app:v{i} -n {NAMESPACE}"
            sh([a.rollwright, "whatif", "--snapshot", str(d / f"snapshot-{i}.json"), "--change",
                change, "--timeout", "900s", "--report", str(d / f"again-{i}.json")], 1200)
            report = json.loads((d / f"again-{i}.json").read_text())
            rep["predicted_seconds"] = report["predictedSeconds"]
            rep["finished"] = report["finished"]
            rep["control_plane"] = report.get("controlPlane")
            print(f"  {r['side']} {r['case']} r{r['readiness']:g} {i}: real "
                  f"{rep['real_seconds']:.2f} s, predicted {rep['predicted_seconds']:.2f} s",
                  flush=True)
        (f.parent / "again.json").write_text(json.dumps(r, indent=2) + "\n")
    table(a.runs_dir, "again.json")


def fmt(x):
    return f"{x:.1f} s" if x < 100 else f"{x:.0f} s"


def table(runs_dir, name="result.json"):
    rows = []
    for f in sorted(Path(runs_dir).glob(f"*/*/{name}")):
        r = json.loads(f.read_text())
        reps = [x for x in r["repeats"] if x.get("finished", True)]
        real = statistics.median([x["real_seconds"] for x in r["repeats"]]) if r["repeats"] else None
        pred = statistics.median([x["predicted_seconds"] for x in r["repeats"]]) if r["repeats"] else None
        rows.append((r["side"], r["case"], r["readiness"], real, pred, len(r["repeats"]),
                     len(reps) != len(r["repeats"]), r["error"]))
    order = {s: i for i, s in enumerate(SIDE_TITLES)}
    cases = {c: i for i, c in enumerate(CASES)}
    rows.sort(key=lambda r: (order.get(r[0], 9), cases.get(r[1], 99), r[2]))
    print("| side | case | readiness | real (median) | predicted (median) | error | runs |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for side, case, ready, real, pred, n, unfinished, err in rows:
        title = CASES[case][4] if case in CASES else case
        if real is None:
            print(f"| {SIDE_TITLES.get(side, side)} | {title} | {ready:g} s | - | - | "
                  f"failed: {(err or '')[:80]} | 0 |")
            continue
        e = (pred - real) / real * 100
        flag = "**" if abs(e) > 15 else ""
        note = " (a rehearsal did not finish)" if unfinished else ""
        print(f"| {SIDE_TITLES.get(side, side)} | {title} | {ready:g} s | {fmt(real)} | "
              f"{fmt(pred)}{note} | {flag}{e:+.0f}%{flag} | {n} |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cases")
    c.add_argument("names", nargs="*")
    pr = sub.add_parser("profile")
    pr.add_argument("readiness", type=float)
    pr.add_argument("start")
    r = sub.add_parser("run")
    r.add_argument("--kubeconfig", required=True)
    r.add_argument("--rollwright", required=True)
    r.add_argument("--side", required=True)
    r.add_argument("--case", required=True, choices=sorted(CASES))
    r.add_argument("--readiness", type=float, required=True)
    r.add_argument("--dir", required=True)
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--step-timeout", type=int, default=900)
    ag = sub.add_parser("again")
    ag.add_argument("--rollwright", required=True)
    ag.add_argument("runs_dir")
    m = sub.add_parser("manifest")
    m.add_argument("name", choices=sorted(CASES))
    t = sub.add_parser("table")
    t.add_argument("runs_dir")
    a = p.parse_args()
    if a.cmd == "cases":
        for n in a.names or CASES:
            if n not in CASES:
                sys.exit(f"whatif-check: unknown case {n} (one of {', '.join(CASES)})")
            print(n, CASES[n][2])
    elif a.cmd == "profile":
        print(f"seed: 1\nstartDelay: {a.start}\nreadinessDelay: {int(a.readiness * 1000)}ms")
    elif a.cmd == "run":
        sys.exit(run(a))
    elif a.cmd == "again":
        again(a)
    elif a.cmd == "manifest":
        print(json.dumps(manifest(a.name)))
    else:
        table(a.runs_dir)


if __name__ == "__main__":
    main()
