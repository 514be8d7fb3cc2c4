#!/usr/bin/env python3
"""The API server's memory while many clients list a large collection slowly (issue 36).

    tools/list-memory.py DATA_DIR PID load COUNT SIZE
    tools/list-memory.py DATA_DIR PID list N [--head BYTES] [--full] [--pause SECONDS]

DATA_DIR is a `rollwright up --data-dir` (its admin kubeconfig and CA are used; loopback only),
PID the server's process. `load` creates COUNT ConfigMaps of about SIZE bytes in namespace `big`.
`list` opens N concurrent lists of `big`'s ConfigMaps over HTTP/1.1 (at most 32 connections set
up at once, so that a storm of TLS handshakes does not outlast the server's 10 s handshake
timeout), has each read HEAD bytes (1 MB) and wait until all have: slow readers all in the
middle of their bodies. It prints the server's VmRSS and VmHWM then and PAUSE seconds later;
with --full each then reads on to the end (the lengths are printed), else the connections close.
"""

import argparse
import asyncio
import http.client
import json
import re
import ssl
import threading
import time


def credentials(data_dir):
    kc = open(f"{data_dir}/kubeconfig").read()
    token = re.search(r"token: (\S+)", kc).group(1)
    port = int(re.search(r"server: https://127.0.0.1:(\d+)", kc).group(1))
    ctx = ssl.create_default_context(cafile=f"{data_dir}/pki/ca.crt")
    return token, port, ctx


def memory(pid):
    status = open(f"/proc/{pid}/status").read()
    fields = dict(line.split(":", 1) for line in status.splitlines())
    return " ".join(f"{k} {fields[k].strip()}" for k in ("VmRSS", "VmHWM"))


def load(token, port, ctx, count, size):
    def call(conn, path, body):
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status not in (200, 201, 409):
            raise SystemExit(f"{r.status} {data[:300]!r}")

    call(http.client.HTTPSConnection("127.0.0.1", port, context=ctx), "/api/v1/namespaces",
         {"metadata": {"name": "big"}})
    filler = "x" * size

    def worker(k):
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
        for i in range(k, count, 8):
            call(conn, "/api/v1/namespaces/big/configmaps",
                 {"metadata": {"name": f"cm-{i:05}"}, "data": {"filler": filler}})

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


async def lists(token, port, ctx, pid, n, head, full, pause):
    connecting = asyncio.Semaphore(32)
    ready, lengths, go = [], [], asyncio.Event()

    async def one():
        async with connecting:
            r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, limit=1 << 16)
            w.write((f"GET /api/v1/namespaces/big/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Bearer {token}\r\nAccept: application/json\r\n\r\n").encode())
            header = await r.readuntil(b"\r\n\r\n")
        status = header.split(b" ", 2)[1].decode()
        length = int(re.search(rb"content-length: (\d+)", header, re.I).group(1))
        got = 0
        while got < min(head, length):
            b = await r.read(1 << 16)
            if not b:
                break
            got += len(b)
        ready.append(1)
        await go.wait()
        while full and got < length:
            b = await r.read(1 << 20)
            if not b:
                break
            got += len(b)
        lengths.append((status, got if full else length))
        w.close()

    print("before the lists:", memory(pid), flush=True)
    start = time.time()
    tasks = [asyncio.create_task(one()) for _ in range(n)]
    while len(ready) < n and not any(t.done() and t.exception() for t in tasks):
        await asyncio.sleep(0.5)
    print(f"{len(ready)} lists in the middle of their bodies after {time.time() - start:.1f}s:",
          memory(pid), flush=True)
    await asyncio.sleep(pause)
    print(f"{pause:g}s later:", memory(pid), flush=True)
    go.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, Exception)]
    counts = {}
    for key in lengths:
        counts[key] = counts.get(key, 0) + 1
    print(f"done after {time.time() - start:.1f}s:", memory(pid),
          "(status, bytes):", counts, "errors:", errors[:3], flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data_dir")
    p.add_argument("pid")
    sub = p.add_subparsers(dest="what", required=True)
    lp = sub.add_parser("load")
    lp.add_argument("count", type=int)
    lp.add_argument("size", type=int)
    sp = sub.add_parser("list")
    sp.add_argument("n", type=int)
    sp.add_argument("--head", type=int, default=1_000_000)
    sp.add_argument("--full", action="store_true")
    sp.add_argument("--pause", type=float, default=3)
    a = p.parse_args()
    token, port, ctx = credentials(a.data_dir)
    if a.what == "load":
        load(token, port, ctx, a.count, a.size)
        print("loaded:", memory(a.pid))
    else:
        asyncio.run(lists(token, port, ctx, a.pid, a.n, a.head, a.full, a.pause))


if __name__ == "__main__":
    main()
