#!/usr/bin/env python3
"""test_s3_podfail.py - multipart uploads on a kvtierd node over a pod
(remote tier) that fails: the pod stopped (SIGSTOP) past the node's
remote.timeout_ms while an Abort sweeps, or while an UploadPart rechecks
its upload's marker.

The node runs with remote.put_local=never: no DRAM copy, so the marker
and the parts are in the pod only (a node whose DRAM evicted them is the
same).  The sweeps and the recheck ask presence (KVT_OP_EXISTS), which
took a tier's error for a miss until s3e47 (2026-12-07):
  1. an Abort whose second window (parts 257..512) timed out took part
     300 for absent: with the pod back before the marker's delete, 204
     and part 300 left in the pod (reachable by no request); here, the
     pod still down then, 500 InternalError (the marker's delete
     refused).  Now 503 ServiceUnavailable at that window, the marker
     and part 300 kept, and the retry, the pod running, 204 with every
     block gone from the pod;
  2. an UploadPart whose recheck of the marker timed out deleted its
     part and answered 404 NoSuchUpload for a live upload; now 503, the
     part kept (ListParts lists it), the upload completes.  The marker
     read at the UploadPart's head is promoted into the node's DRAM, so
     this runs on a second node, "tiny" (--dram 8M, LRU), where GETs of
     12 MiB of objects evict it during the recheck's wait.
  3. (review47e) a pod of two, one member killed and known down, a part
     on it: an Abort skipped the part (the member ranked around, not
     asked) and failed 500 at the marker's delete; now 503 at once.
The windows are made with the node's test hooks (kvtierd.h struct
kvtd_s3): KVTD_TEST_S3_SWEEP_PAUSE_MS (an Abort's first sweep waits after
its first window) and KVTD_TEST_S3_RECHECK_PAUSE_MS (an UploadPart's
recheck waits); the pod is stopped during the wait.

Usage: test_s3_podfail.py PATH-TO-KVTIERD.  Starts real kvtierds on
127.0.0.1 port 0 (a pod, two nodes); needs no package index.
"""
import os
import re
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_s3_py import ALICE, request  # noqa: E402
from test_s3_remote import Daemon, pod_settled, read_answer, signed  # noqa: E402

TIMEOUT_MS = 500   # the node's remote.timeout_ms
PAUSE_MS = 1500    # the hooks' waits
STOP_AT = 0.5      # s after the request: the pod stopped (inside the wait)
STOP_FOR = 2.5     # s the pod stays stopped (past the wait + TIMEOUT_MS)
TINY_PAUSE_MS = 3000  # the recheck's wait on the tiny node (2: its marker evicted first)


def stopped_pod_answer(pod, port, req):
    """Send req on a fresh connection, stop the pod STOP_AT s later for
    STOP_FOR s, then read the answer: (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(req)
    time.sleep(STOP_AT)
    pod.sigstop()
    try:
        time.sleep(STOP_FOR)
    finally:
        pod.p.send_signal(signal.SIGCONT)
    st, b, _ = read_answer(s, b"")
    s.close()
    return st, b


def upload(port, key):
    st, _, b = request(port, "POST", key, query=[("uploads", "")])
    assert st == 200, ("CreateMultipartUpload", st, b[:300])
    return re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()


def parts_of(port, key, uid, want):
    """ListParts' part numbers once they are want, or after 5 s: the
    node's connections to the pod, failed by the timeout, come back
    after SIGCONT, and until then ListParts' reads of the pod fail, which
    it takes for misses (a read's failure is a miss: not a sweep)."""
    end = time.monotonic() + 5
    while True:
        st, _, b = request(port, "GET", key, query=[("uploadId", uid)])
        assert st == 200, ("ListParts", st, b[:300])
        got = [int(x) for x in re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)]
        if got == want or time.monotonic() > end:
            return got
        time.sleep(0.1)


def member_down(kvtierd, base, tenants):
    """3 (review47e): a pod of two members, one killed (-9) and known
    down to the node (its connections reset), the upload's marker on the
    other and a part on the dead one: an Abort is 503 at that part's
    window, the marker kept.  Before, the dead member was ranked around
    and not asked, the live member's miss taken for "no such part": the
    part skipped, then 500 InternalError at the marker's delete, which
    the dead member refused."""
    a = Daemon(kvtierd, base, "pa", ["--metrics", "127.0.0.1:0"])
    b = Daemon(kvtierd, base, "pb", ["--metrics", "127.0.0.1:0"])
    node = None
    try:
        node = Daemon(kvtierd, base, "n3", [
            "--tenants", tenants, "--max-memory", "32M",
            "--set", "remote.addrs=127.0.0.1:%d,127.0.0.1:%d" % (a.native, b.native),
            "--set", "remote.put_local=never"])
        P = node.port
        st, _, body = request(P, "PUT", "/pfb3")
        assert st == 200, (st, body)
        for i in range(40):  # an upload whose marker is on a
            a0 = a.metric("kvtier_dram_blocks")
            uid = upload(P, "/pfb3/k%d" % i)
            if pod_settled(a, a0 + 1) == a0 + 1:
                break
        else:
            raise AssertionError("no marker on member a in 40 uploads")
        key = "/pfb3/k%d" % i
        on_b = 0
        for n in range(1, 41):  # parts until one is on b
            b0 = b.metric("kvtier_dram_blocks")
            st, _, body = request(P, "PUT", key, body=b"p-%d" % n,
                                  query=[("partNumber", str(n)), ("uploadId", uid)])
            assert st == 200, ("UploadPart", n, st, body[:300])
            if pod_settled(b, b0 + 1) == b0 + 1:
                on_b = n
                break
        assert on_b, "no part on member b in 40"
        b.p.send_signal(signal.SIGKILL)
        b.p.wait(20)
        st, _, body = request(P, "DELETE", key, query=[("uploadId", uid)])
        print("Abort with the pod member holding part %d dead: %d" % (on_b, st))
        assert st == 503, ("Abort with a member down", st, body[:300])
        st, _, body = request(P, "GET", key, query=[("uploadId", uid)])
        assert st == 200, ("the upload kept (ListParts)", st, body[:300])
        print("Abort over a pod member down: 503, the upload kept: ok")
    finally:
        for d in (node, a):
            if d:
                d.stop()
        if b.p.poll() is None:
            b.p.kill()


def main():
    if len(sys.argv) < 2:
        print("SKIP: usage: test_s3_podfail.py KVTIERD")
        return 77
    kvtierd = sys.argv[1]
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    tenants = os.path.join(base, "tenants")
    with open(tenants, "w") as f:
        f.write("alice %s tenant\n" % ALICE[1])
    os.chmod(tenants, 0o600)
    pod = Daemon(kvtierd, base, "pod", ["--metrics", "127.0.0.1:0"])
    node = None
    os.environ["KVTD_TEST_S3_SWEEP_PAUSE_MS"] = str(PAUSE_MS)
    os.environ["KVTD_TEST_S3_RECHECK_PAUSE_MS"] = str(PAUSE_MS)
    over = ["--tenants", tenants, "--max-memory", "32M",
            "--set", "remote.addr=127.0.0.1:%d" % pod.native,
            "--set", "remote.timeout_ms=%d" % TIMEOUT_MS, "--set", "remote.put_local=never"]
    tiny = None
    try:
        node = Daemon(kvtierd, base, "node", over)
        os.environ["KVTD_TEST_S3_RECHECK_PAUSE_MS"] = str(TINY_PAUSE_MS)
        tiny = Daemon(kvtierd, base, "tiny", over + ["--dram", "8M", "--set", "dram.policy=lru"])
    finally:
        del os.environ["KVTD_TEST_S3_SWEEP_PAUSE_MS"]
        del os.environ["KVTD_TEST_S3_RECHECK_PAUSE_MS"]
    try:
        P = node.port
        st, _, b = request(P, "PUT", "/pfb")
        assert st == 200, (st, b)

        # 1: an Abort's sweep over the stopped pod
        uid = upload(P, "/pfb/ab")
        for n in (1, 300):
            st, _, b = request(P, "PUT", "/pfb/ab", body=b"ab-%d" % n,
                               query=[("partNumber", str(n)), ("uploadId", uid)])
            assert st == 200, ("UploadPart", n, st, b[:300])
        pod0 = pod.metric("kvtier_dram_blocks")
        t0 = time.monotonic()
        st, b = stopped_pod_answer(pod, P, signed(P, "DELETE", "/pfb/ab",
                                                  query=[("uploadId", uid)]))
        print("Abort whose sweep met a stopped pod: %d %s after %.2f s" % (
            st, (re.search(rb"<Code>([^<]+)", b) or [b"", b""])[1].decode(),
            time.monotonic() - t0))
        # (before s3e47: part 300's presence a miss; 500 here, the marker's
        # delete refused by the stopped pod; 204 had the pod come back)
        assert st == 503 and b"ServiceUnavailable" in b, ("Abort over a failing pod", st,
                                                          b[:300])
        # the marker kept, part 300 with it (part 1 went with the first window)
        got = parts_of(P, "/pfb/ab", uid, [300])
        assert got == [300], ("the upload after the 503", got)
        st, _, b = request(P, "DELETE", "/pfb/ab", query=[("uploadId", uid)])
        assert st == 204, ("the retried Abort", st, b[:300])
        pod1 = pod_settled(pod, pod0 - 3)
        assert pod1 == pod0 - 3, ("the pod's blocks after the retry (marker, parts 1, 300)",
                                  pod0, pod1)
        st, _, b = request(P, "GET", "/pfb/ab", query=[("uploadId", uid)])
        assert st == 404 and b"NoSuchUpload" in b, ("ListParts after the Abort", st, b[:300])
        print("Abort over a failing pod: 503, the upload kept, the retry 204: ok")

        # 2: an UploadPart's recheck of its marker over the stopped pod.
        # The marker read at the UploadPart's head is promoted into the
        # node's DRAM (a plain part get: s3ops.c s3d_hdr_again), so it is
        # evicted first, during the recheck's wait: GETs of objects that
        # total more than the tiny node's DRAM (LRU), then the pod stopped
        P = tiny.port
        st, _, b = request(P, "PUT", "/pfb2")
        assert st == 200, (st, b)
        ev = [os.urandom(3 << 20) for _ in range(4)]
        for i, v in enumerate(ev):
            st, _, b = request(P, "PUT", "/pfb2/ev%d" % i, body=v)
            assert st == 200, ("PUT", i, st, b[:300])
        uid = upload(P, "/pfb2/up")
        s = socket.create_connection(("127.0.0.1", P), timeout=60)
        t0 = time.monotonic()
        s.sendall(signed(P, "PUT", "/pfb2/up", body=b"up-1",
                         query=[("partNumber", "1"), ("uploadId", uid)]))
        time.sleep(0.3)  # the part stored, the recheck waiting
        for i, v in enumerate(ev):
            st, _, b = request(P, "GET", "/pfb2/ev%d" % i)
            assert (st, b) == (200, v), ("GET", i, st, len(b))
        evicted_s = time.monotonic() - t0
        assert evicted_s < TINY_PAUSE_MS / 1000 - 0.5, ("the GETs outlasted the wait", evicted_s)
        pod.sigstop()
        try:
            time.sleep(TINY_PAUSE_MS / 1000 - evicted_s + TIMEOUT_MS / 1000 + 1.0)
        finally:
            pod.p.send_signal(signal.SIGCONT)
        st, b, _ = read_answer(s, b"")
        s.close()
        print("UploadPart whose recheck met a stopped pod (the marker evicted in %.2f s): %d" % (
            evicted_s, st))
        # (before s3e47: 404 NoSuchUpload, the part deleted)
        assert st == 503 and b"ServiceUnavailable" in b, ("UploadPart over a failing pod", st,
                                                          b[:300])
        got = parts_of(P, "/pfb2/up", uid, [1])
        assert got == [1], ("the part kept", got)
        st, _, b = request(P, "PUT", "/pfb2/up", body=b"up-2",
                           query=[("partNumber", "2"), ("uploadId", uid)])
        assert st == 200, ("UploadPart with the pod running", st, b[:300])
        # (part 1 is under 5 MiB, which only the last part may be: 1 alone;
        # the Complete's sweep takes part 2)
        xml = b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>" \
              b"</CompleteMultipartUpload>"
        st, _, b = request(P, "POST", "/pfb2/up", body=xml, query=[("uploadId", uid)])
        assert st == 200, ("Complete", st, b[:300])
        st, _, b = request(P, "GET", "/pfb2/up")
        assert (st, b) == (200, b"up-1"), ("the completed object", st, b[:100])
        print("UploadPart over a failing pod: 503, the part kept, completed: ok")
        member_down(kvtierd, base, tenants)
    finally:
        for d in (tiny, node, pod):
            if d:
                try:
                    d.p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for d in (tiny, node, pod):
            if d:
                d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
