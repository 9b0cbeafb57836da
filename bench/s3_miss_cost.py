#!/usr/bin/env python3
"""s3_miss_cost.py - what a read's miss costs on a kvtierd node over a pod
(a remote tier, remote.put_local=never): since s3f48 a GetObject's,
HeadObject's or ListParts' last miss is asked once more as a presence
with KVT_F_ERRORS (daemon/s3ops.c s3d_miss_check), one more round trip
to the pod, so that a pod's failure is 503 rather than 404.

Usage: s3_miss_cost.py KVTIERD [ROUNDS].  Starts a pod and a node on
127.0.0.1 port 0 (in a temporary directory); each round times, on a
fresh connection each (as the test client's request()): a GET of a key
never written (404), a GET of a small object (200), and a ListParts of
an upload of one part (10,000 part numbers probed).  Prints the median
and p90 of each in ms.
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from test_s3_py import ALICE, request  # noqa: E402
from test_s3_remote import Daemon, stop_all  # noqa: E402


def timed(f):
    t0 = time.monotonic()
    r = f()
    return (time.monotonic() - t0) * 1000, r


def main():
    kvtierd = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    base = tempfile.mkdtemp()
    tenants = os.path.join(base, "tenants")
    with open(tenants, "w") as f:
        f.write("alice %s tenant\n" % ALICE[1])
    os.chmod(tenants, 0o600)
    pod = Daemon(kvtierd, base, "pod", [])
    node = None
    try:
        node = Daemon(kvtierd, base, "node", [
            "--tenants", tenants, "--max-memory", "32M",
            "--set", "remote.addr=127.0.0.1:%d" % pod.native,
            "--set", "remote.put_local=never"])
        P = node.port
        assert request(P, "PUT", "/mck")[0] == 200
        assert request(P, "PUT", "/mck/there", body=b"x" * 4096)[0] == 200
        st, _, b = request(P, "POST", "/mck/up", query=[("uploads", "")])
        uid = re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
        assert request(P, "PUT", "/mck/up", body=b"p" * 4096,
                       query=[("partNumber", "1"), ("uploadId", uid)])[0] == 200
        out = {"GET miss (404)": [], "GET hit (200)": [], "ListParts, 1 part": []}
        for i in range(rounds):
            ms, r = timed(lambda: request(P, "GET", "/mck/none%d" % i))
            assert r[0] == 404, r[0]
            out["GET miss (404)"].append(ms)
            ms, r = timed(lambda: request(P, "GET", "/mck/there"))
            assert r[0] == 200, r[0]
            out["GET hit (200)"].append(ms)
            if i % 5 == 0:
                ms, r = timed(lambda: request(P, "GET", "/mck/up", query=[("uploadId", uid)]))
                assert r[0] == 200 and r[2].count(b"<PartNumber>") == 1, r[0]
                out["ListParts, 1 part"].append(ms)
        for k, v in out.items():
            v.sort()
            print("%s, %d: median %.2f ms, p90 %.2f ms" % (k, len(v), v[len(v) // 2],
                                                           v[len(v) * 9 // 10]))
    finally:
        stop_all(node, pod)


if __name__ == "__main__":
    main()
