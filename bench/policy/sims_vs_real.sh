#!/bin/bash
# sims_vs_real.sh KVTIER TRACE DIV SEEDS: does prefix-adapt's sampled simulation rate the modes
# as the real cache does?  (doc/policies.md "Eleventh pass".)  Needs a scratch build with
# bench/policy/eleventh_pass.patch.  Per hash seed 1..SEEDS, DRAM = distinct blocks / DIV x
# 16 KiB: one replay never switching (KVT_NOSW) for the simulations' whole-run hits (their
# input is the real cache's gets and puts, in LRU mode throughout), and two with the real
# cache forced into the segmented long and short modes (KVT_FORCE).  Prints per seed the real
# hit ratio in LRU mode, the forced modes over it, and the simulations' LRU hits and their
# long and short hits over LRU's.  The environment passes through (KVT_FLOOR=1000000: every
# key simulated, no sampling).
set -euo pipefail
KV=$1 T=$2 D=$3 SEEDS=$4
BENCH=$(dirname "$0")/..
N=$(python3 -c "import sys; sys.path.insert(0, '$BENCH'); from tracefile import distinct
print(distinct('$T'))")
C=$((N / D * 16384))
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
hit() { python3 -c "import json, sys; print(json.loads(sys.stdin.readline())['block_hit_ratio'])"; }
for s in $(seq 1 "$SEEDS"); do
	args=(replay "$T" --bytes-per-token 32 --json --no-progress --set "dram.hash_seed=$s" --dram "$C")
	r0=$(KVT_NOSW=1 KVT_DBG=1 nice "$KV" "${args[@]}" 2>"$tmp" | hit)
	h=$(grep '^H ' "$tmp" | tail -1)
	r1=$(KVT_FORCE=1 nice "$KV" "${args[@]}" 2>/dev/null | hit)
	r2=$(KVT_FORCE=2 nice "$KV" "${args[@]}" 2>/dev/null | hit)
	echo "$s $r0 $r1 $r2 $h"
done | awk '{
	printf "seed %2d real LRU mode %.4f long/LRU %.3f short/LRU %.3f", $1, $2, $3 / $2, $4 / $2
	printf " | sims LRU %d hits, long/LRU %.3f short/LRU %.3f\n", $7, $8 / $7, $9 / $7
}'
