#!/usr/bin/env python3
"""ssd_ab.py DIR KVTIER_A KVTIER_B TRACE...: DRAM + SSD against DRAM alone, two builds.

For each trace, total capacity C = a quarter of its distinct blocks, 16 KiB values
(--bytes-per-token 32), the default policies: DRAM-only LRU of C (the target: adding
an SSD below DRAM should never lose to the same bytes of DRAM), then DRAM C/4 + SSD
3C/4 with build A and with build B, interleaved, next to the offline optimum at C.
Used to measure the SSD format and reclamation changes (doc/policies.md, bench/
RESULTS.md).  Extra replay flags (e.g. --speed 20) go in KVT_REPLAY_ARGS; flags for
one build only in KVT_A_ARGS / KVT_B_ARGS (e.g. A = B's binary with the old defaults:
KVT_A_ARGS="--set ssd.reinsert_pct=50").  Hit ratios do not depend on timing except
through write-down shedding (the shed column).  The last columns say what the tiers
really held, averaged after warm-up (kvtier replay --json): blocks in DRAM (queued +
on their way down) and on SSD, against DRAM C/4 + SSD 3C/4 in blocks.
"""
import json, os, subprocess, sys
from tracefile import quarter

d, kva, kvb = sys.argv[1], sys.argv[2], sys.argv[3]
extra = os.environ.get('KVT_REPLAY_ARGS', '').split()
own = {'A': os.environ.get('KVT_A_ARGS', '').split(), 'B': os.environ.get('KVT_B_ARGS', '').split()}
BPB = 32 * 512




def replay(kv, path, dram, ssd, policy=None, more=()):
    cmd = [kv, 'replay', path, '--bytes-per-token', '32', '--dram', str(dram), '--json',
           '--no-progress'] + extra + list(more)
    if policy:
        cmd += ['--dram-policy', policy]
    if ssd:
        cmd += ['--ssd', str(ssd), '--dir', d]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


print('| trace | configuration | build | block hit ratio | of optimum | of DRAM-only LRU | SSD hits | SSD bytes written | shed | DRAM blocks held | SSD blocks held |')
print('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|')
for path in sys.argv[4:]:
    total, dram = quarter(path, BPB)
    name = os.path.basename(path)
    ref = replay(kvb, path, total, 0, 'lru')
    print('| %s | optimum at %d blocks | | %.3f | 1.000 | | | | | | |' % (name, ref['optimum_capacity_blocks'],
                                                              ref['optimum_block_hit_ratio']))
    print('| | DRAM %d MiB, lru | B | %.3f | %.3f | 1.000 | | | | | |' % (total >> 20, ref['block_hit_ratio'],
                                                                ref['of_optimum']))
    for tag, kv in (('A', kva), ('B', kvb)):
        j = replay(kv, path, dram, total - dram, more=own[tag])
        print('| | DRAM %d MiB + SSD %d MiB | %s | %.3f | %.3f | %.3f | %d | %d | %d | %.0f of %d | %.0f of %d |' % (
            dram >> 20, (total - dram) >> 20, tag, j['block_hit_ratio'], j['of_optimum'],
            j['block_hit_ratio'] / ref['block_hit_ratio'], j['ssd_hits'], j['ssd_writedown_bytes'],
            j['ssd_writedown_shed'], j.get('dram_blocks_avg', 0) + j.get('dram_leaving_avg', 0) / BPB,
            dram // BPB, j.get('ssd_blocks_avg', 0), (total - dram) // BPB))
    sys.stdout.flush()
