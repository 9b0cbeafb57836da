#!/usr/bin/env python3
"""tls_prehandshake.py - what TLS connections that never finish their
handshake hold in kvtierd before any crypto (doc/security.md "A
handshake's memory").

Usage: tls_prehandshake.py KVTIERD [SECONDS]

Starts KVTIERD (as test_hostile_http's servers: --tenants, --max-memory
32M, one loop, TLS on S3 and RESP, --idle-timeout 30 by default) and
opens 1,000 connections to its RESP port from 5 addresses (200 each,
under the 256 unauthenticated an address), each sending a TLS record
header that declares a 16,640-byte handshake record and 101 bytes of it.
Then (1) one shot: RSS held, and how long until the server closed them;
(2) the attacker reconnects each closed connection at once, for SECONDS
(35 by default): the connections held and RSS, sampled every 0.5 s
(mean, min), and the server's handshake failure counters.
"""
import os
import selectors
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as H  # noqa: E402

ADDRS = ["127.0.9.%d" % i for i in range(1, 6)]
PER_ADDR = 200
# a record header (handshake, TLS 1.0 in the record layer, 16,640 bytes)
# and 101 bytes of the record: a ClientHello's start, never finished
PARTIAL = struct.pack(">BHH", 22, 0x0301, 16640) + b"\x01\x00\x40\xfc\x03\x03" + b"\x00" * 95


def counter(srv, name):
    try:
        return srv.metric(name)
    except AssertionError:
        return -1  # an older server without it


def main():
    kvtierd = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 35.0
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    pki = H.tls_pki(base)
    srv = H.Server(kvtierd, base, ["--tls-cert", pki[0], "--tls-key", pki[1], "--resp",
                                   "127.0.0.1:0"])
    rport = int(__import__("re").search(r"RESP listener on 127\.0\.0\.1:(\d+)",
                                        open(srv.log).read()).group(1))
    sel = selectors.DefaultSelector()

    def open_one(src):
        try:
            s = socket.create_connection(("127.0.0.1", rport), source_address=(src, 0))
            s.sendall(PARTIAL)
        except OSError:
            return False
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, src)
        return True

    def reap(timeout):
        """Closed connections: unregistered, their addresses returned."""
        gone = []
        for key, _ in sel.select(timeout):
            try:
                b = key.fileobj.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                b = b""
            if not b:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                gone.append(key.data)
        return gone
    try:
        time.sleep(0.5)
        rss0 = srv.rss_kib()
        thr0 = counter(srv, "kvtier_tls_throttled_total")
        to0 = counter(srv, "kvtier_tls_handshake_timeouts_total")
        t0 = time.monotonic()
        for src in ADDRS:
            for _ in range(PER_ADDR):
                open_one(src)
        time.sleep(1.0)
        held = len(sel.get_map())
        rss1 = srv.rss_kib()
        # (1) one shot: until the server closed them all
        while sel.get_map() and time.monotonic() - t0 < 120:
            reap(0.5)
        closed_s = time.monotonic() - t0
        print("one shot: %d connections held RSS +%.1f MiB (%.1f KiB each); all closed by the "
              "server %.1f s after they were opened" % (
                  held, (rss1 - rss0) / 1024, (rss1 - rss0) / max(held, 1), closed_s))
        # (2) reconnecting at once
        for src in ADDRS:
            for _ in range(PER_ADDR):
                open_one(src)
        t1 = time.monotonic()
        samples, rsss, next_sample, opened = [], [], t1 + 0.5, 0
        while time.monotonic() - t1 < secs:
            for src in reap(0.05):
                opened += open_one(src)
            if time.monotonic() >= next_sample:
                next_sample += 0.5
                samples.append(len(sel.get_map()))
                rsss.append(srv.rss_kib())
        # the connections the server holds: ours open and not yet seen closed
        thr = counter(srv, "kvtier_tls_throttled_total") - thr0
        to = counter(srv, "kvtier_tls_handshake_timeouts_total") - to0
        print("reconnecting for %.0f s: connections held mean %.0f, min %d; RSS mean +%.1f MiB, "
              "min +%.1f MiB; %d reconnections; tls_throttled %d, handshake timeouts %d" % (
                  secs, sum(samples) / len(samples), min(samples),
                  (sum(rsss) / len(rsss) - rss0) / 1024, (min(rsss) - rss0) / 1024, opened,
                  thr, to))
        for key in list(sel.get_map().values()):
            key.fileobj.close()
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
