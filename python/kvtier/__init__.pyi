"""Type stubs of the kvtier package (the binding of libkvtier)."""
from typing import Any, Mapping, Optional, Sequence, Tuple, List, Union
from typing_extensions import Buffer
from types import TracebackType

Key = Buffer  # 1..64 bytes
Tokens = Union[Sequence[int], Buffer]  # ints in [0, 2**32) or a uint32 buffer
Value = Union[Buffer, Sequence[Buffer]]  # one part, or one buffer per part

OK: int
MISS: int
EXISTS: int
ENULL: int
EBADLEN: int
ENONS: int
EKEYLEN: int
EPIN: int
ECLOSED: int
ESTATE: int
EOPTION: int
EOPTVAL: int
ETOOBIG: int
EFULL: int
ECORRUPT: int
ELOCKED: int
EBADOP: int
ERANGE: int
EBUFSMALL: int
EFORK: int
EVERSION: int
EBUSY: int
EDESC: int
EWAIT: int
TIER_NONE: int
TIER_DRAM: int
TIER_SSD: int
TIER_REMOTE: int
TIER_SHARED: int
KEY_MAX: int
PARTS_MAX: int
__version__: str

class Error(Exception):
    """A libkvtier error."""
    code: int
    """kvtier code (E* constants) or -errno."""
    strerror: str
    """kvt_strerror(code)."""
    value_len: int
    """Only with code EBUFSMALL: the length of the value."""

def version() -> str: ...
def strerror(code: int) -> str: ...
def tier_name(tier: int) -> str: ...
def crc32c(data: Buffer, crc: int = 0) -> int: ...
def ns_digest(desc: Mapping[str, Any]) -> Tuple[bytes, str]:
    """Digest (32 bytes) and canonical text of a namespace descriptor.

    Keys: model, dtype, layout (str, required), block_tokens (int, required),
    config_hash, kv_quant, tenant (str or None), tp_rank, tp_size, pp_rank,
    pp_size (int), rank_agnostic, persistent (bool), retain (bool: every
    put of the namespace carries the retain hint, KVT_NS_RETAIN; policy
    like persistent, not in the digest), replicas (int: pod members
    holding each block, 0..8; policy like persistent, not in the digest).
    Unknown keys raise ValueError."""
def key_chain(ns_digest: Buffer, parent: Optional[Buffer], tokens: Tokens,
              extra: Optional[Buffer] = b"") -> bytes:
    """The 32-byte chained key of one block (doc/keys.md)."""
def key_chain_prompt(ns_digest: Buffer, tokens: Tokens, block_tokens: int,
                     include_partial: bool = False, extra: Optional[Buffer] = b"") -> List[bytes]:
    """Keys of every full block of a prompt (and a last partial one if asked)."""

class Store:
    def __init__(self, options: Optional[Mapping[str, Any]] = None, *, open: bool = True) -> None: ...
    def open(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, t: Optional[type], v: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool: ...
    def set_option(self, name: str, value: str) -> None: ...
    def register(self, desc: Mapping[str, Any]) -> int:
        """Local id of a namespace (registering it if new).  desc as
        ns_digest's; retain=True makes every put of the namespace carry the
        retain hint (KVT_NS_RETAIN, as put(..., retain=True))."""
    def ns_info(self, ns: int) -> Tuple[bytes, str]: ...
    def put(self, ns: int, key: Key, value: Value, *, nowait: bool = False,
            retain: bool = False) -> bool:
        """Store value (no copy here); True if stored, False if already present.
        nowait: a persistent namespace's put raises Error(EWAIT) at once
        instead of waiting for write-down room (then room()).
        retain: KVT_F_RETAIN, a hint that this block's prompt will be asked
        again (doc/policies.md "The retain hint")."""
    def get(self, ns: int, key: Key) -> Optional[bytes]: ...
    def get_into(self, ns: int, key: Key, buf: Union[Buffer, Sequence[Buffer]]) -> int:
        """Copy the value into writable buffer(s); its length, or 0 on a miss."""
    def exists(self, ns: int, key: Key) -> int:
        """Tier that holds the key (TIER_*), or 0."""
    def delete(self, ns: int, key: Key) -> bool: ...
    def lookup_prefix(self, ns: int, keys: Sequence[Key]) -> Tuple[int, List[int]]:
        """Count of leading keys present, and the tier of each key (0: absent)."""
    def prefetch(self, ns: int, keys: Sequence[Key]) -> int: ...
    def put_many(self, ns: int, keys: Sequence[Key], parts: Optional[Sequence[Buffer]] = None,
                 *, addrs: Optional[Sequence[int]] = None,
                 lens: Union[int, Sequence[int], None] = None,
                 nowait: bool = False, retain: bool = False) -> List[int]:
        """len(parts) // len(keys) parts per key; per key 1 stored, 0 present, < 0 a code
        (EWAIT with nowait, as put's); retain as put's."""
    def get_into_many(self, ns: int, keys: Sequence[Key],
                      parts: Optional[Sequence[Buffer]] = None, *,
                      addrs: Optional[Sequence[int]] = None,
                      lens: Union[int, Sequence[int], None] = None,
                      part: Optional[int] = None) -> List[int]:
        """Per key the value's length, 0 a miss, < 0 a code.  part=i: only
        part i of each value, the result then the bytes copied."""
    def exists_many(self, ns: int, keys: Sequence[Key]) -> List[int]:
        """Per key the tier holding it, 0 absent, < 0 a code."""
    def clear(self, ns: Optional[int] = None) -> int: ...
    def room(self, ns: int, length: int) -> bool:
        """True once a put of length bytes to ns would not wait for write-down
        room (at once for other namespaces), False if none came within
        ssd.writedown_wait_ms.  Waits without the GIL."""
    def flush(self) -> None: ...
    def stats(self) -> dict[str, Union[int, str]]: ...
    def stat(self, name: str) -> Optional[int]: ...
    def _inflight_peak(self, reset: bool = False) -> int: ...
