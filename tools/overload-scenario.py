#!/usr/bin/env python3
"""Issue 36's overload scenarios against a running server (rollwright up, or upstream's).

usage: tools/overload-scenario.py ADMIN_KUBECONFIG ALICE_KUBECONFIG

  rollwright up --data-dir /tmp/d --port 0 --store memory &
  rollwright kubeconfig --data-dir /tmp/d --user alice -o alice.kubeconfig
  KUBECONFIG=/tmp/d/kubeconfig kubectl create rolebinding editors --clusterrole=edit \
      --user=alice --user=bob -n default
  tools/overload-scenario.py /tmp/d/kubeconfig alice.kubeconfig

  1. 250 slow-body pod creations from alice (a user with `edit` in default); while they are
     held, one system:masters write and one write as the ReplicaSet controller's ServiceAccount
     (impersonated by the admin): their codes and latencies, and alice's codes at the end.
  2. 500 concurrent system:masters creates: how many were answered 429.
"""
import base64, json, socket, ssl, sys, tempfile, threading, time, os
import yaml  # PyYAML

def load(path):
    cfg = yaml.safe_load(open(path))
    ctx_name = cfg["current-context"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    host, port = cluster["server"].split("//")[1].rsplit(":", 1)
    sslctx = ssl.create_default_context()
    d = tempfile.mkdtemp()
    if "certificate-authority-data" in cluster:
        ca = os.path.join(d, "ca"); open(ca, "wb").write(base64.b64decode(cluster["certificate-authority-data"]))
        sslctx.load_verify_locations(ca)
    else:
        sslctx.load_verify_locations(cluster["certificate-authority"])
    sslctx.check_hostname = False
    headers = {}
    if "token" in user:
        headers["Authorization"] = "Bearer " + user["token"]
    if "client-certificate-data" in user:
        c = os.path.join(d, "c"); k = os.path.join(d, "k")
        open(c, "wb").write(base64.b64decode(user["client-certificate-data"]))
        open(k, "wb").write(base64.b64decode(user["client-key-data"]))
        sslctx.load_cert_chain(c, k)
    return host, int(port), sslctx, headers

def connect(target):
    host, port, sslctx, _ = target
    s = socket.create_connection((host, port))
    return sslctx.wrap_socket(s, server_hostname="localhost")

def request(target, method, path, body=None, extra=None, timeout=120):
    headers = dict(target[3]); headers.update(extra or {})
    data = json.dumps(body).encode() if body is not None else b""
    s = connect(target); s.settimeout(timeout)
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s.sendall(head.encode() + data)
    resp = b""
    while True:
        chunk = s.recv(65536)
        if not chunk: break
        resp += chunk
    s.close()
    return int(resp.split(b" ", 2)[1]) if resp else 0

def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}

def slow(target, name, release, codes):
    data = json.dumps(pod(name)).encode()
    headers = target[3]
    try:
        s = connect(target); s.settimeout(300)
        head = f"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        s.sendall(head.encode() + data[:10])
        release.wait()
        try:
            s.sendall(data[10:])
        except OSError:
            pass
        resp = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk: break
            resp += chunk
        codes.append(int(resp.split(b" ", 2)[1]) if resp else 0)
    except Exception as e:
        codes.append(str(e)[:40])

def timed(target, *args, **kw):
    t = time.monotonic(); code = request(target, *args, **kw); return code, round(time.monotonic() - t, 3)

def main():
    admin, alice = load(sys.argv[1]), load(sys.argv[2])
    run = str(int(time.time()))
    release = threading.Event(); codes = []
    threads = [threading.Thread(target=slow, args=(alice, f"slow-{run}-{i}", release, codes)) for i in range(250)]
    for t in threads: t.start()
    time.sleep(3)  # the measurement waits for the 250 to be sent; not a test
    print("admin write while alice holds 250 slow bodies:", timed(admin, "POST", "/api/v1/namespaces/default/pods", pod(f"admin-{run}")))
    print("controller write (impersonated replicaset-controller):", timed(admin, "POST", "/api/v1/namespaces/default/pods", pod(f"ctrl-{run}"),
          {"Impersonate-User": "system:serviceaccount:kube-system:replicaset-controller", "Impersonate-Group": "system:serviceaccounts"}))
    print("another edit user (bob) write:", timed(admin, "POST", "/api/v1/namespaces/default/pods", pod(f"bob-{run}"), {"Impersonate-User": "bob"}))
    release.set()
    for t in threads: t.join()
    summary = {}
    for c in codes: summary[c] = summary.get(c, 0) + 1
    print("alice's 250 slow creates:", summary)

    results = []
    def create(i):
        results.append(request(admin, "POST", "/api/v1/namespaces/default/configmaps",
                               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{run}-{i}"}}))
    t0 = time.monotonic()
    threads = [threading.Thread(target=create, args=(i,)) for i in range(500)]
    for t in threads: t.start()
    for t in threads: t.join()
    summary = {}
    for c in results: summary[c] = summary.get(c, 0) + 1
    print(f"500 concurrent admin creates in {time.monotonic()-t0:.1f}s:", summary)

main()
