#!/usr/bin/env python3
"""s3_put_rate.py - small PutObjects a second on kvtierd's S3 listener:
what a PUT costs the server apart from its bytes (the path a write takes
through s3d.c and s3ops.c, e.g. the bucket gate of s3ops.c "DeleteBucket
against the bucket's writes").

Usage:
  python3 bench/s3_put_rate.py KVTIERD [--conns 4] [--puts 20000] [--size 16]
                              [--rounds 5] [--dir DIR] [--json]

kvtierd is started here (DRAM only, no --tenants: loopback, no
signatures -- their HMACs would be most of a PUT's cost), with one
bucket.  Each round sends --puts PUTs of --size bytes, pipelined (made
before the clock starts), on each of --conns connections at once, one
thread a connection, and reads their answers; the round's rate is all
the PUTs over the time until the last answer, and the server's CPU time
(user + system, /proc/PID/stat) over the PUTs: a machine shared with
other work moves the rate a lot, the CPU time a PUT costs much less.
Reports the medians of the rounds' rates and CPU us a PUT (and each),
never judged.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from respd_bench import cpu_s


def s3_server(kvtierd, d, opts):
    """kvtierd on DIR/data with opts (--dram, --ssd), an S3 listener on a
    free port, logging to DIR/kvtierd.log: (process, S3 port) once it
    listens.  s3_list.py's too."""
    log = os.path.join(d, "kvtierd.log")
    p = subprocess.Popen([kvtierd, "--dir", os.path.join(d, "data")] + opts +
                         ["--set", "dram.prefault=off", "--listen", "127.0.0.1:0",
                          "--s3", "127.0.0.1:0", "--log", log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1200):
        if os.path.exists(log):
            m = re.search(r"S3 listener on 127\.0\.0\.1:(\d+)", open(log).read())
            if m:
                return p, int(m.group(1))
        if p.poll() is not None:
            sys.exit("kvtierd exited: see " + log)
        time.sleep(0.05)
    p.kill()
    sys.exit("kvtierd did not start")


def one(port, msg):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(msg)
    out = s.recv(65536)
    s.close()
    return out


def conn_round(port, msgs, n, errors):
    s = socket.create_connection(("127.0.0.1", port))
    feeder = threading.Thread(target=s.sendall, args=(msgs,))
    feeder.start()
    got, buf = 0, b""
    while got < n:
        b = s.recv(1 << 20)
        if not b:
            break
        buf += b
        got += buf.count(b"HTTP/1.1 ")
        errors[0] += buf.count(b"HTTP/1.1 ") - buf.count(b"HTTP/1.1 200")
        buf = buf[buf.rfind(b"HTTP/1.1 ") + 1:] if b"HTTP/1.1 " in buf else buf
    feeder.join()
    s.close()
    if got < n:
        errors[0] += n - got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvtierd")
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--puts", type=int, default=20000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    d = tempfile.mkdtemp(dir=a.dir)
    p, port = s3_server(a.kvtierd, d, ["--dram", "1G", "--ssd", "0"])
    rates, cpus = [], []
    try:
        assert b" 200 " in one(port, b"PUT /rate HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 0\r\n\r\n").split(b"\r\n")[0] + b" "
        body = b"v" * a.size
        for r in range(a.rounds):
            msgs = [b"".join(b"PUT /rate/r%dc%dk%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                             b"\r\n\r\n%s" % (r, c, i, a.size, body) for i in range(a.puts))
                    for c in range(a.conns)]
            errors = [0]
            th = [threading.Thread(target=conn_round, args=(port, m, a.puts, errors))
                  for m in msgs]
            c0, t0 = cpu_s(p.pid), time.monotonic()
            for t in th:
                t.start()
            for t in th:
                t.join()
            dt, dc = time.monotonic() - t0, cpu_s(p.pid) - c0
            if errors[0]:
                sys.exit("round %d: %d PUTs not answered 200" % (r, errors[0]))
            rates.append(a.conns * a.puts / dt)
            cpus.append(dc * 1e6 / (a.conns * a.puts))
    finally:
        p.terminate()
        p.wait(60)
    med, cpu = statistics.median(rates), statistics.median(cpus)
    if a.json:
        print(json.dumps({"bench": "s3_put_rate", "conns": a.conns, "puts": a.puts,
                          "size": a.size, "rounds": a.rounds, "puts_per_s": round(med),
                          "each": [round(x) for x in rates], "cpu_us_per_put": round(cpu, 2),
                          "cpu_each": [round(x, 2) for x in cpus]}))
    else:
        print("%d PUTs of %d B on each of %d connections, %d rounds: median %.0f PUTs/s "
              "(each %s), server CPU %.2f us a PUT (each %s)" % (
                  a.puts, a.size, a.conns, a.rounds, med, " ".join("%.0f" % x for x in rates),
                  cpu, " ".join("%.2f" % x for x in cpus)))


if __name__ == "__main__":
    main()
