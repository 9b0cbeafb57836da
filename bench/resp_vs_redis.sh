#!/bin/sh
# resp_vs_redis.sh - the same redis-benchmark run against kvtierd --resp
# and against redis-server on this machine, interleaved, 3 rounds
# (bench/RESULTS.md "RESP listener").  Usage:
#   bench/resp_vs_redis.sh BUILD-DIR [ROUNDS]
# Prints one line per run: server size clients requests/s for SET and GET.
set -eu
build=${1:?usage: resp_vs_redis.sh BUILD-DIR [ROUNDS]}
rounds=${2:-3}
tmp=$(mktemp -d)
trap 'kill $kpid $rpid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$build/daemon/kvtierd" --dir "$tmp/kv" --dram 1G --ssd 0 --listen 127.0.0.1:0 \
	--resp 127.0.0.1:0 --threads 2 --log "$tmp/kv.log" &
kpid=$!
redis-server --save '' --appendonly no --port 0 --unixsocket "$tmp/redis.sock" \
	--logfile "$tmp/redis.log" &
rpid=$!
for i in $(seq 100); do
	grep -q "RESP listener on" "$tmp/kv.log" 2>/dev/null && [ -S "$tmp/redis.sock" ] && break
	sleep 0.1
done
kport=$(grep -o "RESP listener on 127.0.0.1:[0-9]*" "$tmp/kv.log" | sed 's/.*://')
# redis-server with --port 0 listens on no TCP port: give it one now.
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-cli -s "$tmp/redis.sock" config set port "$rport" >/dev/null
redis-cli -s "$tmp/redis.sock" config set bind 127.0.0.1 >/dev/null
run() { # server port size clients n
	out=$(redis-benchmark -h 127.0.0.1 -p "$2" -t set,get -d "$3" -c "$4" -n "$5" -q 2>&1 | tr '\r' '\n')
	set_rps=$(echo "$out" | grep '^SET: [0-9]' | sed 's/SET: \([0-9.]*\).*/\1/')
	get_rps=$(echo "$out" | grep '^GET: [0-9]' | sed 's/GET: \([0-9.]*\).*/\1/')
	echo "$1 d=$3 c=$4 n=$5 set_rps=$set_rps get_rps=$get_rps"
}
for r in $(seq "$rounds"); do
	run kvtierd "$kport" 1024 50 100000
	run redis "$rport" 1024 50 100000
	run kvtierd "$kport" 1048576 4 2000
	run redis "$rport" 1048576 4 2000
done
