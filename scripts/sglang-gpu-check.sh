#!/usr/bin/env bash
# sglang-gpu-check.sh - the whole SGLang server path with the kvtier HiCache
# backend, on a machine with an NVIDIA GPU (doc/python.md, "SGLang").
#
# Usage: scripts/sglang-gpu-check.sh [BUILD-DIR]      (default: build)
#
# Needs: a kvtier build (meson setup BUILD && ninja -C BUILD: the Python
# package under BUILD/python and BUILD/daemon/kvtierd), a GPU, and either
# PyPI (the first run installs sglang==0.5.23 with its full CUDA
# requirement set into BUILD/python/venv-sglang-gpu) or that venv already
# there.  Nothing else is downloaded: the model is a 2-layer Llama with
# random weights written locally, served with --skip-tokenizer-init.
#
# What it checks (exit 0 only if all hold):
#   1. a kvtierd on 127.0.0.1:0 (SSD admission "always");
#   2. server 1: launch_server --enable-hierarchical-cache
#      --hicache-storage-backend dynamic with the kvtier extra-config and
#      kvtierd below; one 2,048-token prompt, max_new_tokens 1, logprobs;
#      its pages are written through to kvtierd (kvtierd's /metrics:
#      kvtier_dram_blocks, printed);
#   3. server 1 stops; server 2 starts (GPU and host caches empty); the
#      same prompt: SGLang reports cached tokens (all but the last page),
#      kvtierd counts the hits (printed), and the next token's top-20
#      log-probabilities equal run 1's (max abs difference printed,
#      bounded by 1e-2);
#   4. a different prompt of the same length is not served from storage.
# Logs and JSON answers stay in BUILD/sglang-gpu-check/.
set -euo pipefail

BUILD=$(realpath "${1:-build}")
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT="$BUILD/sglang-gpu-check"
VENV="$BUILD/python/venv-sglang-gpu"
KVTIERD="$BUILD/daemon/kvtierd"
mkdir -p "$OUT"
rm -rf "$OUT/kvtierd-data" "$OUT"/*.json

command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "no GPU (nvidia-smi)"; exit 77; }
[ -x "$KVTIERD" ] && [ -d "$BUILD/python/kvtier" ] || { echo "build kvtier first: ninja -C $BUILD"; exit 1; }

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import sglang" 2>/dev/null; then
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install --disable-pip-version-check "sglang==0.5.23" 2>&1 | tail -3
fi
PY="$VENV/bin/python"
export PYTHONPATH="$BUILD/python"

MODEL="$OUT/tiny-llama"
if [ ! -f "$MODEL/model.safetensors" ]; then
	"$PY" - "$MODEL" <<'EOF'
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=1024,
                  max_position_embeddings=8192, rope_theta=10000.0, initializer_range=0.2,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(sys.argv[1], safe_serialization=True)
EOF
fi

# 1. kvtierd
"$KVTIERD" --dir "$OUT/kvtierd-data" --dram 1G --ssd 2G --set ssd.admission=always \
	--listen 127.0.0.1:0 --metrics 127.0.0.1:0 --threads 2 --log "$OUT/kvtierd.log" &
KVPID=$!
SRVPID=
cleanup() {
	[ -n "$SRVPID" ] && kill "$SRVPID" 2>/dev/null && wait "$SRVPID" 2>/dev/null || true
	kill "$KVPID" 2>/dev/null && wait "$KVPID" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do
	grep -q "listening on 127.0.0.1:" "$OUT/kvtierd.log" 2>/dev/null && break
	sleep 0.1
done
KVADDR=$(grep -o "listening on 127.0.0.1:[0-9]*" "$OUT/kvtierd.log" | head -1 | sed 's/listening on //')
METRICS=$(grep -o "metrics listener on 127.0.0.1:[0-9]*" "$OUT/kvtierd.log" | head -1 | sed 's/metrics listener on //' || true)
echo "kvtierd at $KVADDR (metrics ${METRICS:-none})"

EXTRA=$(printf '{"backend_name":"kvtier","module_path":"kvtier.sglang","class_name":"KVTierHiCacheStorage","interface_v1":1,"kvtier.options":{"dram.capacity":"1G","remote.addr":"%s"}}' "$KVADDR")
PORT=30123

server() { # $1: log name
	"$PY" -m sglang.launch_server --model-path "$MODEL" --skip-tokenizer-init \
		--host 127.0.0.1 --port "$PORT" --page-size 16 --mem-fraction-static 0.2 \
		--enable-hierarchical-cache --hicache-ratio 2 --hicache-mem-layout page_first \
		--hicache-write-policy write_through \
		--hicache-storage-backend dynamic --hicache-storage-backend-extra-config "$EXTRA" \
		> "$OUT/$1.log" 2>&1 &
	SRVPID=$!
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
		kill -0 "$SRVPID" 2>/dev/null || { tail -40 "$OUT/$1.log"; return 1; }
		sleep 1
	done
	echo "server did not come up"; tail -40 "$OUT/$1.log"; return 1
}
stop_server() {
	kill "$SRVPID"; wait "$SRVPID" 2>/dev/null || true; SRVPID=
}
ask() { # $1: seed, $2: output file
	"$PY" - "$1" "$PORT" > "$2" <<'EOF'
import json, random, sys, urllib.request
seed, port = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
ids = [rng.randrange(3, 1024) for _ in range(2048)]
req = {"input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0},
       "return_logprob": True, "top_logprobs_num": 20}
r = urllib.request.urlopen(urllib.request.Request(
    f"http://127.0.0.1:{port}/generate", json.dumps(req).encode(),
    {"Content-Type": "application/json"}), timeout=600)
print(r.read().decode())
EOF
}
metric() { # kvtierd's block counts and hits (doc/metrics.md)
	[ -n "$METRICS" ] && curl -s "http://$METRICS/metrics" |
		grep -E "^kvtier_(dram|ssd)_(blocks|hits_total|misses_total) " || true
}

# 2. server 1 computes and stores
server server1
ask 1 "$OUT/run1.json"
sleep 5 # write-through is asynchronous in SGLang's backup thread
metric
stop_server

# 3. server 2 loads from kvtierd
server server2
ask 1 "$OUT/run2.json"
ask 2 "$OUT/other.json"
metric
stop_server

"$PY" - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def load(n):
    return json.load(open(f"{out}/{n}.json"))
r1, r2, other = load("run1"), load("run2"), load("other")
def top(r):
    lp = r["meta_info"]["output_top_logprobs"][0]
    return {int(t[1]): float(t[0]) for t in lp}
t1, t2 = top(r1), top(r2)
common = set(t1) & set(t2)
diff = max(abs(t1[k] - t2[k]) for k in common) if common else float("inf")
c2 = r2["meta_info"].get("cached_tokens", 0)
co = other["meta_info"].get("cached_tokens", 0)
print(f"run 2 cached_tokens {c2} (details {r2['meta_info'].get('cached_tokens_details')}), "
      f"other prompt {co}; top-20 logprob max diff {diff:.3g}")
ok = c2 >= 2048 - 16 - 1 and co < 16 and diff <= 1e-2 and len(common) >= 15
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
