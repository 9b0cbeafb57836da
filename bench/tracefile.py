"""tracefile.py - the request traces the benchmark scripts take (the
JSONL of data/traces/README.md: a request a line, its prefix blocks as
hash_ids).  Imported by the scripts in bench/ and bench/policy/."""
import json


def requests(path):
    """Every request's hash_ids, in trace order."""
    with open(path) as f:
        return [json.loads(line)["hash_ids"] for line in f if line.strip()]


def distinct(path):
    """How many distinct blocks the trace reads."""
    return len({h for r in requests(path) for h in r})


def quarter(path, block_bytes):
    """The issue's capacities for a trace: C, a quarter of its distinct
    blocks, in bytes, and the DRAM of the tiered runs, C/4 rounded down to
    whole blocks (the SSD or pod below it holds the rest)."""
    total = distinct(path) // 4 * block_bytes
    return total, total // 4 // block_bytes * block_bytes
