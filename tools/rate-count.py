#!/usr/bin/env python3
"""Requests per client from an upstream kube-apiserver audit log, against the token bucket the
client promises (QPS 20, burst 30 unless told: kube-controller-manager's defaults).

    tools/rate-count.py AUDIT_LOG [--qps 20 --burst 30]

A token bucket lets a client send at most `burst + qps * w` requests in any w seconds. For each
client (user and user agent), and for rollwright's ReplicaSet controller's own writes (pod creates
and deletes, ReplicaSet status: the bucket that paces a rollout), it prints the most requests the
server received in any 1, 5, 10, 60 and 300 s beside that bound. Times are when the server
received each request, so requests that waited in one connection can arrive bunched: upstream's
own controllers show the same few requests of slack (the table keeps them for comparison).
"""

import argparse
import bisect
import collections
import datetime
import json

WINDOWS = (1, 5, 10, 60, 300)


def most(ts, w):
    return max(bisect.bisect_right(ts, t + w) - i for i, t in enumerate(ts))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("audit_log")
    p.add_argument("--qps", type=float, default=20)
    p.add_argument("--burst", type=int, default=30)
    a = p.parse_args()
    clients = collections.defaultdict(list)
    seen = set()
    for line in open(a.audit_log):
        e = json.loads(line)
        if e["auditID"] in seen:
            continue
        seen.add(e["auditID"])
        t = datetime.datetime.fromisoformat(
            e["requestReceivedTimestamp"].replace("Z", "+00:00")
        ).timestamp()
        agent = e.get("userAgent", "")
        clients[(e["user"]["username"], agent)].append(t)
        o = e.get("objectRef", {})
        what = (e["verb"], o.get("resource"), o.get("subresource"))
        if "rollwright" in agent and agent.startswith("kube-controller-manager") and (
            (what[1] == "pods" and what[0] in ("create", "delete"))
            or what == ("update", "replicasets", "status")
        ):
            clients[("rollwright replicaset controller's writes", "pods, replicasets/status")].append(t)
    bound = [int(a.burst + a.qps * w) for w in WINDOWS]
    print(f"| client (user, user agent) | requests | over | most in {' / '.join(f'{w} s' for w in WINDOWS)} "
          f"| a {a.qps:g}/{a.burst} bucket allows | within |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (user, agent), ts in sorted(clients.items(), key=lambda kv: -len(kv[1])):
        if len(ts) < 50:
            continue
        ts.sort()
        seen_most = [most(ts, w) for w in WINDOWS]
        within = all(m <= b for m, b in zip(seen_most, bound))
        print(f"| {user}, {agent} | {len(ts)} | {ts[-1] - ts[0]:.0f} s | "
              f"{' / '.join(map(str, seen_most))} | {' / '.join(map(str, bound))} | "
              f"{'yes' if within else 'no'} |")


if __name__ == "__main__":
    main()
