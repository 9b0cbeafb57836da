#!/usr/bin/env python3
"""tls_conn_cost.py - what one TLS connection costs kvtierd at each stage
of its life, against a plain one (doc/security.md "A handshake's
memory", "The SSL object").

Usage: tls_conn_cost.py KVTIERD [CONNS [STAGE...]]

For each stage, a fresh server (as test_hostile_http's: --tenants, one
loop, --max-memory 1G so that nothing is refused) with TLS on its RESP
listener, and another without, each given CONNS connections (500 by
default, from 5 addresses) brought to the stage; RSS growth a connection
and kvtier_server_memory_bytes growth a connection, TLS and plain:

  accepted     connected, nothing sent
  handshake    a ClientHello sent, the server's flight read, no Finished
               (plain: as accepted)
  idle         the handshake done (plain: connected), not authenticated
  auth         authenticated (AUTH), idle
  output       authenticated, 16 GETs of a 256 KB value sent and their
               answers not read (the client's receive buffer 4 KiB):
               what the kernel does not take waits in the server (pinned
               DRAM, not copied; mem_used shows its entries)
"""
import os
import socket
import ssl
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as H  # noqa: E402

ADDRS = ["127.0.9.%d" % i for i in range(1, 6)]
STAGES = ("accepted", "handshake", "idle", "auth", "output")
VALUE = b"v" * 256000


def server(kvtierd, tls):
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    extra = ["--resp", "127.0.0.1:0", "--max-memory", "1G"]
    if tls:
        pki = H.tls_pki(base)
        extra += ["--tls-cert", pki[0], "--tls-key", pki[1]]
    return H.Server(kvtierd, base, extra)


class Plain:
    def __init__(self, port, src):
        self.s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))

    def send(self, b):
        self.s.sendall(b)

    def line(self):
        return H.resp_line(self.s)


class Tls:
    def __init__(self, port, src):
        self.c = H.TlsRecords(port, src)

    def send(self, b):
        self.c.s.sendall(self.c.records(b, 16384))

    def line(self):
        got = b""
        while not got.endswith(b"\r\n"):
            got += self.c.read(1)
        return got[:-2]


def bring(stage, tls, port, src):
    """One connection at stage; what keeps it open."""
    if stage == "accepted" or (stage == "handshake" and not tls):
        return socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
    if stage == "handshake":
        hs, i, o, hello = H.client_hello()
        s = socket.create_connection(("127.0.0.1", port), source_address=(src, 0))
        s.sendall(hello)
        s.settimeout(5)
        got = s.recv(65536)
        assert got[:1] == b"\x16", got[:20]
        return s
    if stage == "output":
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.bind((src, 0))
        raw.connect(("127.0.0.1", port))
        c = Plain.__new__(Plain)
        c.s = raw
        if tls:
            t = Tls.__new__(Tls)
            t.c = H.TlsRecords.__new__(H.TlsRecords)
            # TlsRecords over an existing socket
            t.c.ssl, t.c.s = ssl, raw
            t.c.i, t.c.o = ssl.MemoryBIO(), ssl.MemoryBIO()
            t.c.t = H.tls_ctx().wrap_bio(t.c.i, t.c.o)
            while True:
                try:
                    t.c.t.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    raw.sendall(t.c.o.read())
                    t.c.feed(10)
            raw.sendall(t.c.o.read())
            c = t
    else:
        c = Tls(port, src) if tls else Plain(port, src)
    if stage == "idle":
        return c
    c.send(H.resp_cmd(b"AUTH", H.ALICE[0].encode(), H.ALICE[1].encode()))
    assert c.line() == b"+OK"
    if stage == "output":
        c.send(H.resp_cmd(b"GET", b"big") * 16)
    return c


def measure(kvtierd, stage, tls, n):
    srv = server(kvtierd, tls)
    try:
        port = H.tls_resp_port(srv)
        if stage == "output":  # the value, once
            c = Tls(port, "127.0.0.2") if tls else Plain(port, "127.0.0.2")
            c.send(H.resp_cmd(b"AUTH", H.ALICE[0].encode(), H.ALICE[1].encode()))
            assert c.line() == b"+OK"
            c.send(H.resp_cmd(b"SET", b"big", VALUE))
            assert c.line() == b"+OK"
        time.sleep(0.5)
        rss0, mem0 = srv.rss_kib(), srv.metric("kvtier_server_memory_bytes")
        keep = [bring(stage, tls, port, ADDRS[k % len(ADDRS)]) for k in range(n)]
        time.sleep(1.0)
        rss1, mem1 = srv.rss_kib(), srv.metric("kvtier_server_memory_bytes")
        conns = srv.metric("kvtier_connections_active")
        del keep
        return (rss1 - rss0) / n, (mem1 - mem0) / n, conns
    finally:
        srv.stop()


def main():
    kvtierd = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    print("%d connections a stage; per connection: RSS KiB, mem_used B" % n)
    print("%-10s %10s %10s %10s %10s %10s" % ("stage", "TLS RSS", "plain RSS", "TLS-plain",
                                            "TLS mem", "plain mem"))
    for stage in sys.argv[3:] or STAGES:
        t = measure(kvtierd, stage, True, n)
        p = measure(kvtierd, stage, False, n)
        print("%-10s %10.1f %10.1f %10.1f %10.0f %10.0f   (conns %d, %d)" % (
            stage, t[0], p[0], t[0] - p[0], t[1], p[1], t[2], p[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
