#!/usr/bin/env python3
"""hawkeye.py TRACE... : learning from the optimum online (doc/policies.md, "Tenth pass").

Prefix semantics as sim.py (a request's hits are its leading blocks present; then each of its
blocks is inserted or refreshed, tail first).  Capacities: distinct blocks / DIVS (environment,
default "4,8,2").  Per trace and capacity prints the block hit ratio of the BASE columns
(default "lru,adapt3,class-oracle"), the optimum with OPT=1, then the SIGS columns:

  lru            LRU (the prefix policy's order), sim.py's
  adapt3         sim.py's model of the store's prefix-adapt (hash seed 0)
  class-oracle   sim.py's: bypass first sightings of classes reused < 40 % (rates from the future)
  opt            Belady MIN with bypass, prefix counting (belady.py's)
  hawk-SIG[:M][@H]  Hawkeye (Jain & Lin, ISCA'16): OPTgen replays Belady on 1 key in 16 (by
                 hash) at capacity C/16 (x OPTCAP) over a history of H x C/16 sampled accesses
                 (H = 8 as the paper's 8x associativity; HIST overrides); each sampled access
                 carries its signature, and at the key's next access the signature is trained +1
                 if OPT at that capacity would have kept the key across the interval (occupancy
                 below C/16 all along), else -1 (also -1 when the key leaves the history
                 unreused); 3-bit counters, one table per feature, features hashed to at most
                 4096 entries, friendly when their sum is at least THR (4) per table.  A block's
                 signature is kept with it.  The cache, by M:
                   avlru  (default) friendly blocks at the MRU end of one LRU list F, averse ones
                          in a list A evicted first, a request's at A's evict-first end (tail
                          first): near-bypass; a friendly block evicted trains its signature -1
                          (the paper's; DETRAIN=0 turns that off)
                   avmru  the same, averse ones at A's MRU end;  bypass: a new averse block is
                          not cached (remembered in the ghost)
                   seg    seg95 (sim.py's: probation, main <= 95 %, a ghost of 4 C) whose new
                          friendly blocks skip probation
                   seg3   seg95 whose reuses predicted averse go to main's evict-first end
                   seg2   both
  mj-SIG, mjo-SIG  Mockingjay-like (Shah, Jain & Lin, HPCA'22): per signature a predicted reuse
                 distance (block accesses, from the same 1-in-16 sample, moved 1/4 of the way
                 to each observed distance, or to "infinite" = 8 C when the key leaves a history
                 of 8 C unreused; untrained: C); a block's predicted next use = its last use +
                 its signature's distance; the victim is the block farthest from its predicted
                 next use either way (|estimated time remaining|; mjo: any overdue block first,
                 the most overdue); a newcomer farther than the victim is not cached.
  opt-admit      the avlru frame fed each access's own label from the future (friendly iff MIN
                 at this capacity holds the block to its next use): checks the frame can reach
                 the optimum given perfect labels
  optrate-SIG@T  the avlru frame, friendly iff the signature's share of OPT-held accesses over
                 the whole trace is at least T (rates from the future: a bound for predictors on
                 those signals, as class-oracle is for reuse labels)
  optonline-SIG  the same labels learned online, exact and unsampled: each known at the block's
                 next use, or taken as averse after EXP (8) capacities of accesses without one;
                 3-bit counters, or the share so far with COUNTS=1 (an upper estimate of what a
                 sampled OPTgen can learn on those signals)

SIG, '+'-joined features (hawk-, mj-: each its own table; optrate-, optonline-: one joint key).
Online (hawk-, mj-):
  class    prefix-learn's class: log2 prompt blocks, prefix cached, blocks from the end (0..3)
  ghost    the block seen lately (cached, or in a FIFO ghost of 4 C keys: the store's ghost.c)
  classghost  class and ghost in one table
  hit      class plus whether this block itself was found (a leading hit)
  root     the prompt's first block's key hashed, 4096 buckets (which document/system prompt)
  rootpos  hash of (root, log2 position), 4096 buckets
  pos      log2 of the position in the prompt
Oracle columns (state-free): class (its prefix-cached bit from an unlimited cache), seen (the
block read before), root, rootseen (the root began an earlier request).
Everything is what a store sees: a prefix lookup's chain of opaque keys, their order, how many
were found; never the hash ids' values.  SIGS=lru with BASE=lru: the two-list frame with every
block friendly, which must equal sim.py's LRU.
"""
import heapq
import os
import sys
from collections import OrderedDict, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402  (sim.py's loader, LRU, classes and prefix-adapt model)

S = 16
TAB = 4096


def sampled(b):
    return (sim.hsh(b) >> 16) % S == 0


def sigfn(spec):
    """A function (r, i, k, root) -> tuple of table keys for the '+'-joined features."""
    feats = spec.split('+')

    def f(r, i, k, rh, g=False):
        out = []
        for j, name in enumerate(feats):
            if name == 'class':
                out.append((j, sim.feat(r, i, k)))
            elif name == 'hit':
                out.append((j, sim.feat(r, i, k) + (i < k,)))
            elif name == 'root':
                out.append((j, rh % TAB))
            elif name == 'rootpos':
                out.append((j, sim.hsh(rh ^ ((i + 1).bit_length() * 0x9E3779B1)) % TAB))
            elif name == 'pos':
                out.append((j, (i + 1).bit_length()))
            elif name == 'ghost':  # the block seen lately: cached or in the ghost (g set by caller)
                out.append((j, g))
            elif name == 'classghost':
                out.append((j, sim.feat(r, i, k) + (g,)))
            else:
                raise SystemExit('unknown feature ' + name)
        return tuple(out)
    return f, len(feats)


class OPTgen:
    """Belady's MIN for the sampled keys at capacity cap over a history of W sampled accesses
    (Hawkeye's occupancy vector, circular).  access() calls train(sig, friendly)."""
    def __init__(s, cap, W, train):
        s.cap = cap; s.W = W; s.occ = [0] * W; s.t = 0; s.last = OrderedDict(); s.train = train

    def access(s, b, sig):
        t = s.t; W = s.W; occ = s.occ
        occ[t % W] = 0
        last = s.last
        while last:
            v = next(iter(last))
            t0, sg = last[v]
            if t - t0 < W:
                break
            del last[v]; s.train(sg, False)
        e = last.pop(b, None)
        if e is not None:
            t0, sg = e
            a, c = t0 % W, t % W
            segs = [(a, c)] if a < c else [(a, W), (0, c)]
            if max(max(occ[x:y]) for x, y in segs if y > x) < s.cap:
                for x, y in segs:
                    occ[x:y] = [o + 1 for o in occ[x:y]]
                s.train(sg, True)
            else:
                s.train(sg, False)
        last[b] = (t, sig)
        s.t = t + 1


class Hawk:
    def __init__(s, cap, spec, mode='avlru', hist=8, gm=4):
        s.cap = cap; s.F = OrderedDict(); s.A = OrderedDict(); s.sig = {}; s.mode = mode
        s.G = OrderedDict(); s.gc = int(gm * cap)
        s.detrain = os.environ.get('DETRAIN', '1') == '1'
        s.all_friendly = spec == 'lru'
        s.sigf, s.nt = sigfn('class' if s.all_friendly else spec)
        s.ctr = {}; s.max = 7; s.init = 4; s.thr = int(os.environ.get('THR', '4')) * s.nt
        hist = float(os.environ.get('HIST', hist))  # HIST overrides every column's
        cs = max(1, int(cap * float(os.environ.get('OPTCAP', '1')) / S))
        s.opt = OPTgen(cs, max(2, int(hist * cap / S)), s.train)
        s.tables = defaultdict(set)

    def has(s, b):
        return b in s.F or b in s.A

    def train(s, sg, fr):
        for key in sg:
            c = s.ctr.get(key, s.init)
            s.ctr[key] = min(s.max, c + 1) if fr else max(0, c - 1)
            s.tables[key[0]].add(key[1])

    def friendly(s, sg):
        if s.all_friendly:
            return True
        return sum(s.ctr.get(key, s.init) for key in sg) >= s.thr

    def access(s, r, k):
        rh = sim.hsh(r[0])
        front = []
        for i in range(len(r) - 1, -1, -1):
            b = r[i]
            g = b in s.F or b in s.A
            if b in s.G:
                del s.G[b]; g = True
            sg = s.sigf(r, i, k, rh, g)
            if sampled(b):
                s.opt.access(b, sg)
            fr = s.friendly(sg)
            if s.mode in ('seg', 'seg2', 'seg3'):  # seg95 whose new friendly blocks skip probation
                if b in s.F or b in s.A:
                    s.A.pop(b, None); s.F[b] = 1; s.F.move_to_end(b)
                    if s.mode != 'seg' and not fr:  # seg2, seg3: to main's evict-first end
                        front.append(b)
                else:
                    (s.F if g or (fr and s.mode != 'seg3') else s.A)[b] = 1
                s.sig[b] = sg
                continue
            new = True
            if b in s.F:
                del s.F[b]; new = False
            elif b in s.A:
                del s.A[b]; new = False
            if fr:
                s.F[b] = 1
            elif s.mode == 'avmru':
                s.A[b] = 1
            elif s.mode == 'bypass' and new:
                s.sig.pop(b, None); s.ghost(b)
                continue
            else:
                s.A[b] = 1; front.append(b)
            s.sig[b] = sg
        for b in reversed(front):  # head first to the front, so the tail ends up evicted first
            if b in s.A:
                s.A.move_to_end(b, last=False)
            elif b in s.F:
                s.F.move_to_end(b, last=False)
        while len(s.F) + len(s.A) > s.cap:
            if s.mode.startswith('seg'):
                q = s.F if s.F and (len(s.F) > 0.95 * s.cap or not s.A) else s.A
                if q is s.F and s.mode != 'seg' and s.detrain:
                    s.train(s.sig[next(iter(s.F))], False)
                v, _ = q.popitem(last=False)
            elif s.A:
                v, _ = s.A.popitem(last=False)
            else:
                v, _ = s.F.popitem(last=False)
                if s.detrain:
                    s.train(s.sig[v], False)
            del s.sig[v]; s.ghost(v)

    def ghost(s, v):
        s.G[v] = 1
        if len(s.G) > s.gc:
            s.G.popitem(last=False)


class Mock:
    """Mockingjay-like: victim = largest |predicted next use - now|; a newcomer farther than
    the victim bypasses."""
    def __init__(s, cap, spec, hist=8, overdue_first=False):
        s.overdue_first = overdue_first; s.G = OrderedDict(); s.gc = 4 * cap
        s.cap = cap; s.sigf, _ = sigfn(spec); s.rdp = {}; s.now = 0; s.seq = 0
        s.inf = hist * cap; s.W = hist * cap
        s.pred = {}; s.hmax = []; s.hmin = []; s.last = OrderedDict()

    def has(s, b):
        return b in s.pred

    def rd(s, sg):
        v = [s.rdp[x] for x in sg if x in s.rdp]
        return sum(v) / len(v) if v else s.cap  # untrained: about LRU's horizon

    def train(s, sg, d):
        for x in sg:
            o = s.rdp.get(x)
            s.rdp[x] = d if o is None else o + (d - o) / 4

    def sample(s, b, sg):
        t = s.now; last = s.last
        while last:
            v = next(iter(last))
            t0, g = last[v]
            if t - t0 < s.W:
                break
            del last[v]; s.train(g, s.inf)
        e = last.pop(b, None)
        if e is not None:
            s.train(e[1], t - e[0])
        last[b] = (t, sg)

    def victim(s):
        while True:
            p, q, v = s.hmax[0]
            if s.pred.get(v) == (-p, q):
                break
            heapq.heappop(s.hmax)
        while True:
            p2, q2, v2 = s.hmin[0]
            if s.pred.get(v2) == (p2, q2):
                break
            heapq.heappop(s.hmin)
        far, over = -p - s.now, s.now - p2
        if s.overdue_first and over > 0:
            return v2, s.inf + over  # overdue: taken for dead, the oldest overdue first
        return (v, far) if far >= over else (v2, over)

    def access(s, r, k):
        rh = sim.hsh(r[0])
        for i in range(len(r) - 1, -1, -1):
            b = r[i]; s.now += 1
            g = b in s.pred
            if b in s.G:
                del s.G[b]; g = True
            sg = s.sigf(r, i, k, rh, g)
            if sampled(b):
                s.sample(b, sg)
            p = s.now + s.rd(sg)
            if b not in s.pred and len(s.pred) >= s.cap:
                v, sc = s.victim()
                if p - s.now > sc:
                    s.ghost(b)
                    continue  # bypass
                del s.pred[v]; s.ghost(v)
            s.seq += 1
            s.pred[b] = (p, s.seq)
            heapq.heappush(s.hmax, (-p, s.seq, b)); heapq.heappush(s.hmin, (p, s.seq, b))
            if len(s.hmax) > 4 * s.cap + 64:
                s.hmax = [(-x[0], x[1], v) for v, x in s.pred.items()]; heapq.heapify(s.hmax)
                s.hmin = [(x[0], x[1], v) for v, x in s.pred.items()]; heapq.heapify(s.hmin)


    def ghost(s, v):
        s.G[v] = 1
        if len(s.G) > s.gc:
            s.G.popitem(last=False)


def optimum(reqs, cap):
    """belady.py's: MIN with bypass, next use per access, prefix counting."""
    seq = [b for r in reqs for b in r]
    nxt = [0] * len(seq); last = {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i], 1 << 62); last[seq[i]] = i
    incache = {}; heap = []; hits = 0; i = 0
    for r in reqs:
        pref = True
        for b in r:
            if pref and b in incache:
                hits += 1
            else:
                pref = False
            if b not in incache and len(incache) >= cap:
                while True:
                    nu, v = heap[0]
                    if incache.get(v) == -nu:
                        break
                    heapq.heappop(heap)
                if -heap[0][0] <= nxt[i]:
                    i += 1; continue
                heapq.heappop(heap); del incache[v]
            incache[b] = nxt[i]; heapq.heappush(heap, (-nxt[i], b)); i += 1
    return hits / len(seq)


def opt_labels(reqs, cap):
    """Per request, per position: True if Belady MIN with bypass at cap (belady.py's, prefix
    counting) holds the block from this access to its next one (the future known)."""
    seq = [b for r in reqs for b in r]
    nxt = [0] * len(seq); last = {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i], 1 << 62); last[seq[i]] = i
    lab = [False] * len(seq); prev = {}
    incache = {}; heap = []; i = 0
    for r in reqs:
        for b in r:
            if b in prev and b in incache:
                lab[prev[b]] = True
            prev[b] = i
            if b not in incache and len(incache) >= cap:
                while True:
                    nu, v = heap[0]
                    if incache.get(v) == -nu:
                        break
                    heapq.heappop(heap)
                if -heap[0][0] <= nxt[i]:
                    i += 1; continue
                heapq.heappop(heap); del incache[v]
            incache[b] = nxt[i]; heapq.heappush(heap, (-nxt[i], b)); i += 1
    out = []; i = 0
    for r in reqs:
        out.append(lab[i:i + len(r)]); i += len(r)
    return out


def oracle_sigs(reqs, spec):
    """State-free signatures per access: 'class' (prefix-learn's, its prefix-cached bit from an
    unlimited cache, as sim.class_rates), 'seen' (the block read before), 'root' (4096 buckets),
    'rootseen' (the prompt's root started an earlier request); '+' joins them into one key."""
    feats = spec.split('+'); seen = set(); roots = set(); out = []
    for r in reqs:
        k = 0
        for b in r:
            if b in seen:
                k += 1
            else:
                break
        rh = sim.hsh(r[0]); rs = r[0] in roots; row = []
        for i, b in enumerate(r):
            key = []
            for f in feats:
                key.append(sim.feat(r, i, k) if f == 'class' else b in seen if f == 'seen' else
                           rh % TAB if f == 'root' else rs if f == 'rootseen' else None)
            row.append(tuple(key))
        for b in r:
            seen.add(b)
        roots.add(r[0])
        out.append(row)
    return out


class OracleHawk(Hawk):
    """The avlru frame fed the future: 'opt-admit' (each access's own OPT label: friendly iff
    MIN at this capacity holds the block to its next use) or 'optrate-SIG@T' (friendly iff
    the signature's share of OPT-held accesses over the whole trace is at least T)."""
    def __init__(s, cap, reqs, v):
        Hawk.__init__(s, cap, 'lru')
        s.lab = opt_labels(reqs, cap); s.n = -1
        s.online = v.startswith('optonline-')
        if v == 'opt-admit':
            s.rate = None
        elif s.online:  # exact labels, each learned when it is known: at the block's next use
            s.sg = oracle_sigs(reqs, v[len('optonline-'):])  # or 8 capacities later
            s.rate = {}; s.pend = OrderedDict(); s.t = 0
            s.counts = os.environ.get('COUNTS') == '1'; s.cnt = {}
            s.exp = float(os.environ.get('EXP', '8'))
        else:
            spec, _, th = v[len('optrate-'):].partition('@')
            s.th = float(th or 0.5); s.sg = oracle_sigs(reqs, spec)
            st = defaultdict(lambda: [0, 0])
            for row, lr in zip(s.sg, s.lab):
                for x, y in zip(row, lr):
                    st[x][0] += 1; st[x][1] += y
            s.rate = {x: y[1] / y[0] for x, y in st.items()}

    def learn(s, sg, y):
        if s.counts:  # COUNTS=1: the signature's share of OPT-held accesses so far, not 3 bits
            c = s.cnt.setdefault(sg, [0, 0]); c[0] += 1; c[1] += y
            s.rate[sg] = 4 if c[1] * 2 >= c[0] else 0
            return
        c = s.rate.get(sg, 4)
        s.rate[sg] = min(7, c + 1) if y else max(0, c - 1)

    def access(s, r, k):
        s.n += 1
        n = s.n; front = []
        for i in range(len(r) - 1, -1, -1):
            b = r[i]
            if s.online:
                s.t += 1
                while s.pend:
                    x = next(iter(s.pend))
                    if s.t - s.pend[x][0] < s.exp * s.cap:
                        break
                    s.learn(s.pend.pop(x)[1], False)  # not back within EXP capacities: averse
                e = s.pend.pop(b, None)
                if e:
                    s.learn(*e[1:])
                sg = s.sg[n][i]
                s.pend[b] = (s.t, sg, s.lab[n][i])
                fr = s.rate.get(sg, 4) >= 4
            else:
                fr = s.lab[n][i] if s.rate is None else s.rate[s.sg[n][i]] >= s.th
            s.F.pop(b, None); s.A.pop(b, None)
            if fr:
                s.F[b] = 1
            else:
                s.A[b] = 1; front.append(b)
        for b in reversed(front):
            s.A.move_to_end(b, last=False)
        while len(s.F) + len(s.A) > s.cap:
            (s.A if s.A else s.F).popitem(last=False)


def main():
    divs = [int(x) for x in os.environ.get('DIVS', '4,8,2').split(',')]
    sigs = os.environ.get('SIGS', 'classghost,classghost+root,classghost+root:seg@2,'
                          'hit+ghost+root:seg3,mjo-classghost+root').split(',')
    base = [x for x in os.environ.get('BASE', 'lru,adapt3,class-oracle').split(',') if x]
    for p in sys.argv[1:]:
        reqs = sim.load(p)
        uses = defaultdict(int)
        for r in reqs:
            for b in r:
                uses[b] += 1
        rare = None
        for div in divs:
            cap = len(uses) // div
            out = []
            for name in base:
                if name == 'lru':
                    out.append('lru %.4f' % sim.run(reqs, sim.LRU(cap)))
                elif name == 'adapt3':
                    out.append('adapt3 %.4f' % sim.run(reqs, sim.Adapt3(cap)))
                elif name == 'class-oracle':
                    if rare is None:
                        rare = {c for c, v in sim.class_rates(reqs, uses).items() if v < 0.4}
                    g = sim.Ghosted(cap, lambda r, i, k: sim.feat(r, i, k) not in rare)
                    out.append('class-oracle %.4f' % sim.run(reqs, g))
            if os.environ.get('OPT'):
                out.append('opt %.4f' % optimum(reqs, cap))
            for v in sigs:
                if v.startswith('opt'):
                    out.append('%s %.4f' % (v, sim.run(reqs, OracleHawk(cap, reqs, v))))
                elif v.startswith('mj-') or v.startswith('mjo-'):
                    m = Mock(cap, v.partition('-')[2], overdue_first=v.startswith('mjo-'))
                    out.append('%s %.4f' % (v, sim.run(reqs, m)))
                else:
                    spec, _, mode = v.partition(':')
                    mode, _, hist = mode.partition('@')  # ':MODE@H': a history of H capacities
                    hk = Hawk(cap, spec, mode or 'avlru', float(hist) if hist else 8)
                    out.append('hawk-%s %.4f' % (v, sim.run(reqs, hk)))
            print(os.path.basename(p), '1/%d' % div, ' | '.join(out), flush=True)


if __name__ == '__main__':
    main()
