"""_engine.py - what the engine connectors (kvtier.vllm, kvtier.sglang)
share: the store options from the engine's extra config and KVTIER_OPTIONS,
the descriptor value rules, their counters, and the worker's abstract Unix
socket server (RankServer).  Private: no engine import here."""
import errno
import hashlib
import multiprocessing
import os
import socket
import socketserver
import struct
import threading
import time
from typing import Optional


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


# ---------------------------------------------------------------------------
# A worker's abstract Unix socket

OP_RELEASE = b"R"      # "give your name up if your engine is gone"
BIND_WAIT_S = 10.0     # how long a worker waits for its name (kvtier.bind_wait_s)
_ASK_TIMEOUT_S = 2.0   # for a holder's answer to OP_RELEASE


def _proc_line(pid: int) -> str:
    """'pid N (its command line; parent P)', what /proc tells of a process."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        state, ppid = fields[0], int(fields[1])
        return (f"pid {pid} ({cmd[:120] or '?'}; parent {ppid}" +
                ("; stopped" if state in ("T", "t") else "") + ")")
    except (OSError, ValueError, IndexError):
        return f"pid {pid}"


def recv_exact(s, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            raise ConnectionError("peer closed")
        buf += b
    return bytes(buf)


def connect_rank(name: str, timeout: float) -> socket.socket:
    """A connection to the process that holds the abstract name, if it runs
    as this user (SO_PEERCRED): an abstract name is visible to the whole
    network namespace, and a process of another user that bound it first
    would be sent the prompts' token ids.  Raises PermissionError (an
    OSError) for another user's socket, OSError if nothing answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(name)
        pid, uid, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                       struct.calcsize("3i")))
        if uid != os.getuid():
            raise PermissionError(f"{name[1:]!r} is held by pid {pid} of user {uid}, not "
                                  f"this one (user {os.getuid()}): nothing sent to it")
        return s
    except BaseException:
        s.close()
        raise


def ask_release(name: str, timeout: Optional[float] = None) -> tuple:
    """Ask the process that holds the abstract name to give it up.
    (released, pid, what): released True once the holder closed its socket
    (its engine is gone), False if it answered that its engine runs, None if
    it did not answer; pid from SO_PEERCRED (0: unknown, or in another PID
    namespace)."""
    timeout = _ASK_TIMEOUT_S if timeout is None else timeout
    pid = 0
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(name)
            pid, uid, _ = struct.unpack(
                "3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                   struct.calcsize("3i")))
            if uid != os.getuid():
                return None, pid, f"user {uid}, not this one"
            s.sendall(OP_RELEASE)
            ok = recv_exact(s, 1)
            return ok == b"\1", pid, "gave it up" if ok == b"\1" else "its engine runs"
    except socket.timeout:
        return None, pid, f"no answer in {timeout:g} s"
    except (OSError, ConnectionError) as e:
        return None, pid, f"no answer ({e})"


class RankServer:
    """A worker's server on an abstract Unix socket whose name the other
    processes of its engine (and query_stats) derive from the engine id, so
    the name cannot change: a thread per connection, only this user's
    processes served (SO_PEERCRED: an abstract name is visible to the whole
    network namespace), ops of one byte, each handled by ops[op](socket).

    The name outlives its engine in any process left holding it (a worker
    whose engine was killed: the kernel frees an abstract name only with
    the socket).  A new worker that finds its name held asks the holder
    (OP_RELEASE): a holder whose parent is gone (reparented: the process
    that started it, its engine, died) closes its socket and the new worker
    takes the name at once; a holder whose engine still runs (another
    engine with this id on this host, or one shutting down) keeps it, and
    the new worker tries again until wait_s passed, then raises an error
    naming the holder's pid and what to do.  "Its parent" is the process
    that started it (multiprocessing's record, where it has one), so a
    worker orphaned before it built this server is orphaned too."""

    def __init__(self, name: str, ops: dict, wait_s: float = BIND_WAIT_S,
                 on_thread=None, log=None):
        self.name, self.ops, self.log = name, dict(ops), log
        # The process that started this one: multiprocessing knows it even
        # when it died before this constructor ran (a vLLM worker loading
        # weights outlives an engine killed meanwhile); getppid() then gives
        # init or a subreaper, and the worker would never see its orphanhood.
        parent = multiprocessing.parent_process()
        self.ppid = parent.pid if parent is not None else os.getppid()
        self.lock = threading.Lock()
        self.released = False
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                outer._handle(self.request)

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.server = Server(name, Handler)
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
            released, pid, what = ask_release(name)
            if released:
                if log:
                    log(f"kvtier: {_proc_line(pid)} held {name[1:]!r}, its engine gone: "
                        f"it gave the name up")
                continue
            if time.monotonic() >= deadline:
                holder = _proc_line(pid) if pid > 0 else "a process (ss -xlp shows which)"
                raise RuntimeError(
                    f"kvtier: abstract socket @{name[1:]} is held by {holder} "
                    f"({what}; waited {wait_s:g} s): another engine with this engine "
                    f"id runs on this host (give this one another "
                    f"kv_transfer_config.engine_id) or a process of an earlier one "
                    f"outlived it (stop it" +
                    (f": kill {pid}, kill -9 {pid} if it stays" if pid > 0 else "") + ")")
            time.sleep(0.1)

        def serve():
            if on_thread is not None:
                on_thread()
            self.server.serve_forever(poll_interval=0.1)

        threading.Thread(target=serve, name="kvtier-lookup", daemon=True).start()

    def orphaned(self) -> bool:
        return os.getppid() != self.ppid

    def _handle(self, s):
        cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", cred)[1] != os.getuid():
            return
        try:
            while True:
                op = s.recv(1)
                if not op:
                    return
                if op == OP_RELEASE:
                    if not self.orphaned():
                        s.sendall(b"\0")
                        return
                    # Closed before the answer: the asker binds on reading it.
                    self.close()
                    if self.log:
                        self.log(f"kvtier: parent {self.ppid} gone: gave "
                                 f"{self.name[1:]!r} up to a new engine's worker")
                    s.sendall(b"\1")
                    return
                handler = self.ops.get(op)
                if handler is None:
                    return
                handler(s)
        except (OSError, ConnectionError):
            return

    def close(self):
        with self.lock:
            if self.released:
                return
            self.released = True
        self.server.shutdown()
        self.server.server_close()
