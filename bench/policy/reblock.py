#!/usr/bin/env python3
"""reblock.py TRACE B [OUT]: a Mooncake JSONL trace of 512-token blocks (data/traces/README.md)
rewritten with B-token blocks (B divides 512: 16 as vLLM's and Alibaba's Qwen traces, 64, ...),
the same requests otherwise.  Each 512-token hash id becomes 512/B chained ids, the request's
last block only as many as its tokens need (ceil(rest / B)); an id stays a prefix hash: the
j-th sub-block of 512-block id h gets one new id for (h, j) wherever it appears, so equal
prefixes give equal ids and the trace's reuse is the same, only finer.  Writes OUT (default
stdout).  Used for doc/policies.md "Small blocks"."""
import json, sys


def reblock(lines, b, src=512):
    if b <= 0 or src % b:
        raise SystemExit(f'reblock.py: B={b} does not divide {src}')
    per = src // b
    ids = {}
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        h, n = r['hash_ids'], r['input_length']
        if not h:
            yield r
            continue
        if not (src * (len(h) - 1) < n <= src * len(h)):
            raise SystemExit(f'reblock.py: {len(h)} ids for input_length {n}: not {src}-token '
                             'blocks')
        out = []
        for i, x in enumerate(h):
            k = per if i + 1 < len(h) else -(-(n - src * i) // b)
            for j in range(k):
                out.append(ids.setdefault((x, j), len(ids)))
        r['hash_ids'] = out
        yield r


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    with open(sys.argv[1]) as f:
        reqs = reblock(f, int(sys.argv[2]))
        out = open(sys.argv[3], 'w') if len(sys.argv) == 4 else sys.stdout
        for r in reqs:
            out.write(json.dumps(r) + '\n')
        out.close()


main()
