#!/usr/bin/env python3
"""nixl_obj.py - NIXL's OBJ plugin through kvtierd's S3 listener against
NIXL's own POSIX plugin on local files: the same DRAM buffers, the same
bytes, one process, interleaved rounds (issue 22's NIXL ratio).

Usage:
  VENV/bin/python bench/nixl_obj.py --kvtierd build-release/daemon/kvtierd \\
      [--dir DIR] [--sizes 2M,16M] [--total 256M] [--rounds 3] [--smoke] [--json]

VENV holds nixl-cu12==1.5.1 and numpy (test_s3_py.py makes one:
BUILD/tests/venv-nixl).  NIXL needs no GPU for either plugin.

  obj    kvtierd started here (DRAM, SSD under DIR, no --tenants: loopback,
         signatures not checked), bucket "bench" made with a plain PUT; one
         NIXL WRITE of N DRAM buffers to N objects (each a PutObject), then
         one READ of them into other buffers (GetObject with Range); objects
         deleted between rounds (untimed).
  posix  the same buffers written to and read from N files under DIR by the
         POSIX plugin (buffered I/O: the page cache, as kvtierd's DRAM).

Each round runs both (order flipped every round); medians over --rounds;
every byte read is compared with what was written.  GB/s counts value
bytes.  The ratio obj/posix is reported, never judged.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
from nixl_cu12._api import nixl_agent, nixl_agent_config


def size_arg(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError("bad size " + s)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def start_kvtierd(kvtierd, d):
    log = os.path.join(d, "kvtierd.log")
    p = subprocess.Popen([kvtierd, "--dir", os.path.join(d, "data"), "--dram", "1G", "--ssd", "2G",
                          "--set", "ssd.segment=32M", "--set", "dram.prefault=off",
                          "--listen", "127.0.0.1:0", "--s3", "127.0.0.1:0", "--log", log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(log):
            m = re.search(r"S3 listener on 127\.0\.0\.1:(\d+)", open(log).read())
            if m:
                return p, int(m.group(1))
        if p.poll() is not None:
            sys.exit("kvtierd exited: see " + log)
        time.sleep(0.05)
    p.kill()
    sys.exit("kvtierd did not start: see " + log)


def http(port, method, path):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method, data=b"")
    with urllib.request.urlopen(req) as r:
        return r.status


def run(agent, op, local, remote):
    t = time.perf_counter()
    h = agent.initialize_xfer(op, local, remote, agent.name)
    st = agent.transfer(h)
    while st not in ("DONE", "ERR"):
        st = agent.check_xfer_state(h)
    agent.release_xfer_handle(h)
    if st != "DONE":
        sys.exit("NIXL %s failed" % op)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvtierd", required=True)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--sizes", default="2M,16M")
    ap.add_argument("--total", default="256M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sizes = [size_arg(s) for s in a.sizes.split(",")]
    total, rounds = size_arg(a.total), a.rounds
    if a.smoke:
        sizes, total, rounds = [256 << 10], 4 << 20, 1
    d = os.path.abspath(tempfile.mkdtemp(prefix="nixl_obj.", dir=a.dir))
    srv, port = start_kvtierd(a.kvtierd, d)
    try:
        http(port, "PUT", "/bench")
        agent = nixl_agent("kvtier-bench", nixl_agent_config(backends=[]))
        agent.create_backend("OBJ", {"access_key": "default", "secret_key": "unused-0123456789",
                                     "bucket": "bench",
                                     "endpoint_override": "http://127.0.0.1:%d" % port,
                                     "scheme": "http", "region": "us-east-1",
                                     "req_checksum": "required", "resp_checksum": "required"})
        agent.create_backend("POSIX", {})
        rng = np.random.default_rng(22)
        rows = []
        for size in sizes:
            n = max(1, total // size)
            src = [rng.integers(0, 256, size, dtype=np.uint8) for _ in range(n)]
            dst = [np.zeros(size, dtype=np.uint8) for _ in range(n)]
            agent.register_memory([(b.ctypes.data, size, 0, "") for b in src + dst], "DRAM")
            sd = agent.get_xfer_descs([(b.ctypes.data, size, 0) for b in src], "DRAM")
            dd = agent.get_xfer_descs([(b.ctypes.data, size, 0) for b in dst], "DRAM")
            fds = [os.open(os.path.join(d, "posix-%d-%d" % (size, i)), os.O_RDWR | os.O_CREAT,
                           0o600) for i in range(n)]
            agent.register_memory([(0, size, fd, "") for fd in fds], "FILE")
            fdesc = agent.get_xfer_descs([(0, size, fd) for fd in fds], "FILE")
            t = {(k, op): [] for k in ("obj", "posix") for op in ("put", "get")}
            for r in range(rounds):
                keys = ["r%d/s%d/blk-%05d" % (r, size, i) for i in range(n)]
                # OBJ device ids are the registration's; metaInfo is the key
                base = 1000000 * (r + 1)
                agent.register_memory([(0, size, base + i, keys[i]) for i in range(n)], "OBJ")
                odesc = agent.get_xfer_descs([(0, size, base + i) for i in range(n)], "OBJ")
                for kind in (("obj", "posix") if r % 2 == 0 else ("posix", "obj")):
                    remote = odesc if kind == "obj" else fdesc
                    t[(kind, "put")].append(run(agent, "WRITE", sd, remote))
                    for b in dst:
                        b[:] = 0
                    t[(kind, "get")].append(run(agent, "READ", dd, remote))
                    for i in range(n):
                        if not np.array_equal(src[i], dst[i]):
                            sys.exit("%s: block %d read back wrong" % (kind, i))
                for k in keys:
                    http(port, "DELETE", "/bench/" + k)
            for fd in fds:
                os.close(fd)
            for op in ("put", "get"):
                g = {k: n * size / statistics.median(t[(k, op)]) / 1e9 for k in ("obj", "posix")}
                rows.append({"bench": "nixl_obj", "op": op, "value_bytes": size, "blocks": n,
                             "rounds": rounds, "gbps": round(g["obj"], 3),
                             "baseline": "nixl_posix", "baseline_gbps": round(g["posix"], 3),
                             "ratio": round(g["obj"] / g["posix"], 3), "smoke": a.smoke})
        for row in rows:
            if a.json:
                print(json.dumps(row, separators=(",", ":")))
            else:
                print("nixl %s %8dK x%-5d obj %7.3f GB/s  posix %7.3f GB/s  obj/posix %.2f" % (
                    row["op"], row["value_bytes"] >> 10, row["blocks"], row["gbps"],
                    row["baseline_gbps"], row["ratio"]))
    finally:
        srv.terminate()
        srv.wait(60)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
