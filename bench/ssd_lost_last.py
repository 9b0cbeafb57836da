#!/usr/bin/env python3
"""ssd_lost_last.py TRACE HITLOG CAP_BLOCKS HELD_BLOCKS [v]: ssd_lost.py's lost requests by how the
lost block was last seen.

For each request where the run's prefix (HITLOG: `kvtier replay --hit-log`) is shorter than
LRU's of CAP_BLOCKS, the block that ended the run's prefix is binned by its reuse distance
(distinct blocks touched since its last access, as a fraction of CAP_BLOCKS; the bin edges
0.75, 0.90, HELD_BLOCKS / CAP_BLOCKS -- the blocks the tiers held on average -- and 1) and by
its last access in the run: D a DRAM hit, S an SSD hit, p past the run's prefix (put: a new
block, or one a tier held, refused as KVT_EXISTS).  'v' prints each lost request too (index,
run's hits, LRU's, distance, block, its last four accesses, the request of the last).  A 'p'
loss at a short distance is a block a tier held that the put did not touch
(doc/policies.md "Fourteenth pass"); needs sortedcontainers.
"""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracefile import requests as load
from collections import OrderedDict, Counter
reqs = load(sys.argv[1]); cap = int(sys.argv[3]); held = int(sys.argv[4])
log = {}
for line in open(sys.argv[2]):
    if line.startswith('#') or not line.strip(): continue
    f = line.split(); log[int(f[0])] = (int(f[1]), f[3] if len(f) > 3 else '')
hist = {}
lru = OrderedDict(); rank = {}
cnt = Counter(); blk = Counter()
seq = 0; stamp = {}
# distance via stamps: number of distinct blocks touched since = count of stamps greater
import bisect
from sortedcontainers import SortedList
sl = SortedList()
for q, r in enumerate(reqs):
    n = 0
    for b in r:
        if b in lru: n += 1
        else: break
    got, tl = log[q]
    if got < n:
        b = r[got]
        d = (len(sl) - sl.bisect_right(stamp[b])) / cap
        h = hist.get(b, [])
        last = h[-1][2] if h else '-'
        prev = ''.join(x[2] for x in h[-4:])
        zone = 'lt%.2f' % (0.75 if d < .75 else .9 if d < .9 else held/cap if d < held/cap else 1.0)
        cnt[(zone, last)] += 1; blk[(zone, last)] += n - got
        if len(sys.argv) > 5: print(q, got, n, round(d,3), b, prev, h[-1][0] if h else '')
    for i, b in enumerate(r):
        L = tl[i] if i < got else 'p'
        hist.setdefault(b, []).append((q, i, L))
        if b in stamp: sl.remove(stamp[b])
        seq += 1; stamp[b] = seq; sl.add(seq)
        if b in lru: lru.move_to_end(b)
        else:
            lru[b] = 1
            if len(lru) > cap: lru.popitem(last=False)
for k in sorted(cnt): print(k, cnt[k], 'reqs', blk[k], 'blocks')
