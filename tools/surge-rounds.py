#!/usr/bin/env python3
"""Issue 43's scenario against any cluster, through kubectl alone: a Deployment of 6 replicas with
maxSurge 2 and maxUnavailable 0, its image set twice back to back, round after round; a watch on
its pods (listed before the first change) counts the most pods at once. A pod counts until it has
a deletionTimestamp or has finished, as the issue counted them.

    tools/surge-rounds.py --kubeconfig K [--rounds 200] [--replicas 6 --surge 2 --unavailable 0]

Prints one line per round that exceeded the bound and a summary line:
    rounds 200, most pods at once 8, allowed 8, rounds over 0
Exits 1 when any round exceeded replicas + maxSurge. Run on purpose (`tools/conformance surge`
runs it on rollwright and on upstream's control plane side by side), not in CI.
"""

import argparse
import json
import subprocess
import sys
import threading
import time


def kubectl(kubeconfig, *args, stdin=None):
    out = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"surge-rounds: kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


class Counter:
    """Active pods by name, listed then watched from the list's resourceVersion (nothing in
    between is missed), and the most seen at once."""

    def __init__(self, kubeconfig, namespace):
        self.lock = threading.Lock()
        self.pods = {}
        self.most = 0
        self.at_most = {}
        path = f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dsurge"
        listed = json.loads(kubectl(kubeconfig, "get", "--raw", path))
        for pod in listed.get("items", []):
            self.observe({"type": "ADDED", "object": pod})
        rv = listed["metadata"]["resourceVersion"]
        self.proc = subprocess.Popen(
            [
                "kubectl", "--kubeconfig", kubeconfig, "get", "--raw",
                f"{path}&watch=1&resourceVersion={rv}&timeoutSeconds=86400",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        decoder = json.JSONDecoder()
        buf = ""
        for line in self.proc.stdout:
            buf += line
            while True:
                buf = buf.lstrip()
                if not buf:
                    break
                try:
                    event, end = decoder.raw_decode(buf)
                except json.JSONDecodeError:
                    break
                buf = buf[end:]
                self.observe(event)

    def observe(self, event):
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return
        pod = event.get("object", {})
        meta = pod.get("metadata", {})
        name = meta.get("name")
        phase = pod.get("status", {}).get("phase")
        active = (
            event.get("type") != "DELETED"
            and not meta.get("deletionTimestamp")
            and phase not in ("Succeeded", "Failed")
        )
        with self.lock:
            if active:
                self.pods[name] = meta.get("labels", {}).get("pod-template-hash", "")
            else:
                self.pods.pop(name, None)
            if len(self.pods) > self.most:
                self.most = len(self.pods)
                by_hash = {}
                for h in self.pods.values():
                    by_hash[h] = by_hash.get(h, 0) + 1
                self.at_most = by_hash

    def reset(self):
        with self.lock:
            most, at = self.most, self.at_most
            self.most = len(self.pods)
            self.at_most = {}
            return most, at


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--replicas", type=int, default=6)
    p.add_argument("--surge", type=int, default=2)
    p.add_argument("--unavailable", type=int, default=0)
    p.add_argument("--namespace", default="surge-rounds")
    a = p.parse_args()
    kc, ns = a.kubeconfig, a.namespace
    subprocess.run(["kubectl", "--kubeconfig", kc, "delete", "namespace", ns, "--wait"],
                   capture_output=True)
    kubectl(kc, "create", "namespace", ns)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "surge", "namespace": ns},
        "spec": {
            "replicas": a.replicas,
            "selector": {"matchLabels": {"app": "surge"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": a.surge, "maxUnavailable": a.unavailable},
            },
            "template": {
                "metadata": {"labels": {"app": "surge"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:0"}]},
            },
        },
    }
    kubectl(kc, "apply", "-f", "-", stdin=json.dumps(deployment))
    kubectl(kc, "-n", ns, "rollout", "status", "deployment/surge", "--timeout=120s")
    counter = Counter(kc, ns)
    allowed = a.replicas + a.surge
    most, over = 0, 0
    t0 = time.monotonic()
    for round_ in range(1, a.rounds + 1):
        for step in ("a", "b"):
            kubectl(kc, "-n", ns, "set", "image", "deployment/surge", f"c=nginx:{round_}{step}")
        kubectl(kc, "-n", ns, "rollout", "status", "deployment/surge", "--timeout=300s")
        # The watch may trail the rollout's end by an event or two; they cannot raise the count
        # (only deletions remain), so the round's figure is read now.
        seen, at = counter.reset()
        most = max(most, seen)
        if seen > allowed:
            over += 1
            print(f"round {round_}: {seen} pods at once > {allowed} allowed: {at}", flush=True)
    counter.proc.terminate()
    print(
        f"rounds {a.rounds}, most pods at once {most}, allowed {allowed}, rounds over {over}, "
        f"{time.monotonic() - t0:.0f} s"
    )
    subprocess.run(["kubectl", "--kubeconfig", kc, "delete", "namespace", ns, "--wait=false"],
                   capture_output=True)
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
