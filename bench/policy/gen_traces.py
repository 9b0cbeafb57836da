#!/usr/bin/env python3
"""gen_traces.py OUTDIR [SEED]: write synthetic prefix-hash traces (Mooncake JSONL) for the
policy evaluation in doc/policies.md.  Deterministic for a seed.  SYNTHETIC: the shapes are
modelled on published statistics (sources below), the hit ratios they give are not a workload.

  conv-synth.jsonl   multi-turn chat.  Conversations arrive Poisson; turns per conversation
                     geometric with mean 3.5 (ShareGPT: ~3.5 turns on average; LMSYS-Chat-1M
                     reports 2.0, Zheng et al. 2023); a turn appends the previous answer and
                     the new question, 1-3 blocks of 512 tokens (ShareGPT prompts ~300
                     tokens, answers ~200-400); think time between turns exponential,
                     mean 60 s; one of 8 system prompts of 1-4 blocks.
  agent-synth.jsonl  tool-using agents (SWE-agent / ReAct style).  One of 4 tool-definition
                     prefixes of 8-24 blocks; 5-40 steps per session (SWE-bench agent runs:
                     tens of steps); each step appends a tool result of 1-6 blocks;
                     2-10 s between steps; sessions arrive Poisson.
  mixed-synth.jsonl  both of the above interleaved, plus one-off long prompts (RAG, 8-60
                     blocks, never reused): the read-once share of distinct blocks the issue
                     measured on real traces (58-76 %).
"""
import json, os, random, sys, heapq

class Ids:
    def __init__(s): s.m = {}; s.n = 0
    def child(s, parent, tok):
        k = (parent, tok)
        if k not in s.m:
            s.m[k] = s.n; s.n += 1
        return s.m[k]

def chain(ids, prefix, tokens):
    out = list(prefix)
    p = out[-1] if out else None
    for t in tokens:
        p = ids.child(p, t); out.append(p)
    return out

def gen(kind, n, rnd):
    ids = Ids(); events = []; uniq = [0]
    def fresh():
        uniq[0] += 1; return ('u', uniq[0])
    sys_prompts = [[('s', i, j) for j in range(rnd.randint(1, 4))] for i in range(8)]
    tools = [[('t', i, j) for j in range(rnd.randint(8, 24))] for i in range(4)]
    t = 0.0; reqs = []
    # a heap of (time, session state) for follow-up requests
    heap = []; seq = 0
    while len(reqs) < n:
        t += rnd.expovariate(1.5)
        k = kind if kind != 'mixed' else rnd.choices(['conv', 'agent', 'rag'], [5, 1, 4])[0]
        if k == 'conv':
            turns = 1
            while rnd.random() > 1 / 3.5 and turns < 30: turns += 1
            st = {'kind': 'conv', 'left': turns, 'toks': list(rnd.choice(sys_prompts))}
            heapq.heappush(heap, (t, seq, st)); seq += 1
        elif k == 'agent':
            st = {'kind': 'agent', 'left': rnd.randint(5, 40), 'toks': list(rnd.choice(tools))}
            heapq.heappush(heap, (t, seq, st)); seq += 1
        else:
            heapq.heappush(heap, (t, seq, {'kind': 'rag', 'left': 1, 'toks': []})); seq += 1
        # emit everything due before the next arrival
        while heap and heap[0][0] <= t and len(reqs) < n:
            due, _, st = heapq.heappop(heap)
            if st['kind'] == 'conv':
                st['toks'] += [fresh() for _ in range(rnd.randint(1, 3))]
                gap = rnd.expovariate(1 / 60)
            elif st['kind'] == 'agent':
                st['toks'] += [fresh() for _ in range(rnd.randint(1, 6))]
                gap = rnd.uniform(2, 10)
            else:
                st['toks'] = [fresh() for _ in range(rnd.randint(8, 60))]
                gap = 0
            h = chain(ids, [], st['toks'])
            reqs.append({'timestamp': int(due * 1000), 'input_length': 512 * len(h) - rnd.randint(0, 400),
                         'output_length': 200, 'hash_ids': h})
            st['left'] -= 1
            if st['left'] > 0:
                heapq.heappush(heap, (due + gap, seq, st)); seq += 1
    reqs.sort(key=lambda r: r['timestamp'])
    return reqs

def main():
    out = sys.argv[1]; seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    os.makedirs(out, exist_ok=True)
    for kind, n in (('conv', 6000), ('agent', 4000), ('mixed', 6000)):
        reqs = gen(kind, n, random.Random(f'{kind}-{seed}'))
        with open(os.path.join(out, f'{kind}-synth.jsonl'), 'w') as f:
            for r in reqs:
                f.write(json.dumps(r) + '\n')

main()
