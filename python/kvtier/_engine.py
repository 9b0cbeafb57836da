"""_engine.py - what the engine connectors (kvtier.vllm, kvtier.sglang)
share: the store options from the engine's extra config and KVTIER_OPTIONS,
the descriptor value rules, and their
counters.  Private: no engine import here."""
import hashlib
import os
import threading


def store_options(extra: dict) -> dict:
    """Store options from the engine's extra config ("kvtier.options") and
    KVTIER_OPTIONS (NAME=VALUE,...; the extra config wins); DRAM 1G unless
    set."""
    opts = {str(k): str(v) for k, v in (extra.get("kvtier.options") or {}).items()}
    for item in filter(None, os.environ.get("KVTIER_OPTIONS", "").split(",")):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"KVTIER_OPTIONS: {item!r} is not NAME=VALUE")
        opts.setdefault(name.strip(), value.strip())
    opts.setdefault("dram.capacity", "1G")
    return opts


def truthy(v) -> bool:
    return str(v).lower() in ("1", "true", "yes", "on")


def ident(s: str) -> str:
    """A descriptor string value: printable ASCII without space, 1..255
    bytes.  A value that had to be changed to fit keeps a hash of the
    original, so that two values never map to one."""
    out = "".join(c if 0x21 <= ord(c) <= 0x7E else "_" for c in s)
    if out != s or not out or len(out) > 255:
        out = out[:200] + "~" + hashlib.sha256(s.encode()).hexdigest()[:32]
    return out


class Counters:
    """A connector's counters, by name, added to from any thread."""

    NAMES: tuple = ()

    def __init__(self):
        self.lock = threading.Lock()
        self.v = dict.fromkeys(self.NAMES, 0)

    def add(self, **kw):
        with self.lock:
            for k, n in kw.items():
                self.v[k] += n

    def snapshot(self) -> dict:
        with self.lock:
            return dict(self.v)
