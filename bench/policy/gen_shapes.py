#!/usr/bin/env python3
"""gen_shapes.py OUTDIR [SEED] [SHAPE...]: more synthetic prefix-hash traces (Mooncake JSONL),
shapes beyond gen_traces.py's, for the generality sweep of doc/policies.md ("Eighth pass":
bench/policy/sweep.py).  Deterministic for a seed.  SYNTHETIC: each shape varies one thing
the earlier traces held fixed; the hit ratios they give are not a workload.

A trace is sessions arriving Poisson; each session is a run of requests, each request its
session's whole context so far (a later request extends the earlier one, as in a chat or
an agent loop).  Shapes (SHAPE.jsonl; all of them when none is named):

  conv-long      long chats: turns geometric mean 12, 2-6 blocks a turn, 8 system prompts
                 of 1-4 blocks, think time exponential mean 30 s.
  conv-short     many short chats: turns geometric mean 1.4 (most single-turn), 1-2 blocks
                 a turn, 8 system prompts of 1-4 blocks.
  conv-bigsys    chats over a few big shared system prompts: 3 prompts of 16-64 blocks,
                 turns mean 3.5, 1-4 blocks a turn.
  agent-longtool tool agents with long tool outputs: 4 tool prefixes of 8-24 blocks, 3-15
                 steps, each appending 8-32 blocks (file dumps, logs), 2-10 s apart.
  docqa-once     document QA over many documents mostly read once: a shared 2-block
                 instruction, then a document of 8-40 blocks (a fresh one 80 % of the
                 time, else one of 50 popular ones), then 1-3 questions of 1 block each
                 (the document re-read each time).
  root-conv      Mooncake's real conversation trace's shape: every request starts with one
                 common root block (hash id 0: [0, 1, 2, ...], [0, 14, 15, ...]), then
                 blocks unique to its conversation; turns mean 3.5, 1-4 blocks a turn,
                 think time mean 60 s.
  root-agent     the same root, tool-agent sessions: 5-40 steps of 1-8 blocks, 2-10 s apart.
  mix-all        all of the above interleaved (equal session weights).

SCALE=x (environment) multiplies the requests and the session arrival rate: the same shape
and duration, x times the sessions at once (x times the distinct blocks).
"""
import heapq, json, os, random, sys


class Ids:
    """Prefix-chained block ids: a block's id names its whole prefix."""
    def __init__(s):
        s.m = {}; s.n = 0

    def child(s, parent, tok):
        k = (parent, tok)
        if k not in s.m:
            s.m[k] = s.n; s.n += 1
        return s.m[k]


def geom(rnd, mean, cap=60):
    n = 1
    while rnd.random() > 1 / mean and n < cap:
        n += 1
    return n


# session kinds: each returns (initial tokens, steps, a function giving one step's new tokens
# and the gap to the next step)
def kinds(rnd, fresh):
    sysp = [[('s', i, j) for j in range(rnd.randint(1, 4))] for i in range(8)]
    bigsys = [[('b', i, j) for j in range(rnd.randint(16, 64))] for i in range(3)]
    tools = [[('t', i, j) for j in range(rnd.randint(8, 24))] for i in range(4)]
    docs = [[('d', i, j) for j in range(rnd.randint(8, 40))] for i in range(50)]
    instr = [('i', 0), ('i', 1)]
    root = [('root',)]

    def turns(lo, hi):
        return lambda: ([fresh() for _ in range(rnd.randint(lo, hi))])

    def doc():
        d = rnd.choice(docs) if rnd.random() < 0.2 else [fresh() for _ in range(rnd.randint(8, 40))]
        return instr + list(d)

    think = lambda m: (lambda: rnd.expovariate(1 / m))
    steps = lambda: rnd.uniform(2, 10)
    return {
        'conv-long': lambda: (list(rnd.choice(sysp)), geom(rnd, 12), turns(2, 6), think(30)),
        'conv-short': lambda: (list(rnd.choice(sysp)), geom(rnd, 1.4), turns(1, 2), think(60)),
        'conv-bigsys': lambda: (list(rnd.choice(bigsys)), geom(rnd, 3.5), turns(1, 4), think(60)),
        'agent-longtool': lambda: (list(rnd.choice(tools)), rnd.randint(3, 15), turns(8, 32), steps),
        'docqa-once': lambda: (doc(), rnd.randint(1, 3), turns(1, 1), think(20)),
        'root-conv': lambda: (list(root), geom(rnd, 3.5), turns(1, 4), think(60)),
        'root-agent': lambda: (list(root), rnd.randint(5, 40), turns(1, 8), steps),
    }


# requests and session arrivals per second for each shape (a trace of a few minutes: a
# replay at 20x its pace takes seconds)
SHAPES = {
    'conv-long': (3000, 2.0), 'conv-short': (10000, 24.0), 'conv-bigsys': (3000, 6.0),
    'agent-longtool': (800, 1.5), 'docqa-once': (3000, 6.0), 'root-conv': (5000, 6.0),
    'root-agent': (2000, 1.0), 'mix-all': (1500, 5.0),
}


def gen(shape, rnd, scale=1.0):
    n, rate = SHAPES[shape]
    n, rate = int(n * scale), rate * scale
    ids = Ids(); uniq = [0]

    def fresh():
        uniq[0] += 1
        return ('u', uniq[0])
    ks = kinds(rnd, fresh)
    names = sorted(ks) if shape == 'mix-all' else [shape]
    heap = []; seq = 0; t = 0.0; reqs = []
    while len(reqs) < n:
        t += rnd.expovariate(rate)
        toks, left, step, gap = ks[rnd.choice(names)]()
        heapq.heappush(heap, (t, seq, [toks, left, step, gap])); seq += 1
        while heap and heap[0][0] <= t and len(reqs) < n:
            due, _, st = heapq.heappop(heap)
            st[0] = st[0] + st[2]()
            p = None; h = []
            for tok in st[0]:
                p = ids.child(p, tok); h.append(p)
            reqs.append({'timestamp': int(due * 1000), 'input_length': 512 * len(h) - rnd.randint(0, 400),
                         'output_length': 200, 'hash_ids': h})
            st[1] -= 1
            if st[1] > 0:
                heapq.heappush(heap, (due + st[3](), seq, st)); seq += 1
    reqs.sort(key=lambda r: r['timestamp'])
    return reqs


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    shapes = sys.argv[3:] or list(SHAPES)
    os.makedirs(out, exist_ok=True)
    for shape in shapes:
        reqs = gen(shape, random.Random(f'{shape}-{seed}'), float(os.environ.get('SCALE', '1')))
        with open(os.path.join(out, f'{shape}.jsonl'), 'w') as f:
            for r in reqs:
                f.write(json.dumps(r) + '\n')


if __name__ == '__main__':
    main()
