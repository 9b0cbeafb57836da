#!/usr/bin/env python3
"""idle_conn_mem.py KVTIERD [N] - RSS that each idle connection adds to a
kvtierd (doc/security.md "Session 35 review").  For each kind of
connection a fresh kvtierd (--tenants, --resp, --s3, --threads 1,
--dram 64M, --max-memory 32M) has its DRAM tier filled first (100 MB of
RESP SETs through it, so that the tier's pages are not counted), then N
connections (1,000 by default; from 127.0.2.1 on, 250 an address) are
made and left idle; the RSS 1 s later against before, per connection:

  resp_unauth   RESP, connected, nothing sent
  native_unauth native, connected, nothing sent
  resp_auth     RESP, after AUTH
  resp_big      RESP, after AUTH, a SET and a GET of 200 KB
  s3_big        S3, after a signed PUT and GET of 200 KB (N/3)

Python's standard library only (the SigV4 signer of
tests/integration/test_hostile_http.py)."""
import os, re, shutil, signal, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as H  # noqa: E402

ALICE = ("alice", "secret-of-alice-0123")
H.ALICE = ALICE
VAL = b"x" * 200000


def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)


def start(kvtierd, d):
    t = os.path.join(d, "tenants")
    with open(t, "w") as f:
        f.write("alice %s tenant\n" % ALICE[1])
    os.chmod(t, 0o600)
    log = os.path.join(d, "log")
    p = subprocess.Popen([kvtierd, "--dir", os.path.join(d, "srv"), "--dram", "64M", "--ssd",
                          "0", "--set", "dram.prefault=off", "--listen", "127.0.0.1:0",
                          "--resp", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--tenants", t,
                          "--threads", "1", "--max-memory", "32M", "--log", log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        text = open(log).read() if os.path.exists(log) else ""
        ports = [re.search(r, text) for r in (r"listening on 127\.0\.0\.1:(\d+)",
                                              r"RESP listener on 127\.0\.0\.1:(\d+)",
                                              r"S3 listener on 127\.0\.0\.1:(\d+)")]
        if all(ports):
            return p, [int(m.group(1)) for m in ports]
        time.sleep(0.05)
    raise SystemExit("kvtierd did not start")


def rss(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS"):
            return int(line.split()[1])


def login(rp, src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", rp))
    s.sendall(cmd(b"AUTH", ALICE[0].encode(), ALICE[1].encode()))
    s.recv(100)
    return s


def one(kvtierd, mode, n):
    d = tempfile.mkdtemp()
    p, (np_, rp, sp) = start(kvtierd, d)
    try:
        f = login(rp, "127.0.0.1")
        for i in range(500):
            f.sendall(cmd(b"SET", b"fill%d" % (i % 16), VAL))
            f.recv(100)
        f.close()
        if mode == "s3_big":
            H.http(sp, H.signed_msg(sp, "PUT", "/membkt"))
        time.sleep(0.5)
        r0, socks = rss(p.pid), []
        for i in range(n):
            src = "127.0.%d.%d" % (2 + i // 250, 1 + i % 250)
            if mode in ("resp_unauth", "native_unauth"):
                s = socket.socket()
                s.bind((src, 0))
                s.connect(("127.0.0.1", rp if mode == "resp_unauth" else np_))
            elif mode == "resp_auth":
                s = login(rp, src)
            elif mode == "resp_big":
                s = login(rp, src)
                s.sendall(cmd(b"SET", b"k%d" % (i % 10), VAL))
                s.recv(100)
                s.sendall(cmd(b"GET", b"k%d" % (i % 10)))
                got = 0
                while got < len(VAL) + 11:
                    got += len(s.recv(1 << 20))
            else:
                s = socket.socket()
                s.bind((src, 0))
                s.connect(("127.0.0.1", sp))
                s.sendall(H.signed_msg(sp, "PUT", "/membkt/k%d" % (i % 10), body=VAL))
                assert H.read_answer(s)[0] == 200
                s.sendall(H.signed_msg(sp, "GET", "/membkt/k%d" % (i % 10)))
                assert H.read_answer(s)[2] == VAL
            socks.append(s)
        time.sleep(1.0)
        r1 = rss(p.pid)
        print("%-14s %5d connections: RSS %d -> %d KiB, %d B each" % (
            mode, n, r0, r1, (r1 - r0) * 1024 // n))
        for s in socks:
            s.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        shutil.rmtree(d, ignore_errors=True)


def main():
    kvtierd, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    for mode in ("resp_unauth", "native_unauth", "resp_auth", "resp_big", "s3_big"):
        one(kvtierd, mode, n // 3 if mode == "s3_big" else n)


if __name__ == "__main__":
    main()
