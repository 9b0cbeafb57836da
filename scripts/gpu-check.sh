#!/usr/bin/env bash
# gpu-check.sh - libkvtier_cuda on a GPU in one command: the GPU tests,
# then the gather/scatter bandwidth bench (JSON lines).  doc/cuda.md.
#
#   scripts/gpu-check.sh build        here (nvcc, no GPU needed): configure
#                                     build-gpu (release, -Dcuda=enabled)
#                                     and build only what the check runs
#   scripts/gpu-check.sh run [FILE]   on the GPU machine (no nvcc, no
#                                     registry needed): carry build-gpu
#                                     there; JSON lines go to FILE
#                                     (default build-gpu/gpu-check.jsonl)
#   scripts/gpu-check.sh [FILE]       both, where nvcc and a GPU are
#
# It first prints the driver's CUDA version and stops (exit 2) if the
# driver cannot run CUDA 13 code.  Exit 0: tests passed and the bench ran;
# 1: a test or the bench failed; 77: no GPU.  Within 5 minutes on an H200.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${KVT_GPU_BUILD:-build-gpu} # KVT_GPU_BUILD: another build dir

build() {
	export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
	if [[ ! -f $dir/build.ninja ]]; then
		meson setup "$dir" --buildtype=release -Dcuda=enabled -Dwerror=true
	fi
	ninja -C "$dir" tests/test_cuda tests/test_kvlayout cuda/kvtier-bench-gpu
}

run() {
	local out=${1:-$dir/gpu-check.jsonl} line driver
	for f in tests/test_cuda tests/test_kvlayout cuda/kvtier-bench-gpu; do
		[[ -x $dir/$f ]] || { echo "gpu-check: $dir/$f missing: run '$0 build' first" >&2; exit 1; }
	done
	command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
	line=$("$dir/tests/test_cuda" 2>&1 | head -n 1 || true) # "cuda: N GPU(s), driver D, runtime R"
	echo "gpu-check: $line"
	driver=$(sed -n 's/.*driver \([0-9]*\).*/\1/p' <<<"$line")
	if [[ -z $driver || $driver -eq 0 ]]; then
		echo "gpu-check: no CUDA driver or no GPU here: nothing to check" >&2
		exit 77
	fi
	if ((driver < 13000)); then
		echo "gpu-check: the driver supports CUDA $((driver / 1000)).$((driver % 1000 / 10)); this build needs CUDA 13 (driver >= 580): stopping" >&2
		exit 2
	fi
	echo "gpu-check: driver supports CUDA $((driver / 1000)).$((driver % 1000 / 10))"
	"$dir/tests/test_kvlayout"
	echo "gpu-check: test_kvlayout passed"
	"$dir/tests/test_cuda"
	echo "gpu-check: test_cuda passed"
	timeout 240 "$dir/cuda/kvtier-bench-gpu" | tee "$out"
	echo "gpu-check: bench figures in $out"
}

case ${1:-} in
build) build ;;
run) run "${2:-}" ;;
*) build && run "${1:-}" ;;
esac
