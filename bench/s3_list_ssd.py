#!/usr/bin/env python3
"""s3_list_ssd.py - what kvtierd's S3 listings and HEADs of objects on SSD
only cost: time, DRAM changed, bytes read (doc/s3.md "Listing"; s3ops.c
"Header reads").

Usage: bench/s3_list_ssd.py KVTIERD N SIZE_KIB    (e.g. 1000 1024)
Puts N objects in alice's bucket `shared` (granted to bob), restarts the
server (DRAM empty, the objects on SSD only), then times alice's
ListObjectsV2 (max-keys 1000), again, bob's, and N HEADs of alice's
(sequential, one connection each), with the DRAM blocks and bytes, the
SSD's bytes out (kvtier_ssd_bytes_out_total) and the bytes the process read
from the device (/proc/PID/io read_bytes) around each.  Python's standard
library only: the server, signer and HTTP of tests/integration/
test_hostile_http.py (its --tenants, --max-memory 256M here, --dram 2G,
--ssd 4G, ssd.admission=always).  The directory goes under $TMPDIR.
"""
import os
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as T  # noqa: E402


def io_read(pid):
    for line in open("/proc/%d/io" % pid):
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def main():
    kvtierd, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 10
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    tenants = ("alice %s tenant\nbob %s tenant\ngrant alice model=s3/shared to bob\n"
               % (T.ALICE[1], T.BOB[1]))
    srv = T.Server(kvtierd, base, ["--dram", "2G", "--ssd", "4G",
                                   "--set", "ssd.admission=always", "--max-memory", "256M"],
                   tenants)
    try:
        P = srv.port
        st, _, b = T.http(P, T.signed_msg(P, "PUT", "/shared"))
        assert st == 200, (st, b)
        names = ["obj%05d" % i for i in range(n)]

        def putter(part):
            for name in part:
                for _ in range(100):
                    st, _, b = T.http(P, T.signed_msg(P, "PUT", "/shared/" + name,
                                                      body=os.urandom(64) * (size // 64)),
                                      timeout=30)
                    if st != 503:
                        break
                    time.sleep(0.1)
                assert st == 200, (name, st, b[:200])
        ts = [threading.Thread(target=putter, args=(names[i::4],)) for i in range(4)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print("put %d objects of %d KiB in %.1f s" % (n, size >> 10, time.monotonic() - t0))
        end = time.monotonic() + 120
        while srv.metric("kvtier_ssd_writedown_pending_bytes") > 0 and time.monotonic() < end:
            time.sleep(0.1)
        srv.restart()
        P = srv.port

        def stats():
            return (srv.metric("kvtier_dram_blocks"), srv.metric("kvtier_dram_used_bytes"),
                    srv.metric("kvtier_ssd_bytes_out_total"), io_read(srv.p.pid))

        def run(what, fn):
            s0 = stats()
            t0 = time.monotonic()
            out = fn()
            dt = time.monotonic() - t0
            s1 = stats()
            print("%-34s %8.1f ms  DRAM blocks %6d -> %6d, bytes %11d -> %11d; "
                  "SSD bytes out +%d; device read_bytes +%d%s" % (
                      what, dt * 1e3, s0[0], s1[0], s0[1], s1[1], s1[2] - s0[2],
                      s1[3] - s0[3], out or ""))

        def listing(who):
            path = "/shared" if who is T.ALICE else "/alice.shared"
            st, _, body = T.http(P, T.signed_msg(P, "GET", path, query="list-type=2",
                                                 who=who), timeout=120)
            keys = len(re.findall(rb"<Key>", body))
            return "; %d listed (%d)" % (keys, st)
        run("bob's listing (grantee), cold", lambda: listing(T.BOB))
        run("alice's listing (owner), cold", lambda: listing(T.ALICE))
        run("alice's listing again", lambda: listing(T.ALICE))
        run("bob's listing again", lambda: listing(T.BOB))

        def heads(who, k):
            bad = 0
            for name in names[:k]:
                path = ("/shared/" if who is T.ALICE else "/alice.shared/") + name
                st, _, _ = T.http(P, T.signed_msg(P, "HEAD", path, who=who))
                bad += st != 200
            return "; %d not 200" % bad
        k = min(n, 200)
        srv.restart()
        P = srv.port
        run("bob's %d HEADs (grantee), cold" % k, lambda: heads(T.BOB, k))
        run("alice's %d HEADs (owner), cold" % k, lambda: heads(T.ALICE, k))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
