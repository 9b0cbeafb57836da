#!/usr/bin/env python3
"""adapt_eval.py KVTIER TRACE...: DRAM-only block hit ratios of lru, prefix and prefix-adapt
at an eighth, a quarter and a half of each trace's distinct blocks (16 KiB blocks,
--bytes-per-token 32), the table doc/policies.md uses to choose the default DRAM policy.

prefix-adapt's simulations sample keys by the store's index hash, so its ratio depends on
the hash's secret: a replay fixes it (dram.hash_seed), and this script runs prefix-adapt
with RUNS (environment, default 3) secrets, 1..RUNS, and gives the lowest and highest.
lru and prefix do not depend on it (one run).  JOBS (default 2)
replays run at once; the hit ratios do not depend on timing (DRAM only).  Extra replay
flags in KVT_REPLAY_ARGS (e.g. "--set dram.policy=..." overrides).  Prints a markdown table
and, per cell, "loses" when prefix-adapt's lowest run is below max(lru, prefix).
BASELINE=FILE takes lru and prefix from FILE, the table an earlier run printed for the
same traces in the same order (they do not change with prefix-adapt's code), and replays
only prefix-adapt.
"""
import concurrent.futures, json, os, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracefile import distinct

kv = sys.argv[1]
traces = sys.argv[2:]
runs = int(os.environ.get('RUNS', '3'))
jobs = int(os.environ.get('JOBS', '2'))
extra = os.environ.get('KVT_REPLAY_ARGS', '').split()
BPB = 32 * 512
FRACS = ((8, '1/8'), (4, '1/4'), (2, '1/2'))




def replay(path, dram, policy, seed=None):
    cmd = ['nice', '-n', '5', kv, 'replay', path, '--bytes-per-token', '32', '--dram', str(dram),
           '--dram-policy', policy, '--json', '--no-progress'] + extra
    if seed is not None:
        cmd += ['--set', 'dram.hash_seed=%d' % seed]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


work = []
for path in traces:
    n = distinct(path)
    for div, name in FRACS:
        dram = (n // div) * BPB
        work.append((path, name, dram, 'lru', None))
        work.append((path, name, dram, 'prefix', None))
        for seed in range(1, runs + 1):
            work.append((path, name, dram, 'prefix-adapt', seed))

res = {}
base = os.environ.get('BASELINE')
if base:
    work = [w for w in work if w[3] == 'prefix-adapt']
with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
    futs = {ex.submit(replay, p, d, pol, sd): (p, f, pol) for p, f, d, pol, sd in work}
    for fu in concurrent.futures.as_completed(futs):
        p, f, pol = futs[fu]
        j = fu.result()
        res.setdefault((p, f), {}).setdefault(pol, []).append(j)
        print(json.dumps({'trace': os.path.basename(p), 'path': p, 'frac': f, 'policy': pol,
                          'hit': j['block_hit_ratio'], 'of_optimum': j['of_optimum'],
                          'optimum': j['optimum_block_hit_ratio']}),
              file=sys.stderr, flush=True)

if base:  # read once the replays are done: it may be an earlier run still going
    with open(base) as f:
        rows = [l.split('|') for l in f if l.startswith('| ') and not l.startswith('| trace')]
    cells = [(p, f) for p in traces for _, f in FRACS]
    baseline = {c: (float(r[4]), float(r[5])) for c, r in zip(cells, rows)}
print('| trace | capacity | optimum | lru | prefix | prefix-adapt (%d runs: min-max) | adapt min of opt. | verdict |' % runs)
print('|---|---|---:|---:|---:|---:|---:|---|')
worst = None
for path in traces:
    for _, f in FRACS:
        r = res[(path, f)]
        ad = sorted(j['block_hit_ratio'] for j in r['prefix-adapt'])
        opt = r['prefix-adapt'][0]['optimum_block_hit_ratio']
        if base:
            lru, pre = baseline[(path, f)]
        else:
            lru = r['lru'][0]['block_hit_ratio']
            pre = r['prefix'][0]['block_hit_ratio']
        d = ad[0] - max(lru, pre)
        worst = d if worst is None or d < worst else worst
        print('| %s | %s | %.4f | %.4f | %.4f | %.4f-%.4f | %.3f | %s |' % (
            os.path.basename(path), f, opt, lru, pre, ad[0], ad[-1], ad[0] / opt if opt else 0,
            'loses %.2f pt' % (-100 * d) if d < 0 else '+%.2f pt' % (100 * d)))
print('\nworst (adapt min - max(lru, prefix)): %+.2f points' % (100 * worst))
