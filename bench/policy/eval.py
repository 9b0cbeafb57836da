#!/usr/bin/env python3
"""eval.py KVTIER DIR TRACE...: the policy table of doc/policies.md.

For each trace: total capacity C = a quarter of its distinct blocks, values of 16 KiB
(--bytes-per-token 32).  Rows: DRAM-only of C (LRU, S3-FIFO, prefix, prefix-learn) and DRAM
C/4 + SSD 3C/4 (LRU, prefix, prefix-learn with the default victim admission; and the old
default, S3-FIFO with second-access admission), each next to the offline optimum at C that
kvtier replay prints.  Extra flags for every replay (e.g. --speed 20) go in
KVT_REPLAY_ARGS.  Prints a markdown table; contended machine: hit ratios do not
depend on timing except through write-down shedding (reported).
"""
import json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracefile import distinct

kv, d = sys.argv[1], sys.argv[2]
extra = os.environ.get('KVT_REPLAY_ARGS', '').split()
BPB = 32 * 512


def replay(path, dram, ssd, policy, admission=None):
    cmd = [kv, 'replay', path, '--bytes-per-token', '32', '--dram', str(dram), '--dram-policy', policy,
           '--json', '--no-progress'] + extra
    if ssd:
        cmd += ['--ssd', str(ssd), '--dir', d]
        if admission:
            cmd += ['--admission', admission]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])

print('| trace | capacity (blocks) | configuration | policy | block hit ratio | of optimum | SSD hits | shed |')
print('|---|---:|---|---|---:|---:|---:|---:|')
for path in sys.argv[3:]:
    n = distinct(path)
    cap = n // 4
    total = cap * BPB
    name = os.path.basename(path)
    first = True
    rows = []
    for pol in ('lru', 's3fifo', 'prefix', 'prefix-learn'):
        rows.append(('DRAM %d MiB' % (total >> 20), pol, replay(path, total, 0, pol)))
    dram = (total // 4) // BPB * BPB
    ssd = total - dram
    for pol, adm in (('lru', None), ('prefix', None), ('prefix-learn', None), ('s3fifo', 'second')):
        rows.append(('DRAM %d MiB + SSD %d MiB%s' % (dram >> 20, ssd >> 20, ', admission ' + adm if adm else ''), pol,
                     replay(path, dram, ssd, pol, adm)))
    for conf, pol, j in rows:
        if first:
            print('| %s | %d | offline optimum | Belady MIN | %.3f | 1.000 | | |' % (name, j['optimum_capacity_blocks'],
                                                                                 j['optimum_block_hit_ratio']))
            print('| | | unlimited ideal | | %.3f | | | |' % j['ideal_block_hit_ratio'])
            first = False
        print('| | | %s | %s | %.3f | %.3f | %d | %d |' % (conf, pol, j['block_hit_ratio'], j['of_optimum'],
                                                        j['ssd_hits'], j['ssd_writedown_shed']))
    sys.stdout.flush()
