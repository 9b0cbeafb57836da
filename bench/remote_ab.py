#!/usr/bin/env python3
"""remote_ab.py DIR KVTIER KVTIERD TRACE...: a kvtierd of C as the remote tier, against DRAM-only LRU of C.

For each trace, C = a quarter of its distinct blocks at 16 KiB values (--bytes-per-token 32),
as bench/ssd_ab.py: the reference is the embedded DRAM-only LRU of C; then the replay's
store keeps a local DRAM of 1 MiB (so the pod serves nearly everything) over a fresh
kvtierd (Unix socket under DIR, one loop thread, 16 KiB chunks, one shard) of
  - DRAM C, its default policy, and
  - DRAM C/4 + SSD 3C/4 (segments of SSD/16, as the replay sizes its own),
and the hit ratio of each is given as a fraction of LRU's (issue 19's target: never below
it).  Extra kvtierd flags in KVT_KVTIERD_ARGS, extra replay flags in KVT_REPLAY_ARGS.
Local DRAM hits (the replay's `dram_hits`) are printed so the pod's share is visible.

LOCAL_POLICIES=p1,p2,... (environment) measures instead a local DRAM of C/4 over a kvtierd of
DRAM 3C/4 only (no SSD anywhere, so prefix-adapt is not pinned to LRU mode locally), once per
local --dram-policy, each against the same LRU reference (doc/policies.md, "prefix-adapt over
lower tiers").
"""
import json, os, shutil, signal, subprocess, sys, time
from tracefile import quarter

d, kv, kvd = sys.argv[1], sys.argv[2], sys.argv[3]
extra = os.environ.get('KVT_REPLAY_ARGS', '').split()
dextra = os.environ.get('KVT_KVTIERD_ARGS', '').split()
BPB = 32 * 512
MIB = 1 << 20




def replay(path, args):
    cmd = [kv, 'replay', path, '--bytes-per-token', '32', '--json', '--no-progress'] + extra + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


def segment(cap):
    seg = cap // 16 // MIB * MIB
    return max(seg, MIB)


def through_kvtierd(path, dram, ssd, local=MIB, local_args=()):
    sd = os.path.join(d, 'kvtierd')
    shutil.rmtree(sd, ignore_errors=True)
    os.makedirs(sd)
    sock = os.path.join(d, 'kvtierd.sock')
    if os.path.exists(sock):
        os.unlink(sock)
    cmd = [kvd, '--dir', sd, '--dram', str(dram), '--ssd', str(ssd), '--listen', 'none', '--unix', sock,
           '--threads', '1', '--set', 'dram.chunk=16384', '--set', 'dram.shards=1',
           '--set', 'ssd.close_writedown_ms=0'] + dextra
    if ssd:
        cmd += ['--set', 'ssd.segment=%d' % segment(ssd)]
    log = open(os.path.join(d, 'kvtierd.log'), 'w')
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if os.path.exists(sock) or p.poll() is not None:
                break
            time.sleep(0.05)
        if p.poll() is not None:
            raise SystemExit('kvtierd exited: see %s' % log.name)
        return replay(path, ['--dram', str(local), '--server', 'unix:' + sock] + list(local_args))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        shutil.rmtree(sd, ignore_errors=True)


print('| trace | configuration | block hit ratio | of optimum | of DRAM-only LRU | local DRAM hits | pod hits |')
print('|---|---|---:|---:|---:|---:|---:|')
local_policies = [p for p in os.environ.get('LOCAL_POLICIES', '').split(',') if p]
for path in sys.argv[4:] if local_policies else ():
    total, dram = quarter(path, BPB)
    name = os.path.basename(path)
    ref = replay(path, ['--dram', str(total), '--dram-policy', 'lru'])
    lru = ref['block_hit_ratio']
    print('| %s | embedded DRAM %d MiB, lru | %.4f | %.3f | 1.000 | | |' % (name, total >> 20, lru, ref['of_optimum']))
    for pol in local_policies:
        j = through_kvtierd(path, total - dram, 0, dram, ('--dram-policy', pol))
        print('| | local DRAM %d MiB %s over kvtierd DRAM %d MiB | %.4f | %.3f | %.3f | %d | %d |' % (
            dram >> 20, pol, (total - dram) >> 20, j['block_hit_ratio'],
            j['block_hit_ratio'] / ref['optimum_block_hit_ratio'], j['block_hit_ratio'] / lru,
            j['dram_hits'], j['remote_hits']))
    sys.stdout.flush()
for path in sys.argv[4:] if not local_policies else ():
    total, dram = quarter(path, BPB)
    name = os.path.basename(path)
    ref = replay(path, ['--dram', str(total), '--dram-policy', 'lru'])
    lru = ref['block_hit_ratio']
    print('| %s | embedded DRAM %d MiB, lru | %.4f | %.3f | 1.000 | | |' % (name, total >> 20, lru, ref['of_optimum']))
    for label, dd, ss in (('kvtierd DRAM %d MiB' % (total >> 20), total, 0),
                          ('kvtierd DRAM %d MiB + SSD %d MiB' % (dram >> 20, (total - dram) >> 20), dram,
                           total - dram)):
        j = through_kvtierd(path, dd, ss)
        print('| | local DRAM 1 MiB over %s | %.4f | %.3f | %.3f | %d | %d |' % (
            label, j['block_hit_ratio'], j['block_hit_ratio'] / ref['optimum_block_hit_ratio'], j['block_hit_ratio'] / lru, j['dram_hits'],
            j['remote_hits']))
    sys.stdout.flush()
