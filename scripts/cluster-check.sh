#!/usr/bin/env bash
# cluster-check.sh - issue 24's figures on a machine with cores to spare:
# "kvtier bench cluster" (1 and 3 kvtierd nodes, 2 MiB and 256 KiB
# blocks, the engine's remote tier side by side with the direct protocol
# client and iperf3) where the engine and three nodes do not share two
# cores.  On the 2-core development VM the per-round ratios of one cell
# span 0.17-3.4 (bench/RESULTS.md); this is the run that can resolve them.
#
#   scripts/cluster-check.sh build        here: configure build-cluster
#                                         (release), build kvtier and
#                                         kvtierd, and copy iperf3 and the
#                                         libraries it needs into
#                                         build-cluster/tools (the other
#                                         machine may have no iperf3)
#   scripts/cluster-check.sh run [DIR]    there: carry build-cluster; JSON
#                                         lines and the table go to DIR
#                                         (default build-cluster/out)
#   scripts/cluster-check.sh [DIR]        both
#
# KVT_CLUSTER_ROUNDS (default 5) and KVT_CLUSTER_BYTES (default 256M) size
# the run: about 3 minutes on 16 cores at the defaults.  Exit: what the
# bench exits (0 ran, 1 a failure, 77 no iperf3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${KVT_CLUSTER_BUILD:-build-cluster}

build() {
	if [[ ! -f $dir/build.ninja ]]; then
		meson setup "$dir" --buildtype=release -Dwerror=true
	fi
	ninja -C "$dir" cli/kvtier daemon/kvtierd
	local ip lib
	ip=$(command -v iperf3) || { echo "cluster-check: iperf3 not installed here (Debian: iperf3)" >&2; exit 77; }
	mkdir -p "$dir/tools"
	cp -L "$ip" "$dir/tools/iperf3"
	# iperf3's own libraries (libiperf, libsctp, ...): not libc's, which
	# the other machine has
	for lib in $(ldd "$ip" | awk '$3 ~ /^\// { print $3 }'); do
		case $(basename "$lib") in
		libc.so.* | libm.so.* | ld-linux*) ;;
		*) cp -L "$lib" "$dir/tools/" ;;
		esac
	done
}

run() {
	local out=${1:-$dir/out} ip=iperf3
	for f in cli/kvtier daemon/kvtierd; do
		[[ -x $dir/$f ]] || { echo "cluster-check: $dir/$f missing: run '$0 build' first" >&2; exit 1; }
	done
	if ! command -v iperf3 >/dev/null; then
		ip=$dir/tools/iperf3
		export LD_LIBRARY_PATH=$PWD/$dir/tools${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	fi
	mkdir -p "$out"
	echo "cluster-check: $(nproc) cores, $(uname -r), $(date -u +%FT%TZ)" | tee "$out/machine.txt"
	grep -m1 'model name' /proc/cpuinfo | tee -a "$out/machine.txt" || true
	set +e
	"$dir/cli/kvtier" bench cluster --kvtierd "$dir/daemon/kvtierd" --iperf3 "$ip" \
		--sizes 2M,256K --nodes 1,3 --rounds "${KVT_CLUSTER_ROUNDS:-5}" \
		--bytes "${KVT_CLUSTER_BYTES:-256M}" --json >"$out/cluster.jsonl" 2>"$out/cluster.err"
	local rc=$?
	set -e
	tail -n 40 "$out/cluster.err"
	# the issue's ratios, a line a cell (median [min..max] of the rounds)
	if command -v python3 >/dev/null; then
		python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("%-12s %4dK %d node(s): engine/direct %.3f [%.3f..%.3f]  /1 node %.3f [%.3f..%.3f]" % (
        r["bench"], r["value_bytes"] >> 10, r["nodes"], r["ratio_direct_median_of_rounds"],
        r["ratio_direct_min"], r["ratio_direct_max"], r["ratio_nodes1"],
        r["ratio_nodes1_min"], r["ratio_nodes1_max"]))' "$out/cluster.jsonl" | tee "$out/summary.txt"
	fi
	echo "cluster-check: exit $rc; JSON lines in $out/cluster.jsonl"
	return $rc
}

case ${1:-} in
build) build ;;
run) run "${2:-}" ;;
*) build && run "${1:-}" ;;
esac
