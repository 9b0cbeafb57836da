#!/usr/bin/env python3
"""s3_list.py - what a listing costs on kvtierd's S3 listener (doc/s3.md
"Listing": every object's header is read per page) against another S3
server listing the same keys with the same client (--peer, e.g.
SeaweedFS's gateway, as `kvtier bench s3 --peer`).

Usage:
  VENV/bin/python bench/s3_list.py --kvtierd build-release/daemon/kvtierd \\
      [--peer URL --peer-creds FILE] [--objects 10000] [--rounds 3] [--dir DIR] [--smoke] [--json]

VENV holds boto3 (test_s3_py.py makes BUILD/tests/venv-s3).  kvtierd is
started here (DRAM and SSD under DIR, no --tenants: loopback); the peer
needs a bucket "bench" (FILE: "ACCESS_KEY:SECRET_KEY"; its objects under
the prefix used here are deleted first and after).  --objects keys of 100
bytes under one prefix are put (16 threads, untimed), then each round
lists them all with the ListObjectsV2 paginator (1000 keys a page) on
kvtierd and on the peer, order flipped every round, and checks the names.
Reports keys/s (medians) and kvtierd/peer, never judged.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import boto3
from botocore.config import Config

from s3_put_rate import s3_server


def client(url, ak, sk):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
                        region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, max_pool_connections=16,
                                      retries={"max_attempts": 1}))


def list_all(c, prefix):
    keys = []
    for p in c.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=prefix):
        keys += [o["Key"] for o in p.get("Contents", [])]
    return keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvtierd", required=True)
    ap.add_argument("--peer")
    ap.add_argument("--peer-creds")
    ap.add_argument("--objects", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    n, rounds = (1500, 1) if a.smoke else (a.objects, a.rounds)
    d = os.path.abspath(tempfile.mkdtemp(prefix="s3_list.", dir=a.dir))
    srv, port = s3_server(a.kvtierd, d, ["--dram", "512M", "--ssd", "1G"])
    try:
        cs = {"kvtierd": client("http://127.0.0.1:%d" % port, "default", "unused-0123456789")}
        cs["kvtierd"].create_bucket(Bucket="bench")
        if a.peer:
            ak, sk = open(a.peer_creds).read().strip().split(":", 1)
            cs["peer"] = client(a.peer, ak, sk)
        prefix = "s3list-%d/" % os.getpid()
        names = ["%sobj-%07d" % (prefix, i) for i in range(n)]
        for c in cs.values():
            with concurrent.futures.ThreadPoolExecutor(16) as ex:
                list(ex.map(lambda k: c.put_object(Bucket="bench", Key=k, Body=b"v" * 100), names))
        t = {k: [] for k in cs}
        for r in range(rounds):
            for k in (sorted(cs) if r % 2 == 0 else sorted(cs, reverse=True)):
                t0 = time.perf_counter()
                got = list_all(cs[k], prefix)
                t[k].append(time.perf_counter() - t0)
                if got != names:
                    sys.exit("%s listed %d keys, not the %d put" % (k, len(got), n))
        rate = {k: n / statistics.median(v) for k, v in t.items()}
        row = {"bench": "s3_list", "objects": n, "page": 1000, "rounds": rounds,
               "keys_per_s": round(rate["kvtierd"]), "smoke": a.smoke}
        if "peer" in rate:
            row.update(baseline="peer", baseline_keys_per_s=round(rate["peer"]),
                       ratio=round(rate["kvtierd"] / rate["peer"], 3))
        if a.json:
            print(json.dumps(row, separators=(",", ":")))
        else:
            print("s3 list %d objects: kvtierd %.0f keys/s%s" % (
                n, rate["kvtierd"], "" if "peer" not in rate else
                ", peer %.0f keys/s, kvtierd/peer %.2f" % (rate["peer"], row["ratio"])))
        if "peer" in cs:
            for i in range(0, n, 1000):
                cs["peer"].delete_objects(Bucket="bench", Delete={
                    "Objects": [{"Key": k} for k in names[i:i + 1000]], "Quiet": True})
    finally:
        srv.terminate()
        srv.wait(60)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
