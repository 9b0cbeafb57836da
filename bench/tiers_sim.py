#!/usr/bin/env python3
"""tiers_sim.py TRACE...: DRAM over a victim SSD log, block-granular, against LRU of the same blocks.

Model (kvtier replay's prefix semantics): per request, hits are its leading blocks present
in DRAM or on SSD; then every block is touched (DRAM hit), read from SSD, or put into DRAM.
C = a quarter of the trace's distinct blocks, DRAM D = C/4 (LRU), SSD S = C - D records in a
FIFO log (scaled by SF, e.g. SF=0.92 for the 512-byte headers and the open segment) whose
reclamation gives a record read while on SSD a second chance (re-appended at the head),
within BUD (fraction of each 1/16 of the log; 1 = unlimited).  Variants, printed as a
fraction of LRU(C):
  incl    every SSD read promotes to DRAM, the SSD keeps its record (two copies);
  noprom  SSD reads are served and never promoted (the SSD is a CLOCK of DRAM's victims);
  prom2   the first SSD read is served, the second promotes (record kept);
  prom2x  the same, the second read drops the record (exclusive) -- ssd.first_hit=cold.
Used for doc/policies.md ("Reads from SSD"); the store's own figures come from ssd_ab.py.
PROB=0.1,0.2 (optional) adds a segmented SSD, simulated with prom2x's read rule and an
unlimited second chance: DRAM victims never reused (no DRAM hit, not from SSD) go to a
probation log of that fraction of S, reused ones to the main log; a probation record read
there moves to the main log at reclamation, the others leave ("base": one log, the same
rules).  doc/policies.md "Protecting reused blocks on SSD".
"""
import json, sys, os
from tracefile import requests as load
BUD=float(os.environ.get('BUD','1'))
from collections import OrderedDict, deque
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
    hit=tot=0; ssdh=0
    def log_write(k):
        nid[0]+=1; log.append((k,nid[0])); live[k]=nid[0]
        while len(log)>S:
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
            if not ol: log_write(v)
            elif mode=='incl-rw':
                # rewrite if in older half
                pass
    for r in reqs:
        n=0
        for b in r:
            if b in dram or b in live: n+=1
            else: break
        hit+=n; tot+=len(r)
        for b in r:
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
                elif mode=='prom2x':
                    if b in read: del live[b]; read.discard(b); dram_insert(b, False)
                    else: read.add(b)
            else:
                dram_insert(b, False)
    return hit/tot, ssdh
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
        n = 0
        for b in r:
            if b in dram or b in live: n += 1
            else: break
        hit += n; tot += len(r)
        for b in r:
            if b in dram: dram.move_to_end(b); dram[b][1] = True
            elif b in live:
                if b in read: del live[b]; read.discard(b); ins(b, True)
                else: read.add(b)
            else: ins(b, False)
    return hit / tot
for p in sys.argv[1:]:
    reqs=load(p); s=set()
    for r in reqs: s.update(r)
    C=len(s)//4; D=C//4; S=int((C-D)*float(os.environ.get("SF","1")))
    l=lru_sim(reqs,C)
    out=[p.split('/')[-1][:12], 'lru %.4f'%l]
    for m in ('incl','noprom','prom2','prom2x'):
        for ri in (True,):
            h,sh=tier_sim(reqs,D,S,m,ri)
            out.append('%s%s %.3f'%(m,'+ri' if ri else '',h/l))
    if os.environ.get('PROB'):
        out.append('base %.3f' % (seg_sim(reqs, D, S, 0, False) / l))
        for P in os.environ['PROB'].split(','):
            out.append('prob%s %.3f' % (P, seg_sim(reqs, D, S, float(P), True) / l))
    print(' '.join(out), flush=True)
