#!/usr/bin/env python3
"""sweep.py KVTIER DIR TRACE...: the defaults against LRU of the same bytes, per trace and
capacity (doc/policies.md "Eighth pass").  16 KiB blocks (--bytes-per-token 32); C = a
FRACS-th of each trace's distinct blocks (default 8, 4 and 2: an eighth, a quarter, a half).

Per trace, C and hash seed N = 1..SEEDS (default 3; --set dram.hash_seed=N):
  lru      DRAM C, --dram-policy lru                    (the reference)
  dram     DRAM C, the default policy
  fast     DRAM C/4 (whole blocks) + SSD the rest, defaults, as fast as possible
  flush    the same, --flush-each
  speed20  the same, --speed 20
SSD runs put their run directories under DIR and go through WRAP (environment, a command
prefix, e.g. /work/quiet-bench.sh: the machine-wide benchmark lock).  JOBS (default 2)
replays at once.  MODES (default "dram,fast,flush,speed20") picks the configurations.
KVT_REPLAY_ARGS: extra replay flags for every run.

Every replay's JSON (its first line, with the sweep's labels) is appended to RAW (default
sweep-raw.jsonl) as it ends; the markdown table (each configuration's ratio to LRU of C,
min-max over the seeds, with the most write-downs shed in a run) is printed at the end.
Replays RAW already holds are not run again (a sweep resumed or split by MODES).
`sweep.py --table RAW` prints the table of an earlier (or still running) sweep.  A cell is
flagged "below" when the configuration's best seed is under LRU's worst (below beyond the
seed spread), "dip" when only its worst seed is under LRU's worst.
"""
import concurrent.futures, json, os, shlex, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracefile import distinct

BPB = 32 * 512
ALL_MODES = ('dram', 'fast', 'flush', 'speed20')


def replay(kv, d, path, dram, ssd, mode, seed, extra, wrap):
    cmd = [kv, 'replay', path, '--bytes-per-token', '32', '--dram', str(dram), '--json',
           '--no-progress', '--set', 'dram.hash_seed=%d' % seed] + extra
    if mode == 'lru':
        cmd += ['--dram-policy', 'lru']
    if ssd:
        cmd = wrap + cmd + ['--ssd', str(ssd), '--dir', d]
        cmd += {'fast': [], 'flush': ['--flush-each'], 'speed20': ['--speed', '20']}[mode]
    out = subprocess.run(['nice', '-n', '5'] + cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])


def sweep(kv, d, traces):
    seeds = int(os.environ.get('SEEDS', '3'))
    fracs = [int(x) for x in os.environ.get('FRACS', '8,4,2').split(',')]
    modes = os.environ.get('MODES', ','.join(ALL_MODES)).split(',')
    jobs = int(os.environ.get('JOBS', '2'))
    extra = shlex.split(os.environ.get('KVT_REPLAY_ARGS', ''))
    wrap = shlex.split(os.environ.get('WRAP', ''))
    raw = os.environ.get('RAW', 'sweep-raw.jsonl')
    work = []
    for path in traces:
        n = distinct(path)
        for div in fracs:
            c = n // div * BPB
            dram4 = c // 4 // BPB * BPB
            for mode in ['lru'] + modes:
                for seed in range(1, seeds + 1):
                    if mode in ('lru', 'dram'):
                        work.append((path, div, c, c, 0, mode, seed))
                    else:
                        work.append((path, div, c, dram4, c - dram4, mode, seed))
    # what RAW already holds is not replayed again (a sweep resumed, or split by MODES)
    done = set()
    if os.path.exists(raw):
        with open(raw) as f:
            for line in f:
                j = json.loads(line)
                done.add((j['sweep_trace'], j['sweep_frac'], j['sweep_mode'], j['sweep_seed']))
    work = [w for w in work if (w[0], w[1], w[5], w[6]) not in done]
    # DRAM-only first: quick, and the reference of every other row
    work.sort(key=lambda w: w[4] != 0)
    with open(raw, 'a') as f, concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(replay, kv, d, p, dr, ss, m, sd, extra, wrap): (p, dv, c, m, sd)
                for p, dv, c, dr, ss, m, sd in work}
        for fu in concurrent.futures.as_completed(futs):
            p, dv, c, m, sd = futs[fu]
            j = fu.result()
            j.update({'sweep_trace': p, 'sweep_frac': dv, 'sweep_capacity': c, 'sweep_mode': m,
                      'sweep_seed': sd})
            f.write(json.dumps(j) + '\n'); f.flush()
            print('%s 1/%d %s seed %d: %.4f' % (os.path.basename(p), dv, m, sd, j['block_hit_ratio']),
                  file=sys.stderr, flush=True)
    return raw


def table(raw):
    cells = {}
    order = []
    with open(raw) as f:
        for line in f:
            j = json.loads(line)
            k = (j['sweep_trace'], j['sweep_frac'])
            if k not in cells:
                cells[k] = {}; order.append(k)
            cells[k].setdefault(j['sweep_mode'], {})[j['sweep_seed']] = j
    modes = [m for m in ALL_MODES if any(m in c for c in cells.values())]
    print('| trace | C (blocks) | LRU of C | ' + ' | '.join(
        {'dram': 'DRAM-only default', 'fast': 'C/4 + SSD, as fast as possible',
         'flush': 'C/4 + SSD, `--flush-each`', 'speed20': 'C/4 + SSD, `--speed 20`'}[m]
        for m in modes) + ' |')
    print('|---|---:|---:|' + '---|' * len(modes))
    flags = []
    for k in order:
        c = cells[k]
        if 'lru' not in c:
            continue
        lru = [j['block_hit_ratio'] for j in c['lru'].values()]
        lo = min(lru)
        row = ['%s' % os.path.basename(k[0]), '1/%d: %d' % (k[1], c['lru'][min(c['lru'])]['optimum_capacity_blocks']),
               '%.4f' % lo if max(lru) - lo < 5e-5 else '%.4f-%.4f' % (lo, max(lru))]
        for m in modes:
            if m not in c:
                row.append(''); continue
            # each seed against LRU at the same seed
            r = sorted(j['block_hit_ratio'] / c['lru'][s]['block_hit_ratio']
                       for s, j in c[m].items() if s in c['lru'])
            shed = max(j.get('ssd_writedown_shed', 0) for j in c[m].values())
            v = [j['block_hit_ratio'] for j in c[m].values()]
            cell = '%.3f' % r[0] if r[-1] - r[0] < 5e-4 else '%.3f-%.3f' % (r[0], r[-1])
            if m != 'dram':
                cell += ' (%d)' % shed if shed else ''
            if max(v) < lo:
                cell = '**%s below**' % cell; flags.append((k, m, 'below', r))
            elif min(v) < lo - 5e-5:
                cell += ' dip'; flags.append((k, m, 'dip', r))
            row.append(cell)
        print('| ' + ' | '.join(row) + ' |')
    print()
    print('Ratios: each seed to DRAM-only LRU of C at the same seed, min-max over %s; (N): the most '
          'write-downs shed in one run.' % 'seeds')
    for (p, dv), m, what, r in flags:
        print('%s: %s 1/%d %s (%.3f-%.3f of LRU)' % (what, os.path.basename(p), dv, m, r[0], r[-1]))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--table':
        table(sys.argv[2]); return
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    table(sweep(sys.argv[1], sys.argv[2], sys.argv[3:]))


if __name__ == '__main__':
    main()
