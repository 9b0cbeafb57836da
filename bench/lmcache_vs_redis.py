#!/usr/bin/env python3
"""lmcache_vs_redis.py - LMCache's put/get throughput with kvtierd as its
remote backend versus redis-server, in one run (doc/resp.md "LMCache").

Usage: bench/lmcache_vs_redis.py KVTIERD [CHUNKS] [ROUNDS]
Run with the python of a venv that has lmcache==0.5.6 (scripts/test-lmcache
makes one), e.g.
  /var/tmp/lmcache-venv/bin/python bench/lmcache_vs_redis.py build-release/daemon/kvtierd

Starts kvtierd (--resp, 2 GiB DRAM prefaulted, no SSD tier: the same
in-memory job as Redis; 2 loop threads) and redis-server twice
(persistence off: --save '' --appendonly no): as configured by default
(1 thread) and with --io-threads 2 --io-threads-do-reads yes (2 threads,
as many as kvtierd's loops), on free loopback ports.  The servers' order
rotates from round to round (round r starts with server r mod 3), so no
server always runs first.  Each round, for each server and
each of LMCache's two Redis connectors (redis:// = RedisConnector over
redis-py, RESP3 with redis-py 8; resp:// = RESPConnector, LMCache's native
client), a fresh process (python/tests/lmcache_kv.py bench) builds
LMCache's engine and times CHUNKS 256-token chunks of Llama-3.2-1B KV
(8 MiB each) put through the connector's batched_put, then got back
through the RemoteBackend's batched_get_blocking, bytes checked.  New keys
every run, on a server emptied by FLUSHALL first.  Prints MB/s per row
(median over the rounds, and every round), each row with its server's
threads, and kvtierd's ratio to the faster redis-server per URL.
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "python", "tests", "lmcache_kv.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_kvtierd(binary, base):
    d = os.path.join(base, "kvtierd")
    os.mkdir(d)
    log = os.path.join(base, "kvtierd.log")
    # dram.prefault as by default (on): the tier's pages are touched at
    # start, not during the first puts.
    p = subprocess.Popen([binary, "--dir", d, "--dram", "2G", "--ssd", "0",
                          "--listen", "127.0.0.1:0",
                          "--resp", "127.0.0.1:0", "--threads", "2", "--log", log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        if os.path.exists(log):
            m = re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(log).read())
            if m:
                return p, int(m.group(1))
        if p.poll() is not None:
            raise SystemExit("kvtierd exited: see " + log)
        time.sleep(0.05)
    raise SystemExit("kvtierd did not start")


def start_redis(base, io_threads=1):
    port = free_port()
    extra = (["--io-threads", str(io_threads), "--io-threads-do-reads", "yes"]
             if io_threads > 1 else [])
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--dir", base,
                          "--protected-mode", "no"] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def flushall(port):
    """Each run starts on an empty server: kvtierd is a cache, and a DRAM
    tier filled by earlier rounds would evict this run's chunks before
    they are read back (and LMCache's resp:// client waits out its
    10-second blocking_timeout_secs on a GET that finds nothing)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"FLUSHALL\r\n")
    assert s.recv(64) == b"+OK\r\n"
    s.close()


def run(url, seed, chunks):
    env = dict(os.environ, PYTHONHASHSEED="0")
    r = subprocess.run([sys.executable, WORKER, url, "bench", str(seed), str(chunks)],
                       capture_output=True, text=True, timeout=900, env=env)
    m = re.search(r"^RESULT (.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise SystemExit("%s failed:\n%s" % (url, r.stderr[-4000:]))
    out = json.loads(m.group(1))
    if not out["equal"] or out["put_failed"]:
        raise SystemExit("%s: bytes differ or puts failed: %s" % (url, out))
    return out


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    kvtierd = sys.argv[1]
    chunks = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    if not shutil.which("redis-server"):
        raise SystemExit("redis-server not found")
    base = tempfile.mkdtemp(prefix="lmcache-bench-")
    kp, kport = start_kvtierd(kvtierd, base)
    rp, rport = start_redis(base)
    rp2, rport2 = start_redis(base, io_threads=2)
    ver = subprocess.run(["redis-server", "--version"], capture_output=True,
                         text=True).stdout.split()[2]
    rows = {}
    servers = [("kvtierd", kport), ("redis-server", rport), ("redis-server-io2", rport2)]
    threads = {"kvtierd": 2, "redis-server": 1, "redis-server-io2": 2}
    try:
        seed = 100
        for rnd in range(rounds):
            order = servers[rnd % len(servers):] + servers[:rnd % len(servers)]
            for server, port in order:
                for scheme in ("redis", "resp"):
                    seed += 1
                    flushall(port)
                    o = run("%s://127.0.0.1:%d" % (scheme, port), seed, chunks)
                    mb = o["bytes"] / 1e6
                    rows.setdefault((server, scheme), []).append(
                        (mb / o["put_s"], mb / o["get_s"]))
                    print("round %d %-16s %-8s put %7.0f MB/s  get %7.0f MB/s" % (
                        rnd, server, scheme + "://", mb / o["put_s"], mb / o["get_s"]),
                        flush=True)
    finally:
        for p in (kp, rp, rp2):
            p.send_signal(signal.SIGTERM)
            p.wait(60)
        shutil.rmtree(base, ignore_errors=True)
    print("\n%d chunks of 8 MiB (Llama-3.2-1B KV, 256 tokens, bf16) per run, %d rounds; "
          "redis-server %s; loadavg %s" % (chunks, rounds, ver, os.getloadavg()))
    print("server order rotated each round: %s" % ", ".join(
        "/".join(s for s, _ in (servers[r % 3:] + servers[:r % 3])) for r in range(rounds)))
    print("| server | threads | LMCache URL | put MB/s (median) | get MB/s (median) | "
          "each round put/get |")
    print("| --- | --- | --- | --- | --- | --- |")
    med = {}
    for (server, scheme), v in sorted(rows.items()):
        med[(server, scheme)] = (statistics.median(x[0] for x in v),
                                 statistics.median(x[1] for x in v))
        print("| %s | %d | `%s://` | %.0f | %.0f | %s |" % (
            server, threads[server], scheme, med[(server, scheme)][0],
            med[(server, scheme)][1], ", ".join("%.0f/%.0f" % x for x in v)))
    # kvtierd against the faster redis-server, per URL and op.
    for scheme in ("redis", "resp"):
        for i, op in enumerate(("put", "get")):
            best = max(("redis-server", "redis-server-io2"), key=lambda s: med[(s, scheme)][i])
            print("kvtierd/%s %s:// %s: %.2f (against %s, %d thread(s))" % (
                best, scheme, op, med[("kvtierd", scheme)][i] / med[(best, scheme)][i], best,
                threads[best]))


if __name__ == "__main__":
    main()
