#!/usr/bin/env python3
"""tiers_sim.py TRACE...: DRAM over a victim SSD log, block-granular, against LRU of the same blocks.

Model (kvtier replay's prefix semantics): per request, hits are its leading blocks present
in DRAM or on SSD; then every block is touched (DRAM hit), read from SSD, or put into DRAM.
C = a quarter of the trace's distinct blocks (DIV=n: an n-th), DRAM D = C/4 (LRU), SSD S = C - D records in a
FIFO log (scaled by SF, e.g. SF=0.92 for the 512-byte headers and the open segment) whose
reclamation gives a record read while on SSD a second chance (re-appended at the head),
within BUD (fraction of each 1/16 of the log; 1 = unlimited).  Variants, printed as a
fraction of LRU(C):
  incl    every SSD read promotes to DRAM, the SSD keeps its record (two copies);
  noprom  SSD reads are served and never promoted (the SSD is a CLOCK of DRAM's victims);
  prom2   the first SSD read is served, the second promotes (record kept);
  prom2x  the same, the second read drops the record (exclusive) -- ssd.first_hit=cold;
  prom2c  prom2x with the store's first read before 2026-12-02 (ssd11): a DRAM chunk taken
          for a cold copy at the old end (evicting DRAM's oldest, written down); prom2e
          the same chunk taken and left free (doc/policies.md "The store against its model").
NOTOUCH=1: blocks present past a request's prefix are not touched (the store's put of a
present block answers EXISTS and changes nothing); NOTOUCH=2: the same, but one on SSD is
marked read (ssd.put_touch=on; ADAPT's equivalent: EXISTS=2, EXISTS=3 only in LRU mode --
doc/policies.md "Fourteenth pass"); MODES=prom1age: prom2age (AGE2, 0.75, for second reads)
and a first read of a record older than AGE promotes too; D=N: DRAM of N blocks, not C/4 (the
store's DRAM holds fewer: victims in flight).
Used for doc/policies.md ("Reads from SSD"); the store's own figures come from ssd_ab.py.
PROB=0.1,0.2 (optional) adds a segmented SSD, simulated with prom2x's read rule and an
unlimited second chance: DRAM victims never reused (no DRAM hit, not from SSD) go to a
probation log of that fraction of S, reused ones to the main log; a probation record read
there moves to the main log at reclamation, the others leave ("base": one log, the same
rules).  doc/policies.md "Protecting reused blocks on SSD".

Where the SSD's bytes go (doc/policies.md, same title), each against prom2x:
  MODES=m1,m2  the variants to run (default incl,noprom,prom2,prom2x), also
    prom2k   (a) the second read promotes and keeps the record; DRAM drops the
             block when it evicts it unless its record is older than KEEP (0.5) of
             the log, then it is written again (no dead copy while young);
    prom2age the second read promotes (and drops) only a record older than AGE
             (0.5) of the log; a younger one is served and stays (its dead copy
             would hold room for most of a lap);
  COMPACT=1    (b, its bound) dead records take no room: a free, perfect compaction
               (ADAPT='s log too, since 2026-12-03);
  ORPH=1       (d) a DRAM victim whose parent block is in no tier is not written;
  DEAD=1       print the dead records' share of the log (end, average; ADAPT: average);
  SLOT=oldest,g2,g4,greedy  (b) which slot a full log reuses: the oldest (FIFO), the
             one with fewest live records among the oldest 2 or 4, or of all (read
             records carried as usual, progressive reuse), 16 slots.

ADAPT=skip,prob,keep/skip (2026-12-02, policy11; doc/policies.md "The segmented evidence
  deciding the SSD's write-down"): prefix-adapt's evidence deciding the SSD's write-down.
  Three miniature simulations of the whole capacity C (C/SAMPLE blocks fed the keys whose hash
  is 0 mod SAMPLE, 16 by default, as prefix-adapt's: LRU; segmented with main at most 95 % and
  a ghost of GHS (4.5) x their capacity; the same counting a ghost entry only within HS (0.56)
  of their capacity of evictions, the short horizon) choose the mode (another replaces the
  current one when it hit 2 % more, the best such; counts halved every 4 simulated
  capacities).  In LRU mode everything is written down as prom2x does; DRAM's order stays LRU
  in every mode.  In a segmented mode a DRAM victim never reused (no DRAM hit, not promoted
  from SSD, not back while the tiers' ghost remembers it) is
    skip   not written down (it leaves the tiers);
    prob   written to a probation log of P (0.2) of the SSD: reclamation takes from it while it
           holds more than P, a record read there moves to the main log, the others leave;
    keep   written down as in LRU mode;
  "A/B" applies A in the long-horizon mode and B in the short one.  Suffix "!" (ADAPT=skip!)
  forces the long segmented mode: the variant's bound.  The tiers' ghost: GH (1) x C keys,
  near-FIFO, fed the victims not written and the records the SSD drops unread (GHX=1: only
  the former); GHALL=1 instead feeds it every DRAM victim at its eviction, as the store's
  ghost is fed (ghost.c), with the short horizon its newest eighth.  SALT=n changes the
  simulations' sample (another hash).  EXISTS=1: as kvtier replay does, a block after a
  request's first miss that some tier holds is a put-if-absent that finds it: not touched,
  not credited, not fed to the simulations.
  (2026-12-03, ssd12) GUARD=1: policy11's guard as the store has it -- in the short-horizon mode
  skip only while the short simulation also beats the long one by the switching rule (else
  keep).  PROBREAD=1: a probation record's first read promotes it to DRAM (the record dropped),
  instead of prom2x's second read.  PROBCLEAN=drop: cleaning probation drops read records too
  (default main: read ones go to the main log, unread ones leave).  GUARDP=1: in the
  long-horizon mode write to probation only while the long simulation also beats LRU by the
  switching rule (else keep).  HSX=h: the short horizon h x C ghost entries, also with GHALL.
  SIMHS=h: the short simulation's horizon, h x its capacity (default HS, so with GHALL GH/8 --
  the store's is one generation of its 4.5-capacity ghost: SIMHS=0.5625).  AGEMODE=1[,2]: in
  those modes (1 long, 2 short segmented, 0 LRU) the read rule is prom2age's (a second read
  promotes only a record older than AGE of the log; a younger one is served and stays).
  (2026-12-03, ssd14; doc/policies.md "Dead room back early") RECLAIM=r: ADAPT's main log as NSEG
  (16) segments (SegLog), reclaimed progressively, one victim segment at a time:
    oldest       FIFO by segment (the store's; the same figures as without RECLAIM);
    pickK[:M]    the victim among the oldest K sealed segments, the one with the most dead records
                 (promoted and dropped), a younger one only with at least M x a segment more dead
                 than the oldest; an oldest skipped once goes next (no copy: its live records lost);
    compact:T    FIFO, and a sealed segment T dead or more is compacted at once: its live records
                 copied to the log's head (a new lap, read marks kept), its room freed;
    inplace:T    the same, the live records kept in their place in the order (a bound for a
                 compaction into a second open segment that keeps its victims' eviction rank).
  stderr: victims, young ones picked, compactions, records copied, dead records of the victims
  when chosen (vdead) and the largest dead share of a sealed segment seen (maxdead).
"""
import json, sys, os
from tracefile import requests as load
BUD=float(os.environ.get('BUD','1'))
ORPH=int(os.environ.get('ORPH','0'))
PARENT={}
NOTOUCH=int(os.environ.get('NOTOUCH','0'))
COMPACT=int(os.environ.get('COMPACT','0'))  # see the docstring
AGE=float(os.environ.get('AGE','0.5'))
KEEP=float(os.environ.get('KEEP','0.5'))
AGE2=float(os.environ.get('AGE2','0.75'))
from collections import OrderedDict, deque
def leading(r, *tiers):
    """The request's hits: its leading blocks some tier holds."""
    n = 0
    for b in r:
        if not any(b in t for t in tiers): break
        n += 1
    return n
def lru_sim(reqs, C):
    c=OrderedDict(); hit=tot=0
    for r in reqs:
        n=0
        for b in r:
            if b in c: n+=1
            else: break
        hit+=n; tot+=len(r)
        for b in r:
            if b in c: c.move_to_end(b)
            else:
                c[b]=1
                if len(c)>C: c.popitem(last=False)
    return hit/tot
def tier_sim(reqs, D, S, mode, reinsert=True, promote=True):
    dram=OrderedDict()   # key -> on_lower
    log=deque(); live={}  # log of (key, id); live: key -> id of live record
    read=set(); nid=[0]; used=[0]; segsz=max(1,S//16); cnt=[0]; bud=[segsz*BUD]
    hit=tot=0; ssdh=0; orph=[0]
    def log_write(k):
        nid[0]+=1; log.append((k,nid[0])); live[k]=nid[0]
        while (len(live) if COMPACT else len(log))>S:
            k2,i2=log.popleft()
            if live.get(k2)==i2:
                cnt[0]+=1
                if cnt[0]>=segsz: cnt[0]=0; bud[0]=segsz*BUD
                if reinsert and k2 in read and bud[0]>0:
                    bud[0]-=1
                    read.discard(k2); nid[0]+=1; log.append((k2,nid[0])); live[k2]=nid[0]
                else:
                    del live[k2]; read.discard(k2)
                    if k2 in dram: dram[k2]=False
    def dram_insert(k, on_lower):
        dram[k]=on_lower
        while len(dram)>D:
            v,ol=dram.popitem(last=False)
            if not ol:
                if ORPH and PARENT.get(v) is not None and PARENT[v] not in dram and PARENT[v] not in live:
                    orph[0]+=1; continue
                log_write(v)
            elif mode=='prom2k' and ol=='P' and v in live and nid[0]-live[v] > KEEP*S:
                read.discard(v); log_write(v)
    dsum=[0,0]
    for r in reqs:
        if len(log)>=S: dsum[0]+=len(log)-len(live); dsum[1]+=len(log)
        n=0
        for b in r:
            if b in dram or b in live: n+=1
            else: break
        hit+=n; tot+=len(r)
        for j,b in enumerate(r):
            if NOTOUCH and j>=n and (b in dram or b in live):
                if NOTOUCH==2 and b not in dram: read.add(b)
                continue
            if b in dram: dram.move_to_end(b)
            elif b in live:
                ssdh+=1
                if mode=='incl':
                    read.add(b); dram_insert(b, True)
                elif mode=='excl':
                    del live[b]; read.discard(b); dram_insert(b, False)
                elif mode=='noprom':
                    read.add(b)
                elif mode=='prom2':
                    if b in read: dram_insert(b, True)
                    else: read.add(b)
                elif mode=='prom2k':
                    if b in read: dram_insert(b, 'P')
                    else: read.add(b)
                elif mode=='prom2age':
                    if b in read and nid[0]-live[b] > AGE*S: del live[b]; read.discard(b); dram_insert(b, False)
                    else: read.add(b)
                elif mode=='prom1age':
                    if nid[0]-live[b] > AGE*S: del live[b]; read.discard(b); dram_insert(b, False)
                    elif b in read and nid[0]-live[b] > AGE2*S: del live[b]; read.discard(b); dram_insert(b, False)
                    else: read.add(b)
                elif mode=='prom2x':
                    if b in read: del live[b]; read.discard(b); dram_insert(b, False)
                    else: read.add(b)
                elif mode in ('prom2c','prom2e'):
                    if b in read: del live[b]; read.discard(b); dram_insert(b, False)
                    else:
                        read.add(b)
                        while len(dram)>=D:
                            v,ol=dram.popitem(last=False)
                            if not ol: log_write(v)
                        if b in live and mode=='prom2c':
                            dram[b]=True; dram.move_to_end(b, last=False)
            else:
                dram_insert(b, False)
    if ORPH: print('  %s: %d orphans not written' % (mode, orph[0]), file=sys.stderr)
    if os.environ.get('DEAD'):
        print('  %s: dead records %.1f %% of the log at the end, %.1f %% on average' %
              (mode, 100-100*len(live)/max(1,len(log)), 100*dsum[0]/max(1,dsum[1])), file=sys.stderr)
    return hit/tot, ssdh
SALT = int(os.environ.get('SALT', '0'))
def hsh(b):
    x = (b * 0x9E3779B97F4A7C15 + 12345 + SALT * 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 32)
class MiniSeg:
    """LRU (f = 0) or probation + main (main at most f), ghost of g x cap: bench/policy/sim.py's Seg;
    h: a ghost entry counts only if added at most h evictions ago (prefix-adapt's short horizon)."""
    def __init__(s, cap, f, g, h=None):
        s.cap = cap; s.f = f; s.P = OrderedDict(); s.M = OrderedDict(); s.G = OrderedDict(); s.gc = int(g * cap)
        s.h = h; s.ev = 0
    def one(s, b):
        hit = b in s.P or b in s.M
        if b in s.M: s.M.move_to_end(b)
        elif b in s.P: del s.P[b]; s.M[b] = 1
        elif s.f == 0: s.M[b] = 1
        elif b in s.G and (s.h is None or s.ev - s.G.pop(b) <= s.h): s.G.pop(b, None); s.M[b] = 1
        else: s.P[b] = 1
        while len(s.P) + len(s.M) > s.cap:
            if s.f == 0: v = (s.P if s.P else s.M).popitem(last=False)[0]
            elif s.M and (len(s.M) > s.f * s.cap or not s.P): v = s.M.popitem(last=False)[0]
            else: v = s.P.popitem(last=False)[0]
            s.ev += 1; s.G[v] = s.ev
            if len(s.G) > s.gc: s.G.popitem(last=False)
        return hit
class SegLog:
    """RECLAIM= (docstring): the main log as segments of sz records; popleft() reclaims the
    victim segment's records in order (progressive reuse), the victim chosen when the last one
    is done among the oldest K sealed segments by rule: 'pick' most dead records (a younger one
    only with at least M x sz more dead than the oldest), 'oldest' FIFO by segment; compaction
    (T > 0) is the caller's: take() hands over a sealed segment at least T dead."""
    def __init__(s, sz, rule='oldest', K=1, M=0.0, T=0.0):
        s.sz = sz; s.rule = rule; s.K = K; s.M = M; s.T = T
        s.segs = deque(); s.used = 0; s.of = {}; s.vic = None; s.cand = []
        s.st = {'picked_young': 0, 'victims': 0, 'compacted': 0, 'copied': 0}
    def __len__(s): return s.used
    def __bool__(s): return s.used > 0
    def append(s, rec):
        if not s.segs or len(s.segs[-1]['recs']) >= s.sz:
            if s.T and s.segs and s.segs[-1]['dead'] >= s.T * s.sz: s.cand.append(s.segs[-1])
            s.segs.append({'recs': [], 'pos': 0, 'dead': 0})
        g = s.segs[-1]; g['recs'].append(rec); s.of[rec[1]] = g; s.used += 1
    def kill(s, i):
        """Record i died in place (promoted and dropped): its segment's dead room."""
        g = s.of.get(i)
        if g is None: return
        g['dead'] += 1
        if s.T and g is not s.vic and g['dead'] >= s.T * s.sz and g is not s.segs[-1]: s.cand.append(g)
    def popleft(s):
        while s.vic is None or s.vic['pos'] >= len(s.vic['recs']):  # (emptied in place: the next)
            if s.vic is not None: s.segs.remove(s.vic); s.vic = None
            sealed = [g for g in s.segs if g is not s.segs[-1]] or [s.segs[-1]]
            c = sealed[:s.K]; v = c[0]
            if s.rule == 'pick' and not v.get('skipped'):  # skipped once: it goes next (no starvation)
                b = max(c, key=lambda g: g['dead'])
                if b['dead'] - v['dead'] >= max(1, s.M * s.sz): v = b; c[0]['skipped'] = 1
            s.st['victims'] += 1; s.st['picked_young'] += v is not c[0]; s.vic = v
            s.st['vdead'] = s.st.get('vdead', 0) + v['dead']
            s.st['maxdead'] = max(s.st.get('maxdead', 0), max(g['dead'] for g in sealed) / s.sz)
        rec = s.vic['recs'][s.vic['pos']]; s.vic['pos'] += 1; s.used -= 1; s.of.pop(rec[1], None)
        return rec
    def take(s):
        """A sealed segment still at least T dead (not the victim, not the open one), removed; or None."""
        while s.cand:
            g = s.cand.pop()
            if g is s.vic or g not in s.segs or g is s.segs[-1]: continue
            s.st['compacted'] += 1
            if s.rule == 'inplace':  # the live records rewritten in their place in the order
                keep = [r for r in g['recs'] if s.alive(r)]
                for r in g['recs']:
                    if not s.alive(r): s.of.pop(r[1], None)
                s.used -= len(g['recs']) - len(keep); s.st['copied'] += len(keep)
                g['recs'] = keep; g['pos'] = 0; g['dead'] = 0
                continue
            s.segs.remove(g); s.used -= len(g['recs'])
            for r in g['recs']: s.of.pop(r[1], None)
            return g
        return None
def seglog():
    """RECLAIM= (docstring) -> a SegLog, or None for the record-granular FIFO."""
    r = os.environ.get('RECLAIM', '')
    if not r: return None
    nseg = int(os.environ.get('NSEG', '16'))
    name, _, arg = r.partition(':')
    if name == 'oldest': return nseg, dict(rule='oldest')
    if name.startswith('pick'): return nseg, dict(rule='pick', K=int(name[4:]), M=float(arg or 0))
    if name == 'compact': return nseg, dict(rule='oldest', T=float(arg))
    if name == 'inplace': return nseg, dict(rule='inplace', T=float(arg))
    raise SystemExit('RECLAIM=%s?' % r)
def adapt_sim(reqs, D, S, C, variant, force=False):
    """ADAPT= in the docstring: prom2x's reads, the write-down chosen by the simulated mode."""
    P = float(os.environ.get('P', '0.2')); GH = float(os.environ.get('GH', '1'))
    GHS = float(os.environ.get('GHS', '4.5'))
    HS = float(os.environ.get('HS', '0.56')); SAM = int(os.environ.get('SAMPLE', '16')); c16 = max(1, C // SAM)
    EXISTS = int(os.environ.get('EXISTS', '0'))
    GHX = int(os.environ.get('GHX', '0')); GHALL = int(os.environ.get('GHALL', '0'))
    GUARD = int(os.environ.get('GUARD', '0')); PROBREAD = int(os.environ.get('PROBREAD', '0'))
    AGEMODE = [int(x) for x in os.environ.get('AGEMODE', '').split(',') if x]
    PROBCLEAN = os.environ.get('PROBCLEAN', 'main'); GUARDP = int(os.environ.get('GUARDP', '0'))
    if GHALL: GHX = 1; HS = GH / 8  # the store's: every DRAM victim ghosted, short = newest 1/8
    if os.environ.get('HSX'): HS = float(os.environ['HSX'])  # the short horizon, x C ghost entries
    SIMHS = float(os.environ.get('SIMHS', HS))  # the short simulation's horizon, x its capacity
    sims = [MiniSeg(c16, 0, GHS), MiniSeg(c16, 0.95, GHS), MiniSeg(c16, 0.95, GHS, SIMHS * c16)]
    if os.environ.get('TWO'): sims.pop()
    sc = [0.0] * len(sims); nsam = [0]; win = max(1, 4 * c16); seg = [1 if force else 0]
    vl, vs = (variant.split('/') + [variant])[:2]; fg = [0]
    dram = OrderedDict()  # key -> [on_lower, reused]
    logs = {'m': deque(), 'p': deque()}; live = {}; read = set(); nid = [0]
    sl = seglog()
    if sl:
        logs['m'] = SegLog(max(1, S // sl[0]), **sl[1])
        logs['m'].alive = lambda r: live.get(r[0]) == ('m', r[1])
    ghost = OrderedDict(); gcap = int(GH * C)
    segsz = max(1, S // 16); cnt = [0]; bud = [segsz * BUD]; st = {'skip': 0, 'prob': 0, 'segreq': 0, 'short': 0}
    def forget(k):
        if gcap:
            fg[0] += 1; ghost[k] = fg[0]; ghost.move_to_end(k)
            if len(ghost) > gcap: ghost.popitem(last=False)
    def append(which, k):
        nid[0] += 1; logs[which].append((k, nid[0])); live[k] = (which, nid[0])
    def reclaim():
        while sl and logs['m'].T:
            g = logs['m'].take()
            if g is None: break
            for k2, i2 in g['recs']:  # the live records copied forward, read or not as they were
                if live.get(k2) == ('m', i2): append('m', k2); logs['m'].st['copied'] += 1
        while (len(live) if COMPACT else len(logs['m']) + len(logs['p'])) > S:
            which = 'p' if logs['p'] and (len(logs['p']) > P * S or not seg[0] or not logs['m']) else 'm'
            k2, i2 = logs[which].popleft()
            if live.get(k2) != (which, i2): continue
            if which == 'm':
                cnt[0] += 1
                if cnt[0] >= segsz: cnt[0] = 0; bud[0] = segsz * BUD
            if k2 in read and ((which == 'p' and PROBCLEAN == 'main') or (which == 'm' and bud[0] > 0)):
                if which == 'm': bud[0] -= 1
                read.discard(k2); append('m', k2)
            else:
                del live[k2]; read.discard(k2)
                if not GHX: forget(k2)
                if k2 in dram: dram[k2][0] = False
    def insert(k, reused):
        dram[k] = [False, reused]
        while len(dram) > D:
            v, (ol, ru) = dram.popitem(last=False)
            if GHALL: forget(v)
            if ol: continue
            vv = (vl, vs)[seg[0] - 1] if seg[0] else None
            if vv == 'skip' and seg[0] == 2 and GUARD and not sc[2] > sc[1] * 1.02 + 1:
                vv = 'keep'  # policy11's guard: skip only while short also beats long
            if seg[0] and not ru and vv == 'skip':
                st['skip'] += 1
                if not GHALL: forget(v)
                continue
            if vv == 'prob' and seg[0] == 1 and GUARDP and not sc[1] > sc[0] * 1.02 + 1:
                vv = 'keep'  # the same guard for prob: long must still beat LRU
            if seg[0] and not ru and vv == 'prob':
                st['prob'] += 1; append('p', v)
            else:
                append('m', v)
            reclaim()
    hit = tot = 0; dsum = [0, 0]
    for r in reqs:
        nlog = len(logs['m']) + len(logs['p'])
        if nlog >= S: dsum[0] += nlog - len(live); dsum[1] += nlog
        n = leading(r, dram, live)
        hit += n; tot += len(r); st['segreq'] += seg[0] > 0; st['short'] += seg[0] == 2
        for i, b in enumerate(r):
            if EXISTS and i >= n and (b in dram or b in live):
                if (EXISTS == 2 or (EXISTS == 3 and seg[0] == 0)) and b not in dram: read.add(b)  # ssd.put_touch
                continue  # the replay's put-if-absent: found, nothing touched or fed
            if not force and hsh(b) % SAM == 0:
                for i, sm in enumerate(sims): sc[i] += sm.one(b)
                nsam[0] += 1
                if nsam[0] >= win: nsam[0] = 0; sc[:] = [x / 2 for x in sc]
                best = max(range(len(sc)), key=lambda i: sc[i])
                if sc[best] > sc[seg[0]] * 1.02 + 1: seg[0] = best
            if b in dram: dram.move_to_end(b); dram[b][1] = True
            elif b in live:
                if AGEMODE and b in read and seg[0] in AGEMODE and nid[0] - live[b][1] <= AGE * S:
                    pass  # prom2age in this mode: a young record read again is served and stays
                elif b in read or (PROBREAD and live[b][0] == 'p'):
                    if sl and live[b][0] == 'm': logs['m'].kill(live[b][1])
                    del live[b]; read.discard(b); insert(b, True)
                else: read.add(b)
            else:
                g = b in ghost and (seg[0] != 2 or fg[0] - ghost[b] <= HS * C)
                ghost.pop(b, None)
                insert(b, g)
    if sl: print('  adapt-%s RECLAIM=%s NSEG=%d: %s, %d records written' % (variant, os.environ['RECLAIM'], sl[0],
                 logs['m'].st, nid[0]), file=sys.stderr)
    if os.environ.get('DEAD'):
        print('  adapt-%s: dead records %.1f %% of the log on average (once full), DRAM %d blocks, SSD %d records' %
              (variant, 100 * dsum[0] / max(1, dsum[1]), D, S), file=sys.stderr)
    print('  adapt-%s%s: segmented for %.0f %% of requests (short horizon %.0f %%), %d victims skipped, %d to probation' %
          (variant, '!' if force else '', 100 * st['segreq'] / len(reqs), 100 * st['short'] / len(reqs), st['skip'], st['prob']), file=sys.stderr)
    return hit / tot
def seg_sim(reqs, D, S, P, split):
    """Two FIFO logs on SSD (probation P*S, main the rest), prom2x reads."""
    Sp = int(S * P) if split else 0
    cap = {'p': Sp, 'm': S - Sp}
    dram = OrderedDict()  # key -> [on_lower, reused]
    logs = {'p': deque(), 'm': deque()}; live = {}; read = set(); nid = [0]
    def append(which, k):
        nid[0] += 1; logs[which].append((k, nid[0])); live[k] = (which, nid[0])
    def reclaim(which):
        lg = logs[which]
        while len(lg) > cap[which]:
            k2, i2 = lg.popleft()
            if live.get(k2) != (which, i2):
                continue
            if k2 in read:
                read.discard(k2); append('m', k2)
            else:
                del live[k2]
                if k2 in dram: dram[k2][0] = False
    def write(which, k):
        append(which if cap['p'] else 'm', k)
        reclaim('p'); reclaim('m')
    def ins(k, reused):
        dram[k] = [False, reused]
        while len(dram) > D:
            v, (ol, ru) = dram.popitem(last=False)
            if not ol: write('m' if ru else 'p', v)
    hit = tot = 0
    for r in reqs:
        n = leading(r, dram, live)
        hit += n; tot += len(r)
        for b in r:
            if b in dram: dram.move_to_end(b); dram[b][1] = True
            elif b in live:
                if b in read: del live[b]; read.discard(b); ins(b, True)
                else: read.add(b)
            else: ins(b, False)
    return hit / tot
def slot_sim(reqs, D, S, choose, NSEG=16):
    segsz=max(1,S//NSEG)
    segs=[None]*NSEG   # each: dict gen, recs list of (k,id), live count
    live={}            # k -> (slot, id)
    read=set(); dram=OrderedDict(); nid=[0]; gen=[0]
    st={'open':None,'old':None,'oldpos':0,'bud':0,'wpos':0}
    segs_live=[0]*NSEG
    def reclaim_one(slot_old_recs, i):
        k,idn=slot_old_recs[i]
        if k in live and live[k][1]==idn:
            sl=live[k][0]; segs_live[sl]-=1
            if k in read and st['bud']>0:
                st['bud']-=1; read.discard(k); pend.append(k)
            else:
                del live[k]; read.discard(k)
                if k in dram: dram[k]=False
    pend=[]
    def open_new():
        # pick slot
        free=[i for i in range(NSEG) if segs[i] is None]
        if free:
            sl=free[0]; old=None
        else:
            cands=[i for i in range(NSEG) if i!=st['open']]
            sl=choose(cands, segs, segs_live, gen[0], segsz)
            old=segs[sl]['recs']
        gen[0]+=1
        segs[sl]={'gen':gen[0],'recs':[]}
        st['open']=sl; st['old']=old; st['oldpos']=0; st['bud']=segsz*BUD
        # live of old records still counted in segs_live[sl]; they get reclaimed progressively
    def append(k):
        if st['open'] is None or len(segs[st['open']]['recs'])>=segsz:
            # seal: reclaim rest of old
            if st['open'] is not None and st['old'] is not None:
                while st['oldpos']<len(st['old']):
                    reclaim_one(st['old'], st['oldpos']); st['oldpos']+=1
            open_new()
        sl=st['open']; rec=segs[sl]['recs']
        # progressive: reclaim old record at same position before overwrite
        if st['old'] is not None and st['oldpos']<len(st['old']) and st['oldpos']<=len(rec):
            reclaim_one(st['old'], st['oldpos']); st['oldpos']+=1
        nid[0]+=1
        rec.append((k,nid[0])); 
        if k in live: segs_live[live[k][0]]-=1
        live[k]=(sl,nid[0]); segs_live[sl]+=1
    def write(k):
        append(k)
        while pend:
            append(pend.pop(0))
    def drop_live(k):
        sl,_=live.pop(k); segs_live[sl]-=1
    def dram_insert(k):
        dram[k]=False
        while len(dram)>D:
            v,ol=dram.popitem(last=False)
            if not ol: write(v)
    hit=tot=0
    for r in reqs:
        n=0
        for b in r:
            if b in dram or b in live: n+=1
            else: break
        hit+=n; tot+=len(r)
        for b in r:
            if b in dram: dram.move_to_end(b)
            elif b in live:
                if b in read:
                    drop_live(b); read.discard(b); dram_insert(b)
                else:
                    read.add(b)
            else: dram_insert(b)
    return hit/tot
def oldest(c,segs,lv,g,sz): return min(c,key=lambda i:segs[i]['gen'])
def greedy(c,segs,lv,g,sz): return min(c,key=lambda i:(lv[i],segs[i]['gen']))
def greedyK(K):
    def f(c,segs,lv,g,sz):
        cc=sorted(c,key=lambda i:segs[i]['gen'])[:K]
        return min(cc,key=lambda i:(lv[i],segs[i]['gen']))
    return f
SLOTS={'oldest':oldest,'greedy':greedy,'g2':greedyK(2),'g4':greedyK(4)}
for p in sys.argv[1:]:
    reqs=load(p); s=set()
    PARENT.clear()
    for r in reqs:
        for i,b in enumerate(r): PARENT.setdefault(b, r[i-1] if i else None)
    for r in reqs: s.update(r)
    C=len(s)//int(os.environ.get('DIV','4')); D=int(os.environ.get('D',C//4)); S=int((C-D)*float(os.environ.get("SF","1")))
    l=lru_sim(reqs,C)
    out=[p.split('/')[-1][:12], 'lru %.4f'%l]
    for m in filter(None, os.environ.get('MODES','incl,noprom,prom2,prom2x').split(',')):
        for ri in (True,):
            h,sh=tier_sim(reqs,D,S,m,ri)
            out.append('%s%s %.3f'%(m,'+ri' if ri else '',h/l))
    for n in filter(None, os.environ.get('SLOT','').split(',')):
        out.append('slot-%s %.3f' % (n, slot_sim(reqs, D, S, SLOTS[n]) / l))
    for v in filter(None, os.environ.get('ADAPT', '').split(',')):
        out.append('adapt-%s %.3f' % (v, adapt_sim(reqs, D, S, C, v.rstrip('!'), v.endswith('!')) / l))
    if os.environ.get('PROB'):
        out.append('base %.3f' % (seg_sim(reqs, D, S, 0, False) / l))
        for P in os.environ['PROB'].split(','):
            out.append('prob%s %.3f' % (P, seg_sim(reqs, D, S, float(P), True) / l))
    print(' '.join(out), flush=True)
