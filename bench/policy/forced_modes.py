#!/usr/bin/env python3
"""forced_modes.py KVTIER TRACE BLOCKS: does prefix-adapt's simulation say what its real cache
does?  (doc/policies.md "Ninth pass".)  Needs a build with bench/policy/ninth_pass.patch applied
(scratch knobs read from the environment, not in the store); the patch applies to the tree it was
written on (`git checkout 96b18c0 -- lib tests`), not to main since (eleventh_pass.patch, which applies
to main as of 2026-12-05, forces a mode with KVT_FORCE instead: sims_vs_real.sh).

Per hash seed N = 1..SEEDS (default 12), three DRAM-only replays of TRACE with a DRAM of BLOCKS
16 KiB blocks, prefix-adapt's mode forced from its 256th sampled access on (KVT_ADAPT_FORCE=0, 1,
2: LRU, segmented with the long ghost horizon, with the short one), and, from the first of them,
the three simulations' hits over the whole run (KVT_ADAPT_REPORT=1; KVT_SIM_PREFIX=1, so their
input is every request's blocks in order and does not depend on the real cache's mode).  Prints
per seed the real hit ratios and the simulated hits, each segmented one over LRU's, and the
medians: where a simulation's ratio is above the real one, it favours that mode.
"""
import concurrent.futures, json, os, re, statistics, subprocess, sys

kv, trace, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])
seeds = int(os.environ.get('SEEDS', '12'))


def run(seed, force):
    env = dict(os.environ, KVT_ADAPT_REPORT='1', KVT_SIM_PREFIX='1', KVT_ADAPT_FORCE=str(force))
    p = subprocess.run(['nice', kv, 'replay', trace, '--bytes-per-token', '32', '--json',
                        '--no-progress', '--set', 'dram.hash_seed=%d' % seed, '--dram',
                        str(blocks * 16384)], capture_output=True, text=True, env=env, check=True)
    ratio = json.loads(p.stdout.splitlines()[0])['block_hit_ratio']
    m = re.search(r'lru=(\d+) long=(\d+) short=(\d+)', p.stderr)
    return ratio, [int(x) for x in m.groups()]


with concurrent.futures.ThreadPoolExecutor(int(os.environ.get('JOBS', '2'))) as ex:
    fut = {(s, f): ex.submit(run, s, f) for s in range(1, seeds + 1) for f in (0, 1, 2)}
rows = []
for s in range(1, seeds + 1):
    real = [fut[(s, f)].result()[0] for f in (0, 1, 2)]
    sim = fut[(s, 0)].result()[1]
    rows.append((real, sim))
    print('seed %2d real LRU %.4f long %.4f (%.3f) short %.4f (%.3f) | sims LRU %d long %d (%.3f) '
          'short %d (%.3f)' % (s, real[0], real[1], real[1] / real[0], real[2], real[2] / real[0],
                               sim[0], sim[1], sim[1] / sim[0], sim[2], sim[2] / sim[0]))
med = lambda f: statistics.median(f(r, s) for r, s in rows)
print('median: real long/LRU %.3f short/LRU %.3f | simulated long/LRU %.3f short/LRU %.3f' % (
    med(lambda r, s: r[1] / r[0]), med(lambda r, s: r[2] / r[0]),
    med(lambda r, s: s[1] / s[0]), med(lambda r, s: s[2] / s[0])))
