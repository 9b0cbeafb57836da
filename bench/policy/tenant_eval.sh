#!/bin/bash
# tenant_eval.sh KVTIERD KVTIER TRACE_A TRACE_B OUT [RUNS] - two tenants whose
# dram= quotas partition one kvtierd's DRAM, end to end (doc/kvtierd.md
# "Quotas"; doc/policies.md "Per quota group"): two `kvtier replay` clients
# at once over loopback, client A replaying TRACE_A as tenant ta, client B
# TRACE_B as tenant tb, each with a 1 MiB local DRAM and the kvtierd as its
# remote tier.  Sizes as doc/policies.md "Evaluation" (16 KiB blocks,
# --bytes-per-token 32): per tenant C = a quarter of its trace's distinct
# blocks, DRAM C/4 and SSD 3C/4; the server gets --dram DA+DB and --ssd
# SA+SB.  Two configurations, RUNS times each (default 1), a fresh server
# and store directory (under ${TMPDIR:-/var/tmp}) each time:
#   quota - a tenants file: ta dram=DA, tb dram=DB (partitioning --dram),
#           an admin tenant to read the server's statistics;
#   none  - no tenants file (no quotas: the reference), both clients the
#           default tenant (their namespaces differ by --model);
#   alone - each client alone on a kvtierd of its own share (--dram DX
#           --ssd SX, no tenants file): what a partition of both tiers
#           would give (the quotas partition DRAM only; the SSD is shared).
# Measures per client: block hit ratio, remote hits, put errors, put p99 and
# max (the replay's JSON); per tenant from the server after both replays:
# its quota group's dram_evictions, dram_full, ssd_bytes, and its namespace's
# server hits by tier; server-wide ssd.blocks, dram.victim_writedowns,
# dram.quota_evictions, shed and waits; and, sampled every second while
# the replays run, the most DRAM bytes each group held past its limit
# (quota.G.dram_bytes + dram_leaving_bytes - dram_limit: the bytes charged
# to it; since 2026-12-05 a group goes past its limit by its blocks still
# being written down, which dram_leaving_bytes shows apart).
# One line per client and configuration on stdout (and OUT/summary.txt);
# the replays' JSON, the statistics and the samples are in OUT.
# usage: bench/policy/tenant_eval.sh build-release/daemon/kvtierd \
#            build-release/cli/kvtier data/traces/mooncake-fast25-synthetic.jsonl \
#            /tmp/ptr/conv-synth.jsonl /tmp/tenant_eval 2
set -u
[ $# -ge 5 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 2; }
KVTIERD=$1; KVTIER=$2; TA=$3; TB=$4; OUT=$5; RUNS=${6:-1}
HERE=$(dirname "$0")
mkdir -p "$OUT"
size() { # TRACE -> "C D S" in bytes
	python3 -c "import sys; sys.path.insert(0, '$HERE/..'); from tracefile import quarter
c, d = quarter('$1', 16384); print(c, d, c - d)"
}
read CA DA SA <<<"$(size "$TA")"
read CB DB SB <<<"$(size "$TB")"
D=$((DA + DB)); S=$((SA + SB))
# ~16 segments of whole 4 KiB pages, at least 1 MiB.
seg() { local g=$(( $1 / 16 / 4096 * 4096 )); [ $g -lt 1048576 ] && g=1048576; echo $g; }
SEG=$(seg $S); SEGA=$(seg $SA); SEGB=$(seg $SB)
echo "A $TA: C $CA dram=$DA ssd $SA; B $TB: C $CB dram=$DB ssd $SB;" \
	"server --dram $D --ssd $S ssd.segment=$SEG" | tee "$OUT/sizes.txt"

serve() { # DIR DRAM SSD SEGMENT [--tenants FILE]: sets port and pid
	local dir=$1 dram=$2 ssd=$3 seg=$4; shift 4
	mkdir "$dir"
	"$KVTIERD" --dir "$dir" --dram $dram --ssd $ssd --listen 127.0.0.1:0 --threads 1 "$@" \
		--set dram.chunk=16384 --set dram.shards=1 --set dram.prefault=off --set ssd.segment=$seg \
		--log "$dir.log" >/dev/null 2>"$dir.err" &
	pid=$!; port=
	for _ in $(seq 100); do
		port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir.log" 2>/dev/null | head -1 | sed 's/.*://')
		[ -n "$port" ] && break
		sleep 0.1
	done
	[ -n "$port" ] || { echo "kvtierd did not start:"; cat "$dir.log" "$dir.err"; exit 1; }
}
one() { # CONF RUN
	local conf=$1 run=$2 tag="$1-$2" d port pid auth_a=() auth_b=() auth_s=() tf=()
	d=$(mktemp -d "${TMPDIR:-/var/tmp}/tenant_eval.XXXX")
	if [ "$conf" = quota ]; then
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/a.secret"
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/b.secret"
		head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$d/o.secret"
		chmod 600 "$d"/*.secret
		printf 'ta %s tenant dram=%s\ntb %s tenant dram=%s\nops %s admin\n' \
			"$(cat "$d/a.secret")" $DA "$(cat "$d/b.secret")" $DB "$(cat "$d/o.secret")" >"$d/tenants"
		chmod 600 "$d/tenants"
		tf=(--tenants "$d/tenants")
		auth_a=(--tenant ta --secret-file "$d/a.secret")
		auth_b=(--tenant tb --secret-file "$d/b.secret")
		auth_s=(--tenant ops --secret-file "$d/o.secret")
	fi
	if [ "$conf" = alone ]; then # two servers, each client its own
		serve "$d/sa" $DA $SA $SEGA; porta=$port; pida=$pid
		serve "$d/sb" $DB $SB $SEGB; portb=$port; pidb=$pid
	else
		serve "$d/store" $D $S $SEG "${tf[@]}"; porta=$port; portb=$port; pida=$pid
	fi
	stat() { "$KVTIER" stat --server 127.0.0.1:$porta "${auth_s[@]}" --raw; }
	"$KVTIER" replay "$TA" --bytes-per-token 32 --dram 1048576 --model Llama-3.1-8B \
		--server 127.0.0.1:$porta --server-capacity $CA "${auth_a[@]}" --no-progress --json \
		>"$OUT/$tag-a.json" 2>"$OUT/$tag-a.err" &
	local ra=$!
	"$KVTIER" replay "$TB" --bytes-per-token 32 --dram 1048576 --model Qwen3-8B \
		--server 127.0.0.1:$portb --server-capacity $CB "${auth_b[@]}" --no-progress --json \
		>"$OUT/$tag-b.json" 2>"$OUT/$tag-b.err" &
	local rb=$!
	: >"$OUT/$tag-samples.txt"
	while kill -0 $ra 2>/dev/null || kill -0 $rb 2>/dev/null; do
		stat | grep -E '^quota\.[0-9]+\.dram_(bytes|limit) ' | tr '\n' ' ' >>"$OUT/$tag-samples.txt"
		echo >>"$OUT/$tag-samples.txt"
		sleep 1
	done
	wait $ra; wait $rb
	stat >"$OUT/$tag-stats.txt"
	[ "$conf" = alone ] && "$KVTIER" stat --server 127.0.0.1:$portb --raw >"$OUT/$tag-stats-b.txt"
	if [ "$conf" = quota ]; then # each tenant's quota group (tenant.quota_group)
		for t in ta tb; do
			echo "tgroup.$t $("$KVTIER" stat --server 127.0.0.1:$porta "${auth_s[@]}" --of $t --raw |
				sed -n 's/^tenant.quota_group //p')" >>"$OUT/$tag-stats.txt"
		done
	fi
	cat "$d"/*.log >"$OUT/$tag-kvtierd.log"
	kill $pida; wait $pida
	[ "$conf" = alone ] && { kill $pidb; wait $pidb; }
	rm -rf "$d"
}
for r in $(seq "$RUNS"); do
	one quota $r
	one none $r
	one alone $r
done
python3 - "$OUT" "$RUNS" "$DA" "$DB" <<'PY' | tee "$OUT/summary.txt"
import json, sys
o, runs, da, db = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rep(tag):
    return json.JSONDecoder().raw_decode(open('%s/%s.json' % (o, tag)).read())[0]
def stats(tag):
    s = {}
    for line in open('%s/%s-stats%s.txt' % (o, tag[:-2] if tag.endswith('-b') else tag,
                                            '-b' if tag.endswith('-b') else '')):
        k, _, v = line.rstrip('\n').partition(' ')
        s[k] = v
    return s
def over(tag):
    # the most bytes a group held past its limit in any sample
    m = {}
    for line in open('%s/%s-samples.txt' % (o, tag)):
        f = line.split()
        kv = dict(zip(f[0::2], f[1::2]))
        for k, v in kv.items():
            if k.endswith('.dram_bytes'):
                g = k.split('.')[1]
                lim = int(kv.get('quota.%s.dram_limit' % g, 0))
                if lim:
                    held = int(v) + int(kv.get('quota.%s.dram_leaving_bytes' % g, 0))
                    m[g] = max(m.get(g, -1 << 62), held - lim)
    return m
print('conf run client block_hit remote_hits put_errors put_p99_us put_max_us wall_s'
      ' | srv_hits_dram srv_hits_ssd q_dram_evictions q_dram_full q_ssd_MiB max_over_limit_MiB'
      ' | ssd.blocks victim_writedowns quota_evictions victim_shed victim_waits wd_shed wd_put_waits')
for run in range(1, runs + 1):
    for conf in ('quota', 'none', 'alone'):
        tag = '%s-%d' % (conf, run)
        for c, model, tenant in (('a', 'Llama-3.1-8B', 'ta'), ('b', 'Qwen3-8B', 'tb')):
            s, ov = stats(tag + ('-b' if conf == 'alone' and c == 'b' else '')), over(tag)
            ns = {}  # model -> ns index
            for k, v in s.items():
                if k.startswith('ns.') and k.endswith('.model'):
                    ns[v] = k.split('.')[1]
            j = rep('%s-%s' % (tag, c))
            n = ns.get(model)
            g = int(s['tgroup.' + tenant]) if conf == 'quota' else None
            def q(f):
                return s.get('quota.%d.%s' % (g, f), '-') if g else '-'
            qs = q('ssd_bytes')
            print('%s %d %s %.4f %d %d %.0f %.0f %.1f | %s %s %s %s %s %s | %s %s %s %s %s %s %s' % (
                conf, run, c, j['block_hit_ratio'], j['remote_hits'], j['put_errors'],
                j['put_p99_us'], j['put_max_us'], j['wall_s'],
                s.get('ns.%s.hits_dram' % n, '-'), s.get('ns.%s.hits_ssd' % n, '-'),
                q('dram_evictions'), q('dram_full'),
                '%.1f' % (int(qs) / 1048576) if qs != '-' else '-',
                '%.2f' % (ov[str(g)] / 1048576) if g and str(g) in ov else '-',
                s.get('ssd.blocks', '-'), s.get('dram.victim_writedowns', '-'),
                s.get('dram.quota_evictions', '-'), s.get('dram.victim_shed', '-'),
                s.get('dram.victim_waits', '-'), s.get('ssd.writedown_shed', '-'),
                s.get('ssd.writedown_put_waits', '-')))
PY
