#!/bin/bash
# pod_eval.sh TRACE TAG - issue 19's "through a kvtierd of that size as the
# remote tier" row (doc/policies.md "Tiers in concert"): for C = the trace's
# distinct blocks / 4 x 16 KiB, a replay with a 1 MiB local DRAM over a fresh
# kvtierd of (a) DRAM C, (b) DRAM C/4 + SSD 3C/4 (the SSD's segment as the
# replay picks it for its own SSD), against DRAM-only LRU of C embedded.
# Prints one line; the replays' JSON lands in ${OUT:-/tmp/pod_eval}/TAG-*.json.
# POD_SET="--set K=V ...": more options for the DRAM + SSD kvtierd (an A/B of a default).
# usage: KVT_BUILD=build-release /work/quiet-bench.sh bench/policy/pod_eval.sh TRACE TAG
set -u
B=${KVT_BUILD:-build-release}
OUT=${OUT:-/tmp/pod_eval}
HERE=$(dirname "$0")
mkdir -p "$OUT"
t=$1; tag=$2
n=$(python3 -c "import sys; sys.path.insert(0, '$HERE/..'); from tracefile import distinct; print(distinct('$t'))")
C=$((n / 4 * 16384)); D4=$((n / 4 / 4 * 16384)); S=$((C - D4))
# cli/replay.c replay_segment: ~16 segments of whole 4 KiB pages, at least
# 1 MiB and 4 values, at most 256 MiB; a count within a quarter of the
# fewest no larger than cap/16 that divides the tier's pages exactly, the
# nearest; else that count's segment rounded down to 4 KiB.
SEG=$(python3 -c "
cap = $S; pg = 4096; mx = 256 << 20; mn = max(-(-4 * (16384 + 8192) // pg) * pg, 1 << 20)
def seg():
    if cap // mn < 2: return mn
    hi = max(mx, mn); want = min(max(cap // 16, mn), hi)
    n0 = -(-cap // want)
    if cap // n0 < mn: n0 -= 1
    for d in range(n0 // 4 + 1):
        for n in (n0 - d, n0 + d):
            if cap % pg or n < 2 or (cap // pg) % n: continue
            sz = cap // pg // n * pg
            if mn <= sz <= hi: return sz
    return cap // n0 // pg * pg
print(seg())")
$B/cli/kvtier replay "$t" --bytes-per-token 32 --dram $C --dram-policy lru --no-progress --json > "$OUT/$tag-lru.json"
pod() { # NAME DRAM SSD [--set ...]
	local name=$1 dram=$2 ssd=$3; shift 3
	local d port pid
	d=$(mktemp -d "${TMPDIR:-/var/tmp}/pod_eval.XXXX")
	$B/daemon/kvtierd --dir "$d" --dram $dram --ssd $ssd --listen 127.0.0.1:0 --threads 1 \
		--set dram.chunk=16384 --set dram.shards=1 --set dram.prefault=off "$@" --log "$d/log" >/dev/null 2>"$d/err" &
	pid=$!
	for _ in $(seq 100); do
		port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$d/log" 2>/dev/null | head -1 | sed 's/.*://')
		[ -n "$port" ] && break
		sleep 0.1
	done
	$B/cli/kvtier replay "$t" --bytes-per-token 32 --dram 1048576 --server 127.0.0.1:$port \
		--server-capacity $C --no-progress --json > "$OUT/$tag-$name.json" 2>"$OUT/$tag-$name.err"
	kill $pid; wait $pid; rm -rf "$d"
}
pod dram $C 0
pod dramssd $D4 $S --set ssd.segment=$SEG ${POD_SET:-}
python3 - "$OUT" "$tag" <<'PY'
import json, sys
o, t = sys.argv[1:]
def j(k):
    return json.JSONDecoder().raw_decode(open('%s/%s-%s.json' % (o, t, k)).read())[0]
l, a, b = j('lru'), j('dram'), j('dramssd')
L = l['block_hit_ratio']
print('%s: LRU of C %.4f | kvtierd DRAM C %.4f (%.3f of LRU, %.3f of optimum; remote hits %d, put errors %d)'
      ' | kvtierd DRAM C/4 + SSD 3C/4 %.4f (%.3f of LRU; remote hits %d, put errors %d)' % (
          t, L, a['block_hit_ratio'], a['block_hit_ratio'] / L, a['of_optimum'], a['remote_hits'],
          a['put_errors'], b['block_hit_ratio'], b['block_hit_ratio'] / L, b['remote_hits'], b['put_errors']))
PY
