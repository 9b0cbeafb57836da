#!/usr/bin/env python3
"""seed_matrix.py KVTIER OUT.jsonl SPEC...: DRAM-only replays of prefix-adapt over many hash
seeds, and LRU once, per cell, appended to OUT.jsonl (one JSON line a replay).
seed_matrix.py --table REF.jsonl A.jsonl [B.jsonl...]: per cell, LRU (from REF) and, per
file, prefix-adapt's min-max, mean, seeds below LRU and the worst seed over LRU.

SPEC is TRACE:DIV[:FROM:TO]: a DRAM of distinct blocks / DIV x 16 KiB (bench/tracefile.py),
hash seeds FROM..TO (default 1..12), `kvtier replay TRACE --bytes-per-token 32 --json
--no-progress --dram C --set dram.hash_seed=N`.  NOLRU=1 skips the LRU run (a second build
or knob compared against a first file's LRU); JOBS (default 2) replays at once, under nice;
the hit ratios do not depend on timing (DRAM alone).  The environment passes through, so a
scratch build's knobs (bench/policy/eleventh_pass.patch) apply.  doc/policies.md "Eleventh
pass" gives the commands it ran.
"""
import collections, concurrent.futures, json, os, statistics, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracefile import distinct

BPB = 32 * 512


def load(fn):
    d = collections.defaultdict(dict)
    for line in open(fn):
        r = json.loads(line)
        d[(r['trace'], r['div'])][(r['policy'], r['seed'])] = r['hit']
    return d


def table(ref, files):
    base = load(ref)
    runs = [load(f) for f in files]
    lru = {c: v[('lru', 0)] for c, v in base.items() if ('lru', 0) in v}
    cells = sorted((c for c in lru if all(any(k[0] == 'prefix-adapt' for k in r.get(c, {}))
                                          for r in runs)), key=lambda c: (c[0], -c[1]))
    for c in cells:
        name = os.path.relpath(c[0], os.path.dirname(os.path.dirname(c[0])))
        row = '%-36s 1/%d LRU %.4f' % (name, c[1], lru[c])
        for r in runs:
            v = [h for (p, _), h in r[c].items() if p == 'prefix-adapt']
            row += ' | %.4f-%.4f mean %.4f below %2d of %2d worst %.3f' % (
                min(v), max(v), statistics.mean(v), sum(h < lru[c] - 1e-9 for h in v), len(v),
                min(v) / lru[c])
        print(row)


def run(kv, w):
    t, div, dram, pol, seed = w
    cmd = ['nice', '-n', '5', kv, 'replay', t, '--bytes-per-token', '32', '--json',
           '--no-progress', '--dram', str(dram), '--dram-policy', pol,
           '--set', 'dram.hash_seed=%d' % (seed or 1)]
    j = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                  check=True).stdout.splitlines()[0])
    return dict(trace=t, div=div, policy=pol, seed=seed, hit=j['block_hit_ratio'],
                optimum=j['optimum_block_hit_ratio'])


def main():
    if sys.argv[1] == '--table':
        table(sys.argv[2], sys.argv[3:])
        return
    kv, out = sys.argv[1], sys.argv[2]
    work, dc = [], {}
    for spec in sys.argv[3:]:
        p = spec.split(':')
        t, div = p[0], int(p[1])
        lo, hi = (int(p[2]), int(p[3])) if len(p) > 3 else (1, 12)
        if t not in dc:
            dc[t] = distinct(t)
        dram = dc[t] // div * BPB
        if not os.environ.get('NOLRU'):
            work.append((t, div, dram, 'lru', 0))
        work += [(t, div, dram, 'prefix-adapt', s) for s in range(lo, hi + 1)]
    with open(out, 'a') as f, \
            concurrent.futures.ThreadPoolExecutor(int(os.environ.get('JOBS', '2'))) as ex:
        for r in ex.map(lambda w: run(kv, w), work):
            f.write(json.dumps(r) + '\n')
            f.flush()


main()
