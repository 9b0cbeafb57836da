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
  prom2x  the same, the second read drops the record (exclusive) -- ssd.first_hit=cold;
  prom2c  prom2x with the store's first read before 2026-12-02 (ssd11): a DRAM chunk taken
          for a cold copy at the old end (evicting DRAM's oldest, written down); prom2e
          the same chunk taken and left free (doc/policies.md "The store against its model").
NOTOUCH=1: blocks present past a request's prefix are not touched (the store's put of a
present block answers EXISTS and changes nothing); D=N: DRAM of N blocks, not C/4 (the
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
  COMPACT=1    (b, its bound) dead records take no room: a free, perfect compaction;
  ORPH=1       (d) a DRAM victim whose parent block is in no tier is not written;
  DEAD=1       print the dead records' share of the log (end, average);
  SLOT=oldest,g2,g4,greedy  (b) which slot a full log reuses: the oldest (FIFO), the
             one with fewest live records among the oldest 2 or 4, or of all (read
             records carried as usual, progressive reuse), 16 slots.
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
    C=len(s)//4; D=int(os.environ.get('D',C//4)); S=int((C-D)*float(os.environ.get("SF","1")))
    l=lru_sim(reqs,C)
    out=[p.split('/')[-1][:12], 'lru %.4f'%l]
    for m in os.environ.get('MODES','incl,noprom,prom2,prom2x').split(','):
        for ri in (True,):
            h,sh=tier_sim(reqs,D,S,m,ri)
            out.append('%s%s %.3f'%(m,'+ri' if ri else '',h/l))
    for n in filter(None, os.environ.get('SLOT','').split(',')):
        out.append('slot-%s %.3f' % (n, slot_sim(reqs, D, S, SLOTS[n]) / l))
    if os.environ.get('PROB'):
        out.append('base %.3f' % (seg_sim(reqs, D, S, 0, False) / l))
        for P in os.environ['PROB'].split(','):
            out.append('prob%s %.3f' % (P, seg_sim(reqs, D, S, float(P), True) / l))
    print(' '.join(out), flush=True)
