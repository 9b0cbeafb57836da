"""test_lmcache.py - LMCache (0.5.6) with kvtierd as its remote backend,
through the Redis protocol (doc/resp.md, "LMCache").  Opt-in: run by
scripts/test-lmcache, which makes the venv with lmcache and sets KVTIERD
and PYTHONHASHSEED; anywhere without the lmcache package (run.py's venv)
every test here is skipped.

For each of LMCache's two Redis connectors (redis:// RedisConnector over
redis-py, resp:// RESPConnector over LMCache's native client) a real
kvtierd with --resp and an SSD tier is started, and LMCache's own engine
(lmcache_kv.py: LMCacheEngineBuilder, LocalCPUBackend, RemoteBackend; a
CPU "GPU connector") runs in separate processes behind a recording proxy:
  1. process A stores 1,100 tokens of Llama-3.2-1B-shaped KV (four full
     256-token chunks of 8 MiB; the 76-token tail is not stored, as
     LMCache's save_unfull_chunk=False says);
  2. process B, a fresh engine with an empty local cache, retrieves them
     from kvtierd: 1,024 tokens, bytes equal to A's; a sequence nobody
     stored is a clean miss (nothing written into the KV cache);
  3. kvtierd's /metrics counted exactly the commands the proxy saw, none
     answered with an error, and the blocks and bytes arrived;
  4. kvtierd restarts on the same directory; process C gets the same
     bytes, now from the SSD tier.
"""
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter

import pytest

if importlib.util.find_spec("lmcache") is None:
    pytest.skip("lmcache is not installed here (scripts/test-lmcache runs this)",
                allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "lmcache_kv.py")
TOKENS = 1100
CHUNK_BYTES = 256 * 2 * 16 * 8 * 64 * 2
# What kvtierd serves (doc/resp.md "Commands"); LMCache must use no other.
SERVED = {"GET", "SET", "MGET", "MSET", "EXISTS", "DEL", "UNLINK", "PING", "ECHO", "QUIT",
          "INFO", "DBSIZE", "FLUSHDB", "FLUSHALL", "AUTH", "HELLO", "COMMAND", "CONFIG",
          "SELECT", "CLIENT SETINFO", "CLIENT SETNAME"}


class RecordingProxy:
    """A TCP proxy that parses the client's RESP requests and counts the
    command names (with CLIENT's subcommand), passing every byte on."""

    def __init__(self, port):
        self.target = port
        self.commands = Counter()
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._up, args=(c, s), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(1 << 20)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _up(self, c, s):
        buf = bytearray()
        try:
            while True:
                d = c.recv(1 << 20)
                if not d:
                    break
                s.sendall(d)
                buf += d
                buf = self._parse(buf)
        except OSError:
            pass
        for x in (c, s):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _parse(self, buf):
        """Counts the complete commands at the front of buf; returns the rest."""
        pos = 0
        while True:
            if not buf.startswith(b"*", pos):
                if pos < len(buf):
                    # Clients of LMCache send arrays only; an inline command
                    # would be a finding of its own.
                    e = buf.find(b"\r\n", pos)
                    if e < 0:
                        return buf[pos:]
                    self._count(["INLINE:" + bytes(buf[pos:e]).split(b" ")[0].decode()])
                    pos = e + 2
                    continue
                return buf[pos:]
            e = buf.find(b"\r\n", pos)
            if e < 0:
                return buf[pos:]
            n = int(buf[pos + 1:e])
            p, args = e + 2, []
            for _ in range(n):
                e2 = buf.find(b"\r\n", p)
                if e2 < 0:
                    return buf[pos:]
                ln = int(buf[p + 1:e2])
                if e2 + 2 + ln + 2 > len(buf):
                    return buf[pos:]
                if len(args) < 2:
                    args.append(bytes(buf[e2 + 2:e2 + 2 + min(ln, 64)]).decode("latin-1"))
                p = e2 + 2 + ln + 2
            self._count(args)
            pos = p

    def _count(self, args):
        name = args[0].upper() if args else "?"
        if name in ("CLIENT", "CONFIG", "COMMAND") and len(args) > 1:
            name += " " + args[1].upper()
        with self.lock:
            self.commands[name] += 1

    def close(self):
        self.sock.close()


class Kvtierd:
    def __init__(self, binary, base):
        self.binary, self.base = binary, base
        self.dir = os.path.join(base, "store")
        os.makedirs(self.dir, exist_ok=True)
        self.n = 0
        self.start()

    def start(self):
        self.n += 1
        self.log = os.path.join(self.base, "kvtierd.%d.log" % self.n)
        # SSD admission "always": every block is written down at once, so a
        # restart finds them (the default writes a block on its second use).
        self.p = subprocess.Popen(
            [self.binary, "--dir", self.dir, "--dram", "256M", "--ssd", "512M",
             "--set", "ssd.segment=64M", "--set", "dram.prefault=off",
             "--set", "ssd.admission=always",
             "--listen", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
             "--threads", "2", "--log", self.log],
            stdout=subprocess.DEVNULL, stderr=open(self.log + ".stderr", "w"))
        for _ in range(1200):
            if os.path.exists(self.log):
                t = open(self.log).read()
                r = re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", t)
                m = re.search(r"metrics listener on 127\.0\.0\.1:(\d+)", t)
                if r and m:
                    self.resp, self.metrics_port = int(r.group(1)), int(m.group(1))
                    return
            if self.p.poll() is not None:
                raise AssertionError("kvtierd exited: " + open(self.log + ".stderr").read())
            time.sleep(0.05)
        raise AssertionError("kvtierd did not start")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        assert self.p.wait(60) == 0, "kvtierd exit status"
        err = open(self.log + ".stderr").read()
        assert "Sanitizer" not in err and "runtime error" not in err, err

    def metrics(self):
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                      timeout=10).read().decode()
        out = {}
        for line in body.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


def lmcache(url, mode, seed):
    env = dict(os.environ, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    r = subprocess.run([sys.executable, WORKER, url, mode, str(seed), str(TOKENS)],
                       capture_output=True, text=True, timeout=600, env=env)
    m = re.search(r"^RESULT (.*)$", r.stdout, re.M)
    assert r.returncode == 0 and m, "lmcache_kv.py %s %s:\n%s\n%s" % (
        url, mode, r.stdout[-3000:], r.stderr[-6000:])
    return json.loads(m.group(1))


@pytest.fixture
def server(tmp_path):
    binary = os.environ.get("KVTIERD")
    if not binary:
        pytest.skip("KVTIERD names no kvtierd binary")
    k = Kvtierd(binary, str(tmp_path))
    yield k
    if k.p.poll() is None:
        k.stop()


@pytest.mark.parametrize("scheme,connector", [("redis", "RedisConnector"),
                                              ("resp", "RESPConnector")])
def test_lmcache_remote_backend(server, scheme, connector):
    proxy = RecordingProxy(server.resp)
    # The plain URL: redis-py 8 (what pip gives lmcache 0.5.6, which does
    # not pin it) then opens each connection with HELLO 3.
    url = "%s://127.0.0.1:%d" % (scheme, proxy.port)
    before = server.metrics()

    stored = lmcache(url, "store", 7)
    assert stored["connector"] == connector
    assert stored["chunks"] == 4 and stored["remote_contains"] == 4 and stored["put_failed"] == 0
    # LMCache's keys: model@world_size@worker@chunk hash@dtype, longer
    # than 63 bytes: kvtierd keys them by their SHA-256 (doc/resp.md).
    for k in stored["keys"]:
        assert re.fullmatch(r"meta-llama/Llama-3\.2-1B-Instruct@1@0@-?[0-9a-f]+@bfloat16", k), k

    got = lmcache(url, "retrieve", 7)
    assert got["connector"] == connector
    assert got["local_before"] == 0          # a fresh process: all from kvtierd
    assert got["hit_tokens"] == 1024 and got["equal"] and got["tail_untouched"]
    assert got["digest"] == stored["digest"]
    assert got["miss_hit_tokens"] == 0 and got["miss_untouched"]
    assert got["direct_get_of_absent_key"] == "None"

    after = server.metrics()
    with proxy.lock:
        seen = dict(proxy.commands)
    print("\n%s:// commands kvtierd received from LMCache: %s" % (scheme, seen))
    # redis-py 8 opens each connection with HELLO 3, CLIENT SETINFO
    # LIB-NAME and LIB-VER (served), and CLIENT MAINT_NOTIFICATIONS ON (Redis
    # Enterprise's maintenance push messages; redis-server 7 refuses it too,
    # and redis-py, in its default "auto" mode, goes on without them).
    unserved = set(seen) - SERVED
    assert unserved <= {"CLIENT MAINT_NOTIFICATIONS"}, unserved
    errors = after["kvtier_resp_error_replies_total"] - before["kvtier_resp_error_replies_total"]
    assert errors == seen.get("CLIENT MAINT_NOTIFICATIONS", 0), seen
    assert after["kvtier_resp_commands_total"] - before["kvtier_resp_commands_total"] == \
        sum(seen.values()), (seen, after["kvtier_resp_commands_total"])
    assert seen.get("SET", 0) >= 4 and seen.get("GET", 0) >= 4 and seen.get("EXISTS", 0) >= 4
    # The bytes arrived: four chunks (plus, for redis://, four metadata
    # values of 28 bytes), each with kvtier's 16-byte header and its key.
    blocks = 8 if scheme == "redis" else 4
    assert after["kvtier_dram_blocks"] - before["kvtier_dram_blocks"] == blocks
    put = after["kvtier_dram_bytes_in_total"] - before["kvtier_dram_bytes_in_total"]
    assert 4 * CHUNK_BYTES <= put <= 4 * CHUNK_BYTES + blocks * 200, put
    out = after["kvtier_dram_bytes_out_total"] - before["kvtier_dram_bytes_out_total"]
    assert out >= 4 * CHUNK_BYTES, out

    # Restart on the same directory: the blocks come back from SSD.
    deadline = time.monotonic() + 60
    while server.metrics()["kvtier_ssd_blocks"] < blocks:
        assert time.monotonic() < deadline, "blocks not written down to SSD"
        time.sleep(0.1)
    proxy.close()
    server.stop()
    server.start()
    url = "%s://127.0.0.1:%d" % (scheme, server.resp)
    again = lmcache(url, "retrieve", 7)
    assert again["hit_tokens"] == 1024 and again["equal"] and again["digest"] == stored["digest"]
    m = server.metrics()
    assert m["kvtier_ssd_hits_total"] >= 4, m["kvtier_ssd_hits_total"]


def test_redis_py_resp3_and_resp2(server):
    """redis-py >= 8 opens every connection with HELLO 3 (before kvtierd
    served it, that got -NOPROTO, which redis-py raises: LMCache's
    RedisConnector logged "Remote connection failed" on every lookup and
    never hit).  Both protocols work, a miss is None in both."""
    import redis
    for url in ("redis://127.0.0.1:%d", "redis://127.0.0.1:%d?protocol=2",
                "redis://127.0.0.1:%d?protocol=3"):
        r = redis.Redis.from_url(url % server.resp)
        assert r.ping() and r.set("k", b"v") and r.get("k") == b"v"
        assert r.get("absent") is None and r.set("k", b"w", nx=True) is None
        assert r.mget(["k", "absent"]) == [b"v", None]
        assert r.exists("k", "absent") == 1
        assert r.info()["redis_version"]
        r.close()
