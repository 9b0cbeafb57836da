#!/usr/bin/env python3
"""test_hostile_http.py - kvtierd's HTTP listeners (--s3, --metrics) against
hostile clients over real sockets (doc/security.md, "Threats"; attack18).

Usage: test_hostile_http.py PATH-TO-KVTIERD PHASE.  Python's standard
library only (sockets, hmac, hashlib: a SigV4 signer of our own), so it
never skips.  Each phase starts its own kvtierd on 127.0.0.1 port 0 with
--tenants (S3 requests signed), --s3, --metrics and --metrics-token, sends
its cases, and asserts for each the answer S3 (or the metrics listener)
gives -- a status and an S3 <Code>, and whether the connection closes --
and that another client is served right after it (a signed GET and a
/healthz, timed).  At the end the server's connections and --max-memory
charge must be back where they started, RSS within its bound, and the
sanitizer build must have reported nothing.

Phases: s3_head (request line and headers), s3_body (chunked and
aws-chunked bodies, cuts), s3_keys (keys, query strings, ranges,
multipart), s3_sigv4 (Authorization, scopes, presigned URLs), s3_slow
(slow heads, many connections before authentication), s3_flood (unread
pipelines of one tenant beside another), s3_upload_share (one tenant's
uploads held open on many connections beside another), s3_pins (unread
GETs pinning DRAM), s3_signers (two tenants on one connection),
resp_pins (the same over RESP), resp_share (the
same with RESP SETs: the listener shares the budget), metrics (the
metrics listener), tenant_conns (one tenant's connections past
--tenant-conns, over RESP and S3), tenant_table (tenants files churned
past the tenants table's size: a later tenant still held to its
limits), tenant_table_full (a full tenants table refuses logins), s3_grant_ssd (a grantee's GETs of
objects on SSD only), s3_copy_loop (pipelined CopyObjects beside another
tenant), s3_delete_loop (pipelined DeleteObjects beside another tenant),
s3_grant_list (a grantee's listings of objects on SSD only), s3_head_ssd
(HEADs and listings of objects on SSD only read their headers alone),
s3_head_shared (the owner's HEAD of an object only the shared tier holds),
s3_list_mem (many tenants' listings of objects on SSD only at once),
s3_head_scan (heads sent a byte at a time before authentication),
s3_tiny_chunks (signed aws-chunked bodies of 1-byte chunks beside another
tenant), tls_records (S3 and RESP requests in one-byte TLS records),
resp_share_answer (RESP commands refused by their tenant's share say so),
tls_handshakes (canned ClientHellos from one address, throttled),
tls_max_conns (a TLS connection refused past --max-conns: told, throttled),
tls_unauth_refused (the same past the unauthenticated limits),
tls_tenant_records (one tenant's many connections of one-byte TLS records),
tenants_past_32 (one tenant's pipelines seen after 38 others in each loop
iteration), tls_partial_hello (partial ClientHellos held open: RSS, the
handshake deadline), idle_rbuf (idle connections after a large RESP command, and partial ones),
idle_conns (RSS per idle connection after a SET and a GET of 200 KB),
resp_lengths (RESP length fields at their edges), resp_empty (RESP arrays
of no arguments and blank lines skipped, as Redis does), resp_echo_big
(a large ECHO answered from the command's bytes: peak RSS),
tls_held_record (authenticated TLS connections each holding part of a record),
tls_ssl_object (stalled handshakes and one tenant's TLS connections: their
SSLs charged), tls_post_handshake (KeyUpdates, empty records, alerts after
the handshake: tests/integration/tls_flood.c), tls12_renegotiation (TLS 1.2
renegotiating ClientHellos after the handshake: a flood, headers held),
tls_big_messages (handshake
messages declaring more than a record: a ClientHello, a client certificate
list), tls_groups (ClientHellos naming finite-field groups: the loop's CPU),
tls_sessions (TLS 1.2 sessions cached by the server), s3_answer_held (answers
waiting behind a request in flight: charged), s3_pins_waiting (GETs waiting
behind a request in flight: their pins capped), unauth_evict_stalled (an
evicted unauthenticated connection that does not read: closed), s3_vhost
(virtual-hosted-style addressing with --s3-domain: every operation both
ways, the Host header as attacker input), s3_pins_balance (GETs' pins
given back once on every path: reset connections, requests in the
store, answers half written), resp_echo_balance (ECHOs answered from the
command's bytes, reset while waiting or half written: charged once,
given back), s3_pins_signers (two tenants' GETs pipelined on one
connection behind a slow request: each GET's pins in its signer's cap),
s3_pins_flow (a connection whose queued answers pin past their signer's
cap: not read, whoever signed last),
s3_copy_key (x-amz-copy-source keys with '?' and NUL: the object named),
s3_write_conds (conditions on writes kvtierd does not evaluate: refused),
s3_pins_range (unread one-byte Range GETs: their whole objects in the pin caps),
s3_abort_parts (AbortMultipartUpload deletes the upload's parts),
s3_abort_pipe (an UploadPart pipelined behind an Abort of its upload runs after it),
s3_abort_retry (an Abort whose part read failed keeps the marker: 503, then retried),
s3_abort_race (an Abort beside an UploadPart on another connection leaves no part),
s3_throttle_kept (an address's auth throttle spares its proven connections),
s3_delete_errors (deletes that failed are not answered deleted),
s3_complete_pins (CompleteMultipartUploads' pinned parts in the pin caps),
s3_pins_cond (a conditional GET at the pin cap: its 304 or 412, not 503),
s3_park_overwrite (an overwrite over the input share, parked, reads its body),
resp_args_share (RESP commands of many arguments started: their scratch in
the tenant's share; a cut command's share given back at the close),
s3_order (requests pipelined behind one that changes the store run after it),
s3_op_params (a write carrying a sub-resource not its own: refused, nothing changed),
tenant_sum (one tenant over TLS logins, unread answers, half-sent commands and
stalled handshakes from its address: all it holds at most half the budget),
tls_peer_rows (one address's stalled handshakes at its sixteenth: an address
sharing one of its two slots still handshakes, one sharing both is refused).
"""
import base64
import datetime
import hashlib
import hmac
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ALICE = ("alice", "secret-of-alice-0123")
BOB = ("bob", "secret-of-bob-01234567")
TOKEN = "metrics-token-0123456789abcdef"
# another client's round trip between cases, at most (ASan build, a
# loaded 2-core machine: generous; the old failures were seconds or hangs)
PROBE_MAX_S = 1.0
# s3_list_sort: a listing of 1,000 objects' time with max-keys 1000 over its
# time with max-keys 1 (ASan: 24-30 before, 2.9-4.8 after: the answer's XML;
# release 6.2 before, 2.4 after -- the bound tells them apart when sanitized)
LIST_SORT_RATIO = 8.0
# The attacks come from 127.0.0.1 (or from 127.0.1.N, one address a case,
# where a case's failed signature must not throttle the next: the
# per-address limits are not what those cases are about); the probing
# client and the test's own /metrics reads from these.
PROBER, OBSERVER = "127.0.0.2", "127.0.0.3"
_spares = [0]


def spare_addr():
    """A fresh source address for the Server's own reads, which have no
    phase (127.0.200.1, ...: outside Phase.addr's)."""
    _spares[0] += 1
    return "127.0.%d.%d" % (200 + _spares[0] // 250, 1 + _spares[0] % 250)


def from_fixed(what, src, attempt, fresh):
    """A fixed address's request (PROBER's: another client; OBSERVER's: the
    test's own /metrics reads) after a case's flooding or throttled
    address: attempt(src) -> (result, refused), refused saying the server
    refused it as it refuses that address.  Per-address limits count peers
    in 4096 slots hashed with a random key (daemon/base.c kvtd_peer_slot):
    1 run in 4096 the fixed address shares the flooding address's slot and
    is refused early, as documented -- a test failing by chance.  Then
    once more from fresh() (printed): a server refusing everyone fails
    again.  (src, result) of the attempt that counts."""
    r, refused = attempt(src)
    if refused:
        again = fresh()
        print("%s: %s refused per address (a shared slot); again from %s" % (what, src, again))
        src = again
        r, _ = attempt(src)
    return src, r


class Server:
    def __init__(self, kvtierd, base, extra=(), tenant_lines=None, quarantine_mb=32, env=None):
        """tenant_lines: the tenants file (alice and bob, no grants, by
        default); quarantine_mb: ASan's quarantine (below); env: more of
        the server's environment."""
        self.dir = os.path.join(base, "srv")
        self.log = self.dir + ".log"
        os.makedirs(self.dir, exist_ok=True)
        tenants = os.path.join(base, "tenants")
        with open(tenants, "w") as f:
            f.write(tenant_lines or "alice %s tenant\nbob %s tenant\n" % (ALICE[1], BOB[1]))
        os.chmod(tenants, 0o600)
        tok = os.path.join(base, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(tok, 0o600)
        # ASan keeps freed blocks in quarantine (256 MiB by default): a
        # phase of 70,000 requests would show that as RSS.  32 MiB keeps
        # RSS a measure of what the server holds; a phase whose RSS figure
        # is a few MiB asks for none (0).
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = ":".join(filter(None, [
            self.env.get("ASAN_OPTIONS"), "quarantine_size_mb=%d" % quarantine_mb]))
        self.env.update(env or {})
        self.argv = [kvtierd, "--dir", self.dir, "--dram", "64M", "--ssd", "0",
                     "--set", "dram.prefault=off", "--listen", "127.0.0.1:0", "--s3",
                     "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--metrics-token", tok,
                     "--tenants", tenants, "--threads", "1", "--max-memory", "32M", "--log",
                     self.log] + list(extra)
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                  stderr=open(self.log + ".stderr", "w"), env=self.env)
        self.port = self.mport = None
        for _ in range(1200):
            if os.path.exists(self.log):
                text = open(self.log).read()
                m = re.search(r"S3 listener on 127\.0\.0\.1:(\d+)", text)
                n = re.search(r"metrics listener on 127\.0\.0\.1:(\d+)", text)
                if m and n:
                    self.port, self.mport = int(m.group(1)), int(n.group(1))
                    break
            if self.p.poll() is not None:
                raise SystemExit("kvtierd exited: see " + self.log)
            time.sleep(0.05)
        else:
            raise SystemExit("kvtierd did not start")

    def restart(self, between=None):
        """Stop (checked as stop() does), call between(), start again on
        the same directory: DRAM empty, what was written down on SSD."""
        self.stop()
        os.replace(self.log, self.log + ".1")  # the new ports are read from it
        if between:
            between()
        self.start()

    def sanitizer(self):
        """"asan" or "tsan" when the server is built with that sanitizer
        (its runtime's init symbol in the executable), else None: the
        phases whose bounds are a release build's say so with it."""
        if not hasattr(self, "_sanitizer"):
            with open(self.argv[0], "rb") as f:
                exe = f.read()
            self._sanitizer = ("asan" if b"__asan_init" in exe else
                               "tsan" if b"__tsan_init" in exe else None)
        return self._sanitizer

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.p.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def written_down(self):
        """Wait (at most 30 s) until nothing waits to be written to the SSD."""
        end = time.monotonic() + 30
        while self.metric("kvtier_ssd_writedown_pending_bytes") > 0 and time.monotonic() < end:
            time.sleep(0.05)

    def slow_writer(self, ms, trigger):
        """Restarted, once what it holds is written down, with its SSD
        writer slowed to ms a write (ssd.debug_write_delay_ms), then
        alice's PUT of path trigger in the writer's way, so that a write
        after it waits about ms: kvtier_pins_active before that PUT."""
        self.written_down()
        self.argv += ["--set", "ssd.debug_write_delay_ms=%d" % ms]
        self.restart()
        self.written_down()
        pins0 = self.metric("kvtier_pins_active")
        self.hold_writer(ms, trigger)
        return pins0

    def hold_writer(self, ms, trigger):
        """alice's PUT of path trigger, its write-down holding the writer
        (restarted with ssd.debug_write_delay_ms=ms) when this returns."""
        P = self.port
        # The trigger's write-down must still hold the writer when this
        # returns: if it went down already (its answer came late, or it
        # was not written down at its put), a delete after it would not
        # wait -- put another (CI's run of 2026-12-06 saw DELETEs answered
        # 0.5 s into a 1 s write).  In flight, it counts in
        # kvtier_ssd_writedown_pending_bytes.
        for i in range(5):
            t0 = time.monotonic()
            st, _, body = http(P, signed_msg(P, "PUT", trigger + ("" if i == 0 else "-%d" % i),
                                             body=b"t" * 1024), src=PROBER)
            assert st == 200, (st, body)
            took = time.monotonic() - t0
            if self.metric("kvtier_ssd_writedown_pending_bytes") > 0 and took < ms / 4000:
                # queued is not yet taken: a delete's tombstone goes ahead
                # of a queued write-down (doc/ssd.md "Deletes jump the
                # queue"), so give the writer a moment to take it
                time.sleep(min(0.1, ms / 20000))
                return
            self.written_down()
        raise AssertionError("no trigger write held the writer (last put took %.2f s)" % took)

    def put_written(self, path, body, extra=None):
        """alice's signed PUT from PROBER, again after each write-down
        while it is 503 (her quota full of blocks being written down to
        the SSD); asserts 200 and returns the answer's headers."""
        for _ in range(100):
            st, hd, ans = http(self.port, signed_msg(self.port, "PUT", path, body=body,
                                                     extra=extra), src=PROBER, timeout=20)
            if st != 503:
                break
            self.written_down()
        assert st == 200, (path, st, ans[:200])
        return hd

    def metrics(self):
        """The /metrics page, read from OBSERVER (from_fixed: the token's
        throttle refuses a read from a throttled address's slot)."""
        def attempt(src):
            st, _, body = http(self.mport, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                               b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n",
                               src=src)
            return (st, body), st == 503 and b"from this address" in body
        st, body = from_fixed("a /metrics read", OBSERVER, attempt, spare_addr)[1]
        assert st == 200, (st, body[:200])
        return body

    def metric(self, name):
        """One unlabelled series of /metrics."""
        body = self.metrics()
        m = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.M)
        assert m, name
        return float(m.group(1))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        assert self.p.wait(120) == 0, "kvtierd exit status"
        err = open(self.log + ".stderr").read()
        assert "Sanitizer" not in err and "runtime error" not in err, err


# ---------------------------------------------------------------------------
# HTTP and SigV4, by hand

_pending = {}  # socket -> bytes read past the answer taken (pipelining)


def read_until(s, sep, timeout):
    """The bytes s has sent (those kept from the last call first) up to
    and past sep, and whether sep came before the connection closed (or
    stayed silent for timeout s)."""
    s.settimeout(timeout)
    out = _pending.pop(s, b"")
    try:
        while sep not in out:
            b = s.recv(65536)
            if not b:
                return out, False
            out += b
    except (socket.timeout, ConnectionResetError):
        return out, False
    return out, True


def read_answer(s, timeout=5.0, no_body=False):
    """One HTTP answer from s: (status, head, body); status 0 if the
    connection closed (or stayed silent) before a whole head came.
    no_body: the answer to a HEAD (its Content-Length has no bytes).
    Bytes past the answer are kept for the next call on s."""
    out, whole = read_until(s, b"\r\n\r\n", timeout)
    if not whole:
        return 0, out.decode("latin-1"), b""
    head, _, body = out.partition(b"\r\n\r\n")
    m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
    need = int(m.group(1)) if m else 0
    if no_body or head.startswith(b"HTTP/1.1 100") or b" 304 " in head.split(b"\r\n")[0]:
        need = 0
    try:
        while len(body) < need:
            b = s.recv(65536)
            if not b:
                break
            body += b
    except (socket.timeout, ConnectionResetError):
        pass
    if len(body) > need:
        _pending[s] = body[need:]
        body = body[:need]
    return int(head.split(b" ")[1]), head.decode("latin-1"), body


def pipelined(s, msgs, timeout=60):
    """Sends msgs on s from a thread while reading their answers in
    order (a writer that waits for nothing); their statuses.  s is
    closed after."""
    feeder = threading.Thread(target=s.sendall, args=(b"".join(msgs),))
    feeder.start()
    sts = [read_answer(s, timeout)[0] for _ in msgs]
    feeder.join()
    s.close()
    return sts


def closed_after(s, timeout=3.0):
    """Does the server close s (EOF or reset) within timeout, sending
    nothing more?"""
    s.settimeout(timeout)
    try:
        b = s.recv(65536)
        return b == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def send(port, data, timeout=5.0, src=None):
    """A fresh connection (from src) that sent data (as much as the server
    took before closing), and the answer: (socket, status, head, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(src, 0) if src else None)
    try:
        s.sendall(data)
    except OSError:
        pass
    return (s,) + read_answer(s, timeout, no_body=data.startswith(b"HEAD "))


def http(port, data, timeout=5.0, src=None):
    s, st, hd, body = send(port, data, timeout, src)
    s.close()
    return st, hd, body


def s3_upload(req, key):
    """CreateMultipartUpload of key with a phase's req (Phase.kit): the
    upload id, 32 hex digits."""
    st, _, b = req("POST", key, query="uploads")
    assert st == 200, (st, b)
    return re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", b).group(1).decode()


def code_of(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else None


def _hmac(k, m):
    return hmac.new(k, m.encode(), hashlib.sha256).digest()


def signing_key(secret, date, region="us-east-1", service="s3"):
    k = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        k = _hmac(k, part)
    return k


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def sign(method, path, query, headers, payload_hash, who=ALICE, when=None, region="us-east-1",
         service="s3", signed=None, amz=None):
    """headers: dict lowercase name -> value; sets x-amz-date and
    x-amz-content-sha256 and returns the Authorization value.  path and
    query are raw (as on the wire).  signed: the SignedHeaders names
    (default: every header given)."""
    when = when or now_utc()
    amz = amz or when.strftime("%Y%m%dT%H%M%SZ")
    date = when.strftime("%Y%m%d")
    headers["x-amz-date"] = amz
    if payload_hash is not None:
        headers["x-amz-content-sha256"] = payload_hash
    names = signed if signed is not None else sorted(headers)

    def enc(s, safe):
        return urllib.parse.quote(urllib.parse.unquote_to_bytes(s), safe=safe)
    pairs = []
    for p in query.split("&") if query else []:
        n, _, v = p.partition("=")
        pairs.append((enc(n, "-_.~"), enc(v, "-_.~")))
    canon_q = "&".join("%s=%s" % nv for nv in sorted(pairs))
    creq = "\n".join([method, enc(path, "/-_.~"), canon_q,
                      "".join("%s:%s\n" % (n, " ".join(headers.get(n, "").split()))
                              for n in names),
                      ";".join(names), payload_hash or "UNSIGNED-PAYLOAD"])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    sts = "AWS4-HMAC-SHA256\n%s\n%s\n%s" % (amz, scope, hashlib.sha256(creq.encode()).hexdigest())
    key = signing_key(who[1], date, region, service)
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    return "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        who[0], scope, ";".join(names), sig)


def signed_msg(port, method, path, query="", body=b"", extra=None, who=ALICE, payload=None,
               wire_body=None, length=True, **kw):
    """A signed request's bytes.  extra: more headers (signed)."""
    h = {"host": "127.0.0.1:%d" % port}
    if extra:
        h.update(extra)
    wb = wire_body if wire_body is not None else body
    if length and (wb or method in ("PUT", "POST")):
        h.setdefault("content-length", str(len(wb)))
    ph = payload or hashlib.sha256(body).hexdigest()
    h["authorization"] = sign(method, path, query, h, ph, who, **kw)
    target = path + ("?" + query if query else "")
    return ("%s %s HTTP/1.1\r\n" % (method, target) +
            "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n").encode("latin-1") + wb


# ---------------------------------------------------------------------------
# Cases

class Phase:
    def __init__(self, srv):
        self.srv = srv
        self.cases = 0
        self.worst_probe = 0.0
        self.naddr = 0
        self.failed = 0

    def kit(self):
        """What the S3 phases use: the port, a signed GET of the known
        object (to send after a case on a kept connection), a signer of
        requests, and a signed request sent from the probing address."""
        P = self.srv.port

        def sm(*a, **k):
            return signed_msg(P, *a, **k)

        def req(*a, **k):
            return http(P, signed_msg(P, *a, **k), src=PROBER)
        return P, sm("GET", "/hbkt/known"), sm, req

    def probe(self, what):
        """Another client is served: a signed GET of a known object and
        /healthz, each on a fresh connection, timed."""
        t0 = time.monotonic()

        def attempt(src):
            st, _, body = http(self.srv.port, signed_msg(self.srv.port, "GET", "/hbkt/known"),
                               src=src)
            return (st, body), st == 503 and b"from this address" in body
        src, (st, body) = from_fixed("probe after " + what, PROBER, attempt, self.addr)
        assert st == 200 and body == b"known bytes", ("probe after", what, st, body[:200])
        st, _, body = http(self.srv.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src=src)
        assert st == 200 and body == b"ok\n", ("healthz after", what, st, body)
        dt = time.monotonic() - t0
        self.worst_probe = max(self.worst_probe, dt)
        assert dt <= PROBE_MAX_S, ("probe after", what, "took %.3f s" % dt)

    def addr(self):
        """A fresh source address (127.0.1.1, 127.0.1.2, ...)."""
        self.naddr += 1
        return "127.0.%d.%d" % (1 + self.naddr // 250, 1 + self.naddr % 250)

    def expect(self, cond, *why):
        """assert cond; with KVT_KEEP_GOING=1 in the environment a failure
        is printed and counted instead, and the phase goes on (to list
        every case an old server fails)."""
        if cond:
            return
        if not os.environ.get("KVT_KEEP_GOING"):
            raise AssertionError(why)
        print("FAILED:", why)
        self.failed += 1

    def case(self, *a, **kw):
        try:
            return self.case_(*a, **kw)
        except AssertionError as e:
            self.expect(False, *e.args)
            return 0, "", b""

    def case_(self, what, data, status, code=None, close=True, port=None, timeout=5.0,
              then=None, src=None):
        """Send data on a fresh connection: the answer must be status (0: the
        connection closes with no answer) with <Code> code, then the
        connection closed (close=True) or still open (False: then is sent
        and must be answered 200)."""
        s, st, hd, body = send(port or self.srv.port, data, timeout, src)
        got_code = code_of(body)
        assert st == status, (what, "status", st, hd[:300], body[:300])
        if code is not None:
            assert got_code == code, (what, "code", got_code, body[:300])
        if not status:
            assert closed_after(s, 0.1) or hd == "", (what, "open after no answer")
        elif close:
            assert "connection: close" in hd.lower(), (what, "no Connection: close", hd)
            assert closed_after(s), (what, "not closed after its answer")
        else:
            assert "connection: close" not in hd.lower(), (what, "closed", hd)
            if then is not None:
                s.sendall(then)
                st2, hd2, b2 = read_answer(s, timeout)
                assert st2 == 200, (what, "next request on the connection", st2, hd2, b2[:200])
        s.close()
        self.cases += 1
        self.probe(what)
        return st, hd, body


def setup_bucket(srv, again=False):
    """alice's bucket hbkt and the probe's object in it.  again: after
    the phase evicted or restarted, the bucket is kept (CreateBucket 409,
    since 2026-12-06 -- before, its marker block could go), the object
    put again."""
    p = srv.port
    st, _, b = http(p, signed_msg(p, "PUT", "/hbkt"))
    assert st == (409 if again else 200), (st, b)
    st, _, b = http(p, signed_msg(p, "PUT", "/hbkt/known", body=b"known bytes"))
    assert st == 200, (st, b)


PHASES = {}


def phase(fn):
    PHASES[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------------
# S3: the request line and the headers

@phase
def s3_head(ph):
    P, ok, sm, req = ph.kit()
    # methods: an unknown or lower-case one is NotImplemented, the
    # connection kept (its head was signed and read whole)
    ph.case("lower-case get", sm("get", "/hbkt/known"), 501, "NotImplemented", close=False,
            then=ok)
    ph.case("method FOO", sm("FOO", "/hbkt/known"), 501, "NotImplemented", close=False, then=ok)
    # the request line
    ph.case("empty target", b"GET  HTTP/1.1\r\n\r\n", 400, "BadRequest")
    ph.case("8 KiB path", sm("GET", "/hbkt/" + "a" * 8192), 400, "KeyTooLongError")
    ph.case("64 KiB path", sm("GET", "/hbkt/" + "a" * 65536), 431)
    ph.case("absolute-form target", sm("GET", "http://127.0.0.1/hbkt/known"), 400, "InvalidURI")
    ph.case("asterisk-form", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "InvalidURI")
    ph.case("HTTP/0.9", b"GET /hbkt/known\r\n\r\n", 400, "BadRequest")
    # two Host headers: 400 (RFC 9112 3.2), with or without --s3-domain
    ph.case("two Host headers", ok.replace(b"\r\n\r\n", b"\r\nHost: other\r\n\r\n", 1), 400,
            "InvalidArgument")
    ph.case("HTTP/1.0 signed: answered, then closed",
            ok.replace(b"HTTP/1.1\r\n", b"HTTP/1.0\r\n", 1), 200)
    # a request pipelined after one that closes the connection was run,
    # its answer never sent (RFC 9112 9.6: not to be processed) (attack18)
    for what, first in (("Connection: close", signed_msg(P, "GET", "/hbkt/known",
                                                         extra={"connection": "close"})),
                        ("HTTP/1.0", ok.replace(b"HTTP/1.1\r\n", b"HTTP/1.0\r\n", 1))):
        after = signed_msg(P, "PUT", "/hbkt/after", body=b"pipelined after a close")
        ph.case("a PUT pipelined after " + what, first + after, 200)
        st = http(P, signed_msg(P, "GET", "/hbkt/after"), src=PROBER)[0]
        ph.expect(st == 404, "a PUT pipelined after %s was run" % what, st)
    ph.case("HTTP/1.2", ok.replace(b"HTTP/1.1\r\n", b"HTTP/1.2\r\n", 1), 200, close=False,
            then=ok)
    ph.case("HTTP/2.0", ok.replace(b"HTTP/1.1\r\n", b"HTTP/2.0\r\n", 1), 400, "BadRequest")
    ph.case("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "BadRequest")
    # a Host in HTTP/1.1 (RFC 9112 3.2: 400), none needed in HTTP/1.0, an
    # empty one allowed (hostfix: one without was served)
    nohost = re.sub(rb"(?i)\r\nhost: [^\r]*", b"", sm(
        "GET", "/hbkt/known", signed=["x-amz-content-sha256", "x-amz-date"]), count=1)
    ph.case("HTTP/1.1 without Host", nohost, 400, "InvalidArgument")
    ph.case("HTTP/1.1 without Host (anonymous)", b"GET /hbkt/known HTTP/1.1\r\n\r\n", 400,
            "InvalidArgument")
    ph.case("HTTP/1.0 without Host", nohost.replace(b"HTTP/1.1\r\n", b"HTTP/1.0\r\n", 1), 200)
    ph.case("an empty Host", sm("GET", "/hbkt/known", extra={"host": ""}), 200, close=False,
            then=ok)
    # header counts and sizes: 64 at most, 16 KiB at most
    ph.case("Host alone (anonymous)", b"GET /hbkt/known HTTP/1.1\r\nHost: x\r\n\r\n", 403,
            "AccessDenied")
    ph.case("64 headers", sm("GET", "/hbkt/known", extra={"x-h%d" % i: "v" for i in range(60)}),
            200, close=False, then=ok)
    ph.case("65 headers", sm("GET", "/hbkt/known", extra={"x-h%d" % i: "v" for i in range(61)}),
            400, "BadRequest")
    for n, st in ((1000, 400), (10000, 431)):  # 6 KB of them, 60 KB
        ph.case("%d headers" % n, b"GET /hbkt/known HTTP/1.1\r\n" + b"a: b\r\n" * n + b"\r\n",
                st, "BadRequest")
    ph.case("one header of 15,000 bytes", sm("GET", "/hbkt/known", extra={"x-big": "a" * 15000}),
            200, close=False, then=ok)
    ph.case("one header of 64 KiB", sm("GET", "/hbkt/known", extra={"x-big": "a" * 65536}), 431)
    for what, line in (("a space in a name", b"X Y: 1"), ("a NUL in a name", b"X\0Y: 1"),
                       ("a NUL in a value", b"XY: 1\0"), ("a blank before the colon", b"XY : 1"),
                       ("obs-fold", b"XY: 1\r\n 2"), ("a name alone", b"XY"),
                       ("an empty name", b": 1")):
        ph.case(what, ok.replace(b"\r\n", b"\r\n" + line + b"\r\n", 1), 400, "BadRequest")
    # a bare LF ends no line: refused as soon as it is seen, not held until
    # the head timeout (attack18)
    ph.case("bare LF line ends", b"GET /hbkt/known HTTP/1.1\nHost: x\n\n", 400, "BadRequest",
            timeout=1.5)
    # Content-Length and Transfer-Encoding (request smuggling's tools)
    basic = ["host", "x-amz-content-sha256", "x-amz-date"]  # content-length left unsigned
    put = sm("PUT", "/hbkt/cl", body=b"abc", signed=basic)
    ph.case("Content-Length twice, equal",
            put.replace(b"content-length: 3\r\n", b"content-length: 3\r\nContent-Length: 3\r\n"),
            200, close=False, then=ok)
    ph.case("Content-Length twice, different",
            put.replace(b"content-length: 3\r\n", b"content-length: 3\r\nContent-Length: 4\r\n"),
            400, "BadRequest")
    for v, st in (("+3", 400), ("003", 200), ("-1", 400), ("3, 3", 400), ("0x3", 400),
                  ("18446744073709551616", 400), ("9223372036854775808", 400), ("", 400)):
        m = put.replace(b"content-length: 3\r\n", b"content-length: %s\r\n" % v.encode())
        if st == 200:
            ph.case("Content-Length " + v, m, 200, close=False, then=ok)
        else:
            ph.case("Content-Length %r" % v, m, 400, "BadRequest")
    ph.case("Content-Length and Transfer-Encoding",
            sm("PUT", "/hbkt/cl", body=b"abc", extra={"transfer-encoding": "chunked",
                                                     "x-amz-decoded-content-length": "3"}),
            400, "BadRequest")
    ph.case("Transfer-Encoding gzip, chunked",
            sm("PUT", "/hbkt/cl", length=False, extra={"transfer-encoding": "gzip, chunked"}),
            501, "NotImplemented")
    ph.case("Transfer-Encoding twice",
            sm("PUT", "/hbkt/cl", length=False, extra={"transfer-encoding": "chunked"}).replace(
                b"transfer-encoding: chunked\r\n",
                b"transfer-encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), 400, "BadRequest")
    ph.case("a PUT past the largest value", sm("PUT", "/hbkt/big", payload="UNSIGNED-PAYLOAD",
                                               extra={"content-length": "1000000000"}),
            400, "EntityTooLarge")
    ph.case("a GET with a 2 MiB body", sm("GET", "/hbkt/known", payload="UNSIGNED-PAYLOAD",
                                          extra={"content-length": str(2 << 20)}),
            400, "MaxMessageLengthExceeded")
    ph.case("a GET with a 1 KiB body", sm("GET", "/hbkt/known", body=b"x" * 1024), 200,
            close=False, then=ok)


# ---------------------------------------------------------------------------
# S3: chunked and aws-chunked bodies

def stream_put(port, path, chunks, dlen=None, sig=None, size=None):
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD PutObject, each chunk signed
    (sig(i, good) may spoil a signature, size(i, n) a chunk-size field);
    Content-Length is left out of the signed headers, so that it can be
    counted after the chunks are signed."""
    body = b"".join(chunks)
    h = {"host": "127.0.0.1:%d" % port, "content-encoding": "aws-chunked",
         "x-amz-decoded-content-length": str(len(body) if dlen is None else dlen)}
    when = now_utc()
    amz = when.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/us-east-1/s3/aws4_request" % amz[:8]
    auth = sign("PUT", path, "", h, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", ALICE, when)
    prev = auth.rsplit("Signature=", 1)[1]
    key = signing_key(ALICE[1], amz[:8])
    parts = []  # joined once: 65,537 chunks of s3_tiny_chunks
    for i, c in enumerate(list(chunks) + [b""]):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev,
                         hashlib.sha256(b"").hexdigest(), hashlib.sha256(c).hexdigest()])
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        sz = size(i, len(c)) if size else "%x" % len(c)
        parts.append(("%s;chunk-signature=%s\r\n" % (sz, sig(i, prev) if sig else prev)).encode())
        parts.append(c + b"\r\n")
    wire = b"".join(parts)
    h["content-length"] = str(len(wire))
    h["authorization"] = auth
    return ("PUT %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in h.items())
            + "\r\n").encode() + wire


@phase
def s3_body(ph):
    P, ok, sm, req = ph.kit()

    def te(path, wire, dlen, extra=None):
        h = {"transfer-encoding": "chunked", "x-amz-decoded-content-length": str(dlen)}
        h.update(extra or {})
        return signed_msg(P, "PUT", path, wire_body=wire, length=False, extra=h,
                          payload="UNSIGNED-PAYLOAD")

    def get(path):
        return http(P, signed_msg(P, "GET", path), src=PROBER)
    ph.case("chunked", te("/hbkt/te", b"3\r\nabc\r\n0\r\n\r\n", 3), 200, close=False, then=ok)
    assert get("/hbkt/te")[2] == b"abc"
    ph.case("chunked, no data", te("/hbkt/te0", b"0\r\n\r\n", 0), 200, close=False, then=ok)
    ph.case("chunk extensions", te("/hbkt/tex", b"3;a=b;c\r\nabc\r\n0;z\r\n\r\n", 3), 200,
            close=False, then=ok)
    bad = [("size ffffffffffffffff", b"ffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
           ("size -3", b"-3\r\nabc\r\n0\r\n\r\n"),
           ("size 0x3", b"0x3\r\nabc\r\n0\r\n\r\n"),
           ("no size", b"\r\nabc\r\n0\r\n\r\n"),
           ("data without its CRLF", b"3\r\nabcX0\r\n\r\n"),
           ("size line ending in a bare LF", b"3\nabc\r\n0\r\n\r\n"),
           ("9 trailers", b"3\r\nabc\r\n0\r\n" + b"x-t: 1\r\n" * 9 + b"\r\n"),
           ("a 5000-byte trailer", b"3\r\nabc\r\n0\r\nx-t: " + b"a" * 5000 + b"\r\n\r\n"),
           ("a trailer without a colon", b"3\r\nabc\r\n0\r\nx-t\r\n\r\n"),
           ("a chunk past the declared length", b"5\r\nabcde\r\n0\r\n\r\n"),
           # a chunk of 2^40 - 1 bytes for 3 declared: refused at its size
           # line, not read (and dropped) until the body's clock closes
           # the connection with no answer (attack18)
           ("a 1 TB chunk for 3 bytes", b"ffffffffff\r\n" + b"a" * 100000)]
    for what, wire in bad:
        ph.case("chunked: " + what, te("/hbkt/tebad", wire, 3), 400, "IncompleteBody",
                timeout=2.0)
    assert get("/hbkt/tebad")[0] == 404
    ph.case("chunked: shorter than declared", te("/hbkt/tebad", b"2\r\nab\r\n0\r\n\r\n", 3), 400,
            "IncompleteBody", close=False, then=ok)
    ph.case("chunked: no decoded length",
            signed_msg(P, "PUT", "/hbkt/tebad", wire_body=b"3\r\nabc\r\n0\r\n\r\n", length=False,
                       extra={"transfer-encoding": "chunked"}, payload="UNSIGNED-PAYLOAD"),
            411, "MissingContentLength")
    for v in ("abc", str(2 ** 64), "0" * 16 + "3", "-3"):
        ph.case("chunked: decoded length " + v, te("/hbkt/tebad", b"3\r\nabc\r\n0\r\n\r\n", v),
                400, "InvalidArgument")
    assert get("/hbkt/tebad")[0] == 404
    # checksums: one too long to be one was left unchecked, the object
    # stored (attack18); an empty one is BadDigest too
    for h in ("x-amz-checksum-crc32c", "x-amz-checksum-crc32", "x-amz-checksum-sha256",
              "content-md5"):
        for v in ("A" * 100, "A" * 4000, ""):
            ph.case("%s of %d bytes" % (h, len(v)), signed_msg(P, "PUT", "/hbkt/ckbad", body=b"abc",
                                                               extra={h: v}),
                    400, "BadDigest", close=False, then=ok)
    ph.expect(get("/hbkt/ckbad")[0] == 404, "a PUT with a bad checksum stored")
    # aws-chunked, every chunk signed
    ph.case("aws-chunked signed", stream_put(P, "/hbkt/st", [b"a" * 8192, b"b" * 50]), 200,
            close=False, then=ok)
    assert get("/hbkt/st")[2] == b"a" * 8192 + b"b" * 50
    # every signed chunk but the last is at least 8 KiB, as S3 has it
    # (s3_tiny_chunks: each costs an HMAC on the loop)
    for what, chunks in (("100 then 50", [b"a" * 100, b"b" * 50]),
                         ("8191 then 1", [b"a" * 8191, b"b"]),
                         ("8192, 100, 8192", [b"a" * 8192, b"b" * 100, b"c" * 8192])):
        ph.case("aws-chunked signed, chunks of " + what, stream_put(P, "/hbkt/stsmall", chunks),
                403, "InvalidChunkSizeError")
    assert get("/hbkt/stsmall")[0] == 404
    for what, kw, st, code, close in (
            ("a 63-hex signature", dict(sig=lambda i, g: g[:63]), 400, "IncompleteBody", True),
            ("a 65-hex signature", dict(sig=lambda i, g: g + "0"), 400, "IncompleteBody", True),
            ("the last chunk's signature wrong", dict(sig=lambda i, g: g if i == 0 else "0" * 64),
             403, "SignatureDoesNotMatch", False),
            ("a size of ffffffffffffffff",
             dict(size=lambda i, n: "ffffffffffffffff" if i == 0 else "%x" % n), 400,
             "IncompleteBody", True),
            ("declared longer than the chunks", dict(dlen=200), 400, "IncompleteBody", False),
            # refused at the chunk's size line (was: its data cut to the
            # declared length, then a chunk signature that could not match)
            ("declared shorter than the chunks", dict(dlen=50), 400, "IncompleteBody", True)):
        ph.case("aws-chunked: " + what, stream_put(P, "/hbkt/stbad", [b"a" * 100], **kw), st,
                code, close=close, then=ok)
    m = stream_put(P, "/hbkt/stbad", [b"a" * 100]).replace(b";chunk-signature=",
                                                          b";chunk-signaturX=", 1)
    ph.case("aws-chunked: no chunk-signature", m, 400, "IncompleteBody")
    assert get("/hbkt/stbad")[0] == 404

    def trailer(path, enc, dlen, extra=None):
        h = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(dlen)}
        h.update(extra or {})
        return signed_msg(P, "PUT", path, wire_body=enc, extra=h,
                          payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    ph.case("aws-chunked unsigned", trailer("/hbkt/tr", b"3\r\nabc\r\n0\r\n\r\n", 3), 200,
            close=False, then=ok)
    ph.case("aws-chunked: 9 trailers",
            trailer("/hbkt/trbad", b"3\r\nabc\r\n0\r\n" + b"x-amz-checksum-crc32c: AAAAAA==\r\n"
                    * 9 + b"\r\n", 3), 400, "IncompleteBody")
    ph.case("aws-chunked: a wrong trailing CRC32C",
            trailer("/hbkt/trbad", b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32c:AAAAAA==\r\n\r\n", 3,
                    {"x-amz-trailer": "x-amz-checksum-crc32c"}), 400, "BadDigest", close=False,
            then=ok)
    ph.case("aws-chunked: the named trailer missing",
            trailer("/hbkt/trbad", b"3\r\nabc\r\n0\r\n\r\n", 3,
                    {"x-amz-trailer": "x-amz-checksum-crc32c"}), 400, "BadDigest", close=False,
            then=ok)
    ph.case("aws-chunked: a trailing CRC32C of 200 bytes",
            trailer("/hbkt/trbad", b"3\r\nabc\r\n0\r\nx-amz-checksum-crc32c:" + b"A" * 200 +
                    b"\r\n\r\n", 3), 400, "BadDigest", close=False, then=ok)
    # cuts: a 1 MiB PUT closed at 12 points (in its head, after it, in its
    # body; in a chunk-size line, a chunk, a chunk signature): nothing
    # stored, the DRAM reservation and pins given back
    dram0 = ph.srv.metric("kvtier_dram_used_bytes")
    big = os.urandom(1 << 20)
    plain = signed_msg(P, "PUT", "/hbkt/cut", body=big, payload="UNSIGNED-PAYLOAD")
    head = plain.index(b"\r\n\r\n") + 4
    streamed = stream_put(P, "/hbkt/cut", [big[:700000], big[700000:]])
    shead = streamed.index(b"\r\n\r\n") + 4
    chunked = te("/hbkt/cut", b"%x\r\n" % len(big) + big + b"\r\n0\r\n\r\n", len(big))
    chead = chunked.index(b"\r\n\r\n") + 4
    for what, msg, at in (("in the head", plain, head // 2), ("after the head", plain, head),
                          ("after 1 byte of body", plain, head + 1),
                          ("half the body", plain, head + len(big) // 2),
                          ("all but one byte", plain, len(plain) - 1),
                          ("in a chunk-size line", chunked, chead + 3),
                          ("in a chunk", chunked, chead + 1000),
                          ("before the last chunk", chunked, len(chunked) - 5),
                          ("in a chunk signature", streamed, shead + 40),
                          ("in an aws-chunk", streamed, shead + 90 + 350000),
                          ("between aws-chunks", streamed, shead + 700090 + 2),
                          ("in the last aws-chunk", streamed, len(streamed) - 10)):
        sk = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        sk.sendall(msg[:at])
        time.sleep(0.05)
        sk.close()
        ph.cases += 1
        ph.probe("a PUT cut " + what)
        ph.expect(get("/hbkt/cut")[0] == 404, "a PUT cut %s stored" % what)
    end = time.monotonic() + 5
    while ph.srv.metric("kvtier_dram_used_bytes") > dram0 and time.monotonic() < end:
        time.sleep(0.1)
    ph.expect(ph.srv.metric("kvtier_dram_used_bytes") <= dram0 and
              ph.srv.metric("kvtier_pins_active") == 0, "DRAM after the cuts", dram0,
              ph.srv.metric("kvtier_dram_used_bytes"))
    ph.case("aws-chunked: bytes past its end",
            trailer("/hbkt/trbad", b"3\r\nabc\r\n0\r\n\r\nEXTRA", 3), 400, "IncompleteBody")
    assert get("/hbkt/trbad")[0] == 404
    # A PUT that signed its content's SHA-256 (and its decoded length),
    # sent again with an aws-chunked body of other bytes and an unsigned
    # Content-Encoding: aws-chunked (or Transfer-Encoding: chunked): the
    # hash still holds.  Content-Encoding turned it off, and "evil" was
    # stored under a signature of "good" (redhttp, 2026-12-06)
    for what, enc in (("Content-Encoding: aws-chunked", "content-encoding: aws-chunked"),
                      ("Transfer-Encoding: chunked", "transfer-encoding: chunked")):
        for body, status in ((b"evil", 400), (b"good", 200)):
            h = {"host": "127.0.0.1:%d" % P, "x-amz-decoded-content-length": "4"}
            auth = sign("PUT", "/hbkt/sha", "", h, hashlib.sha256(b"good").hexdigest())
            wire = b"4\r\n" + body + b"\r\n0\r\n\r\n"
            length = "" if enc.startswith("transfer") else "content-length: %d\r\n" % len(wire)
            msg = ("PUT /hbkt/sha HTTP/1.1\r\n" + "".join("%s: %s\r\n" % kv for kv in h.items())
                   + "authorization: %s\r\n%s\r\n%s\r\n" % (auth, enc, length)).encode() + wire
            ph.case("signed sha256(good), %s, %s" % (what, body.decode()), msg, status,
                    "XAmzContentSHA256Mismatch" if status == 400 else None, close=False,
                    then=ok)
            st, _, b = get("/hbkt/sha")
            ph.expect(st == 404 if status == 400 else (st, b) == (200, b"good"), what, body,
                      "stored", st, b[:40])
            http(P, signed_msg(P, "DELETE", "/hbkt/sha"), src=PROBER)


# ---------------------------------------------------------------------------
# S3: keys, query strings, ranges, multipart uploads

@phase
def s3_keys(ph):
    P, ok, sm, req = ph.kit()
    assert req("PUT", "/hbkt/obj", body=b"0123456789")[0] == 200
    assert req("PUT", "/hbkt/empty")[0] == 200
    # percent-encoding
    for k in ("%zz", "%0", "a%", "a%g0"):
        ph.case("key " + k, sm("PUT", "/hbkt/" + k, body=b"x"), 400, "InvalidURI")
    # a key of bytes S3 takes as given: each its own object, read back
    for k in ("%00", "%00abc", "%C0%AF", "%ff%fe", "..%2F..%2Fx", "a//b", "../x", "%2e%2e"):
        ph.case("PUT key " + k, sm("PUT", "/hbkt/" + k, body=k.encode()), 200, close=False,
                then=ok)
        st, _, body = req("GET", "/hbkt/" + k)
        ph.expect(st == 200 and body == k.encode(), ("GET key " + k, st, body[:200]))
    # a Content-Type with a tab inside (HTTP's field-content allows HTAB) is
    # stored and sent back: the check that a stored content type holds no
    # control byte (a CR LF forged over the native protocol, s3ops.c
    # s3d_obj_check) took the tab for one, and the object answered
    # NoSuchKey to its GET and HEAD (review27)
    ct = "text/plain;\tcharset=utf-8"
    st, _, body = http(P, sm("PUT", "/hbkt/tabct", body=b"tab", extra={"content-type": ct},
                             signed=["host", "x-amz-content-sha256", "x-amz-date"]))
    ph.expect(st == 200, ("PUT content-type with a tab", st, body[:200]))
    st, hd, body = req("GET", "/hbkt/tabct")
    ph.expect(st == 200 and body == b"tab" and ("Content-Type: " + ct) in hd,
              ("GET content-type with a tab", st, hd, body[:200]))
    ph.expect(req("HEAD", "/hbkt/tabct")[0] == 200, "HEAD content-type with a tab")
    # a key that starts with a NUL byte is a key, not the bucket: its DELETE
    # deleted the bucket (when empty), its PUT was a CreateBucket (attack18)
    st, _, body = req("DELETE", "/hbkt/%00abc")
    ph.expect(st == 204, ("DELETE key %00abc", st, body[:200]))
    ph.expect(req("GET", "/hbkt/%00abc")[0] == 404 and req("HEAD", "/hbkt")[0] == 200,
              "after DELETE key %00abc: the key gone, the bucket there")
    ph.case("key of 1024 bytes", sm("PUT", "/hbkt/" + "k" * 1024, body=b"x"), 200, close=False,
            then=ok)
    ph.case("key of 1024 bytes, escaped", sm("PUT", "/hbkt/" + "%41" * 1024, body=b"x"), 200,
            close=False, then=ok)
    for k in ("k" * 1025, "%41" * 1025, "k" * 4000):
        ph.case("key of %d bytes" % len(urllib.parse.unquote(k)), sm("PUT", "/hbkt/" + k,
                                                                   body=b"x"),
                400, "KeyTooLongError")
    ph.case("bucket in upper case", sm("GET", "/HBKT/obj"), 400, "InvalidBucketName")
    ph.case("bucket of 64 bytes", sm("GET", "/" + "b" * 64 + "/x"), 400, "InvalidBucketName")
    ph.case("another tenant's bucket", sm("GET", "/hbkt/obj", who=BOB), 404, "NoSuchBucket",
            close=False, then=ok)
    # query strings
    ph.case("2,000 query parameters", sm("GET", "/hbkt", query="&".join("p%d=1" % i
                                                                        for i in range(2000))),
            400, "AuthorizationHeaderMalformed", src=ph.addr())
    ph.case("10,000 query parameters", sm("GET", "/hbkt", query="&".join(["a"] * 10000)), 431,
            "BadRequest")
    # a parameter kvtierd reads, twice: refused (the listings took the
    # first, the route the last; 200 until s3fix45, s3_upload_key)
    ph.case("prefix 62 times", sm("GET", "/hbkt", query="&".join(
        ["list-type=2"] + ["prefix=%d" % i for i in range(62)])), 400, "InvalidArgument")
    ph.case("max-keys twice", sm("GET", "/hbkt", query="list-type=2&max-keys=1&max-keys=5"), 400,
            "InvalidArgument")
    ph.case("an unknown parameter 62 times", sm("GET", "/hbkt", query="&".join(
        ["list-type=2"] + ["p=%d" % i for i in range(62)])), 501, "NotImplemented", close=False,
        then=ok)
    for mk in ("0", "1000", "2147483648"):
        ph.case("max-keys " + mk, sm("GET", "/hbkt", query="list-type=2&max-keys=" + mk), 200,
                close=False, then=ok)
    # a sign or a letter followed by digits was taken as a (wrapped) number
    # (attack18)
    for mk in ("-1", "+5", "1e3", "abc", "", "1 ", "99999999999999999999"):
        for q in ("list-type=2&max-keys=", "uploads&max-uploads="):
            ph.case("%s%s" % (q, mk), sm("GET", "/hbkt", query=q + urllib.parse.quote(mk)), 400,
                    "InvalidArgument", close=False, then=ok)
    for tok in ("zz", "abc", "61" * 1500):
        ph.case("continuation-token " + tok[:8], sm("GET", "/hbkt", query="list-type=2&"
                                                    "continuation-token=" + tok),
                400, "InvalidArgument", close=False, then=ok)
    # a token is only a name to start after: another bucket's (or
    # tenant's) token lists this bucket's keys after that name
    st, _, body = req("GET", "/hbkt", query="list-type=2&continuation-token=6b6e")  # "kn"
    ph.expect(st == 200 and b"<Key>known</Key>" in body and b"<Key>empty</Key>" not in body,
              "a token from elsewhere", body)
    ph.case("prefix of 2,000 bytes", sm("GET", "/hbkt", query="list-type=2&prefix=" + "a" * 2000),
            400, "InvalidArgument", close=False, then=ok)
    ph.case("encoding-type=xml", sm("GET", "/hbkt", query="list-type=2&encoding-type=xml"), 400,
            "InvalidArgument", close=False, then=ok)
    # ranges of the 10-byte object
    for r, st, want in (("bytes=-0", 416, None), ("bytes=5-3", 200, b"0123456789"),
                        ("bytes=0-", 206, b"0123456789"), ("bytes=0-0", 206, b"0"),
                        ("bytes=0-1,3-4", 200, b"0123456789"), ("bytes=9-", 206, b"9"),
                        ("bytes=10-", 416, None), ("bytes=-100", 206, b"0123456789"),
                        ("bytes=-3", 206, b"789"), ("bytes=2-100", 206, b"23456789"),
                        ("bytes=99999999999999999999-", 416, None),
                        ("bytes=-99999999999999999999", 206, b"0123456789"),
                        ("bytes=18446744073709551615-18446744073709551615", 416, None),
                        ("bytes= 1-2", 200, b"0123456789"), ("items=0-1", 200, b"0123456789"),
                        ("bytes=", 200, b"0123456789"), ("bytes=-", 200, b"0123456789")):
        _, hd, body = ph.case("Range " + r, sm("GET", "/hbkt/obj", extra={"range": r}), st,
                              "InvalidRange" if st == 416 else None, close=False, then=ok)
        if want is not None:
            ph.expect(body == want, ("Range " + r, body))
    # an empty object: a suffix range is the whole (empty) object, 200 as S3
    # (was 206 with "Content-Range: bytes 0-18446744073709551615/0"); any
    # other range is unsatisfiable
    for r, st in (("bytes=-5", 200), ("bytes=-1", 200), ("bytes=0-", 416), ("bytes=0-0", 416),
                  ("bytes=-0", 416)):
        _, hd, body = ph.case("empty object, Range " + r,
                              sm("GET", "/hbkt/empty", extra={"range": r}), st,
                              "InvalidRange" if st == 416 else None, close=False, then=ok)
        ph.expect("Content-Range" not in hd, ("empty object, Range " + r, hd))
    # multipart: uploads started in numbers and abandoned hold nothing in
    # kvtierd's memory (each a marker block of the bucket, in the tenant's
    # DRAM quota; main() checks --max-memory's charge and RSS at the end)
    sk = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    for batch in range(4):
        sk.sendall(b"".join(signed_msg(P, "POST", "/hbkt/many%d" % i, query="uploads")
                            for i in range(100)))
        for i in range(100):
            st, _, body = read_answer(sk)
            ph.expect(st == 200 and b"<UploadId>" in body, "upload", batch, i, st, body[:200])
    sk.close()
    st, _, body = req("GET", "/hbkt", query="uploads&prefix=many")
    ph.expect(st == 200 and body.count(b"<Upload>") == 400, "400 uploads listed", st,
              body.count(b"<Upload>"))
    ph.probe("400 uploads started")
    st, _, body = req("POST", "/hbkt/mp", query="uploads")
    assert st == 200, (st, body)
    uid = re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", body).group(1).decode()
    # part numbers: 1..10000, decimal digits only (was: the first 6 bytes
    # read, so 0000019 was part 1, and 000001x too) (attack18)
    for pn in ("0", "10001", "abc", "", "1a", "-1", "1.5", "000001x", "+1", "99999999999"):
        ph.case("partNumber " + pn, sm("PUT", "/hbkt/mp", query="partNumber=%s&uploadId=%s" %
                                       (urllib.parse.quote(pn), uid), body=b"p"),
                400, "InvalidArgument")
    for pn in ("1", "10000", "007", "0000019"):
        ph.case("partNumber " + pn, sm("PUT", "/hbkt/mp", query="partNumber=%s&uploadId=%s" %
                                       (pn, uid), body=pn.encode()), 200, close=False, then=ok)
    st, _, body = req("GET", "/hbkt/mp", query="uploadId=" + uid)
    parts = re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)
    ph.expect(st == 200 and parts == [b"1", b"7", b"19", b"10000"], "ListParts", st, body)
    # an upload id nobody created: NoSuchUpload, as S3 (was: the part
    # stored, 200; its Abort 204) (attack18)
    guessed = "0123456789abcdef" * 2
    ph.case("uploadId guessed", sm("PUT", "/hbkt/mp", query="partNumber=1&uploadId=" +
                                   guessed, body=b"p"), 404, "NoSuchUpload")
    ph.case("UploadPartCopy, uploadId guessed",
            sm("PUT", "/hbkt/mp", query="partNumber=1&uploadId=" + guessed,
               extra={"x-amz-copy-source": "/hbkt/obj"}), 404, "NoSuchUpload", close=False,
            then=ok)
    ph.case("AbortMultipartUpload, uploadId guessed",
            sm("DELETE", "/hbkt/mp", query="uploadId=" + guessed), 404, "NoSuchUpload",
            close=False, then=ok)
    for u, what in (("abc", "short"), (uid.upper(), "in upper case"), ("g" * 32, "not hex")):
        ph.case("uploadId " + what, sm("PUT", "/hbkt/mp", query="partNumber=1&uploadId=" + u,
                                       body=b"p"), 404, "NoSuchUpload")
    ph.case("another tenant's uploadId", sm("PUT", "/hbkt/mp", query="partNumber=1&uploadId=" +
                                           uid, body=b"p", who=BOB), 404, "NoSuchBucket")
    ph.case("ListParts by another tenant", sm("GET", "/hbkt/mp", query="uploadId=" + uid,
                                              who=BOB), 404, "NoSuchBucket", close=False, then=ok)
    ph.case("ListParts under another key", sm("GET", "/hbkt/other", query="uploadId=" + uid),
            404, "NoSuchUpload", close=False, then=ok)
    ph.case("AbortMultipartUpload by another tenant",
            sm("DELETE", "/hbkt/mp", query="uploadId=" + uid, who=BOB), 404, "NoSuchBucket",
            close=False, then=ok)

    def complete(xml, u=None):
        return sm("POST", "/hbkt/mp", query="uploadId=" + (u or uid), body=xml)

    def parts_xml(*pns, etag=None):
        return (b"<CompleteMultipartUpload>" + b"".join(
            b"<Part><PartNumber>%s</PartNumber>%s</Part>" % (
                str(n).encode(), b"<ETag>%s</ETag>" % etag if etag else b"") for n in pns)
            + b"</CompleteMultipartUpload>")
    for what, xml, code in (
            ("empty", b"", "MalformedXML"), ("not XML", b"<<<>>>", "MalformedXML"),
            ("no parts", b"<CompleteMultipartUpload></CompleteMultipartUpload>", "MalformedXML"),
            ("part number abc", parts_xml("abc"), "MalformedXML"),
            ("part number 0", parts_xml(0), "MalformedXML"),
            ("part number 10001", parts_xml(10001), "MalformedXML"),
            ("parts out of order", parts_xml(7, 1), "InvalidPartOrder"),
            ("a part twice", parts_xml(1, 1), "InvalidPartOrder"),
            ("an ETag that does not match", parts_xml(1, etag=b'"00000000"'), "InvalidPart"),
            ("a part never uploaded", parts_xml(2), "InvalidPart"),
            ("a part under 5 MiB, not the last", parts_xml(1, 7), "EntityTooSmall"),
            ("nested 500 deep", b"<CompleteMultipartUpload>" + b"<Part>" * 500 +
             b"<PartNumber>1</PartNumber>" + b"</Part>" * 500 + b"</CompleteMultipartUpload>",
             "MalformedXML"),
            ("2,000 parts", parts_xml(*range(1, 2001)), "InvalidRequest"),
            ("an entity out of range", parts_xml("&#x110000;"), "MalformedXML")):
        ph.case("Complete: " + what, complete(xml), 400, code, close=False, then=ok)
    ph.case("Complete: 1 MiB + 1 of XML", complete(b"<a>" + b"x" * (1 << 20)), 400,
            "MaxMessageLengthExceeded")
    ph.case("Complete: an upload id never made", complete(parts_xml(1), "1" * 32), 404,
            "NoSuchUpload", close=False, then=ok)
    ph.expect(req("GET", "/hbkt/mp")[0] == 404, "no object after failed Completes")
    ph.case("DeleteObjects of 1001 keys", sm("POST", "/hbkt", query="delete", body=b"<Delete>" +
                                             b"".join(b"<Object><Key>k%d</Key></Object>" % i
                                                      for i in range(1001)) + b"</Delete>"),
            400, "MalformedXML", close=False, then=ok)
    ph.case("DeleteObjects of an empty key", sm("POST", "/hbkt", query="delete",
                                                body=b"<Delete><Object><Key></Key></Object>"
                                                     b"</Delete>"),
            400, "MalformedXML", close=False, then=ok)
    ph.case("CopyObject from ..", sm("PUT", "/hbkt/cp", extra={"x-amz-copy-source":
                                                                "/hbkt/../hbkt/obj"}),
            404, "NoSuchKey", close=False, then=ok)
    for r, code in (("bytes=5-3", "InvalidArgument"), ("bytes=5-300", "InvalidRange"),
                    ("bytes=-3", "InvalidArgument"), ("bytes=+1-2", "InvalidArgument"),
                    ("bytes=18446744073709551615-18446744073709551615", "InvalidRange")):
        ph.case("UploadPartCopy range " + r, sm("PUT", "/hbkt/mp", query="partNumber=2&"
                                                "uploadId=" + uid,
                                                extra={"x-amz-copy-source": "/hbkt/obj",
                                                       "x-amz-copy-source-range": r}),
                400, code, close=False, then=ok)
    for q in ("part-number-marker=999999999", "part-number-marker=-1", "max-parts=-1",
              "max-parts=abc"):
        st = 200 if q.endswith("99") else 400
        ph.case("ListParts " + q, sm("GET", "/hbkt/mp", query="uploadId=%s&%s" % (uid, q)), st,
                None if st == 200 else "InvalidArgument", close=False, then=ok)
    st, _, body = req("POST", "/hbkt/mp", query="uploadId=" + uid, body=parts_xml(19))
    ph.expect(st == 200, "Complete of part 19", st, body)
    ph.expect(req("GET", "/hbkt/mp")[2] == b"0000019", "the object is part 19's bytes")


# ---------------------------------------------------------------------------
# S3: SigV4

def presigned(port, path, expires, when=None, who=ALICE, method="GET", extra=b""):
    """A presigned URL's request (SignedHeaders=host); extra: more header
    lines, unsigned."""
    when = when or now_utc()
    amz = when.strftime("%Y%m%dT%H%M%SZ")
    cred = urllib.parse.quote("%s/%s/us-east-1/s3/aws4_request" % (who[0], amz[:8]), safe="")
    q = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=%s"
         "&X-Amz-SignedHeaders=host" % (cred, amz, expires))
    a = sign(method, path, q, {"host": "127.0.0.1:%d" % port}, None, who, when,
             signed=["host"], amz=amz)
    return ("%s %s?%s&X-Amz-Signature=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (
        method, path, q, a.rsplit("Signature=", 1)[1], port)).encode() + extra + b"\r\n"


@phase
def s3_sigv4(ph):
    P, ok, sm, req = ph.kit()
    auth = re.search(rb"authorization: ([^\r]*)", ok).group(1)

    def with_auth(a, msg=ok):
        return re.sub(rb"authorization: [^\r]*", b"authorization: " + a, msg)

    def bad(what, msg, st=400, code="AuthorizationHeaderMalformed"):
        # one address a case: the failures must not throttle the next
        ph.case(what, msg, st, code, src=ph.addr())
    # the Authorization header's components
    bad("no Credential", with_auth(re.sub(rb"Credential=[^,]*, ", b"", auth)))
    bad("no SignedHeaders", with_auth(re.sub(rb"SignedHeaders=[^,]*, ", b"", auth)))
    bad("no Signature", with_auth(re.sub(rb", Signature=.*", b"", auth)))
    bad("a fourth component", with_auth(auth + b", Foo=bar"))
    bad("Signature twice", with_auth(auth + b", Signature=" + b"0" * 64))
    bad("Credential twice", with_auth(auth + b", Credential=" +
                                      re.search(rb"Credential=([^,]*)", auth).group(1)))
    bad("a Signature of 63 hex", with_auth(auth[:-1]))
    bad("a Signature in upper case", with_auth(auth[:-64] + auth[-64:].upper()))
    bad("AWS4-HMAC-SHA512", with_auth(auth.replace(b"AWS4-HMAC-SHA256", b"AWS4-HMAC-SHA512")))
    bad("SigV4a", with_auth(auth.replace(b"AWS4-HMAC-SHA256", b"AWS4-ECDSA-P256-SHA256")))
    bad("SigV2", with_auth(b"AWS alice:c2lnbmF0dXJl"))
    bad("an empty Authorization", with_auth(b""))
    bad("an access key with a slash", with_auth(auth.replace(b"Credential=alice/",
                                                             b"Credential=al/ice/")))
    bad("a scope without aws4_request", with_auth(auth.replace(b"/aws4_request", b"/aws4")))
    bad("a scope date not the request's", signed_msg(
        P, "GET", "/hbkt/known", amz=(now_utc() - datetime.timedelta(days=1)).strftime(
            "%Y%m%dT%H%M%SZ")))
    # the scope: any region (it is only signed); the service must be s3, as
    # S3 answers (was: any service's signature accepted) (attack18)
    ph.case("another region", signed_msg(P, "GET", "/hbkt/known", region="mars-west-9"), 200,
            close=False, then=ok)
    for svc in ("iam", "s3x", "execute-api"):
        bad("service " + svc, signed_msg(P, "GET", "/hbkt/known", service=svc))
    bad("an empty service", with_auth(auth.replace(b"/s3/", b"//")))
    # SignedHeaders: what the client lists is what is signed
    ph.case("a signed header that is absent", signed_msg(P, "GET", "/hbkt/known", signed=[
        "host", "x-absent", "x-amz-content-sha256", "x-amz-date"]), 200, close=False, then=ok)
    bad("1000 signed headers", signed_msg(P, "GET", "/hbkt/known",
                                          signed=["a%d" % i for i in range(1000)]))
    bad("host signed 300 times", signed_msg(P, "GET", "/hbkt/known", signed=["host"] * 300))
    bad("upper case in SignedHeaders", with_auth(auth.replace(b"SignedHeaders=host",
                                                              b"SignedHeaders=Host")))
    bad("an empty name in SignedHeaders", with_auth(auth.replace(b"SignedHeaders=host;",
                                                                 b"SignedHeaders=host;;")))
    # x-amz-date
    for d in ("", "2026", "20261203T99", "20261399T000000Z", "20261203t120000z",
              "20261203T120000Z0", "2026-12-03T12:00:00Z"):
        bad("x-amz-date %r" % d, re.sub(rb"x-amz-date: [^\r]*", b"x-amz-date: " + d.encode(),
                                        ok))
    bad("no x-amz-date", re.sub(rb"x-amz-date: [^\r]*\r\n", b"", ok))
    bad("no x-amz-content-sha256", re.sub(rb"x-amz-content-sha256: [^\r]*\r\n", b"", ok),
        400, "InvalidRequest")
    for skew in (-16 * 60, 16 * 60):
        bad("a clock %+d s off" % skew, signed_msg(P, "GET", "/hbkt/known",
                                                   when=now_utc() + datetime.timedelta(
                                                       seconds=skew)),
            403, "RequestTimeTooSkewed")
    bad("a wrong secret", signed_msg(P, "GET", "/hbkt/known", who=("alice", "x" * 20)), 403,
        "SignatureDoesNotMatch")
    bad("an unknown access key", signed_msg(P, "GET", "/hbkt/known", who=("mallory", "x" * 20)),
        403, "InvalidAccessKeyId")
    # presigned URLs: X-Amz-Expires 1..604800
    ph.case("presigned", presigned(P, "/hbkt/known", 60), 200, close=False, then=ok)
    ph.case("presigned, 7 days", presigned(P, "/hbkt/known", 604800), 200, close=False, then=ok)
    for e in ("0", "604801", "-1", "abc", "", "99999999"):
        bad("X-Amz-Expires %r" % e, presigned(P, "/hbkt/known", e))
    bad("presigned, expired", presigned(P, "/hbkt/known", 60, when=now_utc() -
                                        datetime.timedelta(seconds=120)), 403, "AccessDenied")
    bad("presigned, 8 days old", presigned(P, "/hbkt/known", 604800, when=now_utc() -
                                           datetime.timedelta(days=8)), 403, "AccessDenied")
    bad("presigned, from the future", presigned(P, "/hbkt/known", 60, when=now_utc() +
                                                datetime.timedelta(hours=1)),
        403, "RequestTimeTooSkewed")
    bad("presigned GET sent as a PUT", presigned(P, "/hbkt/known", 60).replace(b"GET ", b"PUT ", 1),
        403, "SignatureDoesNotMatch")
    # a presigned parameter twice: malformed (until s3fix45 the last was
    # taken: a forged second signature, SignatureDoesNotMatch)
    bad("presigned, a second X-Amz-Signature",
        presigned(P, "/hbkt/known", 60).replace(b" HTTP/1.1", b"&X-Amz-Signature=" + b"0" * 64 +
                                                b" HTTP/1.1"))
    bad("presigned, a second X-Amz-Date",
        presigned(P, "/hbkt/known", 60).replace(b"X-Amz-Expires", b"X-Amz-Date=" +
                                                now_utc().strftime("%Y%m%dT%H%M%SZ").encode() +
                                                b"&X-Amz-Expires", 1))
    # x-amz-* headers must be signed, as S3 requires: whoever held a
    # presigned PUT could add x-amz-copy-source and copy another of the
    # signer's objects under the URL's key (attack18)
    cl0 = b"Content-Length: 0\r\n"
    ph.case("presigned PUT", presigned(P, "/hbkt/given", 60, method="PUT", extra=cl0), 200,
            close=False, then=ok)
    bad("presigned PUT with an unsigned x-amz-copy-source",
        presigned(P, "/hbkt/given", 60, method="PUT",
                  extra=cl0 + b"x-amz-copy-source: /hbkt/known\r\n"), 403, "AccessDenied")
    st, _, body = req("GET", "/hbkt/given")
    ph.expect(st == 200 and body == b"", "the presigned PUT's object was replaced by a copy",
              st, body[:100])
    bad("an unsigned x-amz-meta header",
        signed_msg(P, "GET", "/hbkt/known").replace(b"\r\n\r\n", b"\r\nx-amz-meta-a: b\r\n\r\n"),
        403, "AccessDenied")
    bad("x-amz-date unsigned", signed_msg(P, "GET", "/hbkt/known", signed=[
        "host", "x-amz-content-sha256"]), 403, "AccessDenied")
    bad("presigned with an Authorization too",
        presigned(P, "/hbkt/known", 60).replace(b"\r\n\r\n", b"\r\nAuthorization: x\r\n\r\n"))
    # The canonical request is bounded by its buffer (48 KiB), and its
    # making by that too: a SignedHeaders list naming one 14 KB header 500
    # times (490 here, beside x-amz-date and x-amz-content-sha256, which
    # must be signed) made ~7 MB of it byte by byte before refusing, 4.3 ms of the
    # loop (release; 18 ms ASan) for each unauthenticated request against
    # 0.09 for a wrong signature over the same head, 20 a second from each
    # address (attack18).  Compared like with like: both heads carry the
    # 14 KB header; the medians of rounds of 9, each from its own address.
    amp = signed_msg(P, "GET", "/hbkt/known", extra={"a": "x" * 14000},
                     signed=["a"] * 490 + ["x-amz-content-sha256", "x-amz-date"])
    plain = signed_msg(P, "GET", "/hbkt/known", who=("alice", "x" * 20),
                       extra={"a": "x" * 14000})

    def answer_ms(msg):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        t0 = time.monotonic()
        s.sendall(msg)
        st, _, body = read_answer(s)
        dt = (time.monotonic() - t0) * 1e3
        s.close()
        assert st in (400, 403), (st, body[:200])
        return dt
    for rnd in range(3):
        a = sorted(answer_ms(amp) for _ in range(9))[4]
        b = sorted(answer_ms(plain) for _ in range(9))[4]
        print("SignedHeaders x490 over a 14 KB header: %.2f ms, a wrong signature: %.2f ms "
              "(medians of 9)" % (a, b))
        if a <= 4 * b + 1.0:
            break
    ph.expect(a <= 4 * b + 1.0, "the canonical request costs past its buffer", a, b)
    ph.probe("SignedHeaders x490")


# ---------------------------------------------------------------------------
# Slow clients and many connections (--idle-timeout 2)

IDLE_S = 2


def dribble(port, first, rest, step, src=None, until_s=4 * IDLE_S + 4):
    """Send first, then rest a byte every step seconds: the seconds after
    which the server closed the connection (EOF or reset), None if it was
    still open after until_s, and what it sent."""
    s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0) if src else None)
    t0 = time.monotonic()
    got = b""
    if first:
        s.sendall(first)
    for ch in rest:
        try:
            s.sendall(bytes([ch]))
        except OSError:
            break
        s.settimeout(step)
        try:
            b = s.recv(65536)
            if not b:
                break
            got += b
        except socket.timeout:
            pass
        except ConnectionResetError:
            break
        if time.monotonic() - t0 > until_s:
            s.close()
            return None, got
    else:
        if not closed_after(s, until_s - (time.monotonic() - t0)):
            s.close()
            return None, got
    s.close()
    return time.monotonic() - t0, got


def hold(port, n, data, src=None):
    """n connections from src, each sent data: those the server took (no
    answer within 0.5 s; all checked at once, well inside --idle-timeout)
    and the answers of those it refused."""
    import select
    held, refused = [], []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0) if src else None)
        s.sendall(data)
        held.append(s)
    time.sleep(0.5)
    readable = select.select(held, [], [], 0)[0]
    for s in readable:
        held.remove(s)
        s.settimeout(1)
        refused.append(read_answer(s)[1].encode("latin-1"))
        s.close()
    return held, refused


@phase
def s3_slow(ph):
    import threading
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    put = signed_msg(P, "PUT", "/hbkt/slow", body=b"x" * 100)
    cut = put.index(b"\r\n\r\n") + 4
    te = signed_msg(P, "PUT", "/hbkt/slowte", wire_body=b"64\r\n" + b"x" * 100 + b"\r\n0\r\n\r\n",
                    length=False, extra={"transfer-encoding": "chunked",
                                         "x-amz-decoded-content-length": "100"},
                    payload="UNSIGNED-PAYLOAD")
    tcut = te.index(b"\r\n\r\n") + 4
    # each a byte every 0.4 s, all at once, each from its own address:
    # closed by the head's or the body's clock (--idle-timeout), whatever
    # came before
    slow = {"a head before authentication": (None, ok),
            "a head after a request answered": (ok, ok),
            "a PUT's body": (put[:cut], put[cut:]),
            "a chunk-size line": (te[:tcut], te[tcut:])}
    res = {}

    def run(what, first, rest, src):
        res[what] = dribble(P, first, rest, 0.4, src)
    ths = [threading.Thread(target=run, args=(w, f, r, ph.addr())) for w, (f, r) in slow.items()]
    for t in ths:
        t.start()
    t0 = time.monotonic()
    while any(t.is_alive() for t in ths):
        if time.monotonic() - t0 > 0.5:
            ph.probe("beside slow clients")
            t0 = time.monotonic()
        time.sleep(0.05)
    for what, (took, got) in res.items():
        print("slow %s: closed after %s s" % (what, "%.1f" % took if took else "-"))
        answered = got.count(b"HTTP/1.1 ")
        ph.expect(took is not None and took <= 2 * IDLE_S + 2, "slow " + what, took, got[:200])
        ph.expect(answered == (1 if what.endswith("answered") else 0), "slow " + what, got[:300])
    ph.expect(http(P, signed_msg(P, "GET", "/hbkt/slow"), src=PROBER)[0] == 404,
              "a slow PUT left an object")
    ph.cases += len(slow)
    # Before authentication an address holds at most 256 connections (and
    # 16 KiB of head each, outside --max-memory): past that 503 SlowDown at
    # once, the address's signed requests too; other addresses are served
    rss0 = srv.rss_kib()
    part = ok[:ok.index(b"\r\n")] + b"\r\nx-pad: " + b"a" * 15000
    held, refused = hold(P, 300, part)
    rss1 = srv.rss_kib()
    print("300 connections of a 15 KB head from one address: %d held, %d refused; RSS +%d KiB"
          % (len(held), len(refused), rss1 - rss0))
    ph.expect(len(held) == 256 and len(refused) == 44, "per-address limit", len(held),
              len(refused))
    ph.expect(all(r.startswith(b"HTTP/1.1 503") for r in refused), "refusals", refused[:1])
    ph.expect(rss1 - rss0 <= 16 << 10, "RSS per held head", rss1 - rss0)
    ph.case("a signed GET from the same address", ok, 503, "SlowDown")
    ph.probe("256 held from one address")
    for s in held:
        s.close()
    end = time.monotonic() + 5
    while srv.metric("kvtier_connections_unauthenticated") > 1 and time.monotonic() < end:
        time.sleep(0.1)
    ph.case("a signed GET from that address, once they closed", ok, 200, close=False, then=ok)
s3_slow.extra = ["--idle-timeout", str(IDLE_S)]


@phase
def s3_flood(ph):
    """One tenant pipelines GETs of a missing key on 48 connections and
    never reads: its connections take 64 requests a loop iteration and are
    not read past --conn-inflight, nor while its requests in flight hold
    its share of --max-memory (a quarter), so it is not refused and the
    budget stays well inside; another tenant is served."""
    import threading
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    one = signed_msg(P, "GET", "/hbkt/missing-key")
    refused0 = srv.metric("kvtier_server_memory_refused_total")
    deferred0 = srv.metric("kvtier_server_parse_deferred_total")
    stop = []

    def flood(src):
        sk = socket.create_connection(("127.0.0.1", P), source_address=(src, 0))
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sk.setblocking(False)
        batch, off = one * 200, 0
        while not stop:
            try:
                off += sk.send(batch[off:])
                off %= len(batch)
            except BlockingIOError:
                time.sleep(0.005)
            except OSError:
                break
        sk.close()
    ths = [threading.Thread(target=flood, args=(ph.addr(),)) for _ in range(48)]
    for t in ths:
        t.start()
    peak, lat, end = 0, [], time.monotonic() + 3
    while time.monotonic() < end:
        peak = max(peak, srv.metric("kvtier_server_memory_bytes"))
        t0 = time.monotonic()
        st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/k", body=b"x" * 1000, who=BOB),
                           src=PROBER)
        lat.append(time.monotonic() - t0)
        ph.expect(st == 200, "the other tenant's PUT beside the flood", st, body[:200])
    served = srv.metric('kvtier_s3_requests_total{op="GetObject"}')
    refused = srv.metric("kvtier_server_memory_refused_total") - refused0
    deferred = srv.metric("kvtier_server_parse_deferred_total") - deferred0
    stop.append(1)
    for t in ths:
        t.join()
    lat.sort()
    print("48 unread S3 pipelines, 3 s: %d GETs answered, --max-memory peak %.1f MiB of 32, %d "
          "refused for memory, %d parses deferred; the other tenant's PUT p50 %.1f max %.1f ms"
          % (served, peak / 2 ** 20, refused, deferred, lat[len(lat) // 2] * 1e3,
             lat[-1] * 1e3))
    # the causes, not a latency (doc/testing.md rule 1): no refusal for
    # memory; the budget not reached (its requests in flight held to the
    # tenant's quarter, 8 MiB, its queued answers to another: seen 8.1-8.2
    # MiB ASan, 16.7 release, 14.7-17.3 ASan with the first quarter not
    # kept, 32 on the server before), the parse budget used.  The other tenant's PUT waits for
    # 48 connections' 64 requests an iteration (0.5-0.7 s ASan; 2.7 s and
    # a 503 before): it must be answered, its time is printed.
    ph.expect(refused == 0, "refused for memory", refused)
    ph.expect(peak <= 24 << 20, "--max-memory peak", peak)
    ph.expect(deferred > 0, "no parse deferred", deferred)
    ph.expect(lat[-1] <= 5, "the other tenant's PUT", lat[-1])
    # ... and since the parse budget is per tenant too (48 connections take
    # 4 connections' worth an iteration, attack20h): p50 40 ms, max 62-66
    # ms (ASan, load ~10; before: p50 324-449, max 376-759 ms).  5x margin.
    ph.expect(lat[len(lat) // 2] <= 0.2, "the other tenant's PUT, median", lat[len(lat) // 2])
    ph.cases += 1


def held_answers(socks, wait=0.5):
    """Of sockets that sent a request head, those the server answered
    within wait seconds (removed from socks) and their answers."""
    import select
    time.sleep(wait)
    answers = []
    for s in select.select(socks, [], [], 0)[0]:
        socks.remove(s)
        answers.append(read_answer(s, 2.0))
        s.close()
    return answers


@phase
def s3_upload_share(ph):
    """One tenant starts PUTs of 6 MiB on 12 connections and sends their
    heads and 1 KiB of each body only (a client that uploads slowly, or
    pretends to): each body's DRAM reservation is held while it arrives.
    Its uploads in flight hold at most a quarter of --dram (16 MiB: two
    of them; one alone is always taken), the others are answered 503
    SlowDown from their heads (nothing of their bodies read); another
    tenant's PUT is served at once, and a held upload still completes
    (attack20h: before, the twelve reservations took the whole DRAM tier,
    evicting every other block: the other tenant's bucket was gone)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    big = 6 << 20
    socks, tails = [], {}
    for i in range(12):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.sendall(signed_msg(P, "PUT", "/hbkt/big%d" % i, payload="UNSIGNED-PAYLOAD",
                             extra={"content-length": str(big)}) + b"x" * 1024)
        socks.append(s)
        tails[s] = i
    answers = held_answers(socks)
    codes = [(st, code_of(b)) for st, _, b in answers]
    print("12 PUTs of 6 MiB, heads and 1 KiB sent: %d held, refused %s" % (len(socks), codes))
    ph.expect(len(socks) == 2, "uploads held", len(socks), codes)
    ph.expect(all(c == (503, "SlowDown") for c in codes), "refusals", codes)
    t0 = time.monotonic()
    v = os.urandom(1 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/k", body=v, who=BOB), src=PROBER)
    dt = time.monotonic() - t0
    print("the other tenant's PUT of 1 MiB beside them: %d in %.1f ms" % (st, dt * 1e3))
    ph.expect(st == 200, "the other tenant's PUT beside held uploads", st, body[:200])
    st, _, got = http(P, signed_msg(P, "GET", "/bobbkt/k", who=BOB), src=PROBER)
    ph.expect(st == 200 and got == v, "the other tenant's GET", st, len(got))
    # a held upload still completes, byte for byte
    if socks:
        s = socks.pop(0)
        s.sendall(b"x" * (big - 1024))
        st, _, body = read_answer(s, 20.0)
        s.close()
        ph.expect(st == 200, "a held upload completed", st, body[:200])
        st, _, got = http(P, signed_msg(P, "GET", "/hbkt/big%d" % tails[s]), src=PROBER)
        ph.expect(st == 200 and got == b"x" * big, "the held upload's bytes", st, len(got))
    for s in socks:
        s.close()
    ph.cases += 1
    ph.probe("held uploads")
    # The same with overwrites: a PUT of a key that exists is received into
    # a buffer charged to --max-memory (doc/s3.md "Overwrite"); those of
    # one tenant hold at most its input share, a quarter of the budget
    # (before: seven of 4 MiB held 28 MiB of 32, the other tenant's
    # overwrite of 4 MiB refused 503)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/ow", body=b"old"), src=PROBER)
    assert st == 200, (st, body)
    socks = []
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.sendall(signed_msg(P, "PUT", "/hbkt/ow", payload="UNSIGNED-PAYLOAD",
                             extra={"content-length": str(4 << 20)}) + b"x" * 1024)
        socks.append(s)
    answers = held_answers(socks)
    codes = [(st, code_of(b)) for st, _, b in answers]
    mem = srv.metric("kvtier_server_memory_bytes")
    print("10 overwrites of 4 MiB, heads and 1 KiB sent: %d held, refused %s; --max-memory "
          "%.1f MiB" % (len(socks), codes, mem / 2 ** 20))
    ph.expect(len(socks) == 1, "overwrites held", len(socks), codes)
    ph.expect(all(c == (503, "SlowDown") for c in codes), "overwrite refusals", codes)
    v2 = os.urandom(4 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/k", body=v2, who=BOB), src=PROBER)
    ph.expect(st == 200, "the other tenant's overwrite beside held overwrites", st, body[:200])
    st, _, got = http(P, signed_msg(P, "GET", "/bobbkt/k", who=BOB), src=PROBER)
    ph.expect(st == 200 and got == v2, "the other tenant's GET after its overwrite", st,
              len(got))
    for s in socks:
        s.close()
    ph.cases += 1

@phase
def s3_pins(ph):
    """One tenant stores 10 objects of 6 MiB (--dram 64M), then GETs each
    on its own connection and never reads: each answer is sent from the
    object's pinned DRAM, so the pins keep the whole DRAM tier from being
    evicted.  Its connections' pinned answers hold at most a quarter of
    --dram together (as native GETs and RESP replies: KVTD_PIN_TENANT_MAX);
    past it a connection is not read until its own answers drain, and
    another tenant's PUT of 8 MiB is served (attack20h: before, 60 MiB
    stayed pinned and the other tenant's PUT was refused 503)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    big = 6 << 20
    for i in range(10):
        st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/pin%d" % i, body=b"%d" % i * big),
                           src=PROBER, timeout=20)
        assert st == 200, (i, st, body[:200])
    # One connection pipelines the 10 GETs and never reads: at most 4 of
    # its GETs are in the store or waiting (their pins not counted yet),
    # its answers pin at most KVTD_PIN_CONN_MAX (--dram/8, 8 MiB) before it
    # is not read until they drain (before: all 10, up to --conn-output's
    # 64 MiB)
    pins0 = srv.metric("kvtier_pins_active")
    s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"".join(signed_msg(P, "GET", "/hbkt/pin%d" % i) for i in range(10)))
    time.sleep(1.0)
    pins = srv.metric("kvtier_pins_active") - pins0
    s.close()
    print("10 pipelined GETs of 6 MiB objects, unread: %d pins" % pins)
    ph.expect(pins <= 4, "pins of one connection's unread pipeline", pins)
    # a pipeline read as it comes is answered whole, past those 4
    s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    s.sendall(signed_msg(P, "GET", "/hbkt/known") * 20 + signed_msg(P, "GET", "/hbkt/none"))
    sts = [read_answer(s, 10.0)[0] for _ in range(21)]
    s.close()
    ph.expect(sts == [200] * 20 + [404], "a pipeline of 21 GETs, read", sts)
    end = time.monotonic() + 5
    while srv.metric("kvtier_pins_active") > pins0 and time.monotonic() < end:
        time.sleep(0.1)
    socks = []
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(signed_msg(P, "GET", "/hbkt/pin%d" % i))
        socks.append(s)
    time.sleep(1.0)
    # which of them got their answer (200), which were refused (503)
    got = {}
    for s in socks:
        s.settimeout(5)
        got[s] = int(s.recv(12, socket.MSG_PEEK).split(b" ")[1])
    held = [s for s in socks if got[s] == 200]
    print("10 unread GETs of 6 MiB objects: %d held, %d refused 503" % (
        len(held), list(got.values()).count(503)))
    ph.expect(len(held) == 3 and list(got.values()).count(503) == 7, "GETs held",
              list(got.values()))
    v = os.urandom(8 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/big", body=v, who=BOB), src=PROBER,
                       timeout=20)
    print("the other tenant's PUT of 8 MiB beside them: %d %s" % (st, code_of(body)))
    ph.expect(st == 200, "the other tenant's PUT beside pinned answers", st, body[:200])
    for s in socks:
        s.close()
    # (with --ssd 0 the PUT evicted what was not pinned: the probe's
    # object is put again; the buckets stay, since 2026-12-06 -- until
    # then their marker blocks went too, and they were made again)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/known", body=b"known bytes"),
                       src=PROBER)
    assert st == 200, (st, body)
    ph.cases += 1
    ph.probe("pinned answers")


def resp_cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def resp_line(s, timeout=5.0):
    """One RESP reply line (a bulk's bytes follow it); b"" on close."""
    out, whole = read_until(s, b"\r\n", timeout)
    if not whole:
        return b""
    line, _, rest = out.partition(b"\r\n")
    if rest:
        _pending[s] = rest
    return line


def resp_login(port, who, src=None, timeout=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(src, 0) if src else None)
    s.sendall(resp_cmd(b"AUTH", who[0].encode(), who[1].encode()))
    assert resp_line(s) == b"+OK", who
    return s


@phase
def resp_share(ph):
    """The RESP listener (it shares the loops and --max-memory with S3):
    one tenant starts SETs of 8 MiB values on 6 connections and sends
    their heads and 1 KiB only.  Each command's read buffer grows to hold
    it (charged to --max-memory); those of one tenant, all its
    connections together, hold at most its input share (a quarter of the
    budget; one alone is always taken): the others are refused at once.
    Another tenant's SET of 1 MiB is served beside them, and a held SET
    still completes (attack20h: before, the buffers filled the budget and
    the other tenant's SET was refused for memory)."""
    srv = ph.srv
    m = re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(srv.log).read())
    R = int(m.group(1))
    big = 8 << 20
    socks = []
    for i in range(6):
        s = resp_login(R, ALICE, ph.addr())
        s.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\nbig%d\r\n$%d\r\n" % (i, big) + b"x" * 1024)
        socks.append(s)
    answers = [resp_line(s, 0.1) for s in held_socks(socks)]
    print("6 RESP SETs of 8 MiB, heads and 1 KiB sent: %d held, refused %s; --max-memory %.1f "
          "MiB" % (len(socks), answers, srv.metric("kvtier_server_memory_bytes") / 2 ** 20))
    ph.expect(len(socks) == 1, "SETs held", len(socks), answers)
    ph.expect(all(a.startswith(b"-") for a in answers), "refusals", answers)
    v = os.urandom(1 << 20)
    t0 = time.monotonic()
    b = resp_login(R, BOB, PROBER)
    b.sendall(resp_cmd(b"SET", b"k", v) + resp_cmd(b"GET", b"k"))
    st = resp_line(b, 10.0)
    got = resp_line(b, 10.0)
    if got == b"$%d" % len(v):
        s2 = _pending.pop(b, b"")
        b.settimeout(10.0)
        while len(s2) < len(v) + 2:
            chunk = b.recv(1 << 20)
            if not chunk:
                break
            s2 += chunk
        got = s2[:len(v)]
    b.close()
    dt = time.monotonic() - t0
    print("the other tenant's SET + GET of 1 MiB beside them: %s in %.1f ms" % (st, dt * 1e3))
    ph.expect(st == b"+OK" and got == v, "the other tenant's SET beside held SETs", st, got[:80])
    if socks:
        s = socks.pop(0)
        s.sendall(b"x" * (big - 1024) + b"\r\n" + resp_cmd(b"EXISTS", b"big0"))
        st = resp_line(s, 20.0)
        n = resp_line(s, 20.0)
        s.close()
        ph.expect(st == b"+OK" and n == b":1", "a held SET completed", st, n)
    for s in socks:
        s.close()
    ph.cases += 1
    ph.probe("held RESP SETs")
resp_share.extra = ["--resp", "127.0.0.1:0"]



@phase
def resp_share_answer(ph):
    """A RESP command whose charges pass its tenant's input share after
    the parse's check (its first window of items, ~21 KiB for an MGET of
    64 keys, is charged as it starts) was answered "-ERR server out of
    memory": the client could not tell its own share (a quarter of
    --max-memory) from the server's budget.  Now the answer names the
    share, as the parse's refusal does.  alice sends, on one connection,
    a DEL of a stored key (answered once its tombstone is durable: 500 ms
    behind a write-down, ssd.debug_write_delay_ms), ECHOs that bring her
    commands in flight near her share (8 MiB of --max-memory 32M), then
    MGETs of 64 keys that step her charges across it (~23 KiB each): one
    lands past the parse's check and short of the items' charge unless it
    falls within the parse's own ~2 KiB, so three rounds shift the fill by
    a third of a step each.  Every answer is read: no "server out of
    memory", at least one refusal naming the share, every MGET otherwise
    answered whole."""
    srv = ph.srv
    R = int(re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(srv.log).read()).group(1))
    keys = [b"k%d" % i for i in range(64)]
    mget = resp_cmd(b"MGET", *keys)
    share = 8 << 20
    got = {}
    for rnd in range(3):
        s = resp_login(R, ALICE, ph.addr())
        s.sendall(resp_cmd(b"SET", b"d%d" % rnd, b"v" * 1000))
        ph.expect(resp_line(s) == b"+OK", "SET")
        echo = 60000
        fill = share - 240 * 1024 + rnd * 7800
        n_echo, last = divmod(fill, echo)
        cmds = [resp_cmd(b"DEL", b"d%d" % rnd)]
        cmds += [resp_cmd(b"ECHO", b"e" * echo)] * n_echo + [resp_cmd(b"ECHO", b"e" * last)]
        cmds += [mget] * 24
        s.sendall(b"".join(cmds))
        ph.expect(resp_line(s, 20) == b":1", "the DEL ahead")
        for k in range(n_echo + 1):
            ln = resp_line(s, 20)
            size = echo if k < n_echo else last
            ok = ln == b"$%d" % size
            if ok:
                body, whole = read_until(s, b"\r\n", 20)
                while len(body) < size + 2:
                    more = s.recv(1 << 20)
                    if not more:
                        break
                    body += more
                _pending[s] = body[size + 2:]
            ph.expect(ok, "an ECHO's answer", ln[:80])
        for k in range(24):
            ln = resp_line(s, 20)
            if ln == b"*64":
                for _ in keys:
                    ph.expect(resp_line(s, 20) == b"$-1", "an MGET's element")
                got["array"] = got.get("array", 0) + 1
            else:
                got[ln] = got.get(ln, 0) + 1
        s.close()
    print("resp_share_answer: 3 rounds of 24 MGETs stepping across the share: %s" % got)
    share_err = b"-ERR the tenant's commands hold its share of the server memory limit " \
                b"(--max-memory); retry later"
    ph.expect(b"-ERR server out of memory" not in got, "a share's refusal said out of memory",
              got)
    ph.expect(got.get(share_err, 0) >= 1, "no refusal naming the share", got)
    ph.expect(set(got) <= {"array", share_err}, "other answers", got)
    ph.cases += 1
    ph.probe("MGETs across the share")
resp_share_answer.extra = ["--resp", "127.0.0.1:0", "--ssd", "64M", "--set", "ssd.segment=4M",
                           "--set", "ssd.admission=always",
                           "--set", "ssd.debug_write_delay_ms=500"]


@phase
def resp_args_share(ph):
    """What a RESP command still arriving holds, in its tenant's input
    share and given back at its connection's close (attack40).  One
    tenant's 40 connections each send "*65536" and one argument: the
    parser's scratch for 65,536 arguments (1.5 MiB each) was charged to
    --max-memory alone, so they held all of a 32 MiB budget while they
    stayed, and another tenant's SET of 1 MB was refused and its
    connection closed.  Now the scratch counts in the tenant's share (a
    quarter of the budget): past it the rest are refused, the other
    tenant is served.  Then a connection of alice's sends 2 MiB of a 4 MiB
    SET and closes; her next such SET, at once on a new connection, was
    refused for 0.4-0.8 s (the closed connection's share given back only
    when it was freed, once a second): now it is taken."""
    srv = ph.srv
    R = resp_port(srv)
    socks = []
    for _ in range(40):
        s = resp_login(R, ALICE, ph.addr())
        s.sendall(b"*65536\r\n$1\r\nx\r\n")
        socks.append(s)
    refused = [resp_line(s, 0.1) for s in held_socks(socks)]
    mem = srv.metric("kvtier_server_memory_bytes")
    print("40 RESP commands of 65536 arguments started: %d held, %d refused; --max-memory "
          "%.1f MiB held" % (len(socks), len(refused), mem / 2 ** 20))
    ph.expect(mem <= 9 << 20, "the scratch held past the tenant's share", mem)
    ph.expect(refused and all(b"share" in a for a in refused), "refusals", refused[:3])
    v = os.urandom(1 << 20)
    b = resp_login(R, BOB, PROBER)
    b.sendall(resp_cmd(b"SET", b"k", v))
    st = resp_line(b, 10.0)
    b.close()
    print("the other tenant's SET of 1 MiB beside them: %s" % st)
    ph.expect(st == b"+OK", "the other tenant's SET beside the started commands", st)
    for s in socks:
        s.close()
    ph.cases += 1
    time.sleep(0.3)  # their scratch given back at their close
    hdr = b"*3\r\n$3\r\nSET\r\n$3\r\ncut\r\n$%d\r\n" % (4 << 20)
    s = resp_login(R, ALICE, ph.addr())
    s.sendall(hdr + b"x" * (2 << 20))
    ph.expect(not held_socks([s], 0.3), "the first cut SET held")
    s.close()
    time.sleep(0.05)
    s = resp_login(R, ALICE, ph.addr())
    s.sendall(hdr + b"x" * 1024)
    answer = [resp_line(a, 0.1) for a in held_socks([s], 0.3)]
    print("a 4 MiB SET at once after a cut one: %s" % (answer or "held"))
    ph.expect(not answer, "a SET after a cut one refused", answer)
    s.close()
    ph.cases += 1
    ph.probe("RESP commands of many arguments started")
resp_args_share.extra = ["--resp", "127.0.0.1:0"]


@phase
def s3_signers(ph):
    """Two tenants sign requests on one connection (a proxy pooling
    connections; the connection's tenant is its latest signer): alice's
    GET answer of 1 MiB is queued and pinned, unread, then a request
    signed by bob comes on the same connection, then everything is read.
    Each answer's pinned bytes go back to the tenant they were counted
    in: bob is served after (attack20h: they were taken off the
    connection's tenant at the time they were written -- bob's count
    wrapped below zero, and every GET of bob was then past
    his pin cap: 503)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/b", body=b"bob's", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    v = os.urandom(6 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/one", body=v), src=PROBER)
    assert st == 200, (st, body)
    for rnd in range(3):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        # a small window: the answer stays queued past the kernel's buffers
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(signed_msg(P, "GET", "/hbkt/one"))
        time.sleep(0.3)
        s.sendall(signed_msg(P, "GET", "/bobbkt/b", who=BOB))
        time.sleep(0.3)
        st1, _, b1 = read_answer(s, 20.0)
        st2, _, b2 = read_answer(s, 20.0)
        s.close()
        ph.expect(st1 == 200 and b1 == v and st2 == 200 and b2 == b"bob's",
                  "two signers on one connection", rnd, st1, len(b1), st2, b2[:100])
        sts = [http(P, signed_msg(P, "GET", "/bobbkt/b", who=BOB), src=PROBER)[0],
               http(P, signed_msg(P, "GET", "/hbkt/one"), src=PROBER)[0]]
        print("round %d: then bob's GET %d, alice's %d" % (rnd, sts[0], sts[1]))
        ph.expect(sts == [200, 200], "GETs after two signers shared a connection", rnd, sts)
    ph.cases += 1


@phase
def resp_pins(ph):
    """The same as s3_pins over RESP: one tenant SETs 10 values of 6 MiB
    (--dram 64M) and GETs each on its own connection, never reading.  A
    connection that pins nothing was read and answered whatever its
    tenant pinned; now its GET of a live value is refused (-ERR) while its
    tenant's replies pin a quarter of --dram, and another tenant's SET of
    8 MiB is served (attack20h: before, 60 MiB pinned, that SET failed)."""
    srv = ph.srv
    R = int(re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(srv.log).read()).group(1))
    big = 6 << 20
    a = resp_login(R, ALICE, PROBER)
    for i in range(10):
        a.sendall(resp_cmd(b"SET", b"pin%d" % i, b"%d" % i * big))
        assert resp_line(a, 20.0) == b"+OK", i
    a.close()
    socks = []
    for i in range(10):
        s = resp_login(R, ALICE, ph.addr())
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(resp_cmd(b"GET", b"pin%d" % i))
        socks.append(s)
    time.sleep(1.0)
    first = []
    for s in socks:
        s.settimeout(5)
        first.append(s.recv(1, socket.MSG_PEEK))
    print("10 unread RESP GETs of 6 MiB values: %d answered, %d refused" % (
        first.count(b"$"), first.count(b"-")))
    ph.expect(first.count(b"$") == 3 and first.count(b"-") == 7, "RESP GETs held", first)
    b = resp_login(R, BOB, PROBER)
    v = os.urandom(8 << 20)
    b.sendall(resp_cmd(b"SET", b"big", v))
    st = resp_line(b, 20.0)
    b.close()
    print("the other tenant's SET of 8 MiB beside them: %s" % st)
    ph.expect(st == b"+OK", "the other tenant's SET beside pinned replies", st)
    for s in socks:
        s.close()
    # (with --ssd 0 the SET evicted what was not pinned: the probe's
    # object is put again)
    setup_bucket(srv, again=True)
    ph.cases += 1
    ph.probe("pinned RESP replies")
resp_pins.extra = ["--resp", "127.0.0.1:0"]


def held_socks(socks, wait=0.5):
    """Of sockets that sent something, those the server answered (or
    closed) within wait seconds: removed from socks and returned."""
    import select
    time.sleep(wait)
    ready = select.select(socks, [], [], 0)[0]
    for s in ready:
        socks.remove(s)
    return ready

# ---------------------------------------------------------------------------
# The metrics listener (--metrics, --metrics-token)

@phase
def metrics(ph):
    import threading
    srv, M = ph.srv, ph.srv.mport
    tok = TOKEN.encode()
    good = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok + b"\r\n\r\n"

    def mc(what, data, st, **kw):
        # one request a connection, always closed after its answer
        return ph.case(what, data, st, port=M, src=kw.pop("src", None) or ph.addr(), **kw)
    mc("/healthz without a token", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200)
    # a HEAD's answer is its headers alone (RFC 9110 9.3.2): HEAD
    # /healthz was answered "ok\n" after them (redhttp, 2026-12-06); its
    # Content-Length is a GET's (/metrics: the page's, was 0).  The case
    # reads none and asserts the close comes next
    for what, data, st in (("HEAD /healthz", b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200),
                           ("HEAD of a path not there",
                            good.replace(b"GET /metrics", b"HEAD /nope"), 404),
                           ("HEAD /metrics", good.replace(b"GET", b"HEAD"), 200)):
        s = socket.create_connection(("127.0.0.1", M), source_address=(ph.addr(), 0))
        s.sendall(data)
        out, _ = read_until(s, b"\0never", 5.0)  # all of it, to the close
        s.close()
        head, _, rest = out.partition(b"\r\n\r\n")
        m = re.search(rb"content-length: *(\d+)", head, re.I)
        ph.expect(head.startswith(b"HTTP/1.1 %d " % st) and rest == b"" and m and
                  (int(m.group(1)) > 1000 or what != "HEAD /metrics"), what, out[:300])
        ph.cases += 1
    # a Host in HTTP/1.1, once (RFC 9112 3.2: 400, as the S3 listener;
    # hostfix: one without was served), none needed in HTTP/1.0
    mc("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n", 400)
    mc("HTTP/1.1, two Host headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
       400)
    mc("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n", 200)
    mc("an empty Host", b"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", 200)
    _, _, body = mc("/metrics with the token", good, 200)
    ph.expect(b"kvtier_connections_active" in body, "the page", body[:200])
    mc("/metrics without a token", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 401)
    mc("a wrong token", b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope"
       b"\r\n\r\n", 401)
    mc("the token and one more character", good.replace(tok, tok + b"x"), 401)
    mc("the token but its last character", good.replace(tok, tok[:-1]), 401)
    mc("Basic, not Bearer", good.replace(b"Bearer ", b"Basic "), 401)
    mc("the token, then a wrong one", good.replace(b"\r\n\r\n", b"\r\nAuthorization: Bearer "
                                                   b"x\r\n\r\n"), 401)
    mc("another path with the token", good.replace(b"/metrics", b"/etc/passwd"), 404)
    mc("another path without it", b"GET /etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 401)
    mc("/metrics/", good.replace(b"/metrics", b"/metrics/"), 404)
    mc("/metrics?x=1", good.replace(b"/metrics", b"/metrics?x=1"), 200)
    mc("absolute-form", good.replace(b"/metrics", b"http://x/metrics"), 404)
    mc("POST", good.replace(b"GET", b"POST").replace(b"\r\n\r\n", b"\r\nContent-Length: 5"
                                                                   b"\r\n\r\nabcde"), 405)
    mc("lower-case get", good.replace(b"GET", b"get"), 405)
    mc("HTTP/2.0", good.replace(b"HTTP/1.1", b"HTTP/2.0"), 400)
    mc("HTTP/0.9", b"GET /healthz\r\n\r\n", 400)
    mc("10,000 headers", b"GET /healthz HTTP/1.1\r\n" + b"a: b\r\n" * 10000 + b"\r\n", 431)
    mc("a header of 64 KiB", b"GET /healthz HTTP/1.1\r\na: " + b"b" * 65536 + b"\r\n\r\n", 431)
    mc("a path of 8 KiB", b"GET /" + b"a" * 8192 + b" HTTP/1.1\r\n\r\n", 431)
    for what, line in (("a space in a name", b"a b: c"), ("a NUL in a value", b"ab: c\0"),
                       ("obs-fold", b"ab: c\r\n d"), ("a name alone", b"ab")):
        mc(what, b"GET /healthz HTTP/1.1\r\n" + line + b"\r\n\r\n", 400)
    # pipelined: the first answered, the rest dropped, closed
    s = socket.create_connection(("127.0.0.1", M), source_address=(ph.addr(), 0))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 50 + good * 50)
    data = b""
    s.settimeout(5)
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    ph.expect(data.count(b"HTTP/1.1 ") == 1 and data.startswith(b"HTTP/1.1 200"),
              "pipelined", data[:200])
    ph.probe("pipelined")
    # Guessing the token is throttled per address with the native, RESP and
    # S3 secrets: past 20 failures in a second, 503 at once, the right token
    # too, until the second is over (was: 3,800 guesses a second, ASan,
    # one client) (attack18)
    # The throttle counts failures per calendar second, so 40 guesses in
    # under a second may straddle its end and see no 503 (a flaky test, not
    # a bug): guess until the first 503 -- in under a second 41 guesses put
    # 21 in one calendar second, so it must come by the 41st -- then the
    # right token, refused in the same second; should the second end just
    # between them, once more.
    guesser = ph.addr()

    def attempt(n):
        t0 = time.monotonic()
        answers = []
        for i in range(41):
            answers.append(http(M, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                   b"guess%d-%012d\r\n\r\n" % (n, i), src=guesser)[0])
            if answers[-1] != 401:
                break
        right = http(M, good, src=guesser)[0]
        dt = time.monotonic() - t0
        print("token guesses in %.3f s: %d answered 401, then %s; the right token then: %d" % (
            dt, answers.count(401), answers[-1], right))
        if dt < 0.9:  # conclusive only inside two calendar seconds
            ph.expect(answers[-1] == 503 and answers.count(401) == len(answers) - 1,
                      "guessing not throttled", answers)
        return right, dt

    right, dt = attempt(0)
    if right != 503:
        right, dt = attempt(1)
    if dt < 0.9:
        ph.expect(right == 503, "the right token served while throttled", right)
    ph.probe("token guesses")
    end = time.monotonic() + 5
    while http(M, good, src=guesser)[0] != 200 and time.monotonic() < end:
        time.sleep(0.1)
    ph.expect(http(M, good, src=guesser)[0] == 200, "the guesser's address served again")
    # slow heads and many connections: the pre-AUTH limits
    res = {}

    def run(what, data, src):
        res[what] = dribble(M, None, data, 0.4, src)
    ths = [threading.Thread(target=run, args=("request line", good, ph.addr())),
           threading.Thread(target=run, args=("headers", b"GET /healthz HTTP/1.1\r\n"
                                              + b"x: y\r\n" * 40, ph.addr()))]
    for t in ths:
        t.start()
    while any(t.is_alive() for t in ths):
        ph.probe("beside slow metrics clients")
        time.sleep(0.5)
    for what, (took, got) in res.items():
        print("metrics: a slow %s closed after %s s" % (what, "%.1f" % took if took else "-"))
        ph.expect(took is not None and took <= 2 * IDLE_S + 2 and not got, "slow " + what, took,
                  got[:100])
    held, refused = hold(M, 300, b"GET /healthz HTTP/1.1\r\n")
    print("metrics: 300 connections from one address: %d held, %d refused" % (len(held),
                                                                            len(refused)))
    ph.expect(len(held) == 256 and len(refused) == 44 and
              all(r.startswith(b"HTTP/1.1 503") for r in refused), "metrics per-address limit",
              len(held), len(refused), refused[:1])
    ph.probe("256 metrics connections held")
    for s in held:
        s.close()
metrics.extra = ["--idle-timeout", str(IDLE_S)]


@phase
def tenant_conns(ph):
    """--tenant-conns 4, counted after authentication across the RESP and
    S3 listeners: one tenant holds 4 RESP connections; its 5th RESP AUTH
    is answered "-ERR max number of clients reached" and closed, its S3
    request 503 SlowDown with Connection: close; the other tenant's RESP
    AUTH and S3 request are served; once one of the 4 closes, the first
    tenant connects again (attack21: before, one tenant could take every
    --max-conns slot)."""
    srv = ph.srv
    m = re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(srv.log).read())
    R, P = int(m.group(1)), srv.port
    held = [resp_login(R, ALICE, ph.addr()) for _ in range(4)]
    s = socket.create_connection(("127.0.0.1", R), source_address=(ph.addr(), 0))
    s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    line = resp_line(s)
    print("the tenant's 5th RESP AUTH: %r" % line)
    ph.expect(line.startswith(b"-ERR max number of clients reached") and
              b"--tenant-conns" in line and closed_after(s), "5th RESP connection", line)
    s.close()
    s, st, hd, body = send(P, signed_msg(P, "GET", "/hbkt/known"), src=ph.addr())
    print("the tenant's S3 request beside them: %d %s" % (st, code_of(body)))
    ph.expect(st == 503 and code_of(body) == "SlowDown" and b"--tenant-conns" in body and
              "connection: close" in hd.lower() and closed_after(s), "S3 past the cap", st,
              hd[:200], body[:300])
    s.close()
    b = resp_login(R, BOB, ph.addr())
    b.sendall(resp_cmd(b"PING"))
    ph.expect(resp_line(b) == b"+PONG", "the other tenant over RESP")
    b.close()
    st, _, body = http(P, signed_msg(P, "GET", "/bobbkt", who=BOB), src=ph.addr())
    ph.expect(st in (200, 404), "the other tenant over S3", st, body[:200])
    held.pop().close()
    end = time.monotonic() + 5
    while True:
        st, _, body = http(P, signed_msg(P, "GET", "/hbkt/known"), src=ph.addr())
        if st == 200 or time.monotonic() > end:
            break
        time.sleep(0.05)
    ph.expect(st == 200 and body == b"known bytes", "the tenant again, one closed", st, body)
    for s in held:
        s.close()
    ph.cases += 1
    end = time.monotonic() + 5
    while srv.metric("kvtier_connections_active") > 1 and time.monotonic() < end:
        time.sleep(0.05)
    ph.probe("a tenant at --tenant-conns")
tenant_conns.extra = ["--resp", "127.0.0.1:0", "--tenant-conns", "4"]


# tenant_table: the tenants table's size (daemon/tstat.c KVTD_TSTAT_MAX),
# and the churned tenants files: 5 of 1,000 new tenants each (a file holds
# at most 1,022: one libkvtier quota group each), 5,000 names past 4,096.
TABLE_MAX = 4096
TABLE_ROUND, TABLE_ROUNDS = 1000, 5
# tenant_table_full: the table's size there (KVTD_TEST_TSTAT_MAX)
TABLE_FULL_MAX = 64


def resp_port(srv):
    return int(re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(srv.log).read()).group(1))


def resp_logins(ph, port, who, batch=64):
    """AUTH as each (name, secret) of who, batch connections at a time,
    each from an address of its own, closed after its answer: the
    answers' first lines, in who's order."""
    out = []
    for i in range(0, len(who), batch):
        socks = []
        for name, secret in who[i:i + batch]:
            s = socket.create_connection(("127.0.0.1", port), source_address=(ph.addr(), 0))
            s.sendall(resp_cmd(b"AUTH", name.encode(), secret.encode()))
            socks.append(s)
        for s in socks:
            out.append(resp_line(s))
            s.close()
    return out


def reload_tenants(srv, who):
    """Rewrite the tenants file with alice, bob and who's (name, secret)
    pairs, SIGHUP, and wait (at most 30 s) until the server says it
    reloaded it."""
    path = os.path.join(os.path.dirname(srv.dir), "tenants")
    with open(path + ".new", "w") as f:
        f.write("".join("%s %s tenant\n" % w for w in [ALICE, BOB] + list(who)))
    os.chmod(path + ".new", 0o600)
    os.replace(path + ".new", path)
    n = open(srv.log).read().count("tenants reloaded")
    srv.p.send_signal(signal.SIGHUP)
    end = time.monotonic() + 30
    while open(srv.log).read().count("tenants reloaded") == n:
        assert time.monotonic() < end, ("no reload", open(srv.log).read()[-300:])
        time.sleep(0.02)


def tenant_metric(srv, family, tenant):
    """family{tenant="tenant"} on /metrics, or None when it has no series."""
    body = srv.metrics()
    m = re.search(rb"^" + family.encode() + rb'\{tenant="' + tenant.encode() + rb'"\} (\S+)$',
                  body, re.M)
    return float(m.group(1)) if m else None


def settle(srv, conns0):
    """Wait (at most 10 s) until the server's connections are back to conns0."""
    end = time.monotonic() + 10
    while srv.metric("kvtier_connections_active") > conns0 and time.monotonic() < end:
        time.sleep(0.05)


def table_entries(srv, most):
    """kvtier_tenant_table_entries once at most most (dead connections
    give their entries back when the loop frees them: within a second of
    closing, loop_reap), or after 10 s, whatever it is then."""
    end = time.monotonic() + 10
    while srv.metric("kvtier_tenant_table_entries") > most and time.monotonic() < end:
        time.sleep(0.05)
    return srv.metric("kvtier_tenant_table_entries")


def tenants(prefix, n):
    return [("%s%d" % (prefix, i), "secret-of-%s-%06d" % (prefix, i)) for i in range(n)]


@phase
def tenant_table(ph):
    """The tenants table (daemon/tstat.c) held 4,096 entries, never freed:
    past 4,096 tenant names over the server's life, a new tenant got no
    entry -- no counters, and no per-tenant limit at all (admitted past
    --tenant-conns, its shares of --max-memory unchecked).  Five tenants
    files of 1,000 new tenants each are loaded in turn (SIGHUP), each
    tenant logging in once over RESP; then a tenant added after them is
    held to --tenant-conns 4 (its 5th AUTH refused) and has its /metrics
    series (before: its 5th admitted, no series), and the table holds
    the file's tenants only (the others' entries freed)."""
    srv = ph.srv
    R = resp_port(srv)
    conns0 = srv.metric("kvtier_connections_active")
    t0 = time.monotonic()
    for rnd in range(TABLE_ROUNDS):
        who = tenants("c%d_" % rnd, TABLE_ROUND)
        reload_tenants(srv, who)
        # the last file's entries freed: room for this one's
        ph.expect(table_entries(srv, 2) <= 2, "round", rnd, "the last file's entries freed")
        got = resp_logins(ph, R, who)
        ph.expect(all(g == b"+OK" for g in got), "logins of round", rnd,
                  [g for g in got if g != b"+OK"][:3])
        settle(srv, conns0)
    late = ("late", "secret-of-late-000000")
    reload_tenants(srv, who + [late])
    churn_s = time.monotonic() - t0
    entries = table_entries(srv, 2 + TABLE_ROUND)
    print("tenant_table: %d tenant names logged in over %d reloads in %.1f s; table entries "
          "%d" % (TABLE_ROUND * TABLE_ROUNDS, TABLE_ROUNDS, churn_s, entries))
    ph.expect(entries <= 2 + TABLE_ROUND, "the earlier files' entries freed", entries)
    held = [resp_login(R, late, ph.addr()) for _ in range(4)]
    for s in held:
        s.sendall(resp_cmd(b"PING"))
        ph.expect(resp_line(s) == b"+PONG", "the late tenant's PING")
    fifth = resp_logins(ph, R, [late])[0]
    print("the late tenant's 5th AUTH: %r" % fifth)
    ph.expect(fifth.startswith(b"-ERR max number of clients reached") and
              b"--tenant-conns" in fifth, "the late tenant past --tenant-conns 4", fifth)
    reqs = tenant_metric(srv, "kvtier_tenant_requests_total", "late")
    ph.expect(reqs is not None and reqs >= 4, "the late tenant's requests on /metrics", reqs)
    for s in held:
        s.close()
    settle(srv, conns0)
    ph.cases += 1
    ph.probe("tenants churned past the table's size")


tenant_table.extra = ["--resp", "127.0.0.1:0", "--tenant-conns", "4"]


@phase
def tenant_table_full(ph):
    """A table full of tenants of the file (KVTD_TEST_TSTAT_MAX 64): the
    logins past it are refused with "tenants table is full" and counted
    (kvtier_connections_tenant_table_refused_total), never admitted
    without limits; a tenant with an entry still logs in; a reload that
    drops those tenants frees their entries, and a new tenant logs in."""
    srv = ph.srv
    R = resp_port(srv)
    conns0 = srv.metric("kvtier_connections_active")
    entries = int(srv.metric("kvtier_tenant_table_entries"))
    room = TABLE_FULL_MAX - entries
    fill = tenants("f_", room + 5)
    reload_tenants(srv, fill)
    refused0 = srv.metric("kvtier_connections_tenant_table_refused_total")
    got = resp_logins(ph, R, fill)
    full = [g for g in got if b"tenants table is full" in g]
    print("tenant_table_full: %d entries, room for %d: %d logins, %d refused (%r)" % (
        entries, room, len(fill), len(full), full[:1]))
    ph.expect(got[:room] == [b"+OK"] * room, "logins while the table has room",
              [g for g in got[:room] if g != b"+OK"][:3])
    ph.expect(len(full) == 5 and all(g.startswith(b"-ERR") for g in full),
              "logins past the table refused", got[room:])
    ph.expect(srv.metric("kvtier_connections_tenant_table_refused_total") - refused0 == 5,
              "the refusals counted")
    ph.expect(resp_logins(ph, R, fill[:1]) == [b"+OK"], "a tenant with its entry, again")
    settle(srv, conns0)
    ph.cases += 1
    newer = ("newer", "secret-of-newer-000000")
    reload_tenants(srv, [newer])
    entries = table_entries(srv, 2)
    ph.expect(entries <= 2, "the dropped tenants' entries freed", entries)
    s = resp_login(R, newer, ph.addr())
    s.sendall(resp_cmd(b"PING"))
    ph.expect(resp_line(s) == b"+PONG", "a tenant after the table was full")
    s.close()
    ph.cases += 1
    ph.probe("a full tenants table")


tenant_table_full.extra = ["--resp", "127.0.0.1:0"]
tenant_table_full.env = {"KVTD_TEST_TSTAT_MAX": str(TABLE_FULL_MAX)}


@phase
def s3_grant_ssd(ph):
    """bob reads alice's bucket by a grant: his GETs are quiet, and an
    object on SSD only is read whole into a private copy for each of them
    (doc/security.md "Cross-tenant probing").  bob pipelines 4 GETs of
    alice's 4 MiB objects (SSD only: her DRAM quota is 8 MiB) on each of 16
    connections and reads nothing.  The copies are charged to --max-memory
    (at most a quarter a tenant held, 4 of a tenant's in the store at once,
    503 SlowDown past that), so the server's RSS stays within --max-memory
    plus a margin, and alice is served beside them (before: 64 copies of 4
    MiB read at once, outside the budget)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/shared"), src=PROBER)
    assert st == 200, (st, body)
    n, size = 12, 4 << 20

    for i in range(n):
        srv.put_written("/shared/o%d" % i, bytes([i]) * size)
    srv.written_down()
    time.sleep(0.5)
    rss0 = srv.rss_kib()
    peak, peak_mem, socks = rss0, 0.0, []
    # signed first, sent together: the reads reach the store at once
    msgs = [b"".join(signed_msg(P, "GET", "/alice.shared/o%d" % ((4 * c + j) % n), who=BOB)
                     for j in range(4)) for c in range(16)]
    for c in range(16):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        socks.append(s)
    for s, m in zip(socks, msgs):
        s.sendall(m)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        peak = max(peak, srv.rss_kib())
        peak_mem = max(peak_mem, srv.metric("kvtier_server_memory_bytes"))
        time.sleep(0.02)
    # alice is served beside them
    t0 = time.monotonic()
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/small", body=b"small"), src=PROBER)
    ph.expect(st == 200, "alice's PUT beside bob's copies", st, body[:200])
    st, _, body = http(P, signed_msg(P, "GET", "/hbkt/known"), src=PROBER)
    ph.expect(st == 200 and body == b"known bytes", "alice's GET beside bob's copies", st)
    dt = time.monotonic() - t0
    got = {}
    for s in socks:
        s.settimeout(5)
        try:
            got[s] = int(s.recv(12, socket.MSG_PEEK).split(b" ")[1])
        except (OSError, IndexError, ValueError):
            got[s] = 0
    refused = srv.metric("kvtier_server_copy_refused_total")
    print("16 x 4 unread GETs of another tenant's 4 MiB objects on SSD only: RSS +%d MiB "
          "(peak), mem_used peak %.1f MiB, first answers %s, copy_refused %d; alice's PUT "
          "and GET beside them %.0f ms" % ((peak - rss0) >> 10, peak_mem / 2**20,
                                           sorted(got.values()), refused, dt * 1e3))
    # --max-memory (32 MiB) plus the copies in the store (4 x 4 MiB) and
    # ASan's quarantine (32 MiB) and slack
    ph.expect((peak - rss0) << 10 <= (32 + 16 + 32 + 16) << 20, "RSS grew",
              (peak - rss0) >> 10)
    ph.expect(peak_mem <= 32 << 20, "mem_used", peak_mem)
    ph.expect(all(v in (200, 503) for v in got.values()), "bob's answers", got.values())
    for s in socks:
        s.close()
    # once they are gone, a GET of bob's reads the object, exact
    end = time.monotonic() + 5
    while srv.metric("kvtier_connections_active") > 2 and time.monotonic() < end:
        time.sleep(0.1)
    st, hd, body = http(P, signed_msg(P, "GET", "/alice.shared/o5", who=BOB), src=PROBER,
                        timeout=20)
    ph.expect(st == 200 and body == bytes([5]) * size, "bob's GET after", st, len(body))
    st, hd, body = http(P, signed_msg(P, "HEAD", "/alice.shared/o6", who=BOB), src=PROBER)
    ph.expect(st == 200, "bob's HEAD after", st)
    ph.cases += 1
    ph.probe("grantee copies")


s3_grant_ssd.extra = ["--dram", "512M", "--ssd", "256M", "--set", "ssd.segment=16M", "--set", "ssd.admission=always"]
s3_grant_ssd.tenants = ("alice %s tenant dram=8M\nbob %s tenant\n"
                        "grant alice model=s3/shared to bob\n" % (ALICE[1], BOB[1]))


@phase
def s3_copy_loop(ph):
    """One tenant pipelines CopyObjects of a 32 MiB object to one key, 64
    on each of 4 connections: a head of a few hundred bytes costs the
    object's size in loop time (a DRAM reservation faulted in, a memcpy,
    two CRC32C passes).  A loop now assembles at most 16 MiB an iteration
    (the first always), the rest in later iterations, so another tenant's
    GET beside them waits for about one copy (before: 129 copies in one
    go, the GET waited 1.2-4.5 s).  Copies of one key racing are "a
    concurrent write", 503, as S3 would refuse one of them."""
    srv, P = ph.srv, ph.srv.port
    size = 32 << 20
    src = os.urandom(size)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/src", body=src), src=PROBER, timeout=30)
    assert st == 200, (st, body[:200])
    st, _, body = http(P, signed_msg(P, "PUT", "/bobcopy", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobcopy/k", body=b"bob", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    msg = signed_msg(P, "PUT", "/hbkt/dst", extra={"x-amz-copy-source": "/hbkt/src"})
    socks = [socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
             for _ in range(4)]
    for s in socks:
        s.sendall(msg * 64)
    lat = []
    for _ in range(15):
        t0 = time.monotonic()
        st, _, body = http(P, signed_msg(P, "GET", "/bobcopy/k", who=BOB), src=PROBER,
                           timeout=30)
        lat.append(time.monotonic() - t0)
        ph.expect(st == 200 and body == b"bob", "bob's GET beside the copies", st)
        time.sleep(0.02)
    sts, codes = [], set()
    for s in socks:
        for _ in range(64):
            st, _, body = read_answer(s, 60)
            sts.append(st)
            if st != 200:
                codes.add((st, code_of(body), b"concurrent write" in body))
        s.close()
    print("256 pipelined CopyObjects of a 32 MiB object on 4 connections: %d answered 200, "
          "others %s; another tenant's GET beside them: max %.0f ms, %s" % (
              sts.count(200), codes, max(lat) * 1e3, [round(x * 1e3) for x in lat]))
    ph.expect(sts.count(200) >= 4 and codes <= {(503, "SlowDown", True)}, "the copies",
              sts.count(200), codes)
    ph.expect(max(lat) <= PROBE_MAX_S, "bob's GET beside the copies, max (s)", max(lat))
    st, _, body = http(P, signed_msg(P, "GET", "/hbkt/dst"), src=PROBER, timeout=30)
    ph.expect(st == 200 and body == src, "a copy's bytes", st, len(body))
    for k in ("dst", "src"):
        http(P, signed_msg(P, "DELETE", "/hbkt/" + k), src=PROBER)
    ph.cases += 1
    ph.probe("pipelined copies")


# (its DRAM tier holds the copies being made: RSS grows with it)
s3_copy_loop.extra = ["--dram", "256M"]
s3_copy_loop.dram_mib = 256

@phase
def s3_stop_deferred(ph):
    """The server stops while CopyObjects wait for a later loop iteration
    (review26): pipelined copies of a 32 MiB object, 16 on each of 4
    connections, one assembled an iteration and the others waiting in the
    aux thread's mailbox with their source pinned; with --shutdown-timeout
    0 the loop leaves them there, and kvtd_loops_finish takes them back
    after kvt_store_close, which freed the source's views.  The server
    must exit 0 with no sanitizer report (restart: stop() checks both)."""
    srv, P = ph.srv, ph.srv.port
    src = os.urandom(32 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/src", body=src), src=PROBER, timeout=30)
    assert st == 200, (st, body[:200])
    msg = signed_msg(P, "PUT", "/hbkt/dst", extra={"x-amz-copy-source": "/hbkt/src"})
    socks = [socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
             for _ in range(4)]
    for s in socks:
        s.sendall(msg * 16)
    time.sleep(0.3)
    srv.restart(between=lambda: [s.close() for s in socks])
    setup_bucket(srv, again=True)
    ph.cases += 1


s3_stop_deferred.extra = ["--dram", "256M", "--shutdown-timeout", "0"]
s3_stop_deferred.dram_mib = 256


def bob_gets(ph, port, path, what, pause):
    """30 of bob's GETs of path (its value b"bob"), each checked, from
    PROBER; their latencies in seconds."""
    lat = []
    for _ in range(30):
        t0 = time.monotonic()
        st, _, body = http(port, signed_msg(port, "GET", path, who=BOB), src=PROBER,
                           timeout=30)
        lat.append(time.monotonic() - t0)
        ph.expect(st == 200 and body == b"bob", what, st)
        time.sleep(pause)
    return lat


@phase
def s3_delete_loop(ph):
    """One tenant pipelines DeleteObjects of 1,000 keys each (37 KB of XML:
    a parse, then a SHA-256 and a store request a key), 10 on each of 48
    connections, beside another tenant's GETs.  Each counted as one
    request in the loop's budgets: a loop now parses and deletes at most
    about 4,096 keys' worth an iteration (s3ops.c "Work on the loop"), the
    rest in later iterations (before: another tenant's GET waited about a
    second)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobdel", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobdel/k", body=b"bob", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/k000007", body=b"seven"), src=PROBER)
    assert st == 200, (st, body)
    xml = (b"<Delete><Quiet>true</Quiet>" + b"".join(b"<Object><Key>k%06d</Key></Object>" % i
                                                    for i in range(1000)) + b"</Delete>")
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    msg = signed_msg(P, "POST", "/hbkt", query="delete", body=xml, extra={"content-md5": md5})
    socks = [socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
             for _ in range(48)]
    feeders = [threading.Thread(target=s.sendall, args=(msg * 10,)) for s in socks]
    for f in feeders:
        f.start()
    lat = bob_gets(ph, P, "/bobdel/k", "bob's GET beside the deletes", 0.02)
    sts, codes = [], set()
    for s, f in zip(socks, feeders):
        for _ in range(10):
            st, _, body = read_answer(s, 60)
            sts.append(st)
            if st != 200:
                codes.add((st, code_of(body)))
                break  # a 503 from the head closes the connection
        f.join()
        s.close()
    print("480 pipelined DeleteObjects of 1,000 keys on 48 connections: %d answered 200, "
          "then %s; another tenant's GET beside them: max %.0f ms, %s" % (
              sts.count(200), codes, max(lat) * 1e3, [round(x * 1e3) for x in lat]))
    # (past the tenant's input share, a quarter of --max-memory: 503)
    ph.expect(sts.count(200) >= 48 and codes <= {(503, "SlowDown")}, "the deletes",
              sts.count(200), codes)
    ph.expect(max(lat) <= 0.5, "bob's GET beside the deletes, max (s)", max(lat))
    st, _, body = http(P, signed_msg(P, "GET", "/hbkt/k000007"), src=PROBER)
    ph.expect(st == 404, "a key deleted", st)
    ph.cases += 1
    ph.probe("pipelined deletes")


@phase
def s3_grant_list(ph):
    """bob lists alice's bucket by a grant: a listing reads each object's
    header, and a grantee's read is quiet.  It reads part 0 alone now (a
    quiet part get: s3ops.c "Header reads"), nothing copied or charged:
    copy_refused stays 0 and his listings are answered as fast as hers.
    Until 2026-12-04 an object on SSD only was read whole into a private
    copy, 2 at a time (4 before that), each taking a quiet slot and
    charged to --max-memory (with alice's 6 MiB objects, 8 MiB a
    connection, a window's second copy was over, let go and read again:
    52 listings in 3 s on 2 connections); before that, charged to nothing.
    alice's own listing read her headers by promoting her objects, which
    her full DRAM quota refused: those keys were left out (1 of 8 listed),
    then read again quietly; a quiet part get needs no DRAM room.  HEAD
    answers the same headers to the owner and the grantee."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/shared"), src=PROBER)
    assert st == 200, (st, body)
    n, size = 8, 6 << 20

    for i in range(n):
        srv.put_written("/shared/d%d/o%02d" % (i % 2, i), bytes([i]) * size,
                        {"content-type": "application/x-o%d" % i})
    srv.written_down()
    time.sleep(0.5)
    queries = ["list-type=2", "", "delimiter=%2F&list-type=2", "list-type=2&max-keys=5",
               "marker=d0%2Fo04"]

    def listing(who, q):
        path = "/shared" if who is ALICE else "/alice.shared"
        st, _, body = http(P, signed_msg(P, "GET", path, query=q, who=who), src=PROBER,
                           timeout=20)
        return st, body.replace(b"<Name>alice.shared</Name>", b"<Name>shared</Name>")
    own = {q: listing(ALICE, q) for q in queries}
    for q, (st, body) in own.items():
        assert st == 200 and (b"<Key>" in body or b"<Prefix>d" in body), (q, st, body[:300])
    # (before, her header reads promoted, and with her DRAM quota full of
    # blocks being written down they missed: 1 key of 8 listed)
    keys = re.findall(rb"<Key>([^<]*)</Key>", own["list-type=2"][1])
    ph.expect(len(keys) == n, "alice's listing of her objects on SSD only", keys)
    refused0 = srv.metric("kvtier_server_copy_refused_total")
    for q in queries:
        st, body = listing(BOB, q)
        ph.expect(st == 200 and body == own[q][1], "bob's listing " + (q or "v1"), st,
                  body[:300])
    refused = srv.metric("kvtier_server_copy_refused_total") - refused0
    # headers alone: no copies (before: 4 copies of 6 MiB at once were over
    # the connection's 8 MiB, let go and read again)
    ph.expect(refused == 0, "copies of whole objects for a listing (copy_refused)", refused)
    # HEAD: the same headers to the owner and the grantee
    def head(who, path):
        st, hd, _ = http(P, signed_msg(P, "HEAD", path, who=who), src=PROBER)
        return st, [ln for ln in hd.split("\r\n")[1:]
                    if not ln.lower().startswith(("date:", "x-amz-request-id:"))]
    ha, hb = head(ALICE, "/shared/d1/o03"), head(BOB, "/alice.shared/d1/o03")
    ph.expect(ha[0] == 200 and ha == hb, "HEAD's headers, owner and grantee", ha, hb)
    # bob's listings on 2 connections again and again: within --max-memory,
    # every answer whole (or 503 where a listing slot was not yet free)
    peak_mem, sts, stop = 0.0, [], time.monotonic() + 3

    def lister():
        while time.monotonic() < stop:
            st, body = listing(BOB, "list-type=2")
            sts.append(st)
            if st == 200 and body != own["list-type=2"][1]:
                sts.append("diff")
    ts = [threading.Thread(target=lister) for _ in range(2)]
    for t in ts:
        t.start()
    while time.monotonic() < stop:
        peak_mem = max(peak_mem, srv.metric("kvtier_server_memory_bytes"))
        time.sleep(0.01)
    for t in ts:
        t.join()
    print("bob's listings of alice's %d objects of %d MiB on SSD only: copy_refused %d alone; "
          "%d listings on 2 connections in 3 s: %s; mem_used peak %.1f MiB" % (
              n, size >> 20, refused, len(sts), sorted(set(sts), key=str), peak_mem / 2**20))
    ph.expect(sts.count(200) > 0 and set(sts) <= {200, 503}, "bob's listings", set(sts))
    ph.expect(peak_mem <= 32 << 20, "mem_used", peak_mem)
    ph.cases += 1
    ph.probe("grantee listings")


s3_grant_list.extra = s3_grant_ssd.extra
s3_grant_list.tenants = s3_grant_ssd.tenants


def _hdr(head, name):
    m = re.search(r"\r\n" + name + r": *([^\r]*)", head, re.I)
    return m.group(1) if m else None


@phase
def s3_head_ssd(ph):
    """HEAD and listings read an object's header alone (its part 0, with a
    quiet part get: s3ops.c "Header reads").  alice puts 32 objects of 1
    MiB and 128 of 4 KiB in her bucket `shared`, granted to bob (a page
    of 160 keys: two windows of header reads), and 2 more to corrupt; the
    server is restarted, so that they are on SSD only, with DRAM empty and
    room in it.  Then:
      - a corrupted part 0 (a byte of its content type flipped in the
        segment file) is a miss: 404 to bob's HEAD and alice's, never
        other bytes, and left out of a listing;
      - alice's ListObjectsV2 lists the 160 with the sizes and ETags
        their PUTs answered and leaves DRAM as it was (before: each listed
        object on SSD only was promoted whole: 32.5 MiB pulled into DRAM,
        evicting what was hot there), and bob's listing says the same;
      - bob HEADs the 32 at once, 4 pipelined on each of 8 connections:
        all 200 with their Content-Length and ETag (before: each a whole
        private copy, 4 a tenant at once, the rest 503 SlowDown), nothing
        changed in DRAM, nothing refused (copy_refused);
      - alice's HEADs of the 160 leave DRAM as it was (before: each
        promoted its object whole)."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/shared"), src=PROBER)
    assert st == 200, (st, body)
    n, size = 32, 1 << 20
    marks = [b"application/x-corrupt-me-%d" % j for j in range(2)]


    def put(name, data, ctype):
        return _hdr(srv.put_written("/shared/" + name, data, {"content-type": ctype}), "etag")
    etags, sizes = {}, {}
    for i in range(n):
        etags["o%02d" % i] = put("o%02d" % i, bytes([i]) * size, "application/x-o%d" % i)
        sizes["o%02d" % i] = size
    for i in range(128):
        etags["s%03d" % i] = put("s%03d" % i, b"s%03d" % i * 1024, "text/plain")
        sizes["s%03d" % i] = 4096
    for j, m in enumerate(marks):
        put("zc%d" % j, b"c" * size, m.decode())
    srv.written_down()

    def corrupt():
        hit = [0, 0]
        for root, _, files in os.walk(srv.dir):
            for f in files:
                path = os.path.join(root, f)
                with open(path, "r+b") as fh:
                    data = fh.read()
                    for j, m in enumerate(marks):
                        at = data.find(m)
                        while at >= 0:
                            fh.seek(at + len(b"application/"))
                            fh.write(b"y")  # x -> y: the header's CRC no longer holds
                            hit[j] += 1
                            at = data.find(m, at + 1)
        assert hit[0] >= 1 and hit[1] >= 1, ("the headers to corrupt not found", hit)
    srv.restart(corrupt)
    P = srv.port

    def dram():
        return (srv.metric("kvtier_dram_blocks"), srv.metric("kvtier_dram_used_bytes"))

    def head(who, name):
        path = ("/shared/" if who is ALICE else "/alice.shared/") + name
        return http(P, signed_msg(P, "HEAD", path, who=who), src=PROBER)
    # the corrupted headers: a miss, whoever reads, never other bytes
    crc0 = srv.metric("kvtier_ssd_crc_errors_total")
    st_b, hd_b, _ = head(BOB, "zc0")
    st_a, hd_a, _ = head(ALICE, "zc1")
    crc = srv.metric("kvtier_ssd_crc_errors_total") - crc0
    print("HEADs of objects whose part 0 is corrupted on SSD: bob %d, alice %d; "
          "ssd crc_errors +%d" % (st_b, st_a, crc))
    ph.expect(st_b == 404 and st_a == 404, "HEADs of corrupted headers", st_b, hd_b, st_a, hd_a)
    ph.expect(crc >= 2, "the corruptions found by their CRC", crc)
    for j in range(2):
        st, _, body = http(P, signed_msg(P, "GET", "/shared/zc%d" % j), src=PROBER)
        ph.expect(st == 404, "GET of a corrupted object", j, st, body[:100])

    def listing(who):
        path = "/shared" if who is ALICE else "/alice.shared"
        st, _, body = http(P, signed_msg(P, "GET", path, query="list-type=2", who=who),
                           src=PROBER, timeout=20)
        return st, body.replace(b"<Name>alice.shared</Name>", b"<Name>shared</Name>")
    # alice's listing: every object, nothing promoted
    d0, out0 = dram(), srv.metric("kvtier_ssd_bytes_out_total")
    t0 = time.monotonic()
    st, own = listing(ALICE)
    dt = time.monotonic() - t0
    d1, out1 = dram(), srv.metric("kvtier_ssd_bytes_out_total")
    got = {k.decode(): (e.decode().replace("&quot;", '"'), int(z)) for k, e, z in re.findall(
        rb"<Key>([^<]*)</Key><LastModified>[^<]*</LastModified><ETag>([^<]*)</ETag>"
        rb"<Size>(\d+)</Size>", own)}
    print("alice's listing of %d objects on SSD only: %d listed in %.0f ms; DRAM "
          "blocks %d -> %d, used %d -> %d B; SSD bytes out +%d" % (
              len(etags), len(got), dt * 1e3, d0[0], d1[0], d0[1], d1[1], out1 - out0))
    ph.expect(st == 200 and got == {k: (e, sizes[k]) for k, e in etags.items()},
              "alice's listing: every object, its size and ETag", st, got, etags)
    ph.expect(d1 == d0, "DRAM after alice's listing (nothing promoted)", d0, d1)
    st, theirs = listing(BOB)
    ph.expect(st == 200 and theirs == own, "bob's listing", st, theirs[:300])
    ph.expect(dram() == d0, "DRAM after bob's listing", d0, dram())
    # bob's HEADs, 32 at once on 8 connections
    refused0, rss0 = srv.metric("kvtier_server_copy_refused_total"), srv.rss_kib()
    names = sorted(etags)[:32]  # the objects of 1 MiB
    msgs = [b"".join(signed_msg(P, "HEAD", "/alice.shared/" + names[4 * c + j], who=BOB)
                     for j in range(4)) for c in range(8)]
    socks = [socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
             for _ in range(8)]
    for s, m in zip(socks, msgs):
        s.sendall(m)
    answers = {}
    for c, s in enumerate(socks):
        for j in range(4):
            st, hd, _ = read_answer(s, 10, no_body=True)
            answers[names[4 * c + j]] = (st, _hdr(hd, "etag"), _hdr(hd, "content-length"))
        s.close()
    refused = srv.metric("kvtier_server_copy_refused_total") - refused0
    rss = srv.rss_kib()
    print("bob's 32 HEADs at once on 8 connections: %s; copy_refused +%d; RSS %+d KiB; DRAM "
          "blocks %d" % (sorted(set(a[0] for a in answers.values())), refused, rss - rss0,
                         dram()[0]))
    ph.expect(answers == {k: (200, etags[k], str(size)) for k in names},
              "bob's HEADs: 200, their ETag and Content-Length", answers)
    ph.expect(refused == 0, "bob's HEADs refused (copy_refused)", refused)
    ph.expect((rss - rss0) << 10 <= 16 << 20, "RSS grew", rss - rss0)
    ph.expect(dram() == d0, "DRAM after bob's HEADs", d0, dram())
    # alice's HEADs: the same answers, nothing promoted
    for name in sorted(etags):
        st, hd, _ = head(ALICE, name)
        ph.expect(st == 200 and _hdr(hd, "etag") == etags[name] and
                  _hdr(hd, "content-length") == str(sizes[name]), "alice's HEAD", name, st, hd)
    ph.expect(dram() == d0, "DRAM after alice's HEADs (nothing promoted)", d0, dram())
    # and her GET still reads the object whole (promoted, as any read)
    st, _, body = http(P, signed_msg(P, "GET", "/shared/o07"), src=PROBER, timeout=20)
    ph.expect(st == 200 and body == bytes([7]) * size, "alice's GET", st, len(body))
    ph.cases += 1
    ph.probe("header reads")


s3_head_ssd.extra = ["--dram", "512M", "--ssd", "256M", "--set", "ssd.segment=16M",
                     "--set", "ssd.admission=always"]
s3_head_ssd.tenants = s3_grant_ssd.tenants.replace(" dram=8M", "")


LIST_TENANTS = ["t%02d" % i for i in range(16)]


def _tenant(name):
    return (name, "secret-of-%s-0123456789" % name)


@phase
def s3_list_mem(ph):
    """Many tenants' listings at once of objects on SSD only: each reads
    the objects' headers, S3D_LIST_WIN quiet part gets at a time, and a
    read from SSD holds the library's state and buffer (~5 KiB) until it
    completes.  A tenant has 2 listings at once, but nothing bounds the
    tenants: 16 grantees list alice's bucket of 600 objects (restarted:
    on SSD only), 2 connections each, again and again for 3 s (or
    until 4 MiB of reads were in flight at once, 20 s at most).  Every
    window is charged to --max-memory while in the store (s3ops.c "Header
    reads"): /metrics, sampled meanwhile, shows what the library holds
    beyond its idle state (kvtier_meta_bytes) within the window charges
    (kvtier_server_s3_header_reads_bytes), and the server's charge within
    --max-memory; every answer is the owner's listing, or 503 SlowDown.
    Before (2026-12-04) the reads were charged nowhere: 5.5-16.3 MiB seen
    held in the store at once beyond any charge."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/shared"), src=PROBER)
    assert st == 200, (st, body)
    n = 600

    for i in range(n):
        srv.put_written("/shared/o%04d" % i, b"%04d" % i * 1024)
    srv.written_down()
    srv.restart()
    P = srv.port

    def listing(who):
        path = "/shared" if who is ALICE else "/alice.shared"
        st, _, body = http(P, signed_msg(P, "GET", path, query="list-type=2", who=who),
                           src=PROBER, timeout=30)
        return st, body.replace(b"<Name>alice.shared</Name>", b"<Name>shared</Name>")
    st, own = listing(ALICE)
    keys = re.findall(rb"<Key>([^<]*)</Key>", own)
    assert st == 200 and len(keys) == n, (st, len(keys), own[:300])

    def scrape():
        body = srv.metrics()
        got = {}
        for name in ("kvtier_meta_bytes", "kvtier_server_s3_header_reads_bytes",
                     "kvtier_server_memory_bytes", "kvtier_server_memory_limit_bytes"):
            m = re.search(rb"^" + name.encode() + rb" (\S+)$", body, re.M)
            got[name] = float(m.group(1)) if m else 0.0  # (none before 2026-12-04)
        return got
    m0 = scrape()
    sts, stop = [], []

    def lister(who):
        while not stop:
            st, body = listing(who)
            sts.append(st if st != 200 or body == own else "diff")
    ts = [threading.Thread(target=lister, args=(_tenant(t),))
          for t in LIST_TENANTS for _ in range(2)]
    for t in ts:
        t.start()
    # 3 s, and on until 4 MiB of reads were seen in flight at once (a
    # loaded machine's listings may overlap less), 20 s at most
    held = over = peak_mem = charged = 0.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 or (held < 4 << 20 and time.monotonic() - t0 < 20):
        m = scrape()
        lib = m["kvtier_meta_bytes"] - m0["kvtier_meta_bytes"]
        held = max(held, lib)
        over = max(over, lib - m["kvtier_server_s3_header_reads_bytes"])
        peak_mem = max(peak_mem, m["kvtier_server_memory_bytes"])
        charged = max(charged, m["kvtier_server_s3_header_reads_bytes"])
        time.sleep(0.005)
    dt = time.monotonic() - t0
    stop.append(True)
    for t in ts:
        t.join()
    print("%d tenants' listings of %d objects on SSD only, 2 connections each, %.1f s: %d "
          "answers %s (%s); held in the store at most %.1f MiB, beyond the window charges "
          "%.1f MiB; window charges at most %.1f MiB; mem_used peak %.1f MiB of %.0f" % (
              len(LIST_TENANTS), n, dt, len(sts), sorted(set(sts), key=str),
              ", ".join("%s: %d" % (k, sts.count(k)) for k in sorted(set(sts), key=str)),
              held / 2**20, over / 2**20, charged / 2**20, peak_mem / 2**20,
              m0["kvtier_server_memory_limit_bytes"] / 2**20))
    ph.expect(sts.count(200) >= len(ts) and set(sts) <= {200, 503}, "the listings",
              sorted(set(sts), key=str))
    # (meaningful only with many reads in flight at once)
    ph.expect(held >= 4 << 20, "header reads in flight at once (bytes held)", held)
    # slack: the library's other allocations meanwhile
    ph.expect(over <= 1 << 20, "what the store holds for listings beyond their charge", over)
    ph.expect(peak_mem <= m0["kvtier_server_memory_limit_bytes"], "mem_used", peak_mem)
    left = scrape()["kvtier_server_s3_header_reads_bytes"]
    ph.expect(left == 0, "window charges left after the listings", left)
    ph.cases += 1
    ph.probe("listings of many tenants")


s3_list_mem.extra = ["--dram", "256M", "--ssd", "256M", "--set", "ssd.segment=16M",
                     "--set", "ssd.admission=always", "--max-memory", "128M"]
s3_list_mem.tenants = ("alice %s tenant\n" % ALICE[1] + "".join(
    "%s %s tenant\ngrant alice model=s3/shared to %s\n" % (t, _tenant(t)[1], t)
    for t in LIST_TENANTS))
s3_list_mem.dram_mib = 256


@phase
def s3_buckets_ssd(ph):
    """ListBuckets answers from the namespace registry (s3ops.c
    s3d_list_buckets).  alice creates 48 buckets, bob 2; the server is
    restarted, DRAM empty.  alice's ListBuckets lists all 48 (and bob's
    his 2) without reading anything: no SSD part read, DRAM as it was.
    (Until 2026-12-06 each bucket's 8-byte marker block was read, one SSD
    part read each; until 2026-12-04 a quiet pinned get, a whole private
    copy of its block.)"""
    srv, P = ph.srv, ph.srv.port
    mine = ["bk%02d" % i for i in range(48)]
    for name in mine:
        st, _, body = http(P, signed_msg(P, "PUT", "/" + name), src=PROBER)
        assert st == 200, (name, st, body)
    for name in ("bob1", "bob2"):
        st, _, body = http(P, signed_msg(P, "PUT", "/" + name, who=BOB), src=PROBER)
        assert st == 200, (name, st, body)
    end = time.monotonic() + 30
    while srv.metric("kvtier_ssd_writedown_pending_bytes") > 0 and time.monotonic() < end:
        time.sleep(0.05)
    srv.restart(lambda: None)
    P = srv.port

    def dram():
        return (srv.metric("kvtier_dram_blocks"), srv.metric("kvtier_dram_used_bytes"))

    def buckets(who):
        st, _, body = http(P, signed_msg(P, "GET", "/", who=who), src=PROBER, timeout=20)
        return st, sorted(n.decode() for n in re.findall(rb"<Bucket><Name>([^<]*)</Name>", body))
    d0, parts0 = dram(), srv.metric("kvtier_ssd_part_reads_total")
    st_a, got_a = buckets(ALICE)
    parts = srv.metric("kvtier_ssd_part_reads_total") - parts0
    d1 = dram()
    st_b, got_b = buckets(BOB)
    print("ListBuckets of 48 buckets after a restart: %d, %d listed; SSD part "
          "reads +%d; DRAM blocks %d -> %d, used %d -> %d B; bob's: %d, %s" % (
              st_a, len(got_a), parts, d0[0], d1[0], d0[1], d1[1], st_b, got_b))
    ph.expect(st_a == 200 and got_a == sorted(mine + ["hbkt"]), "alice's ListBuckets", st_a,
              got_a)  # hbkt: every phase's (setup_bucket)
    ph.expect(st_b == 200 and got_b == ["bob1", "bob2"], "bob's ListBuckets", st_b, got_b)
    ph.expect(parts == 0, "nothing read from SSD", parts)
    ph.expect(d1 == d0 and dram() == d0, "DRAM after the listings", d0, d1, dram())
    ph.cases += 1
    ph.probe("bucket listings")


s3_buckets_ssd.extra = s3_head_ssd.extra
s3_buckets_ssd.tenants = s3_head_ssd.tenants


def _buckets(srv, who=ALICE):
    """who's ListBuckets: status and {name: CreationDate}."""
    st, _, body = http(srv.port, signed_msg(srv.port, "GET", "/", who=who), src=PROBER)
    return st, {n.decode(): d.decode() for n, d in re.findall(
        rb"<Bucket><Name>([^<]*)</Name><CreationDate>([^<]*)</CreationDate>", body)}


def _bucket_works(ph, name, when, dates):
    """HeadBucket 200, listed with its creation date as before, and a PUT
    and GET of a new object in it."""
    srv, P = ph.srv, ph.srv.port
    st_h, _, _ = http(P, signed_msg(P, "HEAD", "/" + name), src=PROBER)
    st_l, got = _buckets(srv)
    body = os.urandom(3000)
    st_p, _, _ = http(P, signed_msg(P, "PUT", "/%s/after" % name, body=body), src=PROBER)
    st_g, _, back = http(P, signed_msg(P, "GET", "/%s/after" % name), src=PROBER)
    print("%s: HeadBucket %d, ListBuckets %d %s, PutObject %d, GetObject %d" % (
        when, st_h, st_l, sorted(got), st_p, st_g))
    ph.expect(st_h == 200, "HeadBucket " + when, st_h)
    ph.expect(st_l == 200 and got.get(name) == dates.get(name), "ListBuckets " + when,
              st_l, got, dates)
    ph.expect(st_p == 200 and st_g == 200 and back == body, "PUT and GET " + when, st_p,
              st_g)
    ph.cases += 1


@phase
def s3_bucket_kept(ph):
    """A bucket is the namespace registry's record, not a block: it
    outlives the SSD log's wrap and a restart.  alice creates `keep` (and
    `gone`, deleted at once); bob puts 64 objects of 256 KiB, so that 16
    MiB go down to the 4 MiB SSD (the log wraps 4 times, every segment
    reclaimed: overwrites of one key cancelled write-downs, fewer bytes
    went down); restart (DRAM empty).  `keep` answers HeadBucket
    200, is listed with the same CreationDate, takes a PUT and a GET;
    `gone` stays gone.  Until 2026-12-06 a bucket existed while its 8-byte
    marker block did, and the marker, never read, left with the first
    segment the log reclaimed: NoSuchBucket after the restart (seen 18 MiB
    into uploads on a 256 MiB SSD beside another tenant's overwrites)."""
    srv, P = ph.srv, ph.srv.port
    for who, b in ((ALICE, "/keep"), (ALICE, "/gone"), (BOB, "/churn")):
        st, _, body = http(P, signed_msg(P, "PUT", b, who=who), src=PROBER)
        assert st == 200, (b, st, body)
    st, _, body = http(P, signed_msg(P, "DELETE", "/gone"), src=PROBER)
    assert st == 204, (st, body)
    st, dates = _buckets(srv)
    assert st == 200 and "keep" in dates and "gone" not in dates, (st, dates)
    srv.written_down()
    big = os.urandom((256 << 10) - 3)
    m0 = srv.metric("kvtier_ssd_bytes_in_total")
    for i in range(64):
        for _ in range(100):
            st, _, body = http(srv.port, signed_msg(srv.port, "PUT", "/churn/o%d" % i,
                                                    body=b"%03d" % i + big, who=BOB),
                               src=PROBER, timeout=20)
            if st != 503:
                break
            srv.written_down()
        assert st == 200, (i, st, body[:200])
    srv.written_down()
    mib = (srv.metric("kvtier_ssd_bytes_in_total") - m0) / (1 << 20)
    print("bob's PUTs: %.1f MiB written down to a 4 MiB SSD" % mib)
    ph.expect(mib >= 12, "MiB written down (the log wrapped)", mib)
    srv.restart(lambda: None)  # DRAM's copies gone: what is left is on SSD
    _bucket_works(ph, "keep", "after the log wrapped and a restart", dates)
    st, _, _ = http(srv.port, signed_msg(srv.port, "HEAD", "/gone"), src=PROBER)
    ph.expect(st == 404, "the deleted bucket after a restart", st)
    st, _, body = http(srv.port, signed_msg(srv.port, "PUT", "/keep"), src=PROBER)
    ph.expect(st == 409 and b"BucketAlreadyOwnedByYou" in body, "CreateBucket again", st)
    # (the probe's object is cache contents: the churn may have taken it)
    st, _, _ = http(srv.port, signed_msg(srv.port, "PUT", "/hbkt/known", body=b"known bytes"),
                    src=PROBER)
    ph.expect(st == 200, "the probe's object put again", st)
    ph.probe("buckets kept")


s3_bucket_kept.extra = ["--dram", "16M", "--ssd", "4M", "--set", "ssd.segment=1M"]


@phase
def s3_bucket_kept_mem(ph):
    """The same without an SSD: bob's 48 distinct 256 KiB objects fill the
    16 MiB DRAM tier 3/4 over, evicting what is oldest.  alice's `keep`
    still answers HeadBucket 200, is listed, takes a PUT and a GET.
    Until 2026-12-06 its marker block was evicted with the rest:
    NoSuchBucket."""
    srv, P = ph.srv, ph.srv.port
    for who, b in ((ALICE, "/keep"), (BOB, "/churn")):
        st, _, body = http(P, signed_msg(P, "PUT", b, who=who), src=PROBER)
        assert st == 200, (b, st, body)
    st, dates = _buckets(srv)
    assert st == 200 and "keep" in dates, (st, dates)
    big = os.urandom((256 << 10) - 3)
    e0 = srv.metric("kvtier_dram_evictions_total")
    bad = []
    for i in range(112):
        st, _, body = http(P, signed_msg(P, "PUT", "/churn/o%d" % i, body=b"%03d" % i + big,
                                         who=BOB), src=PROBER)
        if st != 200:
            bad.append((i, st))
    ev = srv.metric("kvtier_dram_evictions_total") - e0
    print("bob's 112 PUTs of 256 KiB: %d refused %s; %d DRAM evictions" % (
        len(bad), bad[:3], ev))
    ph.expect(ev >= 32, "DRAM evictions", ev)
    _bucket_works(ph, "keep", "after DRAM evictions", dates)
    # (the probe's object is cache contents: the churn may have taken it)
    st, _, _ = http(srv.port, signed_msg(srv.port, "PUT", "/hbkt/known", body=b"known bytes"),
                    src=PROBER)
    ph.expect(st == 200, "the probe's object put again", st)
    ph.probe("buckets kept in DRAM")


s3_bucket_kept_mem.extra = ["--dram", "16M", "--ssd", "0"]


@phase
def s3_head_shared(ph):
    """The owner's HEAD of an object that only a tier below SSD holds (here
    the shared tier, a directory: shared.dir) is 200, as its GET, and
    ListParts lists an upload's parts held there: a quiet part get does
    not ask the shared or remote tiers, so with such a tier the owner's
    header reads that miss are asked once more as plain part gets
    (s3ops.c s3d_hdr_retry).  Without that, 404 and NoSuchUpload."""
    srv = ph.srv
    shared = os.path.join(os.path.dirname(srv.dir), "shared")
    os.makedirs(shared)
    srv.argv += ["--ssd", "0", "--set", "shared.dir=" + shared,
                 "--set", "shared.admission=always"]
    srv.restart()
    P = srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/shared"), src=PROBER)
    assert st == 200, (st, body)
    data = b"below" * 40000
    st, hd, body = http(P, signed_msg(P, "PUT", "/shared/deep", body=data,
                                      extra={"content-type": "text/x-deep"}), src=PROBER)
    assert st == 200, (st, body)
    etag = _hdr(hd, "etag")
    st, _, body = http(P, signed_msg(P, "POST", "/shared/mp", query="uploads"), src=PROBER)
    assert st == 200, (st, body)
    uid = re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", body).group(1).decode()
    for pn in (1, 2):
        st, _, body = http(P, signed_msg(P, "PUT", "/shared/mp", body=b"part%d" % pn * 1000,
                                         query="partNumber=%d&uploadId=%s" % (pn, uid)),
                           src=PROBER)
        assert st == 200, (pn, st, body)

    def in_shared():
        # The shared tier writes a temporary file and renames it: one seen
        # by the walk may be gone by its stat.
        n = 0
        for r, _, fs in os.walk(shared):
            for f in fs:
                try:
                    n += os.path.getsize(os.path.join(r, f))
                except FileNotFoundError:
                    pass
        return n
    end = time.monotonic() + 20
    while in_shared() < len(data) + 10000 and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)
    assert in_shared() >= len(data) + 10000, ("not written to the shared tier", in_shared())
    srv.restart()  # DRAM empty, no SSD: the shared tier alone holds it
    P = srv.port
    st, hd, _ = http(P, signed_msg(P, "HEAD", "/shared/deep"), src=PROBER)
    print("the owner's HEAD of an object only the shared tier holds: %d %s" % (
        st, _hdr(hd, "etag")))
    ph.expect(st == 200 and _hdr(hd, "etag") == etag and
              _hdr(hd, "content-length") == str(len(data)) and
              _hdr(hd, "content-type") == "text/x-deep", "the owner's HEAD", st, hd)
    st, _, body = http(P, signed_msg(P, "GET", "/shared/deep"), src=PROBER)
    ph.expect(st == 200 and body == data, "the owner's GET", st, len(body))
    st, hd, _ = http(P, signed_msg(P, "HEAD", "/shared/gone"), src=PROBER)
    ph.expect(st == 404, "the owner's HEAD of no object", st, hd)
    st, _, body = http(P, signed_msg(P, "GET", "/shared/mp", query="uploadId=" + uid),
                       src=PROBER)
    parts = re.findall(rb"<PartNumber>(\d+)</PartNumber><LastModified>[^<]*</LastModified>"
                       rb"<ETag>[^<]*</ETag><Size>(\d+)</Size>", body)
    ph.expect(st == 200 and parts == [(b"1", b"5000"), (b"2", b"5000")], "ListParts", st,
              body[:300])
    setup_bucket(srv, again=True)  # the probe's object (it was in DRAM only)
    ph.cases += 1
    ph.probe("HEAD below SSD")


s3_head_shared.tenants = s3_head_ssd.tenants


@phase
def s3_list_sort(ph):
    """A listing keeps the max-keys + 1 smallest names it has read in a
    sorted set, on the loop: each new entry moved every entry after it
    (~1.1 KB each, room for a 1,024-byte key), so a listing of 1,000
    objects moved ~275 MB -- 85% of its ~100 ms of the loop (ASan).  The
    set now sorts an array of indices (s3ops.c s3d_list_add).  One tenant
    lists a bucket of 1,000 objects with max-keys 1,000 and with max-keys
    1 (the same 1,000 headers read, a set of 2), 3 times each in turn:
    the ratio of their best times is the sorting's cost, whatever the
    machine's load.  Then two of its connections list back to back beside
    another tenant's GETs."""
    srv, P = ph.srv, ph.srv.port
    names = ["o-%04d-%s" % (i, "x" * 200) for i in range(1000)]
    s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    msgs = [signed_msg(P, "PUT", "/hbkt/" + n, body=b"v%d" % i) for i, n in enumerate(names)]
    sts = pipelined(s, msgs)
    assert sts.count(200) == len(names), sorted(set(sts))
    st, _, body = http(P, signed_msg(P, "PUT", "/boblist", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/boblist/k", body=b"bob", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    want = sorted(["known"] + names)
    lst = signed_msg(P, "GET", "/hbkt", query="list-type=2")
    one = signed_msg(P, "GET", "/hbkt", query="list-type=2&max-keys=1")
    t_all, t_one = [], []
    for _ in range(3):
        for msg, times, n in ((lst, t_all, 1000), (one, t_one, 1)):
            t0 = time.monotonic()
            st, _, body = http(P, msg, src=PROBER, timeout=30)
            times.append(time.monotonic() - t0)
            keys = [k.decode() for k in re.findall(rb"<Key>([^<]*)</Key>", body)]
            ph.expect(st == 200 and keys == want[:n] and b"<IsTruncated>true" in body,
                      "a listing's keys", n, st, len(keys))
    stop = threading.Event()
    counts = []

    def lister():
        c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        n = 0
        while not stop.is_set():
            c.sendall(lst)
            st, _, body = read_answer(c, 60)
            ph.expect(st == 200 or (st == 503 and code_of(body) == "SlowDown"),
                      "a listing beside others", st)
            n += st == 200
        c.close()
        counts.append(n)

    listers = [threading.Thread(target=lister) for _ in range(2)]
    for t in listers:
        t.start()
    lat = bob_gets(ph, P, "/boblist/k", "bob's GET beside the listings", 0.01)
    stop.set()
    for t in listers:
        t.join()
    lat.sort()
    ratio = min(t_all) / min(t_one)
    print("a listing of 1,000 objects: max-keys 1000 %s ms, max-keys 1 %s ms (ratio %.1f); "
          "2 connections listing back to back: %s answered 200; another tenant's GET beside "
          "them: p50 %.1f ms, max %.1f ms" % (
              [round(x * 1e3, 1) for x in t_all], [round(x * 1e3, 1) for x in t_one], ratio,
              counts, lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
    ph.expect(ratio <= LIST_SORT_RATIO, "max-keys 1000 against max-keys 1, best of 3", ratio)
    ph.expect(lat[-1] <= PROBE_MAX_S, "bob's GET beside the listings, max (s)", lat[-1])
    ph.cases += 1
    ph.probe("listings")


# 1,000 objects of a 64 KiB DRAM chunk each
s3_list_sort.extra = ["--dram", "256M"]
s3_list_sort.dram_mib = 256


# s3_answer_held: the SSD writer's delay, which holds the DELETE's flush;
# a DeleteObjects' library request (struct s3d_item: ~380 B), at least
HOLD_MS = 1500
ITEM_MIN = 256


def held(c):
    """Nothing has come on c yet (its first request is still in flight)."""
    c.setblocking(False)
    try:
        c.recv(1, socket.MSG_PEEK)
        return False  # an answer (or EOF) came
    except BlockingIOError:
        return True
    finally:
        c.setblocking(True)


@phase
def s3_answer_held(ph):
    """An answer waits for every earlier request of its connection to be
    answered (HTTP/1.1 pipelining), and was charged to --max-memory only
    once queued: behind a request still in flight, a done request's answer
    was held outside the budget and its tenant's input share.  A listing's
    XML is the largest: 1,000 keys of 1,000 control bytes (each written
    "&#xFFFD;") make 8.2 MB, where the listing's state charged is ~2.5 MB.
    alice puts such 1,000 objects and a victim; restarted with a slow SSD
    writer (ssd.debug_write_delay_ms), she puts one more object (its
    write-down then holds the writer HOLD_MS), DELETEs the victim (answered
    once its tombstone is durable: behind that write) and pipelines 5
    listings after it on the same connection, 100 ms apart.  While the
    DELETE waits, the server's charge must cover the answers of the
    listings done (kvtier_s3_requests_total, in the same /metrics page):
    before, 4 of them held 33 MB against 10 MB charged (the share stopped
    the 5th).  Then the same with 16 DeleteObjects of 1,000 keys behind
    the DELETE: their library requests (s3ops.c s3d_items) must be
    charged too."""
    srv, P = ph.srv, ph.srv.port
    n, fat = 1000, "%01" * 1000
    st, _, body = http(P, signed_msg(P, "PUT", "/held"), src=PROBER)
    assert st == 200, (st, body)
    s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    msgs = [signed_msg(P, "PUT", "/held/%s%03d" % (fat, i), body=b"v") for i in range(n)]
    msgs += [signed_msg(P, "PUT", "/hbkt/" + v, body=b"victim") for v in ("victim", "victim2")]
    sts = pipelined(s, msgs)
    assert sts.count(200) == len(msgs), sorted(set(sts))
    srv.written_down()
    srv.argv += ["--set", "ssd.debug_write_delay_ms=%d" % HOLD_MS]
    srv.restart()
    P = srv.port
    lst = signed_msg(P, "GET", "/held", query="list-type=2")
    st, _, one = http(P, lst, src=PROBER, timeout=30)
    assert st == 200 and one.count(b"<Key>") == n, (st, one.count(b"<Key>"))

    def page(name=b"ListObjectsV2"):
        """(requests of op name answered 200, the server's charge), one render."""
        body = srv.metrics()

        def num(expr):
            return float(re.search(expr + rb" (\S+)$", body, re.M).group(1))
        op = rb'\{op="' + name + rb'"\}'
        return (num(rb"^kvtier_s3_requests_total" + op) - num(rb"^kvtier_s3_errors_total" + op),
                num(rb"^kvtier_server_memory_bytes"))
    srv.written_down()  # the writer idle: the trigger's write is the one in progress
    k0, mem0 = page()
    rss0 = srv.rss_kib()
    srv.hold_writer(HOLD_MS, "/held/trigger")  # the writer's write in progress
    c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    t0 = time.monotonic()
    c.sendall(signed_msg(P, "DELETE", "/hbkt/victim"))
    for _ in range(5):
        time.sleep(0.1)
        c.sendall(lst)
    time.sleep(0.1)
    k, mem = page()
    k -= k0
    rss = srv.rss_kib()
    waiting = held(c)
    at = time.monotonic() - t0
    st, _, _ = read_answer(c, 30)
    answers = [read_answer(c, 30) for _ in range(5)]
    c.close()
    print("the DELETE answered %d after %.2f s; sampled at %.2f s while %s: %d listings done "
          "(%d B of answer each), the charge +%.1f MB, RSS +%.1f MB; the 5 listings: %s" % (
              st, time.monotonic() - t0, at, "it waited" if waiting else "it DID NOT wait",
              k, len(one), (mem - mem0) / 1e6, (rss - rss0) / 1024.0,
              [a[0] for a in answers]))
    ph.expect(st == 204, "the DELETE", st)
    ph.expect(waiting, "the DELETE still waited when sampled (HOLD_MS too short here?)", at)
    ph.expect(k >= 1, "listings done behind the DELETE", k)
    ph.expect(mem - mem0 >= k * len(one), "the answers held behind the DELETE charged",
              mem - mem0, k, len(one))
    for a in answers:
        ph.expect((a[0] == 200 and a[2].count(b"<Key>") == n) or  # (truncated: + trigger)
                  (a[0] == 503 and code_of(a[2]) == "SlowDown"),
                  "a listing behind the DELETE", a[0], len(a[2]))
    ph.cases += 1
    ph.probe("answers held")
    # The same with 16 DeleteObjects of 1,000 keys (none there, Quiet) behind
    # the DELETE: each holds its library requests' array (1,000 items of
    # ~380 B), where its body is 14 KB and its answer a few hundred bytes
    xml = (b"<Delete><Quiet>true</Quiet>" + b"<Object><Key>zz</Key></Object>" * 1000 +
           b"</Delete>")
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    dels = signed_msg(P, "POST", "/held", query="delete", body=xml, extra={"content-md5": md5})
    srv.written_down()
    k0, mem0 = page(b"DeleteObjects")
    srv.hold_writer(HOLD_MS, "/held/trigger2")
    c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    t0 = time.monotonic()
    c.sendall(signed_msg(P, "DELETE", "/hbkt/victim2") + dels * 16)
    time.sleep(0.4)
    k, mem = page(b"DeleteObjects")
    k -= k0
    waiting = held(c)
    at = time.monotonic() - t0
    st, _, _ = read_answer(c, 30)
    answers = [read_answer(c, 30)[0] for _ in range(16)]
    c.close()
    print("the DELETE answered %d after %.2f s; sampled at %.2f s while %s: %d DeleteObjects "
          "done, the charge +%.1f MB (%.0f B a key); the 16: %s" % (
              st, time.monotonic() - t0, at, "it waited" if waiting else "it DID NOT wait", k,
              (mem - mem0) / 1e6, (mem - mem0) / max(k, 1) / 1000, answers))
    ph.expect(st == 204 and waiting and k >= 1, "the DELETE, held", st, waiting, k)
    ph.expect(mem - mem0 >= k * 1000 * ITEM_MIN, "DeleteObjects' items held charged",
              mem - mem0, k)
    ph.expect(answers == [200] * 16, "the DeleteObjects", answers)
    ph.cases += 1
    ph.probe("items held")


s3_answer_held.extra = ["--dram", "256M", "--ssd", "64M", "--set", "ssd.segment=16M"]
s3_answer_held.dram_mib = 256


# s3_pins_waiting: how long the SSD writer holds each write-down (the
# DELETEs wait for it), and when the pins are counted after the pipelines
# are sent (their GETs read from SSD meanwhile)
WAIT_MS, WAIT_SAMPLE_S = 2000, 0.5


@phase
def s3_pins_waiting(ph):
    """A GET answered while an earlier request of its connection is still
    in the store keeps its pins for an answer that waits (HTTP/1.1 answers
    leave in order), and they were counted against the pin caps only once
    the answer was queued: 4 GETs a connection (S3D_GETS_MAX), times
    --tenant-conns, pinned DRAM outside both caps behind slow requests.
    alice stores 16 objects of 2 MiB and one of 4 MiB (--dram 64M: her
    pins' share 16 MiB, a connection's 8 MiB); restarted with a slow SSD
    writer, she puts one object (its write-down holds the writer WAIT_MS)
    and on 5 connections sends a DELETE (answered once its tombstone is
    durable: behind that write) followed by 4 GETs: of the 4 MiB object on
    the first, of 4 distinct 2 MiB objects on the others.  While the
    DELETEs wait, the pins held (kvtier_pins_active) and, once answered,
    the bytes of the GETs served must be within the caps (one object over
    each at most), the rest 503 SlowDown with the connection kept; bob is
    served meanwhile.  Before: all 20 GETs held, 48 MiB pinned."""
    srv, P = ph.srv, ph.srv.port
    two, four = 2 << 20, 4 << 20
    for path, who in (("/bobbkt", BOB), ("/bobbkt/k", BOB)):
        st, _, body = http(P, signed_msg(P, "PUT", path, body=b"bob" if "/k" in path else b"",
                                         who=who), src=PROBER)
        assert st == 200, (path, st, body)
    objs = {"/hbkt/w%d" % i: bytes([65 + i]) * two for i in range(16)}
    objs["/hbkt/w4m"] = b"z" * four
    objs.update({"/hbkt/wv%d" % i: b"victim" for i in range(5)})
    for path, v in objs.items():
        srv.put_written(path, v)
    pins0 = srv.slow_writer(WAIT_MS, "/hbkt/wtrigger")
    P = srv.port
    t0 = time.monotonic()
    conns, wanted = [], []
    for i in range(5):
        c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        gets = ["/hbkt/w4m"] * 4 if i == 0 else ["/hbkt/w%d" % (4 * (i - 1) + j)
                                                 for j in range(4)]
        c.sendall(signed_msg(P, "DELETE", "/hbkt/wv%d" % i) +
                  b"".join(signed_msg(P, "GET", g) for g in gets))
        conns.append(c)
        wanted.append(gets)
    time.sleep(WAIT_SAMPLE_S)
    pins = srv.metric("kvtier_pins_active") - pins0
    early = [i for i, c in enumerate(conns) if not held(c)]
    at = time.monotonic() - t0
    st, _, got = http(P, signed_msg(P, "GET", "/bobbkt/k", who=BOB), src=PROBER)
    ph.expect(st == 200 and got == b"bob", "bob's GET beside the held answers", st, got[:200])
    served, refused, per_conn, bad, after = 0, 0, [], [], []
    for c, gets in zip(conns, wanted):
        st, _, _ = read_answer(c, 10)
        ph.expect(st == 204, "a DELETE ahead of the GETs", st)
        mine = 0
        for g in gets:
            st, _, body = read_answer(c, 10)
            if st == 200 and body == objs[g]:
                mine += len(body)
            elif st == 503 and code_of(body) == "SlowDown":
                refused += 1
            else:
                bad.append((g, st, body[:120]))
        served += mine
        per_conn.append(mine >> 20)
        # the connection is kept after a refusal (served, or refused again
        # while the others' answers, unread yet, pin the tenant's share)
        c.sendall(signed_msg(P, "GET", "/hbkt/known"))
        st, hd, body = read_answer(c, 10)
        after.append(st)
        ph.expect((st == 200 and body == b"known bytes") or
                  (st == 503 and code_of(body) == "SlowDown" and
                   "connection: close" not in hd.lower()), "the connection after its GETs", st)
        c.close()
    print("5 pipelines of a DELETE and 4 GETs behind a write of %d ms: sampled at %.2f s "
          "while %s: %d pins held; answered: %d MiB served (by connection %s MiB), %d "
          "refused 503; a GET after them on each: %s" % (
              WAIT_MS, at, "connections %s DID NOT wait" % early if early else "they waited",
              pins, served >> 20, per_conn, refused, after))
    ph.expect(not early, "the DELETEs still waited when sampled", at, early)
    ph.expect(not bad, "GET answers", bad)
    # the tenant's share (--dram/4) and one object past it; a connection's
    # (--dram/8) and one of its objects past it
    ph.expect(served <= (16 << 20) + four, "bytes served from pins held", served >> 20)
    ph.expect(per_conn[0] <= 8 + 4 and max(per_conn[1:]) <= 8 + 2, "by connection", per_conn)
    ph.expect(pins <= 9, "pins held behind the DELETEs", pins)
    ph.expect(refused >= 8, "GETs refused", refused)
    ph.cases += 1
    ph.probe("answers waiting with pins")


s3_pins_waiting.extra = ["--ssd", "64M", "--set", "ssd.segment=16M"]


def rst_close(c):
    """Close c with a reset (SO_LINGER 0): the server's next read or write
    fails, whatever it still had to send."""
    import struct
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def settled(srv, name, want, wait_s=5.0):
    """A gauge of /metrics once it is back to want (or wait_s passed)."""
    end = time.monotonic() + wait_s
    v = srv.metric(name)
    while v != want and time.monotonic() < end:
        time.sleep(0.02)
        v = srv.metric(name)
    return v


# s3_pins_balance: the objects (PIN_OBJS of a third of 16 MiB less 1 KiB:
# the tenant's pin cap, --dram/4 = 16 MiB, is reached by the 4th unread
# answer, not the 3rd, and missed by 3 KiB: a count off by that refuses
# the 4th; larger than the kernel's send buffer takes, tcp_wmem's 4 MiB,
# so that an unread answer stays queued), and how long the SSD writer
# holds each write-down (the DELETEs wait for it)
PIN_OBJ, PIN_OBJS, BAL_WAIT_MS = (16 << 20) // 3 - 1024, 6, 100


def tcp_wmem_max():
    """The most a TCP socket's send buffer grows to (tcp_wmem's third)."""
    try:
        return int(open("/proc/sys/net/ipv4/tcp_wmem").read().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 << 20


@phase
def s3_pins_balance(ph):
    """The pins an S3 GET's answer keeps count against its connection's
    and its tenant's caps from the moment they are kept (s3reply.c
    s3d_keep_pin), moved to the queued answer or given back once, on every
    path (session 37 review).  alice's connections pipeline a DELETE (held
    by the slowed SSD writer) and GETs of 5.3 MiB objects, then are reset
    at once (the DELETE in the store), reset once the GETs are done and
    wait with their pins (or were refused 503), or read whole; another
    connection is reset while its answer is written.  Then the pins held
    (kvtier_pins_active) and mem_used are back where they were, and
    alice's pinned bytes are 0 to 3 KiB: 6 fresh connections that each GET
    one object and never read get their answers while her unread answers
    pin less than 16 MiB -- exactly 4 of them (a count that leaked 3 KiB or
    more: 3 or fewer; one given back twice, wrapped: 0)."""
    srv, P = ph.srv, ph.srv.port
    objs = ["/hbkt/pb%d" % i for i in range(PIN_OBJS)]
    for i, path in enumerate(objs):
        srv.put_written(path, bytes([97 + i]) * PIN_OBJ)
    for i in range(3):
        srv.put_written("/hbkt/pbv%d" % i, b"victim")
    pins0 = srv.metric("kvtier_pins_active")
    mem0 = srv.metric("kvtier_server_memory_bytes")

    def pipeline(i, gets):
        c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        c.sendall(signed_msg(P, "DELETE", "/hbkt/pbv%d" % i) +
                  b"".join(signed_msg(P, "GET", objs[(i + j) % PIN_OBJS])
                           for j in range(gets)))
        return c
    # the SSD writer is busy with the PUTs' write-downs: each DELETE waits
    # for the write in progress, then for its tombstone's, in turn
    now, later, whole = pipeline(0, 1), pipeline(1, 2), pipeline(2, 4)
    rst_close(now)
    time.sleep(0.05)
    waiting = held(later)
    rst_close(later)
    sts = [read_answer(whole, 10)[0] for _ in range(5)]
    whole.close()
    ph.expect(sts[0] == 204 and all(s in (200, 503) for s in sts[1:]), "a pipeline read", sts)
    # an answer being written when the connection is reset
    mid = socket.socket()
    mid.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    mid.bind((ph.addr(), 0))
    mid.connect(("127.0.0.1", P))
    mid.sendall(signed_msg(P, "GET", objs[0]) * 3)
    st, _, _ = read_answer(mid, 5, no_body=True)
    ph.expect(st == 200, "the GET read in part", st)
    mid.recv(1000)
    rst_close(mid)
    pins = settled(srv, "kvtier_pins_active", pins0)
    mem = settled(srv, "kvtier_server_memory_bytes", mem0)
    # alice's pinned bytes: 6 unread answers on fresh connections
    socks, got = [], []
    for path in objs:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((ph.addr(), 0))
        s.connect(("127.0.0.1", P))
        s.sendall(signed_msg(P, "GET", path))
        s.settimeout(5)
        try:  # answered before the next is sent
            head = s.recv(12, socket.MSG_PEEK)
        except OSError:
            head = b""
        got.append(int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0)
        socks.append(s)
    for s in socks:
        rst_close(s)
    pins_end = settled(srv, "kvtier_pins_active", pins0)
    print("s3_pins_balance: pipelines reset %s, read whole %s; after them %d pins held "
          "(%d before), mem_used %d B (%d before); 6 unread GETs of 16/3 MiB - 1 KiB on "
          "fresh connections: %s; pins after %d" % (
              "while waiting" if waiting else "(they DID NOT wait)", sts, pins, pins0, mem,
              mem0, got, pins_end))
    ph.expect(waiting, "the DELETEs still waited at the reset")
    ph.expect(pins == pins0, "pins held after the resets", pins0, pins)
    ph.expect(mem == mem0, "mem_used after the resets", mem0, mem)
    if tcp_wmem_max() < PIN_OBJ:
        ph.expect(got == [200] * 4 + [503] * 2, "alice's pinned bytes 0 after the resets", got)
    else:  # an unread answer may leave whole, its pins with it
        print("s3_pins_balance: tcp_wmem's %d B take an object whole: pins not probed" %
              tcp_wmem_max())
    ph.expect(pins_end == pins0, "pins held at the end", pins0, pins_end)
    ph.cases += 1
    ph.probe("pins given back")


s3_pins_balance.extra = ["--ssd", "64M", "--set", "ssd.segment=16M",
                         "--set", "ssd.debug_write_delay_ms=%d" % BAL_WAIT_MS]


# s3_pins_signers: alice's objects (6 MiB: past the kernel's send buffer,
# tcp_wmem's 4 MiB, so that an unread answer stays queued, and two a
# connection within its pin cap, --dram/8 = 16 MiB), how many pipelines
# (their 36 MiB past a tenant's pin cap, --dram/4 = 32 MiB), and how long
# the SSD writer holds each write-down (the DELETEs wait for it)
SIG_OBJ, SIG_CONNS, SIG_WAIT_MS = 6 << 20, 3, 600


@phase
def s3_pins_signers(ph):
    """Two tenants' GETs pipelined on one connection (a proxy's pool: the
    connection's tenant is its latest signer) behind a slow request: the
    pins of each GET count against the tenant that signed it, kept to
    its queued answer and given back there (hostfix, session 37).  On
    each of SIG_CONNS connections alice pipelines a DELETE (held by the
    slowed SSD writer), GETs of her two 6 MiB objects and then bob a GET
    of his; nothing is read.  Once the DELETEs are answered (the GETs'
    answers queued behind them, unread) a fresh GET of bob's is served
    and one of alice's refused (her 36 MiB past her 32 MiB); then all is
    read, and on fresh unread connections alice gets exactly 6 answers of
    6 MiB before a 7th is refused (her count back to 0) and bob his.
    Before: alice's pins counted against bob's cap once queued (the
    connection's tenant then) -- bob's fresh GET refused 503, alice's
    served."""
    srv, P = ph.srv, ph.srv.port
    for path, body in (("/bobbkt", b""), ("/bobbkt/b", b"bob's")):
        st, _, b = http(P, signed_msg(P, "PUT", path, body=body, who=BOB), src=PROBER)
        assert st == 200, (path, st, b)
    objs = {"/hbkt/sg%d" % i: bytes([65 + i]) * SIG_OBJ for i in range(2)}
    for path, v in objs.items():
        srv.put_written(path, v)
    for i in range(SIG_CONNS):
        srv.put_written("/hbkt/sgv%d" % i, b"victim")
    pins0 = srv.slow_writer(SIG_WAIT_MS, "/hbkt/sgtrigger")
    P = srv.port
    conns = []
    for i in range(SIG_CONNS):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.bind((ph.addr(), 0))
        c.connect(("127.0.0.1", P))
        c.sendall(signed_msg(P, "DELETE", "/hbkt/sgv%d" % i) +
                  b"".join(signed_msg(P, "GET", g) for g in objs) +
                  signed_msg(P, "GET", "/bobbkt/b", who=BOB))
        conns.append(c)
    t_sent = time.monotonic()
    waited = all(held(c) for c in conns)
    import select
    end = time.monotonic() + 10
    pending = list(conns)
    while pending and time.monotonic() < end:  # the DELETEs answered: all queued
        pending = [c for c in pending if c not in select.select(pending, [], [], 0.05)[0]]
    # alice's GETs done and queued (her pins at her cap: her fresh GET
    # refused), then bob's fresh GET
    end = time.monotonic() + 3
    while True:
        alice = http(P, signed_msg(P, "GET", "/hbkt/sg0"), src=PROBER)
        if alice[0] != 200 or time.monotonic() > end:
            break
        time.sleep(0.05)
    bob = http(P, signed_msg(P, "GET", "/bobbkt/b", who=BOB), src=PROBER)
    t_sent = time.monotonic() - t_sent
    sts, bad = [], []
    t_read = time.monotonic()
    for c in conns:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # read faster
        row = [read_answer(c, 20)[0]]
        for g in objs:
            st, _, body = read_answer(c, 20)
            row.append(st)
            if not ((st == 200 and body == objs[g]) or
                    (st == 503 and code_of(body) == "SlowDown")):
                bad.append((g, st, body[:100]))
        st, _, body = read_answer(c, 20)
        row.append(st)
        if not (st == 200 and body == b"bob's"):
            bad.append(("bob's", st, body[:100]))
        sts.append(row)
        c.close()
    t_read = time.monotonic() - t_read
    pins = settled(srv, "kvtier_pins_active", pins0)
    # alice's count, exactly: 6 unread answers of 6 MiB fit her 32 MiB, a
    # 7th does not (one leaked 2 MiB: 5; given back twice: 0)
    socks, got = [], []
    for i in range(7):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((ph.addr(), 0))
        s.connect(("127.0.0.1", P))
        s.sendall(signed_msg(P, "GET", "/hbkt/sg%d" % (i % 2)))
        s.settimeout(5)
        try:
            head = s.recv(12, socket.MSG_PEEK)
        except OSError:
            head = b""
        got.append(int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0)
        socks.append(s)
    bob_end = http(P, signed_msg(P, "GET", "/bobbkt/b", who=BOB), src=PROBER)[0]
    for s in socks:
        rst_close(s)
    pins_end = settled(srv, "kvtier_pins_active", pins0)
    print("s3_pins_signers: sent to probed %.2f s, read %.2f s" % (t_sent, t_read))
    print("s3_pins_signers: %d pipelines of alice's DELETE, 2 GETs of 6 MiB, bob's GET "
          "(%s): while queued unread, a fresh GET of bob's %d, of alice's %d; answers %s; "
          "pins %d after (%d before); then 7 unread GETs of alice's %s, bob's %d; pins %d" % (
              SIG_CONNS, "they waited" if waited else "they DID NOT wait", bob[0], alice[0],
              sts, pins, pins0, got, bob_end, pins_end))
    ph.expect(waited, "the DELETEs waited")
    ph.expect(not bad, "the pipelines' answers", bad)
    ph.expect(bob[0] == 200 and bob[2] == b"bob's", "bob's GET beside alice's queued answers",
              bob[0], bob[2][:200])
    if tcp_wmem_max() < SIG_OBJ:
        ph.expect(alice[0] == 503 and code_of(alice[2]) == "SlowDown",
                  "alice's GET while her queued answers pin her cap", alice[0])
        ph.expect(got == [200] * 6 + [503], "alice's pinned bytes 0 after", got)
    else:
        print("s3_pins_signers: tcp_wmem's %d B take an object whole: caps not probed" %
              tcp_wmem_max())
    ph.expect(bob_end == 200, "bob's GET at the end", bob_end)
    ph.expect(pins == pins0 and pins_end == pins0, "pins given back", pins0, pins, pins_end)
    ph.cases += 1
    ph.probe("two signers' pins")


s3_pins_signers.extra = ["--dram", "128M", "--ssd", "64M", "--set", "ssd.segment=16M"]
s3_pins_signers.dram_mib = 128


@phase
def s3_pins_flow(ph):
    """A connection whose queued answers pin past the cap of a tenant they
    count in is not read until they drain: each answer's signer (loop.c
    kvtd_conn_pin_tenants_over), not only the connection's latest (session
    43, as test_hostile resp_auth_flow).  On each of SIG_CONNS connections
    alice pipelines GETs of her two 6 MiB objects (36 MiB past her 32 MiB,
    --dram/4; 12 within a connection's 16) and bob a GET of his; nothing
    is read.  Then bob PUTs an object on each, twice, 300 ms apart.
    Before: the connections stayed read (their latest signer, bob, pins 5
    bytes) and all 6 PUTs were run.  Now the second round's none (the
    first's may be: a connection's flow is checked as a request of its is
    answered); once read, every answer comes, the PUTs' last."""
    srv, P = ph.srv, ph.srv.port
    for path, body in (("/bobbkt", b""), ("/bobbkt/b", b"bob's")):
        st, _, b = http(P, signed_msg(P, "PUT", path, body=body, who=BOB), src=PROBER)
        assert st == 200, (path, st, b)
    objs = {"/hbkt/pf%d" % i: bytes([65 + i]) * SIG_OBJ for i in range(2)}
    for path, v in objs.items():
        srv.put_written(path, v)
    pins0 = srv.metric("kvtier_pins_active")

    def gets():
        m = re.search(rb'^kvtier_s3_requests_total\{op="GetObject"\} (\S+)$', srv.metrics(),
                      re.M)
        return float(m.group(1)) if m else 0.0
    g0, conns = gets(), []
    for i in range(SIG_CONNS):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.bind((ph.addr(), 0))
        c.connect(("127.0.0.1", P))
        c.sendall(b"".join(signed_msg(P, "GET", g) for g in objs) +
                  signed_msg(P, "GET", "/bobbkt/b", who=BOB))
        conns.append(c)
    end = time.monotonic() + 10
    while gets() < g0 + 3 * SIG_CONNS and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(0.05)  # their answers queued
    alice = http(P, signed_msg(P, "GET", "/hbkt/pf0"), src=PROBER)
    for r in range(2):
        for i, c in enumerate(conns):
            c.sendall(signed_msg(P, "PUT", "/bobbkt/pf%d%d" % (r, i), body=b"v", who=BOB))
        time.sleep(0.3)
    ran = [sum(http(P, signed_msg(P, "GET", "/bobbkt/pf%d%d" % (r, i), who=BOB),
                    src=PROBER)[0] == 200 for i in range(SIG_CONNS)) for r in range(2)]
    sts = []
    for c in conns:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # read faster
        sts.append([read_answer(c, 20)[0] for _ in range(5)])
        c.close()
    pins = settled(srv, "kvtier_pins_active", pins0)
    ran_end = sum(http(P, signed_msg(P, "GET", "/bobbkt/pf1%d" % i, who=BOB),
                       src=PROBER)[0] == 200 for i in range(SIG_CONNS))
    print("s3_pins_flow: %d pipelines of alice's 2 GETs of 6 MiB and bob's GET, unread: "
          "alice's fresh GET %d; bob's PUTs run on them after: %d of %d, then %d of %d; "
          "once read: answers %s, the second PUTs run %d; pins %d (%d before)" % (
              SIG_CONNS, alice[0], ran[0], SIG_CONNS, ran[1], SIG_CONNS, sts, ran_end, pins,
              pins0))
    if tcp_wmem_max() < SIG_OBJ:
        ph.expect(alice[0] == 503 and code_of(alice[2]) == "SlowDown",
                  "alice's GET while her queued answers pin her cap", alice[0])
        ph.expect(ran[1] == 0, "bob's PUTs read while alice's answers pin her cap",
                  ran)  # before: 3
    else:
        print("s3_pins_flow: tcp_wmem's %d B take an object whole: caps not probed" %
              tcp_wmem_max())
    ph.expect(all(row == [200] * 5 for row in sts), "every answer once read", sts)
    ph.expect(ran_end == SIG_CONNS, "the PUTs run once read", ran_end)
    ph.expect(pins == pins0, "pins given back", pins0, pins)
    ph.cases += 1


s3_pins_flow.extra = ["--dram", "128M", "--ssd", "64M", "--set", "ssd.segment=16M"]
s3_pins_flow.dram_mib = 128


@phase
def s3_out_signers(ph):
    """Two tenants sign requests on one connection (a proxy's pool: the
    connection's tenant is its latest signer).  alice pipelines a DELETE
    (held by the slowed SSD writer), two listings of 4.1 MB of XML (500
    keys of 1,000 control bytes, each written "&#xFFFD;") behind it, and
    bob a GET; nothing is read.  Once the DELETE is answered the
    listings' answers are queued, bob's signature parsed by then.  The
    answers' queued bytes count in the share of --max-memory of the
    tenant whose request made them (a quarter of 16M: 4 MiB); a
    connection with answers queued whose tenant is past it is not read
    (loop.c loop_conn_flow).  Then on a fresh connection of each, a GET
    of 6 MiB left unread and a HEAD behind it: bob's HEAD is read and
    answered (counted in /metrics), alice's waits.  Before (session 40)
    queued bytes were charged to the connection's tenant when queued --
    bob, who had signed last: bob's HEAD waited for alice's answers, and
    alice's was served."""
    srv, P = ph.srv, ph.srv.port
    n, fat, big = 500, "%01" * 1000, os.urandom(6 << 20)
    for path, body in (("/bobbkt", b""), ("/bobbkt/b", b"bob's"), ("/bobbkt/big", big)):
        st, _, b = http(P, signed_msg(P, "PUT", path, body=body, who=BOB), src=PROBER)
        assert st == 200, (path, st, b)
    for path, body in (("/outsg", b""), ("/hbkt/big", big), ("/hbkt/ovictim", b"victim")):
        srv.put_written(path, body)
    s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    sts = pipelined(s, [signed_msg(P, "PUT", "/outsg/%s%03d" % (fat, i), body=b"v")
                        for i in range(n)])
    assert sts.count(200) == n, sorted(set(sts))
    # The DELETE must still wait when both listings are done: the writer's
    # delay from a listing timed here, in this run (the machine's load;
    # a fixed 600 ms was once too short in a parallel run of the suite)
    t0 = time.monotonic()
    st, _, b = http(P, signed_msg(P, "GET", "/outsg", query="list-type=2&max-keys=%d" % n),
                    timeout=30, src=PROBER)
    assert st == 200, (st, b[:300])
    list_s = time.monotonic() - t0
    wait_ms = min(max(OUT_SIG_WAIT_MS, int(list_s * 4000) + 300), 10000)
    srv.slow_writer(wait_ms, "/hbkt/ovtrigger")
    P = srv.port
    # (max-keys: a listing's state is charged to the tenant's input share
    # by the keys it may return; two of 1,000 held it, and reading stopped
    # before bob's GET)
    lst = signed_msg(P, "GET", "/outsg", query="list-type=2&max-keys=%d" % n)

    def done(op):
        body = srv.metrics()
        m = re.search(rb'^kvtier_s3_requests_total\{op="' + op + rb'"\} (\S+)$', body, re.M)
        return float(m.group(1)) if m else 0.0

    def wait_done(op, want, timeout):
        deadline = time.monotonic() + timeout
        while done(op) < want and time.monotonic() < deadline:
            time.sleep(0.02)
        return done(op)

    def unread():
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.bind((ph.addr(), 0))
        c.connect(("127.0.0.1", P))
        return c
    k0, d0 = done(b"ListObjectsV2"), done(b"DeleteObject")
    c = unread()
    c.sendall(signed_msg(P, "DELETE", "/hbkt/ovictim") + lst + lst +
              signed_msg(P, "GET", "/bobbkt/b", who=BOB))
    t0 = time.monotonic()
    assert wait_done(b"ListObjectsV2", k0 + 2, 20) >= k0 + 2, "the listings not done in 20 s"
    waited = done(b"DeleteObject") == d0
    assert wait_done(b"DeleteObject", d0 + 1, 20) >= d0 + 1, "the DELETE not done in 20 s"
    dt = time.monotonic() - t0
    time.sleep(0.05)  # the answers behind it queued
    served = {}
    socks = []
    head_s = 0.0
    for who, path in ((BOB, "/bobbkt/"), (ALICE, "/hbkt/")):
        h0, g0 = done(b"HeadObject"), done(b"GetObject")
        d = unread()
        d.sendall(signed_msg(P, "GET", path + "big", who=who))
        # answered, most of it queued (the socket takes a few KiB)
        assert wait_done(b"GetObject", g0 + 1, 5) >= g0 + 1, who
        time.sleep(0.05)
        d.sendall(signed_msg(P, "HEAD", path + "big", who=who))
        # bob's is served: waited for as long as it takes (timed); alice's
        # is not: looked for 4 times as long as bob's took, 0.4 s at least
        # (a fixed 0.4 s for bob's was once too short under load)
        t1 = time.monotonic()
        served[who[0]] = wait_done(b"HeadObject", h0 + 1,
                                   20 if who is BOB else max(0.4, 4 * head_s)) - h0
        if who is BOB:
            head_s = time.monotonic() - t1
        socks.append(d)
    answers = [read_answer(c, 30) for _ in range(4)]
    c.close()
    after = []
    for d in socks:
        after.append(read_answer(d, 30)[0])
        after.append(read_answer(d, 30, no_body=True)[0])
        d.close()
    print("a listing alone %.2f s, the writer's delay %d ms; "
          "alice's DELETE (done after %.2f s, the listings %s) and 2 listings (%d B each), "
          "bob's GET, unread on one connection: HEADs behind an unread GET of 6 MiB "
          "served: bob %d (in %.2f s), alice %d; then the 4 answers %s, the GETs' and HEADs' "
          "%s" % (list_s, wait_ms, dt, "before it" if waited else "not before it",
                  len(answers[1][2]), served["bob"], head_s, served["alice"],
                  [a[0] for a in answers], after))
    ph.expect(waited, "the listings done while the DELETE waited (OUT_SIG_WAIT_MS too short?)")
    ph.expect([a[0] for a in answers] == [204, 200, 200, 200] and answers[3][2] == b"bob's",
              "the pipelined answers", [a[0] for a in answers])
    ph.expect(served["bob"] == 1, "bob's HEAD beside alice's queued answers", served)
    ph.expect(served["alice"] == 0, "alice's HEAD waits while her answers hold her share",
              served)
    ph.expect(after == [200] * 4, "every answer once read", after)
    ph.cases += 1


OUT_SIG_WAIT_MS = 600
s3_out_signers.extra = ["--dram", "256M", "--max-memory", "16M", "--ssd", "64M",
                        "--set", "ssd.segment=16M"]
s3_out_signers.dram_mib = 256

def loop_cpu_s(srv):
    """CPU seconds of the server's event-loop threads (kvtd-loop*): from
    schedstat (nanoseconds) where the kernel has it -- stat's clock ticks
    (10 ms) made a phase's figure of a few ms one or four ticks, and a
    ratio of two such figures noise (s3_head_scan failed a CI at 4.2 against
    1.0 in ticks) -- else from stat."""
    total = 0
    task = "/proc/%d/task" % srv.p.pid
    for t in os.listdir(task):
        try:
            st = open("%s/%s/stat" % (task, t)).read()
        except OSError:
            continue
        comm, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        if not comm.startswith("kvtd-loop"):
            continue
        try:
            total += int(open("%s/%s/schedstat" % (task, t)).read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            total += (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    return total


# s3_head_scan: loop CPU per one-byte segment of a head of CRs (or of
# "\r\nx" lines) over one of plain bytes (release: 11.5 and 7.5 before,
# 0.8-1.1 after; see the phase)
HEAD_SCAN_RATIO = 3.0
# s3_head_scan: rounds of a byte a connection, 1 ms apart.  The figure is
# a segment's cost, the same over any number of them: 400 rounds (3,200
# segments a fill, ~10-20 ms of loop CPU for the plain one) as 1,200 did
HEAD_SCAN_ROUNDS = 400


@phase
def s3_head_scan(ph):
    """A request head still arriving was searched for its end from its
    first byte on every read, before the signature is checked: an
    unauthenticated client that sent 14 KB of a head and then a byte at a
    time had each byte cost the search of the whole head -- 77 us of the
    loop a one-byte segment for a head of CRs (the search stops at each
    CR), 50 us for one of "\r\nx" lines, against 6.7 us for plain bytes
    (release, 8 connections).  The search now carries on where the last
    read left it (s3h_parse_from, http_parse_request_from).  For each
    listener (S3, metrics) and each fill (plain bytes, CRs, "\r\nx"
    lines), 8 connections from 8 addresses send the start of a head (14.5
    KB on S3, 6.5 KB on metrics: within the heads' 16 and 8 KiB), then a
    byte of it each per round, 1 ms apart, HEAD_SCAN_ROUNDS rounds: the loop
    threads' CPU per segment is compared with the plain fill's."""
    srv = ph.srv
    res = {}
    for port, lname, size in ((srv.port, "S3", 14500), (srv.mport, "metrics", 6500)):
        for fname, unit in (("plain", b"a"), ("CRs", b"\r"), ("CRLF lines", b"\r\nx")):
            head = b"GET /hbkt/known HTTP/1.1\r\nx: " + unit * (size // len(unit))
            byte = b"y" if unit == b"\r\nx" else unit
            socks = []
            for _ in range(8):
                c = socket.create_connection(("127.0.0.1", port), source_address=(ph.addr(), 0))
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                c.sendall(head)
                socks.append(c)
            time.sleep(0.1)  # the heads read (0.3 until 2026-12-06: 3.6 s of the phase)
            c0, n = loop_cpu_s(srv), 0
            for _ in range(HEAD_SCAN_ROUNDS):
                for c in socks:
                    c.send(byte)
                    n += 1
                time.sleep(0.001)
            time.sleep(0.1)  # the last bytes read: microseconds each
            res[(lname, fname)] = (loop_cpu_s(srv) - c0) / n
            # still unanswered: the head is neither whole nor past its bound
            ph.expect(all(not closed_after(c, 0.01) for c in socks),
                      lname, fname, "a head within its bound closed")
            for c in socks:
                c.close()
            ph.cases += 1
        ph.probe(lname + " heads a byte at a time")
    print("s3_head_scan: loop CPU per one-byte segment (us): " + "; ".join(
        "%s %s %.1f" % (k[0], k[1], v * 1e6) for k, v in res.items()))
    for lname in ("S3", "metrics"):
        base = max(res[(lname, "plain")], 1e-6)
        for fname in ("CRs", "CRLF lines"):
            ph.expect(res[(lname, fname)] <= HEAD_SCAN_RATIO * base,
                      lname, fname, "loop CPU per segment over the plain fill's",
                      res[(lname, fname)] / base)


@phase
def s3_tiny_chunks(ph):
    """A signed aws-chunked PUT (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) may
    cut its body into chunks of one byte: each chunk's signature is an
    HMAC chain step and two SHA-256 contexts on the loop, ~2.1 us, so such
    a body cost the loop 25 ns per byte received (1.2 ns with 8 KiB
    chunks; release), and 4 connections sending 64 KiB that way (5.7 MB
    of wire each) held another tenant's GET p50 at 27 ms, max 52 ms.  S3
    requires every chunk but the last to be 8 KiB or more (403
    InvalidChunkSizeError), and so does kvtierd now: at the second chunk's
    size line, before its HMAC.  4 connections each send such a PUT (64 KiB
    of 1-byte chunks) while bob GETs beside them; each must be refused, its
    connection closed, nothing stored; then the same body in chunks of 8
    KiB and more and a last of 8191 bytes is stored."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/boblist", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    st, _, body = http(P, signed_msg(P, "PUT", "/boblist/k", body=b"bob", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    data = os.urandom(65536)
    msg = stream_put(P, "/hbkt/tiny", [data[i:i + 1] for i in range(len(data))])
    res = []

    def putter():
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        t0 = time.monotonic()
        try:
            s.sendall(msg)
        except OSError:
            pass  # refused and closed before all of it was sent
        st, _, b = read_answer(s, 60)
        res.append((st, code_of(b), closed_after(s), time.monotonic() - t0))
        s.close()

    c0 = loop_cpu_s(srv)
    putters = [threading.Thread(target=putter) for _ in range(4)]
    for t in putters:
        t.start()
    lat = bob_gets(ph, P, "/boblist/k", "bob's GET beside the tiny chunks", 0.005)
    for t in putters:
        t.join()
    cpu = loop_cpu_s(srv) - c0
    lat.sort()
    print("s3_tiny_chunks: 4 PUTs of 64 KiB in 1-byte signed chunks (%d bytes of wire each): %s; "
          "loop CPU %.0f ms; bob's GET beside them p50 %.1f ms, max %.1f ms" % (
              len(msg), [(r[0], r[1], "closed" if r[2] else "open", round(r[3] * 1e3)) for r in res],
              cpu * 1e3, lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
    for r in res:
        ph.expect(r[0] == 403 and r[1] == "InvalidChunkSizeError" and r[2],
                  "a PUT of 1-byte signed chunks", r)
    ph.expect(http(P, signed_msg(P, "GET", "/hbkt/tiny"), src=PROBER)[0] == 404,
              "a PUT of 1-byte signed chunks stored")
    ph.expect(lat[-1] <= PROBE_MAX_S, "bob's GET beside the tiny chunks, max (s)", lat[-1])
    ph.cases += 1
    # the same bytes in chunks of 8 KiB and more, the last of 8191 bytes: stored
    chunks = [data[:8193]] + [data[i:i + 8192] for i in range(8193, len(data), 8192)]
    assert min(len(c) for c in chunks[:-1]) >= 8192 and len(chunks[-1]) == 8191
    st, _, b = http(P, stream_put(P, "/hbkt/tiny", chunks), src=PROBER)
    ph.expect(st == 200, "8 KiB chunks and a last of 8191 bytes", st, b[:200])
    st, _, b = http(P, signed_msg(P, "GET", "/hbkt/tiny"), src=PROBER)
    ph.expect(st == 200 and b == data, "the object of 8 KiB chunks", st, len(b))
    ph.cases += 1
    ph.probe("tiny chunks")


# tls_records: loop CPU per one-byte TLS record, at most, in a release build
# (2.4-2.9 us before, 0.46 after: a record's decryption and OpenSSL's
# bookkeeping stay).  Sanitized, 4.3-4.7 us before and after (OpenSSL's
# allocations a record through ASan's allocator): printed, not asserted.
TLS_RECORD_MAX_S = 1.5e-6


def tls_pki(base):
    """A self-signed certificate and its key in base (the openssl CLI), or
    None without one."""
    if subprocess.call("command -v openssl >/dev/null 2>&1", shell=True) != 0:
        return None
    subprocess.check_call("cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
                          "ec_paramgen_curve:prime256v1 -nodes -keyout srv.key -out srv.pem "
                          "-days 2 -subj /CN=localhost >openssl.log 2>&1" % base, shell=True)
    return os.path.join(base, "srv.pem"), os.path.join(base, "srv.key")


def tls_ctx():
    import ssl
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    return c


class TlsRecords:
    """A TLS client over memory BIOs: what it writes is encrypted in
    records of the size asked, sent later in one go."""

    def __init__(self, port, src=None):
        import ssl
        self.ssl = ssl
        self.s = socket.create_connection(("127.0.0.1", port),
                                          source_address=(src, 0) if src else None)
        self.i, self.o = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.t = tls_ctx().wrap_bio(self.i, self.o)
        while True:
            try:
                self.t.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.s.sendall(self.o.read())
                self.feed(10)
        self.s.sendall(self.o.read())

    def feed(self, timeout):
        self.s.settimeout(timeout)
        b = self.s.recv(65536)
        if not b:
            raise EOFError
        self.i.write(b)

    def records(self, data, size):
        """data's records of size bytes each (the wire bytes)."""
        for k in range(0, len(data), size):
            self.t.write(data[k:k + size])
        return self.o.read()

    def read(self, n, timeout=30):
        got = b""
        while len(got) < n:
            try:
                got += self.t.read(65536)
            except self.ssl.SSLWantReadError:
                self.feed(timeout)
        return got


def tls_http(port, data, src=None, timeout=10):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                   source_address=(src, 0) if src else None)
    # the handshake's last flight and the request are two writes: no
    # delayed ACK between them (40 ms a request)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = tls_ctx().wrap_socket(raw)
    s.sendall(data)
    ans = read_answer(s, timeout)
    s.close()
    return ans


def tls_from_prober(ph, t, what, data):
    """tls_http(t.port, data) from PROBER after a flooding address's
    handshakes (from_fixed): a connection the server closed before its
    handshake while kvtier_tls_throttled_total rose was refused per
    address.  (status, head, body); (None, None, why) where closed."""
    def attempt(src):
        thr = metric_or_0(t, "kvtier_tls_throttled_total")
        try:
            return tls_http(t.port, data, src), False
        except OSError as e:  # ssl.SSLError too
            return ((None, None, repr(e).encode()),
                    metric_or_0(t, "kvtier_tls_throttled_total") > thr)
    return from_fixed(what, PROBER, attempt, ph.addr)[1]


def tls_server(ph, name, extra=(), quarantine_mb=32, env=None):
    """A server like ph.srv's with TLS on its S3 and RESP listeners (a
    self-signed certificate), or None (printed) without the openssl CLI;
    quarantine_mb and env as Server's."""
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    pki = tls_pki(base)
    if not pki:
        print("%s: no openssl command to make a certificate with: skipped" % name)
        return None
    return Server(ph.srv.argv[0], base, ["--tls-cert", pki[0], "--tls-key", pki[1], "--resp",
                                         "127.0.0.1:0"] + list(extra), quarantine_mb=quarantine_mb,
                  env=env)


def client_hello():
    """A client's TLS state before the server's answer, and its first
    flight: a ClientHello (one record), to send raw -- (hs, in, out,
    hello); the caller may go on with the handshake through in and out."""
    import ssl
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    hs = tls_ctx().wrap_bio(i, o)
    try:
        hs.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return hs, i, o, o.read()


def hello_fate(c, timeout=3):
    """What the server did with the ClientHello sent on c, within timeout:
    "held" (its flight came: the handshake is under way), "closed" (EOF
    or reset: closed at the accept) or "silent"."""
    c.settimeout(timeout)
    try:
        b = c.recv(65536)
    except ConnectionResetError:
        b = b""
    except socket.timeout:
        b = None
    return "held" if b and b[:1] == b"\x16" else "closed" if b == b"" else "silent"


def tls_resp_port(t):
    """The RESP listener's port of tls_server t (from its log)."""
    return int(re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(t.log).read()).group(1))


def tls_resp_login(ph, rport, who):
    """A TlsRecords RESP connection (from a fresh address) authenticated
    as who (name, secret), its AUTH in records of 16 KiB."""
    c = TlsRecords(rport, ph.addr())
    c.s.sendall(c.records(resp_cmd(b"AUTH", who[0].encode(), who[1].encode()), 16384))
    ph.expect(c.read(5) == b"+OK\r\n", "RESP AUTH over TLS", who[0])
    return c


def metric_or_0(t, name):
    """Server t's counter name, 0 where it has none (an older kvtierd, run
    to show a test fails without the change)."""
    try:
        return t.metric(name)
    except AssertionError:
        return 0


# tls_handshakes: the loop's CPU per connection sending a canned ClientHello,
# over its CPU per connection sending garbage to the (plain) metrics
# listener, at most (release: 5.6 before -- 263 us against 47 --, 1.0
# after; the throttled connections close before any crypto).  Since
# 2026-12-07 less the handshakes the throttle let through (20 a second:
# the churn's wall time decides how many, 20-180 at load 8-9), each at
# what one of TLS_HS_BASE canned ClientHellos from a fresh address (none
# throttled) cost the loop in the same run (257-524 us): 0.6-1.7 in 8
# runs at load 8-9 where the plain ratio was 0.7-2.3 (bound 2.5 until
# then); throttled connections that still did the crypto would be 10 and
# more, and none throttled fails the count (3/4 of them at least)
TLS_CHURN_RATIO = 3.5
TLS_HS_BASE = 16  # under the throttle's 20 a second
TLS_CHURN_CONNS = 2000  # each way: CPU figures of many 10 ms ticks


@phase
def tls_handshakes(ph):
    """A TLS handshake costs the server an ECDHE and a signature as soon as
    a ClientHello is in (~260 us of the loop, release), and a client can
    send the same canned ClientHello (no crypto of its own) on connection
    after connection, closing each at once: kvtierd did the crypto for
    every one, 5.6 times what any connection's accept and close cost.  A
    handshake that fails or times out now counts against its address as
    a failed AUTH does, and past 20 a second the address's connections
    are closed before their handshake (server.tls_throttled).  From one
    address, 2000 connections each send a ClientHello and close; then 2000
    send garbage to the plain metrics listener as the control: loop CPU
    per connection compared, most of the 600 throttled, another address
    served throughout (PROBER, or a fresh one where PROBER's slot is the
    flooding address's: from_fixed), the flooding address again a second
    later.  Before
    that, 400 connections from the address that send nothing or plain text
    (a load balancer's TCP checks, a plain client: no crypto) throttle
    nothing."""
    t = tls_server(ph, "tls_handshakes")
    if not t:
        return
    try:
        P = t.port
        st, _, b = tls_http(P, signed_msg(P, "PUT", "/tbkt"), PROBER)
        assert st == 200, (st, b[:200])
        st, _, b = tls_http(P, signed_msg(P, "PUT", "/tbkt/known", body=b"known bytes"), PROBER)
        assert st == 200, (st, b[:200])
        hello = client_hello()[3]
        src = ph.addr()

        def throttled():
            return metric_or_0(t, "kvtier_tls_throttled_total")

        def before_crypto():
            # closed before any crypto: throttled, or (since Session 48)
            # past the address's part of the unauthenticated SSLs' half
            return throttled() + metric_or_0(t, "kvtier_tls_memory_refused_total")
        # A load balancer's TCP checks and a plain client cost no crypto:
        # they must not throttle the TLS clients sharing their address.
        thr0 = throttled()
        for data in (b"", b"GET / HTTP/1.1\r\n\r\n"):
            for _ in range(200):
                try:
                    c = socket.create_connection(("127.0.0.1", P), source_address=(src, 0))
                    if data:
                        c.sendall(data)
                    c.close()
                except OSError:
                    pass
        time.sleep(0.3)
        st, _, b = tls_http(P, signed_msg(P, "GET", "/tbkt/known"), src)
        ph.expect(st == 200 and b == b"known bytes", "TLS after 400 checks from its address", st)
        ph.expect(throttled() == thr0, "checks throttled nothing", throttled() - thr0)
        # what a handshake the throttle lets through costs the loop: as
        # many canned ClientHellos from a fresh address as it lets through
        hsrc, c0 = ph.addr(), loop_cpu_s(t)
        for _ in range(TLS_HS_BASE):
            c = socket.create_connection(("127.0.0.1", P), source_address=(hsrc, 0))
            c.sendall(hello)
            c.close()
        time.sleep(0.3)
        hs = (loop_cpu_s(t) - c0) / TLS_HS_BASE
        ph.expect(throttled() == thr0, "the handshakes timed throttled", throttled() - thr0)
        cpu, thr0, thr_only0 = {}, before_crypto(), throttled()
        for what, port, data in (("TLS ClientHello", P, hello),
                                 ("metrics garbage", t.mport, b"\x16\x03\x01" * 100)):
            c0 = loop_cpu_s(t)
            for _ in range(TLS_CHURN_CONNS):
                try:
                    c = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
                    c.sendall(data)
                    c.close()
                except OSError:
                    pass
            time.sleep(0.3)
            cpu[what] = (loop_cpu_s(t) - c0) / TLS_CHURN_CONNS
            if what.startswith("TLS"):
                st, _, b = tls_from_prober(ph, t, "another address meanwhile",
                                           signed_msg(P, "GET", "/tbkt/known"))
                ph.expect(st == 200 and b == b"known bytes", "another address meanwhile", st)
        thr, thr_only = before_crypto() - thr0, throttled() - thr_only0
        time.sleep(1.1)
        st, _, b = tls_http(P, signed_msg(P, "GET", "/tbkt/known"), src)
        ph.expect(st == 200 and b == b"known bytes", "the flooding address a second later", st)
        sanitized = ph.srv.sanitizer() == "asan"
        let = max(TLS_CHURN_CONNS - thr, 0)  # handshakes done
        raw = cpu["TLS ClientHello"] / max(cpu["metrics garbage"], 1e-6)
        ratio = max(cpu["TLS ClientHello"] - let * hs / TLS_CHURN_CONNS, 0) / max(
            cpu["metrics garbage"], 1e-6)
        print("tls_handshakes: (%d by the throttle, the rest at the accept by the address's "
              "part)" % thr_only)
        print("tls_handshakes: %d canned ClientHellos from one address: %d throttled; loop CPU "
              "a connection %.0f us, against %.0f us a connection of garbage to the metrics "
              "listener (%.1f); less the %d let through at %.0f us (a handshake's): ratio "
              "%.1f" % (TLS_CHURN_CONNS, thr, cpu["TLS ClientHello"] * 1e6,
                        cpu["metrics garbage"] * 1e6, raw, let, hs * 1e6, ratio))
        ph.expect(thr >= TLS_CHURN_CONNS * 3 // 4, "ClientHellos throttled", thr)
        ph.expect(sanitized or ratio <= TLS_CHURN_RATIO, "loop CPU a ClientHello over a "
                  "connection of garbage", ratio)
        ph.cases += 1
    finally:
        t.stop()


def tls_told(port, src, placed=None, timeout=5):
    """A TLS client from src that sends nothing once its handshake is
    done: (what the server said before it closed the connection, or the
    error, and the seconds from the handshake's start to the close).
    placed(raw): called with the connected socket before the handshake."""
    import ssl
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                   source_address=(src, 0))
    if placed:
        placed(raw)
    t0 = time.monotonic()
    got = b""
    try:
        s = tls_ctx().wrap_socket(raw)
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except (OSError, ssl.SSLError) as e:
        got += repr(e).encode()
    took = time.monotonic() - t0
    raw.close()
    return got, took


def hello_flights(port, src, n):
    """n connections from src, each sending the same canned ClientHello
    and closing after the server's first byte: how many were answered
    with a handshake flight (a record of type 22: the server's crypto),
    and the most the per-address throttle lets through meanwhile
    (TLS_REFUSED_PER_S in each of the server's seconds the flood touched:
    at most floor(its length) + 2, whatever the server's clock)."""
    hello = client_hello()[3]
    flights, t0 = 0, time.monotonic()
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        c.sendall(hello)
        c.settimeout(5)
        try:
            flights += c.recv(1) == b"\x16"
        except OSError:
            pass
        c.close()
    return flights, TLS_REFUSED_PER_S * (int(time.monotonic() - t0) + 2)


def tls_said(c, wait=0.05):
    """What the server said on TlsRecords c within wait seconds (a session
    ticket is no word), and the error where it closed it: b"" if
    nothing."""
    import ssl
    got, end = b"", time.monotonic() + wait
    try:
        while not got and time.monotonic() < end:
            try:
                got += c.t.read(4096)
            except ssl.SSLWantReadError:
                c.feed(max(0.005, end - time.monotonic()))
    except socket.timeout:
        pass
    except (EOFError, OSError, ssl.SSLError) as e:
        got += repr(e).encode()
    return got


def tls_held(port, src):
    """A TLS connection from src, its handshake done, that sends nothing
    (an unauthenticated one the server holds): the TlsRecords, or None
    (closed) where the server refused it at once or closed it before its
    handshake (printed: a shared slot's per-address limits)."""
    import ssl
    try:
        c = TlsRecords(port, src)
    except (EOFError, OSError, ssl.SSLError) as e:
        print("a held TLS connection from %s: no handshake: %r" % (src, e))
        return None
    got = tls_said(c)
    if not got:
        return c
    print("a held TLS connection from %s refused: %r" % (src, got[:100]))
    c.s.close()
    return None


def server_loop_of(pid, sport, cport, wait=2.0):
    """The event loop of server pid that holds our connection from port
    cport to its port sport -- the loop's epoll descriptor, whose interest
    list has the server's socket of it (/proc/net/tcp, /proc/PID/fd,
    /proc/PID/fdinfo) -- once it is there (an accepted connection is
    handed to its loop); None after wait seconds."""
    end = time.monotonic() + wait
    while True:
        inode = None
        for line in open("/proc/net/tcp").read().splitlines()[1:]:
            f = line.split()
            if (int(f[1].split(":")[1], 16) == sport and
                    int(f[2].split(":")[1], 16) == cport):
                inode = f[9]
        sock, epolls = None, []
        d = "/proc/%d/fd" % pid
        for n in os.listdir(d):
            try:
                link = os.readlink(d + "/" + n)
            except OSError:
                continue
            if inode and link == "socket:[%s]" % inode:
                sock = int(n)
            elif link == "anon_inode:[eventpoll]":
                epolls.append(int(n))
        for e in epolls:
            try:
                info = open("/proc/%d/fdinfo/%d" % (pid, e)).read()
            except OSError:
                continue
            if sock is not None and re.search(r"^tfd:\s+%d\s" % sock, info, re.M):
                return e
        if time.monotonic() > end:
            return None
        time.sleep(0.005)


# tls_max_conns: canned ClientHellos from one address past --max-conns, how
# many answered with the server's flight (a handshake's crypto) at most
# (before: every one, 100; after: the throttle's 20 in each second the
# flood touched -- a loaded machine stretches the flood over more seconds,
# each with its 20: a fixed 40 saw 36 under a build)
TLS_REFUSED_CONNS = 100
TLS_REFUSED_PER_S = 20


@phase
def tls_max_conns(ph):
    """A TLS connection past --max-conns is handshaken so that its refusal
    can be said (RESP's -ERR, S3's 503, a native ERROR frame).  The refusal was queued before
    the handshake and nothing wrote it once done: the client was never
    told, and its connection and SSL stayed until --idle-timeout (30 s),
    outside --max-conns.  And the queued answer's SSL_write drove the
    handshake itself, past the first-record gate and the address's
    throttle (loop.c loop_conn_handshake): from one address, a full
    handshake for every connection.  Now nothing is written before the
    handshake is done, and the answer right after it.  At --max-conns 8
    (8 TLS RESP logins held): a real client's refusal over RESP, S3 and
    the native protocol,
    read and followed by the close at once; 100 canned ClientHellos from
    one address, most throttled (the loop's CPU each printed)."""
    t = tls_server(ph, "tls_max_conns", ["--max-conns", "8", "--tenant-conns", "8"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        held = [tls_resp_login(ph, rport, ALICE) for _ in range(8)]
        time.sleep(0.2)
        nport = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", open(t.log).read()).group(1))
        # the native ERROR frame: its message in it
        for port, told in ((rport, b"-ERR server at its connection limit"),
                           (t.port, b"HTTP/1.1 503"), (nport, None)):
            got, took = tls_told(port, ph.addr())
            print("tls_max_conns: a TLS client past --max-conns told %r, closed after %.3f s"
                  % (got[:70], took))
            ph.expect(got.startswith(told) if told else b"at its connection limit" in got,
                      "a refused TLS client told", port, got[:100])
            ph.expect(took < 2, "a refused TLS client closed at once (s)", took)
            ph.cases += 1
        c0 = loop_cpu_s(t)
        flights, most = hello_flights(rport, ph.addr(), TLS_REFUSED_CONNS)
        time.sleep(0.3)
        cpu = (loop_cpu_s(t) - c0) / TLS_REFUSED_CONNS
        print("tls_max_conns: %d canned ClientHellos from one address past --max-conns: %d "
              "answered with a flight; loop CPU %.0f us a connection" % (
                  TLS_REFUSED_CONNS, flights, cpu * 1e6))
        ph.expect(flights <= most, "refused handshakes from one address "
                  "throttled: flights", flights, most)
        ph.cases += 1
        for c in held:
            c.s.close()
    finally:
        t.stop()


# tls_unauth_refused: at --max-conns 8 (kvtd_unauth_max 4 unauthenticated
# connections, kvtd_unauth_peer_max 2 from one address)
TLS_UNAUTH_MAX, TLS_UNAUTH_PEER_MAX = 4, 2


@phase
def tls_unauth_refused(ph):
    """The two other refusals queued at a connection's accept, before its
    TLS handshake (loop.c loop_unauth_add), said as tls_max_conns's is
    (loop_conn_handshake writes what was queued once the handshake is
    done): past its address's cap of unauthenticated connections, and past
    the unauthenticated half of --max-conns where its loop has none older
    to close in its place (loop_unauth_evict).  Before session 37 the
    refused client heard nothing until --idle-timeout, and the queued
    answer's SSL_write drove each handshake past the address's throttle.
    At --max-conns 8, 2 loops: (1) an address holds 2 unauthenticated TLS
    connections; its next, over RESP, S3 and the native protocol, is told
    so and closed at once, and 100 canned ClientHellos from it are mostly
    throttled.  (2) One loop holds the 4 unauthenticated connections
    (where each connection went read from /proc: server_loop_of), the
    other none: a new one there, over each protocol, is told that the
    server is at its limit and closed at once; 100 ClientHellos from one
    address through that path, mostly throttled; nothing evicted."""
    t = tls_server(ph, "tls_unauth_refused", ["--max-conns", "8", "--tenant-conns", "8",
                                              "--threads", "2"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        nport = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", open(t.log).read()).group(1))
        ports = ((rport, b"-ERR "), (t.port, b"HTTP/1.1 503"), (nport, None))

        def told(case, port, lead, words, got, took):
            print("tls_unauth_refused: %s, port %d: told %r, closed after %.3f s"
                  % (case, port, got[:90], took))
            ph.expect((not lead or got.startswith(lead)) and words in got,
                      "a refused TLS client told", case, port, got[:120])
            ph.expect(took < 2, "a refused TLS client closed at once (s)", case, took)
            ph.cases += 1

        def flood(case, src):
            c0 = loop_cpu_s(t)
            flights, most = hello_flights(rport, src, TLS_REFUSED_CONNS)
            cpu = (loop_cpu_s(t) - c0) / TLS_REFUSED_CONNS
            print("tls_unauth_refused: %s: %d canned ClientHellos from one address: %d "
                  "answered with a flight; loop CPU %.0f us a connection"
                  % (case, TLS_REFUSED_CONNS, flights, cpu * 1e6))
            ph.expect(flights <= most, "refused handshakes from one address "
                      "throttled: flights", case, flights, most)
            ph.cases += 1

        # (1) past its address's cap: src's own connections (a fresh
        # server: no other address has a count to share src's slot with)
        src = ph.addr()
        held = [tls_held(rport, src) for _ in range(TLS_UNAUTH_PEER_MAX)]
        ph.expect(all(held), "an address's first connections held", held)
        for port, lead in ports:
            got, took = tls_told(port, src)
            told("past its address's cap", port, lead,
                 b"unauthenticated connections from this address", got, took)
        flood("past its address's cap", src)
        for c in held:
            c.s.close()
        time.sleep(0.3)  # closed on the server's side too
        # (2) the half: TLS_UNAUTH_MAX held on one loop (x), each from an
        # address of its own (another where one shares a slot with one
        # before it: tls_held says, refused per address); the connections
        # the other loop is dealt (the one with the fewer) log in, until x
        # has them all; then they close: x keeps 4, the other none.
        pid, x, xs, others = t.p.pid, None, [], []
        for _ in range(3 * TLS_UNAUTH_MAX):
            if len(xs) == TLS_UNAUTH_MAX:
                break
            c = tls_held(rport, ph.addr())
            if c is None:
                continue
            e = server_loop_of(pid, rport, c.s.getsockname()[1])
            assert e is not None, "no loop holds our connection"
            x = e if x is None else x
            if e == x:
                xs.append(c)
                continue
            c.s.sendall(c.records(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()),
                                  16384))
            ph.expect(c.read(5) == b"+OK\r\n", "RESP AUTH over TLS on the other loop")
            others.append(c)
        ph.expect(len(xs) == TLS_UNAUTH_MAX, "unauthenticated connections held on one loop",
                  len(xs), len(others))
        for c in others:
            c.s.close()
        time.sleep(0.3)

        def placed(raw):
            e = server_loop_of(pid, raw.getpeername()[1], raw.getsockname()[1])
            assert e is not None and e != x, ("a new connection on the other loop", e, x)
        for port, lead in ports:
            got, took = tls_told(port, ph.addr(), placed)
            told("past the unauthenticated half", port, lead,
                 b"at its limit of %d unauthenticated connections" % TLS_UNAUTH_MAX, got, took)
        flood("past the unauthenticated half", ph.addr())
        # (no /metrics read: the metrics listener's connection would be
        # refused as these are) the 4 still held, none closed to admit one
        said = [tls_said(c) for c in xs]
        ph.expect(said == [b""] * len(xs), "nothing evicted: the refusals were the half's",
                  said)
        for c in xs:
            c.s.close()
    finally:
        t.stop()


@phase
def tls_records(ph):
    """A TLS client may send each byte in a record of its own (23 bytes of
    wire a byte with TLS 1.3).  kvtierd read records as SSL_read gives
    them, one at a time, with two read(2)s each (a record's header, then
    its body) and the protocol's parse after each: a RESP SET of 64 KiB
    in one-byte records cost the loop 2.6 us a record against 3 ns a byte
    in records of 16 KiB (release), and a readv of a request's body (S3's,
    a native PUT's data section) went on to the last record the socket
    held -- the loop on that one connection for as long as records came.
    Now records are read ahead (one read(2) for what the socket holds),
    taken 16 a read, and a connection whose records wait inside its SSL
    is read again in the next iteration, after the others' events.  On a
    TLS server (S3 and RESP): alice PUTs 384 KiB in one-byte records while
    bob GETs beside her (max latency asserted), then sends a RESP SET of
    64 KiB in one-byte records, then in records of 16 KiB (loop CPU per
    record asserted)."""
    t = tls_server(ph, "tls_records")
    if not t:
        return
    try:
        P = t.port
        rport = tls_resp_port(t)
        for who, path, body in ((ALICE, "/tbkt", b""), (ALICE, "/tbkt/known", b"known bytes")):
            st, _, b = tls_http(P, signed_msg(P, "PUT", path, body=body, who=who), PROBER)
            assert st == 200, (path, st, b[:200])
        # 1: a body in one-byte records beside bob's GETs (the S3 readv)
        data = os.urandom(384 << 10)
        c = TlsRecords(P, ph.addr())
        wire = c.records(signed_msg(P, "PUT", "/tbkt/big", body=data)[:-len(data)], 16384)
        wire += c.records(data, 1)
        lat, sent = [], []
        sender = threading.Thread(target=lambda: sent.append(c.s.sendall(wire)))
        c0 = loop_cpu_s(t)
        sender.start()
        while sender.is_alive() or not lat:
            t0 = time.monotonic()
            st, _, b = tls_http(P, signed_msg(P, "GET", "/tbkt/known"), PROBER, 30)
            lat.append(time.monotonic() - t0)
            ph.expect(st == 200 and b == b"known bytes", "a GET beside the records", st)
            time.sleep(0.005)
        sender.join()
        head = c.read(12)
        cpu_put = loop_cpu_s(t) - c0
        ph.expect(head.startswith(b"HTTP/1.1 200"), "the PUT of one-byte records", head)
        st, _, b = tls_http(P, signed_msg(P, "GET", "/tbkt/big"), PROBER, 30)
        ph.expect(st == 200 and b == data, "the object of one-byte records", st, len(b))
        c.s.close()
        lat.sort()
        print("tls_records: a PUT of %d KiB in one-byte records (%.1f MB of wire): loop CPU "
              "%.0f ms; a GET beside it n %d, p50 %.1f ms, max %.1f ms" % (
                  len(data) >> 10, len(wire) / 1e6, cpu_put * 1e3, len(lat),
                  lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
        # (0.5 s under ASan, beside another test in CI's asan phase; before,
        # the loop stayed on the PUT's connection for as long as records came)
        ph.expect(lat[-1] <= PROBE_MAX_S / 4 * (2 if ph.srv.sanitizer() == "asan" else 1),
                  "a GET beside one-byte records, max (s)", lat[-1])
        ph.cases += 1
        # 2: a RESP SET of 64 KiB, one-byte records, then records of 16 KiB
        val = os.urandom(64 << 10)
        cmd = resp_cmd(b"SET", b"k", val)
        per = {}
        for size in (1, 16384, 1):
            c = TlsRecords(rport, ph.addr())
            auth = c.records(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()), 16384)
            c.s.sendall(auth)
            ph.expect(c.read(5) == b"+OK\r\n", "RESP AUTH over TLS")
            wire = c.records(cmd, size)
            time.sleep(0.1)
            c0 = loop_cpu_s(t)
            c.s.sendall(wire)
            ph.expect(c.read(5) == b"+OK\r\n", "a SET in records of", size)
            cpu = loop_cpu_s(t) - c0
            c.s.close()
            records = (len(cmd) + size - 1) // size
            per.setdefault(size, []).append(cpu / records)
        print("tls_records: a RESP SET of 64 KiB: loop CPU per record %s us in one-byte "
              "records, %s us in records of 16 KiB" % (
                  "/".join("%.2f" % (x * 1e6) for x in per[1]),
                  "/".join("%.1f" % (x * 1e6) for x in per[16384])))
        sanitized = ph.srv.sanitizer() == "asan"
        ph.expect(sanitized or min(per[1]) <= TLS_RECORD_MAX_S,
                  "loop CPU per one-byte record (s)", per[1])
        ph.cases += 1
    finally:
        t.stop()


# tls_partial_hello: RSS growth a connection at most (KiB), sanitized and
# release, for connections holding a record header declaring 16,640 bytes
# and 101 bytes of it (release 46.2 before, 9.4 after: bench/tls_prehandshake.py)
TLS_PARTIAL_KIB = (30, 20)
TLS_PARTIAL_CONNS = 200


@phase
def tls_partial_hello(ph):
    """Before any crypto, an SSL that read part of a record held a read
    buffer and a handshake buffer for it (~46 KiB a connection, release)
    until --idle-timeout, and the handshake that never began counted no
    failure: reconnecting at once, 1,000 connections from 5 addresses held
    +64 MiB for as long as the client liked.  Now the SSL reads nothing
    until the socket holds the first record whole (tls.c "The first
    record"; SO_RCVLOWAT at its end), and a handshake has 10 s (or
    --idle-timeout, 2 s here): one past it that received bytes counts
    against its address (loop.c "A handshake's deadline").  200
    connections from one address send a record header declaring 16,640
    bytes and 101 bytes of it, 50 from another send nothing: RSS a
    connection asserted, the 200 closed by the deadline and counted
    (kvtier_tls_handshake_timeouts_total), the 50 not; a ClientHello sent
    in two parts 0.3 s apart completes its handshake and is answered; 20
    that send part of the record and shut their side are closed at once,
    the loop idle."""
    import ssl
    t = tls_server(ph, "tls_partial_hello", ["--idle-timeout", "2"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        kib_max = TLS_PARTIAL_KIB[0 if ph.srv.sanitizer() == "asan" else 1]
        partial = (bytes([22, 3, 1, 0x41, 0x00]) + b"\x01\x00\x40\xfc\x03\x03" +
                   b"\x00" * 95)
        # a ClientHello in two writes: the first record's header and 100
        # bytes, the rest 0.3 s later (the gate waits, then reads it)
        hs, i, o, hello = client_hello()

        def timeouts():
            return metric_or_0(t, "kvtier_tls_handshake_timeouts_total")
        to0 = timeouts()
        time.sleep(0.3)
        rss0 = t.rss_kib()
        # 25 an address: an address's unauthenticated SSLs hold at most a
        # sixteenth of --max-memory (~34 handshakes at 32M; Session 48)
        srcs, quiet_src = [ph.addr() for _ in range(TLS_PARTIAL_CONNS // 25)], ph.addr()
        socks = []
        for k in range(TLS_PARTIAL_CONNS):
            c = socket.create_connection(("127.0.0.1", rport),
                                         source_address=(srcs[k % len(srcs)], 0))
            c.sendall(partial)
            socks.append(c)
        quiet = [socket.create_connection(("127.0.0.1", rport), source_address=(quiet_src, 0))
                 for _ in range(50)]
        t0 = time.monotonic()
        slow = socket.create_connection(("127.0.0.1", rport), source_address=(ph.addr(), 0))
        slow.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        slow.sendall(hello[:105])
        time.sleep(0.3)
        slow.sendall(hello[105:])
        slow.settimeout(10)
        while True:  # the server's flight, then our Finished
            try:
                hs.do_handshake()
                break
            except ssl.SSLWantReadError:
                slow.sendall(o.read())
                b = slow.recv(65536)
                ph.expect(b, "the server's flight to a ClientHello in two parts")
                if not b:
                    break
                i.write(b)
        slow.sendall(o.read())
        hs.write(resp_cmd(b"PING"))
        slow.sendall(o.read())
        got = b""
        while b"\r\n" not in got:
            try:
                got += hs.read(100)
            except ssl.SSLWantReadError:
                b = slow.recv(65536)
                if not b:
                    break
                i.write(b)
        ph.expect(got[:1] in (b"-", b"+"),
                  "a ClientHello in two parts: handshake done, answered", got[:60])
        slow.close()
        time.sleep(0.5)
        rss1 = t.rss_kib()
        per = (rss1 - rss0) / (TLS_PARTIAL_CONNS + 50)
        # the deadline (2 s, swept once a second) closes them all
        closed = sum(closed_after(c, 5) for c in socks)
        took = time.monotonic() - t0
        closed_quiet = sum(closed_after(c, 1) for c in quiet)
        to = timeouts() - to0
        for c in socks + quiet:
            c.close()
        print("tls_partial_hello: %d connections holding 101 bytes of a 16,640-byte record and "
              "50 silent: RSS +%.1f KiB a connection; closed by the deadline %d (after %.1f s) "
              "and %d; handshake timeouts counted %d" % (
                  TLS_PARTIAL_CONNS, per, closed, took, closed_quiet, to))
        ph.expect(per <= kib_max, "RSS a partial ClientHello's connection (KiB)", per)
        ph.expect(closed == TLS_PARTIAL_CONNS and closed_quiet == 50,
                  "closed by the handshake deadline", closed, closed_quiet)
        ph.expect(to == TLS_PARTIAL_CONNS, "timeouts counted: those that sent bytes only", to)
        # Half-closed after part of the first record: the socket stays
        # readable whatever SO_RCVLOWAT says, and the gate waited on it --
        # the loop spun until the deadline (20 such: 1.9 s of loop CPU in
        # 3 s, ASan).  Now closed at once, the loop idle.
        c0 = loop_cpu_s(t)
        half = []
        for _ in range(20):
            c = socket.create_connection(("127.0.0.1", rport), source_address=(ph.addr(), 0))
            c.sendall(partial)
            c.shutdown(socket.SHUT_WR)
            half.append(c)
        closed_half = sum(closed_after(c, 1) for c in half)
        time.sleep(1)
        spun = loop_cpu_s(t) - c0
        for c in half:
            c.close()
        print("tls_partial_hello: 20 half-closed after a partial first record: %d closed, "
              "loop CPU %.2f s" % (closed_half, spun))
        ph.expect(closed_half == 20, "half-closed partial records closed at once", closed_half)
        ph.expect(spun < 0.5, "loop CPU beside 20 half-closed partial records (s)", spun)
        ph.cases += 1
    finally:
        t.stop()


# tls_tenant_records: one tenant's connections sending one-byte TLS records
# together, another tenant's PING beside them.  A PING waits for the rest
# of the loop's iteration and one more (its answer is written at the
# iteration's end), each the records of the tenant's budget
# (KVTD_PARSE_TENANT_ITEMS, ~4.8 ms of release CPU): a p50 of 7.6 ms on a
# quiet machine, 7-48 at load 5-13, against the 12 ms asserted until
# 2026-12-07 (release; 120 ASan).  Now the PING's p50 is the server's CPU
# it waits for (server_cpu_s: a loaded machine stretches wall time, not
# that), at most TLS_TENANT_RATIO x its p50 beside 16 of the tenant's
# connections (TLS_TENANT_BASE_CONNS x 256 records an event = the budget)
# sending as many records, plus TLS_TENANT_FLOOR_S: the 96 cost bob what
# 16 do.  2026-12-07 at load 7-13: release 0.66-1.45 (13 runs; the
# baseline 4.1-9.0 ms, wall p50s 18-48 ms), ASan 0.73-1.19 (3 runs; 40-55
# ms, wall 82-144); the budget off (loop_tls_turn always true, as before
# the fix: 96 x 256 records an iteration) 4.7-11.8 (release, 9 runs)
TLS_TENANT_RATIO = 3.0
TLS_TENANT_FLOOR_S = 0.001
TLS_TENANT_CONNS = 96
TLS_TENANT_BASE_CONNS = 16  # x 256 records an event (tls.c) = the budget
# a connection's SET, in one-byte records: its tenant's 96 connections
# were 96 x 256 record decryptions an iteration before the fix (release
# 25-39 ms), whatever each SET's length, so 4,096 of them still hold the
# old loop ~16 iterations, bob's PINGs waiting for each; 8,192 until
# 2026-12-06.  The 16 of the baseline send 6 times as many each.
TLS_TENANT_RECORDS = 4096


def server_cpu_s(srv):
    """CPU seconds the server's process has run, read at once: its CPU
    clock (clock_gettime of another process's, CPUCLOCK_SCHED: exact to
    the call, where /proc's schedstat lags a running thread up to a tick
    of 4 ms), else loop_cpu_s."""
    try:
        return time.clock_gettime((~srv.p.pid << 3) | 2)
    except OSError:
        return loop_cpu_s(srv)


@phase
def tls_tenant_records(ph):
    """A TLS connection takes at most 256 records an event (16 reads of 16,
    tls_records), but its tenant's budget an iteration counted commands and
    keys, not records: one tenant's N connections sending one-byte records
    cost an iteration N x 256 record decryptions, and every other client
    of the loop waited for them.  Records now count as items in the
    tenant's budget of the iteration (KVTD_PARSE_TENANT_ITEMS), checked
    before each TLS read; those of the connections not yet authenticated
    count together.  alice's 16 TLS RESP connections each send a SET of
    24 KiB in one-byte records, all at once (the baseline: 16 x 256
    records an event are the budget); then her 96 connections each a SET
    of 4 KiB, then 96 connections from as many addresses each an AUTH of
    a 3,900-byte wrong password; bob PINGs over TLS beside them, each
    PING timed in the server's CPU it waited for, and every command is
    answered.  bob's p50 beside the 96 is asserted against his p50 beside
    the 16 (TLS_TENANT_RATIO)."""
    import select
    t = tls_server(ph, "tls_tenant_records")
    if not t:
        return
    try:
        rport = tls_resp_port(t)

        def login(who):
            return tls_resp_login(ph, rport, who)
        bob = login(BOB)
        bob.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def ping():  # (wall, the server's CPU meanwhile)
            c0, t0 = server_cpu_s(t), time.monotonic()
            bob.s.sendall(bob.records(resp_cmd(b"PING"), 16384))
            ph.expect(bob.read(7) == b"+PONG\r\n", "bob's PING")
            return time.monotonic() - t0, server_cpu_s(t) - c0
        alone = sorted(ping()[0] for _ in range(50))
        base = None
        # alice's SETs (16 connections, then 96), then AUTHs with a wrong
        # password of 3,900 bytes (unauthenticated: within RESP's 4 KiB
        # before AUTH)
        pw = b"p" * 3900
        for what, n, mult in (("alice's SETs", TLS_TENANT_BASE_CONNS, 6),
                              ("alice's SETs", TLS_TENANT_CONNS, 1),
                              ("unauthenticated AUTHs", TLS_TENANT_CONNS, 1)):
            conns, wires = [], []
            val = b"v" * (TLS_TENANT_RECORDS * mult)
            for i in range(n):
                if what.startswith("alice"):
                    c = login(ALICE)
                    cmd, body = resp_cmd(b"SET", b"k%d" % i, val), val
                else:
                    c = TlsRecords(rport, ph.addr())
                    cmd, body = resp_cmd(b"AUTH", b"alice", pw), pw
                conns.append(c)
                wires.append(c.records(cmd[:-len(body) - 2], 16384) + c.records(body, 1) +
                             c.records(b"\r\n", 16384))
            for c in conns:
                c.s.setblocking(False)
            left = {c.s: memoryview(w) for c, w in zip(conns, wires)}
            records = sum(len(w) for w in wires) // 23

            def flood():
                while left:
                    _, wr, _ = select.select([], list(left), [], 5)
                    for s in wr:
                        try:
                            k = s.send(left[s][:262144])
                        except (BlockingIOError, ConnectionError):
                            continue
                        left[s] = left[s][k:]
                        if not len(left[s]):
                            del left[s]
            answers = []

            def answered():  # each command's answer, once the flood is sent
                flood()
                for c in conns:
                    c.s.setblocking(True)
                    answers.append(c.read(1, 60))
            sender = threading.Thread(target=answered)
            c0 = loop_cpu_s(t)
            t0 = time.monotonic()
            sender.start()
            lat = []
            while sender.is_alive() or len(lat) < 5:
                lat.append(ping())
                time.sleep(0.002)
            sender.join()
            took, cpu = time.monotonic() - t0, loop_cpu_s(t) - c0
            want = b"+" if what.startswith("alice") else b"-"
            ph.expect([a[:1] for a in answers] == [want] * len(conns), what, "answered",
                      answers[:4])
            for c in conns:
                c.s.close()
            wall = sorted(w for w, _ in lat)
            waited = sorted(c for _, c in lat)
            p50, p50_cpu = wall[len(wall) // 2], waited[len(waited) // 2]
            print("tls_tenant_records: %s, %d connections, %d one-byte records: %.2f s, loop "
                  "CPU %.2f s; bob's PING alone p50 %.2f ms, beside them n %d, p50 %.1f ms, "
                  "p90 %.1f ms, max %.1f ms; the server's CPU a PING p50 %.2f ms, p90 %.2f ms" % (
                      what, n, records, took, cpu, alone[25] * 1e3, len(lat), p50 * 1e3,
                      wall[len(wall) * 9 // 10] * 1e3, wall[-1] * 1e3, p50_cpu * 1e3,
                      waited[len(waited) * 9 // 10] * 1e3))
            if base is None:
                base = p50_cpu
                continue
            print("tls_tenant_records: %s: bob's CPU p50 %.2f x the %d connections' (%.2f ms)" % (
                what, p50_cpu / base, TLS_TENANT_BASE_CONNS, base * 1e3))
            ph.expect(p50_cpu <= TLS_TENANT_RATIO * base + TLS_TENANT_FLOOR_S,
                      "bob's PING p50 (server CPU, s) beside", what, p50_cpu, "baseline", base)
            ph.cases += 1
        bob.s.close()
    finally:
        t.stop()


# tenants_past_32: alice's PINGs a loop iteration at most, 1.5 x her
# tenant's budget (KVTD_PARSE_TENANT_FRAMES, 256); figures in the docstring
PAST32_ITER_MAX = 384
PAST32_FILLERS = 38   # tenants besides alice and bob: 40 in the file
PAST32_CONNS = 32     # alice's connections
PAST32_PINGS = 1000   # pipelined on each, sent at once


@phase
def tenants_past_32(ph):
    """A loop counted what each tenant took in an iteration for the first
    32 tenants seen in it (KVTD_PARSE_TENANTS); the 33rd and later were
    held to no budget there: on a server of 40 tenants, a tenant whose
    connections came after 32 others in an iteration had each of them
    parse 64 commands (KVTD_PARSE_FRAMES), not all of them together 256
    (KVTD_PARSE_TENANT_FRAMES), and every other client of the loop waited.
    Now every tenant seen has a slot (loop.c "Tenants an iteration").  38
    tenants each keep a pipeline of PINGs on a connection of their own
    longer than it parses (64 an iteration, read at each iteration's
    events, before the connections deferred from the last); alice's 32
    connections each send 1,000 pipelined PINGs at once (read whole into
    their buffers, then parsed in the deferred turns, after those 38);
    bob PINGs beside them.  Alice's PINGs a loop iteration (the
    iterations counted by the fillers' answers) asserted: ASan 750 and 842
    before, 265-270 after (2026-12-05)."""
    import select
    rport = int(re.search(r"RESP listener on 127\.0\.0\.1:(\d+)",
                          open(ph.srv.log).read()).group(1))

    def login(who):
        return resp_login(rport, who, ph.addr())
    ping = resp_cmd(b"PING")
    bob = login(BOB)
    bob.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def bob_ping():
        t0 = time.monotonic()
        bob.sendall(ping)
        ph.expect(resp_line(bob) == b"+PONG", "bob's PING")
        return time.monotonic() - t0
    alone = sorted(bob_ping() for _ in range(30))
    fillers = [login(("f%d" % i, "secret-of-filler-%04d" % i)) for i in range(PAST32_FILLERS)]
    alice = [login(ALICE) for _ in range(PAST32_CONNS)]
    stop = threading.Event()
    got = {s: 0 for s in fillers + alice}  # PONG bytes read
    want = len(b"+PONG\r\n") * PAST32_PINGS
    chunk = ping * 4096

    def pump():  # the fillers' pipelines kept full; everyone's answers read
        for s in fillers + alice:
            s.setblocking(False)
        while not stop.is_set():
            rd, wr, _ = select.select(list(got), fillers, [], 0.5)
            for s in wr:
                try:
                    s.send(chunk)  # whole PINGs or not: never parsed to the end
                except BlockingIOError:
                    pass
            for s in rd:
                try:
                    got[s] += len(s.recv(1 << 16))
                except BlockingIOError:
                    pass
    pumper = threading.Thread(target=pump)
    pumper.start()
    time.sleep(0.3)  # the fillers' PINGs going round first
    c0 = loop_cpu_s(ph.srv)
    f0 = sum(got[s] for s in fillers)
    t0 = time.monotonic()
    for s in alice:
        s.send(ping * PAST32_PINGS)  # 14 KB: into the socket's buffer at once
    lat = []
    while sum(got[s] for s in alice) < want * len(alice) and time.monotonic() - t0 < 60:
        lat.append(bob_ping())
        time.sleep(0.002)
    took, cpu = time.monotonic() - t0, loop_cpu_s(ph.srv) - c0
    fpings = (sum(got[s] for s in fillers) - f0) // 7
    stop.set()
    pumper.join()
    ph.expect(all(got[s] == want for s in alice), "alice's PINGs answered",
              sorted(got[s] for s in alice)[:3])
    ph.expect(all(got[s] > 0 for s in fillers), "the fillers' PINGs answered")
    for s in fillers + alice + [bob]:
        s.close()
    # Each filler's pipeline is parsed 64 PINGs an iteration
    # (KVTD_PARSE_FRAMES), at its event: its PINGs answered count the
    # iterations alice's took.  Held to her tenant's budget, her
    # connections parse 256 an iteration together; held to none (seen
    # after 32 tenants), 64 each.
    iters = fpings / (PAST32_FILLERS * 64.0)
    per_iter = len(alice) * PAST32_PINGS / max(iters, 1)
    lat.sort()
    print("tenants_past_32: %d tenants' pipelines beside alice's %d connections of %d "
          "PINGs: %.2f s, loop CPU %.2f s, ~%.0f iterations (the fillers' PINGs %d): alice's "
          "PINGs an iteration %.0f; bob's PING alone p50 %.2f ms, beside them n %d, p50 %.1f "
          "ms, max %.1f ms" % (
              PAST32_FILLERS, len(alice), PAST32_PINGS, took, cpu, iters, fpings, per_iter,
              alone[15] * 1e3, len(lat), lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
    ph.expect(per_iter <= PAST32_ITER_MAX, "alice's PINGs a loop iteration", per_iter)
    ph.cases += 1


tenants_past_32.extra = ["--resp", "127.0.0.1:0"]
tenants_past_32.tenants = "alice %s tenant\nbob %s tenant\n" % (ALICE[1], BOB[1]) + "".join(
    "f%d secret-of-filler-%04d tenant\n" % (i, i) for i in range(PAST32_FILLERS))


# tls_held_record: RSS growth a connection opened, at most, sanitized and
# release, for authenticated TLS connections each holding part of a
# record of ~16 KiB, 512 KiB of the tenant's share free (release 35.5 before, 19.1-19.2
# after).  ASan runs this server without quarantine: with 32 MiB the 69
# refused connections' freed SSLs stayed resident and a CI read 108 KiB
# (36-49 on other runs, 122-124 before); with none, 48.6-49.4 with all
# 100 held (--max-memory 32M, as before the charge) and 29.6-31.5 after
# (25.3-26.4 since each SSL is charged too: 16M, 3.5 MiB of the share held).
TLS_HELD_KIB = (40, 26)
TLS_HELD_CONNS = 100
TLS_RBUF = 16384 + 320 + 5  # tls.c TLS_RBUF: OpenSSL's read buffer


@phase
def tls_held_record(ph):
    """An authenticated TLS client that sends a record header declaring
    ~16 KiB and part of the record has the SSL hold a read buffer of ~17
    KiB until the record is whole, outside --max-memory: 1,000 such
    connections held +34.5 MiB of RSS at --max-memory 32M with mem_used 0.
    Now the buffer is charged to --max-memory and the tenant's input
    share while the SSL holds it (loop.c "The SSL's read buffer"), and a
    connection refused is answered and closed.  alice's 100 TLS RESP
    connections (--max-memory 16M: her input share 4 MiB, 3.5 of it held
    by a SET of her own, 31 buffers left) each send the first 300 bytes
    of a record of a 16 KB SET: mem_used shows the buffers held, the rest
    refused and closed, RSS a connection asserted, bob's PING answered."""
    t = tls_server(ph, "tls_held_record", ["--max-memory", "16M"], quarantine_mb=0)
    if not t:
        return
    try:
        rport = tls_resp_port(t)

        def login(who):
            return tls_resp_login(ph, rport, who)
        kib_max = TLS_HELD_KIB[0 if ph.srv.sanitizer() == "asan" else 1]
        bob = login(BOB)
        # alice's SSLs take 30 KiB of her quarter each (tls_ssl_object):
        # at 16M her 101 fit, and one SET of 3.5 MiB but its last 100
        # bytes holds her input share (4 MiB) down to ~512 KiB
        big = login(ALICE)
        big.s.sendall(big.records(resp_cmd(b"SET", b"big", b"v" * (3584 << 10))[:-100],
                                  16384))
        end = time.monotonic() + 20  # all of it in (ASan decrypts slowly)
        while t.metric("kvtier_server_memory_bytes") < (3 << 20) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(0.3)
        mem0, rss0 = t.metric("kvtier_server_memory_bytes"), t.rss_kib()
        conns = []
        for i in range(TLS_HELD_CONNS):
            c = login(ALICE)
            wire = c.records(resp_cmd(b"SET", b"held%d" % i, b"v" * 16000), 16384)
            ph.expect(len(wire) > 16000, "one record of the SET", len(wire))
            c.s.sendall(wire[:300])
            conns.append(c)
        time.sleep(1.0)
        mem1, rss1 = t.metric("kvtier_server_memory_bytes"), t.rss_kib()
        refused = 0
        for c in conns:
            try:
                c.read(1, timeout=0.02)
                refused += 1  # the refusal's answer
            except socket.timeout:
                pass  # held
            except Exception:  # closed (EOF, reset, no close_notify)
                refused += 1
        held = TLS_HELD_CONNS - refused
        bob.s.sendall(bob.records(resp_cmd(b"PING"), 16384))
        ph.expect(bob.read(7) == b"+PONG\r\n", "bob's PING beside the held records")
        per = (rss1 - rss0) / TLS_HELD_CONNS
        for c in conns:
            c.s.close()
        bob.s.close()
        print("tls_held_record: %d connections holding 300 bytes of a record of 16 KB "
              "(--max-memory 16M, alice's share held to ~512 KiB): mem_used +%d B (SSLs and "
              "buffers), %d held, %d refused, RSS +%.1f KiB a connection"
              % (TLS_HELD_CONNS, mem1 - mem0, held, refused, per))
        ph.expect(mem1 - mem0 >= held * TLS_RBUF * 9 // 10,
                  "the held buffers charged to --max-memory", mem1 - mem0, held)
        ph.expect(0 < held <= (512 << 10) // TLS_RBUF + 2 and refused > 0,
                  "refused past the tenant's share", held, refused)
        ph.expect(per <= kib_max, "RSS a connection (KiB)", per)
        ph.cases += 1
    finally:
        t.stop()


def gone(t, act0, most=20):
    """Wait (at most most seconds) until server t has no more connections
    than act0 (a closed one's linger over), then 0.3 s."""
    end = time.monotonic() + most
    while t.metric("kvtier_connections_active") > act0 and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(0.3)


def closed_in_log(t, src):
    """Has server t logged closing a connection from address src (the
    decision itself: a connection with output still queued may linger
    after it, counted active, KVTD_LINGER_MS)?"""
    return re.search(r"closing .*peer=%s:" % re.escape(src), open(t.log).read()) is not None


def unread_pipeline(ph, t, port, tls, pre_auth):
    """On server t's RESP port (TLS or plain), a connection that pipelines
    requests and never reads: after alice's AUTH, 32 GETs of a 4 MiB value
    (its answers pin DRAM); or, before AUTH, 20,000 PINGs in one go.  Its
    receive buffer is 4 KiB.  Until the server closes it (at most 20 s):
    the largest rise of mem_used, pins and RSS; then the seconds to the
    close, and mem_used and pins once it is closed (against before).
    bob's PING is answered while it is held."""
    big = 4 << 20
    if tls:
        a = tls_resp_login(ph, port, ALICE)
        a.s.sendall(a.records(resp_cmd(b"SET", b"slow", b"s" * big), 16384))
        ph.expect(a.read(5, timeout=30) == b"+OK\r\n", "the SET of 4 MiB over TLS")
        a.s.close()
        b = tls_resp_login(ph, port, BOB)
    else:
        a = resp_login(port, ALICE, ph.addr(), timeout=30)
        a.sendall(resp_cmd(b"SET", b"slow", b"s" * big))
        ph.expect(resp_line(a, 30.0) == b"+OK", "the SET of 4 MiB")
        a.close()
        b = resp_login(port, BOB, ph.addr(), timeout=30)
    time.sleep(0.3)
    act0 = t.metric("kvtier_connections_active")
    mem0, pins0, rss0 = (t.metric("kvtier_server_memory_bytes"),
                         t.metric("kvtier_pins_active"), t.rss_kib())
    if pre_auth:
        wire = resp_cmd(b"PING") * 20000
    else:
        wire = resp_cmd(b"GET", b"slow") * 32
    src = ph.addr()
    if tls:
        n = TlsRecords(port, src)
        if not pre_auth:
            n.s.sendall(n.records(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()),
                                  16384))
            ph.expect(n.read(5) == b"+OK\r\n", "alice's AUTH over TLS")
        n.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        n.s.sendall(n.records(wire, 16384))
        sock = n.s
    else:
        sock = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        if not pre_auth:
            sock.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
            ph.expect(resp_line(sock) == b"+OK", "alice's AUTH")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(wire)
    t0 = time.monotonic()
    mem_max, pins_max, rss_max, closed_s = mem0, pins0, rss0, None
    pinged = False
    while time.monotonic() - t0 < 20:
        mem_max = max(mem_max, t.metric("kvtier_server_memory_bytes"))
        pins_max = max(pins_max, t.metric("kvtier_pins_active"))
        rss_max = max(rss_max, t.rss_kib())
        if not pinged and time.monotonic() - t0 > 0.5:
            if tls:
                b.s.sendall(b.records(resp_cmd(b"PING"), 16384))
                ph.expect(b.read(7) == b"+PONG\r\n", "bob's PING beside the unread pipeline")
            else:
                b.sendall(resp_cmd(b"PING"))
                ph.expect(resp_line(b) == b"+PONG", "bob's PING beside the unread pipeline")
            pinged = True
        if closed_in_log(t, src):
            closed_s = time.monotonic() - t0
            break
        time.sleep(0.05)
    gone(t, act0)
    mem1, pins1 = t.metric("kvtier_server_memory_bytes"), t.metric("kvtier_pins_active")
    sock.close()
    (b.s if tls else b).close()
    return dict(closed_s=closed_s, mem=mem_max - mem0, pins=pins_max - pins0,
                rss=rss_max - rss0, mem_after=mem1 - mem0, pins_after=pins1 - pins0)


def unread_s3(ph, t, tls):
    """The same on t's S3 port (TLS or plain): alice stores a 4 MiB object,
    then one connection pipelines 32 signed GETs of it and never reads
    (4 KiB receive buffer).  The same figures as unread_pipeline's."""
    port = t.port
    ask = (lambda m: tls_http(port, m, ph.addr(), 30)) if tls else \
        (lambda m: http(port, m, 30, ph.addr()))
    st = ask(signed_msg(port, "PUT", "/slowbkt"))[0]
    ph.expect(st == 200, "CreateBucket", tls, st)
    st = ask(signed_msg(port, "PUT", "/slowbkt/obj", body=b"o" * (4 << 20)))[0]
    ph.expect(st == 200, "the PUT of 4 MiB", tls, st)
    time.sleep(0.3)
    act0 = t.metric("kvtier_connections_active")
    mem0, pins0 = t.metric("kvtier_server_memory_bytes"), t.metric("kvtier_pins_active")
    wire = signed_msg(port, "GET", "/slowbkt/obj") * 32
    src = ph.addr()
    if tls:
        n = TlsRecords(port, src)
        n.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        n.s.sendall(n.records(wire, 16384))
        sock = n.s
    else:
        sock = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(wire)
    t0 = time.monotonic()
    mem_max, pins_max, closed_s = mem0, pins0, None
    while time.monotonic() - t0 < 20:
        mem_max = max(mem_max, t.metric("kvtier_server_memory_bytes"))
        pins_max = max(pins_max, t.metric("kvtier_pins_active"))
        if closed_in_log(t, src):
            closed_s = time.monotonic() - t0
            break
        time.sleep(0.05)
    gone(t, act0)
    mem1, pins1 = t.metric("kvtier_server_memory_bytes"), t.metric("kvtier_pins_active")
    sock.close()
    return dict(closed_s=closed_s, mem=mem_max - mem0, pins=pins_max - pins0, rss=0,
                mem_after=mem1 - mem0, pins_after=pins1 - pins0)


def get_read(ph, t, port, tls, size, chunk, pause):
    """alice GETs a value of size bytes on t's RESP port and reads its
    answer chunk bytes at a time, pause seconds apart (0: as it comes):
    (the server's CPU seconds meanwhile, the bytes read; short if closed)."""
    head = b"$%d\r\n" % size
    want = len(head) + size + 2
    if tls:
        c = tls_resp_login(ph, port, ALICE)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 17)
        cpu0 = server_cpu_s(t)
        c.s.sendall(c.records(resp_cmd(b"GET", b"slow"), 16384))
    else:
        c = resp_login(port, ALICE, ph.addr(), timeout=30)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 17)
        cpu0 = server_cpu_s(t)
        c.sendall(resp_cmd(b"GET", b"slow"))
    s = c.s if tls else c
    s.settimeout(30)
    got = 0
    while got < want:
        b = s.recv(chunk)
        if not b:
            break
        if tls:
            c.i.write(b)
            while True:
                try:
                    got += len(c.t.read(1 << 20))
                except c.ssl.SSLWantReadError:
                    break
        else:
            got += len(b)
        if pause:
            time.sleep(pause)
    cpu = server_cpu_s(t) - cpu0
    s.close()
    if got != want:
        print("get_read: %s, %d B a read each %.3f s: %d of %d B, then closed"
              % ("TLS" if tls else "plain", chunk, pause, got, want))
    return cpu, got == want


@phase
def tls_slow_reader(ph):
    """A client over TLS that pipelines requests and never reads (32 GETs
    of a 4 MiB value after AUTH; 20,000 PINGs before it; 32 S3 GETs of an
    object of 4 MiB), beside the same
    over plain text on a server of the same options (the same run): the
    TLS connection is closed as the plain one is (--idle-timeout 2: the
    output stall, or the drain floor KVTD_MIN_DRAIN_BPS for pinned
    answers), what it holds meanwhile (mem_used, pins, RSS) no more than
    the plain one's plus an SSL's buffers, and its charges and pins all
    given back at the close."""
    opts = ["--idle-timeout", str(IDLE_S)]
    t = tls_server(ph, "tls_slow_reader", opts, quarantine_mb=0)
    if not t:
        return
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    p = Server(ph.srv.argv[0], base, ["--resp", "127.0.0.1:0"] + opts, quarantine_mb=0)
    try:
        rport, pport = tls_resp_port(t), resp_port(p)
        for case in ("get", "ping", "s3"):
            what = {"get": "32 GETs of 4 MiB after AUTH", "ping": "20,000 PINGs before AUTH",
                    "s3": "32 S3 GETs of 4 MiB"}[case]
            if case == "s3":
                plain, tls = unread_s3(ph, p, False), unread_s3(ph, t, True)
            else:
                plain = unread_pipeline(ph, p, pport, False, case == "ping")
                tls = unread_pipeline(ph, t, rport, True, case == "ping")
            for name, r in (("plain", plain), ("TLS", tls)):
                print("tls_slow_reader: %s unread, %s: closed after %s s, mem_used +%d B "
                      "at most (+%d after the close), pins +%d (+%d after), RSS +%d KiB"
                      % (what, name, "%.2f" % r["closed_s"] if r["closed_s"] else "never",
                         r["mem"], r["mem_after"], r["pins"], r["pins_after"], r["rss"]))
            ph.expect(plain["closed_s"] is not None, "the plain connection closed", what)
            ph.expect(tls["closed_s"] is not None, "the TLS connection closed", what)
            if tls["closed_s"] is None or plain["closed_s"] is None:
                continue
            # the same clock (--idle-timeout) closes both: the TLS one
            # within twice the plain one's time plus a sweep's period
            ph.expect(tls["closed_s"] <= 2 * plain["closed_s"] + IDLE_S,
                      "closed as soon as the plain one", what, tls["closed_s"],
                      plain["closed_s"])
            ph.expect(tls["mem"] <= plain["mem"] + (256 << 10),
                      "mem_used held no more than plain text's and an SSL's", what,
                      tls["mem"], plain["mem"])
            ph.expect(tls["mem_after"] <= (64 << 10) and tls["pins_after"] <= 0,
                      "charges and pins given back at the close", what, tls["mem_after"],
                      tls["pins_after"])
            if ph.srv.sanitizer() is None:
                ph.expect(tls["rss"] <= plain["rss"] + 4096, "RSS no more than plain "
                          "text's and 4 MiB", what, tls["rss"], plain["rss"])
        # (b) a reader of the 4 MiB value (a) stored, at 2-5 MiB/s (above
        # the drain floor: served whole, not closed), 128 KiB each 25 ms,
        # against the same GET read as it comes: the server's CPU for the
        # slow one (partial SSL_writes retried on each EPOLLOUT) against
        # the fast one's, over TLS and plain text.  (No SET of its own: a
        # value of 8 MiB over TLS passes alice's input share at 32M.)
        size = 4 << 20
        cpu = {}
        for srv, port, tls in ((p, pport, False), (t, rport, True)):
            fast, ok_f = get_read(ph, srv, port, tls, size, 1 << 20, 0)
            slow, ok_s = get_read(ph, srv, port, tls, size, 1 << 17, 0.025)
            ph.expect(ok_f and ok_s, "the GET's answer read whole", tls, ok_f, ok_s)
            cpu[tls] = (fast, slow)
        print("tls_slow_reader: a GET of 4 MiB, the server's CPU read at once / slowly: "
              "plain %.4f / %.4f s, TLS %.4f / %.4f s" % (cpu[False] + cpu[True]))
        ph.expect(cpu[True][1] <= 2 * cpu[True][0] + cpu[False][1] + 0.05,
                  "the slow TLS reader's CPU (retried writes)", cpu)
        ph.cases += 1
    finally:
        p.stop()
        t.stop()


def pings_read(ph, t, port, tls, n):
    """alice pipelines n PINGs on t's RESP port and reads every answer:
    (the server's CPU seconds, the wire bytes of the answers)."""
    wire = resp_cmd(b"PING") * n
    want = len(b"+PONG\r\n") * n
    cpu0 = server_cpu_s(t)
    if tls:
        c = tls_resp_login(ph, port, ALICE)
        c.s.sendall(c.records(wire, 16384))
        got, raw = 0, 0
        while got < want:
            try:
                got += len(c.t.read(65536))
            except c.ssl.SSLWantReadError:
                c.s.settimeout(30)
                b = c.s.recv(1 << 20)
                ph.expect(b != b"", "the PINGs' answers over TLS", got)
                if not b:
                    break
                raw += len(b)
                c.i.write(b)
        c.s.close()
    else:
        s = resp_login(port, ALICE, ph.addr(), timeout=30)
        s.sendall(wire)
        raw = 0
        while raw < want:
            b = s.recv(1 << 20)
            ph.expect(b != b"", "the PINGs' answers", raw)
            if not b:
                break
            raw += len(b)
        s.close()
    return server_cpu_s(t) - cpu0, raw


@phase
def tls_small_answers(ph):
    """A TLS client pipelines 100,000 PINGs and reads the answers: each
    queued answer (7 bytes, an iovec of its own) was its own SSL_write, a
    TLS record (22 bytes more) and a write(2).  Now the answers a write
    takes are gathered into records of up to 16 KiB (tls.c "Small answers
    in one record").  Asserted: the answers' wire bytes at most 1.1 times
    their text, and the server's CPU for them at most 3 times a plain
    server's for the same pipeline (the same run)."""
    t = tls_server(ph, "tls_small_answers", [], quarantine_mb=0)
    if not t:
        return
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    p = Server(ph.srv.argv[0], base, ["--resp", "127.0.0.1:0"], quarantine_mb=0)
    n = 100000
    try:
        rport, pport = tls_resp_port(t), resp_port(p)
        pings_read(ph, t, rport, True, 1000)  # warm both
        pings_read(ph, p, pport, False, 1000)
        cpu_p, raw_p = pings_read(ph, p, pport, False, n)
        cpu_t, raw_t = pings_read(ph, t, rport, True, n)
        print("tls_small_answers: %d pipelined PINGs read: plain %.3f s of the server's CPU, "
              "%d B; TLS %.3f s, %d B of records (%.2f x the text)"
              % (n, cpu_p, raw_p, cpu_t, raw_t, raw_t / raw_p))
        ph.expect(raw_t <= raw_p * 11 // 10, "the answers' records", raw_t, raw_p)
        ph.expect(cpu_t <= 3 * max(cpu_p, 0.02), "the server's CPU for the answers", cpu_t,
                  cpu_p)
        ph.cases += 1
    finally:
        p.stop()
        t.stop()


def tls_flood_exe(kvtierd):
    """tests/integration/tls_flood.c as meson built it (KVT_TLS_FLOOD, else
    beside the daemon's build directory), or None."""
    exe = os.environ.get("KVT_TLS_FLOOD") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(kvtierd))), "tests", "tls_flood")
    return exe if os.access(exe, os.X_OK) else None


def tls_flood(exe, port, what, secs, conns=1, read=False, auth=None, src=None, rate=0,
              openssl=False):
    """Runs tls_flood; (connections closed, messages sent, its output)."""
    argv = [exe, "--what", what, "--seconds", str(secs), "--conns", str(conns)]
    argv += ["--read"] if read else []
    argv += ["--openssl"] if openssl else []
    argv += ["--auth", "%s:%s" % auth] if auth else []
    argv += ["--src", src] if src else []
    argv += ["--rate", str(rate)] if rate else []
    out = subprocess.run(argv + [str(port)], stdout=subprocess.PIPE, text=True,
                         timeout=secs + 60).stdout
    m = re.search(r"total: (\d+) connections, (\d+) set up, (\d+) closed; sent (\d+) "
                  r"messages", out)
    assert m and m.group(1) == m.group(2), ("tls_flood", what, out)
    return int(m.group(3)), int(m.group(4)), out


# tls_post_handshake: a loop's CPU for 8 connections sending KeyUpdates as
# fast as their sockets take them, 3 s (release: 1.65-12.9 s before, one
# SSL_read for as long as they came; after, each closed at its 33rd: 6-8 ms)
TLS_QUIET_CPU_S = 0.25
TLS_QUIET_MAX = 32  # tls.c TLS_QUIET_MAX: a minute's records with no application data
# tls_post_handshake: /healthz p99 beside 8 connections sending 31 empty
# records before each byte, over its p99 beside 8 sending one-byte records
# (release: 6.6 and 10.7 before, 1.0-1.5 after; with the KeyUpdate bound
# alone 4.2 and 11.7, 3 s each beside a build).  Since 2026-12-07 the p99s
# are of the server's CPU each /healthz waited (server_cpu_s), the tiny
# one at least TLS_PADDED_FLOOR_S: wall p99s are the 2nd-3rd worst of
# 50-150, taken seconds apart (1.02-2.75 at load 6-9); in CPU 1.26-1.75
# (release, 3 runs, load 5-7; tiny 11.7-12.0 ms), and 11.1 twice with a
# read counting one record whatever it decrypted (tls_fill, as before)
TLS_PADDED_RATIO = 4.0
TLS_PADDED_FLOOR_S = 0.001
# ... and for how long each (s): a /healthz every ~10 ms, so 2 s gives 150-300
# probes, the p99 the 2nd-3rd worst; 4 s until 2026-12-06 (each also waits
# a second for tls_flood's verdict: 10 of the phase's 16.5 s, release)
TLS_PADDED_SECS = 2


@phase
def tls_post_handshake(ph):
    """After the handshake OpenSSL takes records that carry no application
    data inside SSL_read, without returning: a TLS 1.3 client could send
    KeyUpdates (~8 us of the loop each, release; one that asks the
    server's own writes that too) as fast as its socket took them, and a
    single SSL_read went on while they came -- another client's /healthz
    waited 5 s -- uncounted, the connection never closed (it reads as
    idle).  Now a connection may send TLS_QUIET_MAX such records a minute,
    past that it is closed (tls.c "Records the application never sees";
    kvtier_tls_quiet_closed_total).  With tls_flood (tests/integration/
    tls_flood.c) as alice over RESP: KeyUpdates asking an answer, read and
    never read, not asking, and through SSL_key_update; 8 connections of
    them beside bob's /healthz and PING (loop CPU and latency asserted);
    8 connections of 31 empty records before each byte, which a read
    counted as one record (its SSL_read passed over the empty ones), beside
    8 of one-byte records (/healthz's p99 compared);
    the same on the S3 and native ports before any AUTH; a client
    updating its keys 10 times a second for 2 s (20: kept and served);
    empty records, warning alerts and a TLS 1.2 renegotiation (OpenSSL's
    own bounds: closed)."""
    exe = tls_flood_exe(ph.srv.argv[0])
    if not exe:
        raise SystemExit("tls_post_handshake: no tls_flood beside " + ph.srv.argv[0])
    t = tls_server(ph, "tls_post_handshake")
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        nport = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", open(t.log).read()).group(1))
        with open(ph.srv.argv[0], "rb") as f:
            sanitized = b"__asan_init" in f.read()

        def quiet():
            return metric_or_0(t, "kvtier_tls_quiet_closed_total")

        def served(what):
            st, _, b = http(t.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src=PROBER)
            ph.expect(st == 200 and b == b"ok\n", "/healthz after", what, st)
            bob = tls_resp_login(ph, rport, BOB)
            bob.s.sendall(bob.records(resp_cmd(b"PING"), 16384))
            ph.expect(bob.read(7) == b"+PONG\r\n", "bob's PING after", what)
            bob.s.close()
        # 1: one connection each way; closed, and counted, at once
        for what, port, read, auth, openssl in (
                ("ku-req", rport, True, ALICE, False), ("ku-req", rport, False, ALICE, False),
                ("ku-noreq", rport, False, ALICE, False), ("ku-req", rport, True, ALICE, True),
                ("ku-noreq", t.port, False, None, False), ("ku-req", nport, True, None, False)):
            q0 = quiet()
            closed, sent, out = tls_flood(exe, port, what, 2, read=read, auth=auth,
                                          src=ph.addr(), openssl=openssl)
            name = "%s %s%s%s on %s" % (what, "read" if read else "never read",
                                        " (SSL_key_update)" if openssl else "",
                                        "" if auth else " before AUTH",
                                        {rport: "RESP", t.port: "S3", nport: "native"}[port])
            print("tls_post_handshake: %s: %s" % (name, out.splitlines()[-1]))
            ph.expect(closed == 1, "closed:", name, out)
            ph.expect(quiet() - q0 == 1, "counted:", name, quiet() - q0)
            served(name)
            ph.cases += 1
        # 2: 8 connections beside another client: the loop's CPU, its latency
        def beside(what, conns=8, secs=3):
            """tls_flood of what from conns connections for secs, another
            client's /healthz timed meanwhile: (closed, sent, latencies
            sorted, loop CPU, the server's CPU each /healthz waited
            (server_cpu_s), sorted)."""
            lat, waited, stop = [], [], threading.Event()

            def prober():
                while not stop.is_set():
                    w0, t0 = server_cpu_s(t), time.monotonic()
                    http(t.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src=PROBER,
                         timeout=10)
                    lat.append(time.monotonic() - t0)
                    waited.append(server_cpu_s(t) - w0)
                    time.sleep(0.005)
            th = threading.Thread(target=prober)
            c0 = loop_cpu_s(t)
            th.start()
            closed, sent, _ = tls_flood(exe, rport, what, secs, conns=conns, read=True,
                                        auth=ALICE, src=ph.addr())
            stop.set()
            th.join()
            return closed, sent, sorted(lat), loop_cpu_s(t) - c0, sorted(waited)
        q0 = quiet()
        closed, sent, lat, cpu, _ = beside("ku-req")
        print("tls_post_handshake: 8 connections of KeyUpdates for 3 s: %d sent, %d closed "
              "(%d counted); loop CPU %.0f ms; /healthz beside them n %d, p50 %.2f ms, max "
              "%.1f ms" % (sent, closed, quiet() - q0, cpu * 1e3, len(lat),
                           lat[len(lat) // 2] * 1e3, lat[-1] * 1e3))
        ph.expect(closed == 8 and quiet() - q0 == 8, "8 flooding connections closed", closed)
        ph.expect(lat[-1] <= PROBE_MAX_S, "/healthz beside 8 KeyUpdate floods, max (s)",
                  lat[-1])
        ph.expect(cpu <= TLS_QUIET_CPU_S * (4 if sanitized else 1),
                  "loop CPU of 8 KeyUpdate floods (s)", cpu)
        served("8 connections of KeyUpdates")
        ph.cases += 1
        # 2b: 31 empty records before each byte (OpenSSL passes over 32
        # in a row inside one SSL_read): a read counts every record it
        # decrypted, so these cost others what one-byte records do
        p99 = {}
        for what in ("tiny", "padded"):
            closed, sent, lat, cpu, waited = beside(what, secs=TLS_PADDED_SECS)
            p99[what] = waited[len(waited) * 99 // 100]
            print("tls_post_handshake: 8 connections of %s records for %d s: %d sent, loop CPU "
                  "%.0f ms; /healthz beside them n %d, p50 %.2f ms, p99 %.1f ms, max %.1f ms; "
                  "the server's CPU a /healthz p50 %.2f ms, p99 %.2f ms" % (
                      "one-byte" if what == "tiny" else "31 empty and one-byte",
                      TLS_PADDED_SECS, sent,
                      cpu * 1e3, len(lat), lat[len(lat) // 2] * 1e3,
                      lat[len(lat) * 99 // 100] * 1e3, lat[-1] * 1e3,
                      waited[len(waited) // 2] * 1e3, p99[what] * 1e3))
            ph.expect(closed == 0, what, "records: kept", closed)
        print("tls_post_handshake: the server's CPU a /healthz p99, padded over tiny: %.2f" % (
            p99["padded"] / max(p99["tiny"], TLS_PADDED_FLOOR_S)))
        ph.expect(sanitized or
                  p99["padded"] <= TLS_PADDED_RATIO * max(p99["tiny"], TLS_PADDED_FLOOR_S),
                  "/healthz p99 (server CPU) beside empty records over beside one-byte records",
                  p99)
        ph.cases += 1
        # 3: an honest client updating its keys now and then is kept, and
        # one sending PINGs beside it (together: each waits a second for
        # tls_flood's verdict, one after the other 2 s more of the phase)
        q0 = quiet()
        pings = []
        th = threading.Thread(target=lambda: pings.append(tls_flood(
            exe, rport, "ping", 1, read=True, auth=ALICE, src=ph.addr(), rate=1000)))
        th.start()
        closed, sent, out = tls_flood(exe, rport, "ku-noreq", 2, read=True, auth=ALICE,
                                      src=ph.addr(), rate=10)
        th.join()
        ph.expect(closed == 0 and sent >= 15 and quiet() == q0,
                  "10 KeyUpdates a second for 2 s: kept", out)
        closed, sent, out = pings[0]
        ph.expect(closed == 0 and sent >= 500, "PINGs: kept", out)
        ph.cases += 1
        # 4: what OpenSSL bounds itself
        for what in ("empty", "alert", "renego"):
            closed, sent, out = tls_flood(exe, rport, what, 2, read=True, auth=ALICE,
                                          src=ph.addr())
            print("tls_post_handshake: %s: %s" % (what, out.splitlines()[-1]))
            ph.expect(closed == 1, what, "closed", out)
            ph.cases += 1
        served("OpenSSL's own bounds")
    finally:
        t.stop()


# tls12_renegotiation: the loop's CPU for 8 connections sending TLS 1.2
# renegotiating ClientHellos for 3 s, over its CPU for 8 sending one-byte
# records as the baseline (release: 10.2 s against 2.6 before, each
# ClientHello refused inside one SSL_read that went on while they came;
# after, each closed at its first: 0.004 s)
TLS12_RENEG_CPU_RATIO = 0.25
TLS12_HELLO_CONNS = 100
# ... and RSS over as many idle TLS 1.2 connections, per connection held
# (release: +121 KiB before, the ClientHello's declared 131,396 bytes
# allocated and zeroed; after, closed at once: 0)
TLS12_HELLO_KIB = 20
# ... and one address reconnecting to renegotiate again, for
# TLS12_RECONNECT_S: each close counts against the address as a failed
# handshake (session 47), so past KVTD_AUTH_FAILS_PER_SEC (20) a second its
# next connections are closed before any crypto: at most 20 handshakes a
# second it touches (before: 485 handshakes in 3 s release, 236 ASan, none
# refused; after: 80 and 63, 8,254 and 3,416 refused; an honest client's
# AUTH and PING, reconnecting as fast, the same run's baseline: 520-809)
TLS12_RECONNECT_S = 3
AUTH_FAILS_PER_SEC = 20  # daemon/kvtierd.h KVTD_AUTH_FAILS_PER_SEC


def tls_reconnect(exe, port, what, secs, auth=None, src=None):
    """tls_flood --reconnect: (handshakes, refused, closed, its output)."""
    argv = [exe, "--what", what, "--seconds", str(secs), "--reconnect"]
    argv += ["--auth", "%s:%s" % auth] if auth else []
    argv += ["--src", src] if src else []
    out = subprocess.run(argv + [str(port)], stdout=subprocess.PIPE, text=True,
                         timeout=secs + 60).stdout
    m = re.search(r"reconnects: (\d+) handshakes, (\d+) refused, (\d+) closed", out)
    assert m, ("tls_flood --reconnect", what, out)
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), out


@phase
def tls12_renegotiation(ph):
    """TLS 1.2 has no KeyUpdate but has renegotiation, which the server
    refuses (SSL_OP_NO_RENEGOTIATION): OpenSSL answers a renegotiating
    ClientHello with a no_renegotiation warning alert and reads on, inside
    the same SSL_read -- a client sending 4-byte ClientHellos as fast as
    its socket took them, before any AUTH, held the loop (another client's
    /healthz waited 27 s beside 8 of them, release), never closed, counted
    nowhere.  And the ClientHello's header alone had OpenSSL allocate and
    zero the length it declared (131,396 bytes), held outside --max-memory
    until the message completed: 121 KiB a connection, before any AUTH.
    Now a TLS 1.2 handshake record after the handshake closes the
    connection before it is decrypted (tls.c "TLS 1.2 after the
    handshake"; kvtier_tls_quiet_closed_total).  With tls_flood: one
    connection each way (RESP before and after AUTH, S3), closed and
    counted; 8 beside /healthz (the loop's CPU against 8 connections of
    one-byte records); 100 ClientHello headers held (RSS against 100 idle
    TLS 1.2 connections); a TLS 1.2 client's SET and GET still served,
    and one of 31 empty records before each byte kept.  And one address
    that reconnects to renegotiate again: each close counts as a failed
    handshake (session 47), so its handshakes are throttled to 20 a second
    (before, as many as an honest client's)."""
    import ssl
    exe = tls_flood_exe(ph.srv.argv[0])
    if not exe:
        raise SystemExit("tls12_renegotiation: no tls_flood beside " + ph.srv.argv[0])
    t = tls_server(ph, "tls12_renegotiation", ["--max-memory", "32M"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        sanitized = ph.srv.sanitizer() is not None

        def quiet():
            return metric_or_0(t, "kvtier_tls_quiet_closed_total")

        def served(what):
            st, _, b = http(t.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src=PROBER)
            ph.expect(st == 200 and b == b"ok\n", "/healthz after", what, st)
            # a TLS 1.2 client: AUTH, SET, GET
            ctx = tls_ctx()
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", rport), timeout=10,
                                                         source_address=(ph.addr(), 0)))
            ph.expect(s.version() == "TLSv1.2", "a TLS 1.2 client", s.version())
            s.sendall(resp_cmd(b"AUTH", BOB[0].encode(), BOB[1].encode()) +
                      resp_cmd(b"SET", b"tls12", b"v" * 3000) + resp_cmd(b"GET", b"tls12"))
            want = b"+OK\r\n+OK\r\n$3000\r\n" + b"v" * 3000 + b"\r\n"
            got = b""
            while len(got) < len(want):
                b = s.recv(65536)
                if not b:
                    break
                got += b
            ph.expect(got == want, "a TLS 1.2 client's AUTH, SET and GET after", what, got[:60])
            s.close()
        # 1: one connection each way: closed at its first ClientHello, counted
        for port, auth, name in ((rport, None, "RESP before AUTH"), (rport, ALICE, "RESP"),
                                 (t.port, None, "S3")):
            q0 = quiet()
            closed, sent, out = tls_flood(exe, port, "reneg12", 2, read=True, auth=auth,
                                          src=ph.addr())
            print("tls12_renegotiation: %s: %s" % (name, out.splitlines()[-1]))
            ph.expect(closed == 1, "renegotiation closed:", name, out)
            ph.expect(quiet() - q0 == 1, "counted:", name, quiet() - q0)
            served(name)
            ph.cases += 1

        # 2: 8 connections beside /healthz; the loop's CPU against 8 of
        # one-byte records (AUTHed: before AUTH their PINGs are refused)
        def beside(what, auth):
            lat, stop = [], threading.Event()

            def prober():
                while not stop.is_set():
                    t0 = time.monotonic()
                    http(t.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", src=PROBER,
                         timeout=60)
                    lat.append(time.monotonic() - t0)
                    time.sleep(0.005)
            th = threading.Thread(target=prober)
            c0 = loop_cpu_s(t)
            th.start()
            closed, sent, _ = tls_flood(exe, rport, what, 3, conns=8, read=True, auth=auth,
                                        src=ph.addr())
            stop.set()
            th.join()
            cpu = loop_cpu_s(t) - c0
            lat.sort()
            print("tls12_renegotiation: 8 connections of %s for 3 s: %d sent, %d closed; loop "
                  "CPU %.3f s; /healthz beside them n %d, p50 %.1f ms, max %.1f ms" % (
                      what, sent, closed, cpu, len(lat), lat[len(lat) // 2] * 1e3,
                      lat[-1] * 1e3))
            return closed, cpu, lat[-1]
        q0 = quiet()
        closed, cpu, worst = beside("reneg12", None)
        ph.expect(closed == 8 and quiet() - q0 == 8, "8 renegotiating connections closed",
                  closed, quiet() - q0)
        closed_b, cpu_b, worst_b = beside("ping12", ALICE)
        ph.expect(closed_b == 0, "8 connections of PINGs kept", closed_b)
        print("tls12_renegotiation: loop CPU, renegotiations over PINGs: %.3f" % (
            cpu / max(cpu_b, 1e-3)))
        ph.expect(cpu <= TLS12_RENEG_CPU_RATIO * cpu_b,
                  "loop CPU of 8 renegotiation floods over 8 PING floods", cpu, cpu_b)
        ph.expect(worst <= worst_b + PROBE_MAX_S, "/healthz beside 8 renegotiation floods, "
                  "max (s), against beside 8 PING floods", worst, worst_b)
        served("8 connections of renegotiations")
        ph.cases += 1

        # 3: ClientHello headers declaring 131,396 bytes, held: RSS against
        # as many idle TLS 1.2 connections, before AUTH
        def held(what):
            r0, m0, q0 = t.rss_kib(), t.metric("kvtier_server_memory_bytes"), quiet()
            # from 4 addresses: one address's unauthenticated SSLs hold at
            # most a sixteenth of --max-memory (~68 established at 32M;
            # Session 48)
            res, ths = [], []
            for src in [ph.addr() for _ in range(4)]:
                ths.append(threading.Thread(target=lambda src=src: res.append(tls_flood(
                    exe, rport, what, 4, conns=TLS12_HELLO_CONNS // 4, src=src,
                    rate=1 if what == "ping12" else 0))))
                ths[-1].start()
            time.sleep(3)
            r1, m1 = t.rss_kib(), t.metric("kvtier_server_memory_bytes")
            for th in ths:
                th.join()
            closed = sum(r[0] for r in res) if len(res) == len(ths) else -1
            print("tls12_renegotiation: %d connections of %s: RSS +%d KiB, mem_used +%d B; "
                  "%d closed, %d counted" % (TLS12_HELLO_CONNS, what, r1 - r0, m1 - m0,
                                             closed, quiet() - q0))
            return closed, r1 - r0, quiet() - q0
        _, rss_idle, _ = held("ping12")
        closed, rss_hello, counted = held("hello12")
        per = (rss_hello - rss_idle) / TLS12_HELLO_CONNS
        print("tls12_renegotiation: a held ClientHello header: RSS %+.1f KiB a connection "
              "over an idle one" % per)
        ph.expect(closed == TLS12_HELLO_CONNS and counted == TLS12_HELLO_CONNS,
                  "held ClientHello headers closed and counted", closed, counted)
        ph.expect(sanitized or per <= TLS12_HELLO_KIB,
                  "RSS of a held ClientHello header over an idle connection (KiB)", per)
        served("held ClientHello headers")
        ph.cases += 1

        # 4: TLS 1.2's empty records (OpenSSL's 32 in a row) are records too
        closed, sent, out = tls_flood(exe, rport, "padded12", 2, read=True, auth=ALICE,
                                      src=ph.addr())
        print("tls12_renegotiation: padded12: %s" % out.splitlines()[-1])
        ph.expect(closed == 0 and sent > 0, "31 empty records before each byte: kept", out)
        served("empty records")
        ph.cases += 1

        # 5: one address reconnecting to renegotiate again: each close a
        # failure of the address, throttled past 20 a second (session 47);
        # the baseline, an honest client's AUTH and PING as fast
        hs_b, ref_b, _, _ = tls_reconnect(exe, rport, "ping12", TLS12_RECONNECT_S, auth=ALICE,
                                          src=ph.addr())
        thr0, q0 = metric_or_0(t, "kvtier_tls_throttled_total"), quiet()
        hs, ref, closed, out = tls_reconnect(exe, rport, "reneg12", TLS12_RECONNECT_S,
                                             src=ph.addr())
        thr = metric_or_0(t, "kvtier_tls_throttled_total") - thr0
        # the seconds its 3 s touch, and the last connection's run past them
        most = AUTH_FAILS_PER_SEC * (TLS12_RECONNECT_S + 2)
        print("tls12_renegotiation: reconnecting for %d s: %d handshakes (%d closed, %d "
              "counted), %d refused, %d throttled; an honest client's AUTH and PING: %d "
              "handshakes, %d refused; at most %d" % (
                  TLS12_RECONNECT_S, hs, closed, quiet() - q0, ref, thr, hs_b, ref_b, most))
        ph.expect(ref_b == 0, "an honest client reconnecting: none refused", ref_b)
        ph.expect(hs <= most, "handshakes of one address renegotiating, reconnecting",
                  hs, most, hs_b)
        ph.expect(hs < hs_b, "fewer than an honest client's", hs, hs_b)
        ph.expect(ref > 0 and thr > 0, "refused before crypto, counted", ref, thr)
        served("reconnecting renegotiations")
        ph.cases += 1
    finally:
        t.stop()


# tls_unused: one address's complete TLS 1.3 handshakes, each connection
# closed at once without a byte of application data, for TLS_UNUSED_S:
# since session 47 each counts against the address as a failed handshake,
# so past 20 a second its next connections are closed before any crypto
# (before: as many handshakes as it could make, ~260 us of the loop each,
# release; the same run's baseline an honest client reconnecting as fast,
# its AUTH and PING on each connection)
TLS_UNUSED_S = 3
# ... and the loop's CPU a connection of theirs over the honest client's a
# connection (before: 0.91 release, 0.87 ASan -- a handshake each; after:
# 0.10 release, 0.25 ASan -- most closed before any crypto, what churn
# costs; the loop's CPU a second stays what the client's connect rate makes
# it, as tls_handshakes says)
TLS_UNUSED_CPU_RATIO = 0.5
# ... and a pool of spare connections held idle past loop.c LOOP_TLS_UNUSED_NS
# (10 s), then closed at once: more than the 20 a second a flood gets
TLS_UNUSED_POOL = 25
TLS_UNUSED_IDLE_S = 10.5


@phase
def tls_unused(ph):
    """A failed handshake counts against its address (tls_handshakes), but
    a client that completes one and closes before sending a byte could
    reconnect at once, from one address, as fast as it could connect: the
    loop's ECDHE and signature each time, the client's own cost less (it
    need not check the certificate).  Now the client's end of a connection
    whose handshake is done and that sent no application data counts as a
    failed handshake (loop.c "A TLS handshake never used";
    kvtier_tls_unused_total).  With tls_flood --reconnect: an honest
    client's handshakes, each used for AUTH and a PING, are never refused;
    one address's unused handshakes are throttled to 20 a second; another
    address is served meanwhile."""
    exe = tls_flood_exe(ph.srv.argv[0])
    if not exe:
        raise SystemExit("tls_unused: no tls_flood beside " + ph.srv.argv[0])
    t = tls_server(ph, "tls_unused")
    if not t:
        return
    try:
        rport = tls_resp_port(t)

        def ctr(name):
            return metric_or_0(t, name)
        u0, thr0, c0 = ctr("kvtier_tls_unused_total"), ctr("kvtier_tls_throttled_total"), \
            loop_cpu_s(t)
        hs_b, ref_b, _, _ = tls_reconnect(exe, rport, "ping", TLS_UNUSED_S, auth=ALICE,
                                          src=ph.addr())
        cpu_b = loop_cpu_s(t) - c0
        u_b = ctr("kvtier_tls_unused_total") - u0
        u0, thr0, c0 = ctr("kvtier_tls_unused_total"), ctr("kvtier_tls_throttled_total"), \
            loop_cpu_s(t)
        hs, ref, _, out = tls_reconnect(exe, rport, "close", TLS_UNUSED_S, src=ph.addr())
        cpu = loop_cpu_s(t) - c0
        unused = ctr("kvtier_tls_unused_total") - u0
        thr = ctr("kvtier_tls_throttled_total") - thr0
        most = AUTH_FAILS_PER_SEC * (TLS_UNUSED_S + 2)
        print("tls_unused: an honest client reconnecting for %d s: %d handshakes, %d refused, "
              "%d counted unused; loop CPU %.3f s" % (TLS_UNUSED_S, hs_b, ref_b, u_b, cpu_b))
        print("tls_unused: unused handshakes for %d s: %d handshakes (%d counted unused), %d "
              "refused (%d throttled); loop CPU %.3f s; at most %d" % (
                  TLS_UNUSED_S, hs, unused, ref, thr, cpu, most))
        ph.expect(ref_b == 0 and u_b == 0, "an honest client: none refused, none counted",
                  ref_b, u_b)
        ph.expect(hs <= most and hs < hs_b, "unused handshakes of one address", hs, most, hs_b)
        ph.expect(ref > 0 and thr > 0 and unused > 0, "refused before crypto, counted", ref,
                  thr, unused)
        per, per_b = cpu / max(hs + ref, 1), cpu_b / max(hs_b, 1)
        print("tls_unused: loop CPU a connection %.1f us, the honest client's %.1f us: %.2f" % (
            per * 1e6, per_b * 1e6, per / max(per_b, 1e-9)))
        ph.expect(per <= TLS_UNUSED_CPU_RATIO * per_b, "loop CPU a connection over an honest "
                  "client's", per, per_b)
        # another address meanwhile and after: a TLS client's AUTH and PING
        s = tls_ctx().wrap_socket(socket.create_connection(
            ("127.0.0.1", rport), timeout=10, source_address=(ph.addr(), 0)))
        s.sendall(resp_cmd(b"AUTH", BOB[0].encode(), BOB[1].encode()) + resp_cmd(b"PING"))
        got = b""
        while len(got) < 12:
            b = s.recv(4096)
            if not b:
                break
            got += b
        ph.expect(got == b"+OK\r\n+PONG\r\n", "another address served", got)
        s.close()
        ph.cases += 1

        # a connection pool's spare connections, made at its start, closed
        # idle at its end past TLS_UNUSED_IDLE_S: no flood, none counted, and
        # the address's next connection served (review47f: 25 held 2 s,
        # closed at once, and the next one was refused)
        src = ph.addr()

        def conn():
            return tls_ctx().wrap_socket(socket.create_connection(
                ("127.0.0.1", rport), timeout=10, source_address=(src, 0)))
        u0 = ctr("kvtier_tls_unused_total")
        pool = [conn() for _ in range(TLS_UNUSED_POOL)]
        time.sleep(TLS_UNUSED_IDLE_S)
        for s in pool:
            s.close()
        time.sleep(0.3)
        s = conn()
        s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()) + resp_cmd(b"PING"))
        got = b""
        while len(got) < 12:
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        pooled = ctr("kvtier_tls_unused_total") - u0
        print("tls_unused: a pool of %d idle %.1f s, closed at once: %d counted unused; the "
              "address's next connection %r" % (TLS_UNUSED_POOL, TLS_UNUSED_IDLE_S, pooled, got))
        ph.expect(pooled == 0, "a pool's idle connections counted unused", pooled)
        ph.expect(got == b"+OK\r\n+PONG\r\n", "after a pool's close, its address served", got)
        ph.cases += 1
    finally:
        t.stop()


def eof_within(s, timeout):
    """Does the server close s within timeout (what it sends before, a TLS
    close_notify, skipped)?"""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s.settimeout(max(end - time.monotonic(), 0.01))
        try:
            if s.recv(65536) == b"":
                return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
    return False


# tls_ssl_object: what the server charges a TLS connection's SSL (tls.c
# TLS_HS_MEM, TLS_SSL_MEM: OpenSSL's read and write buffers beside the
# measured SSL), at --max-memory 4M: the unauthenticated SSLs' half 2 MiB,
# a tenant's quarter 1 MiB
TLS_HS_MEM = 44 * 1024 + TLS_RBUF
TLS_SSL_MEM = 14 * 1024 + 16568
TLS_SSL_FLOOD = 150
TLS_SSL_LOGINS = 60
# RSS growth of the 150 stalled handshakes, at most, release (~6.4 MiB
# before: 150 SSLs mid-handshake; ~1.5 MiB after: the 33 the budget holds)
TLS_SSL_FLOOD_MIB = 3.5


@phase
def tls_ssl_object(ph):
    """A TLS connection's SSL holds ~43 KiB while its handshake runs and
    ~14 KiB established (16 KiB more while an answer is written), outside
    --max-memory: 150 connections that send a ClientHello and stall held
    +6.4 MiB with mem_used 0, bounded only by --max-conns.  Now the SSL is
    charged from the accept until the close (loop.c "The SSL object"):
    the handshake's charge until it is done, then the established SSL's;
    the unauthenticated ones' SSLs hold at most half the budget, a
    tenant's at most a quarter.  At --max-memory 4M: bob authenticated
    over TLS first; 150 connections send a ClientHello and stall -- the
    budget's share holds ~33 (mem_used shows them; from 15 addresses,
    each past its sixteenth: from one, ~4 and the half untested), the rest are closed
    at the accept, counted, RSS bounded (release), bob's PING answered;
    closed, the charge comes back and a new TLS login works.  Then alice
    logs in over TLS 60 times: those past her quarter are refused at AUTH
    with an answer, those admitted charged the established SSL's size;
    half of them closed by a half-close, half at once: the charge back."""
    t = tls_server(ph, "tls_ssl_object", ["--max-memory", "4M"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        sanitized = ph.srv.sanitizer() is not None  # RSS: shadow memory, quarantine

        def mem():
            return t.metric("kvtier_server_memory_bytes")

        def refused_ctr():
            return metric_or_0(t, "kvtier_tls_memory_refused_total")
        bob = tls_resp_login(ph, rport, BOB)
        time.sleep(0.3)
        mem0, rss0, ref0 = mem(), t.rss_kib(), refused_ctr()
        # (1) stalled handshakes: a ClientHello each, never a Finished,
        # from 15 addresses: from one, its sixteenth of the budget (~4 at
        # 4M, Session 48) bound them, and the unauthenticated half was not
        # reached (review48e)
        srcs, socks = [ph.addr() for _ in range(TLS_SSL_FLOOD // 10)], []
        for k in range(TLS_SSL_FLOOD):
            c = socket.create_connection(("127.0.0.1", rport),
                                         source_address=(srcs[k % len(srcs)], 0))
            c.sendall(client_hello()[3])
            socks.append(c)
        fates = [hello_fate(c) for c in socks]
        held, shut = fates.count("held"), fates.count("closed")
        time.sleep(0.3)
        mem1, rss1, ref1 = mem(), t.rss_kib(), refused_ctr()
        bob.s.sendall(bob.records(resp_cmd(b"PING"), 16384))
        ph.expect(bob.read(7) == b"+PONG\r\n", "bob's PING beside the stalled handshakes")
        for c in socks:
            c.close()
        end = time.monotonic() + 5
        while mem() > mem0 and time.monotonic() < end:
            time.sleep(0.1)
        mem2 = mem()
        print("tls_ssl_object: %d stalled handshakes (--max-memory 4M): %d held, %d closed at "
              "the accept (counted %d); mem_used +%d B (%.1f handshakes' charge), then %+d "
              "once closed; RSS +%.2f MiB" % (
                  TLS_SSL_FLOOD, held, shut, ref1 - ref0, mem1 - mem0,
                  (mem1 - mem0) / TLS_HS_MEM, mem2 - mem0, (rss1 - rss0) / 1024))
        ph.expect(held + shut == TLS_SSL_FLOOD, "each held or closed", held, shut)
        ph.expect(0 < held <= (2 << 20) // TLS_HS_MEM and shut > 0,
                  "stalled handshakes held within the unauthenticated half", held, shut)
        ph.expect(held > 2 * ((4 << 20) // 16 // TLS_HS_MEM),
                  "the half reached, not one address's sixteenth", held)
        ph.expect(ref1 - ref0 == shut, "closed at the accept, counted", ref1 - ref0, shut)
        ph.expect(held * TLS_HS_MEM <= mem1 - mem0 <= (held + 1) * TLS_HS_MEM,
                  "the handshakes' SSLs charged to --max-memory", mem1 - mem0, held)
        ph.expect(mem2 <= mem0, "the charge given back at the close", mem0, mem2)
        ph.expect(sanitized or (rss1 - rss0) / 1024 <= TLS_SSL_FLOOD_MIB,
                  "RSS of the stalled handshakes (MiB)", (rss1 - rss0) / 1024)
        # The 33 abandoned handshakes count as failures of their addresses (loop.c
        # loop_conn_handshake), which throttles its address slot for the
        # rest of that second: a fresh address below that shares the slot
        # (1 in KVTD_PEER_SLOTS each) would be closed at its ClientHello.
        # All closes are seen (mem back); the next second is a clean one.
        time.sleep(1.0)
        bob2 = tls_resp_login(ph, rport, BOB)  # a new one: the charge came back
        bob2.s.close()
        # (2) one tenant's established connections past its quarter
        time.sleep(0.3)
        mem0, ref0 = mem(), refused_ctr()
        alice, refused = [], 0
        for _ in range(TLS_SSL_LOGINS):
            c = TlsRecords(rport, ph.addr())
            c.s.sendall(c.records(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()),
                                  16384))
            got = b""
            try:
                while not got.endswith(b"\r\n"):
                    got += c.read(1, timeout=5)
            except (EOFError, OSError):
                pass
            if got == b"+OK\r\n":
                alice.append(c)
                continue
            ph.expect(got.startswith(b"-ERR max number of clients reached: the tenant's TLS"),
                      "refused at AUTH with an answer", got[:120])
            ph.expect(eof_within(c.s, 3), "closed after its refusal")
            c.s.close()
            refused += 1
        mem1, ref1 = mem(), refused_ctr()
        bob.s.sendall(bob.records(resp_cmd(b"PING"), 16384))
        ph.expect(bob.read(7) == b"+PONG\r\n", "bob's PING beside alice's connections")
        for k, c in enumerate(alice):
            if k % 2:
                c.s.shutdown(socket.SHUT_WR)  # a half-close: answered, then closed
                ph.expect(eof_within(c.s, 3), "closed after a half-close")
            c.s.close()
        bob.s.close()
        end = time.monotonic() + 5
        while mem() > mem0 - TLS_SSL_MEM and time.monotonic() < end:
            time.sleep(0.1)
        mem2 = mem()
        print("tls_ssl_object: alice's %d TLS logins: %d admitted, %d refused at AUTH (counted "
              "%d); mem_used +%d B (%.1f established SSLs' charge), then %+d once closed" % (
                  TLS_SSL_LOGINS, len(alice), refused, ref1 - ref0, mem1 - mem0,
                  (mem1 - mem0) / TLS_SSL_MEM, mem2 - mem0))
        ph.expect(0 < len(alice) <= (1 << 20) // TLS_SSL_MEM and refused > 0,
                  "admitted within the tenant's quarter", len(alice), refused)
        ph.expect(ref1 - ref0 == refused, "refused at AUTH, counted", ref1 - ref0, refused)
        ph.expect(len(alice) * TLS_SSL_MEM <= mem1 - mem0 <= (len(alice) + 1) * TLS_SSL_MEM,
                  "the established SSLs charged", mem1 - mem0, len(alice))
        ph.expect(mem2 <= mem0 - TLS_SSL_MEM, "the charge given back (bob's too)", mem0, mem2)
        ph.cases += 1
    finally:
        t.stop()


# idle_rbuf: RSS growth, at most, sanitized and release, for 600 idle
# connections after a PING of 60 KB each, then for 300 holding 60 KB of a
# SET each (release +35.6 and +17.7 MiB before, +0.5 and +8.9 after; ASan
# +60.4 and +20.0 before, +20.2 and +11.6 after: its quarantine, 32 MiB)
IDLE_RBUF_CONNS = (600, 300)
IDLE_RBUF_MAX_MIB = (40, 16)


@phase
def idle_rbuf(ph):
    """A connection's read buffer (64 KiB) was kept, outside --max-memory,
    for as long as the connection: one authenticated client's 1,000 idle
    connections that had each sent one RESP PING of 60 KB held 60 MiB of
    touched pages (a 32 MiB budget, mem_used 0); 1,000 holding 60 KB of a
    SET not yet complete the same, as only a command needing more than
    the 64 KiB buffer counted in the tenant's input share.  Now a buffer
    that held more than 16 KiB is freed once drained, and a command being
    received counts in the share past 16 KiB (KVTD_RBUF_KEEP).  alice's
    600 connections each PING 60 KB and stay; then 300 each send all but
    the end of a SET of 60 KB: RSS growth asserted, the share's refusals
    counted, bob served."""
    rport = resp_port(ph.srv)

    def login(who):
        return resp_login(rport, who, ph.addr(), timeout=10)
    rss_max = IDLE_RBUF_MAX_MIB[0 if ph.srv.sanitizer() == "asan" else 1]
    val = b"v" * 60000
    rss0 = ph.srv.rss_kib()
    pings, partial = [], []
    for _ in range(IDLE_RBUF_CONNS[0]):
        s = login(ALICE)
        s.sendall(resp_cmd(b"PING", val))
        got = b""
        while len(got) < len(val) + 10:
            b = s.recv(1 << 17)
            if not b:
                break
            got += b
        ph.expect(got == b"$60000\r\n" + val + b"\r\n", "a PING of 60 KB", len(got))
        pings.append(s)
    time.sleep(0.5)
    rss1 = ph.srv.rss_kib()
    for i in range(IDLE_RBUF_CONNS[1]):
        s = login(ALICE)
        s.sendall(resp_cmd(b"SET", b"idle%d" % i, val)[:-100])
        partial.append(s)
    time.sleep(1.0)
    rss2 = ph.srv.rss_kib()
    refused = 0
    for s in partial:
        s.settimeout(0.01)
        try:
            refused += s.recv(200).startswith(b"-ERR the tenant's commands")
        except OSError:
            pass
    b = login(BOB)
    b.sendall(resp_cmd(b"SET", b"bobkey", b"bob's value") + resp_cmd(b"GET", b"bobkey"))
    ph.expect(resp_line(b) == b"+OK" and resp_line(b) == b"$11", "bob's SET and GET")
    b.close()
    for s in pings + partial:
        s.close()
    print("idle_rbuf: %d idle connections after a PING of 60 KB: RSS +%.1f MiB; %d holding "
          "60 KB of a SET: +%.1f MiB more, %d refused by the tenant's share" % (
              len(pings), (rss1 - rss0) / 1024, len(partial), (rss2 - rss1) / 1024, refused))
    ph.expect((rss1 - rss0) >> 10 <= rss_max, "RSS growth (MiB) of idle connections",
              (rss1 - rss0) >> 10)
    ph.expect((rss2 - rss1) >> 10 <= rss_max, "RSS growth (MiB) of partial SETs",
              (rss2 - rss1) >> 10)
    ph.expect(refused > 0, "partial SETs refused by the share")
    ph.cases += 1


idle_rbuf.extra = ["--resp", "127.0.0.1:0"]


@phase
def resp_lengths(ph):
    """RESP length fields at their edges, after AUTH (redteam35): argument
    counts and bulk lengths of 0, -0, -2, 2^31, 2^32 + 1, 2^63 - 1, 2^63,
    2^64 + 1, a sign, a blank, bare CR or LF, a type that is not a bulk.
    Each wrapping or malformed length is a protocol error and the close,
    nothing run (a SET whose value's length is 2^32 + 1 stores nothing);
    the well-formed ones are answered and the connection kept.  A length
    with a leading zero (*01, $04, $00, $-0) is refused as Redis 7's
    string2ll refuses it, in Redis's words (rev36c: they were taken as
    1, 4 and 0)."""
    rport = resp_port(ph.srv)
    close = b"-ERR Protocol error"
    mbulk = b"-ERR Protocol error: invalid multibulk length"
    bulk = b"-ERR Protocol error: invalid bulk length"
    cases = [
        (b"*+1\r\n$4\r\nPING\r\n", close), (b"* 1\r\n$4\r\nPING\r\n", close),
        (b"*1 \r\n$4\r\nPING\r\n", close), (b"*-0\r\n", close),
        (b"*-9223372036854775809\r\n", close),
        (b"*4294967297\r\n$4\r\nPING\r\n", close), (b"*2147483648\r\n", close),
        (b"*9223372036854775808\r\n", close),
        (b"*18446744073709551617\r\n$4\r\nPING\r\n", close),
        (b"*1\r\n$+4\r\nPING\r\n", close), (b"*1\r\n$4294967300\r\nPING\r\n", close),
        (b"*1\r\n$2147483648\r\n", close), (b"*1\r\n$-2\r\n", close),
        (b"*1\r\n$9223372036854775807\r\n", close), (b"*1\r\n$4\r\nPINGxx", close),
        (b"*1\r\n$4\rPING\r\n", close), (b"*1\r$4\r\nPING\r\n", close),
        (b"*1\n$4\nPING\n", close), (b"*1\r\n:4\r\n", close), (b"*1\r\n+PING\r\n", close),
        (b"*1\r\n*1\r\n$4\r\nPING\r\n", close),
        (b"*3\r\n$3\r\nSET\r\n$2\r\nlk\r\n$4294967297\r\nv\r\n", close),
        (b"*3\r\n$3\r\nSET\r\n$2\r\nlk\r\n$18446744073709551617\r\nv\r\n", close),
        (b"*01\r\n$4\r\nPING\r\n", mbulk), (b"*00\r\n", mbulk), (b"*1x\r\n", mbulk),
        (b"*1\r\n$04\r\nPING\r\n", bulk), (b"*1\r\n$00\r\n\r\n", bulk),
        (b"*1\r\n$-0\r\n\r\n", bulk), (b"*1\r\n$-1\r\n", bulk),
        (b"*3\r\n$3\r\nSET\r\n$2\r\nlk\r\n$01\r\nv\r\n", bulk),
        (b"*1\r\n$4\r\nPING\r\n", b"+PONG"), (b"PING\n", b"+PONG"),
        # no command: skipped as Redis skips it (resp_empty)
        (b"*-2\r\n*1\r\n$4\r\nPING\r\n", b"+PONG"),
        (b"*-9223372036854775808\r\nPING\r\n", b"+PONG"),
        (b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n", b"$-1"),
        (b"*2\r\n$6\r\nEXISTS\r\n$10\r\n0123456789\r\n", b":0"),
    ]
    for data, want in cases:
        s = socket.create_connection(("127.0.0.1", rport), timeout=5,
                                     source_address=(PROBER, 0))
        s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
        ph.expect(resp_line(s) == b"+OK", "AUTH")
        s.sendall(data)
        line = resp_line(s)
        ph.expect(line.startswith(want), "answer", data, line)
        if want.startswith(close):
            ph.expect(closed_after(s), "closed after", data)
        else:
            s.sendall(resp_cmd(b"PING"))
            ph.expect(resp_line(s) == b"+PONG", "kept after", data)
        s.close()
        ph.cases += 1
    s = socket.create_connection(("127.0.0.1", rport), timeout=5, source_address=(PROBER, 0))
    s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()) +
              resp_cmd(b"EXISTS", b"lk"))
    ph.expect(resp_line(s) == b"+OK" and resp_line(s) == b":0", "nothing stored")
    s.close()


resp_lengths.extra = ["--resp", "127.0.0.1:0"]


# resp_empty: the "*0" a connection sends past which its parsing yields
# to the loop's other connections, at least (KVTD_PARSE_FRAMES is 64: 4
# times that, whatever the reads' sizes)
RESP_EMPTY_COUNT = 65536
RESP_EMPTY_YIELD = 4 * 64


@phase
def resp_empty(ph):
    """Arrays of no arguments ("*0", "*-1", any count <= 0) and blank
    inline lines, after AUTH: Redis 7 skips them without an answer and
    goes on with the connection's next command (redis-server 7.0.15:
    "*0\\r\\n*-1\\r\\n\\r\\nPING\\r\\n" is answered "+PONG" alone);
    kvtierd closed the connection at "*0" (session 37).  64K of them
    and 2,000 others, then a PING: +PONG alone, the connection kept;
    none counted as the tenant's request; and each takes a frame of
    the connection's parse budget, so that the loop's other connections
    get their turn every 64 (kvtier_server_parse_deferred_total): 256 KiB
    of "*0" cannot hold the loop."""
    rport = resp_port(ph.srv)
    s = socket.create_connection(("127.0.0.1", rport), timeout=5, source_address=(PROBER, 0))
    s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    ph.expect(resp_line(s) == b"+OK", "AUTH")
    reqs0 = tenant_metric(ph.srv, "kvtier_tenant_requests_total", ALICE[0]) or 0
    deferred0 = ph.srv.metric("kvtier_server_parse_deferred_total")
    s.sendall(b"*0\r\n" * RESP_EMPTY_COUNT + b"*-1\r\n\r\n \t\r\n*-2\r\n\n" * 400 +
              resp_cmd(b"PING"))
    got, _ = read_until(s, b"\r\n", 10)
    ph.expect(got == b"+PONG\r\n", "only the PING answered", got[:80])
    s.sendall(b"PING\r\n")
    ph.expect(resp_line(s) == b"+PONG", "the connection kept")
    s.close()
    reqs = (tenant_metric(ph.srv, "kvtier_tenant_requests_total", ALICE[0]) or 0) - reqs0
    deferred = ph.srv.metric("kvtier_server_parse_deferred_total") - deferred0
    print("resp_empty: %d arrays of no arguments and blank lines skipped; alice's requests "
          "+%d; parsing deferred %d times" % (RESP_EMPTY_COUNT + 2000, reqs, deferred))
    ph.expect(reqs == 2, "counted as requests", reqs)
    ph.expect(deferred >= RESP_EMPTY_COUNT // RESP_EMPTY_YIELD, "deferrals", deferred)
    ph.cases += 1


resp_empty.extra = ["--resp", "127.0.0.1:0"]


# resp_echo_big: an ECHO's argument (6 MiB: alice's input share is a
# quarter of --max-memory 32M) and what the server's peak RSS may grow by
# while it answers one, at most: 2.0 and 3.4 x the argument before
# (release, ASan: a copy, grown by realloc), 1.0 and 1.14 after
RESP_ECHO_MIB = 6
RESP_ECHO_PEAK_X = 1.5


@phase
def resp_echo_big(ph):
    """A large ECHO (and PING msg) answered from the command's bytes, not
    a copy (session 37): the answer was its argument copied into the
    reply's text while the command's bytes were held, a second copy of a
    64 MiB argument outside --max-memory for as long as the call, and
    the loop's memcpy.  alice ECHOes 6 MiB, then PINGs 6 MiB, reading
    each answer whole; the server's peak RSS (VmHWM, reset through
    /proc/PID/clear_refs before each) grows by at most 1.5 x the
    argument (the ECHO's is the figure: the PING reuses pages malloc
    kept from it); each answer's bytes are the argument's; the charge
    of the queued answers goes back (mem_used as before)."""
    rport = resp_port(ph.srv)
    pid = ph.srv.p.pid
    arg = bytes(range(256)) * (RESP_ECHO_MIB << 12)

    def status_kib(field):
        for line in open("/proc/%d/status" % pid):
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0
    s = socket.create_connection(("127.0.0.1", rport), timeout=10, source_address=(PROBER, 0))
    s.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    ph.expect(resp_line(s) == b"+OK", "AUTH")
    mem0 = ph.srv.metric("kvtier_server_memory_bytes")
    want = b"$%d\r\n" % len(arg) + arg + b"\r\n"
    for name in (b"ECHO", b"PING"):
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")  # VmHWM from here
        rss0 = status_kib("VmRSS")
        s.sendall(resp_cmd(name, arg))
        got, _ = read_until(s, b"\r\n", 10)
        s.settimeout(10)
        while len(got) < len(want):
            b = s.recv(1 << 20)
            if not b:
                break
            got += b
        peak = (status_kib("VmHWM") - rss0) / 1024
        print("resp_echo_big: %s of %d MiB: peak RSS +%.1f MiB (%.2f x the argument)" % (
            name.decode(), RESP_ECHO_MIB, peak, peak / RESP_ECHO_MIB))
        ph.expect(got == want, "the answer", name, len(got))
        ph.expect(peak <= RESP_ECHO_PEAK_X * RESP_ECHO_MIB, "peak RSS", name, peak)
        ph.cases += 1
    s.close()
    end = time.monotonic() + 5
    while ph.srv.metric("kvtier_server_memory_bytes") > mem0 and time.monotonic() < end:
        time.sleep(0.02)
    ph.expect(ph.srv.metric("kvtier_server_memory_bytes") <= mem0, "charges given back")


resp_echo_big.extra = ["--resp", "127.0.0.1:0"]


def tls_echo_reset(ph, arg):
    """resp_echo_balance over TLS (a server of its own): ECHOs unread,
    reset with one partly written by SSL_write from the command's bytes,
    then one read whole; mem_used back, the server stopped clean."""
    import ssl
    t = tls_server(ph, "resp_echo_balance")
    if not t:
        return
    try:
        R = tls_resp_port(t)
        mem0 = t.metric("kvtier_server_memory_bytes")
        for rcvbuf in (4096, None):
            raw = socket.socket()
            if rcvbuf:
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            raw.bind((ph.addr(), 0))
            raw.connect(("127.0.0.1", R))
            c = tls_ctx().wrap_socket(raw)
            c.settimeout(10)
            c.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
            ph.expect(c.recv(5) == b"+OK\r\n", "RESP AUTH over TLS")
            want = b"$%d\r\n" % len(arg) + arg + b"\r\n"
            if rcvbuf:
                c.sendall(resp_cmd(b"ECHO", arg) * ECHO_UNREAD)
                time.sleep(0.2)
                got = c.recv(3000)
                ph.expect(want.startswith(got), "an ECHO's answer over TLS, its start")
                rst_close(c)
                continue
            c.sendall(resp_cmd(b"ECHO", arg))
            got = b""
            while len(got) < len(want):
                try:
                    b = c.recv(1 << 20)
                except (ssl.SSLError, OSError):
                    break
                if not b:
                    break
                got += b
            ph.expect(got == want, "an ECHO's answer over TLS", len(got))
            c.close()
        mem = settled(t, "kvtier_server_memory_bytes", mem0)
        print("resp_echo_balance over TLS: %d ECHOs of 1 MiB unread, reset; one read whole; "
              "mem_used after %d B (%d before)" % (ECHO_UNREAD, mem, mem0))
        ph.expect(mem == mem0, "mem_used after the resets over TLS", mem0, mem)
    finally:
        t.stop()


# resp_echo_balance: the ECHOs' argument (answered from the command's
# bytes: RESPD_SEND_OWN_MIN is 4 KiB) and how many a reader that does not
# read asks for (alice's output share is a quarter of --max-memory 32M)
ECHO_ARG, ECHO_UNREAD = 1 << 20, 4


@phase
def resp_echo_balance(ph):
    """ECHO and PING msg of 4 KiB or more are answered from the command's
    bytes, which the queued answer keeps (kvtd_out.keep) and
    kvtd_out_free frees; charged to --max-memory from the command to the
    answer and back (session 37 review).  alice's RESP connections: a
    DEL (held by the slowed SSD writer: it answers once its tombstone is
    durable) and 2 ECHOs of 1 MiB behind it, reset while the DEL waits;
    4 ECHOs unread (a 4 KiB receive window) -- charged while queued, what
    the kernel's send buffer took aside -- then reset with one partly
    written; an inline ECHO of 5,000 quoted bytes (decoded in place in
    the command's bytes); a PING of 1 MiB read whole; over TLS, unread
    ECHOs reset with one partly written by SSL_write, and one read whole.
    Each answer read is the argument; the unread ones are charged once
    (their bytes, not also the commands'); after the resets mem_used is
    back where it was (ASan: no leak, no double free)."""
    srv, P = ph.srv, ph.srv.port
    R = resp_port(srv)
    arg = bytes(range(256)) * (ECHO_ARG // 256)
    # the SSD writer busy with write-downs (100 ms each)
    for i in range(4):
        srv.put_written("/hbkt/eb%d" % i, b"w" * (256 << 10))
    mem0 = srv.metric("kvtier_server_memory_bytes")
    a = resp_login(R, ALICE, src=ph.addr())
    a.sendall(resp_cmd(b"SET", b"ebk", b"v"))
    ph.expect(resp_line(a) == b"+OK", "SET")
    a.sendall(resp_cmd(b"DEL", b"ebk") + resp_cmd(b"ECHO", arg) * 2)
    time.sleep(0.03)
    waiting = held(a)
    rst_close(a)
    # answers queued unread
    u = socket.socket()
    u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    u.bind((ph.addr(), 0))
    u.connect(("127.0.0.1", R))
    u.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    ph.expect(resp_line(u) == b"+OK", "AUTH")
    u.sendall(resp_cmd(b"ECHO", arg) * ECHO_UNREAD)
    # once all is read and nothing moves: what the kernel took of the
    # answers (its send buffer grows as the window is acknowledged) is no
    # longer queued nor charged; charged and taken are all the answers,
    # one of them at most counted in both (the one being written)
    asked = ECHO_UNREAD * (ECHO_ARG + 12)
    end, was, now = time.monotonic() + 3, None, None
    while time.monotonic() < end:
        was, now = now, (srv.metric("kvtier_server_memory_bytes") - mem0,
                         tcp_queues(R, u.getsockname())[0])
        if now == was and sum(now) >= asked - (64 << 10):
            break
        time.sleep(0.05)
    queued, taken = now
    u.recv(1000)
    rst_close(u)
    # an inline ECHO whose argument is decoded in place; a PING msg
    q = socket.create_connection(("127.0.0.1", R), source_address=(ph.addr(), 0))
    q.sendall(resp_cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    ph.expect(resp_line(q) == b"+OK", "AUTH")
    q.sendall(b'ECHO "' + b"\\x41\\n" * 1000 + b'"\r\n')
    want = b"A\n" * 1000
    got, _ = read_until(q, b"\r\n" + want + b"\r\n", 5)
    ph.expect(got == b"$%d\r\n" % len(want) + want + b"\r\n", "the inline ECHO", got[:40])
    q.sendall(resp_cmd(b"PING", arg))
    want = b"$%d\r\n" % len(arg) + arg + b"\r\n"
    got, _ = read_until(q, want, 10)
    ph.expect(got == want, "the PING's answer", len(got))
    q.close()
    mem = settled(srv, "kvtier_server_memory_bytes", mem0)
    tls_echo_reset(ph, arg)
    print("resp_echo_balance: a DEL and 2 ECHOs of 1 MiB reset %s; %d ECHOs unread: %.2f MiB "
          "charged, %.2f MiB in the kernel's send buffer; mem_used after the resets %d B (%d "
          "before)" % ("while the DEL waited" if waiting else "(the DEL DID NOT wait)",
                      ECHO_UNREAD, queued / 1048576, taken / 1048576, mem, mem0))
    ph.expect(waiting, "the DEL still waited at the reset")
    # charged once: the answers' bytes, not those and the commands'
    ph.expect(asked - (64 << 10) <= queued + taken <= asked + ECHO_ARG + (64 << 10),
              "unread ECHOs charged", queued, taken)
    ph.expect(mem == mem0, "mem_used after the resets", mem0, mem)
    ph.cases += 1
    ph.probe("ECHOs reset")


resp_echo_balance.extra = ["--resp", "127.0.0.1:0", "--ssd", "64M", "--set",
                           "ssd.segment=16M", "--set", "ssd.debug_write_delay_ms=100"]


# idle_conns: bytes of RSS an idle connection may hold, at most (ASan,
# release): after a SET and a GET of 200 KB, 66 KB release and 75 KB
# ASan before redteam35; 1.2 KB release after (a fresh one 0.7 KB)
IDLE_CONNS = 600
IDLE_CONN_MAX_B = (24 << 10, 12 << 10)


@phase
def idle_conns(ph):
    """Memory per idle connection (redteam35).  Each connection kept a
    64 KiB read buffer between requests, outside --max-memory; one made
    after earlier requests freed memory they had touched was resident
    whole.  alice fills the DRAM tier (so that its pages are not counted
    below), then 600 connections each SET a value of 200 KB, GET it back
    whole, and stay: RSS per connection asserted.  Now a connection with
    nothing buffered holds no read buffer (daemon/loop.c "Read
    buffers"): each read is into its loop's, kept only by a request left
    partly read.  Then bob is served, and a connection that leaves a SET
    partly sent and finishes it later gets its value back exactly."""
    rport = resp_port(ph.srv)
    val = b"v" * 200000

    def login(who):
        return resp_login(rport, who, ph.addr(), timeout=20)

    def get_whole(s, key, want):
        s.sendall(resp_cmd(b"GET", key))
        exp, got = b"$%d\r\n" % len(want) + want + b"\r\n", b""
        while len(got) < len(exp):
            b = s.recv(1 << 20)
            if not b:
                break
            got += b
        return got == exp

    f = login(ALICE)
    for i in range(500):  # 100 MB through a 64 MiB tier: all of it touched
        f.sendall(resp_cmd(b"SET", b"fill%d" % (i % 16), val))
        ph.expect(resp_line(f) == b"+OK", "fill SET", i)
    f.close()
    time.sleep(0.5)
    rss0 = ph.srv.rss_kib()
    idle = []
    for i in range(IDLE_CONNS):
        s = login(ALICE)
        s.sendall(resp_cmd(b"SET", b"idle%d" % (i % 16), val))
        ph.expect(resp_line(s) == b"+OK", "SET of 200 KB", i)
        ph.expect(get_whole(s, b"idle%d" % (i % 16), val), "GET of 200 KB", i)
        idle.append(s)
    time.sleep(1.0)
    rss1 = ph.srv.rss_kib()
    per = (rss1 - rss0) * 1024 // IDLE_CONNS
    # a request left partly read is kept across reads, and its bytes are
    # exactly the client's
    part = login(ALICE)
    cmd = resp_cmd(b"SET", b"partial", val[:150000] + b"w" * 50000)
    part.sendall(cmd[:70000])
    time.sleep(0.3)
    part.sendall(cmd[70000:])
    ph.expect(resp_line(part) == b"+OK", "a SET sent in two parts")
    ph.expect(get_whole(part, b"partial", val[:150000] + b"w" * 50000), "its GET")
    b = login(BOB)
    b.sendall(resp_cmd(b"SET", b"bobkey", b"bob's value") + resp_cmd(b"GET", b"bobkey"))
    ph.expect(resp_line(b) == b"+OK" and resp_line(b) == b"$11", "bob's SET and GET")
    for s in idle + [part, b]:
        s.close()
    bound = IDLE_CONN_MAX_B[0 if ph.srv.sanitizer() == "asan" else 1]
    print("idle_conns: %d idle connections after a SET and a GET of 200 KB: RSS +%.1f MiB, "
          "%d B each (at most %d)" % (IDLE_CONNS, (rss1 - rss0) / 1024, per, bound))
    ph.expect(per <= bound, "RSS per idle connection (bytes)", per)
    ph.cases += 1


idle_conns.extra = ["--resp", "127.0.0.1:0"]
# The whole 64 MiB tier is touched on purpose (its pages then count before
# the connections are measured); TSan's shadow of it is more again: the
# end-of-phase RSS bound counts 128 MiB of DRAM (TSan: +162 MiB in all).
idle_conns.dram_mib = 128

def gone_within(s, timeout):
    """Does the server close s within timeout (an alert before the EOF
    allowed)?"""
    end = time.monotonic() + timeout
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            s.settimeout(left)
            if not s.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def chain_pki(base, fillers):
    """A client certificate whose chain file carries fillers copies of a
    certificate of ~10 KB (a subjectAltName of 300 names): the chain a
    client sends is taken as its file says.  (cert, key)."""
    sans = ",".join("DNS:filler%03d.%s.example" % (i, "x" * 12) for i in range(300))
    subprocess.check_call(
        "cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout cli.key -out cli.pem -days 2 -subj /CN=client >>openssl.log 2>&1 && "
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout fill.key -out fill.pem -days 2 -subj /CN=filler -addext "
        "'subjectAltName=%s' >>openssl.log 2>&1" % (base, sans), shell=True)
    fill = open(os.path.join(base, "fill.pem")).read()
    with open(os.path.join(base, "chain.pem"), "w") as f:
        f.write(open(os.path.join(base, "cli.pem")).read() + fill * fillers)
    return os.path.join(base, "chain.pem"), os.path.join(base, "cli.key")


# tls_big_messages: RSS a connection (KiB) holding a handshake message that
# declares more than one record's plaintext, at most (ASan, release; the
# charge, TLS_HS_MEM, is 60.3 KiB).  Release before: 139-167, after 6-9;
# ASan after: 13, and 53 for the certificate lists (full handshakes done:
# the sanitizer's allocator grows with them; a held 128 KiB buffer alone is
# 131 KiB touched, so the bound still tells the two apart)
TLS_BIG_MSG_KIB = (100, 30)
TLS_BIG_MSG_CONNS = 150


@phase
def tls_big_messages(ph):
    """OpenSSL allocates a handshake message's whole declared length when
    its 4-byte header is read, and zeroes it (BUF_MEM_grow_clean): a
    ClientHello may declare up to 131,396 bytes, a client's Certificate
    max_cert_list (100 KiB by default).  The first-record gate (tls.c)
    waits for one record only, and TLS_HS_MEM charges 60 KiB for a
    handshake: a record of 4 bytes declaring a ClientHello of 128 KiB (9
    bytes sent) held ~150 KiB of the server for the handshake's deadline.
    Now a ClientHello must declare at most one record's plaintext (tls.c
    "A ClientHello's length"), and a client's certificate list at most
    TLSIO_CERT_LIST_MAX (lib/sys/tlsio.c): past either, closed at once.
    The gate is behind a second ClientHello, after a HelloRetryRequest
    (+191 KiB a connection, ASan, 2026-12-06): a ClientHello without a
    key share of a group the server takes is refused instead
    (lib/sys/tlsio.c tlsio_hello_share).  Asserted, for a 4-byte record
    declaring 128 KiB, the header split over two records, 48 KiB of such a
    ClientHello, 48 KiB of a 90 KB certificate list and a retried
    ClientHello declaring 128 KiB: the connections closed before the
    handshake's deadline, RSS a connection; real clients' handshakes, with
    and without a client certificate, answered."""
    import ssl
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    pki = tls_pki(base)
    if not pki:
        print("tls_big_messages: no openssl command to make a certificate with: skipped")
        return
    chain, ckey = chain_pki(base, 9)
    argv = ["--tls-cert", pki[0], "--tls-key", pki[1], "--tls-ca", pki[0], "--resp",
            "127.0.0.1:0", "--idle-timeout", "10"]
    # 1. a 4-byte record: a ClientHello's header declaring 128 KiB
    tiny = bytes([22, 3, 1, 0, 4, 1, 0x02, 0x00, 0x00])
    # 2. the same declared in a whole first record of 16 KiB, and two more
    #    records of it
    rec = bytes([22, 3, 1, 0x40, 0x00])
    big = rec + bytes([1, 0x01, 0xff, 0x00]) + b"\0" * 16380 + (rec + b"\0" * 16384) * 2
    # 3. a client certificate chain of ~90 KB (the server asks for one,
    #    --tls-ca), the first 48 KiB of its records sent, then nothing
    ctx = tls_ctx()
    ctx.load_cert_chain(chain, ckey)

    def cert_flight(c):
        i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
        hs = ctx.wrap_bio(i, o)
        c.settimeout(5)
        try:
            hs.do_handshake()
        except ssl.SSLWantReadError:
            pass
        c.sendall(o.read())  # the ClientHello
        while True:  # the server's flight, then ours
            b = c.recv(65536)
            ph.expect(b, "the server's flight")
            i.write(b)
            try:
                hs.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
        flight = o.read()
        ph.expect(len(flight) > 60000, "the client's second flight (bytes)", len(flight))
        try:  # refused at the message's header (the first record), or held
            c.sendall(flight[:49152])
        except (ConnectionResetError, BrokenPipeError):
            pass

    # 1b. the header itself split over two records of 2 bytes
    split = bytes([22, 3, 1, 0, 2, 1, 0x02, 22, 3, 1, 0, 2, 0x00, 0x00])
    # 4. a ClientHello whose key share names a group the server does not
    #    take (ffdhe2048) while its supported groups name one it does
    #    (X25519): answered with a HelloRetryRequest, after which a second
    #    ClientHello's header declared 128 KiB (the first-record gate is
    #    behind it)
    hrr_hello = captured_hello("ffdhe2048:X25519")
    ph.expect(len(hrr_hello) > 100 and hrr_hello[0] == 22, "a ClientHello captured (HRR)")

    def after_hrr(c):
        c.sendall(hrr_hello)
        c.settimeout(5)
        try:
            b = c.recv(65536)  # the HelloRetryRequest, or the refusal
        except OSError:
            b = b""
        if b[:1] == b"\x16":
            try:
                c.sendall(bytes([22, 3, 3, 0, 4, 1, 0x02, 0x00, 0x00]))
            except (ConnectionResetError, BrokenPipeError):
                pass
    cases = (("a 4-byte record declaring a 128 KiB ClientHello", TLS_BIG_MSG_CONNS,
              lambda c: c.sendall(tiny)),
             ("a ClientHello's header in two records, declaring 128 KiB", TLS_BIG_MSG_CONNS,
              lambda c: c.sendall(split)),
             ("48 KiB of a ClientHello declaring 128 KiB", TLS_BIG_MSG_CONNS,
              lambda c: c.sendall(big)),
             ("48 KiB of a 90 KB client certificate flight", TLS_BIG_MSG_CONNS // 3, cert_flight),
             ("a second ClientHello (after a HelloRetryRequest) declaring 128 KiB",
              TLS_BIG_MSG_CONNS, after_hrr))
    # each on a fresh server: the allocator keeps (and reuses) what an
    # earlier case's connections freed; no ASan quarantine (the refused
    # connections' handshakes, freed, would count as held)
    for what, n, attack in cases:
        t = Server(ph.srv.argv[0], base, argv, quarantine_mb=0)
        try:
            rport = tls_resp_port(t)
            kib_max = TLS_BIG_MSG_KIB[0 if t.sanitizer() == "asan" else 1]
            time.sleep(0.3)
            rss0 = t.rss_kib()
            src = ph.addr()
            socks = []
            for k in range(n):
                # each refused certificate list counts against its address
                # (a failed handshake): past 20 a second it is throttled
                if attack in (cert_flight, after_hrr) and k % 16 == 15:
                    src = ph.addr()
                c = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
                attack(c)
                socks.append(c)
            time.sleep(0.5)
            per = (t.rss_kib() - rss0) / n
            # the handshake's deadline is 10 s: closed before it, or held
            closed = sum(gone_within(c, 0.05) for c in socks)
            for c in socks:
                c.close()
            print("tls_big_messages: %d connections, %s: RSS +%.1f KiB a connection, "
                  "%d closed before the handshake's deadline" % (n, what, per, closed))
            ph.expect(per <= kib_max, "RSS a connection (KiB): " + what, per)
            ph.expect(closed == n, "closed at once: " + what, closed)
            ph.cases += 1
            # real clients, then a PING: one without a certificate, one
            # with a certificate the CA file holds (a list of 0.6 KB)
            mtls = tls_ctx()
            mtls.load_cert_chain(pki[0], pki[1])
            for cctx in (tls_ctx(), mtls):
                raw = socket.create_connection(("127.0.0.1", rport), timeout=10)
                s = cctx.wrap_socket(raw)
                s.sendall(resp_cmd(b"PING"))
                got = s.recv(100)
                s.close()
                ph.expect(got[:1] in (b"-", b"+"), "a real TLS client answered", got[:60])
        finally:
            t.stop()
            os.replace(t.log, "%s.%d" % (t.log, cases.index((what, n, attack))))

def captured_hello(group):
    """The ClientHello (its first record) openssl s_client sends offering
    group alone in TLS 1.3, taken on a listener of our own."""
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(1)
    lsn.settimeout(10)
    p = subprocess.Popen(["openssl", "s_client", "-connect", "127.0.0.1:%d" % lsn.getsockname()[1],
                          "-groups", group, "-tls1_3"], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c, _ = lsn.accept()
        c.settimeout(10)
        d = b""
        while len(d) < 5 or len(d) < 5 + (d[3] << 8 | d[4]):
            b = c.recv(65536)
            if not b:
                break
            d += b
        c.close()
    finally:
        p.kill()
        p.wait()
        lsn.close()
    return d


# tls_groups: the loop's CPU a connection sending a canned ClientHello that
# offers ffdhe8192 alone, over one that offers X25519, at most (release:
# 108 ms against 0.23 before, 470x; after: refused with an alert, no crypto)
TLS_GROUPS_RATIO = 3.0


@phase
def tls_groups(ph):
    """OpenSSL 3.0's server takes TLS 1.3's finite-field groups, and the
    group the client's key share names: a canned ClientHello naming
    ffdhe8192 alone made the loop compute an 8192-bit key pair and the
    shared secret, 108 ms of CPU a connection (release), for 1.2 KB the
    client replays without any crypto of its own -- the per-address
    handshake throttle (20 failures a second) let one address hold a loop
    busy.  Now either side offers and takes the elliptic curves only
    (lib/sys/tlsio.c TLSIO_GROUPS).  Asserted: the loop's CPU a ffdhe8192
    ClientHello against an X25519 one, answered with an alert, not a
    ServerHello; clients offering X25519, P-256 and P-384 served."""
    t = tls_server(ph, "tls_groups", ["--idle-timeout", "10"])
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        per = {}
        for group, n in (("X25519", 60), ("ffdhe8192", 10), ("ffdhe2048", 20)):
            hello = captured_hello(group)
            ph.expect(len(hello) > 100 and hello[0] == 22, "a ClientHello captured", group)
            answers = []
            src = ph.addr()
            c0 = loop_cpu_s(t)
            for k in range(n):
                if k % 15 == 14:  # under the per-address throttle
                    src = ph.addr()
                c = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
                c.sendall(hello)
                c.settimeout(10)
                try:
                    b = c.recv(16)
                except OSError:
                    b = b""
                answers.append(b[:1] + (b[5:6] if len(b) > 5 else b""))
                c.close()
            per[group] = (loop_cpu_s(t) - c0) / n
            hellos = sum(a == b"\x16\x02" for a in answers)
            print("tls_groups: %d canned ClientHellos offering %s: %.3f ms of the loop each, "
                  "%d answered with a ServerHello" % (n, group, per[group] * 1e3, hellos))
            if group == "X25519":
                ph.expect(hellos == n, "X25519 ClientHellos answered", hellos)
            else:
                ph.expect(hellos == 0, "no ServerHello to " + group, hellos)
                ratio = per[group] / max(per["X25519"], 1e-5)
                ph.expect(ratio <= TLS_GROUPS_RATIO, "loop CPU, %s over X25519" % group, ratio)
            ph.cases += 1
        # real clients, each curve
        for group in ("X25519", "P-256", "P-384"):
            out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % rport,
                                  "-groups", group], input=b"", capture_output=True,
                                 timeout=20).stdout.decode(errors="replace")
            ph.expect("Server Temp Key" in out, "a handshake offering " + group, out[-300:])
            ph.cases += 1
    finally:
        t.stop()

# tls_sessions: RSS (bytes) a TLS 1.2 handshake leaves once its connection is
# closed, at most, release (before: 1,112-1,447, the server's session cache;
# after: 229-434, the allocator's noise); under a sanitizer not asserted (its
# allocator: 2,594 after) -- the resumption is, everywhere
TLS_SESSION_B = 900
TLS_SESSION_CONNS = 1500


@phase
def tls_sessions(ph):
    """With session tickets off, OpenSSL's server still cached every TLS
    1.2 session it made by its id (SSL_SESS_CACHE_SERVER, 20,480 of them,
    ~1.2 KB each, kept two hours), outside --max-memory: any client's
    handshakes, before any AUTH, filled it.  Now the server keeps no
    sessions (lib/sys/tlsio.c).  Asserted: the RSS that 1,500 closed TLS
    1.2 connections leave, and that a session offered again is not
    resumed (a full handshake, served)."""
    import ssl
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    pki = tls_pki(base)
    if not pki:
        print("tls_sessions: no openssl command to make a certificate with: skipped")
        return
    t = Server(ph.srv.argv[0], base, ["--tls-cert", pki[0], "--tls-key", pki[1], "--resp",
                                      "127.0.0.1:0"], quarantine_mb=0)
    try:
        rport = tls_resp_port(t)
        ctx = tls_ctx()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        # one first: what the first handshake allocates once is not a session
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", rport)))
        s.close()
        time.sleep(0.3)
        rss0 = t.rss_kib()
        last = None
        for k in range(TLS_SESSION_CONNS):
            if k % 200 == 0:
                src = ph.addr()
            raw = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
            s = ctx.wrap_socket(raw)
            last = s.session
            # a PING, as an honest client's connection is used: one closed
            # unused counts against its address since session 47 (tls_unused);
            # red47's fresh address every 20 such connections shared a hashed
            # slot (4,096, random key) with another address now and then, the
            # same second: throttled, a handshake reset (review47f)
            s.sendall(resp_cmd(b"PING"))
            got = s.recv(100)
            assert got[:1] in (b"+", b"-"), ("tls_sessions: a PING", got[:60])
            s.close()
        time.sleep(0.5)
        per = (t.rss_kib() - rss0) * 1024 / TLS_SESSION_CONNS
        raw = socket.create_connection(("127.0.0.1", rport), timeout=10)
        s = ctx.wrap_socket(raw, session=last)
        reused = s.session_reused
        s.sendall(resp_cmd(b"PING"))
        got = s.recv(100)
        s.close()
        print("tls_sessions: %d TLS 1.2 handshakes: RSS +%.0f B each once closed; a session "
              "offered again %s" % (TLS_SESSION_CONNS, per, "resumed" if reused else "not resumed"))
        if not t.sanitizer():
            ph.expect(per <= TLS_SESSION_B, "RSS a closed TLS 1.2 connection leaves (B)", per)
        ph.expect(not reused, "a session resumed from the server's cache")
        ph.expect(got[:1] in (b"-", b"+"), "the full handshake served", got[:60])
        ph.cases += 1
    finally:
        t.stop()


def _tcp_row(port, peer):
    """/proc/net/tcp's row of the server's socket on port connected to
    peer (address, port), split, or None."""
    import struct
    want = "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(peer[0]))[0], peer[1])
    for line in open("/proc/net/tcp").readlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == port and f[2] == want:
            return f
    return None


def server_socket(port, peer):
    """That socket's inode, or None."""
    f = _tcp_row(port, peer)
    return f[9] if f and f[9] != "0" else None


def tcp_queues(port, peer):
    """That socket's send queue (bytes not acknowledged) and receive queue
    (bytes not read), or (0, 0)."""
    f = _tcp_row(port, peer)
    return tuple(int(x, 16) for x in f[4].split(":")) if f else (0, 0)


def server_holds(srv, inode):
    """Does the server have that socket open (an fd of it)?"""
    d = "/proc/%d/fd" % srv.p.pid
    for fd in os.listdir(d):
        try:
            if os.readlink(os.path.join(d, fd)) == "socket:[%s]" % inode:
                return True
        except OSError:
            pass
    return False


# unauth_evict_stalled: --max-conns (its half, 16, unauthenticated),
# --idle-timeout (what closed the evicted connection before), and how
# soon it must be gone (a connection whose last answer was written lingers
# at most KVTD_LINGER_MS, 2 s; this one is closed at once)
EVICT_CONNS, EVICT_IDLE_S, EVICT_GONE_S = 32, 10, 3.0


@phase
def unauth_evict_stalled(ph):
    """When the unauthenticated connections are full (half of --max-conns)
    the oldest is evicted to admit a new one; it was sent its last error
    and closed once that was written.  One whose peer does not read --
    its socket full of the answers it asked for before AUTH (RESP PINGs,
    each -NOAUTH), the rest queued -- could not be written to: it was kept,
    no longer counted among the unauthenticated ones, with its fd and its
    output, until --idle-timeout (so a few peers could hold --max-conns
    that way).  A RESP client with a 1 KiB receive window (536-byte
    segments) sends PINGs until the server stops reading it, then 16 other
    connections fill the pool: the evicted one's fd must be gone at once
    (well before --idle-timeout), and another client is served."""
    srv = ph.srv
    R = resp_port(srv)
    v = socket.socket()
    v.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    v.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    v.bind((ph.addr(), 0))
    v.connect(("127.0.0.1", R))
    v.setblocking(False)
    # 5,000 PINGs (70 KB) ask 170 KB of -NOAUTH, more than the kernel's
    # buffers take (~40 KB here); wait until the server's send queue for it
    # stops growing: it can write no more
    pings, sent = resp_cmd(b"PING") * 5000, 0
    try:
        while sent < len(pings):
            sent += v.send(pings[sent:])
    except BlockingIOError:
        pass
    q, same, t0 = None, 0, time.monotonic()
    while time.monotonic() - t0 < 2 and same < 2:
        time.sleep(0.1)
        was, q = q, tcp_queues(R, v.getsockname())
        same = same + 1 if q == was and q[0] and q[1] else 0
    tx, rx = q
    inode = server_socket(R, v.getsockname())  # (0 until accepted)
    print("the server's socket of the client: %d B unsent or unacknowledged, %d B unread "
          "after %.2f s" % (tx, rx, time.monotonic() - t0))
    assert inode and server_holds(srv, inode), "the server's socket of the client"
    fill = [socket.create_connection(("127.0.0.1", R), source_address=(ph.addr(), 0))
            for _ in range(EVICT_CONNS // 2)]
    t0 = time.monotonic()
    while server_holds(srv, inode) and time.monotonic() - t0 < EVICT_GONE_S:
        time.sleep(0.02)
    gone = time.monotonic() - t0
    still = server_holds(srv, inode)
    print("a RESP client that sent %d KB of PINGs unauthenticated and reads nothing, evicted "
          "by %d new connections: its fd %s after %.2f s (--idle-timeout %d)" % (
              sent >> 10, len(fill), "still open" if still else "closed", gone, EVICT_IDLE_S))
    ph.expect(not still, "the evicted connection's fd, %.1f s after its eviction" % EVICT_GONE_S)
    for s in fill:
        s.close()
    v.close()
    ph.cases += 1
    ph.probe("an evicted connection that does not read")


unauth_evict_stalled.extra = ["--resp", "127.0.0.1:0", "--max-conns", str(EVICT_CONNS),
                              "--idle-timeout", str(EVICT_IDLE_S)]


# ---------------------------------------------------------------------------
# S3: virtual-hosted-style addressing (--s3-domain, doc/s3.md "Addressing")

VHOST_DOMAINS = "s3.test,Other.Test."


@phase
def s3_vhost(ph):
    """With --s3-domain s3.test,other.test a Host BUCKET.s3.test[:port]
    names BUCKET and the path is the key; every operation works both ways,
    the signature covers the Host and the path as sent, and the Host is
    checked as attacker input: its case, its port, a bucket label S3
    would refuse, dotted buckets (everything before the domain), a
    granted bucket alice.shared, the domain itself (path-style), names
    that are not under it (path-style), two Host headers (400)."""
    P, ok, sm, req = ph.kit()
    # the startup line names the domains as compared (lowercased, no
    # trailing dot)
    m = re.search(r'msg="S3 listener on [0-9.:]+" addr=\S+ s3_domain=(\S+)\n',
                  open(ph.srv.log).read())
    ph.expect(m and m.group(1) == "s3.test,other.test", "the S3 listener's log line names "
              "the --s3-domain names", m and m.group(0))

    def vh(method, bucket, path, query="", host=None, who=ALICE, **kw):
        """A signed virtual-hosted request for bucket (Host
        BUCKET.s3.test:P unless host is given)."""
        h = host if host is not None else "%s.s3.test:%d" % (bucket, P)
        extra = dict(kw.pop("extra", None) or {}, host=h)
        return signed_msg(P, method, path, query, extra=extra, who=who, **kw)

    def run(msg, status, what, body=None):
        st, hd, b = http(P, msg, src=PROBER)
        ph.expect(st == status and (body is None or b == body), what, st, hd[:200], b[:300])
        return st, hd, b

    # objects: put one way, read the other, both ways each
    run(vh("PUT", "hbkt", "/vk", body=b"virtual bytes"), 200, "vhost PUT")
    run(sm("GET", "/hbkt/vk"), 200, "path-style GET of a vhost PUT", b"virtual bytes")
    run(vh("GET", "hbkt", "/known"), 200, "vhost GET of a path-style PUT", b"known bytes")
    st, hd, _ = http(P, vh("HEAD", "hbkt", "/vk"), src=PROBER)
    ph.expect(st == 200 and re.search(r"(?i)content-length: 13(\r|$)", hd), "vhost HEAD", st, hd)
    run(vh("GET", "hbkt", "/known", query="", extra={"range": "bytes=0-4"}), 206, "vhost range",
        b"known")
    run(vh("PUT", "hbkt", "/dir/sub/k", body=b"deep"), 200, "vhost key with slashes")
    run(sm("GET", "/hbkt/dir/sub/k"), 200, "... path-style", b"deep")
    run(vh("GET", "hbkt", "/nope"), 404, "vhost NoSuchKey")
    run(vh("GET", "nobkt", "/k"), 404, "vhost NoSuchBucket")
    # the Host compared without regard to case, a port or none, the
    # absolute form's trailing dot, the second domain (given as Other.Test.)
    for host in ("HBKT.S3.TEST:%d" % P, "hbkt.s3.test", "hbkt.s3.test.:%d" % P,
                 "hbkt.other.test:%d" % P, "hbkt.s3.test:"):
        run(vh("GET", "hbkt", "/known", host=host), 200, "Host " + host, b"known bytes")
    # listings on the bucket's host: GET /?list-type=2, v1, uploads
    st, _, b = run(vh("GET", "hbkt", "/", query="list-type=2&prefix=dir%2F"), 200, "vhost V2")
    ph.expect(b"<Name>hbkt</Name>" in b and b"<Key>dir/sub/k</Key>" in b and
              b"<Key>vk</Key>" not in b, "vhost ListObjectsV2", b[:400])
    st, _, b = run(vh("GET", "hbkt", "/"), 200, "vhost ListObjects")
    ph.expect(b"<Key>vk</Key>" in b and b"<Key>known</Key>" in b, "vhost ListObjects", b[:400])
    run(vh("HEAD", "hbkt", "/"), 200, "vhost HeadBucket")
    st, _, b = run(vh("GET", "hbkt", "/", query="location"), 200, "vhost GetBucketLocation")
    # the domain itself: ListBuckets, and path-style
    st, _, b = run(vh("GET", None, "/", host="s3.test:%d" % P), 200, "ListBuckets on the domain")
    ph.expect(b"<Name>hbkt</Name>" in b, "ListBuckets on the domain", b[:300])
    run(vh("GET", None, "/hbkt/known", host="S3.Test:%d" % P), 200, "path-style on the domain",
        b"known bytes")
    # names not under a domain: path-style as before
    for host in ("127.0.0.1:%d" % P, "hbkt.s3.test.evil:%d" % P, "hbkts3.test:%d" % P,
                 "[::1]:%d" % P, "localhost", ""):
        run(vh("GET", None, "/hbkt/known", host=host), 200, "path-style, Host %r" % host,
            b"known bytes")
    # buckets: create, dotted (everything before the domain), delete
    run(vh("PUT", "v.b.c", "/"), 200, "vhost CreateBucket of a dotted name")
    run(vh("PUT", "v.b.c", "/k", body=b"dotted"), 200, "vhost PUT, dotted bucket")
    run(sm("GET", "/v.b.c/k"), 200, "... path-style", b"dotted")
    run(vh("DELETE", "v.b.c", "/k"), 204, "vhost DeleteObject")
    run(sm("GET", "/v.b.c/k"), 404, "... gone")
    run(vh("DELETE", "v.b.c", "/"), 204, "vhost DeleteBucket")
    run(sm("HEAD", "/v.b.c"), 404, "... gone")
    # CopyObject: the source still /bucket/key
    run(vh("PUT", "hbkt", "/copy", extra={"x-amz-copy-source": "/hbkt/vk"}), 200, "vhost copy")
    run(sm("GET", "/hbkt/copy"), 200, "... its bytes", b"virtual bytes")
    # DeleteObjects
    xml = b"<Delete><Object><Key>copy</Key></Object></Delete>"
    md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
    st, _, b = run(vh("POST", "hbkt", "/", query="delete", body=xml, extra={"content-md5": md5}),
                   200, "vhost DeleteObjects")
    ph.expect(b"<Deleted><Key>copy</Key>" in b, "vhost DeleteObjects", b[:300])
    run(sm("GET", "/hbkt/copy"), 404, "... gone")
    # multipart
    st, _, b = run(vh("POST", "hbkt", "/mp", query="uploads"), 200, "vhost CreateMultipartUpload")
    up = re.search(rb"<UploadId>([0-9a-f]+)</UploadId>", b).group(1).decode()
    st, hd, _ = run(vh("PUT", "hbkt", "/mp", query="partNumber=1&uploadId=" + up, body=b"part"),
                    200, "vhost UploadPart")
    etag = re.search(r'(?i)etag: ("[^"]*")', hd).group(1)
    st, _, b = run(vh("GET", "hbkt", "/mp", query="uploadId=" + up), 200, "vhost ListParts")
    ph.expect(b"<PartNumber>1</PartNumber>" in b, "vhost ListParts", b[:300])
    done = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
            "</CompleteMultipartUpload>" % etag).encode()
    run(vh("POST", "hbkt", "/mp", query="uploadId=" + up, body=done), 200, "vhost Complete")
    run(sm("GET", "/hbkt/mp"), 200, "... path-style GET", b"part")
    st, _, b = run(vh("POST", "hbkt", "/mp2", query="uploads"), 200, "vhost upload 2")
    up = re.search(rb"<UploadId>([0-9a-f]+)</UploadId>", b).group(1).decode()
    run(vh("DELETE", "hbkt", "/mp2", query="uploadId=" + up), 204, "vhost Abort")
    # a grant: bob reads alice's bucket "shared" as alice.shared.s3.test
    run(sm("PUT", "/shared"), 200, "alice's shared bucket")
    run(sm("PUT", "/shared/g", body=b"granted"), 200, "alice's shared object")
    run(vh("GET", "alice.shared", "/g", who=BOB), 200, "bob's vhost GET by a grant", b"granted")
    st, _, b = http(P, vh("PUT", "alice.shared", "/g", who=BOB, body=b"x"), src=PROBER)
    ph.expect(st == 403 and code_of(b) == "AccessDenied", "bob's vhost PUT by a grant", st, b)
    run(vh("GET", "alice.hbkt", "/known", who=BOB), 404, "no grant: NoSuchBucket")
    # a presigned URL signs the Host too
    m = presigned(P, "/known", 60).replace(b"Host: 127.0.0.1:%d" % P,
                                            b"Host: hbkt.s3.test:%d" % P)
    run(vh("GET", "hbkt", "/known", payload="UNSIGNED-PAYLOAD"), 200, "vhost unsigned payload",
        b"known bytes")

    # the signature covers the Host as sent: one signed for path-style
    # 127.0.0.1 and sent to the bucket's host does not match
    signed_ip = sm("GET", "/known")
    ph.case("Host changed after signing", signed_ip.replace(
        b"host: 127.0.0.1:%d" % P, b"host: hbkt.s3.test:%d" % P), 403, "SignatureDoesNotMatch")
    ph.case("presigned, Host changed", m, 403, "SignatureDoesNotMatch")
    # names S3 refuses for a new bucket (adjacent periods, an IPv4
    # address's shape, its reserved prefixes and suffixes): CreateBucket
    # refuses them both ways; any other request names no bucket with
    # them (NoSuchBucket: a bucket an older kvtierd made stays reachable)
    # (hostfix: a..b was created)
    for name in ("a..b", "192.168.5.4", "xn--ab", "sthree-ab", "amzn-s3-demo-ab", "ab-s3alias",
                 "ab--ol-s3", "ab.mrap", "ab--x-s3", "ab--table-s3"):
        for how, msg in (("path-style", sm("PUT", "/" + name)), ("vhost", vh("PUT", name, "/"))):
            st, _, b = http(P, msg, src=PROBER)
            ph.expect(st == 400 and code_of(b) == "InvalidBucketName",
                      "CreateBucket %s %s" % (how, name), st, b[:200])
        st, _, b = http(P, sm("GET", "/%s/k" % name), src=PROBER)
        ph.expect(st == 404 and code_of(b) == "NoSuchBucket", "GET in %s" % name, st, b[:200])
        st, _, b = http(P, vh("GET", name, "/k"), src=PROBER)
        ph.expect(st == 404 and code_of(b) == "NoSuchBucket", "vhost GET in %s" % name, st,
                  b[:200])
    for name in ("1.2.3.4.5", "192.168.5.4a", "a.xn--b", "s3alias-ab"):  # none of those
        run(sm("PUT", "/" + name), 200, "CreateBucket " + name)
        run(vh("DELETE", name, "/"), 204, "DeleteBucket " + name)
    # bucket labels S3 refuses
    for label in ("Ab_c", "ab", "-ab", "ab-", "a" * 64, ".ab", "a b", "a/b"):
        ph.case("bucket label %r" % label[:20], vh("GET", label, "/known"), 400,
                "InvalidBucketName")
    ph.case("bucket label of 200 bytes", vh("GET", "a" * 200, "/known"), 400,
            "InvalidBucketName")
    # Host values that are no host[:port]
    for host in ("hbkt.s3.test:80x", "hbkt.s3.test:123456", ":%d" % P, "[::1", "[::1]x",
                 "a" * 300 + ".s3.test", "hbkt.s3.test:%d:1" % P):
        ph.case("Host %r" % host[:40], vh("GET", None, "/known", host=host), 400,
                "InvalidArgument")
    # two Host headers (RFC 9112 3.2), one under the domain
    two = vh("GET", "hbkt", "/known").replace(b"\r\n\r\n", b"\r\nHost: 127.0.0.1\r\n\r\n", 1)
    ph.case("two Host headers", two, 400, "InvalidArgument")
    # Host names the bucket, so it must be signed: a DELETE of hbkt's
    # /victim signed without it was taken, and sent again with another
    # Host deleted other's /victim (redhttp, 2026-12-06); path-style, a
    # signature without host is still taken (doc/security.md)
    run(sm("PUT", "/other"), 200, "CreateBucket other")
    for b in ("hbkt", "other"):
        run(sm("PUT", "/%s/victim" % b, body=b"victim of " + b.encode()), 200, "PUT victim")

    def unsigned_host(method, path, host, sent_host=None):
        """signed for host, without it in SignedHeaders; sent with
        sent_host"""
        h = {"host": host}
        ph_ = hashlib.sha256(b"").hexdigest()
        auth = sign(method, path, "", h, ph_, signed=["x-amz-content-sha256", "x-amz-date"])
        return ("%s %s HTTP/1.1\r\nhost: %s\r\nx-amz-date: %s\r\nx-amz-content-sha256: %s"
                "\r\nauthorization: %s\r\n\r\n" % (method, path, sent_host or host,
                                                      h["x-amz-date"], ph_, auth)).encode()
    for sent in ("hbkt", "other"):
        ph.case("vhost DELETE for hbkt, host not signed, sent to " + sent,
                unsigned_host("DELETE", "/victim", "hbkt.s3.test:%d" % P,
                              "%s.s3.test:%d" % (sent, P)), 403, "AccessDenied")
    for b in ("hbkt", "other"):
        run(sm("GET", "/%s/victim" % b), 200, "victim kept", b"victim of " + b.encode())
    run(unsigned_host("GET", "/other/victim", "127.0.0.1:%d" % P), 200,
        "path-style GET, host not signed", b"victim of other")
    ph.case("a kept connection after vhost requests", vh("GET", "hbkt", "/known"), 200,
            close=False, then=ok)


s3_vhost.extra = ["--s3-domain", VHOST_DOMAINS]
s3_vhost.tenants = ("alice %s tenant\nbob %s tenant\ngrant alice model=s3/shared to bob\n"
                    % (ALICE[1], BOB[1]))


@phase
def s3_order(ph):
    """Requests pipelined on one connection behind one that changes the
    store run after it (s3d.c "Order"; attack40).  Before, they ran as
    soon as parsed, beside it: a GET after a CopyObject answered 200 was
    404, a DELETE after it answered 204 and the copy then stored the
    object again, a PUT after a CreateBucket NoSuchBucket, a DeleteBucket
    after the DELETE of its last object BucketNotEmpty -- every round."""
    P = ph.srv.port
    sm = lambda *a, **k: signed_msg(P, *a, **k)

    def pipe(msgs, heads=()):
        s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        s.sendall(b"".join(msgs))
        out = [read_answer(s, no_body=i in heads) for i in range(len(msgs))]
        s.close()
        return [(st, body) for st, _, body in out]

    for i in range(3):
        a, b, c = "/hbkt/oa%d" % i, "/hbkt/ob%d" % i, "/hbkt/oc%d" % i
        src = {"x-amz-copy-source": a}
        got = pipe([sm("PUT", a, body=b"new%d" % i), sm("PUT", b, extra=src), sm("GET", b),
                    sm("PUT", c, extra=src), sm("DELETE", c), sm("GET", c),
                    sm("HEAD", a)], heads=(6,))
        print("round %d: PUT, copy, GET, copy, DELETE, GET, HEAD: %s" % (
            i, [st for st, _ in got]))
        ph.expect([st for st, _ in got] == [200, 200, 200, 200, 204, 404, 200] and
                  got[2][1] == b"new%d" % i, "copies and what follows them", got)
        st, _, body = http(P, sm("GET", c), src=PROBER)
        ph.expect(st == 404, "the copy deleted after it stayed deleted", st, body[:100])
        nb = "/ordb%d" % i
        got = pipe([sm("PUT", nb), sm("PUT", nb + "/k", body=b"x"), sm("GET", nb + "/k"),
                    sm("DELETE", nb + "/k"), sm("DELETE", nb), sm("PUT", nb + "/k2", body=b"y")])
        print("round %d: CreateBucket, PUT, GET, DELETE, DeleteBucket, PUT: %s" % (
            i, [st for st, _ in got]))
        ph.expect([st for st, _ in got] == [200, 200, 200, 204, 204, 404] and
                  got[2][1] == b"x", "a bucket's steps in order", [st for st, _ in got])
        ph.cases += 1
    ph.probe("pipelined writes")


@phase
def s3_copy_key(ph):
    """x-amz-copy-source names a key by its bytes: a key's own '?' (sent
    as %3F, as botocore quotes it) and %00 are the key's, and only a '?'
    as sent starts a query (?versionId=).  The query was cut after the
    value was decoded and the key read up to its first NUL, so a
    CopyObject or UploadPartCopy of "a?b" (or "c\0d") copied the object
    "a" ("c"): bytes other than those put under the name asked for
    (redhttp, 2026-12-06)."""
    P, ok, sm, req = ph.kit()
    objs = {"a": b"bytes of a", "a%3Fb": b"bytes of a?b", "c": b"bytes of c",
            "c%00d": b"bytes of c NUL d", "e%3Ff": b"bytes of e?f"}
    for k, v in objs.items():
        st, _, b = req("PUT", "/hbkt/" + k, body=v)
        assert st == 200, (k, st, b)
    # (e?f has no "e" beside it: the old server's copy was NoSuchKey)
    for src, want in (("/hbkt/a%3Fb", "a%3Fb"), ("hbkt/a%3Fb", "a%3Fb"),
                      ("/hbkt/a%3Fb?versionId=null", "a%3Fb"), ("/hbkt/c%00d", "c%00d"),
                      ("/hbkt/e%3Ff", "e%3Ff"), ("/hbkt/a?versionId=x%3Fb", "a")):
        st, _, b = ph.case("CopyObject of " + src, sm("PUT", "/hbkt/dst", extra={
            "x-amz-copy-source": src}), 200, close=False, then=ok)
        st, _, b = req("GET", "/hbkt/dst")
        ph.expect(st == 200 and b == objs[want], "copy of", src, st, b[:200])
        req("DELETE", "/hbkt/dst")
    for src in ("/hbkt%00x/a", "/hbkt%00/a", "/hbkt/", "/hbkt?x/a"):
        ph.case("CopyObject of " + src, sm("PUT", "/hbkt/dst", extra={
            "x-amz-copy-source": src}), 400, "InvalidArgument", close=False, then=ok)
    # UploadPartCopy, then Complete: the object is the source's bytes
    st, _, body = req("POST", "/hbkt/mpc", query="uploads")
    assert st == 200, (st, body)
    uid = re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", body).group(1).decode()
    ph.case("UploadPartCopy of e%3Ff", sm("PUT", "/hbkt/mpc", query="partNumber=1&uploadId=" +
                                         uid, extra={"x-amz-copy-source": "/hbkt/e%3Ff"}),
            200, close=False, then=ok)
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
           "</CompleteMultipartUpload>").encode()
    st, _, b = req("POST", "/hbkt/mpc", query="uploadId=" + uid, body=xml)
    ph.expect(st == 200, "Complete", st, b[:200])
    st, _, b = req("GET", "/hbkt/mpc")
    ph.expect(st == 200 and b == objs["e%3Ff"], "UploadPartCopy's object", st, b[:200])


@phase
def s3_write_conds(ph):
    """A write's condition kvtierd does not evaluate is refused (501
    NotImplemented, before the body), never ignored: PutObject's If-Match
    and If-None-Match other than *, CopyObject's and UploadPartCopy's
    x-amz-copy-source-if-* and If-(None-)Match, CompleteMultipartUpload's
    If-(None-)Match.  Ignored, each write went ahead: a PUT with a stale
    If-Match replaced the object, a copy with If-None-Match: * replaced an
    existing one (redhttp, 2026-12-06).  PutObject's If-None-Match: *
    still holds (412)."""
    P, ok, sm, req = ph.kit()
    st, _, b = req("PUT", "/hbkt/o", body=b"v1")
    assert st == 200, (st, b)
    uid = s3_upload(req, "/hbkt/mpw")
    st, _, b = req("PUT", "/hbkt/mpw", query="partNumber=1&uploadId=" + uid, body=b"part")
    assert st == 200, (st, b)
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
           "</CompleteMultipartUpload>").encode()
    src = {"x-amz-copy-source": "/hbkt/known"}
    cases = [("PUT If-Match", sm("PUT", "/hbkt/o", body=b"v2", extra={"if-match": '"x"'})),
             ("PUT If-Match *", sm("PUT", "/hbkt/o", body=b"v2", extra={"if-match": "*"})),
             ("PUT If-None-Match ETag", sm("PUT", "/hbkt/o", body=b"v2",
                                          extra={"if-none-match": '"x"'}))]
    for h, v in (("x-amz-copy-source-if-match", '"x"'), ("x-amz-copy-source-if-none-match",
                 '"x"'), ("x-amz-copy-source-if-modified-since", "Sat, 1 Jan 2050 00:00:00 GMT"),
                 ("x-amz-copy-source-if-unmodified-since", "Sat, 1 Jan 2000 00:00:00 GMT"),
                 ("if-none-match", "*"), ("if-match", '"x"')):
        cases.append(("CopyObject " + h, sm("PUT", "/hbkt/o", extra=dict(src, **{h: v}))))
        cases.append(("UploadPartCopy " + h, sm("PUT", "/hbkt/mpw", query="partNumber=2&"
                                                "uploadId=" + uid, extra=dict(src, **{h: v}))))
    for h, v in (("if-none-match", "*"), ("if-match", '"x"')):
        cases.append(("Complete " + h, sm("POST", "/hbkt/o", query="uploadId=" + uid,
                                          body=xml, extra={h: v})))
    for what, msg in cases:
        ph.case(what, msg, 501, "NotImplemented")
        st, _, b = req("GET", "/hbkt/o")
        ph.expect(st == 200 and b == b"v1", what, "the object after it", st, b[:200])
    st, _, b = req("GET", "/hbkt/mpw", query="uploadId=" + uid)
    ph.expect(st == 200 and re.findall(rb"<PartNumber>(\d+)</PartNumber>", b) == [b"1"],
              "the upload's parts", st, b[:300])
    ph.case("PUT If-None-Match * of an existing key", sm("PUT", "/hbkt/o", body=b"v2", extra={
        "if-none-match": "*"}), 412, "PreconditionFailed", close=False, then=ok)
    ph.case("PUT If-None-Match * of a new key", sm("PUT", "/hbkt/o2", body=b"v2", extra={
        "if-none-match": "*"}), 200, close=False, then=ok)


@phase
def s3_op_params(ph):
    """A write that carries a sub-resource not its own (uploadId,
    partNumber, uploads, delete) is refused 501 NotImplemented and changes
    nothing.  The method and path chose the op and the rest was ignored:
    PUT ?uploadId= without partNumber replaced the object with the
    part's bytes, DELETE ?delete or ?uploads deleted an empty bucket,
    DELETE ?partNumber= the object, DELETE ?uploadId=&partNumber= aborted
    the upload, PUT ?uploadId= of a new bucket created it (red44b,
    2026-12-07).  The real operations still run."""
    P, ok, sm, req = ph.kit()
    st, _, b = req("PUT", "/hbkt/o", body=b"v1")
    assert st == 200, (st, b)
    st, _, b = req("PUT", "/ebkt")
    assert st == 200, (st, b)
    uid = s3_upload(req, "/hbkt/mpo")
    st, _, b = req("PUT", "/hbkt/mpo", query="partNumber=1&uploadId=" + uid, body=b"part")
    assert st == 200, (st, b)
    xml = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
           "</CompleteMultipartUpload>").encode()
    u = "uploadId=" + uid
    cases = [("PUT ?uploadId (UploadPart without partNumber)", sm("PUT", "/hbkt/o", query=u,
                                                                 body=b"part bytes")),
             ("PUT ?partNumber", sm("PUT", "/hbkt/o", query="partNumber=1", body=b"x")),
             ("PUT ?uploads", sm("PUT", "/hbkt/o", query="uploads", body=b"x")),
             ("PUT ?delete", sm("PUT", "/hbkt/o", query="delete", body=b"x")),
             ("CopyObject ?uploadId", sm("PUT", "/hbkt/o", query=u,
                                         extra={"x-amz-copy-source": "/hbkt/known"})),
             ("DELETE ?partNumber", sm("DELETE", "/hbkt/o", query="partNumber=1")),
             ("DELETE ?uploads", sm("DELETE", "/hbkt/o", query="uploads")),
             ("DELETE ?uploadId&partNumber", sm("DELETE", "/hbkt/mpo",
                                                 query=u + "&partNumber=1")),
             ("DELETE bucket ?delete", sm("DELETE", "/ebkt", query="delete")),
             ("DELETE bucket ?uploads", sm("DELETE", "/ebkt", query="uploads")),
             ("DELETE bucket ?uploadId", sm("DELETE", "/ebkt", query=u)),
             ("PUT bucket ?uploadId", sm("PUT", "/nbkt", query=u)),
             ("PUT bucket ?uploads", sm("PUT", "/nbkt", query="uploads")),
             ("POST ?uploads&uploadId", sm("POST", "/hbkt/mpo", query="uploads&" + u)),
             ("POST ?uploadId&partNumber", sm("POST", "/hbkt/mpo", query=u + "&partNumber=1",
                                              body=xml)),
             ("PUT ?partNumber&uploadId&delete", sm("PUT", "/hbkt/mpo",
                                                    query="partNumber=2&delete&" + u,
                                                    body=b"x")),
             ("POST bucket ?delete&uploadId", sm("POST", "/hbkt", query="delete&" + u, body=(
                 b"<Delete><Object><Key>o</Key></Object></Delete>")))]
    for what, msg in cases:
        s, st, hd, body = send(P, msg, 5.0, PROBER)
        s.close()
        ph.expect(st == 501 and code_of(body) == "NotImplemented", what, st, body[:200])
        ph.cases += 1
        st, _, b = req("GET", "/hbkt/o")
        ph.expect(st == 200 and b == b"v1", what, "the object after it", st, b[:200])
        st, _, b = req("HEAD", "/ebkt")
        ph.expect(st == 200, what, "the empty bucket after it", st)
        st, _, b = req("HEAD", "/nbkt")
        ph.expect(st == 404, what, "no new bucket after it", st)
        st, _, b = req("GET", "/hbkt/mpo", query=u)
        ph.expect(st == 200 and re.findall(rb"<PartNumber>(\d+)</PartNumber>", b) == [b"1"],
                  what, "the upload's parts after it", st, b[:300])
        ph.probe(what)
    # a refused write's body is read and dropped on the kept connection:
    # a body that is itself a signed DELETE is not run as the next request
    # (review44f), and the request behind it is served
    s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    s.sendall(sm("PUT", "/hbkt/o", query="partNumber=1", body=sm("DELETE", "/hbkt/o")) +
              sm("GET", "/hbkt/o"))
    got = [read_answer(s) for _ in range(2)]
    s.close()
    ph.expect([g[0] for g in got] == [501, 200] and got[1][2] == b"v1",
              "a refused write's body smuggled as a request", [(g[0], g[2][:80]) for g in got])
    # the forms real clients send still run: newer AWS SDKs add x-id, Go's
    # DeleteObjects sends delete= (an empty value)
    st, _, b = req("PUT", "/hbkt/xid", query="x-id=PutObject", body=b"xid")
    ph.expect(st == 200, "PUT ?x-id=PutObject", st, b[:200])
    st, _, b = req("POST", "/hbkt/mpx", query="uploads=&x-id=CreateMultipartUpload")
    ph.expect(st == 200, "POST ?uploads=&x-id=", st, b[:200])
    ux = "uploadId=" + re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", b).group(1).decode()
    st, _, b = req("PUT", "/hbkt/mpx", query="partNumber=1&x-id=UploadPart&" + ux, body=b"p")
    ph.expect(st == 200, "UploadPart ?x-id=", st, b[:200])
    st, _, b = req("DELETE", "/hbkt/mpx", query=ux + "&x-id=AbortMultipartUpload")
    ph.expect(st == 204, "Abort ?x-id=", st, b[:200])
    st, _, b = req("POST", "/hbkt", query="delete=&x-id=DeleteObjects", body=(
        b"<Delete><Object><Key>xid</Key></Object></Delete>"))
    ph.expect(st == 200 and b"<Deleted>" in b, "DeleteObjects ?delete=&x-id=", st, b[:200])
    # an Abort names the upload's key: another key's is NoSuchUpload (it
    # deleted the upload's marker by id alone), the upload kept
    st, _, b = req("DELETE", "/hbkt/o", query=u)
    ph.expect(st == 404 and code_of(b) == "NoSuchUpload", "Abort of another key", st, b[:200])
    st, _, b = req("GET", "/hbkt/mpo", query=u)
    ph.expect(st == 200 and re.findall(rb"<PartNumber>(\d+)</PartNumber>", b) == [b"1"],
              "the upload after another key's Abort", st, b[:300])
    st, _, b = req("POST", "/hbkt/mpa", query="uploads")
    assert st == 200, (st, b)
    ua = "uploadId=" + re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", b).group(1).decode()
    st, _, b = req("PUT", "/hbkt/mpa", query="partNumber=1&" + ua, body=b"gone")
    assert st == 200, (st, b)
    st, _, b = req("DELETE", "/hbkt/mpa", query=ua)
    assert st == 204, ("Abort", st, b)
    st, _, b = req("GET", "/hbkt/mpa", query=ua)
    assert st == 404 and code_of(b) == "NoSuchUpload", ("after the Abort", st, b[:200])
    st, _, b = req("DELETE", "/hbkt/mpa", query=ua)
    assert st == 404 and code_of(b) == "NoSuchUpload", ("a second Abort", st, b[:200])
    # the operations themselves
    st, _, b = req("POST", "/hbkt/mpo", query=u, body=xml)
    assert st == 200, ("Complete", st, b)
    st, _, b = req("GET", "/hbkt/mpo")
    assert st == 200 and b == b"part", ("the completed object", st, b)
    st, _, b = req("POST", "/hbkt", query="delete", body=(
        b"<Delete><Object><Key>o</Key></Object></Delete>"))
    assert st == 200 and b"<Deleted>" in b, ("DeleteObjects", st, b[:300])
    st, _, b = req("DELETE", "/ebkt")
    assert st == 204, ("DeleteBucket", st, b)


@phase
def s3_upload_key(ph):
    """An upload's operations name it by key and id: UploadPart and
    UploadPartCopy of another key than the upload's are NoSuchUpload (404),
    the upload unchanged, as Complete, Abort and ListParts answer.  By id
    alone (a kvt_exists of its marker) a signer added parts to another
    key's upload in its bucket: PUT /hbkt/other?partNumber=2&uploadId=U of
    the upload U made for /hbkt/mine was 200, the part then listed and
    completed into mine (s3fix45, 2026-12-07).  Another tenant naming U in
    its own bucket: NoSuchUpload too.  And each query parameter kvtierd
    reads at most once (400 InvalidArgument): uploadId and partNumber were
    taken last, a listing's prefix and max-keys first."""
    P, ok, sm, req = ph.kit()
    uid = s3_upload(req, "/hbkt/mine")
    u = "uploadId=" + uid
    st, _, b = req("PUT", "/hbkt/mine", query="partNumber=1&" + u, body=b"mine-1")
    assert st == 200, ("UploadPart of the upload's key", st, b)

    def parts():
        st, _, b = req("GET", "/hbkt/mine", query=u)
        assert st == 200, ("ListParts", st, b[:300])
        return re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)
    cases = [("UploadPart of another key", sm("PUT", "/hbkt/other", query="partNumber=2&" + u,
                                              body=b"other-2")),
             ("UploadPartCopy into another key", sm("PUT", "/hbkt/other",
                                                    query="partNumber=3&" + u,
                                                    extra={"x-amz-copy-source":
                                                           "/hbkt/known"})),
             ("UploadPart of a key that is a prefix of it", sm("PUT", "/hbkt/min",
                                                              query="partNumber=4&" + u,
                                                              body=b"min-4")),
             ("ListParts of another key", sm("GET", "/hbkt/other", query=u)),
             ("Complete of another key", sm("POST", "/hbkt/other", query=u, body=(
                 b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
                 b"</CompleteMultipartUpload>"))),
             ("Abort of another key", sm("DELETE", "/hbkt/other", query=u)),
             ("UploadPart by another tenant in its bucket", sm("PUT", "/bbkt/mine",
                                                               query="partNumber=5&" + u,
                                                               body=b"bob-5", who=BOB))]
    st, _, b = http(P, signed_msg(P, "PUT", "/bbkt", who=BOB), src=PROBER)
    assert st == 200, ("bob's bucket", st, b)
    for what, msg in cases:
        s, st, hd, body = send(P, msg, 5.0, PROBER)
        s.close()
        ph.expect(st == 404 and code_of(body) == "NoSuchUpload", what, st, body[:200])
        ph.expect(parts() == [b"1"], what, "the upload's parts after it", parts())
        ph.cases += 1
        ph.probe(what)
    # the upload's own key: parts added, copied, completed
    st, _, b = req("PUT", "/hbkt/mine", query="partNumber=2&" + u, body=b"mine-2")
    ph.expect(st == 200, "UploadPart of the upload's key", st, b[:200])
    st, _, b = req("PUT", "/hbkt/mine", query="partNumber=3&" + u,
                   extra={"x-amz-copy-source": "/hbkt/known"})
    ph.expect(st == 200 and b"CopyPartResult" in b, "UploadPartCopy into the upload's key", st,
              b[:200])
    ph.expect(parts() == [b"1", b"2", b"3"], "the upload's parts", parts())
    # a Complete's parts: ascending, each once, 1..10000, refused before
    # anything is read (s3ops.c s3d_complete_start); the upload kept
    def complete(nums):
        return req("POST", "/hbkt/mine", query=u, body=b"<CompleteMultipartUpload>" + b"".join(
            b"<Part><PartNumber>%s</PartNumber></Part>" % n for n in nums) +
            b"</CompleteMultipartUpload>")
    for nums, code in (([b"2", b"1"], "InvalidPartOrder"), ([b"1", b"1"], "InvalidPartOrder"),
                       ([b"0"], "MalformedXML"), ([b"10001"], "MalformedXML"),
                       ([b"1", b"99999999999999999999999"], "MalformedXML"),
                       ([b"1x"], "MalformedXML"), ([b""], "MalformedXML"),
                       ([b"1"] * 1024, "InvalidRequest")):
        st, _, b = complete(nums)
        ph.expect(st == 400 and code_of(b) == code, "Complete of parts", nums[:3], st, b[:200])
        ph.cases += 1
    ph.expect(parts() == [b"1", b"2", b"3"], "the upload's parts after refused Completes",
              parts())
    st, _, b = complete([b"1"])
    ph.expect(st == 200, "Complete", st, b[:200])
    st, _, b = req("GET", "/hbkt/mine")
    ph.expect(st == 200 and b == b"mine-1", "the completed object", st, b[:200])
    # a parameter twice: refused from the head, nothing run
    st, _, b = req("POST", "/hbkt/twice", query="uploads")
    assert st == 200, (st, b)
    u2 = "uploadId=" + re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", b).group(1).decode()
    other = "uploadId=" + "0" * 32
    st, _, b = req("PUT", "/hbkt/twice-src", body=b"s" * 10)
    assert st == 200, (st, b)
    twice = [("partNumber twice", sm("PUT", "/hbkt/twice", query="partNumber=1&partNumber=2&" +
                                     u2, body=b"x")),
             ("uploadId twice", sm("PUT", "/hbkt/twice", query="partNumber=1&%s&%s" % (
                 other, u2), body=b"x")),
             ("uploads twice", sm("POST", "/hbkt/twice", query="uploads&uploads")),
             ("prefix twice", sm("GET", "/hbkt", query="list-type=2&prefix=twice&prefix=k")),
             ("max-keys twice", sm("GET", "/hbkt", query="max-keys=1&max-keys=1000")),
             ("delete twice", sm("POST", "/hbkt", query="delete&delete", body=(
                 b"<Delete><Object><Key>twice-src</Key></Object></Delete>")))]
    for what, msg in twice:
        s, st, hd, body = send(P, msg, 5.0, PROBER)
        s.close()
        ph.expect(st == 400 and code_of(body) == "InvalidArgument", what, st, body[:200])
        ph.cases += 1
    st, _, b = req("GET", "/hbkt/twice", query=u2)
    ph.expect(st == 200 and b"<Part>" not in b, "no part after the refused ones", st, b[:300])
    st, _, b = req("GET", "/hbkt/twice-src")
    ph.expect(st == 200 and b == b"s" * 10, "not deleted by a refused DeleteObjects", st, b[:100])
    ph.probe("parameters twice")
    # An UploadPart whose body comes in the head's packet, its marker read
    # with the connection parked (s3d_upload_probe): with Connection: close
    # (or HTTP/1.0) the parse went on past the parked head, took the body's
    # bytes for a request after the last one and stopped the input -- 400
    # IncompleteBody to every such UploadPart (review45a); and, kept
    # alive, a request pipelined behind its body is answered after it.
    msg = sm("PUT", "/hbkt/twice", query="partNumber=1&" + u2, body=b"close-1",
             extra={"connection": "close"})
    s, st, hd, body = send(P, msg, 5.0, PROBER)
    s.close()
    ph.expect(st == 200, "UploadPart, Connection: close, its body with its head", st,
              body[:200])
    s, st, hd, body = send(P, sm("PUT", "/hbkt/twice", query="partNumber=2&" + u2,
                                 body=b"pipe-2") + sm("GET", "/hbkt/twice-src"), 5.0, PROBER)
    st2, _, body2 = read_answer(s, 5.0)
    s.close()
    ph.expect((st, st2, body2) == (200, 200, b"s" * 10), "UploadPart, then a GET pipelined",
              st, st2, body[:200], body2[:100])
    st, _, b = req("GET", "/hbkt/twice", query=u2)
    ph.expect(st == 200 and re.findall(rb"<PartNumber>(\d+)</PartNumber>", b) == [b"1", b"2"],
              "the parts sent with their heads", st, b[:300])
    ph.cases += 2
    ph.probe("UploadPart, its body in its head's packet")


@phase
def s3_pins_range(ph):
    """One connection GETs a 6 MiB object whole and, behind it, one byte
    (Range: bytes=0-0) of each of 9 others, and never reads (--dram 64M:
    a connection's pins 8 MiB).  Each answer keeps its whole object
    pinned; the caps counted the bytes sent, 6 MiB and 9 bytes, so all
    10 objects stayed pinned (60 MiB of the tier) and another tenant's
    PUT of 8 MiB was refused 503 (redhttp, 2026-12-06).  Now an answer
    counts the object its pin holds: at most 4 pinned, as for whole
    GETs (s3_pins), and the PUT is served.  Ranges read as they come are
    the objects' bytes, and their pins go back."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body)
    big = 6 << 20
    for i in range(10):
        st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/pin%d" % i, body=b"%d" % i * big),
                           src=PROBER, timeout=20)
        assert st == 200, (i, st, body[:200])
    # ranges read as they come: the bytes asked for, pins given back
    s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    rs = [("bytes=0-0", 0, 1), ("bytes=5-9", 5, 10), ("bytes=-3", big - 3, big),
          ("bytes=%d-" % (big - 2), big - 2, big)]
    s.sendall(b"".join(signed_msg(P, "GET", "/hbkt/pin%d" % (2 + k), extra={"range": r})
                       for k, (r, _, _) in enumerate(rs)))
    for k, (r, a, z) in enumerate(rs):
        st, _, body = read_answer(s, 10.0)
        ph.expect(st == 206 and body == (b"%d" % (2 + k) * big)[a:z], "range", r, st,
                  body[:40])
    s.close()
    end = time.monotonic() + 5
    while srv.metric("kvtier_pins_active") > 0 and time.monotonic() < end:
        time.sleep(0.1)
    ph.expect(srv.metric("kvtier_pins_active") == 0, "pins given back")
    pins0 = srv.metric("kvtier_pins_active")
    s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(signed_msg(P, "GET", "/hbkt/pin0") + b"".join(
        signed_msg(P, "GET", "/hbkt/pin%d" % i, extra={"range": "bytes=0-0"})
        for i in range(1, 10)))
    time.sleep(1.0)
    pins = srv.metric("kvtier_pins_active") - pins0
    print("a whole GET and 9 one-byte ranges of 6 MiB objects, unread: %d pins" % pins)
    ph.expect(pins <= 4, "pins of one connection's unread ranges", pins)
    v = os.urandom(8 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/big", body=v, who=BOB), src=PROBER,
                       timeout=20)
    print("the other tenant's PUT of 8 MiB beside them: %d %s" % (st, code_of(body)))
    ph.expect(st == 200, "the other tenant's PUT beside pinned ranges", st, body[:200])
    s.close()
    # (with --ssd 0 the PUT evicted what was not pinned: the probe's
    # object is put again; the buckets stay, since 2026-12-06 -- until
    # then their marker blocks went too, and they were made again)
    st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/known", body=b"known bytes"),
                       src=PROBER)
    assert st == 200, (st, body)
    # what the ranges counted went back: her 3 fresh unread GETs of 6 MiB
    # (18 MiB, past her 16 MiB cap only with the third) are each answered
    end = time.monotonic() + 5
    while srv.metric("kvtier_pins_active") > pins0 and time.monotonic() < end:
        time.sleep(0.1)
    socks, sts = [], []
    for i in range(3):
        st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/after%d" % i, body=b"a" * big),
                           src=PROBER, timeout=20)
        assert st == 200, (i, st, body[:200])
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(signed_msg(P, "GET", "/hbkt/after%d" % i))
        s.settimeout(5)
        sts.append(int(s.recv(12, socket.MSG_PEEK).split(b" ")[1]))
        socks.append(s)
    ph.expect(sts == [200] * 3, "fresh unread GETs after the ranges", sts)
    for s in socks:
        s.close()
    ph.cases += 1
    ph.probe("pinned ranges")


@phase
def s3_abort_parts(ph):
    """AbortMultipartUpload deletes the upload's parts, not only its
    marker: the parts of an aborted upload (or of one with parts past the
    1023 a Complete takes) were reachable by no request and held their
    DRAM until evicted or the bucket was deleted -- 4 parts of 1 MiB, 4
    MiB of DRAM used after the Abort (redhttp, 2026-12-06).  Another
    upload of the same key beside it keeps its part and completes.  A
    Complete deletes the parts it does not list, as S3 does."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()

    def upload():
        st, _, b = req("POST", "/hbkt/ab", query="uploads")
        assert st == 200, (st, b)
        return re.search(rb"<UploadId>([0-9a-f]{32})</UploadId>", b).group(1).decode()
    keep = upload()
    kept = os.urandom(1 << 20)
    st, _, b = req("PUT", "/hbkt/ab", query="partNumber=3&uploadId=" + keep, body=kept)
    assert st == 200, (st, b)
    uid = upload()
    used0 = srv.metric("kvtier_dram_used_bytes")
    for pn in (1, 2, 7, 10000):
        st, _, b = req("PUT", "/hbkt/ab", query="partNumber=%d&uploadId=%s" % (pn, uid),
                       body=os.urandom(1 << 20))
        assert st == 200, (pn, st, b)
    used1 = srv.metric("kvtier_dram_used_bytes")
    t0 = time.monotonic()
    ph.case("AbortMultipartUpload of 4 parts", sm("DELETE", "/hbkt/ab", query="uploadId=" + uid),
            204, close=False, then=ok)
    took = time.monotonic() - t0
    used2 = srv.metric("kvtier_dram_used_bytes")
    print("4 parts of 1 MiB: DRAM used %+d KiB, after the Abort %+d KiB (its answer %.1f ms)" % (
        (used1 - used0) / 1024, (used2 - used0) / 1024, took * 1e3))
    ph.expect(used1 - used0 >= 4 << 20, "the parts in DRAM", used1 - used0)
    ph.expect(used2 - used0 <= 256 << 10, "the aborted parts' DRAM", used2 - used0)
    ph.case("AbortMultipartUpload again", sm("DELETE", "/hbkt/ab", query="uploadId=" + uid),
            404, "NoSuchUpload", close=False, then=ok)
    ph.case("UploadPart after the Abort", sm("PUT", "/hbkt/ab", query="partNumber=1&uploadId=" +
                                            uid, body=b"late"), 404, "NoSuchUpload")
    # the other upload of the key: its part kept, completed exactly
    st, _, b = req("GET", "/hbkt/ab", query="uploadId=" + keep)
    ph.expect(st == 200 and re.findall(rb"<PartNumber>(\d+)</PartNumber>", b) == [b"3"],
              "the other upload's parts", st, b[:300])
    xml = b"<CompleteMultipartUpload><Part><PartNumber>3</PartNumber></Part>" \
          b"</CompleteMultipartUpload>"
    st, _, b = req("POST", "/hbkt/ab", query="uploadId=" + keep, body=xml)
    ph.expect(st == 200, "Complete of the other upload", st, b[:200])
    st, _, b = req("GET", "/hbkt/ab")
    ph.expect(st == 200 and b == kept, "the completed object", st, len(b))
    # a Complete deletes the parts it does not list (S3 does): parts 2
    # and 3 of 1 MiB were left, reachable by no request (redhttp)
    cu = upload()
    parts = [os.urandom(1 << 20) for _ in range(3)]
    used0 = srv.metric("kvtier_dram_used_bytes")
    for pn, body in enumerate(parts, 1):
        st, _, b = req("PUT", "/hbkt/ab", query="partNumber=%d&uploadId=%s" % (pn, cu),
                       body=body)
        assert st == 200, (pn, st, b)
    t0 = time.monotonic()
    st, _, b = req("POST", "/hbkt/ab", query="uploadId=" + cu, body=xml.replace(b"3", b"1"))
    took = time.monotonic() - t0
    ph.expect(st == 200, "Complete of part 1 of 3", st, b[:200])
    used2 = srv.metric("kvtier_dram_used_bytes")
    print("Complete of part 1 of 3 parts of 1 MiB: %.1f ms; DRAM used then %+d KiB" % (
        took * 1e3, (used2 - used0) / 1024))
    ph.expect(used2 - used0 <= (1 << 20) + (256 << 10), "the unlisted parts' DRAM",
              used2 - used0)
    st, _, b = req("GET", "/hbkt/ab")
    ph.expect(st == 200 and b == parts[0], "the object of part 1", st, len(b))


@phase
def s3_abort_pipe(ph):
    """An AbortMultipartUpload and an UploadPart of the same upload
    pipelined on one connection: the UploadPart runs once the Abort is
    answered (daemon/s3d.c s3d_ops: Abort holds the heads behind it) and
    is 404 NoSuchUpload.  Until s3b45 (2026-12-07) the Abort held
    nothing: the UploadPart read the marker beside the Abort's read,
    before its delete, and was 200 -- a part of an aborted upload, left
    where no request reaches it once the sweep had passed its number."""
    P, ok, sm, req = ph.kit()
    got = []
    for i in range(5):
        key = "/hbkt/apipe%d" % i
        uid = s3_upload(req, key)
        st, _, b = req("PUT", key, query="partNumber=1&uploadId=" + uid, body=b"p1")
        assert st == 200, (st, b)
        s = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        s.sendall(sm("DELETE", key, query="uploadId=" + uid) +
                  sm("PUT", key, query="partNumber=2&uploadId=" + uid, body=b"p2"))
        a1, _, b1 = read_answer(s)
        a2, _, b2 = read_answer(s)
        s.close()
        got.append((a1, a2))
        ph.expect((a1, a2) == (204, 404) and b"NoSuchUpload" in b2,
                  "an UploadPart behind the Abort of its upload", i, a1, a2, b1[:200], b2[:200])
        ph.case("Abort again", sm("DELETE", key, query="uploadId=" + uid), 404, "NoSuchUpload",
                close=False, then=ok)
    print("Abort, UploadPart pipelined: %s" % got)
    ph.probe("Aborts and UploadParts pipelined")


@phase
def s3_abort_retry(ph):
    """An Abort whose sweep could not read a part (KVTD_TEST_S3_SWEEP_FAIL
    =2:1: part 2's read fails, ENOMEM, in the first Abort) is 503 and
    keeps the upload's marker: its parts are still listed, and the
    client's retry sweeps them all and is 204; a third Abort is 404.
    Until s3b45 (2026-12-07) the marker went first and the failed read
    was skipped: 204, part 2 left where no request reaches it (its DRAM
    held), and the retry 404 NoSuchUpload."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    uid = s3_upload(req, "/hbkt/aretry")
    used0 = srv.metric("kvtier_dram_used_bytes")
    for pn in (1, 2, 3):
        st, _, b = req("PUT", "/hbkt/aretry", query="partNumber=%d&uploadId=%s" % (pn, uid),
                       body=os.urandom(1 << 20))
        assert st == 200, (pn, st, b)
    ph.case("an Abort whose part read failed", sm("DELETE", "/hbkt/aretry",
                                                  query="uploadId=" + uid),
            503, "SlowDown", close=False, then=ok)
    st, _, b = req("GET", "/hbkt/aretry", query="uploadId=" + uid)
    left = re.findall(rb"<PartNumber>(\d+)</PartNumber>", b)
    ph.expect(st == 200 and b"2" in left, "the upload and its part 2 still there", st, b[:300])
    used1 = srv.metric("kvtier_dram_used_bytes")
    ph.case("the Abort retried", sm("DELETE", "/hbkt/aretry", query="uploadId=" + uid), 204,
            close=False, then=ok)
    used2 = srv.metric("kvtier_dram_used_bytes")
    ph.case("a third Abort", sm("DELETE", "/hbkt/aretry", query="uploadId=" + uid), 404,
            "NoSuchUpload", close=False, then=ok)
    print("parts left after the failed Abort: %s; DRAM used %+d KiB then, %+d KiB after the "
          "retry" % ([int(x) for x in left], (used1 - used0) / 1024, (used2 - used0) / 1024))
    ph.expect(used2 - used0 <= 256 << 10, "the parts' DRAM after the retry", used2 - used0)
    ph.probe("an Abort retried")


s3_abort_retry.env = {"KVTD_TEST_S3_SWEEP_FAIL": "2:1"}


@phase
def s3_abort_race(ph):
    """An Abort on one connection and an UploadPart of the same upload on
    another, sent at once: whichever order they run in, once the Abort
    is 204 no part of the upload is left (its DRAM back).  An Abort that
    swept its parts before deleting its marker (s3b45) let an UploadPart
    whose marker read came anywhere in the sweep -- 40 windows of part
    numbers -- land after the sweep had passed its number: 200, then a
    part no request reaches (review45f, 2026-12-07)."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    got = []
    used0 = srv.metric("kvtier_dram_used_bytes")
    for i in range(8):
        key = "/hbkt/arace%d" % i
        uid = s3_upload(req, key)
        a = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        u = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        abort = sm("DELETE", key, query="uploadId=" + uid)
        part = sm("PUT", key, query="partNumber=1&uploadId=" + uid, body=os.urandom(1 << 20))
        a.sendall(abort)
        time.sleep(0.002 * i)
        u.sendall(part)
        sa, _, ba = read_answer(a)
        su, _, bu = read_answer(u)
        a.close()
        u.close()
        got.append((sa, su))
        ph.expect(sa == 204, "the Abort", i, sa, ba[:200])
    used1 = srv.metric("kvtier_dram_used_bytes")
    print("Abort beside an UploadPart of its upload (Abort, UploadPart): %s; DRAM used after "
          "%+d KiB" % (got, (used1 - used0) / 1024))
    ph.expect(used1 - used0 <= 512 << 10, "the parts of aborted uploads", used1 - used0, got)
    ph.probe("Aborts beside UploadParts")


@phase
def s3_abort_slow_part(ph):
    """An UploadPart whose marker was read at its head, its body still
    coming while an Abort of its upload runs whole (both sweeps, the
    marker's delete: 204), then its last 4 KiB: the part lands after the
    Abort, so it reads the marker once more and, gone, deletes the part
    and is 404 NoSuchUpload (its DRAM given back).  Before s3x46
    (2026-12-07) it was 200, the part of 1 MiB left where no request
    reaches it (the window doc/s3.md said to abort again for)."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    got = []
    for i in range(2):
        key = "/hbkt/aslow%d" % i
        uid = s3_upload(req, key)
        msg = sm("PUT", key, query="partNumber=1&uploadId=" + uid, body=os.urandom(1 << 20))
        used0 = srv.metric("kvtier_dram_used_bytes")
        u = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        u.sendall(msg[:-4096])
        time.sleep(0.3)  # its marker read, its body being received
        ph.case("the Abort while a part's body comes", sm("DELETE", key, query="uploadId=" + uid),
                204, close=False, then=ok)
        u.sendall(msg[-4096:])
        su, _, bu = read_answer(u, timeout=20)
        u.close()
        used1 = srv.metric("kvtier_dram_used_bytes")
        got.append((su, code_of(bu), int(used1 - used0) >> 10))
        ph.expect(su == 404 and code_of(bu) == "NoSuchUpload", "the part landed after the Abort",
                  i, su, bu[:200])
        ph.expect(used1 - used0 <= 256 << 10, "its DRAM", i, used1 - used0)
    print("UploadPart landing after an Abort of its upload (status, code, DRAM KiB): %s" % got)
    ph.probe("parts landing after an Abort")


@phase
def s3_abort_part_copy(ph):
    """An UploadPartCopy whose marker and source were read, parked for
    write-down room (an 8 MiB PUT ahead of it in an 8 MiB write-down
    queue, its writer slowed to 1.5 s a write) while an Abort of its
    upload runs whole (204), then stored: it reads the marker once more
    and, gone, deletes its part and is 404 NoSuchUpload, the part's 4 MiB
    of DRAM given back.  s3x46's recheck (s3ops.c s3d_part_recheck) was
    tested with UploadPart only; without it the copy was 200 and its part
    stayed where no request reaches it (review46b, 2026-12-07: 4 MiB of
    DRAM held).  Should the Abort not be answered while the copy waits,
    the copy is stored before the marker goes and the Abort's second
    sweep deletes it: no part left either way."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    st, _, b = http(P, sm("PUT", "/hbkt/pcsrc", body=os.urandom(4 << 20)), src=PROBER,
                    timeout=20)
    assert st == 200, (st, b[:200])
    uid = s3_upload(req, "/hbkt/pcdst")
    srv.written_down()
    st, _, b = http(P, sm("PUT", "/hbkt/pcfill", body=b"f" * (8 << 20)), src=PROBER,
                    timeout=20)
    assert st == 200, (st, b[:200])
    parked0 = srv.metric("kvtier_server_put_parked_total")
    used0 = srv.metric("kvtier_dram_used_bytes")
    c = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
    c.sendall(sm("PUT", "/hbkt/pcdst", query="partNumber=1&uploadId=" + uid,
                 extra={"x-amz-copy-source": "/hbkt/pcsrc"}))
    end = time.monotonic() + 10
    while srv.metric("kvtier_server_put_parked_total") == parked0 and time.monotonic() < end:
        time.sleep(0.01)
    parked = srv.metric("kvtier_server_put_parked_total") - parked0
    st, _, b = http(P, sm("DELETE", "/hbkt/pcdst", query="uploadId=" + uid), src=PROBER,
                    timeout=20)
    waiting = not select.select([c], [], [], 0)[0]  # the copy still unanswered
    sc, _, bc = read_answer(c, timeout=20)
    c.close()
    srv.written_down()
    used1 = srv.metric("kvtier_dram_used_bytes")
    print("UploadPartCopy parked %d, an Abort of its upload meanwhile: %d; the copy %d %s "
          "(answered after the Abort: %s); DRAM %+d KiB" % (
              parked, st, sc, code_of(bc), waiting, (used1 - used0) / 1024))
    ph.expect(parked >= 1, "the copy parked (the case under test)", parked)
    ph.expect(st == 204, "the Abort", st, b[:200])
    if waiting:
        ph.expect(sc == 404 and code_of(bc) == "NoSuchUpload", "the copy stored after the Abort",
                  sc, bc[:200])
    ph.expect(used1 - used0 <= 1 << 20, "its part left", used1 - used0)
    ph.cases += 1
    ph.probe("an UploadPartCopy landing after an Abort")


s3_abort_part_copy.extra = ["--ssd", "256M", "--set", "ssd.segment=16M",
                            "--set", "ssd.writedown_max=8M",
                            "--set", "ssd.debug_write_delay_ms=1500"]


@phase
def s3_sweep_index(ph):
    """An Abort's sweep decides a part's presence from the store's index
    (KVT_OP_EXISTS), not by reading it: three parts of 1 MiB on SSD only
    (the server restarted), part 2's header corrupted on the disk (a byte
    of its name flipped: a read of it fails its CRC).  The Abort is 204,
    reads no part (kvtier_ssd_part_reads_total and
    kvtier_ssd_crc_errors_total unchanged), and removes the three parts
    and the marker from the SSD.  Until s3x46 (2026-12-07) the sweep read
    each part's header quietly: 2 part reads and a CRC error, the failed
    read a miss.  (The SSD drops a block whose CRC fails, so that part
    went anyway; a read that fails for an I/O error or no memory keeps
    its entry, and the old sweep left such a part -- by the code, not
    made here: kvtierd has no I/O fault to inject.)"""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    uid = s3_upload(req, "/hbkt/swidx")
    for pn in (1, 2, 3):
        st, _, b = req("PUT", "/hbkt/swidx", query="partNumber=%d&uploadId=%s" % (pn, uid),
                       body=bytes([pn]) * (1 << 20))
        assert st == 200, (pn, st, b)
    srv.written_down()
    name = ("%s/2" % uid).encode()

    def corrupt():
        hit = 0
        for root, _, files in os.walk(srv.dir):
            for f in files:
                with open(os.path.join(root, f), "r+b") as fh:
                    data = fh.read()
                    at = data.find(name)
                    while at >= 0:
                        fh.seek(at)
                        fh.write(b"X")  # a hex digit: the header's CRC no longer holds
                        hit += 1
                        at = data.find(name, at + 1)
        assert hit >= 1, "part 2's header not found on the disk"
    srv.restart(corrupt)
    P, ok, sm, req = ph.kit()
    blocks0 = srv.metric("kvtier_ssd_blocks")
    reads0 = srv.metric("kvtier_ssd_part_reads_total")
    crc0 = srv.metric("kvtier_ssd_crc_errors_total")
    ph.case("an Abort, its parts on SSD, one unreadable",
            sm("DELETE", "/hbkt/swidx", query="uploadId=" + uid), 204, close=False, then=ok)
    blocks1 = srv.metric("kvtier_ssd_blocks")
    reads1 = srv.metric("kvtier_ssd_part_reads_total")
    crc1 = srv.metric("kvtier_ssd_crc_errors_total")
    print("Abort of 3 parts on SSD, part 2 unreadable: SSD blocks %+d, part reads %+d, CRC "
          "errors %+d" % (blocks1 - blocks0, reads1 - reads0, crc1 - crc0))
    ph.expect(reads1 == reads0 and crc1 == crc0, "the sweep read parts", reads1 - reads0,
              crc1 - crc0)
    ph.expect(blocks0 - blocks1 == 4, "the parts and marker gone from the SSD", blocks0, blocks1)
    ph.case("the Abort again", sm("DELETE", "/hbkt/swidx", query="uploadId=" + uid), 404,
            "NoSuchUpload", close=False, then=ok)
    ph.probe("an Abort of parts on SSD")


s3_sweep_index.extra = ["--dram", "512M", "--ssd", "256M", "--set", "ssd.segment=16M",
                        "--set", "ssd.admission=always"]


@phase
def s3_complete_abort(ph):
    """A CompleteMultipartUpload while an Abort of its upload is under way
    (KVTD_TEST_S3_SWEEP_PAUSE_MS: the Abort waits 1.5 s after its first
    window of part numbers, part 1 deleted, its marker still there) is
    404 NoSuchUpload, as S3 answers it, and the Abort 204.  Until s3x46
    (2026-12-07) it was 400 InvalidPart: the marker read, the part gone.
    (First, an Abort that failed, 503, gives its entry back: a Complete
    after it is 200.)  So is one whose parts are all still there (part 300, past the
    Abort's first window): the Abort's entry in the gate table found
    beside the marker (review46b, 2026-12-07: that branch untested; taken
    out, the Complete was 200 and the Abort 404).  The Complete is sent
    once the Abort's first window deleted part 1 (kvtier_dram_blocks -1),
    not after a fixed sleep.  A Complete missing a part of an upload
    nobody aborts stays 400 InvalidPart."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    # The first Abort's sweep fails (KVTD_TEST_S3_SWEEP_FAIL=1:1, part 1's
    # presence): 503, the upload kept -- and the Abort's entry given back,
    # so that the Complete after it is 200, not 404 (review46b)
    uid = s3_upload(req, "/hbkt/cafail")
    st, _, b = req("PUT", "/hbkt/cafail", query="partNumber=1&uploadId=" + uid,
                   body=b"the part kept")
    assert st == 200, (st, b)
    ph.case("an Abort whose sweep failed", sm("DELETE", "/hbkt/cafail", query="uploadId=" + uid),
            503, "SlowDown", close=False, then=ok)
    ph.case("the Complete after it", sm("POST", "/hbkt/cafail", query="uploadId=" + uid,
                                        body=b"<CompleteMultipartUpload><Part><PartNumber>1"
                                        b"</PartNumber></Part></CompleteMultipartUpload>"),
            200, close=False, then=ok)
    st, _, b = req("GET", "/hbkt/cafail")
    ph.expect(st == 200 and b == b"the part kept", "the object completed", st, b[:200])
    got = []
    for i, (parts, listed) in enumerate((((1,), 1), ((1,), 1), ((1, 300), 300))):
        xml = b"<CompleteMultipartUpload><Part><PartNumber>%d</PartNumber></Part>" \
              b"</CompleteMultipartUpload>" % listed
        key = "/hbkt/cabort%d" % i
        uid = s3_upload(req, key)
        for pn in parts:
            st, _, b = req("PUT", key, query="partNumber=%d&uploadId=%s" % (pn, uid),
                           body=b"part %d.%d" % (i, pn))
            assert st == 200, (st, b)
        blocks0 = srv.metric("kvtier_dram_blocks")
        a = socket.create_connection(("127.0.0.1", P), source_address=(PROBER, 0))
        a.sendall(sm("DELETE", key, query="uploadId=" + uid))
        end = time.monotonic() + 20  # its first window swept: part 1 gone, the marker not yet
        while srv.metric("kvtier_dram_blocks") >= blocks0 and time.monotonic() < end:
            time.sleep(0.01)
        st, _, b = req("POST", key, query="uploadId=" + uid, body=xml)
        sa, _, ba = read_answer(a, timeout=20)
        a.close()
        got.append((listed, st, code_of(b), sa))
        ph.expect(st == 404 and code_of(b) == "NoSuchUpload",
                  "a Complete beside the Abort of its upload", i, st, b[:200])
        ph.expect(sa == 204, "the Abort", i, sa, ba[:200])
        ph.case("the Complete again", sm("POST", key, query="uploadId=" + uid, body=xml),
                404, "NoSuchUpload", close=False, then=ok)
        ph.case("no object", sm("GET", key), 404, "NoSuchKey", close=False, then=ok)
    print("Complete during an Abort of its upload (part listed, status, code, the Abort's): %s"
          % got)
    uid = s3_upload(req, "/hbkt/cabort")
    ph.case("a Complete of a part never sent", sm("POST", "/hbkt/cabort",
                                                  query="uploadId=" + uid, body=xml),
            400, "InvalidPart", close=False, then=ok)
    ph.probe("Completes beside Aborts")


s3_complete_abort.env = {"KVTD_TEST_S3_SWEEP_PAUSE_MS": "1500",
                         "KVTD_TEST_S3_SWEEP_FAIL": "1:1"}


@phase
def s3_throttle_kept(ph):
    """An address's failed-signature throttle (20 a second) refuses the
    unproven, not a connection's own signer: every S3 request is signed,
    and 30 bad signatures from an address (no secret needed) had alice's
    authenticated keep-alive connection from it answered 503 SlowDown and
    closed, each second the flood went on (redhttp, 2026-12-06; native
    and RESP consult it once, at AUTH).  A request of another access key
    on her connection is still refused unchecked while it holds."""
    P = ph.srv.port
    A = ph.addr()
    s = socket.create_connection(("127.0.0.1", P), source_address=(A, 0))
    s.sendall(signed_msg(P, "GET", "/hbkt/known"))
    ph.expect(read_answer(s)[0] == 200, "alice's first GET")
    # the throttle counts per second of CLOCK_MONOTONIC (Python's
    # monotonic on Linux): all of it in one, from its start
    time.sleep(1.02 - time.monotonic() % 1.0)
    sts = [http(P, signed_msg(P, "GET", "/hbkt/known", who=("eve", "guess")), src=A)[0]
           for _ in range(30)]
    print("30 bad signatures from her address: %d 403, %d 503" % (sts.count(403),
                                                                 sts.count(503)))
    ph.expect(sts.count(503) >= 5, "the address throttled", sts)
    got = []
    for _ in range(5):
        s.sendall(signed_msg(P, "GET", "/hbkt/known"))
        st, _, body = read_answer(s)
        got.append(st)
        if st != 200:
            break
    ph.expect(got == [200] * 5, "alice's GETs on her connection, throttled address", got)
    # within the same second: a guess of bob's secret on her connection
    # is refused unchecked, and closes it
    s.sendall(signed_msg(P, "GET", "/hbkt/known", who=("bob", "guess")))
    st, _, body = read_answer(s)
    ph.expect(st == 503 and code_of(body) == "SlowDown" or st == 403,
              "another key on her connection", st, body[:200])
    ph.expect(closed_after(s), "her connection closed after it")
    s.close()
    ph.cases += 1
    ph.probe("a throttled address")



def _delete_xml(keys, quiet=False):
    xml = (b"<Delete>" + (b"<Quiet>true</Quiet>" if quiet else b"") +
           b"".join(b"<Object><Key>" + k + b"</Key></Object>" for k in keys) + b"</Delete>")
    return xml, {"content-md5": base64.b64encode(hashlib.md5(xml).digest()).decode()}


def _delete_entries(body):
    """DeleteObjects' answer: [(key, None)] for a <Deleted>, [(key, code)]
    for an <Error>, in the answer's order."""
    return [(m.group(2), m.group(3)) if m.group(1) == b"Error" else (m.group(5), None)
            for m in re.finditer(rb"<(Error)><Key>([^<]*)</Key><Code>([^<]*)</Code>"
                                 rb"<Message>[^<]*</Message></Error>|<(Deleted)><Key>([^<]*)"
                                 rb"</Key></Deleted>", body)]


@phase
def s3_delete_errors(ph):
    """A delete that failed is not answered deleted: DeleteObjects' entry
    for it is an <Error> with its code (Quiet lists only those), a
    DeleteObject's answer the error, where both said deleted whatever the
    delete's status (s3left, 2026-12-06).  The failure is real: the
    shared tier (shared.dir) on a tmpfs the test mounts, remounted
    read-only, so the unlink of an object only it holds is refused
    (EROFS) and the object is still there to be read.  A key over 1,024
    bytes is its own entry's KeyTooLongError (it was the request's
    MalformedXML).  Needs root (mount): skipped otherwise."""
    srv = ph.srv
    if os.geteuid() != 0:
        print("s3_delete_errors: not root (it mounts a tmpfs): skipped")
        return
    shared = os.path.join(os.path.dirname(srv.dir), "shared")
    os.makedirs(shared)
    subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=8M", "tmpfs", shared])
    try:
        _s3_delete_errors(ph, shared)
    finally:
        subprocess.call(["mount", "-o", "remount,rw", shared], stderr=subprocess.DEVNULL)
        # lazily: the server holds the directory open until it stops
        subprocess.call(["umount", "-l", shared])


def _s3_delete_errors(ph, shared):
    srv = ph.srv
    srv.argv += ["--ssd", "0", "--set", "shared.dir=" + shared,
                 "--set", "shared.admission=always"]
    srv.restart()
    P = srv.port

    def req(*a, **k):
        return http(P, signed_msg(P, *a, **k), src=PROBER)
    st, _, b = req("PUT", "/dbkt")
    assert st == 200, (st, b)
    objs = {k: os.urandom(3000) for k in ("a", "b", "c", "q")}
    for k, v in objs.items():
        st, _, b = req("PUT", "/dbkt/" + k, body=v)
        assert st == 200, (k, st, b)

    def files():
        return sum(len(fs) for _, _, fs in os.walk(shared))
    # the 4 objects (until 2026-12-06 the bucket's marker block too)
    end = time.monotonic() + 20
    while files() < 4 and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)
    assert files() >= 4, ("not written to the shared tier", files())
    srv.restart()  # DRAM empty, no SSD: the shared tier alone holds them
    P = srv.port
    setup_bucket(srv, again=True)  # the probe's object (it was in DRAM only)
    for _ in range(50):
        if subprocess.call(["mount", "-o", "remount,ro", shared]) == 0:
            break
        time.sleep(0.1)  # a write-down's file still open
    else:
        raise AssertionError("could not remount the shared tier read-only")
    long_key = b"L" * 1025
    xml, md5 = _delete_xml([b"a", b"b", long_key])
    st, _, body = req("POST", "/dbkt", query="delete", body=xml, extra=md5)
    got = _delete_entries(body)
    print("DeleteObjects of 2 objects the read-only shared tier holds and a key of 1,025 "
          "bytes: %d %s" % (st, [(k[:8], c) for k, c in got]))
    ph.expect(st == 200 and got == [(b"a", b"InternalError"), (b"b", b"InternalError"),
                                    (long_key, b"KeyTooLongError")],
              "DeleteObjects' entries", st, body[:600])
    xml, md5 = _delete_xml([b"c"], quiet=True)
    st, _, body = req("POST", "/dbkt", query="delete", body=xml, extra=md5)
    got = _delete_entries(body)
    ph.expect(st == 200 and got == [(b"c", b"InternalError")], "Quiet: the error listed",
              st, body[:600])
    st, _, body = req("DELETE", "/dbkt/q")
    print("DeleteObject of one: %d %s" % (st, code_of(body)))
    ph.expect(st == 500 and code_of(body) == "InternalError", "DeleteObject", st, body[:300])
    for k in ("a", "b", "c", "q"):  # still there: not deleted
        st, _, body = req("GET", "/dbkt/" + k)
        ph.expect(st == 200 and body == objs[k], "the object not deleted", k, st, len(body))
    ph.cases += 4
    ph.probe("deletes refused")
    subprocess.check_call(["mount", "-o", "remount,rw", shared])
    xml, md5 = _delete_xml([b"a", b"b", b"never-put"])
    st, _, body = req("POST", "/dbkt", query="delete", body=xml, extra=md5)
    got = _delete_entries(body)
    ph.expect(st == 200 and got == [(b"a", None), (b"b", None), (b"never-put", None)],
              "DeleteObjects once the tier is writable", st, body[:600])
    xml, md5 = _delete_xml([b"c", b"never-put"], quiet=True)
    st, _, body = req("POST", "/dbkt", query="delete", body=xml, extra=md5)
    ph.expect(st == 200 and _delete_entries(body) == [], "Quiet: nothing listed", st, body)
    st, _, body = req("DELETE", "/dbkt/q")
    ph.expect(st == 204, "DeleteObject once the tier is writable", st, body[:300])
    for k in ("a", "b", "c", "q"):
        st, _, body = req("GET", "/dbkt/" + k)
        ph.expect(st == 404, "the object deleted", k, st)
    ph.cases += 4
    ph.probe("deletes done")


s3_delete_errors.tenants = s3_head_ssd.tenants


CP_PART, CP_PARTS, CP_UPLOADS = 6 << 20, 3, 2


def _complete_xml(nparts):
    return (b"<CompleteMultipartUpload>" + b"".join(
        b"<Part><PartNumber>%d</PartNumber></Part>" % pn for pn in range(1, nparts + 1)) +
        b"</CompleteMultipartUpload>")


@phase
def s3_complete_pins(ph):
    """A CompleteMultipartUpload pins its parts from its probe until it is
    assembled, and a Complete waiting for its work turn (or for write-down
    room) held them outside the pin caps.  alice (--dram 128M: a
    connection's pins 16 MiB, a tenant's 32 MiB) pipelines 2 Completes of
    3 parts of 6 MiB on one connection.  Before: their probes were
    answered in one loop iteration, before either was assembled (18 MiB,
    past an iteration's work), both went ahead, 36 MiB pinned at once on a
    connection whose cap is 16; then (s3reply.c s3d_pins_take) the second
    was 503 SlowDown and completed when sent again.  Since attack40 the
    second runs only once the first is done (s3d.c "Order"): both 200,
    never pinned at once; every
    object reads back exactly, and the pins are all given back (s3ops.c
    s3reply.c s3d_pins_take).  Then two Completes whose connections are reset
    (at once, 20 ms in) give their charge back: a Complete of 33 MiB,
    past alice's 32, goes ahead alone on a fresh connection (refused 503
    if any of her pinned bytes stayed: checked with a leak put in on a
    dead connection's unpin, s3reply.c s3d_item_unpin)."""
    srv = ph.srv
    P, ok, sm, req = ph.kit()
    ups = []
    for i in range(CP_UPLOADS):
        uid = s3_upload(req, "/hbkt/cp%d" % i)
        data = b""
        for pn in range(1, CP_PARTS + 1):
            part = bytes([64 + 4 * i + pn]) * CP_PART
            st, _, b = req("PUT", "/hbkt/cp%d" % i, query="partNumber=%d&uploadId=%s" % (
                pn, uid), body=part)
            assert st == 200, (i, pn, st, b)
            data += part
        ups.append((uid, data))
    pins0 = srv.metric("kvtier_pins_active")
    xml = _complete_xml(CP_PARTS)
    c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
    c.sendall(b"".join(sm("POST", "/hbkt/cp%d" % i, query="uploadId=" + uid, body=xml)
                       for i, (uid, _) in enumerate(ups)))
    got = []
    for i in range(CP_UPLOADS):
        st, hd, b = read_answer(c, 20)
        got.append((st, code_of(b) if st != 200 else None))
    print("%d Completes of %d parts of %d MiB pipelined on one connection: %s" % (
        CP_UPLOADS, CP_PARTS, CP_PART >> 20, got))
    # since attack40 the second runs once the first is done (s3d.c
    # "Order"): never both pinned at once on the connection, both 200
    ph.expect(all(g == (200, None) for g in got), "the Completes, one after the other", got)
    c.close()
    for i, (_, data) in enumerate(ups):
        st, _, b = req("GET", "/hbkt/cp%d" % i)
        ph.expect(st == 200 and b == data, "the completed object", i, st, len(b))
    pins = srv.metric("kvtier_pins_active")
    ph.expect(pins <= pins0, "pins given back", pins0, pins)
    for i in range(CP_UPLOADS):
        ph.expect(req("DELETE", "/hbkt/cp%d" % i)[0] == 204, "cp%d deleted" % i)
    # Balance: Completes whose connection is reset (at once, and once
    # they are under way) give their parts' charge back -- to the
    # connection, and to alice's pinned bytes, which nothing else shows:
    # a Complete of 33 MiB (past her 32) on a fresh connection goes ahead
    # only while she pins nothing, and is refused 503 if any of it stayed.
    def upload(key, sizes):
        uid = s3_upload(req, key)
        for pn, size in enumerate(sizes, 1):
            st, _, b = req("PUT", key, query="partNumber=%d&uploadId=%s" % (pn, uid),
                           body=bytes([96 + pn]) * size)
            assert st == 200, (key, pn, st, b)
        return uid
    for i, wait in enumerate((0, 0.02)):
        uid = upload("/hbkt/cpr%d" % i, [CP_PART] * CP_PARTS)
        r = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        r.sendall(sm("POST", "/hbkt/cpr%d" % i, query="uploadId=" + uid, body=xml))
        time.sleep(wait)
        rst_close(r)
    pins = settled(srv, "kvtier_pins_active", pins0)
    for i in range(2):
        req("DELETE", "/hbkt/cpr%d" % i)
    big = [11 << 19] * 6  # 6 parts of 5.5 MiB: 33 MiB
    uid = upload("/hbkt/cpbig", big)
    st, _, b = req("POST", "/hbkt/cpbig", query="uploadId=" + uid, body=_complete_xml(6))
    print("2 Completes reset: pins %d (%d before); then a Complete of 33 MiB alone: %d %s" % (
        pins, pins0, st, code_of(b) if st != 200 else ""))
    ph.expect(pins <= pins0, "pins given back after the resets", pins0, pins)
    ph.expect(st == 200, "alice's pinned bytes back to 0 after the resets", st, b[:200])
    req("DELETE", "/hbkt/cpbig")
    ph.cases += 1
    ph.probe("Completes pinning their parts")


s3_complete_pins.extra = ["--dram", "128M"]
s3_complete_pins.dram_mib = 128


# s3_copy_pins: alice's sources (distinct, CPS_SIZE each: a loop assembles
# one an iteration, S3D_WORK_ITER) and the copies of them pipelined on each
# of CPS_CONNS connections, one destination key a connection
CPS_SRCS, CPS_SIZE, CPS_CONNS = 16, 8 << 20, 16


@phase
def s3_copy_pins(ph):
    """CopyObject pins its source from its probe until it is copied, and
    copies waiting for their work turn (a loop assembles 16 MiB an
    iteration: one 8 MiB source) held their sources outside the pin caps.
    alice (--dram 256M: a tenant's pins 64 MiB, a connection's 32)
    sends copies of 16 distinct 8 MiB sources, one on each of 16
    connections (128 MiB of sources; until attack40, 4 pipelined on each of
    4 connections: copies pipelined on one connection now run one after
    another, s3d.c "Order").  Before: all 16
    went ahead, 12-13 sources (96-104 MiB) seen pinned in two /metrics
    reads in a row.  Now the sources count against the caps, each value
    once a connection and once a tenant (s3reply.c "Pins of requests in
    progress"): the copies past the tenant's 64 MiB are 503 SlowDown, the
    sources held pinned stay within the cap and one source, the
    connections are kept (a GET after the copies on each answered), bob's
    GET is answered beside them, and every copy made holds one of its
    sources' bytes.  (s3_copy_loop: copies of one source count it once.)"""
    _copy_pins(ph, CPS_SRCS, CPS_SIZE, CPS_CONNS, 64, False)


def _copy_pins(ph, nsrcs, size, nconns, tenant_mib, part_copy):
    """alice pipelines copies of nsrcs distinct sources of size bytes,
    nsrcs / nconns on each of nconns connections (her pins' cap
    tenant_mib): CopyObjects into a key a connection, or (part_copy)
    UploadPartCopies into parts 1..nsrcs of one upload."""
    srv = ph.srv
    P, known, sm, req = ph.kit()
    what = "UploadPartCopies" if part_copy else "CopyObjects"
    for path, body in (("/bobcopy", b""), ("/bobcopy/k", b"bob")):
        st, _, b = http(P, signed_msg(P, "PUT", path, body=body, who=BOB), src=PROBER)
        assert st == 200, (path, st, b)
    srcs = [bytes([65 + i]) * size for i in range(nsrcs)]
    etags = []
    for i, v in enumerate(srcs):
        st, hd, b = req("PUT", "/hbkt/cs%d" % i, body=v)
        assert st == 200, (i, st, b[:200])
        etags.append(re.search(r"(?im)^etag: *([^\r]*)", hd).group(1))
    if part_copy:
        st, _, b = req("POST", "/hbkt/pcd", query="uploads=")
        assert st == 200, (st, b[:200])
        upload = re.search(rb"<UploadId>([^<]*)</UploadId>", b).group(1).decode()

    def copy_msg(j, k):
        extra = {"x-amz-copy-source": "/hbkt/cs%d" % k}
        if part_copy:
            return sm("PUT", "/hbkt/pcd", query="partNumber=%d&uploadId=%s" % (k + 1, upload),
                      extra=extra)
        return sm("PUT", "/hbkt/cd%d" % j, extra=extra)
    pins0 = srv.metric("kvtier_pins_active")
    peak, stop, series = [0], threading.Event(), []

    def sample():
        while not stop.is_set():
            v = int(srv.metric("kvtier_pins_active") - pins0)
            series.append((time.monotonic(), v))
            peak[0] = max(peak[0], v)
            time.sleep(0.002)
    sampler = threading.Thread(target=sample)
    sampler.start()
    per = nsrcs // nconns
    conns, wanted = [], []
    made_tags = {}
    try:
        for j in range(nconns):
            c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
            ks = [per * j + k for k in range(per)]
            c.sendall(b"".join(copy_msg(j, k) for k in ks))
            conns.append(c)
            wanted.append(ks)
        t0 = time.monotonic()
        st, _, b = http(P, signed_msg(P, "GET", "/bobcopy/k", who=BOB), src=PROBER, timeout=10)
        bob = time.monotonic() - t0
        ph.expect(st == 200 and b == b"bob", "bob's GET beside the copies", st, b[:200])
        got, made, after = [], {}, []
        for j, c in enumerate(conns):
            for k in wanted[j]:
                st, _, b = read_answer(c, 20)
                if st == 200:
                    got.append("200")
                    made.setdefault(j, set()).add(k)
                    m = re.search(rb"<ETag>([^<]*)</ETag>", b)
                    made_tags[k] = m.group(1).decode().replace("&quot;", '"') if m else None
                elif st == 503 and b"pin its share" in b:
                    got.append("pins")
                elif st == 503 and b"concurrent write" in b:
                    got.append("race")
                else:
                    got.append((st, code_of(b)))
            c.sendall(known)
            st, hd, b = read_answer(c, 10)
            after.append(st)
            ph.expect(st == 200 and b == b"known bytes" and
                      "connection: close" not in hd.lower(), "the connection after its copies",
                      j, st)
    finally:
        stop.set()
        sampler.join()
        for c in conns:
            c.close()
    # pins seen in two /metrics reads in a row outlived a loop iteration:
    # held by requests, not a burst of reads done and not yet taken up
    held_pins = max([min(a[1], b[1]) for a, b in zip(series, series[1:])] or [0])
    pinned = held_pins * size
    print("%d %s of distinct %d MiB sources, %d on each of %d connections: %d "
          "answered 200, %d 503 SlowDown for pins, %d a concurrent write, other %s; pins "
          "held in two /metrics reads in a row at most %d (%d MiB of sources; %d reads, "
          "at most %d in one); bob's GET %.0f ms" % (
              nsrcs, what, size >> 20, per, nconns, got.count("200"), got.count("pins"),
              got.count("race"), [g for g in got if g not in ("200", "pins", "race")],
              held_pins, pinned >> 20, len(series), peak[0], bob * 1e3))
    ph.expect(len(series) >= 2, "/metrics reads beside the copies", len(series))
    ph.expect(all(g in ("200", "pins", "race") for g in got), "the copies' answers", got)
    # (the caps take tenant_mib / size at once: half of that at least)
    ph.expect(got.count("200") >= tenant_mib * 2**20 // size // 2, "copies answered 200", got)
    ph.expect(got.count("pins") >= 1, "copies refused 503 past the tenant's pins", got)
    # the tenant's share (--dram/4) and one source past it
    ph.expect(pinned <= (tenant_mib << 20) + size, "sources held pinned (MiB)", pinned >> 20)
    # (its latency printed, not asserted: s3_copy_loop bounds the loop's
    # copying, alone in every build -- this phase runs beside others)
    for j, ks in made.items():
        if part_copy:  # a part's ETag is its bytes' (CRC32C and length)
            for k in ks:
                ph.expect(made_tags[k] == etags[k], "a part's ETag", k, made_tags[k],
                          etags[k])
            continue
        st, _, b = req("GET", "/hbkt/cd%d" % j)
        ph.expect(st == 200 and any(b == srcs[k] for k in ks), "a copy's bytes", j, st,
                  len(b), b[:1])
    # given back once the copies are answered (their sources still there)
    pins = settled(srv, "kvtier_pins_active", pins0)
    ph.expect(pins <= pins0, "pins given back", pins0, pins)
    for path in ["/hbkt/cs%d" % i for i in range(nsrcs)] + \
            ["/hbkt/cd%d" % j for j in range(nconns)]:
        req("DELETE", path)
    if part_copy:
        st, _, b = req("DELETE", "/hbkt/pcd", query="uploadId=" + upload)
        ph.expect(st == 204, "the upload aborted", st, b[:200])
    ph.cases += 1
    ph.probe("copies of many sources")


s3_copy_pins.extra = ["--dram", "256M"]
s3_copy_pins.dram_mib = 256


@phase
def s3_part_copy_pins(ph):
    """UploadPartCopy pins its source from its probe until the part is
    copied, on CopyObject's path (s3ops.c s3d_work_pins, s3reply.c
    "Pins of requests in progress"), which only s3_copy_pins tested,
    with CopyObjects.  alice (--dram 160M: a tenant's pins 40 MiB, a
    connection's 20) pipelines UploadPartCopies of 10 distinct 8 MiB
    sources into parts 1..10 of one upload, one on each of 10
    connections (80 MiB of sources; pipelined on one connection they
    would run one after another, s3d.c "Order"): those past her 40 MiB are 503 SlowDown, the
    sources held pinned stay within the cap and one source, the
    connections are kept, bob is served beside them, each part made has
    its source's ETag, and the pins are given back after (with the
    UploadPartCopy left out of the count: all 10 answered 200, 0 refused)."""
    _copy_pins(ph, 10, 8 << 20, 10, 40, True)


s3_part_copy_pins.extra = ["--dram", "160M"]
s3_part_copy_pins.dram_mib = 160


@phase
def s3_pins_cond(ph):
    """A conditional GET is answered 304 or 412, with no body, whatever
    its tenant pins: s3d_pin_admit refused it 503 SlowDown before its
    conditions were evaluated, for pins it would never hold.  alice
    (--dram 64M: her answers pin 16 MiB) GETs 3 objects of 6 MiB on 3
    connections and never reads (18 MiB pinned); on a fresh connection
    a plain GET is refused 503, a GET with If-None-Match its ETag (or
    If-Modified-Since its Last-Modified) is answered 304, one with a
    stale If-Match 412 (before: all 503; s3pins2, 2026-12-06)."""
    srv, P = ph.srv, ph.srv.port
    big = 6 << 20
    for i in range(3):
        st, _, body = http(P, signed_msg(P, "PUT", "/hbkt/cond%d" % i, body=b"%d" % i * big),
                           src=PROBER, timeout=20)
        assert st == 200, (i, st, body[:200])
    st, hd, _ = http(P, signed_msg(P, "HEAD", "/hbkt/known"), src=PROBER)
    assert st == 200, (st, hd)
    etag = re.search(r"(?im)^etag: *([^\r]*)", hd).group(1)
    lm = re.search(r"(?im)^last-modified: *([^\r]*)", hd).group(1)
    pins0 = srv.metric("kvtier_pins_active")
    held = []
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(signed_msg(P, "GET", "/hbkt/cond%d" % i))
        s.settimeout(5)
        ph.expect(int(s.recv(12, socket.MSG_PEEK).split(b" ")[1]) == 200, "held GET", i)
        held.append(s)
    ph.expect(srv.metric("kvtier_pins_active") - pins0 == 3, "3 answers pinned")
    st, _, body = http(P, signed_msg(P, "GET", "/hbkt/known"), src=ph.addr())
    print("alice's plain GET at her cap: %d %s" % (st, code_of(body)))
    ph.expect(st == 503 and code_of(body) == "SlowDown", "a plain GET at the cap", st, body)
    for what, hdr, want in (("If-None-Match", {"if-none-match": etag}, 304),
                            ("If-Modified-Since", {"if-modified-since": lm}, 304),
                            ("If-Match", {"if-match": '"0123456789abcdef"'}, 412)):
        st, hd, body = http(P, signed_msg(P, "GET", "/hbkt/known", extra=hdr), src=ph.addr())
        print("a GET with %s at her cap: %d %s" % (what, st, code_of(body)))
        ph.expect(st == want, "a conditional GET at the cap", what, st, body[:200])
        ph.cases += 1
    for s in held:
        s.close()
    end = time.monotonic() + 5
    while srv.metric("kvtier_pins_active") > pins0 and time.monotonic() < end:
        time.sleep(0.1)
    ph.probe("conditional GETs at the pin cap")


@phase
def s3_park_overwrite(ph):
    """An overwrite's body is buffered and charged to its tenant's input
    share (a quarter of --max-memory, 8 MiB) at its head; its connection
    is still read for that body (loop.c kvtd_conn_in_share_over).  The
    native frame's body was exempt, the S3 one not: an overwrite of 8 MiB
    (the share alone) resumed from a park (s3d.c "Parking") paused its own
    connection, and the body was never read -- bob's PUT unanswered until
    his client gave up (10-20 s beside alice's PUTs of 12 MiB).  Here bob
    puts 8 MiB, its write-down held 600 ms by a slow writer
    (ssd.debug_write_delay_ms) in a queue of 8 MiB, then overwrites it at
    once: parked, then resumed as an overwrite, it must be answered 200
    within 4 s and read back."""
    srv, P = ph.srv, ph.srv.port
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt", who=BOB), src=PROBER)
    assert st == 200, (st, body[:200])
    srv.written_down()
    v1, v2 = b"1" * (8 << 20), b"2" * (8 << 20)
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/big", body=v1, who=BOB), src=PROBER,
                       timeout=10)
    assert st == 200, (st, body[:200])
    parked0 = srv.metric("kvtier_server_put_parked_total")
    t0 = time.monotonic()
    st, _, body = http(P, signed_msg(P, "PUT", "/bobbkt/big", body=v2, who=BOB), src=PROBER,
                       timeout=4)
    dt = time.monotonic() - t0
    parked = srv.metric("kvtier_server_put_parked_total") - parked0
    print("an 8 MiB overwrite behind an 8 MiB write-down: %s %s in %.2f s, parked %d" % (
        st, code_of(body) if st not in (0, 200) else "", dt, parked))
    ph.expect(parked >= 1, "the overwrite was parked (the case under test)", parked)
    ph.expect(st == 200, "the parked overwrite answered", st, body[:200])
    st, _, body = http(P, signed_msg(P, "GET", "/bobbkt/big", who=BOB), src=PROBER, timeout=10)
    ph.expect(st == 200 and body == v2, "the overwrite read back", st, len(body))
    ph.probe("an overwrite at the input share, parked")


s3_park_overwrite.extra = ["--ssd", "256M", "--set", "ssd.segment=16M",
                           "--set", "ssd.writedown_max=8M",
                           "--set", "ssd.debug_write_delay_ms=600"]

# s3_bucket_race: how long the SSD writer holds each write-down (a
# DeleteBucket's clear waits behind one to be durable), and when the PUT
# is sent into it
RACE_WAIT_MS, RACE_PUT_AT_S = 400, 0.15


@phase
def s3_bucket_race(ph):
    """DeleteBucket and a write into the bucket are linearizable: never a
    DeleteBucket answered 204 and a PUT into the bucket answered 200 as
    if after it, the object then back in the bucket created again.  (1)
    alice's PUT of 64 KiB into `race1` has its head taken (100 Continue:
    its bucket checked, its DRAM reserved) and all but its last KiB sent
    when she deletes the bucket: before 2026-12-06 (s3tidy) the delete
    found no object and answered 204, then the PUT 200 (its reservation
    cancelled by the clear: stored nowhere); then (session 40) the delete
    was 409 OperationAborted for as long as the PUT's body was coming --
    a client holding it open kept the bucket from being deleted until
    the slow-client timeout.  Now the DeleteBucket wins, as on AWS: 204
    at once, and the PUT, its body in, 404 NoSuchBucket; with the bucket
    created again meanwhile, 503 SlowDown (retry); the bucket empty
    either way.  (2) a DeleteBucket of `race2N` (an upload marker in it)
    waits for its clear to be durable behind a write-down of
    RACE_WAIT_MS (ssd.debug_write_delay_ms) when a PUT into the bucket
    arrives: before, the PUT was 200, landing after the clear, and the
    object came back with the bucket created again; now it is 503
    SlowDown (retried, it finds no bucket: 404 NoSuchBucket).  A PUT
    that got there before the DeleteBucket (a loaded machine) makes it
    409 BucketNotEmpty, as it should: the case is tried again, 3 times
    at most."""
    srv = ph.srv
    P, _, sm, req = ph.kit()
    srv.written_down()
    # (1) a PUT whose body is coming when the DeleteBucket comes; (1b)
    # and a CreateBucket of the same name after it
    for again in (False, True):
        st, _, b = req("PUT", "/race1")
        assert st == 200, (st, b)
        body = os.urandom(64 << 10)
        msg = sm("PUT", "/race1/obj", body=body, extra={"expect": "100-continue"})
        head = msg[:len(msg) - len(body)]
        c = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        c.sendall(head)
        st, _, _ = read_answer(c, 10)
        assert st == 100, st  # its head taken: bucket checked, DRAM reserved
        c.sendall(body[:-1024])
        t0 = time.monotonic()
        st_del, _, b_del = req("DELETE", "/race1")
        dt = time.monotonic() - t0
        st_mk0 = req("PUT", "/race1")[0] if again else None
        c.sendall(body[-1024:])
        st_put, _, b_put = read_answer(c, 10)
        c.close()
        st_mk, _, _ = req("PUT", "/race1")
        st_get, _, got = req("GET", "/race1/obj")
        print("a PUT whose body is coming, DeleteBucket: %d %s in %.0f ms;%s the PUT %d %s; "
              "CreateBucket %d; GET %d" % (
                  st_del, code_of(b_del), dt * 1e3,
                  " CreateBucket %d;" % st_mk0 if again else "", st_put, code_of(b_put),
                  st_mk, st_get))
        ph.expect(not (st_del == 204 and st_put == 200), "the delete and the PUT both done",
                  st_del, st_put)
        ph.expect(st_del == 204 and dt < 2, "DeleteBucket beside a PUT whose body is coming",
                  st_del, b_del[:200], dt)
        if again:
            ph.expect(st_mk0 == 200 and st_put == 503 and code_of(b_put) == "SlowDown",
                      "the PUT after DeleteBucket and CreateBucket", st_mk0, st_put,
                      b_put[:200])
            ph.expect(st_mk == 409 and st_get == 404, "the bucket created again is empty",
                      st_mk, st_get)
        else:
            ph.expect(st_put == 404 and code_of(b_put) == "NoSuchBucket",
                      "the PUT after DeleteBucket", st_put, b_put[:200])
            ph.expect(st_mk == 200 and st_get == 404, "the bucket created again is empty",
                      st_mk, st_get)
        ph.cases += 1
        st, _, b = req("DELETE", "/race1")
        assert st == 204, (st, b)
    # (2) a PUT while the DeleteBucket is in progress
    for attempt in range(3):
        bkt = "/race2%d" % attempt
        st, _, b = req("PUT", bkt)
        assert st == 200, (bkt, st, b)
        st, _, b = req("POST", bkt + "/up", query="uploads=")
        assert st == 200, (bkt, st, b)
        srv.written_down()
        st, _, b = req("PUT", "/hbkt/trigger", body=b"t" * 1024)  # holds the writer
        assert st == 200, (st, b)
        d = socket.create_connection(("127.0.0.1", P), source_address=(ph.addr(), 0))
        t0 = time.monotonic()
        d.sendall(sm("DELETE", bkt))
        time.sleep(RACE_PUT_AT_S)
        # answered already: the trigger's write-down was mostly behind
        # it when the delete came (a loaded machine), not the case
        early = bool(select.select([d], [], [], 0)[0])
        st_put, _, b_put = req("PUT", bkt + "/late", body=b"late")
        st_del, _, b_del = read_answer(d, 10)
        dt = time.monotonic() - t0
        d.close()
        st_again, _, b_again = req("PUT", bkt + "/late", body=b"late")
        print("DeleteBucket in progress (%d %s after %.0f ms), a PUT: %d %s, again %d %s" % (
            st_del, code_of(b_del), dt * 1e3, st_put, code_of(b_put), st_again,
            code_of(b_again)))
        ph.expect(not (st_del == 204 and st_put == 200), "the delete and the PUT both done",
                  st_del, st_put)
        if st_put == 200 and st_del == 409 and code_of(b_del) == "BucketNotEmpty":
            req("DELETE", bkt + "/late")
            continue  # the PUT came first: linearizable, not the case under test
        if early and st_del == 204 and attempt < 2:
            print("the DeleteBucket answered before the PUT was sent: tried again")
            continue
        break
    st_mk, _, _ = req("PUT", bkt)
    st_get, _, _ = req("GET", bkt + "/late")
    print("then CreateBucket %d; GET %d (attempt %d)" % (st_mk, st_get, attempt + 1))
    ph.expect(st_del == 204 and dt >= RACE_WAIT_MS / 2000, "the DeleteBucket waited", st_del,
              dt)
    ph.expect(st_put == 503 and code_of(b_put) == "SlowDown",
              "a PUT beside the DeleteBucket", st_put, b_put[:200])
    ph.expect(st_again == 404 and code_of(b_again) == "NoSuchBucket", "the PUT retried",
              st_again)
    ph.expect(st_mk == 200 and st_get == 404, "the bucket created again is empty", st_mk,
              st_get)
    ph.cases += 1
    ph.probe("DeleteBucket beside PUTs")


s3_bucket_race.extra = ["--ssd", "64M", "--set", "ssd.segment=16M",
                        "--set", "ssd.debug_write_delay_ms=%d" % RACE_WAIT_MS]


# tenant_sum: one tenant's charges over the listeners and kinds of memory
# together.  Its queued answers, its requests in flight and its TLS
# connections' SSLs each had a quarter of --max-memory (KVTD_OUT_TENANT_MAX,
# KVTD_IN_TENANT_MAX, KVTD_TLS_TENANT_MEM_MAX), counted apart: one tenant
# holding all three took three quarters and more, and another tenant's
# login over TLS was refused at its accept.  Now all a tenant holds
# together is at most half the budget (KVTD_TENANT_MEM_MAX).
SUM_TLS_LOGINS = 400     # more than a quarter of 32M at ~30 KiB each
SUM_ECHO = 256 << 10     # an ECHO's argument (its answer is charged)
SUM_ECHOS = 40           # on each of 2 connections: 20 MiB asked
SUM_SET = 4 << 20        # a SET's value, half of it sent, then nothing
SUM_SETS = 8
SUM_STALLED = 256        # KVTD_UNAUTH_PEER_MAX


def send_for(s, data, seconds):
    """Send as much of data on s as the server takes within seconds."""
    s.setblocking(False)
    end, sent = time.monotonic() + seconds, 0
    while sent < len(data) and time.monotonic() < end:
        if not select.select([], [s], [], 0.05)[1]:
            continue
        try:
            sent += s.send(data[sent:sent + (1 << 20)])
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            break
    s.setblocking(True)
    return sent


@phase
def tenant_sum(ph):
    """alice logs in over TLS 400 times (her SSLs' quarter), pipelines
    ECHOs of 256 KiB on 2 of them and never reads (her answers' quarter),
    and starts SETs of 4 MiB on 8 others, half of each value sent (her
    commands' quarter): what the server's budget holds of hers is at most
    half of it, and bob still logs in over TLS and SETs and GETs 1 MiB."""
    t = tls_server(ph, "tenant_sum")
    if not t:
        return
    try:
        rport = tls_resp_port(t)
        budget = 32 << 20

        def mem():
            return t.metric("kvtier_server_memory_bytes")
        time.sleep(0.3)
        mem0 = mem()
        src = ph.addr()
        alice, refused = [], 0
        for _ in range(SUM_TLS_LOGINS):
            try:
                c = TlsRecords(rport, src)
                c.s.sendall(c.records(resp_cmd(b"AUTH", ALICE[0].encode(),
                                               ALICE[1].encode()), 16384))
                ok = c.read(5, timeout=5) == b"+OK\r\n"
            except (EOFError, OSError):
                ok = False
            if ok:
                alice.append(c)
            else:
                refused += 1
                c.s.close()
        mem1 = mem()
        echo = resp_cmd(b"ECHO", b"e" * SUM_ECHO)
        sent_out = 0
        for c in alice[:2]:
            c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sent_out += send_for(c.s, c.records(echo * SUM_ECHOS, 16384), 3)
        mem2 = mem()
        sent_in = 0
        for c in alice[2:2 + SUM_SETS]:
            head = b"*3\r\n$3\r\nSET\r\n$4\r\nsumk\r\n$%d\r\n" % SUM_SET
            sent_in += send_for(c.s, c.records(head + b"v" * (SUM_SET // 2), 16384), 2)
        time.sleep(0.5)
        mem3 = mem()
        held = mem3 - mem0
        print("tenant_sum: alice %d TLS logins (%d refused): mem_used +%.1f MiB; her ECHOs "
              "unread (%.1f MiB sent): +%.1f; her SETs half sent (%.1f MiB sent): +%.1f; "
              "all hers %.1f MiB of the budget's %d" % (
                  len(alice), refused, (mem1 - mem0) / 2**20, sent_out / 2**20,
                  (mem2 - mem1) / 2**20, sent_in / 2**20, (mem3 - mem2) / 2**20,
                  held / 2**20, budget >> 20))
        # then from her address 256 stalled handshakes (its unauthenticated
        # connections' most): their SSLs are charged too
        stalled = []
        for _ in range(SUM_STALLED):
            c = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
            c.sendall(client_hello()[3])
            stalled.append(c)
        time.sleep(0.5)
        mem4 = mem()
        print("tenant_sum: %d stalled handshakes from her address: mem_used +%.1f MiB; "
              "%.1f MiB of %d in all" % (SUM_STALLED, (mem4 - mem3) / 2**20, mem4 / 2**20,
                                          budget >> 20))
        # bob, after: a TLS login, a SET and a GET of 1 MiB
        val = b"b" * (1 << 20)
        try:
            b = TlsRecords(rport, ph.addr())
            b.s.sendall(b.records(resp_cmd(b"AUTH", BOB[0].encode(), BOB[1].encode()), 16384))
            login = b.read(5, timeout=5)
            b.s.sendall(b.records(resp_cmd(b"SET", b"bobk", val) + resp_cmd(b"GET", b"bobk"),
                                  16384))
            want, both = 5 + len(b"$%d\r\n" % len(val)) + len(val) + 2, b""
            while len(both) < want:
                try:
                    both += b.read(want - len(both), timeout=10)
                except (EOFError, OSError):
                    break
            setr, getr = both[:5], both[5:]
            b.s.close()
        except (EOFError, OSError) as e:
            login, setr, getr = repr(e).encode(), b"", b""
        print("tenant_sum: bob's TLS login %r, SET %r, GET %d bytes %r" % (
            login[:60], setr[:60], len(getr), getr[:40]))
        ph.expect(held <= budget // 2 + (2 << 20), "alice holds at most half the budget",
                  held, budget // 2)
        ph.expect(mem4 - mem3 <= budget // 16 + (64 << 10),
                  "one address's handshakes hold at most a sixteenth", mem4 - mem3)
        ph.expect(login == b"+OK\r\n", "bob's TLS login beside alice", login[:200])
        ph.expect(setr == b"+OK\r\n" and getr == b"$%d\r\n" % len(val) + val + b"\r\n",
                  "bob's SET and GET of 1 MiB", setr[:200], len(getr))
        for c in alice:
            c.s.close()
        for c in stalled:
            c.close()
        end = time.monotonic() + 10
        while mem() > mem0 and time.monotonic() < end:
            time.sleep(0.1)
        ph.expect(mem() <= mem0, "the charge given back", mem0, mem())
        ph.cases += 1
    finally:
        t.stop()


# tls_peer_rows: an address's part of the unauthenticated SSLs in the rows
@phase
def tls_peer_rows(ph):
    """One address's unauthenticated SSLs hold at most a sixteenth of the
    budget (KVTD_TLS_PEER_MEM_MAX, Session 48), counted by peer slot: in
    one row of 4,096 (red48) an innocent address hashed to a flooder's
    slot was closed at the accept while the flood lasted.  Now in the two
    keyed rows of the failure throttle and the unauthenticated count (the
    least of an address's slots is its count).  Under the rows' keys
    test_hostile's throttle_slots uses (KVTD_TEST_THROTTLE_KEYS):
    127.0.0.1 stalls ClientHellos past its sixteenth at --max-memory 4M;
    then 127.0.16.17 (its row-0 slot 127.0.0.1's, its row-1 slot not) gets
    the server's flight, and 127.0.218.4 (both slots 127.0.0.1's) is
    closed at the accept -- which shows the keys took."""
    t = tls_server(ph, "tls_peer_rows", ["--max-memory", "4M"],
                   env={"KVTD_TEST_THROTTLE_KEYS": "0x48a11ce5,0x48b0b084"})
    if not t:
        return
    socks = []
    try:
        rport = tls_resp_port(t)

        def hello(src):
            c = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
            socks.append(c)
            c.sendall(client_hello()[3])
            return hello_fate(c)

        own = [hello("127.0.0.1") for _ in range(12)]
        held = own.count("held")
        one = hello("127.0.16.17")
        both = hello("127.0.218.4")
        print("tls_peer_rows: 127.0.0.1 %d of 12 held (%s); 127.0.16.17 (one slot shared) %s; "
              "127.0.218.4 (both) %s" % (held, ",".join(own), one, both))
        ph.expect(0 < held < 12 and own.count("closed") == 12 - held,
                  "the flooder held to its sixteenth", own)
        ph.expect(one == "held", "an address sharing one slot handshakes", one)
        ph.expect(both == "closed", "an address sharing both slots is closed", both)
        ph.cases += 1
    finally:
        for c in socks:
            c.close()
        t.stop()


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in PHASES:
        print("usage: test_hostile_http.py KVTIERD PHASE (%s)" % ", ".join(PHASES))
        return 2
    kvtierd, name = sys.argv[1], sys.argv[2]
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    extra = getattr(PHASES[name], "extra", [])
    srv = Server(kvtierd, base, extra, getattr(PHASES[name], "tenants", None),
                 env=getattr(PHASES[name], "env", None))
    try:
        setup_bucket(srv)
        time.sleep(0.2)
        conns0 = srv.metric("kvtier_connections_active")
        mem0 = srv.metric("kvtier_server_memory_bytes")
        rss0 = srv.rss_kib()
        ph = Phase(srv)
        PHASES[name](ph)
        # what the cases held comes back
        end = time.monotonic() + 10
        while True:
            conns = srv.metric("kvtier_connections_active")
            mem = srv.metric("kvtier_server_memory_bytes")
            if (conns <= conns0 and mem <= mem0) or time.monotonic() > end:
                break
            time.sleep(0.1)
        rss = srv.rss_kib()
        print("%s: %d cases; probe max %.1f ms; connections %d -> %d; mem_used %d -> %d B; "
              "RSS %d -> %d KiB" % (name, ph.cases, ph.worst_probe * 1e3, conns0, conns,
                                    mem0, mem, rss0, rss))
        assert not ph.failed, "%d cases failed" % ph.failed
        assert conns <= conns0, ("connections left open", conns0, conns)
        assert mem <= mem0, ("--max-memory charge not given back", mem0, mem)
        # --dram + --max-memory + ASan's slack (doc/security.md "Threats")
        dram = getattr(PHASES[name], "dram_mib", 64)
        assert rss - rss0 <= (dram + 32 + 48) << 10, ("RSS grew", rss0, rss)
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
