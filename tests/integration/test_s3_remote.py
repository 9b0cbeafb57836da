#!/usr/bin/env python3
"""test_s3_remote.py - S3 writes on a kvtierd whose store has a remote tier
below it (a node over a pod: --set remote.addr=POD, doc/remote.md).

A reservation (kvt_put_reserve) has nothing to write through from there
(KVT_ESTATE), and every PutObject was answered 503 SlowDown until
s3fb43 (2026-12-07): the body is now buffered and written through
(daemon/s3d.c "Overwrites", doc/s3.md).  Checked: a PUT then a GET on the
node, the object read by a cold node over the same pod, an overwrite,
If-None-Match: * refused (501), and a DeleteObject then a PutObject of
the same key pipelined on one connection while the pod is stopped
(SIGSTOP): after SIGCONT the key holds the new bytes, not a miss left by
the DELETE applied after the PUT (s3d.c "Order").  Also (s3copy43) a
CompleteMultipartUpload of two parts, CopyObjects (a new key, then over
it) and UploadPartCopies (whole, a range) on the node, each read back
there and on the cold node, and a Complete larger than the cold node's
--max-memory (400 EntityTooLarge): all 503 SlowDown before.  That part passes
with the DeleteObject's hold removed too: the remote tier holds a put of
a key behind an unanswered DELETE of it (doc/remote.md, put_waits).

Usage: test_s3_remote.py PATH-TO-KVTIERD.  Starts real kvtierds on
127.0.0.1 port 0 (a pod, two nodes); needs no package index.
"""
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_s3_py import ALICE, request, sign  # noqa: E402

import datetime  # noqa: E402
import hashlib  # noqa: E402
import urllib.parse  # noqa: E402


class Daemon:
    def __init__(self, kvtierd, base, name, extra):
        self.dir = os.path.join(base, name)
        self.log = self.dir + ".log"
        self.p = subprocess.Popen(
            [kvtierd, "--dir", self.dir, "--dram", "64M", "--ssd", "0", "--set",
             "dram.prefault=off", "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0",
             "--threads", "1", "--log", self.log] + extra,
            stdout=subprocess.DEVNULL, stderr=open(self.log + ".stderr", "w"))
        for _ in range(600):
            text = open(self.log).read() if os.path.exists(self.log) else ""
            s3 = re.search(r"S3 listener on 127\.0\.0\.1:(\d+)", text)
            nat = re.search(r"listening on 127\.0\.0\.1:(\d+)", text)
            mp = re.search(r"metrics listener on 127\.0\.0\.1:(\d+)", text)
            if s3 and nat and (mp or "--metrics" not in extra):
                self.port, self.native = int(s3.group(1)), int(nat.group(1))
                self.mport = int(mp.group(1)) if mp else None
                return
            if self.p.poll() is not None:
                raise SystemExit("kvtierd exited: see " + self.log)
            time.sleep(0.02)
        raise SystemExit("kvtierd did not start")

    def metric(self, name):
        """One unlabelled series of its /metrics (started with --metrics)."""
        s = socket.create_connection(("127.0.0.1", self.mport), timeout=20)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        st, body, _ = read_answer(s, b"")
        s.close()
        m = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.M)
        assert st == 200 and m, (name, st, body[:200])
        return float(m.group(1))

    def sigstop(self):
        """SIGSTOP, returned once every thread is stopped (10 s at most).
        kill() returns before: the stop is taken by one thread the kernel
        picked, once it gets a CPU, and until then the others run on --
        under load a GET sent right after the signal was answered by the
        loop thread (0.3 ms, threads R S S S; test_s3_podfail's
        "GetObject and HeadObject with the pod stopped": a hit, 1 run of
        36, rem48 2026-12-07).  As C tests' tsrv_wait_stopped."""
        self.p.send_signal(signal.SIGSTOP)
        end = time.monotonic() + 10
        while True:
            states = []
            for t in os.listdir("/proc/%d/task" % self.p.pid):
                try:
                    with open("/proc/%d/task/%s/stat" % (self.p.pid, t)) as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:
                    pass  # a thread that ended
            if all(st in ("T", "t") for st in states):
                return
            assert time.monotonic() < end, ("kvtierd not stopped", states)
            time.sleep(0.002)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        assert self.p.wait(60) == 0, "kvtierd exit status"
        err = open(self.log + ".stderr").read()
        assert "Sanitizer" not in err and "runtime error" not in err, err


def stop_all(*daemons):
    """The end of a test over pods it stops (SIGSTOP): each Daemon sent
    SIGCONT -- one a failed assertion left stopped would not see its
    SIGTERM -- then stopped (Daemon.stop: exit status 0, no sanitizer
    report), every one of them even where one's stop fails, that first
    failure raised after.  None: not started."""
    ds = [d for d in daemons if d]
    for d in ds:
        try:
            d.p.send_signal(signal.SIGCONT)
        except ProcessLookupError:
            pass
    failed = None
    for d in ds:
        try:
            d.stop()
        except BaseException as e:  # noqa: B036 (the others stopped first)
            failed = failed or e
    if failed:
        raise failed


def signed(port, method, path, body=b"", clen=None, query=()):
    """The bytes of one signed request (test_s3_py's signer); clen: a
    Content-Length other than the body's (the body unsigned); query:
    (name, value) pairs."""
    h = {"host": "127.0.0.1:%d" % port}
    if body or method in ("PUT", "POST"):
        h["content-length"] = str(len(body) if clen is None else clen)
    ph = hashlib.sha256(body).hexdigest() if clen is None else "UNSIGNED-PAYLOAD"
    when = datetime.datetime.now(datetime.timezone.utc)
    auth = sign(method, path, list(query), h, ph, ALICE[0], ALICE[1], when)[0]
    h["authorization"] = auth
    qs = "&".join("%s=%s" % (urllib.parse.quote(n, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                  for n, v in query)
    return ("%s %s%s HTTP/1.1\r\n" % (method, urllib.parse.quote(path, safe="/-_.~"),
                                       "?" + qs if qs else "") +
            "".join("%s: %s\r\n" % (k, v) for k, v in h.items()) + "\r\n").encode() + body


def read_answer(s, buf):
    """(status, body, rest of buf) of one answer read from s."""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        assert b, "connection closed before an answer"
        buf += b
    head, _, buf = buf.partition(b"\r\n\r\n")
    m = re.search(rb"Content-Length: (\d+)", head)
    need = int(m.group(1)) if m else 0
    while len(buf) < need:
        b = s.recv(65536)
        assert b, "connection closed inside an answer"
        buf += b
    return int(head.split(b" ")[1]), buf[:need], buf[need:]


def multipart(port, key, parts):
    """Create, upload parts (bytes, or (source, range) for UploadPartCopy),
    complete: (status, body, upload id) of the Complete."""
    st, _, b = request(port, "POST", key, query=[("uploads", "")])
    assert st == 200, ("CreateMultipartUpload", st, b[:300])
    uid = re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
    xml = "<CompleteMultipartUpload>"
    for n, part in enumerate(parts, 1):
        q = [("partNumber", str(n)), ("uploadId", uid)]
        if isinstance(part, bytes):
            st, head, b = request(port, "PUT", key, body=part, query=q)
            etag = re.search(r"(?i)etag: (\S+)", head).group(1)
        else:
            extra = {"x-amz-copy-source": part[0]}
            if part[1]:
                extra["x-amz-copy-source-range"] = part[1]
            st, head, b = request(port, "PUT", key, query=q, extra=extra)
            etag = re.search(rb"<ETag>([^<]+)</ETag>", b).group(1).decode().replace(
                "&quot;", '"')
        assert st == 200, ("part", n, st, b[:300])
        xml += "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (
            n, etag.replace('"', "&quot;"))
    xml += "</CompleteMultipartUpload>"
    st, _, b = request(port, "POST", key, body=xml.encode(), query=[("uploadId", uid)])
    return st, b, uid


TIMEOUT_MS = 2000  # remote.timeout_ms of the nodes (its default, said here)


def pod_settled(pod, want):
    """The pod's DRAM blocks once they are want (the deletes fired after
    an answer, a Complete's marker and listed parts, may still be on
    their way), or after 5 s."""
    end = time.monotonic() + 5
    got = pod.metric("kvtier_dram_blocks")
    while got != want and time.monotonic() < end:
        time.sleep(0.05)
        got = pod.metric("kvtier_dram_blocks")
    return got


def main():
    if len(sys.argv) < 2:
        print("SKIP: usage: test_s3_remote.py KVTIERD")
        return 77
    kvtierd = sys.argv[1]
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    tenants = os.path.join(base, "tenants")
    with open(tenants, "w") as f:
        f.write("alice %s tenant\n" % ALICE[1])
    os.chmod(tenants, 0o600)
    pod = Daemon(kvtierd, base, "pod", ["--metrics", "127.0.0.1:0"])
    over = ["--tenants", tenants, "--max-memory", "32M", "--set",
            "remote.addr=127.0.0.1:%d" % pod.native,
            "--set", "remote.timeout_ms=%d" % TIMEOUT_MS]
    node = Daemon(kvtierd, base, "node", over)
    cold = None
    try:
        P = node.port
        st, _, b = request(P, "PUT", "/rbkt")
        assert st == 200, (st, b)
        data = os.urandom(300000)
        st, _, b = request(P, "PUT", "/rbkt/obj", body=data)
        assert st == 200, ("PutObject over a remote tier", st, b[:300])
        st, _, b = request(P, "GET", "/rbkt/obj")
        assert st == 200 and b == data, ("GET on the node", st, len(b))
        # an overwrite replaces it
        st, _, b = request(P, "PUT", "/rbkt/obj", body=b"second")
        assert st == 200, (st, b[:300])
        st, _, b = request(P, "GET", "/rbkt/obj")
        assert (st, b) == (200, b"second"), (st, b[:100])
        # assembled objects (they were 503 SlowDown until s3copy43)
        big = os.urandom(5 << 20) + b"tail" * 250
        mpu = multipart(P, "/rbkt/mpu", [big[:5 << 20], big[5 << 20:]])
        assert mpu[0] == 200 and b"CompleteMultipartUploadResult" in mpu[1], mpu[:2]
        st, head, b = request(P, "GET", "/rbkt/mpu")
        assert st == 200 and b == big, ("multipart GET on the node", st, len(b))
        assert "x-amz-mp-parts-count: 2" in head, head
        for src, want in (("/rbkt/obj", b"second"), ("/rbkt/mpu", big)):  # then over it
            st, _, b = request(P, "PUT", "/rbkt/cp", extra={"x-amz-copy-source": src})
            assert st == 200 and b"CopyObjectResult" in b, ("CopyObject", src, st, b[:300])
            st, _, b = request(P, "GET", "/rbkt/cp")
            assert st == 200 and b == want, ("the copy's GET", src, st, len(b))
        # UploadPartCopy, whole and a range, into an upload completed
        pc = multipart(P, "/rbkt/pcopy", [("/rbkt/mpu", None), ("/rbkt/obj", "bytes=1-4")])
        assert pc[0] == 200, pc[:2]
        st, _, b = request(P, "GET", "/rbkt/pcopy")
        assert st == 200 and b == big + b"econ", ("UploadPartCopy's GET", st, len(b))
        # in the pod: a cold node over it reads the new bytes
        # (put_local=never there: no DRAM copy, every read goes to the pod)
        cold = Daemon(kvtierd, base, "cold", over[:2] + ["--max-memory", "8M"] + over[4:] +
                      ["--set", "remote.put_local=never"])
        st, _, b = request(cold.port, "PUT", "/rbkt")
        assert st in (200, 409), (st, b)
        st, _, b = request(cold.port, "GET", "/rbkt/obj")
        assert (st, b) == (200, b"second"), ("GET on a cold node", st, b[:100])
        for key, want in (("mpu", big), ("cp", big), ("pcopy", big + b"econ")):
            st, _, b = request(cold.port, "GET", "/rbkt/" + key)
            assert st == 200 and b == want, ("cold GET", key, st, len(b))
        # an assembly past --max-memory (8M there) beside what the Complete
        # holds cannot be buffered: 400 (of 8 MiB - 100 B, 503 before review43g)
        st, b, uid = multipart(cold.port, "/rbkt/toobig", [big[:5 << 20],
                                                            big[:(3 << 20) - 100]])
        assert st == 400 and b"EntityTooLarge" in b and b"--max-memory" in b, (st, b[:300])
        # an Abort naming another key reads the marker from the pod and
        # refuses it (s3ops.c s3d_abort_marker), the upload kept
        st, _, b = request(cold.port, "DELETE", "/rbkt/other", query=[("uploadId", uid)])
        assert st == 404 and b"NoSuchUpload" in b, ("another key's Abort", st, b[:300])
        st, _, b = request(cold.port, "DELETE", "/rbkt/toobig", query=[("uploadId", uid)])
        assert st == 204, ("the upload kept: aborted", st, b[:300])
        st, _, b = request(cold.port, "DELETE", "/rbkt/toobig", query=[("uploadId", uid)])
        assert st == 404 and b"NoSuchUpload" in b, ("a second Abort", st, b[:300])
        # parts in the pod only (put_local=never; never read on the node):
        # the Abort's sweep asks the pod for them (KVT_OP_EXISTS) and its
        # deletes reach it.  Until s3x46 (2026-12-07) the sweep read the
        # node's tiers alone (quiet reads): the marker went, both parts
        # stayed in the pod
        st, _, b = request(cold.port, "POST", "/rbkt/aborted", query=[("uploads", "")])
        assert st == 200, ("CreateMultipartUpload", st, b[:300])
        uid = re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
        for n in (1, 2):
            st, _, b = request(cold.port, "PUT", "/rbkt/aborted", body=b"part%d" % n,
                               query=[("partNumber", str(n)), ("uploadId", uid)])
            assert st == 200, ("UploadPart", n, st, b[:300])
        pod0 = pod.metric("kvtier_dram_blocks")
        st, _, b = request(cold.port, "DELETE", "/rbkt/aborted", query=[("uploadId", uid)])
        assert st == 204, ("the Abort", st, b[:300])
        pod1 = pod_settled(pod, pod0 - 3)
        print("an Abort on a node with put_local=never: the pod's blocks %+d (its marker "
              "and 2 parts)" % (pod1 - pod0))
        assert pod1 == pod0 - 3, ("the aborted upload's parts left in the pod", pod0, pod1)
        # a Complete's sweep of the parts it did not list, there too:
        # parts 2 and 3 go from the pod (they stayed until s3x46)
        pod0 = pod.metric("kvtier_dram_blocks")
        st, _, b = request(cold.port, "POST", "/rbkt/swept", query=[("uploads", "")])
        assert st == 200, ("CreateMultipartUpload", st, b[:300])
        uid = re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
        for n in (1, 2, 3):
            st, _, b = request(cold.port, "PUT", "/rbkt/swept", body=b"part%d" % n,
                               query=[("partNumber", str(n)), ("uploadId", uid)])
            assert st == 200, ("UploadPart", n, st, b[:300])
        xml = b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>" \
              b"</CompleteMultipartUpload>"
        st, _, b = request(cold.port, "POST", "/rbkt/swept", body=xml, query=[("uploadId", uid)])
        assert st == 200, ("Complete of part 1 of 3", st, b[:300])
        pod1 = pod_settled(pod, pod0 + 1)
        print("a Complete of part 1 of 3 on a node with put_local=never: the pod's blocks %+d "
              "(the object)" % (pod1 - pod0))
        assert pod1 == pod0 + 1, ("the unlisted parts left in the pod", pod0, pod1)
        st, _, b = request(cold.port, "GET", "/rbkt/swept")
        assert (st, b) == (200, b"part1"), ("the completed object", st, b[:100])
        # what a 404 costs the pod (review48d): since s3f48 a read's miss
        # asks its presence (KVT_F_ERRORS) -- two frames, not one; a bound,
        # so that a hostile signer's flood of absent keys is not worth more
        # (3 would fail here)
        for what, ask in (
                ("GET", lambda i: request(cold.port, "GET", "/rbkt/none%d" % i)),
                ("HEAD", lambda i: request(cold.port, "HEAD", "/rbkt/none%d" % i)),
                ("UploadPart", lambda i: request(cold.port, "PUT", "/rbkt/u", body=b"p", query=[
                    ("partNumber", "1"), ("uploadId", "%032x" % (i + 1))]))):
            f0 = pod.metric("kvtier_server_frames_in_total")
            for i in range(20):
                st = ask(i)[0]
                assert st == 404, (what, "of nothing", st)
            per = (pod.metric("kvtier_server_frames_in_total") - f0) / 20
            print("a %s 404 over the pod: %.2f pod frames" % (what, per))
            assert per <= 2.2, ("pod frames a %s 404" % what, per)
        print("CompleteMultipartUpload, CopyObject, UploadPartCopy, cold GETs, "
              "an assembly too large, sweeps of parts in the pod only: ok")
        # If-None-Match: * is not evaluated there: refused, nothing written
        st, _, b = request(P, "PUT", "/rbkt/obj", body=b"third", extra={"if-none-match": "*"})
        assert st == 501 and b"NotImplemented" in b, (st, b[:300])
        st, _, b = request(P, "GET", "/rbkt/obj")
        assert (st, b) == (200, b"second"), (st, b[:100])
        # a body past --max-memory cannot be buffered: 400 before it is read
        s = socket.create_connection(("127.0.0.1", P), timeout=20)
        s.sendall(signed(P, "PUT", "/rbkt/huge", clen=40 << 20))
        st, b, _ = read_answer(s, b"")
        s.close()
        assert st == 400 and b"EntityTooLarge" in b and b"--max-memory" in b, (st, b[:300])
        # one of --max-memory exactly does not fit beside its head (503 before)
        s = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        s.sendall(signed(cold.port, "PUT", "/rbkt/huge", clen=8 << 20))
        st, b, _ = read_answer(s, b"")
        s.close()
        assert st == 400 and b"EntityTooLarge" in b, ("a PUT of --max-memory", st, b[:300])
        print("PUT, GET, cold GET, overwrite, If-None-Match, a body too large: ok")

        # PUT then GET of one key pipelined: the GET runs once the PUT's
        # DELETE + PUT are back (s3d.c "Order"); before, with no DRAM copy,
        # it was a miss at once behind the unanswered DELETE (200, 404)
        for i in range(3):
            key = "/rbkt/pg%d" % i
            s = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
            s.sendall(signed(cold.port, "PUT", key, body=b"pg%d" % i) +
                      signed(cold.port, "GET", key))
            a1, _, rest = read_answer(s, b"")
            a2, body, _ = read_answer(s, rest)
            s.close()
            assert (a1, a2, body) == (200, 200, b"pg%d" % i), ("PUT, GET", i, a1, a2, body[:200])
        print("PutObject then GetObject pipelined (put_local=never): ok")

        # UploadPart's upload: its marker read through the loop's queue
        # (s3d.c s3d_upload_probe), from the pod where the node has no copy
        # (put_local=never), and the key's only (s3fix45).  Before, a
        # kvt_exists on the loop: with the pod stopped, the node's one loop
        # waited for it, and a HeadBucket on another connection with it
        def upload(port, key):
            st, _, b = request(port, "POST", key, query=[("uploads", "")])
            assert st == 200, ("CreateMultipartUpload", st, b[:300])
            return re.search(rb"<UploadId>([^<]+)</UploadId>", b).group(1).decode()
        uid = upload(cold.port, "/rbkt/up")
        q = [("partNumber", "1"), ("uploadId", uid)]
        st, _, b = request(cold.port, "PUT", "/rbkt/other", body=b"o1", query=q)
        assert st == 404 and b"NoSuchUpload" in b, ("UploadPart of another key", st, b[:300])
        st, _, b = request(cold.port, "PUT", "/rbkt/up", body=b"u1", query=q)
        assert st == 200, ("UploadPart, its marker in the pod only", st, b[:300])
        # UploadPartCopy's marker read is asked of the pod by the same
        # rule (s3ops.c s3d_hdr_again), and the key's only as well
        q2 = [("partNumber", "2"), ("uploadId", uid)]
        cs = {"x-amz-copy-source": "/rbkt/obj"}
        st, _, b = request(cold.port, "PUT", "/rbkt/other", query=q2, extra=cs)
        assert st == 404 and b"NoSuchUpload" in b, ("UploadPartCopy of another key", st, b[:300])
        st, _, b = request(cold.port, "PUT", "/rbkt/up", query=q2, extra=cs)
        assert st == 200 and b"CopyPartResult" in b, ("UploadPartCopy, its marker in the pod only",
                                                      st, b[:300])
        st, _, b = request(cold.port, "GET", "/rbkt/up", query=[("uploadId", uid)])
        got = re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)
        assert st == 200 and got == [b"1", b"2"], ("the upload's parts", st, b[:400])
        t0 = time.monotonic()
        st, _, b = request(cold.port, "HEAD", "/rbkt")
        base_s = time.monotonic() - t0
        assert st == 200, ("HeadBucket", st)
        uid = upload(cold.port, "/rbkt/up2")  # its marker never read on the node
        a = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        h = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        q = [("partNumber", "1"), ("uploadId", uid)]
        pod.sigstop()
        try:
            a.sendall(signed(cold.port, "PUT", "/rbkt/up2", body=b"up2-1", query=q))
            time.sleep(0.2)  # its marker's read waits for the pod
            t0 = time.monotonic()
            h.sendall(signed(cold.port, "HEAD", "/rbkt"))
            # answered while the pod is still stopped: within a multiple
            # of the same run's HeadBucket, and before half the pod's
            # deadline (remote.timeout_ms), at which a loop blocked on
            # the lookup would answer (s3b45: a fixed 1 s until then; the
            # floor 0.5 s, not 0.1: a loaded CI's HeadBucket, review45f)
            window = min(max(100 * base_s, 0.5), TIMEOUT_MS / 2000)
            got = select.select([h], [], [], window)[0]
            held_s = time.monotonic() - t0
        finally:
            pod.p.send_signal(signal.SIGCONT)
        hst, _, _ = read_answer(h, b"") if got else (0, b"", b"")
        h.close()
        ast, ab, _ = read_answer(a, b"")
        a.close()
        print("HeadBucket beside an UploadPart whose upload is read from a stopped pod: "
              "%s in %.3f s (%.4f s with the pod running, window %.3f s); the UploadPart %d" % (
                  hst or "no answer", held_s, base_s, window, ast))
        assert got and hst == 200, ("HeadBucket held behind the UploadPart's lookup", held_s)
        assert ast == 200, ("the UploadPart once the pod went on", ast, ab[:300])
        # While the marker's read waits for the stopped pod (review45a):
        # a client that resets its connection (closed with the read in
        # flight, "hang-up": the read's completion finds it dead), one that
        # half-closes after its head (its body never comes: closed
        # unanswered, as a PUT whose body stops so, loop.c "peer closed in
        # the middle of a frame"), and one that pipelines a GET behind the
        # part's body (answered after it, in order); then the node serves,
        # and the upload's parts are those whose bodies came.  The daemon's
        # stop checks ASan's report.
        uid = upload(cold.port, "/rbkt/up3")
        rst = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        half = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        pipe = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        pod.sigstop()
        try:
            rst.sendall(signed(cold.port, "PUT", "/rbkt/up3", body=b"rst-1",
                               query=[("partNumber", "1"), ("uploadId", uid)]))
            half.sendall(signed(cold.port, "PUT", "/rbkt/up3", body=b"half-2", clen=6,
                                query=[("partNumber", "2"), ("uploadId", uid)])[:-6])
            half.shutdown(socket.SHUT_WR)
            pipe.sendall(signed(cold.port, "PUT", "/rbkt/up3", body=b"pipe-3",
                                query=[("partNumber", "3"), ("uploadId", uid)]) +
                         signed(cold.port, "GET", "/rbkt/obj"))
            time.sleep(0.2)  # the three heads parsed, their marker reads in flight
            rst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rst.close()
            time.sleep(0.2)
        finally:
            pod.p.send_signal(signal.SIGCONT)
        hb = half.recv(65536)
        half.close()
        assert hb == b"" or b" 400 " in hb.split(b"\r\n")[0], ("the half-closed UploadPart",
                                                              hb[:300])
        p1, pb, rest = read_answer(pipe, b"")
        p2, gb, _ = read_answer(pipe, rest)
        pipe.close()
        assert (p1, p2, gb) == (200, 200, b"second"), ("UploadPart, GET pipelined", p1, p2,
                                                        pb[:300], gb[:100])
        st, _, b = request(cold.port, "HEAD", "/rbkt")
        assert st == 200, ("HeadBucket after", st)
        st, _, b = request(cold.port, "GET", "/rbkt/up3", query=[("uploadId", uid)])
        got = re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)
        # (part 1 too in 1 run of about 10: its marker read did not wait --
        # the marker still on the node just after its Create? -- and its
        # body was in before the reset)
        assert st == 200 and got in ([b"3"], [b"1", b"3"]), ("the upload's parts", st, b[:400])
        print("UploadParts whose marker reads wait for a stopped pod: reset, half-closed, "
              "pipelined (200, 200): ok")

        # DELETE then PUT of one key pipelined while the pod is stopped
        early = 0
        for i in range(3):
            key = "/rbkt/ord%d" % i
            st, _, b = request(P, "PUT", key, body=b"old%d" % i)
            assert st == 200, (st, b[:300])
            s = socket.create_connection(("127.0.0.1", P), timeout=20)
            pod.sigstop()
            try:
                s.sendall(signed(P, "DELETE", key) + signed(P, "PUT", key, body=b"new%d" % i))
                time.sleep(0.2)  # both parsed; the DELETE waits for the pod
                # not asserted: in about 1 run of 3 the first round's two
                # answers came with the pod stopped (not understood; the
                # outcome checked below held in every run)
                early += bool(select.select([s], [], [], 0)[0])
            finally:
                pod.p.send_signal(signal.SIGCONT)
            a1, _, rest = read_answer(s, b"")
            a2, body, _ = read_answer(s, rest)
            s.close()
            assert (a1, a2) == (204, 200), ("DELETE, PUT", a1, a2, body[:300])
            st, _, b = request(P, "GET", key)
            assert (st, b) == (200, b"new%d" % i), ("the PUT after the DELETE", i, st, b[:100])
            st, _, b = request(cold.port, "GET", key)
            assert (st, b) == (200, b"new%d" % i), ("... in the pod", i, st, b[:100])
        print("DeleteObject then PutObject pipelined, the pod stopped: ok "
              "(%d of 3 answered before SIGCONT)" % early)

        # The cold node stopped (SIGTERM) while an UploadPart's marker read
        # waits for the stopped pod: the UploadPart, its whole body sent,
        # is 503 (retried by clients), not 400 IncompleteBody ("the
        # connection closed", as it was until review45a), and the node
        # exits cleanly (Daemon.stop below: status 0, no ASan report)
        uid = upload(cold.port, "/rbkt/up4")
        s = socket.create_connection(("127.0.0.1", cold.port), timeout=20)
        pod.sigstop()
        try:
            s.sendall(signed(cold.port, "PUT", "/rbkt/up4", body=b"stop-1",
                             query=[("partNumber", "1"), ("uploadId", uid)]))
            time.sleep(0.2)  # its marker's read in flight
            cold.p.send_signal(signal.SIGTERM)
            st, b, _ = read_answer(s, b"")
        finally:
            pod.p.send_signal(signal.SIGCONT)
        s.close()
        assert st == 503 and b"ServiceUnavailable" in b, ("an UploadPart parked at a stop", st,
                                                          b[:300])
        print("UploadPart parked when the node stops: 503: ok")
    finally:
        stop_all(cold, node, pod)
    return 0


if __name__ == "__main__":
    sys.exit(main())
