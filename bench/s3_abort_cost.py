#!/usr/bin/env python3
"""s3_abort_cost.py - the latency of an S3 AbortMultipartUpload on a
kvtierd with an SSD tier (its deletes made durable before the 204 since
s3e47: one KVT_OP_FLUSH with KVT_F_DELETES), DRAM + SSD, no remote tier.

Usage: s3_abort_cost.py KVTIERD [ROUNDS] [PARTS].  Starts a kvtierd on
127.0.0.1 port 0 (--ssd 64M, 8M segments, in a temporary directory); each round
creates an upload, puts PARTS parts of 4 KiB, and times the Abort (a
fresh connection, as the test client's request()).  Prints the median,
p90 and max in ms.
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from test_s3_py import ALICE, request  # noqa: E402
from test_s3_remote import Daemon  # noqa: E402


def main():
    kvtierd = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    parts = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    base = tempfile.mkdtemp()
    tenants = os.path.join(base, "tenants")
    with open(tenants, "w") as f:
        f.write("alice %s tenant\n" % ALICE[1])
    os.chmod(tenants, 0o600)
    d = Daemon(kvtierd, base, "srv", ["--tenants", tenants, "--ssd", "64M",
                                      "--set", "ssd.segment=8M"])
    try:
        assert request(d.port, "PUT", "/abk")[0] == 200
        ms = []
        for i in range(rounds):
            st, _, b = request(d.port, "POST", "/abk/k%d" % i, query=[("uploads", "")])
            uid = re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
            for n in range(1, parts + 1):
                st, _, _ = request(d.port, "PUT", "/abk/k%d" % i, body=os.urandom(4096),
                                   query=[("partNumber", str(n)), ("uploadId", uid)])
                assert st == 200
            t0 = time.monotonic()
            st, _, _ = request(d.port, "DELETE", "/abk/k%d" % i, query=[("uploadId", uid)])
            ms.append((time.monotonic() - t0) * 1000)
            assert st == 204, st
        ms.sort()
        print("Abort of %d parts, %d rounds: median %.1f ms, p90 %.1f ms, max %.1f ms" % (
            parts, rounds, ms[len(ms) // 2], ms[len(ms) * 9 // 10], ms[-1]))
    finally:
        d.stop()


if __name__ == "__main__":
    main()
