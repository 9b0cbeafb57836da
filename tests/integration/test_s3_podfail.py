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
     part kept (ListParts lists it), the upload completes (since s3f48
     the part's delete is tried before the 503; the client's retry
     stores it again).  The marker
     read at the UploadPart's head is promoted into the node's DRAM, so
     this runs on a second node, "tiny" (--dram 8M, LRU), where GETs of
     12 MiB of objects evict it during the recheck's wait.
  3. (review47e) a pod of two, one member killed and known down, a part
     on it: an Abort skipped the part (the member ranked around, not
     asked) and failed 500 at the marker's delete; now 503 at once.
  4. (s3f48) a Complete whose sweep of its unlisted parts meets a failed
     presence deletes the part anyway (it was skipped, left in the pod);
  5. (s3f48) an UploadPart whose recheck fails, its upload aborted on
     another node meanwhile, deletes its part before its 503 (it was
     kept, held where no request reaches it);
  6. (s3f48) GetObject and HeadObject over the stopped pod, and GET, HEAD
     and ListParts of what a dead member held (in 3): 503, not 404 or a
     part left out (the library takes a read's failure for a miss; the
     node now asks such a miss's presence with KVT_F_ERRORS); and
     (review48d) an UploadPart whose upload's marker is on the dead
     member: 503, not 404 NoSuchUpload.
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
from test_s3_remote import Daemon, pod_settled, read_answer, signed, stop_all  # noqa: E402

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
    after SIGCONT, and until then ListParts' reads of the pod fail: 503
    (until s3f48 taken for misses, the parts left out)."""
    end = time.monotonic() + 5
    while True:
        st, _, b = request(port, "GET", key, query=[("uploadId", uid)])
        assert st in (200, 503), ("ListParts", st, b[:300])
        got = [int(x) for x in re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)]
        if st == 200 and got == want or time.monotonic() > end:
            return got if st == 200 else ("ListParts", st)
        time.sleep(0.1)


def landed(a, b, a0, b0):
    """Which member ("a" or "b") took the one block put since their DRAM
    blocks were a0 and b0 (once it is there, or after 5 s: None)."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        da, db = a.metric("kvtier_dram_blocks") - a0, b.metric("kvtier_dram_blocks") - b0
        if da + db >= 1:
            return "a" if da else "b"
        time.sleep(0.05)
    return None


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
        on = {}  # an object on each member (s3f48's reads)
        for i in range(40):
            a0, b0 = a.metric("kvtier_dram_blocks"), b.metric("kvtier_dram_blocks")
            st, _, body = request(P, "PUT", "/pfb3/o%d" % i, body=b"o-%d" % i)
            assert st == 200, ("PutObject", i, st, body[:300])
            on.setdefault(landed(a, b, a0, b0), i)
            if len(on) == 2:
                break
        assert len(on) == 2, ("no object on each member in 40", on)
        for i in range(40):  # an upload whose marker is on b (review48d)
            a0, b0 = a.metric("kvtier_dram_blocks"), b.metric("kvtier_dram_blocks")
            ub = ("/pfb3/m%d" % i, upload(P, "/pfb3/m%d" % i))
            if landed(a, b, a0, b0) == "b":
                break
        else:
            raise AssertionError("no marker on member b in 40 uploads")
        b.p.send_signal(signal.SIGKILL)
        b.p.wait(20)
        a0 = a.metric("kvtier_dram_blocks")
        st, _, body = request(P, "DELETE", key, query=[("uploadId", uid)])
        print("Abort with the pod member holding part %d dead: %d" % (on_b, st))
        assert st == 503, ("Abort with a member down", st, body[:300])
        assert a.metric("kvtier_dram_blocks") == a0, "the upload kept (marker, parts on a)"
        print("Abort over a pod member down: 503, the upload kept: ok")
        # (s3f48) reads of what the dead member held: not known, so 503
        # ServiceUnavailable (retried by clients), not 404.  Before, the
        # member was ranked around, the live one's miss passed on: GET and
        # HEAD 404 NoSuchKey, ListParts 200 with part on_b left out
        ob = "/pfb3/o%d" % on["b"]
        st, _, body = request(P, "GET", ob)
        print("GetObject of an object on the dead member: %d" % st)
        assert st == 503 and b"ServiceUnavailable" in body, ("GET, member down", st, body[:300])
        st, _, body = request(P, "HEAD", ob)
        assert st == 503, ("HEAD, member down", st)
        st, _, body = request(P, "GET", "/pfb3/o%d" % on["a"])
        assert (st, body) == (200, b"o-%d" % on["a"]), ("GET, on the live member", st, body[:300])
        st, _, body = request(P, "GET", key, query=[("uploadId", uid)])
        print("ListParts of an upload with part %d on the dead member: %d" % (on_b, st))
        assert st == 503 and b"ServiceUnavailable" in body, ("ListParts, member down", st,
                                                             body[:300])
        # a Complete listing the part on the dead member (400 InvalidPart
        # before: its read a miss, the marker found) and a copy of the
        # object there (404 NoSuchKey before): 503, the upload kept
        xml = b"<CompleteMultipartUpload><Part><PartNumber>%d</PartNumber></Part>" \
              b"</CompleteMultipartUpload>" % on_b
        st, _, body = request(P, "POST", key, body=xml, query=[("uploadId", uid)])
        print("Complete of part %d on the dead member: %d" % (on_b, st))
        assert st == 503, ("Complete, member down", st, body[:300])
        st, _, body = request(P, "PUT", "/pfb3/cp", extra={"x-amz-copy-source": ob})
        assert st == 503, ("CopyObject of an object on the dead member", st, body[:300])
        assert a.metric("kvtier_dram_blocks") == a0, "the upload kept after the Complete"
        # (review48d) an UploadPart whose upload's marker is on the dead
        # member: its marker read at its head (s3d.c s3d_upload_probe)
        # missed on the live member and was 404 NoSuchUpload for a live
        # upload; now that miss's presence is asked: 503
        st, _, body = request(P, "PUT", ub[0], body=b"x" * 100,
                              query=[("partNumber", "1"), ("uploadId", ub[1])])
        print("UploadPart of an upload whose marker is on the dead member: %d" % st)
        assert st == 503 and b"ServiceUnavailable" in body, ("UploadPart, marker on the dead "
                                                             "member", st, body[:300])
        print("GET, HEAD, ListParts, Complete, CopyObject over a pod member down: 503: ok")
    finally:
        if b.p.poll() is None:
            b.p.kill()
        stop_all(node, a)


def hooked(kvtierd, base, name, over, env):
    """A node started with a test hook's environment (kvtierd.h struct
    kvtd_s3: read once, at start)."""
    os.environ.update(env)
    try:
        return Daemon(kvtierd, base, name, over)
    finally:
        for k in env:
            del os.environ[k]


def complete_and_recheck(kvtierd, base, over, pod):
    """(s3f48) 4: a Complete whose sweep of the parts it did not list
    cannot tell one's presence (KVTD_TEST_S3_COMPLETE_FAIL=2: part 2's
    fails, as over a pod that timed out): it deletes it anyway, 200, and
    nothing of the upload is left in the pod.  Before, the part was
    skipped: the marker gone, part 2 stayed in the pod, reachable by no
    request (the pod's blocks +2, not +1).
    5: an UploadPart whose head read the marker, its upload then aborted
    (on another node) before its body came, whose recheck of the marker
    fails (KVTD_TEST_S3_RECHECK_FAIL=1, as a pod's timeout): 503 and its
    part deleted before the answer.  Before, 503 and the part kept: its
    upload gone, held in the pod where no request reaches it (the pod's
    blocks +1 after the Abort's 204)."""
    cf = rf = None
    try:
        cf = hooked(kvtierd, base, "cf", over, {"KVTD_TEST_S3_COMPLETE_FAIL": "2"})
        rf = hooked(kvtierd, base, "rf", over, {"KVTD_TEST_S3_RECHECK_FAIL": "1"})
        P = cf.port
        for port in (P, rf.port):  # (a bucket is a node's)
            st, _, b = request(port, "PUT", "/pfc")
            assert st == 200, (st, b)
        pod0 = pod.metric("kvtier_dram_blocks")
        uid = upload(P, "/pfc/k")
        for n in (1, 2, 3):
            st, _, b = request(P, "PUT", "/pfc/k", body=b"c-%d" % n,
                               query=[("partNumber", str(n)), ("uploadId", uid)])
            assert st == 200, ("UploadPart", n, st, b[:300])
        xml = b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>" \
              b"</CompleteMultipartUpload>"
        st, _, b = request(P, "POST", "/pfc/k", body=xml, query=[("uploadId", uid)])
        assert st == 200, ("Complete, part 2's presence failing", st, b[:300])
        pod1 = pod_settled(pod, pod0 + 1)
        print("Complete of part 1 of 3, part 2's presence failing: the pod's blocks %+d" % (
            pod1 - pod0))
        assert pod1 == pod0 + 1, ("parts left by the Complete's sweep", pod0, pod1)
        st, _, b = request(P, "GET", "/pfc/k")
        assert (st, b) == (200, b"c-1"), ("the completed object", st, b[:100])
        print("Complete whose sweep met a failed presence: 200, no part left: ok")

        pod0 = pod.metric("kvtier_dram_blocks")
        uid = upload(P, "/pfc/r")
        req = signed(rf.port, "PUT", "/pfc/r", body=b"r-1",
                     query=[("partNumber", "1"), ("uploadId", uid)])
        head, body = req[:req.index(b"\r\n\r\n") + 4], req[req.index(b"\r\n\r\n") + 4:]
        s = socket.create_connection(("127.0.0.1", rf.port), timeout=60)
        s.sendall(head)
        time.sleep(0.3)  # its marker read at its head
        st, _, b = request(P, "DELETE", "/pfc/r", query=[("uploadId", uid)])
        assert st == 204, ("the Abort on another node", st, b[:300])
        s.sendall(body)
        st, b, _ = read_answer(s, b"")
        s.close()
        assert st == 503 and b"ServiceUnavailable" in b, ("UploadPart, its recheck failing",
                                                          st, b[:300])
        pod1 = pod_settled(pod, pod0)
        print("UploadPart into an upload aborted meanwhile, its recheck failing: %d, the pod's "
              "blocks %+d" % (st, pod1 - pod0))
        assert pod1 == pod0, ("the part of an aborted upload left in the pod", pod0, pod1)
        print("UploadPart whose recheck failed: 503, its part deleted: ok")
    finally:
        stop_all(cf, rf)


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
        # ([1, 300] in 1 run of 8 at load 10 (s3f48): the Abort's marker
        # read or first window not done STOP_AT after the request, the
        # pod stopped under it -- 503 there, since s3f48 for a marker
        # read too, nothing deleted)
        got = parts_of(P, "/pfb/ab", uid, [300])
        assert got in ([300], [1, 300]), ("the upload after the 503", got)
        st, _, b = request(P, "DELETE", "/pfb/ab", query=[("uploadId", uid)])
        assert st == 204, ("the retried Abort", st, b[:300])
        pod1 = pod_settled(pod, pod0 - 3)
        assert pod1 == pod0 - 3, ("the pod's blocks after the retry (marker, parts 1, 300)",
                                  pod0, pod1)
        st, _, b = request(P, "GET", "/pfb/ab", query=[("uploadId", uid)])
        assert st == 404 and b"NoSuchUpload" in b, ("ListParts after the Abort", st, b[:300])
        print("Abort over a failing pod: 503, the upload kept, the retry 204: ok")

        # GetObject and HeadObject with the pod stopped past the node's
        # remote.timeout_ms (s3f48): the read times out, which the library
        # takes for a miss -- 404 NoSuchKey until s3f48, not retried by
        # any client -- now its presence is asked (KVT_F_ERRORS): 503
        st, _, b = request(P, "PUT", "/pfb/g", body=b"g-1")
        assert st == 200, ("PUT", st, b[:300])
        t0 = time.monotonic()
        pod.sigstop()
        try:
            g = request(P, "GET", "/pfb/g")
            h = request(P, "HEAD", "/pfb/g")
        finally:
            pod.p.send_signal(signal.SIGCONT)
        print("GET, HEAD with the pod stopped: %d, %d in %.2f s" % (g[0], h[0],
                                                                   time.monotonic() - t0))
        assert g[0] == 503 and b"ServiceUnavailable" in g[2], ("GET, pod stopped", g[0],
                                                               g[2][:300])
        assert h[0] == 503, ("HEAD, pod stopped", h[0])
        end = time.monotonic() + 5  # (the node's connections come back)
        while True:
            st, _, b = request(P, "GET", "/pfb/g")
            if st != 503 or time.monotonic() > end:
                break
            time.sleep(0.1)
        assert (st, b) == (200, b"g-1"), ("GET, the pod running", st, b[:300])
        st, _, b = request(P, "GET", "/pfb/none")
        assert st == 404 and b"NoSuchKey" in b, ("GET of no object, the pod running", st)
        st, _, b = request(P, "PUT", "/pfb/g", body=b"p",  # (review48d: its presence asked)
                           query=[("partNumber", "1"), ("uploadId", "%032x" % 7)])
        assert st == 404 and b"NoSuchUpload" in b, ("UploadPart of no upload", st, b[:300])
        print("GET, HEAD over a stopped pod: 503; then 200, and 404 for none: ok")

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
        # (until s3f48 the part was kept; now its delete is tried before
        # the 503 -- here to the stopped pod, so it may stay or go: the
        # client's retry stores it again, as botocore's would)
        end = time.monotonic() + 5
        while True:
            st, _, b = request(P, "PUT", "/pfb2/up", body=b"up-1",
                               query=[("partNumber", "1"), ("uploadId", uid)])
            if st != 503 or time.monotonic() > end:
                break
            time.sleep(0.1)
        assert st == 200, ("the UploadPart retried", st, b[:300])
        got = parts_of(P, "/pfb2/up", uid, [1])
        assert got == [1], ("the part retried", got)
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
        print("UploadPart over a failing pod: 503, retried, completed: ok")
        complete_and_recheck(kvtierd, base, over, pod)
        member_down(kvtierd, base, tenants)
    finally:
        stop_all(tiny, node, pod)
    return 0


if __name__ == "__main__":
    sys.exit(main())
