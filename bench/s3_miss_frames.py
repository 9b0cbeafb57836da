#!/usr/bin/env python3
"""s3_miss_frames.py KVTIERD - what an S3 404 costs the pod: the pod's
kvtier_server_frames_in_total per request, 50 each of GET, HEAD,
UploadPart (an upload id of the right shape, never made) and CopyObject
of absent keys, and GET of a present one, on a node over a pod with
remote.put_local=never (review48d, 2026-12-07: s3f48's presence checks
doubled it).  Starts real kvtierds on 127.0.0.1 port 0."""
import os
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from test_s3_py import ALICE, request  # noqa: E402
from test_s3_remote import Daemon, stop_all  # noqa: E402

kvtierd, N = sys.argv[1], 50
base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
tenants = os.path.join(base, "tenants")
with open(tenants, "w") as f:
    f.write("alice %s tenant\n" % ALICE[1])
os.chmod(tenants, 0o600)
pod = Daemon(kvtierd, base, "pod", ["--metrics", "127.0.0.1:0"])
node = Daemon(kvtierd, base, "node", ["--tenants", tenants, "--set",
              "remote.addr=127.0.0.1:%d" % pod.native, "--set", "remote.put_local=never"])
try:
    P = node.port
    assert request(P, "PUT", "/fbkt")[0] == 200
    assert request(P, "PUT", "/fbkt/hit", body=b"x" * 4096)[0] == 200
    def per(name, fn, want):
        f0 = pod.metric("kvtier_server_frames_in_total")
        for i in range(N):
            st = fn(i)[0]
            assert st == want, (name, st)
        f1 = pod.metric("kvtier_server_frames_in_total")
        print("%-28s %d: %.2f pod frames each" % (name, want, (f1 - f0) / N))
    per("GET absent", lambda i: request(P, "GET", "/fbkt/none%d" % i), 404)
    per("HEAD absent", lambda i: request(P, "HEAD", "/fbkt/none%d" % i), 404)
    per("GET present", lambda i: request(P, "GET", "/fbkt/hit"), 200)
    per("UploadPart, no upload", lambda i: request(P, "PUT", "/fbkt/u", body=b"p",
        query=[("partNumber", "1"), ("uploadId", "%032x" % (i + 1))]), 404)
    per("CopyObject, no source", lambda i: request(P, "PUT", "/fbkt/c",
        extra={"x-amz-copy-source": "/fbkt/none%d" % i}), 404)
finally:
    stop_all(node, pod)
