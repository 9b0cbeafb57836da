#!/usr/bin/env python3
"""tls_post_handshake.py - what TLS messages after the handshake cost
kvtierd's loop: KeyUpdates (asking the server's own or not), one-byte
records, 31 empty records before each byte, against honest RESP PINGs
(doc/security.md "Post-handshake messages").

Usage: tls_post_handshake.py KVTIERD TLS_FLOOD [SECONDS]

Starts KVTIERD as test_hostile_http's TLS servers (--tenants, one loop,
--max-memory 32M, TLS on S3 and RESP) and runs TLS_FLOOD
(build/tests/tls_flood) as alice, authenticated over RESP, for SECONDS
(4 by default) a scenario: each kind of message from 1 and 8 connections
as fast as the sockets take them, the client reading what the server
sends or never reading; then each kind at one rate (20,000 a second, one
connection), reading.  Meanwhile another client (PROBER) times /healthz
on the metrics listener and bob's RESP PING over TLS on the same loop
(p50, p99, max), and the test samples RSS and --max-memory's charge.
Prints a line a scenario: messages sent, loop CPU a second and a message,
the probes' latencies, RSS and mem_used peaks over the start, whether the
server closed the connections.
"""
import os
import re
import ssl
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as H  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def resp_ping_conn(rport):
    raw = socket.create_connection(("127.0.0.1", rport), source_address=(H.PROBER, 0))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = H.tls_ctx().wrap_socket(raw)
    s.sendall(H.resp_cmd(b"AUTH", H.BOB[0].encode(), H.BOB[1].encode()))
    assert s.recv(64) == b"+OK\r\n"
    return s


def scenario(srv, flood, rport, what, conns, read, secs, rate=0):
    """One flood beside the probes: a dict of figures."""
    argv = [flood, "--what", what, "--auth", "%s:%s" % H.ALICE, "--conns", str(conns),
            "--seconds", str(secs), "--src", "127.0.0.4", str(rport)]
    if read:
        argv.insert(1, "--read")
    if rate:
        argv[1:1] = ["--rate", str(rate)]
    bob = resp_ping_conn(rport)
    hz, pings, rss, mem = [], [], [], []
    stop = threading.Event()

    def prober():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                st, _, _ = H.http(srv.mport, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                  src=H.PROBER, timeout=10)
                assert st == 200
                hz.append(time.monotonic() - t0)
                t0 = time.monotonic()
                bob.sendall(H.resp_cmd(b"PING"))
                assert bob.recv(64) == b"+PONG\r\n"
                pings.append(time.monotonic() - t0)
            except (OSError, AssertionError):
                pass
            time.sleep(0.005)
    th = threading.Thread(target=prober)
    rss0, mem0 = srv.rss_kib(), srv.metric("kvtier_server_memory_bytes")
    c0 = H.loop_cpu_s(srv)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    th.start()
    while p.poll() is None:
        rss.append(srv.rss_kib())
        try:
            mem.append(srv.metric("kvtier_server_memory_bytes"))
        except (OSError, AssertionError):
            pass  # the loop too busy to answer in 5 s
        time.sleep(0.25)
    out = p.stdout.read()
    wall = time.monotonic() - t0
    cpu = H.loop_cpu_s(srv) - c0
    stop.set()
    th.join()
    bob.close()
    tot = re.search(r"total: (\d+) connections, (\d+) set up, (\d+) closed; sent (\d+) "
                    r"messages, (\d+) bytes; read (\d+) bytes", out)
    assert tot, out
    n, up, closed, sent, sbytes, rbytes = (int(x) for x in tot.groups())
    return dict(what=what, conns=conns, read=read, rate=rate, sent=sent, bytes=sbytes,
                rbytes=rbytes, closed=closed, up=up, cpu_s=cpu / wall, us_msg=cpu / max(sent, 1)
                * 1e6, hz50=pct(hz, .5), hz99=pct(hz, .99), hzmax=max(hz or [0]),
                p50=pct(pings, .5), p99=pct(pings, .99), rss=max(rss or [rss0]) - rss0,
                mem=max(mem or [mem0]) - mem0, out=out)


def show(r):
    print("%-9s x%d %-6s %s sent %8d (%5.1f MB) loop %4.0f%% %6.2f us/msg; /healthz p50 %5.2f "
          "p99 %6.2f max %6.1f ms; PING p50 %5.2f p99 %6.2f ms; RSS +%d KiB, mem_used +%d B; "
          "closed %d of %d" % (
              r["what"], r["conns"], "read" if r["read"] else "noread",
              ("%5d/s" % r["rate"]) if r["rate"] else "  max  ", r["sent"], r["bytes"] / 1e6,
              r["cpu_s"] * 100, r["us_msg"], r["hz50"] * 1e3, r["hz99"] * 1e3,
              r["hzmax"] * 1e3, r["p50"] * 1e3, r["p99"] * 1e3, r["rss"], r["mem"],
              r["closed"], r["conns"]), flush=True)


def main():
    kvtierd, flood = sys.argv[1], sys.argv[2]
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
    import tempfile
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    pki = H.tls_pki(base)
    srv = H.Server(kvtierd, base, ["--tls-cert", pki[0], "--tls-key", pki[1], "--resp",
                                   "127.0.0.1:0"])
    rport = H.tls_resp_port(srv)
    try:
        # the probes alone
        show(scenario(srv, flood, rport, "ping", 1, True, secs, rate=1))
        for what in ("ping", "tiny", "ku-req", "ku-noreq", "padded"):
            for read in (True, False):
                for conns in (1, 8):
                    show(scenario(srv, flood, rport, what, conns, read, secs))
        for what in ("ping", "tiny", "ku-req", "ku-noreq"):
            show(scenario(srv, flood, rport, what, 1, True, secs, rate=20000))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
