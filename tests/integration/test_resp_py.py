#!/usr/bin/env python3
"""test_resp_py.py - kvtierd's RESP listener driven by redis-py (PyPI,
pinned), the client LMCache's redis:// backend uses (doc/resp.md).

Usage: test_resp_py.py PATH-TO-KVTIERD BUILD-DIR.  Installs redis==5.0.8
into a venv under BUILD-DIR (once) and exits 77 only when a separate probe
cannot reach the package index (tests/lib/pipvenv.py); a bad pin fails.  Starts a real kvtierd on 127.0.0.1 port 0 with --resp and
checks values byte for byte: binary with CRLF inside, 16 MiB, LMCache-
style keys longer than 64 bytes, pipelines, expiry, AUTH with tenants.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pipvenv  # noqa: E402

REDIS_PY = "redis==5.0.8"


def venv_python(build):
    venv = os.path.join(build, "venv-resp")
    py = os.path.join(venv, "bin", "python3")
    if os.path.exists(os.path.join(venv, ".ok")):
        return py
    shutil.rmtree(venv, ignore_errors=True)
    # No pip in it: uv installs from outside (tests/lib/pipvenv.py).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    # Skips (77) only when a separate probe cannot reach the package index;
    # a bad pin fails with pip's log (tests/lib/pipvenv.py).
    pipvenv.install(py, [REDIS_PY], timeout=20)
    open(os.path.join(venv, ".ok"), "w").close()
    return py


def start(kvtierd, base, name, extra):
    d = os.path.join(base, name)
    os.mkdir(d)
    log = os.path.join(base, name + ".log")
    p = subprocess.Popen([kvtierd, "--dir", d, "--dram", "128M", "--ssd", "0",
                          "--set", "dram.prefault=off", "--listen", "127.0.0.1:0",
                          "--resp", "127.0.0.1:0", "--threads", "2", "--log", log] + extra,
                         stdout=subprocess.DEVNULL, stderr=open(log + ".stderr", "w"))
    for _ in range(600):
        if os.path.exists(log):
            m = re.search(r"RESP listener on 127\.0\.0\.1:(\d+)", open(log).read())
            if m:
                return p, int(m.group(1)), log
        if p.poll() is not None:
            raise SystemExit("kvtierd exited: see " + log)
        time.sleep(0.05)
    raise SystemExit("kvtierd did not start")


def stop(p, log):
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 0, "kvtierd exit status"
    err = open(log + ".stderr").read()
    assert "Sanitizer" not in err and "runtime error" not in err, err


CLIENT = r'''
import os, sys, time, redis
port, mode = int(sys.argv[1]), sys.argv[2]
if mode == "open":
    r = redis.Redis(host="127.0.0.1", port=port)
    assert r.ping()
    v = bytes(range(256)) * 17 + b"\r\n\x00$3\r\n"
    assert r.set("bin", v)
    assert r.get("bin") == v
    key = "vllm@meta-llama/Llama-3.1-8B@1@0@" + "ab" * 32 + "@bfloat16"
    assert len(key) > 64
    big = os.urandom(16 << 20)
    assert r.set(key, big)
    got = r.get(key)
    assert got == big, (len(got or b""), len(big))
    assert r.get(key[:-1]) is None
    assert r.exists(key, "bin", "nope") == 2
    assert r.mset({"a": b"1", "b": b"2"})
    assert r.mget(["a", "zz", "b"]) == [b"1", None, b"2"]
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set("p%d" % i, b"v%d" % i)
        p.get("p%d" % i)
    out = p.execute()
    for i in range(200):
        assert out[2 * i] is True and out[2 * i + 1] == b"v%d" % i
    # PX 300: the key is there before its 300 ms are up, gone after.  A
    # get that came 200 ms or more after its set (a stall of this process
    # on a loaded machine) says nothing: that set and get are done again
    # (at most 5 times), the verdict is on a pair that did fit.
    for _ in range(5):
        t0 = time.monotonic()
        assert r.set("e", b"x", px=300)
        got = r.get("e")
        took = time.monotonic() - t0
        if took < 0.2:
            break
    assert took < 0.2, f"set and get of a PX 300 key took {took * 1e3:.0f} ms, 5 times"
    assert got == b"x"
    time.sleep(0.5)
    assert r.get("e") is None
    assert r.set("n", b"1", nx=True) and r.set("n", b"2", nx=True) is None
    assert r.delete("a", "b", "zz") == 2
    info = r.info()
    assert info["redis_version"] and "kvtier_dram_capacity_bytes" in info
    assert r.dbsize() >= 3
    assert r.flushdb()
    assert r.dbsize() == 0
    try:
        r.execute_command("STRLEN", "x")
        raise AssertionError("STRLEN answered")
    except redis.ResponseError as e:
        assert "unknown command" in str(e)
else:
    try:
        redis.Redis(host="127.0.0.1", port=port).get("k")
        raise AssertionError("no NOAUTH")
    except redis.AuthenticationError:
        pass
    a = redis.Redis(host="127.0.0.1", port=port, username="alice", password="secret-of-alice-0123")
    b = redis.Redis.from_url("redis://bob:secret-of-bob-0123456@127.0.0.1:%d" % port)
    assert a.set("k", b"alice")
    assert b.get("k") is None
    assert b.set("k", b"bob") and a.get("k") == b"alice" and b.get("k") == b"bob"
    try:
        redis.Redis(host="127.0.0.1", port=port, username="alice", password="wrong-secret-0000").ping()
        raise AssertionError("wrong secret accepted")
    except redis.AuthenticationError:
        pass
print("redis-py " + redis.__version__ + " " + mode + ": ok")
'''


def main():
    if len(sys.argv) < 3:
        print("SKIP: usage: test_resp_py.py KVTIERD BUILD-DIR")
        return 77
    kvtierd, build = sys.argv[1], sys.argv[2]
    py = venv_python(build)
    base = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    client = os.path.join(base, "client.py")
    open(client, "w").write(CLIENT)
    p, port, log = start(kvtierd, base, "open", [])
    try:
        subprocess.run([py, client, str(port), "open"], check=True, timeout=240)
    finally:
        stop(p, log)
    tenants = os.path.join(base, "tenants")
    with open(tenants, "w") as f:
        f.write("alice secret-of-alice-0123 tenant\nbob secret-of-bob-0123456 tenant\n")
    os.chmod(tenants, 0o600)
    p, port, log = start(kvtierd, base, "auth", ["--tenants", tenants])
    try:
        subprocess.run([py, client, str(port), "auth"], check=True, timeout=120)
    finally:
        stop(p, log)
    shutil.rmtree(base)
    print("test_resp_py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
