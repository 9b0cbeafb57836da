#!/usr/bin/env python3
"""sim.py TRACE... : online policies beyond LRU, simulated (doc/policies.md, "What else was tried").

Prefix semantics as kvtier replay and cli/optimum.c: a request's hits are its leading blocks
present; then each of its blocks is inserted or refreshed, tail first (a chain ends head newest).
One cache of a quarter of the trace's distinct blocks.  Prints, per trace, the block hit ratio of:

  lru            LRU (the prefix policy's order)
  arc            ARC (Megiddo & Modha, FAST'03): recency/frequency split adapted by ghost hits
  slru50         segmented LRU, half protected (blocks hit once or more)
  lhd            hit density per class and age (Beckmann et al., NSDI'18), classes: hits so far
                 x blocks from the prompt's end; victims: the class tail of lowest density
  class-oracle   bypass the first sighting of blocks whose class (log2 prompt blocks, prefix
                 cached, blocks from the end) is reused less than 40 % of the time, with the
                 class rates taken from the whole trace in advance (an upper bound for any
                 predictor on those signals) and a ghost of 4x capacity
  reuse-oracle   LRU that never admits a block that will not be read again (the future known)

With --new (2026-12-01, issue 19 third pass), instead: lru, and
  seg95          segmented: a new block starts on probation (P), a block hit, or back while a
                 ghost of 4x capacity remembers it, goes to main (M); victims from P while M
                 holds at most 95 %
  adapt          the cache runs LRU or seg95, whichever of two miniature simulations (Waldspurger
                 et al., ATC'17: caches of C/16 fed the blocks whose hash is 0 mod 16) hit more
                 in the recent past (counts halved every 4 simulated capacities; seg95 must
                 beat LRU by 2 %)
  min-nofirst    a bound: Belady MIN with bypass that never caches a block at its first
                 sighting.  Hits on a block's third or later use, counted as found (each block
                 on its own), are at most this for ANY policy; the optimum's other hits are on
                 second uses, which only a predictor of first reuse can keep on purpose.

With --new and ROOT=1 (2026-12-02, fifth pass): lru, seg95, and rootseg95 (seg95 whose requests
with a root seen before put their blocks in main), adapt, adapt-root.  With --new and HINT=1:
lru, hint-block and hint-prompt (seg95 with an application's retain hint, from the future: per
block "read again", per prompt "a later request has this root"; NOISE=recall,fp degrades the
prompt hint), and adapt-hint-prompt (prefix-adapt whose segmented simulation takes the hint).
"""
import json, sys
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from tracefile import requests as load
from collections import OrderedDict, defaultdict




def run(reqs, pol):
    hits = total = 0
    for r in reqs:
        k = 0
        for b in r:
            if pol.has(b):
                k += 1
            else:
                break
        hits += k
        total += len(r)
        pol.access(r, k)
    return hits / total


class LRU:
    def __init__(s, cap, admit=None):
        s.c = OrderedDict(); s.cap = cap; s.admit = admit

    def has(s, b):
        return b in s.c

    def access(s, r, k):
        for i in range(len(r) - 1, -1, -1):
            b = r[i]
            if b in s.c:
                s.c.move_to_end(b)
            elif s.admit is None or s.admit(r, i, k):
                s.c[b] = 1
                if len(s.c) > s.cap:
                    s.c.popitem(last=False)


class ARC:
    def __init__(s, c):
        s.c = c; s.p = 0.0; s.T1, s.T2, s.B1, s.B2 = OrderedDict(), OrderedDict(), OrderedDict(), OrderedDict()

    def has(s, b):
        return b in s.T1 or b in s.T2

    def replace(s, in_b2):
        if s.T1 and (len(s.T1) > s.p or (in_b2 and len(s.T1) == int(s.p))):
            b, _ = s.T1.popitem(last=False); s.B1[b] = 1
        else:
            b, _ = s.T2.popitem(last=False); s.B2[b] = 1

    def one(s, x):
        c = s.c
        if x in s.T1:
            del s.T1[x]; s.T2[x] = 1; return
        if x in s.T2:
            s.T2.move_to_end(x); return
        if x in s.B1:
            s.p = min(c, s.p + max(len(s.B2) / len(s.B1), 1)); s.replace(False); del s.B1[x]; s.T2[x] = 1; return
        if x in s.B2:
            s.p = max(0, s.p - max(len(s.B1) / len(s.B2), 1)); s.replace(True); del s.B2[x]; s.T2[x] = 1; return
        l1 = len(s.T1) + len(s.B1)
        if l1 == c:
            if len(s.T1) < c:
                s.B1.popitem(last=False); s.replace(False)
            else:
                s.T1.popitem(last=False)
        elif l1 < c and l1 + len(s.T2) + len(s.B2) >= c:
            if l1 + len(s.T2) + len(s.B2) == 2 * c:
                s.B2.popitem(last=False)
            s.replace(False)
        s.T1[x] = 1

    def access(s, r, k):
        for b in reversed(r):
            s.one(b)


class SLRU:
    def __init__(s, c, f):
        s.c = c; s.pc = int(c * f); s.P = OrderedDict(); s.T = OrderedDict()

    def has(s, b):
        return b in s.P or b in s.T

    def access(s, r, k):
        for b in reversed(r):
            if b in s.P:
                s.P.move_to_end(b); continue
            if b in s.T:
                del s.T[b]; s.P[b] = 1
                if len(s.P) > s.pc:
                    v, _ = s.P.popitem(last=False); s.T[v] = 1
            else:
                s.T[b] = 1
            while len(s.P) + len(s.T) > s.c:
                s.T.popitem(last=False)


class LHD:
    def __init__(s, cap, nb=128, decay=0.9):
        s.cap = cap; s.q = defaultdict(OrderedDict); s.cls = {}; s.t = 0; s.W = max(1, cap // 16); s.nb = nb
        s.H = defaultdict(lambda: [0.0] * nb); s.E = defaultdict(lambda: [0.0] * nb)
        s.hd = {}; s.nxt = cap; s.decay = decay; s.size = 0

    def has(s, b):
        return b in s.cls

    def age(s, ts):
        return min(s.nb - 1, (s.t - ts) // s.W)

    def recompute(s):
        for c in set(s.H) | set(s.E):
            H, E = s.H[c], s.E[c]
            hd = [0.0] * s.nb; hsum = esum = life = 0.0
            for a in range(s.nb - 1, -1, -1):
                hsum += H[a]; esum += H[a] + E[a]; life += esum
                hd[a] = hsum / life if life > 0 else 0.0
            s.hd[c] = hd
            for a in range(s.nb):
                H[a] *= s.decay; E[a] *= s.decay

    def access(s, r, k):
        n = len(r)
        for i in range(n - 1, -1, -1):
            b = r[i]; s.t += 1
            if b in s.cls:
                c, ts, nh = s.cls[b]
                s.H[c][s.age(ts)] += 1
                del s.q[c][b]
                nh += 1
            else:
                nh = 0; s.size += 1
            c = (min(nh, 3), min(n - 1 - i, 2))
            s.cls[b] = (c, s.t, nh); s.q[c][b] = 1
            while s.size > s.cap:
                best = None
                for cc, q in s.q.items():
                    if q:
                        v = next(iter(q)); a = s.age(s.cls[v][1]); hd = s.hd.get(cc)
                        d = hd[a] if hd else 1.0
                        if best is None or d < best[0]:
                            best = (d, cc, v, a)
                _, cc, v, a = best
                s.E[cc][a] += 1; del s.q[cc][v]; del s.cls[v]; s.size -= 1
            if s.t >= s.nxt:
                s.recompute(); s.nxt = s.t + s.cap


def feat(r, i, k):
    n = len(r)
    return (min(n.bit_length(), 7), k > 0, min(n - 1 - i, 3))


def class_rates(reqs, uses):
    seen = set(); st = defaultdict(lambda: [0, 0])
    for r in reqs:
        k = 0
        for b in r:
            if b in seen:
                k += 1
            else:
                break
        for i, b in enumerate(r):
            if b not in seen:
                seen.add(b); c = feat(r, i, k); st[c][0] += 1; st[c][1] += uses[b] > 1
    return {c: v[1] / v[0] for c, v in st.items()}


class Ghosted(LRU):
    """Admit a block on its first sighting only if admit(r, i, k); later sightings (ghost) always."""
    def __init__(s, cap, admit, gm=4):
        super().__init__(cap); s.g = OrderedDict(); s.gm = gm; s.first = admit
        s.admit = s._admit

    def _admit(s, r, i, k):
        b = r[i]
        if b in s.g:
            del s.g[b]; return True
        if s.first(r, i, k):
            return True
        s.g[b] = 1
        if len(s.g) > s.gm * s.cap:
            s.g.popitem(last=False)
        return False


def hsh(b):
    x = (b * 0x9E3779B97F4A7C15 + 12345) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 32)


class Seg:
    """f = 0: LRU; f > 0: probation + main (main at most f of the capacity), ghost of g x cap."""
    def __init__(s, cap, f, g=4):
        s.cap = cap; s.P = OrderedDict(); s.M = OrderedDict(); s.G = OrderedDict(); s.f = f; s.gc = int(g * cap)

    def has(s, b):
        return b in s.P or b in s.M

    def evict(s):
        while len(s.P) + len(s.M) > s.cap:
            if s.f == 0:
                v, _ = (s.P if s.P else s.M).popitem(last=False)
            elif s.M and (len(s.M) > s.f * s.cap or not s.P):
                v, _ = s.M.popitem(last=False)
            else:
                v, _ = s.P.popitem(last=False)
            s.G[v] = 1
            if len(s.G) > s.gc:
                s.G.popitem(last=False)

    def one(s, b):
        hit = s.has(b)
        if b in s.M:
            s.M.move_to_end(b)
        elif b in s.P:
            del s.P[b]; s.M[b] = 1
        elif s.f == 0:
            s.M[b] = 1
        elif b in s.G:
            del s.G[b]; s.M[b] = 1
        else:
            s.P[b] = 1
        s.evict()
        return hit

    def access(s, r, k):
        for b in reversed(r):
            s.one(b)


class RootSeg(Seg):
    """seg95 plus the prompt's own history: a request whose first block (its root) was seen in
    an earlier request, while a ghost of rg x cap roots remembers it, puts its missing blocks
    in main, not on probation (a document asked again is asked whole)."""
    def __init__(s, cap, f, g=4, rg=4):
        Seg.__init__(s, cap, f, g); s.R = OrderedDict(); s.rc = int(rg * cap); s.again = False

    def one(s, b):
        if s.again and s.f and not s.has(b) and b not in s.G:
            s.M[b] = 1
            s.evict()
            return False
        return Seg.one(s, b)

    def access(s, r, k):
        root = r[0]
        s.again = root in s.R
        s.R[root] = 1
        s.R.move_to_end(root)
        if len(s.R) > s.rc:
            s.R.popitem(last=False)
        Seg.access(s, r, k)
        s.again = False


class HintSeg(Seg):
    """seg95 whose new blocks go to main when the caller's hint says so: hint(r, i) is called
    for each block of each request before it is inserted (an application's retain hint)."""
    def __init__(s, cap, f, hint, g=4):
        Seg.__init__(s, cap, f, g); s.hint = hint

    def access(s, r, k):
        for i in range(len(r) - 1, -1, -1):
            b = r[i]
            if not s.has(b) and b not in s.G and s.hint(r, i):
                s.M[b] = 1
                s.evict()
            else:
                s.one(b)


class AdaptHint:
    """Adapt whose segmented simulation and real cache take the hint (a hinted new block starts
    in main): the simulations decide whether the hinted segmented order beats LRU, so a hint
    that is wrong too often costs nothing (LRU mode)."""
    def __init__(s, cap, hint, f=0.95, S=16, margin=0.02, win=4):
        s.real = Seg(cap, 0); s.S = S; s.f = f; s.hint = hint
        s.sh = [Seg(max(1, cap // S), 0), Seg(max(1, cap // S), f)]
        s.only = [0, 0]; s.hits = [0, 0]; s.n = 0; s.seen = 0; s.win = win * max(64, cap // S); s.switches = 0

    def has(s, b):
        return s.real.has(b)

    @staticmethod
    def put(c, b, h):
        if h and c.f and not c.has(b) and b not in c.G:
            c.M[b] = 1; c.evict(); return False
        return c.one(b)

    def access(s, r, k):
        for i in range(len(r) - 1, -1, -1):
            b = r[i]; h = s.hint(r, i)
            if hsh(b) % s.S == 0:
                hit = [s.put(x, b, h) for x in s.sh]
                s.hits[0] += hit[0]; s.hits[1] += hit[1]
                if hit[0] != hit[1]:
                    s.only[1 if hit[1] else 0] += 1
                s.seen += 1; s.n += 1
                if s.n >= s.win:
                    s.n = 0; s.only = [x // 2 for x in s.only]; s.hits = [x // 2 for x in s.hits]
                if s.seen >= 256:  # evict.c's rule: 2 % and a sign test at z = 2
                    a, c = (s.only[0], s.only[1]) if s.real.f else (s.only[1], s.only[0])
                    better = a > c and a - c > (s.hits[1 if s.real.f else 0]) // 50 + 1 and (a - c) ** 2 > 4 * (a + c)
                    f = (0 if better else s.f) if s.real.f else (s.f if better else 0)
                    if f != s.real.f:
                        s.switches += 1; s.real.f = f
            s.put(s.real, b, h)


def hints(reqs):
    """Two oracle hints, the future known: per block (it will be read again) and per prompt
    (a later request has the same first block: a router that knows a document is shared)."""
    left = defaultdict(int); roots = defaultdict(int)
    for r in reqs:
        roots[r[0]] += 1
        for b in r:
            left[b] += 1
    state = {'left': left, 'roots': roots}

    class Track:
        def __init__(s, pol):
            s.pol = pol

        def has(s, b):
            return s.pol.has(b)

        def access(s, r, k):
            state['roots'][r[0]] -= 1
            for b in r:
                state['left'][b] -= 1
            s.pol.access(r, k)
    return state, Track


class Adapt:
    def __init__(s, cap, f=0.95, S=16, margin=0.02, win=4, seg=Seg):
        s.real = seg(cap, 0); s.S = S; s.f = f; s.sh = [seg(max(1, cap // S), 0), seg(max(1, cap // S), f)]
        s.sc = [0.0, 0.0]; s.n = 0; s.win = win * cap // S; s.margin = margin; s.switches = 0

    def has(s, b):
        return s.real.has(b)

    def access(s, r, k):
        if isinstance(s.real, RootSeg):  # the request's root, as RootSeg.access notes it
            for x in [s.real] + s.sh:
                x.again = r[0] in x.R
                x.R[r[0]] = 1
                x.R.move_to_end(r[0])
                if len(x.R) > x.rc:
                    x.R.popitem(last=False)
        for b in reversed(r):
            if hsh(b) % s.S == 0:
                for i, sh in enumerate(s.sh):
                    s.sc[i] += sh.one(b)
                s.n += 1
                if s.n >= s.win:
                    s.n = 0; s.sc = [x / 2 for x in s.sc]
            f = s.f if s.sc[1] > s.sc[0] * (1 + s.margin) + 1 else 0
            if f != s.real.f:
                s.switches += 1; s.real.f = f
            s.real.one(b)


def min_nofirst(reqs, cap):
    import heapq
    pos = defaultdict(list); t = 0
    for r in reqs:
        for b in r:
            pos[b].append(t); t += 1
    cache = {}; heap = []; found = tot = 0; seen = defaultdict(int); t = 0
    for r in reqs:
        for b in r:
            tot += 1; seen[b] += 1
            nu = pos[b][seen[b]] if seen[b] < len(pos[b]) else 1 << 60
            if b in cache:
                found += 1; cache[b] = nu; heapq.heappush(heap, (-nu, b)); continue
            if seen[b] == 1 or nu == 1 << 60:
                continue
            if len(cache) >= cap:
                while True:
                    nn, v = heapq.heappop(heap)
                    if cache.get(v) == -nn:
                        break
                if -nn <= nu:
                    heapq.heappush(heap, (nn, v)); continue
                del cache[v]
            cache[b] = nu; heapq.heappush(heap, (-nu, b))
    return found / tot


def main_new(paths, div):
    for p in paths:
        reqs = load(p)
        cap = len(set(b for r in reqs for b in r)) // div
        ad = Adapt(cap)
        if os.environ.get('HINT'):  # an application's retain hint, oracle (doc/policies.md)
            out = ['lru %.4f' % run(reqs, LRU(cap))]
            for name, kind in (('hint-block', 'block'), ('hint-prompt', 'prompt')):
                st, Track = hints(reqs)
                if kind == 'block':
                    h = (lambda st: lambda r, i: st['left'][r[i]] > 0)(st)
                else:
                    # NOISE="recall,false-positive rate": a router that knows some shared
                    # documents, and hints some that are not (per prompt, fixed per request)
                    rec, fp = (float(x) for x in os.environ.get('NOISE', '1,0').split(','))
                    import random
                    rnd = random.Random(1); memo = {}

                    def h(r, i, st=st):
                        key = id(r)
                        if key not in memo:
                            memo.clear()
                            memo[key] = rnd.random() < (rec if st['roots'][r[0]] > 0 else fp)
                        return memo[key]
                out.append('%s %.4f' % (name, run(reqs, Track(HintSeg(cap, 0.95, h)))))
                if kind == 'prompt':
                    st, Track = hints(reqs)
                    rnd.seed(1); memo.clear()
                    ah = AdaptHint(cap, lambda r, i, st=st: h(r, i, st))
                    out.append('adapt-hint-prompt %.4f (%d switches)' % (run(reqs, Track(ah)), ah.switches))
            print(p.split('/')[-1], '1/%d' % div, ' | '.join(out), flush=True)
            continue
        if os.environ.get('ROOT'):  # the prompt's own history (doc/policies.md, "Fifth pass")
            ar = Adapt(cap, seg=RootSeg)
            out = ['lru %.4f' % run(reqs, LRU(cap)), 'seg95 %.4f' % run(reqs, Seg(cap, 0.95)),
                   'rootseg95 %.4f' % run(reqs, RootSeg(cap, 0.95)),
                   'adapt %.4f (%d switches)' % (run(reqs, ad), ad.switches),
                   'adapt-root %.4f (%d switches)' % (run(reqs, ar), ar.switches)]
            print(p.split('/')[-1], '1/%d' % div, ' | '.join(out), flush=True)
            continue
        out = ['lru %.4f' % run(reqs, LRU(cap)), 'seg95 %.4f' % run(reqs, Seg(cap, 0.95)),
               'adapt %.4f (%d switches)' % (run(reqs, ad), ad.switches), 'min-nofirst %.4f' % min_nofirst(reqs, cap)]
        print(p.split('/')[-1], '1/%d' % div, ' | '.join(out), flush=True)


def main():
    if sys.argv[1] == '--new':
        for div in (4, 8, 2):
            main_new(sys.argv[2:], div)
        return
    for p in sys.argv[1:]:
        reqs = load(p)
        uses = defaultdict(int)
        for r in reqs:
            for b in r:
                uses[b] += 1
        cap = len(uses) // 4
        rates = class_rates(reqs, uses)
        rare = {c for c, v in rates.items() if v < 0.4}
        pols = [('lru', LRU(cap)), ('arc', ARC(cap)), ('slru50', SLRU(cap, 0.5)), ('lhd', LHD(cap)),
                ('class-oracle', Ghosted(cap, lambda r, i, k: feat(r, i, k) not in rare)),
                ('reuse-oracle', None)]
        out = []
        for name, pol in pols:
            if pol is None:
                left = dict(uses)

                def fut(r, i, k):
                    return left[r[i]] > 0
                pol = LRU(cap, fut)

                class Wrap:
                    def has(s, b):
                        return pol.has(b)

                    def access(s, r, k):
                        for b in r:
                            left[b] -= 1
                        pol.access(r, k)
                out.append('%s %.4f' % (name, run(reqs, Wrap())))
            else:
                out.append('%s %.4f' % (name, run(reqs, pol)))
        print(p.split('/')[-1], ' | '.join(out), flush=True)


main()
