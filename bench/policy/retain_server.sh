#!/bin/bash
# retain_server.sh - one replay through a fresh kvtierd whose DRAM is the whole
# capacity (CAP, default 171M; no SSD; 16 KiB chunks, the replay's values),
# local DRAM 4M, with or without --retain-oracle (doc/policies.md "The retain
# hint").  Prints block hit ratio, of optimum, hits per tier.
# usage: CAP=BYTES KVT_BUILD=build-release bench/policy/retain_server.sh \
#            POLICY ORACLE(0|1) TAG TRACE [replay args...]
# Results land in ${OUT:-/tmp/retain}/TAG.json.
set -u
B=${KVT_BUILD:-build-release}
OUT=${OUT:-/tmp/retain}
mkdir -p $OUT
pol=$1; orc=$2; tag=$3; shift 3
d=$(mktemp -d $OUT/srv.XXXX)
$B/daemon/kvtierd --dir $d --dram ${CAP:-171M} --ssd 0 --set dram.prefault=off --set dram.policy=$pol --set dram.chunk=16K \
  --listen 127.0.0.1:0 --threads 2 --log $d/log >/dev/null 2>$d/err &
pid=$!
for i in $(seq 100); do port=$(grep -o 'listening on 127.0.0.1:[0-9]*' $d/log 2>/dev/null | head -1 | sed 's/.*://'); [ -n "$port" ] && break; sleep 0.1; done
extra=""; [ "$orc" = 1 ] && extra=--retain-oracle
$B/cli/kvtier replay "$@" --bytes-per-token 32 --dram 4M --server 127.0.0.1:$port --server-capacity ${CAP:-171M} --no-progress $extra --json > $OUT/$tag.json 2>$OUT/$tag.err
rc=$?
kill $pid; wait $pid
python3 -c "
import json
j,_=json.JSONDecoder().raw_decode(open('$OUT/$tag.json').read())
print('$tag rc=$rc block_hit=%.4f of_opt=%.3f opt=%.4f remote_hits=%d dram_hits=%d put_errors=%d' % (j['block_hit_ratio'], j['of_optimum'], j['optimum_block_hit_ratio'], j['remote_hits'], j['dram_hits'], j['put_errors']))
"
rm -rf $d
