"""kvtier.vllm's asynchronous bookkeeping, driven without an engine.

Run by run_vllm.py next to test_vllm.py, in the same venv (vLLM's base
classes, torch), against the real library and a real kvtierd.  The engine
test proves the common paths on vLLM itself; these drive, through the
connector's own methods in the order vLLM calls them, the paths an engine
run cannot reach on demand:

- a block deleted between the lookup and an asynchronous load: its vLLM
  block id (and the ones after it) comes out of
  get_block_ids_with_load_errors in the very call sequence that reports the
  request's load done (get_finished), as vLLM's contract requires, and
  the connector stores those blocks once vLLM has recomputed them; the
  request's kvtier_loaded_tokens counts only the blocks before the first
  that failed (so does a synchronous load's);
- a store that fails (values larger than the store can hold) costs a
  counter, raises nothing, and the request's delayed free is still
  reported;
- a preempted request's stores in flight are waited for before its blocks
  go back to vLLM (handle_preemptions), and a finished request is reported
  in finished_sending only once its stores are done;
- the worker's I/O threads (the connector's and the library's) run off
  the compute CPUs vLLM pins the worker's threads to;
- an asynchronous load whose block ids do not cover its blocks (a "cannot
  happen" of the scheduler side) is reported failed whole (failed_recving)
  and recomputed, instead of leaving the request waiting forever; a
  synchronous one reports the request's blocks in its range as load
  errors, so vLLM recomputes them instead of taking whatever they held as
  computed.
- a hybrid model (two KV cache groups, sliding-window and full): each
  group's blocks under its own keys, loads of the full group's blocks and
  the window's only, a load that misses failing whole (failed_recving, no
  block-level error), a store in flight fencing the sliding-window
  blocks it reads against a step that assigns one of them again, and two
  TP ranks whose windows differ agreeing on a prefix both can load.
- a worker of an earlier engine with the same engine id, its engine gone,
  still holding the lookup socket's name: the new worker starts at once.

The "engine" here: a scheduler-side and a worker-side KVTierConnector of one
engine id in this process (the lookup goes over the worker's real Unix
socket), a paged KV cache of torch tensors, and stand-ins for vLLM's
request, block list and scheduler output carrying only the fields the
connector reads.
"""
import contextlib
import os
import threading
import time
import uuid
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import kvtier
import vllm.distributed.parallel_state as ps
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
from vllm_support import Kvtierd

BS = 16            # tokens per block
NBLOCKS = 32       # blocks in the paged cache
SHAPE = (2, 4, BS, 8)  # per block and layer: K/V, heads, tokens, head dim (bf16: 2 KiB)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through run_vllm.py)")
    s = Kvtierd(os.environ["KVTIERD"], str(tmp_path_factory.mktemp("async")))
    yield s
    assert s.stop() == 0


@pytest.fixture(autouse=True)
def ranks(monkeypatch):
    monkeypatch.setattr(ps, "get_tensor_model_parallel_rank", lambda: 0)
    monkeypatch.setattr(ps, "get_pipeline_model_parallel_rank", lambda: 0)


def vllm_config(extra, engine_id=None):
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(engine_id=engine_id or
                                           "kvtier-async-" + uuid.uuid4().hex[:8],
                                           kv_connector_extra_config=extra),
        cache_config=SimpleNamespace(block_size=BS, cache_dtype="auto"),
        parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1),
        model_config=SimpleNamespace(model="fake-model",
                                     hf_config=SimpleNamespace(to_dict=lambda: {"l": 2})),
        compilation_config=SimpleNamespace(static_forward_context={}))


class Engine:
    """A scheduler-side and a worker-side connector sharing one config, and
    the worker's paged cache: 2 layers of NBLOCKS blocks."""

    def __init__(self, extra, shape=SHAPE, engine_id=None):
        from kvtier.vllm import KVTierConnector
        cfg = vllm_config(extra, engine_id)
        kvc = SimpleNamespace(num_blocks=NBLOCKS)
        self.worker = KVTierConnector(cfg, KVConnectorRole.WORKER, kvc)
        self.shape = shape
        self.kv = {f"layer.{i}": torch.zeros((NBLOCKS,) + shape, dtype=torch.bfloat16)
                   for i in range(2)}
        self.worker.register_kv_caches(self.kv)
        self.sched = KVTierConnector(cfg, KVConnectorRole.SCHEDULER, kvc)
        self.w = self.worker._worker

    def close(self):
        self.sched.shutdown()
        self.worker.shutdown()

    def fill(self, block_ids, seed):
        g = torch.Generator().manual_seed(seed)
        for t in self.kv.values():
            for b in block_ids:
                t[b] = torch.randn(self.shape, generator=g).to(torch.bfloat16)

    def block(self, b):
        return b"".join(t[b].view(torch.uint8).numpy().tobytes() for t in self.kv.values())

    def step(self, so, finished=frozenset(), forward=None):
        """One engine step as vLLM's model runner drives the worker; returns
        (finished_sending, finished_recving, load errors).  forward(): what
        the "forward pass" does, between the attention layers' hooks."""
        meta = self.sched.build_connector_meta(so)
        self.worker.bind_connector_metadata(meta)
        self.worker.handle_preemptions(meta)
        self.worker.start_load_kv(None)
        for name in self.kv:  # the attention layers, in order
            self.worker.wait_for_layer_load(name)
            if forward is not None:
                forward(name)
            self.worker.save_kv_layer(name, self.kv[name], None)
        self.worker.wait_for_save()
        sending, recving = self.worker.get_finished(set(finished))
        errors = self.worker.get_block_ids_with_load_errors()
        self.worker.clear_connector_metadata()
        return sending or set(), recving or set(), errors

    def hstep(self, so):
        """step(), reporting through get_transfer_results: (finished
        sending, finished receiving, failed receiving, load errors)."""
        meta = self.sched.build_connector_meta(so)
        self.worker.bind_connector_metadata(meta)
        self.worker.handle_preemptions(meta)
        self.worker.start_load_kv(None)
        self.worker.wait_for_save()
        res = self.worker.get_transfer_results(set())
        errors = self.worker.get_block_ids_with_load_errors()
        self.worker.clear_connector_metadata()
        return res.finished_sending, res.finished_recving, res.failed_recving, errors


def request(req_id, tokens, **params):
    return SimpleNamespace(request_id=req_id, prompt_token_ids=tokens, kv_transfer_params=params,
                           cache_salt=None, lora_request=None, mm_features=None)


def blocks(ids):
    return SimpleNamespace(get_block_ids=lambda: (list(ids),))


def sched_out(new=(), running=(), finished=(), preempted=()):
    """new: (req_id, block ids, computed, scheduled); running likewise,
    with the block ids new this step."""
    return SimpleNamespace(
        scheduled_new_reqs=[SimpleNamespace(req_id=r, block_ids=(list(b),),
                                            num_computed_tokens=c) for r, b, c, _ in new],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[r for r, _, _, _ in running], resumed_req_ids=set(),
            new_block_ids=[(list(b),) if b else None for _, b, _, _ in running],
            num_computed_tokens=[c for _, _, c, _ in running]),
        num_scheduled_tokens={r: n for r, _, _, n in list(new) + list(running)},
        finished_req_ids=set(finished), preempted_req_ids=set(preempted))


def compute_and_store(eng, req_id, tokens, ids, seed):
    """A request computed by the "engine" (its blocks filled with random KV)
    and stored by the connector; steps until its delayed free is reported."""
    r = request(req_id, tokens)
    assert eng.sched.get_num_new_matched_tokens(r, 0) == (0, False)
    eng.sched.update_state_after_alloc(r, blocks(ids), 0)
    eng.fill(ids, seed)
    sending, _, _ = eng.step(sched_out(new=[(req_id, ids, 0, len(tokens))]))
    delay, params = eng.sched.request_finished(r, ids)
    assert delay, "stores were in flight: vLLM must keep the blocks"
    for _ in range(200):
        sending, _, _ = eng.step(sched_out(), finished={req_id})
        if req_id in sending:
            return
        time.sleep(0.01)
    pytest.fail("the finished request's stores were never reported done")


def test_async_load_reports_a_block_gone_since_the_lookup(srv):
    """Engine A stores a prompt on the kvtierd; engine B (empty DRAM, same
    kvtierd) looks it up: below DRAM, so load_async; between lookup and load
    block 2 is deleted on the kvtierd.  B's load is reported done with
    blocks 2 and 3 as load errors in the same step, blocks 0 and 1 hold A's
    bytes."""
    opts = {"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off",
                               "remote.addr": srv.addr}}
    a, b = Engine(opts), Engine(opts)
    try:
        # One model, one namespace: B's blocks are A's keys.
        assert a.w.digest == b.w.digest
        toks = list(range(100, 100 + 4 * BS + 3))
        src = [3, 4, 5, 6]
        compute_and_store(a, "a1", toks, src, seed=1)
        a.worker.shutdown()  # (its puts reached the kvtierd: flush at close)

        r = request("b1", toks)
        n, load_async = b.sched.get_num_new_matched_tokens(r, 0)
        assert (n, load_async) == (4 * BS, True)
        st = b.w.stats()["connector"]
        assert st["lookup_slow_blocks"] == 4
        dst = [10, 11, 12, 13]
        b.sched.update_state_after_alloc(r, blocks(dst + [14]), n)
        # Block 2 is gone: from B's DRAM (the lookup's prefetch may have
        # brought it there) and from the kvtierd.
        b.w.prefetch_pool.shutdown(wait=True)
        key = kvtier.key_chain_prompt(b.w.digest, toks[: 4 * BS], BS)[2]
        b.w.store.delete(b.w.ns, key)
        with kvtier.Store({"dram.capacity": "8M", "dram.prefault": "off",
                           "remote.addr": srv.addr}) as c:
            ns = c.register(b.w.desc)
            c.delete(ns, key)
            assert c.exists(ns, key) == 0
        assert b.w.store.exists(b.w.ns, key) == 0
        errors, recving = set(), set()
        for _ in range(200):
            _, rv, err = b.step(sched_out())
            recving |= rv
            errors |= err
            if rv:
                break
            assert not err, "load errors reported before the load is done"
            time.sleep(0.01)
        assert recving == {"b1"}
        assert errors == {12, 13}
        assert [b.block(i) for i in dst[:2]] == [a.block(i) for i in src[:2]]
        c = b.w.stats()["connector"]
        assert (c["loads_async"], c["load_batches"], c["load_blocks"], c["load_misses"]) == \
            (1, 1, 2, 2)
        # vLLM: the failed blocks go back to be computed (num_computed_tokens
        # 2 blocks), a second update_state_after_alloc, then the request is
        # scheduled.  The connector stores blocks 2 and 3 once computed.
        b.sched.update_connector_output(SimpleNamespace(invalid_block_ids=errors))
        b.sched.update_state_after_alloc(r, blocks(dst + [14]), 0)
        meta = b.sched.build_connector_meta(
            sched_out(new=[("b1", dst + [14], 2 * BS, len(toks) - 2 * BS)]))
        assert [(t.req_id, t.first, t.block_ids) for t in meta.stores] == \
            [("b1", 2, [12, 13])]
        assert meta.loads == []
        # Loaded: the 2 blocks that arrived, not the 4 matched (before: 4).
        assert b.sched.request_finished(r, [])[1] == {"kvtier_loaded_tokens": 2 * BS}
    finally:
        a.close()
        b.close()


def test_failing_store_costs_a_counter_not_a_stall(srv):
    """Blocks larger than the whole store: every put fails (ETOOBIG or
    EFULL); nothing raises, store_errors counts them, and the finished
    request's delayed free is reported all the same."""
    eng = Engine({"kvtier.options": {"dram.capacity": "64K", "dram.prefault": "off"}},
                 shape=(2, 8, BS, 128))
    try:
        assert eng.w.block_bytes == 2 * 64 * 1024  # larger than the store
        compute_and_store(eng, "f1", list(range(3 * BS + 1)), [0, 1, 2], seed=2)
        c = eng.w.stats()["connector"]
        assert (c["store_batches"], c["store_errors"], c["store_blocks"]) == (1, 3, 0)
    finally:
        eng.close()


class SlowPuts:
    """The worker's Store, with put_many held until release() (real puts)."""

    def __init__(self, store):
        self.store, self.gate, self.started = store, threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    def put_many(self, *args, **kw):
        self.started.set()
        self.gate.wait(30)
        return self.store.put_many(*args, **kw)


def test_preemption_and_finish_wait_for_stores_in_flight():
    """While a request's store is held in flight: a step that preempts it
    does not return before the store is done; a finished request is not
    reported in finished_sending before its stores are."""
    eng = Engine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"}})
    slow = SlowPuts(eng.w.store)
    eng.w.store = slow
    try:
        toks = list(range(2 * BS + 1))
        r = request("p1", toks)
        eng.sched.get_num_new_matched_tokens(r, 0)
        eng.sched.update_state_after_alloc(r, blocks([7, 8, 9]), 0)
        eng.fill([7, 8], seed=3)
        eng.step(sched_out(new=[("p1", [7, 8, 9], 0, len(toks))]))
        assert slow.started.wait(10)
        # Finished while its store is held: not reported.
        delay, _ = eng.sched.request_finished(r, [7, 8, 9])
        assert delay
        sending, _, _ = eng.step(sched_out(), finished={"p1"})
        assert "p1" not in sending
        # A preemption of it (as if it were still running) waits.
        threading.Timer(0.3, slow.gate.set).start()
        t0 = time.monotonic()
        sending, _, _ = eng.step(sched_out(preempted={"p1"}))
        assert time.monotonic() - t0 >= 0.25
        assert eng.w.stats()["connector"]["store_blocks"] == 2
        sending |= eng.step(sched_out())[0]
        assert sending == {"p1"}
    finally:
        slow.gate.set()
        eng.close()


@contextlib.contextmanager
def matched(req_id, toks, ids, seed, load_async="always"):
    """An engine whose kvtier holds the 3 whole blocks of toks (a prompt of
    3 blocks and a token, computed in blocks 1-3 and stored by request
    "s1"), and request req_id of the same prompt, matched for all 3 blocks
    (asynchronously with load_async "always", synchronously with "never")
    and allocated the block ids ids: yields (engine, request)."""
    eng = Engine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"},
                  "kvtier.load_async": load_async})
    try:
        compute_and_store(eng, "s1", toks, [1, 2, 3], seed=seed)
        r = request(req_id, toks)
        assert eng.sched.get_num_new_matched_tokens(r, 0) == (3 * BS, load_async == "always")
        eng.sched.update_state_after_alloc(r, blocks(ids), 3 * BS)
        yield eng, r
    finally:
        eng.close()


# An orphaned worker of an earlier engine with the same id: a process that
# holds the worker's socket name (kvtier._engine.RankServer, as a worker
# does) and whose parent exited once it served.
ORPHAN = r'''
import os, subprocess, sys, time
if sys.argv[1] == "parent":
    p = subprocess.Popen([sys.executable, "-c", SRC, "holder", sys.argv[2]],
                         stdout=subprocess.PIPE, text=True)
    print(p.stdout.readline().strip(), flush=True)
else:
    from kvtier._engine import RankServer
    RankServer("\0" + sys.argv[2], {}, wait_s=0)
    print(os.getpid(), flush=True)
    time.sleep(60)
'''


def test_worker_starts_though_an_orphan_holds_its_socket():
    """A worker of an engine killed earlier still holds the socket name of
    rank 0 of engine id E (a CI run killed by hand: the next engine with E
    failed to start, EADDRINUSE): a new engine with E starts at once, and
    its scheduler's lookups and query_stats reach its own worker."""
    import signal
    import subprocess
    import sys
    from kvtier.vllm import _socket_name, query_stats
    eid = "kvtier-async-" + uuid.uuid4().hex[:8]
    src = "SRC = " + repr(ORPHAN) + "\n" + ORPHAN
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kvtier.__file__)))
    out = subprocess.run([sys.executable, "-c", src, "parent", _socket_name(eid, 0, 0)[1:]],
                         stdout=subprocess.PIPE, text=True, timeout=30, check=True,
                         env=env).stdout
    pid = int(out)
    try:
        t = time.monotonic()
        eng = Engine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"}},
                     engine_id=eid)
        took = time.monotonic() - t
        try:
            assert took < 5, took
            os.kill(pid, 0)  # alive, without the name
            toks = list(range(900, 900 + 2 * BS + 1))
            compute_and_store(eng, "o1", toks, [1, 2], seed=9)
            r = request("o2", toks)
            assert eng.sched.get_num_new_matched_tokens(r, 0)[0] == 2 * BS
            assert query_stats(eid)["connector"]["lookups"] >= 2
        finally:
            eng.close()
    finally:
        os.kill(pid, signal.SIGKILL)


def test_request_aborted_before_its_async_load_is_sent():
    """vLLM finishes (aborts) a request in WAITING_FOR_REMOTE_KVS before the
    step that would send its load: vLLM keeps its blocks until the workers
    report the load, so the load is still sent, done and reported (and the
    worker forgets the request's keys)."""
    toks = list(range(500, 500 + 3 * BS + 1))
    with matched("x1", toks, [20, 21, 22, 23], seed=4) as (eng, r):
        delay, params = eng.sched.request_finished(r, [20, 21, 22, 23])
        assert not delay and params == {"kvtier_loaded_tokens": 3 * BS}
        recving = set()
        for _ in range(200):
            recving |= eng.step(sched_out(), finished={"x1"})[1]
            if recving:
                break
            time.sleep(0.01)
        assert recving == {"x1"}
        assert [eng.block(b) for b in (20, 21, 22)] == [eng.block(b) for b in (1, 2, 3)]
        assert "x1" not in eng.w.keys


@pytest.mark.parametrize("ids", [[20], [20, 0, 22, 23]], ids=["too-few", "null-block"])
def test_async_load_with_inconsistent_block_ids_fails(ids):
    """An asynchronous load whose block ids do not cover the blocks to load
    (too few, or vLLM's null block among them: the connector logs "cannot
    happen") has nothing to send.  The request waits in vLLM's
    WAITING_FOR_REMOTE_KVS state until the workers report its load, so the
    load must still be reported: done and failed whole (failed_recving, no
    block-level error), after which the request is recomputed, not loaded
    again, and stored as it is computed.  (Before: no transfer was sent
    and the request waited forever.)"""
    toks = list(range(800, 800 + 3 * BS + 1))
    with matched("i1", toks, ids, seed=5) as (eng, r):
        got = None
        for _ in range(5):
            _, rv, failed, err = eng.hstep(sched_out())
            assert not err, "no block-level error: the load fails whole"
            if rv or failed:
                got = (rv, failed)
                break
        assert got == ({"i1"}, {"i1"}), "the load was never reported: the request waits forever"
        c = eng.w.stats()["connector"]
        assert (c["loads_failed"], c["load_batches"], c["load_misses"]) == (1, 0, 0), c
        # vLLM: num_computed_tokens 0, the request back to WAITING and
        # scheduled from its start; the connector does not load it again
        # and stores its blocks as they are computed.
        eng.sched.update_connector_output(SimpleNamespace(failed_recving={"i1"},
                                                          invalid_block_ids=set()))
        assert eng.sched.get_num_new_matched_tokens(r, 0) == (0, False)
        eng.sched.update_state_after_alloc(r, blocks([24, 25, 26, 27]), 0)
        meta = eng.sched.build_connector_meta(
            sched_out(new=[("i1", [24, 25, 26, 27], 0, len(toks))]))
        assert meta.loads == []
        assert [(t.req_id, t.first, t.block_ids) for t in meta.stores] == \
            [("i1", 0, [24, 25, 26])]
        assert eng.sched.request_finished(r, [])[1] == {"kvtier_loaded_tokens": 0}


@pytest.mark.parametrize("ids", [[20], [20, 0, 22, 23]], ids=["too-few", "null-block"])
def test_sync_load_with_inconsistent_block_ids_fails(ids):
    """The same for a synchronous load (the step's block ids, here also
    vLLM's at allocation, do not cover the blocks to load): vLLM counts the
    loaded tokens as computed once it schedules the request, so unless the
    step reports load errors it runs the request on whatever those blocks
    held (wrong output).  The step reports the request's real block ids in
    the load's range as load errors (get_block_ids_with_load_errors, no
    failed_recving: that is for requests waiting for an asynchronous
    load); vLLM truncates the request's computed tokens at the first of
    them in its table (block 0: everything recomputed), and the connector
    neither loads the request again nor counts its tokens as loaded.
    (Before: nothing was sent and nothing reported.)"""
    toks = list(range(900, 900 + 3 * BS + 1))
    with matched("i2", toks, ids, seed=6, load_async="never") as (eng, r):
        _, rv, failed, err = eng.hstep(sched_out(new=[("i2", ids, 3 * BS, len(toks) - 3 * BS)]))
        assert not rv and not failed
        assert err == set(ids[:3]) - {0}, "the failed load was not reported: vLLM computes garbage"
        # vLLM's _update_requests_with_invalid_blocks: the request's
        # computed tokens end at its first block reported.
        assert next(i for i, b in enumerate(ids) if b in err) == 0
        c = eng.w.stats()["connector"]
        assert (c["loads_failed"], c["loads_sync"], c["load_batches"]) == (1, 0, 0), c
        eng.sched.update_connector_output(SimpleNamespace(invalid_block_ids=err))
        # Recomputed from token 0 in the next step: not loaded again (its
        # blocks are in kvtier already: nothing to store either).
        meta = eng.sched.build_connector_meta(sched_out(running=[("i2", [], 0, len(toks))]))
        assert (meta.loads, meta.stores) == ([], [])
        assert eng.sched.request_finished(r, [])[1] == {"kvtier_loaded_tokens": 0}


def test_sync_load_missing_a_block_counts_only_the_blocks_before_it():
    """A synchronous load of 3 blocks whose second is gone (deleted since
    the lookup): the step reports it and the one after it as load errors,
    vLLM recomputes from it, and kvtier_loaded_tokens on output counts the
    one block that arrived.  (Before: 3 blocks, every matched token, so
    the metric over-counted each partial load.)"""
    toks = list(range(1000, 1000 + 3 * BS + 1))
    ids = [20, 21, 22, 23]
    with matched("m1", toks, ids, seed=7, load_async="never") as (eng, r):
        key = kvtier.key_chain_prompt(eng.w.digest, toks[: 3 * BS], BS)[1]
        eng.w.store.delete(eng.w.ns, key)
        assert eng.w.store.exists(eng.w.ns, key) == 0
        _, rv, failed, err = eng.hstep(sched_out(new=[("m1", ids, 3 * BS, len(toks) - 3 * BS)]))
        assert (rv, failed, err) == (set(), set(), {21, 22})
        assert eng.block(20) == eng.block(1)
        eng.sched.update_connector_output(SimpleNamespace(invalid_block_ids=err))
        assert eng.sched.request_finished(r, [])[1] == {"kvtier_loaded_tokens": BS}


def thread_cpus(w):
    """{thread: its allowed CPUs} of the worker's I/O threads in this
    process: the connector's pools (kvtier-*) and the library's (kvt-*)."""
    tids = {t.native_id: t.name for t in threading.enumerate() if t.name.startswith("kvtier-")}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            comm = f.read().strip()
        if comm.startswith("kvt-"):
            tids[int(tid)] = comm
    return {f"{name}/{tid}": os.sched_getaffinity(tid) for tid, name in tids.items()}


@pytest.mark.parametrize("mode", ["auto", "inherit", "auto-no-openmp"])
def test_io_threads_leave_the_compute_cpus(srv, mode, monkeypatch):
    """vLLM's CPU backend pins the worker's threads to its compute cores
    (OpenMP binds the initial thread), and a thread inherits the affinity
    of its creator: the connector's and the store's threads (pools, the
    library's kvt-* threads, with a kvtierd and an SSD) run on the CPUs
    the process had at start less the compute ones (kvtier.io_cpus
    "auto"), not on the compute core.  The main thread here is pinned to
    one CPU as OpenMP pins vLLM's worker; "inherit" (the connector before
    2026-12-02) leaves every one of them on it, and so does "auto" when no
    OpenMP binding is in the environment ("auto-no-openmp": the pinning is
    then the operator's, e.g. numactl to a GPU's NUMA node, and kept)."""
    for v in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"):
        monkeypatch.delenv(v, raising=False)
    if mode == "auto":
        monkeypatch.setenv("OMP_PROC_BIND", "true")   # as vLLM's CPU worker has it
    start = os.sched_getaffinity(0)
    if len(start) < 2:
        pytest.skip("one CPU: nothing to leave")
    compute = {min(start)}
    os.sched_setaffinity(0, compute)
    eng = None
    try:
        eng = Engine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off",
                                         "remote.addr": srv.addr},
                      "kvtier.io_cpus": mode.split("-")[0], "kvtier.load_async": "always"})
        base = {"auto": 1100, "inherit": 1200}.get(mode, 1300)  # (one kvtierd for all)
        toks = list(range(base, base + 2 * BS + 1))
        compute_and_store(eng, "c1", toks, [1, 2], seed=10)  # a store thread
        r = request("c2", toks)
        assert eng.sched.get_num_new_matched_tokens(r, 0) == (2 * BS, True)
        eng.sched.update_state_after_alloc(r, blocks([3, 4, 5]), 2 * BS)
        for _ in range(200):                                 # a load thread
            if eng.step(sched_out())[1]:
                break
            time.sleep(0.01)
        cpus = thread_cpus(eng.w)
        names = {k.split("/")[0].rstrip("_0123456789") for k in cpus}
        assert {"kvtier-store", "kvtier-load", "kvtier-lookup", "kvt-remote",
                "kvt-worker"} <= names, names
        st = eng.w.stats()
        if mode != "auto":
            assert st["io_cpus"] is None
            assert all(c == compute for c in cpus.values()), cpus
        else:
            assert st["io_cpus"] == sorted(start - compute)
            assert st["compute_cpus"] == sorted(compute)
            assert all(c == start - compute for c in cpus.values()), cpus
        assert os.sched_getaffinity(0) == compute   # the caller's own is kept
    finally:
        os.sched_setaffinity(0, start)
        if eng is not None:
            eng.close()


def test_async_load_from_ssd_while_its_prefetch_runs(tmp_path):
    """A prompt on the SSD tier only (engine A's store, reopened by B): B's
    lookup prefetches it and the asynchronous load follows at once; the load
    waits for the prefetch (a get racing a prefetch of the same SSD block
    misses in libkvtier) and every block loads."""
    opts = {"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off",
                               "path": str(tmp_path / "store"), "ssd.capacity": "256M",
                               "ssd.segment": "16M"},
            "kvtier.persistent": True}
    toks = list(range(900, 900 + 23 * BS + 5))
    src = list(range(23))
    a = Engine(opts)
    try:
        compute_and_store(a, "a1", toks, src, seed=6)
        want = [a.block(i) for i in src]
    finally:
        a.close()
    for attempt in range(3):  # the race, unguarded, lost most blocks 7 times in 8
        b = Engine(opts)
        try:
            assert b.w.store.stat("dram.blocks") == 0
            r = request("b1", toks)
            assert b.sched.get_num_new_matched_tokens(r, 0) == (23 * BS, True)
            b.sched.update_state_after_alloc(r, blocks(list(range(1, 25))), 23 * BS)
            recving = set()
            for _ in range(500):
                recving |= b.step(sched_out())[1]
                if recving:
                    break
                time.sleep(0.01)
            c = b.w.stats()["connector"]
            assert recving == {"b1"}
            assert (c["prefetches"], c["load_blocks"], c["load_misses"]) == (1, 23, 0), c
            assert [b.block(i) for i in range(1, 24)] == want
        finally:
            b.close()


def test_layerwise_store_copies_each_layer_as_it_ends():
    """kvtier.layerwise stores: save_kv_layer copies the layer's parts of
    the step's blocks out as that layer ends (each "layer" here is written
    by the step's forward just before its hook); the blocks are put from
    the copies, byte for byte what each layer held, and the request needs
    no delayed free (the cache is not read after the step): vLLM is told
    nothing in finished_sending (it would fail on a request it freed)."""
    eng = Engine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"},
                  "kvtier.layerwise": True})
    try:
        toks = list(range(700, 700 + 3 * BS + 1))
        ids = [4, 5, 6, 7]
        r = request("l1", toks)
        assert eng.sched.get_num_new_matched_tokens(r, 0) == (0, False)
        eng.sched.update_state_after_alloc(r, blocks(ids), 0)
        g = torch.Generator().manual_seed(7)

        def forward(name):
            for b in ids:
                eng.kv[name][b] = torch.randn(eng.shape, generator=g).to(torch.bfloat16)

        sending, _, _ = eng.step(sched_out(new=[("l1", ids, 0, len(toks))]), forward=forward)
        delay, _ = eng.sched.request_finished(r, ids)
        assert not delay, "layer-wise stores read copies: no delayed free"
        eng.w.drain()                   # (the put in flight)
        c = eng.w.stats()["connector"]
        assert (c["stores_layerwise"], c["layers_staged"], c["store_blocks"]) == (1, 2, 3)
        sending |= eng.step(sched_out(), finished={"l1"})[0]
        assert not sending
        keys = kvtier.key_chain_prompt(eng.w.digest, toks[: 3 * BS], BS)
        assert [eng.w.store.get(eng.w.ns, k) for k in keys] == [eng.block(b) for b in ids[:3]]
    finally:
        eng.close()


# -- a hybrid model: two KV cache groups (SupportsHMA) ----------------------

WIN = 2 * BS  # the sliding-window group's window


def hybrid_kv_cache_config():
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
    spec = dict(block_size=BS, num_kv_heads=4, head_size=8, dtype=torch.bfloat16)
    return SimpleNamespace(
        num_blocks=NBLOCKS, prefix_cacheable_group_ids=(0, 1), kv_cache_groups=[
            SimpleNamespace(layer_names=["layer.0", "layer.2"],
                            kv_cache_spec=SlidingWindowSpec(sliding_window=WIN, **spec)),
            SimpleNamespace(layer_names=["layer.1", "layer.3"],
                            kv_cache_spec=FullAttentionSpec(**spec))])


def hybrid_kv():
    """(the 2 buffers, layer name -> buffer): layers 0 and 1 share one."""
    bufs = [torch.zeros((NBLOCKS,) + SHAPE, dtype=torch.bfloat16) for _ in range(2)]
    return bufs, {"layer.0": bufs[0], "layer.1": bufs[0], "layer.2": bufs[1],
                  "layer.3": bufs[1]}


class HybridEngine(Engine):
    """Two KV cache groups as vLLM's hybrid allocator makes them: group 0
    sliding-window (layers 0 and 2), group 1 full attention (layers 1 and
    3); block ids are one pool, so one buffer holds a layer of each group
    (layers 0 and 1 share one, 2 and 3 the other)."""

    def __init__(self, extra):
        from kvtier.vllm import KVTierConnector
        cfg = vllm_config(extra)
        kvc = hybrid_kv_cache_config()
        self.worker = KVTierConnector(cfg, KVConnectorRole.WORKER, kvc)
        self.shape = SHAPE
        self.bufs, self.kv = hybrid_kv()
        self.worker.register_kv_caches(self.kv)
        self.sched = KVTierConnector(cfg, KVConnectorRole.SCHEDULER, kvc)
        self.w = self.worker._worker

    def block(self, b):
        """A group's value at block id b (either group: the same buffers)."""
        return b"".join(t[b].view(torch.uint8).numpy().tobytes() for t in self.bufs)

    def fill(self, block_ids, seed):
        g = torch.Generator().manual_seed(seed)
        for t in self.bufs:
            for b in block_ids:
                t[b] = torch.randn(self.shape, generator=g).to(torch.bfloat16)


def hblocks(swa, full):
    return SimpleNamespace(get_block_ids=lambda: (list(swa), list(full)))


def hsched_out(new=(), running=()):
    """new: (req_id, (swa ids, full ids), computed, scheduled)."""
    return SimpleNamespace(
        scheduled_new_reqs=[SimpleNamespace(req_id=r, block_ids=tuple(list(x) for x in b),
                                            num_computed_tokens=c) for r, b, c, _ in new],
        scheduled_cached_reqs=SimpleNamespace(
            req_ids=[r for r, _, _, _ in running], resumed_req_ids=set(),
            new_block_ids=[tuple(list(x) for x in b) if b else None for _, b, _, _ in running],
            num_computed_tokens=[c for _, _, c, _ in running]),
        num_scheduled_tokens={r: n for r, _, _, n in list(new) + list(running)},
        finished_req_ids=set(), preempted_req_ids=set())


def test_hybrid_store_in_flight_fences_a_reassigned_window_block():
    """A sliding-window group's blocks go back to vLLM while the request
    runs (out of the window): a store in flight that reads one is waited
    for by the step that assigns that block again (before it zeroes or
    computes it), and only by such a step: one that assigns other blocks,
    or a full-attention block the store reads, does not wait."""
    eng = HybridEngine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"}})
    slow = SlowPuts(eng.w.store)
    eng.w.store = slow
    try:
        toks = list(range(300, 300 + 3 * BS + 1))
        swa, full = [1, 2, 3, 4], [5, 6, 7, 8]
        r = request("h1", toks)
        assert eng.sched.get_num_new_matched_tokens(r, 0) == (0, False)
        eng.sched.update_state_after_alloc(r, hblocks(swa, full), 0)
        eng.fill(swa + full, seed=8)
        eng.hstep(hsched_out(new=[("h1", (swa, full), 0, len(toks))]))
        assert slow.started.wait(10)
        # Other blocks: no wait.  (Block 5 is the full group's: vLLM holds
        # those until the request finishes, so it is not fenced.)
        eng.hstep(hsched_out(new=[("o1", ([12], [5]), 0, 1)]))
        assert eng.w.stats()["connector"]["fence_waits"] == 0
        # Block 1, out of h1's window, freed and assigned to another request.
        threading.Timer(0.3, slow.gate.set).start()
        t0 = time.monotonic()
        eng.hstep(hsched_out(new=[("o2", ([1, 13], [14, 15]), 0, 1)]))
        assert time.monotonic() - t0 >= 0.25
        c = eng.w.stats()["connector"]
        assert c["fence_waits"] == 1 and c["store_blocks"] == 6, c
    finally:
        slow.gate.set()
        eng.close()


def test_hybrid_load_by_group_and_a_failed_load_fails_whole():
    """Per group: the prefix's keys in each group's namespace (no key in
    both), the full group's blocks all loaded and, of the sliding-window
    group, only the window's, asynchronously even from DRAM (several
    groups).  A load that misses a block fails whole: the request comes
    out in failed_recving with no block-level error (vLLM takes those of
    one group only), and it is not loaded again."""
    eng = HybridEngine({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"}})
    try:
        w = eng.w
        toks = list(range(600, 600 + 4 * BS + 1))
        swa, full = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
        r = request("s1", toks)
        eng.sched.get_num_new_matched_tokens(r, 0)
        eng.sched.update_state_after_alloc(r, hblocks(swa, full), 0)
        eng.fill(swa + full, seed=9)
        eng.hstep(hsched_out(new=[("s1", (swa, full), 0, len(toks))]))
        w.drain()
        ks = [kvtier.key_chain_prompt(g.digest, toks[: 4 * BS], BS) for g in w.groups]
        assert not set(ks[0]) & set(ks[1])
        for g, k, ids in zip(w.groups, ks, (swa, full)):
            assert [w.store.get(g.ns, x) for x in k] == [eng.block(b) for b in ids[:4]]

        # Loaded back: 4 blocks; the window of token 64 is blocks 2 and 3.
        r2 = request("l1", toks)
        assert eng.sched.get_num_new_matched_tokens(r2, 0) == (4 * BS, True)
        dswa, dfull = [0, 0, 20, 21, 22], [23, 24, 25, 26, 27]
        eng.sched.update_state_after_alloc(r2, hblocks(dswa, dfull), 4 * BS)
        got = set()
        for _ in range(200):
            _, rv, failed, err = eng.hstep(hsched_out())
            assert not failed and not err
            got |= rv
            if got:
                break
            time.sleep(0.01)
        assert got == {"l1"}
        assert [eng.block(b) for b in dswa[2:4]] == [eng.block(b) for b in swa[2:4]]
        assert [eng.block(b) for b in dfull[:4]] == [eng.block(b) for b in full[:4]]
        c = w.stats()["connector"]
        assert (c["loads_async"], c["load_blocks"], c["load_misses"]) == (1, 6, 0), c

        # A block of the full group gone between the lookup and the load.
        r3 = request("f1", toks)
        assert eng.sched.get_num_new_matched_tokens(r3, 0) == (4 * BS, True)
        w.store.delete(w.groups[1].ns, ks[1][1])
        eng.sched.update_state_after_alloc(r3, hblocks([0, 0, 28, 29, 30], [11, 12, 13, 14, 15]),
                                           4 * BS)
        res = None
        for _ in range(200):
            _, rv, failed, err = eng.hstep(hsched_out())
            assert not err, "block-level errors with several groups"
            if rv:
                res = (rv, failed)
                break
            time.sleep(0.01)
        assert res == ({"f1"}, {"f1"})
        assert w.stats()["connector"]["loads_failed"] == 1
        eng.sched.update_connector_output(SimpleNamespace(failed_recving={"f1"},
                                                          invalid_block_ids=set()))
        # vLLM recomputes it from the start: no load again.
        assert eng.sched.get_num_new_matched_tokens(r3, 0) == (0, False)
        assert eng.sched.request_finished(r3, [])[1] == {"kvtier_loaded_tokens": 0}
    finally:
        eng.close()


def test_hybrid_ranks_agree_on_a_window(monkeypatch):
    """TP = 2: a prefix one rank can load is not always one the other can
    (a shorter prefix needs another window), so the scheduler asks the
    ranks again, up to the smallest answer, until they agree.  Rank 0 holds
    the full group's 6 blocks and of the sliding-window group blocks 4 and
    5 (the window of the 6-block prefix), rank 1 blocks 0 to 3 (a 4-block
    prefix's window is blocks 2 and 3): alone they answer 6 and 4, and no
    prefix is loadable on both.  With rank 0 holding blocks 2 to 5 they
    agree on 4."""
    from kvtier.vllm import KVTierConnector
    cfg = vllm_config({"kvtier.options": {"dram.capacity": "16M", "dram.prefault": "off"}})
    cfg.parallel_config.tensor_parallel_size = 2
    kvc = hybrid_kv_cache_config()
    workers = []
    try:
        for rank in (0, 1):
            monkeypatch.setattr(ps, "get_tensor_model_parallel_rank", lambda r=rank: r)
            w = KVTierConnector(cfg, KVConnectorRole.WORKER, kvc)
            w.register_kv_caches(hybrid_kv()[1])
            workers.append(w)
        sched = KVTierConnector(cfg, KVConnectorRole.SCHEDULER, kvc)

        def plant(toks, swa_by_rank):
            for w, swa in zip(workers, swa_by_rank):
                for g in w._worker.groups:
                    for i, k in enumerate(kvtier.key_chain_prompt(g.digest, toks[: 6 * BS], BS)):
                        if not g.spec.window or i in swa:
                            assert w._worker.store.put(g.ns, k, bytes(g.block_bytes))

        a = list(range(1000, 1000 + 6 * BS + 1))
        plant(a, ({4, 5}, {0, 1, 2, 3}))
        tok_bytes = np.asarray(a[: 6 * BS], dtype=np.uint32).tobytes()
        assert [sched._sched._rank_lookup(r, 0, tok_bytes, b"", 0)[0] for r in (0, 1)] == [6, 4]
        assert sched.get_num_new_matched_tokens(request("a", a), 0) == (0, False)

        b = list(range(2000, 2000 + 6 * BS + 1))
        plant(b, ({2, 3, 4, 5}, {0, 1, 2, 3}))
        assert sched.get_num_new_matched_tokens(request("b", b), 0) == (4 * BS, True)
        sched.shutdown()
    finally:
        for w in workers:
            w.shutdown()
