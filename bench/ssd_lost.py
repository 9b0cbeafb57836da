#!/usr/bin/env python3
"""ssd_lost.py TRACE HITLOG [CAP_BLOCKS]: where a tiered run loses hits against LRU of the same blocks.

HITLOG is what `kvtier replay --hit-log FILE TRACE ...` writes (one line per request:
index, prefix hits, blocks, a tier letter per hit; then the store's statistics as "# name
value").  CAP_BLOCKS (default: a quarter of the trace's distinct blocks, as bench/ssd_ab.py)
is the capacity of the reference, an LRU of blocks with the replay's prefix semantics (a
request's hits are its leading blocks present; then every block of it is touched).

For each request where the run's prefix is shorter than LRU's, the block that ended the
run's prefix is the one lost (the rest follow it); it is binned by its reuse distance at
that access (distinct blocks touched since its previous access, as a fraction of the
capacity): a loss at a distance near 1.0 is room (the tiers held fewer blocks than the
same bytes of DRAM), a loss at a short distance is order (the tiers let go of a block
LRU would keep much longer).  Gains (the run's prefix longer than LRU's) are binned the
same way.  Prints the bins and the store counters the attribution needs.
"""
import json, sys
from tracefile import requests as load
from collections import OrderedDict




class Fenwick:
    def __init__(self, n):
        self.n, self.t = n, [0] * (n + 1)

    def add(self, i, v):
        i += 1
        while i <= self.n:
            self.t[i] += v
            i += i & -i

    def sum(self, i):  # sum of [0, i)
        s = 0
        while i > 0:
            s += self.t[i]
            i -= i & -i
        return s


def main():
    reqs = load(sys.argv[1])
    log, stats = {}, {}
    for line in open(sys.argv[2]):
        if line.startswith('# '):
            _, k, v = line.split()
            stats[k] = int(v)
        elif line.strip():
            f = line.split()
            log[int(f[0])] = (int(f[1]), f[3] if len(f) > 3 else '')
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else len({b for r in reqs for b in r}) // 4
    reqs = [r for q, r in enumerate(reqs) if q in log]  # a --limit run: its requests only
    total = sum(len(r) for r in reqs)
    fw, last, t = Fenwick(total + 1), {}, 0
    lru = OrderedDict()
    bins = [0.25, 0.5, 0.75, 0.9, 0.95, 1.0, 1e9]
    lost_n, lost_b = [0] * len(bins), [0] * len(bins)
    gain_n, gain_b = [0] * len(bins), [0] * len(bins)
    lru_hits = run_hits = 0
    for q, r in enumerate(reqs):
        if q not in log:
            break
        n = 0
        for b in r:
            if b in lru:
                n += 1
            else:
                break
        got, tl = log[q]
        lru_hits += n
        run_hits += got
        if got != n:
            pos = min(got, n)  # the block where the shorter prefix ends
            b = r[pos]
            d = (fw.sum(t) - fw.sum(last[b] + 1)) / cap if b in last else 1e9
            i = next(k for k, x in enumerate(bins) if d < x)
            if got < n:
                lost_n[i] += 1
                lost_b[i] += n - got
            else:
                gain_n[i] += 1
                gain_b[i] += got - n
        for b in r:
            if b in last:
                fw.add(last[b], -1)
            fw.add(t, 1)
            last[b] = t
            t += 1
            if b in lru:
                lru.move_to_end(b)
            else:
                lru[b] = 1
                if len(lru) > cap:
                    lru.popitem(last=False)
    print('capacity %d blocks; LRU prefix hits %d (%.4f), this run %d (%.4f), %.3f of LRU' % (
        cap, lru_hits, lru_hits / total, run_hits, run_hits / total, run_hits / max(lru_hits, 1)))
    print('| reuse distance (of capacity) | requests lost | blocks lost | requests gained | blocks gained | net blocks |')
    print('|---|---:|---:|---:|---:|---:|')
    lo = 0.0
    for i, x in enumerate(bins):
        name = '%.2f-%.2f' % (lo, x) if x < 1e8 else '>= 1 (first use)'
        print('| %s | %d | %d | %d | %d | %+d |' % (name, lost_n[i], lost_b[i], gain_n[i], gain_b[i],
                                                   gain_b[i] - lost_b[i]))
        lo = x
    keys = ['dram.evictions', 'dram.victim_writedowns', 'dram.victim_filtered', 'dram.victim_shed',
            'ssd.writedown_blocks', 'ssd.writedown_shed', 'ssd.evicted_blocks', 'ssd.segments_evicted',
            'ssd.reinserted_blocks', 'ssd.carried_blocks', 'ssd.carry_lost', 'ssd.promoted_dropped',
            'ssd.evicted_unread', 'ssd.evicted_over_budget', 'ssd.evicted_dead', 'ssd.sealed_records', 'ssd.reads', 'ssd.blocks',
            'ssd.segments_used', 'dram.blocks']
    print(' '.join('%s=%d' % (k, stats[k]) for k in keys if k in stats))


main()
