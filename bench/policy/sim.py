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

With --next (2026-12-02, seventh pass): main ordered by predicted next use instead of recency,
inside a model of the store's prefix-adapt (adapt3: LRU / segmented long / segmented short
chosen by three 1/16 simulations, evict.c's switching rule; ghost of 4.5 keys a block in 8
generations, the short horizon its newest).  Per trace and capacity: lru, then adapt3 with
main's victim taken, among the K oldest of main, by RULE:
  lru            the oldest (the store today)
  overdue:K      the most overdue: time since last use / the block's last inter-use gap
  loggap:K       the same in log2 (a byte each: what the store could keep)
  hyper:K        lowest hits / time in cache (hyperbolic caching, Blankstein et al., ATC'17)
  arc            main's share adapted ARC-style by ghost hits (a block back from probation's
                 ghost shrinks main by C/256, from main's grows it; 93..99 %) instead of 95 %
  gapfar:K       the farthest predicted next use, last use + last gap
and, for the segmented mode alone: seg:F[:RULE:K] (main at most F, ordered by RULE),
main-oracle:K (main's victim, among its K oldest, the block used next farthest: the future
known), p-oracle:K (the same for probation), chain-RULE:K (main's victim among the oldest
blocks of its K oldest chains, by RULE, 'oracle' or a prompt's signal: CSeg.score).  A block
back from the ghost takes its ghost age as its gap (EXACT_GAP=1: its exact gap).  VARS
(environment) picks the columns, SEEDS the sampling seeds (medians and [min..max]).
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


# ---- --next: main ordered by predicted next use (seventh pass) ----

class Ghost:
    """ghost.c's shape: near-FIFO, size keys, an entry's age in generations of size / 8 adds."""
    def __init__(s, size):
        s.d = OrderedDict(); s.size = max(8, int(size)); s.adds = 0

    def add(s, b):
        s.adds += 1
        s.d[b] = s.adds
        s.d.move_to_end(b)
        while len(s.d) > s.size:
            s.d.popitem(last=False)

    def take_age(s, b):
        """Generations since b was added (0..7), -1 if not remembered; forgets b."""
        a = s.d.pop(b, None)
        return -1 if a is None else (s.adds - a) * 8 // s.size


class GSeg:
    """One of prefix-adapt's modes: f = 0 LRU; f > 0 probation (P) + main (M, at most f of the
    capacity, or the ARC-like share p), a block back within h ghost generations to M (8: the long
    horizon, 1: the short one).  In the segmented modes M's victim is chosen by rule among its K
    oldest: 'lru' (the oldest), 'overdue', 'loggap', 'hyper', 'gapfar' (sim.py's header).  With
    EXACT_GAP=1 a block back from the ghost takes its exact gap (every block's last access kept),
    else its ghost age in accesses' stead (generations x size / 8)."""
    exact = bool(os.environ.get('EXACT_GAP'))

    def __init__(s, cap, f, h=8, rule='lru', K=8, ghost=None, arc=False):
        s.cap = cap; s.P = OrderedDict(); s.M = OrderedDict(); s.f = f; s.h = h
        s.G = ghost if ghost is not None else Ghost(4.5 * cap)
        s.rule = rule; s.K = K; s.t = 0
        s.last = {}; s.gap = {}; s.nh = {}; s.ins = {}; s.ever = {}
        s.arc = arc; s.p = f * cap; s.gseg = {}

    def has(s, b):
        return b in s.P or b in s.M

    def score(s, b):
        """Larger: evicted first."""
        age = s.t - s.last[b]
        g = s.gap.get(b)
        if s.rule == 'overdue':
            return age / g if g else 1e18
        if s.rule == 'loggap':
            return age.bit_length() - g.bit_length() if g else 99
        if s.rule == 'hyper':
            return -(s.nh.get(b, 0) + 1) / (s.t - s.ins[b] + 1)
        return s.last[b] + g if g else 1e18  # gapfar: the predicted next use

    def pick_main(s):
        if s.rule == 'lru' or s.f == 0 or len(s.M) <= 1:  # LRU mode: as its simulation
            return next(iter(s.M))
        best = None; bs = None
        for i, b in enumerate(s.M):
            if i >= s.K:
                break
            sc = s.score(b)
            if bs is None or sc > bs:
                bs = sc; best = b
        return best

    def pick_small(s):
        return next(iter(s.P))

    def evict(s):
        while len(s.P) + len(s.M) > s.cap:
            mx = s.p if s.arc else s.f * s.cap
            if s.P and (s.f == 0 or not s.M or len(s.M) <= mx):
                v = s.pick_small(); del s.P[v]; seg = 0
            else:
                v = s.pick_main(); del s.M[v]; seg = 1
            s.G.add(v)
            if s.arc:
                s.gseg[v] = seg
            for d in (s.last, s.gap, s.nh, s.ins):
                d.pop(v, None)

    def one(s, b, retain=False):
        s.t += 1
        hit = s.has(b)
        if hit:
            s.gap[b] = s.t - s.last[b]
            s.nh[b] = s.nh.get(b, 0) + 1
        if b in s.M:
            s.M.move_to_end(b)
        elif b in s.P:
            del s.P[b]; s.M[b] = 1
        else:
            s.ins[b] = s.t
            age = s.G.take_age(b)
            if s.f == 0:
                s.M[b] = 1
            elif 0 <= age < s.h:
                s.M[b] = 1
                if s.arc:  # back from P's ghost: P was too small; from M's: M was
                    seg = s.gseg.pop(b, None)
                    if seg == 0:
                        s.p = max(0.93 * s.cap, s.p - max(1, s.cap / 256))
                    elif seg == 1:
                        s.p = min(0.99 * s.cap, s.p + max(1, s.cap / 256))
                if s.exact:
                    s.gap[b] = s.t - s.ever.get(b, s.t - 1)
                else:
                    s.gap[b] = max(1, (age + 1) * s.G.size // 8)
            else:
                s.P[b] = 1
        s.last[b] = s.t
        if s.exact:
            s.ever[b] = s.t
        s.evict()
        return hit

    def access(s, r, k):
        for b in reversed(r):
            s.one(b)

    def setf(s, f):
        if f and not s.f:  # entering segmented mode: M's never reused to P
            for b in list(s.M):
                if b not in s.gap:
                    del s.M[b]; s.P[b] = 1
        s.f = f


class Adapt3:
    """The store's prefix-adapt: the real cache in LRU / segmented long / segmented short mode,
    chosen by three simulations at cap / 16 fed 1 key in 16 (evict.c's rule: another mode beats
    the current one by 2 % and a sign test at z = 2; counts halved every 4 simulated capacities),
    the segmented ones and the real cache ordering M by rule."""
    def __init__(s, cap, rule='lru', K=8, arc=False, S=16, seed=0):
        s.real = GSeg(cap, 0, 8, rule, K, None, arc); s.S = S; s.seed = seed
        c = max(1, cap // S)
        s.sims = [GSeg(c, 0), GSeg(c, 0.95, 8, rule, K, None, arc), GSeg(c, 0.95, 1, rule, K, None, arc)]
        s.mode = 0; s.hits = [0] * 3; s.only = [[0] * 3 for _ in range(3)]; s.seen = 0; s.n = 0
        s.win = 4 * max(64, c); s.switches = 0

    def has(s, b):
        return s.real.has(b)

    access = GSeg.access

    @staticmethod
    def better(mine, other, other_hits):
        d = mine - other
        return d > 0 and d > other_hits // 50 + 1 and d * d > 4 * (mine + other)

    def one(s, b):
        if (hsh(b ^ s.seed) >> 16) % s.S == 0:
            h = [x.one(b) for x in s.sims]
            for i in range(3):
                s.hits[i] += h[i]
                for j in range(3):
                    s.only[i][j] += h[i] and not h[j]
            s.seen += 1; s.n += 1
            if s.n >= s.win:
                s.n = 0
                s.hits = [x // 2 for x in s.hits]
                s.only = [[x // 2 for x in row] for row in s.only]
            if s.seen >= 256:
                m = best = s.mode
                for c in range(3):
                    if c != m and s.better(s.only[c][m], s.only[m][c], s.hits[m]) and \
                            (best == m or s.hits[c] > s.hits[best]):
                        best = c
                if best != m:
                    s.mode = best; s.switches += 1
                    s.real.h = 1 if best == 2 else 8
                    s.real.setf(0.95 if best else 0)
        return s.real.one(b)


def oracle_seg(reqs, cap, KM, KP):
    """seg95 whose victim, among the KM oldest of M (or the KP oldest of P), is the block used next
    farthest: the future known, a bound for any reordering within such a window."""
    pos = defaultdict(list); t = 0
    for r in reqs:
        for b in reversed(r):
            t += 1; pos[b].append(t)
    idx = defaultdict(int)
    s = GSeg(cap, 0.95)

    def far(q, K):
        best = None; bs = -1
        for i, b in enumerate(q):
            if i >= K:
                break
            n = pos[b][idx[b]] if idx[b] < len(pos[b]) else 1 << 60
            if n > bs:
                bs = n; best = b
        return best
    s.pick_main = lambda: far(s.M, KM)
    s.pick_small = lambda: far(s.P, KP)

    one = s.one

    def counted(b):
        idx[b] += 1
        return one(b)
    s.one = counted
    return run(reqs, s)


class CSeg(GSeg):
    """Segmented alone whose M victim is chosen among the oldest block of each of the K oldest
    chains (blocks last used by one request, together in prefix's order): rule 'oracle' (used
    next farthest, the future known: fut = (positions, counts)) or a GSeg rule."""
    def __init__(s, cap, f, K, rule, fut=None):
        GSeg.__init__(s, cap, f, 8, rule, K); s.rq = {}; s.n = 0; s.fut = fut
        s.root = {}; s.rcount = defaultdict(int); s.rlast = {}; s.depth = {}; s.rlen = {}

    def access(s, r, k):
        s.n += 1; rt = r[0]
        s.rcount[rt] += 1; s.rlast[rt] = s.t
        for i in range(len(r) - 1, -1, -1):
            b = r[i]
            if s.fut:
                s.fut[1][b] += 1
            s.one(b)
            s.rq[b] = s.n; s.root[b] = rt; s.depth[b] = i; s.rlen[b] = len(r)

    def score(s, b):
        """GSeg's rules and the prompt's: rootfreq (fewest requests with the block's root first),
        rootrecent (root requested longest ago), nhits (fewest hits), deep (farthest from the
        prompt's head), long (longest prompt)."""
        rt = s.root[b]
        if s.rule == 'rootfreq':
            return -s.rcount[rt]
        if s.rule == 'rootrecent':
            return s.t - s.rlast[rt]
        if s.rule == 'nhits':
            return -s.nh.get(b, 0)
        if s.rule == 'deep':
            return s.depth[b]
        if s.rule == 'long':
            return s.rlen[b]
        return GSeg.score(s, b)

    def pick_main(s):
        seen = set(); best = None; bs = None
        for i, b in enumerate(s.M):
            if i >= 4096:
                break
            q = s.rq.get(b)
            if q in seen:
                continue
            seen.add(q)
            if len(seen) > s.K:
                break
            if s.rule == 'oracle':
                pos, idx = s.fut
                sc = pos[b][idx[b]] if idx[b] < len(pos[b]) else 1 << 60
            else:
                sc = s.score(b)
            if bs is None or sc > bs:
                bs = sc; best = b
        return best


def main_next(paths, div):
    """VARS: rule[:K] for Adapt3 (lru, overdue, loggap, hyper, gapfar, arc), seg:F[:RULE:K]
    (segmented alone, M at most F, ordered by RULE), main-oracle:K, p-oracle:K (oracle_seg),
    chain-RULE:K (CSeg)."""
    variants = os.environ.get('VARS', 'lru,overdue:8,overdue:128,loggap:128,hyper:128,arc,'
                              'main-oracle:8,main-oracle:512').split(',')
    seeds = [int(x) for x in os.environ.get('SEEDS', '0,1,2').split(',')]
    for p in paths:
        reqs = load(p)
        cap = len(set(b for r in reqs for b in r)) // div
        out = ['lru %.4f' % run(reqs, GSeg(cap, 0))]
        for v in variants:
            rule, _, arg = v.partition(':')
            if rule == 'seg':  # seg:F or seg:F:RULE:K
                f, _, rk = arg.partition(':')
                r2, _, k2 = rk.partition(':')
                out.append('%s %.4f' % (v, run(reqs, GSeg(cap, float(f), 8, r2 or 'lru', int(k2 or 8)))))
            elif rule.startswith('chain-'):
                fut = None
                if rule == 'chain-oracle':
                    pos = defaultdict(list); t = 0
                    for r in reqs:
                        for b in reversed(r):
                            t += 1; pos[b].append(t)
                    fut = (pos, defaultdict(int))
                out.append('seg95 %s %.4f' % (v, run(reqs, CSeg(cap, 0.95, int(arg), rule[6:], fut))))
            elif rule in ('main-oracle', 'p-oracle'):
                K = int(arg)
                km, kp = (K, 1) if rule == 'main-oracle' else (1, K)
                out.append('seg95 %s %.4f' % (v, oracle_seg(reqs, cap, km, kp)))
            else:
                K = int(arg) if arg else 8
                rs = sorted(run(reqs, Adapt3(cap, 'lru' if rule == 'arc' else rule, K, rule == 'arc', seed=sd))
                            for sd in seeds)
                out.append('adapt3-%s %.4f [%.4f..%.4f]' % (v, rs[len(rs) // 2], rs[0], rs[-1]))
        print(os.path.basename(p), '1/%d' % div, ' | '.join(out), flush=True)



def main():
    if sys.argv[1] == '--next':
        for div in (4, 8, 2):
            main_next(sys.argv[2:], div)
        return
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


if __name__ == '__main__':  # hawkeye.py imports the classes
    main()
