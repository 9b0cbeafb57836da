"""The kvtier Python package against libkvtier and a real kvtierd.

Run by run.py (meson test python_kvtier): PYTHONPATH holds the built
package, KVTIERD the server binary.  Every test asserts outcomes: bytes
equal byte for byte, keys equal doc/keys.md's vectors, errors carry codes,
copies and GIL releases are measured.
"""
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest

import kvtier
import kvtierd_proc

MiB = 1 << 20

DESC_A = dict(model="meta-llama/Llama-3.1-8B", dtype="bf16", layout="vllm-flash-nhd",
              block_tokens=16)
DESC_B = dict(model="deepseek-ai/DeepSeek-V3", config_hash="9f86d081884c7d65",
              dtype="fp8_e4m3", kv_quant="per-token-fp8", layout="mla-latent",
              block_tokens=64, tp_rank=3, tp_size=8, pp_rank=1, pp_size=2, tenant="acme",
              rank_agnostic=True)

# doc/keys.md, "Test vectors"
VECTORS = {
    "ns_A": "59ace3f23e1d9d4fed3d8eb211f925ae79d2a754c2e2a02e9ecab5eac7525dd1",
    "ns_B": "d9b2b5a3ae720ddf1a4271b05aa4b5821987a9f238d30f23344faeb8c632af6f",
    "ns_C": "bcd69b4545a397f91cb352b8ad4d527e72280ca369b6a822c8178b23452c4137",
    "key_first": "e2294467fc597ef56fd91208957f19fe6389dbd744965c1d9cef48af46725526",
    "key_second": "49e3f755e0d32c51ee7c0b5ac4b31149b78173ff9198f1ec05522696d3615fac",
    "key_extra": "3f23dbd4e29a9b556dc8fd623980abfab0428ac1ead8640038a420a568c46b89",
    "key_bytes": "b27297da2aa6a00efcb6bcbb7cf9e3ec50b93aac118e4ac315af2c1b3d6751e6",
    "prompt_0": "e8c0b292cfa6079e84c37db362d6cb81e4cb80002747780930fc792189a4c56b",
    "prompt_1": "11186f5b2dd27f036d1f9091865037fda64e80e62efa84342e7fa311b69de09c",
    "prompt_2": "90021eb259b8c2838b626c0ea1efe3e5020ed280f5b5184896a7bbb83463dc88",
    "prompt_salt_0": "4e60be2da12b81dd1a5cc05c01aa7b10ff66ec174f947940832c9ed4ff899013",
    "prompt_salt_1": "0f0930aa2ea36a4150f2a2b7ac376da1ec8c4bac0bb4b1bb275589d31938e2ab",
    "prompt_salt_2": "e5538a13cf83095235b4748ab6b5aaa14156884ed743e7b1b9e930bbb5243c26",
}
CANON_A = ("kvtier-ns 1\nmodel=meta-llama/Llama-3.1-8B\nconfig=-\ndtype=bf16\nkv_quant=-\n"
           "layout=vllm-flash-nhd\nblock_tokens=16\ntp=0/1\npp=0/1\ntenant=-\n")


def small(**extra):
    opts = {"dram.capacity": "128M", "dram.prefault": "off", "dram.shards": 1}
    opts.update(extra)
    return opts


@pytest.fixture
def store():
    with kvtier.Store(small()) as s:
        yield s


@pytest.fixture
def ns(store):
    return store.register(DESC_A)


# ---------------------------------------------------------------- keys


def test_namespace_vectors():
    d, canon = kvtier.ns_digest(DESC_A)
    assert d.hex() == VECTORS["ns_A"]
    assert canon == CANON_A and len(canon) == 134
    assert kvtier.ns_digest(DESC_B)[0].hex() == VECTORS["ns_B"]
    # rank-agnostic: every tp rank has B's digest
    assert kvtier.ns_digest(dict(DESC_B, tp_rank=0))[0].hex() == VECTORS["ns_B"]
    assert kvtier.ns_digest(dict(DESC_B, rank_agnostic=False))[0].hex() == VECTORS["ns_C"]
    # persistent is policy, not identity
    assert kvtier.ns_digest(dict(DESC_A, persistent=True))[0].hex() == VECTORS["ns_A"]
    # so is replicas (the pod members holding each block), up to 8
    assert kvtier.ns_digest(dict(DESC_A, replicas=2))[0].hex() == VECTORS["ns_A"]
    with pytest.raises(kvtier.Error) as e:
        kvtier.ns_digest(dict(DESC_A, replicas=9))
    assert e.value.code == kvtier.EDESC


def test_key_vectors():
    ns_d = bytes.fromhex(VECTORS["ns_A"])
    k1 = kvtier.key_chain(ns_d, None, list(range(1, 17)))
    assert k1.hex() == VECTORS["key_first"]
    assert kvtier.key_chain(ns_d, k1, list(range(17, 33))).hex() == VECTORS["key_second"]
    assert kvtier.key_chain(ns_d, k1, range(17, 33), b"lora:7").hex() == VECTORS["key_extra"]
    assert (kvtier.key_chain(ns_d, None, [0x01020304, 0xFFFFFFFF], b"\x00\xff\x10").hex()
            == VECTORS["key_bytes"])
    toks = [(i * 2654435761) % 2**32 for i in range(37)]
    keys = kvtier.key_chain_prompt(ns_d, toks, 16, include_partial=True)
    assert [k.hex() for k in keys] == [VECTORS[f"prompt_{i}"] for i in range(3)]
    assert kvtier.key_chain_prompt(ns_d, toks, 16) == keys[:2]  # full blocks only
    salted = kvtier.key_chain_prompt(ns_d, toks, 16, include_partial=True, extra=b"salt")
    assert [k.hex() for k in salted] == [VECTORS[f"prompt_salt_{i}"] for i in range(3)]
    # a uint32 numpy array is read in place and gives the same keys
    arr = np.array(toks, dtype=np.uint32)
    assert kvtier.key_chain_prompt(ns_d, arr, 16, include_partial=True) == keys
    # other integer dtypes go through the int path, same result
    assert kvtier.key_chain_prompt(ns_d, arr.astype(np.int64), 16, True) == keys


def test_key_errors():
    ns_d = bytes.fromhex(VECTORS["ns_A"])
    with pytest.raises(kvtier.Error) as e:
        kvtier.key_chain(ns_d, None, [])
    assert e.value.code == kvtier.EBADLEN
    with pytest.raises(kvtier.Error) as e:
        kvtier.key_chain(ns_d, b"short parent", [1])
    assert e.value.code == kvtier.EKEYLEN
    with pytest.raises(OverflowError):
        kvtier.key_chain(ns_d, None, [2**32])
    with pytest.raises(ValueError):
        kvtier.key_chain(b"x" * 31, None, [1])
    with pytest.raises(kvtier.Error) as e:
        kvtier.key_chain_prompt(ns_d, [1, 2], 0)
    assert e.value.code == kvtier.EBADLEN


def test_descriptor_errors():
    with pytest.raises(kvtier.Error) as e:
        kvtier.ns_digest(dict(DESC_A, tp_rank=1))  # rank >= size
    assert e.value.code == kvtier.EDESC
    assert e.value.strerror == kvtier.strerror(kvtier.EDESC)
    with pytest.raises(kvtier.Error) as e:
        kvtier.ns_digest(dict(DESC_A, model="has space"))
    assert e.value.code == kvtier.EDESC
    with pytest.raises(ValueError, match="unknown namespace descriptor key 'blok_tokens'"):
        kvtier.ns_digest(dict(DESC_A, blok_tokens=16))


def test_store_namespace_info(store):
    a = store.register(DESC_A)
    b = store.register(DESC_B)
    assert a != b and store.register(DESC_A) == a
    digest, canon = store.ns_info(a)
    assert digest.hex() == VECTORS["ns_A"] and canon == CANON_A
    with pytest.raises(kvtier.Error) as e:
        store.ns_info(999)
    assert e.value.code == kvtier.ENONS


# ---------------------------------------------------------------- values


def test_round_trips(store, ns):
    rng = np.random.default_rng(1)
    vals = {
        b"bytes": bytes(range(256)) * 300,
        b"bytearray": bytearray(rng.integers(0, 256, 70001, dtype=np.uint8).tobytes()),
        b"numpy": rng.standard_normal((4, 1000, 32)).astype(np.float16),
        b"memoryview": memoryview(bytes(rng.integers(0, 256, 5, dtype=np.uint8))),
    }
    for k, v in vals.items():
        assert store.put(ns, k, v) is True
    for k, v in vals.items():
        want = bytes(memoryview(v).cast("B"))
        assert store.get(ns, k) == want
        out = bytearray(len(want))
        assert store.get_into(ns, k, out) == len(want)
        assert out == want
    arr = vals[b"numpy"]
    out = np.zeros_like(arr)
    assert store.get_into(ns, b"numpy", out) == arr.nbytes
    assert np.array_equal(out, arr) and out.tobytes() == arr.tobytes()


def test_parts(store, ns):
    layers = [np.full((16, 64), i, dtype=np.float32) for i in range(8)]
    assert store.put(ns, b"k", layers)
    whole = store.get(ns, b"k")
    assert whole == b"".join(x.tobytes() for x in layers)
    # scatter back into per-layer arrays: one destination per part
    outs = [np.empty_like(x) for x in layers]
    assert store.get_into(ns, b"k", outs) == sum(x.nbytes for x in layers)
    for x, y in zip(layers, outs):
        assert np.array_equal(x, y)
    with pytest.raises(ValueError):
        store.put(ns, b"none", [])


def test_miss_and_exists(store, ns):
    assert store.get(ns, b"absent") is None
    assert store.get_into(ns, b"absent", bytearray(8)) == 0
    assert store.exists(ns, b"absent") == 0
    assert store.delete(ns, b"absent") is False
    assert store.put(ns, b"k", b"v1") is True
    assert store.put(ns, b"k", b"v2") is False  # keys name immutable bytes
    assert store.get(ns, b"k") == b"v1"
    assert store.exists(ns, b"k") == kvtier.TIER_DRAM
    assert kvtier.tier_name(store.exists(ns, b"k")) == "dram"
    assert store.delete(ns, b"k") is True
    assert store.get(ns, b"k") is None


def test_large_get_exact_length(store, ns):
    v = os.urandom(3 * MiB + 17)
    store.put(ns, b"big", v)
    got = store.get(ns, b"big")
    assert len(got) == len(v) and got == v


def test_errors_carry_codes(store, ns):
    with pytest.raises(kvtier.Error) as e:
        store.put(ns, b"", b"x")
    assert e.value.code == kvtier.EKEYLEN
    with pytest.raises(kvtier.Error) as e:
        store.put(ns, b"k" * 65, b"x")
    assert e.value.code == kvtier.EKEYLEN
    with pytest.raises(kvtier.Error) as e:
        store.get(12345, b"k")
    assert e.value.code == kvtier.ENONS
    assert e.value.strerror == kvtier.strerror(kvtier.ENONS)
    assert e.value.args == (kvtier.ENONS, kvtier.strerror(kvtier.ENONS))
    store.put(ns, b"k", b"123456")
    with pytest.raises(kvtier.Error) as e:
        store.get_into(ns, b"k", bytearray(3))
    assert e.value.code == kvtier.EBUFSMALL and e.value.value_len == 6
    with pytest.raises(BufferError):
        store.get_into(ns, b"k", b"read-only bytes")
    with pytest.raises(kvtier.Error) as e:
        kvtier.Store({"no.such.option": "1"})
    assert e.value.code == kvtier.EOPTION
    with pytest.raises(kvtier.Error) as e:
        kvtier.Store({"dram.chunk": "3K"})
    assert e.value.code == kvtier.EOPTVAL
    with pytest.raises(kvtier.Error) as e:
        store.set_option("dram.capacity", "1G")  # after open
    assert e.value.code == kvtier.ESTATE
    # a non-contiguous array is refused, not silently copied
    a = np.zeros((64, 64), dtype=np.uint8)[:, ::2]
    with pytest.raises((BufferError, ValueError)):  # numpy says ValueError
        store.put(ns, b"nc", a)


def test_closed_store():
    s = kvtier.Store(small())
    ns = s.register(DESC_A)
    s.close()
    s.close()  # idempotent
    with pytest.raises(kvtier.Error) as e:
        s.get(ns, b"k")
    assert e.value.code == kvtier.ECLOSED
    lazy = kvtier.Store(small(), open=False)
    with pytest.raises(kvtier.Error) as e:
        lazy.put(1, b"k", b"v")
    assert e.value.code == kvtier.ECLOSED
    lazy.set_option("dram.capacity", "32M")
    lazy.open()
    n = lazy.register(DESC_A)
    assert lazy.put(n, b"k", b"v") and lazy.get(n, b"k") == b"v"
    lazy.close()


def test_lookup_prefetch_clear_stats(store, ns):
    digest = store.ns_info(ns)[0]
    keys = kvtier.key_chain_prompt(digest, list(range(160)), 16)
    assert len(keys) == 10
    for k in keys[:6]:
        store.put(ns, k, k * 100)
    store.delete(ns, keys[3])
    count, tiers = store.lookup_prefix(ns, keys)
    assert count == 3
    assert tiers[:3] == [kvtier.TIER_DRAM] * 3 and tiers[3] == kvtier.TIER_NONE
    assert tiers[4] in (kvtier.TIER_NONE, kvtier.TIER_DRAM)
    assert store.prefetch(ns, keys[:3]) == 3
    store.flush()
    st = store.stats()
    assert st["dram.puts"] == 6 and st["dram.deletes"] == 1 and st["dram.blocks"] == 5
    assert st["dram.put_bytes"] == 6 * 3200 and st["dram.lookups"] >= 1
    assert st["dram.policy"] == "prefix-adapt"  # text statistics come through as str
    assert store.stat("dram.puts") == 6
    assert store.stat("dram.policy") is None  # not numeric
    assert store.stat("no.such.stat") is None
    assert store.clear(ns) == 5
    assert store.lookup_prefix(ns, keys)[0] == 0
    assert store.clear() == 0


def test_crc32c():
    assert kvtier.crc32c(b"123456789") == 0xE3069283
    assert kvtier.crc32c(b"6789", kvtier.crc32c(b"12345")) == 0xE3069283


# ---------------------------------------------------------------- no copies


def test_put_does_not_copy(store, ns):
    """A 64 MiB array put through a memoryview: Python allocates nothing
    near its size (numpy and CPython report their allocations to
    tracemalloc; a bytes() or tobytes() copy would show as 64 MiB)."""
    arr = np.random.default_rng(2).integers(0, 255, 64 * MiB, dtype=np.uint8)
    mv = memoryview(arr)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        assert store.put(ns, b"big", mv)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    # and it really stored the bytes
    out = np.empty_like(arr)
    assert store.get_into(ns, b"big", out) == arr.nbytes
    assert np.array_equal(out, arr)


def test_get_into_fills_in_place(store, ns):
    src = np.random.default_rng(3).standard_normal(4 * MiB // 4).astype(np.float32)
    store.put(ns, b"k", src)
    dst = np.zeros_like(src)
    addr = dst.__array_interface__["data"][0]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        n = store.get_into(ns, b"k", dst)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert n == src.nbytes
    assert dst.__array_interface__["data"][0] == addr  # same memory, filled in place
    assert np.array_equal(dst, src)
    assert peak < 64 * 1024, peak
    # a view into a bigger array: the value lands exactly there
    big = np.zeros(src.size + 1000, dtype=np.float32)
    assert store.get_into(ns, b"k", big[500:500 + src.size]) == src.nbytes
    assert np.array_equal(big[500:500 + src.size], src)
    assert not big[:500].any() and not big[500 + src.size:].any()


def test_get_allocates_once(store, ns):
    v = os.urandom(16 * MiB)
    store.put(ns, b"k", v)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        got = store.get(ns, b"k")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert got == v
    assert 16 * MiB <= peak < 16 * MiB + 256 * 1024, peak


# ---------------------------------------------------------------- threads


def test_threads_overlap_with_gil_released():
    """Two Python threads doing 16 MiB get_into at once: the library is
    entered by both at the same time (the binding counts calls inside the
    library without the GIL), and every byte comes back right."""
    with kvtier.Store(small(**{"dram.capacity": "256M"})) as s:
        ns = s.register(DESC_A)
        vals = [np.full(16 * MiB, i + 1, dtype=np.uint8) for i in range(4)]
        for i, v in enumerate(vals):
            s.put(ns, b"v%d" % i, v)
        rounds = 40
        errors = []

        def worker(t):
            dst = np.empty(16 * MiB, dtype=np.uint8)
            try:
                for r in range(rounds):
                    i = (t + r) % 4
                    assert s.get_into(ns, b"v%d" % i, dst) == 16 * MiB
                    assert dst[0] == i + 1 and dst[-1] == i + 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def timed(n):
            s._inflight_peak(True)
            ts = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return time.perf_counter() - t0, s._inflight_peak()

        one, peak1 = timed(1)
        two, peak2 = timed(2)
        assert not errors, errors
        assert peak1 == 1
        assert peak2 == 2, "the two threads were never inside the library at once"
        gbps = lambda t, n: n * rounds * 16 * MiB / t / 1e9  # noqa: E731
        print(f"\n16 MiB get_into: 1 thread {gbps(one, 1):.2f} GB/s, "
              f"2 threads {gbps(two, 2):.2f} GB/s (ratio {one * 2 / two:.2f})")


def test_blocking_wait_releases_gil():
    """A prefetch waits on a queue for a worker; with the workers paused it
    cannot finish until another Python thread unpauses them.  If the wait
    held the GIL, that thread could never run and this test would hang
    (meson's timeout fails it)."""
    with kvtier.Store(small()) as s:
        ns = s.register(DESC_A)
        s.put(ns, b"k", b"v")
        s.set_option("debug.pause_workers", "1")
        result = []
        t = threading.Thread(target=lambda: result.append(s.prefetch(ns, [b"k"])))
        t.start()
        time.sleep(0.3)
        assert t.is_alive(), "prefetch finished with the workers paused"
        # Python runs while the call waits: counted in iterations, not
        # in a time window (a window can fall in a stall of this thread
        # on a loaded machine); 1001 of them, within 5 s at most.
        ticks = 0
        t_end = time.perf_counter() + 5
        while ticks <= 1000 and time.perf_counter() < t_end:
            ticks += 1  # Python runs while the other thread waits
        s.set_option("debug.pause_workers", "0")
        t.join(30)
        assert not t.is_alive() and result == [1]
        assert ticks > 1000


def test_concurrent_put_get_close():
    """Threads putting and getting while the main thread closes: calls in
    flight finish, later ones raise ECLOSED; nothing crashes.  A wrong
    value or any other exception in a worker is collected and fails the
    test here, in the main thread (an assert in a thread only prints)."""
    s = kvtier.Store(small())
    ns = s.register(DESC_A)
    stop = threading.Event()
    seen = []
    failures = []
    ops = [0] * 4

    def worker(t):
        i = 0
        try:
            while not stop.is_set():
                k = b"t%d-%d" % (t, i)
                v = os.urandom(1000 + i % 5000)
                try:
                    s.put(ns, k, v)
                    got = s.get(ns, k)
                except kvtier.Error as e:
                    seen.append(e.code)
                    return
                if got is not None and got != v:  # evicted (None) or exact
                    raise AssertionError(f"thread {t} key {k!r}: the value read back differs "
                                         f"from the one put ({len(got)}/{len(v)} bytes)")
                i += 1
                ops[t] = i
        except BaseException as e:  # noqa: BLE001 - asserted in the main thread
            failures.append(e)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    time.sleep(0.5)
    s.close()
    stop.set()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts), "a worker did not finish"
    assert not failures, failures
    assert sum(ops) > 0, "no put/get round trip completed before close"
    assert all(c == kvtier.ECLOSED for c in seen), seen


# ---------------------------------------------------------------- SSD tier


def test_ssd_tier_survives_reopen(tmp_path):
    opts = small(path=str(tmp_path / "store"), **{"ssd.capacity": "64M",
                                                  "ssd.segment": "4M",
                                                  "ssd.admission": "always"})
    v = np.random.default_rng(4).integers(0, 255, 300000, dtype=np.uint8)
    with kvtier.Store(opts) as s:
        ns = s.register(DESC_A)
        assert s.put(ns, b"persist", v)
        s.flush()
    with kvtier.Store(opts) as s:
        ns2 = s.register(DESC_A)
        assert ns2 == ns  # the registry persisted the id
        assert s.exists(ns2, b"persist") == kvtier.TIER_SSD
        out = np.zeros_like(v)
        assert s.get_into(ns2, b"persist", out) == v.nbytes
        assert np.array_equal(out, v)
    with kvtier.Store(opts) as s, pytest.raises(kvtier.Error) as e:
        kvtier.Store(opts)  # a second opener of the directory
    assert e.value.code == kvtier.ELOCKED


def test_room_and_nowait(tmp_path):
    """KVT_OP_ROOM and KVT_F_NOWAIT through the binding.  A persistent
    namespace, a 1 MiB write-down backlog and a writer that waits 5 s
    before each write: one 1 MiB put fills the backlog; then a nowait put
    raises EWAIT and a nowait put_many gives EWAIT per key, none counted as
    a wait; room() with the bound at 200 ms is False (a counted timeout),
    and a plain put fails (EFULL); room() of another namespace is True at
    once.  Once the writer has written (flush), room() is True and a
    nowait put lands, byte-exact."""
    opts = small(path=str(tmp_path / "store"), **{"ssd.capacity": "16M", "ssd.segment": "4M",
                                                  "ssd.writedown_max": "1M",
                                                  "ssd.writedown_wait_ms": 200,
                                                  "ssd.debug_write_delay_ms": 5000})
    big = np.random.default_rng(5).integers(0, 255, MiB, dtype=np.uint8)
    v = np.random.default_rng(6).integers(0, 255, 65536, dtype=np.uint8)
    with kvtier.Store(opts) as s:
        pns = s.register(dict(DESC_A, persistent=True))
        ons = s.register(DESC_B)
        assert s.put(pns, b"big", big)
        # The writer holds the backlog for 5 s from here; the steps below
        # take 400 ms (the two 200 ms bounds) and a few milliseconds: 12x
        # headroom for a loaded machine (doc/testing.md), paid once at
        # flush.
        with pytest.raises(kvtier.Error) as e:
            s.put(pns, b"k", v, nowait=True)
        assert e.value.code == kvtier.EWAIT
        assert s.put_many(pns, [b"k", b"k2"], [v, v], nowait=True) == [kvtier.EWAIT] * 2
        assert s.stat("ssd.writedown_put_waits") == 0
        assert s.room(ons, len(v)) is True
        assert s.room(pns, len(v)) is False
        assert s.stat("ssd.writedown_put_timeouts") == 1
        with pytest.raises(kvtier.Error) as e:
            s.put(pns, b"k", v)
        assert e.value.code == kvtier.EFULL
        assert s.exists(pns, b"k") == 0
        s.flush()  # the writer wrote "big": the backlog is empty
        assert s.room(pns, len(v)) is True
        assert s.put(pns, b"k", v, nowait=True) is True
        out = np.zeros_like(v)
        assert s.get_into(pns, b"k", out) == v.nbytes
        assert np.array_equal(out, v)
        with pytest.raises(ValueError):
            s.get_into_many(pns, [b"k"], [out], nowait=True)


def test_retain_hint():
    """put(..., retain=True) and put_many(..., retain=True) are puts with
    KVT_F_RETAIN: each reaches prefix-adapt's queues (dram.retain_hints);
    a plain put counts nothing; a read with retain= is a ValueError."""
    v = np.arange(4096, dtype=np.uint8)
    with kvtier.Store(small(**{"dram.policy": "prefix-adapt"})) as s:
        ns = s.register(DESC_A)
        assert s.put(ns, b"a", v, retain=True) is True
        assert s.stat("dram.retain_hints") == 1
        assert s.put(ns, b"b", v) is True
        assert s.stat("dram.retain_hints") == 1
        assert s.put_many(ns, [b"c", b"d"], [v, v], retain=True) == [1, 1]
        assert s.stat("dram.retain_hints") == 3
        assert s.put_many(ns, [b"e"], [v]) == [1]
        assert s.stat("dram.retain_hints") == 3
        with pytest.raises(ValueError):
            s.get_into_many(ns, [b"a"], [np.zeros_like(v)], retain=True)


def test_retain_namespace_default():
    """A namespace registered retain=True (KVT_NS_RETAIN) hints every put
    of it, put and put_many alike, with no retain= of their own; another
    namespace's puts stay unhinted.  Policy, not identity: the digest and
    canonical text are the plain descriptor's."""
    v = np.arange(4096, dtype=np.uint8)
    assert kvtier.ns_digest(dict(DESC_A, retain=True)) == kvtier.ns_digest(DESC_A)
    with kvtier.Store(small(**{"dram.policy": "prefix-adapt"})) as s:
        docs = s.register(dict(DESC_A, retain=True))
        other = s.register(DESC_B)
        assert s.ns_info(docs)[0] == bytes.fromhex(VECTORS["ns_A"])
        assert s.put(docs, b"a", v) is True
        assert s.stat("dram.retain_hints") == 1
        assert s.put_many(docs, [b"b", b"c"], [v, v]) == [1, 1]
        assert s.stat("dram.retain_hints") == 3
        assert s.put(other, b"a", v) is True
        assert s.stat("dram.retain_hints") == 3
        assert s.stat("dram.retain_ignored") == 0     # 256 puts before the rule looks


def _sglang_stubbed(monkeypatch):
    """kvtier/sglang.py loaded over stand-ins for the two modules it
    imports from SGLang's side (torch, if absent, and
    sglang.srt.mem_cache.hicache_storage): the default suite has neither.
    Loaded under a name of its own, so kvtier.sglang stays unimported."""
    import importlib.util
    import sys
    import types
    try:
        import torch  # noqa: F401
    except ImportError:
        torch = types.ModuleType("torch")
        torch.Tensor = type("Tensor", (), {})
        torch.uint8 = "uint8"
        monkeypatch.setitem(sys.modules, "torch", torch)
    hs = types.ModuleType("sglang.srt.mem_cache.hicache_storage")

    class HiCacheStorage:
        def register_mem_pool_host(self, pool):
            self.mem_pool_host = pool

    class HiCacheStorageConfig:
        def __init__(self, **kw):
            self.__dict__.update(dict(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1,
                                      is_mla_model=False, model_name="stub/model"), **kw)

    class HiCacheStorageExtraInfo:  # SGLang's: two optional fields
        def __init__(self, prefix_keys=None, extra_info=None):
            self.prefix_keys, self.extra_info = prefix_keys, extra_info

    hs.HiCacheStorage, hs.HiCacheStorageConfig = HiCacheStorage, HiCacheStorageConfig
    hs.HiCacheStorageExtraInfo = HiCacheStorageExtraInfo
    for name in ("sglang", "sglang.srt", "sglang.srt.mem_cache"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, hs.__name__, hs)
    path = os.path.join(os.path.dirname(kvtier.__file__), "sglang.py")
    spec = importlib.util.spec_from_file_location("kvtier_sglang_stubbed", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, hs


class _StubPool:
    """A host pool as the v1 interface sees it: page_first MHA, each page's
    K and V a part (get_page_buffer_meta's pointers and sizes)."""
    layout, layer_num, head_num, head_dim, dtype, page_size = "page_first", 2, 2, 64, "bf16", 16

    def __init__(self, pages):
        self.buf = np.zeros((pages, 2, 4096), dtype=np.uint8)

    def get_page_buffer_meta(self, idx):
        pages = [idx[i] // self.page_size for i in range(0, len(idx), self.page_size)]
        return ([self.buf[p, h].ctypes.data for p in pages for h in (0, 1)],
                [self.buf.shape[2]] * (2 * len(pages)))


def test_sglang_connector_carries_the_hint(monkeypatch):
    """The SGLang backend (kvtier.sglang, over stand-ins for SGLang's
    modules; tests/test_sglang.py has the real ones): SGLang's own write
    (extra_info with prefix_keys only) stores unhinted; a batch_set_v1
    whose extra_info.extra_info says {"kvtier_retain": True} stores its
    pages with KVT_F_RETAIN (the store's dram.retain_hints, the backend's
    set_retained); with kvtier.retain the namespace is KVT_NS_RETAIN (same
    digest) and every page stored is hinted.  Pages read back byte for
    byte."""
    ks, hs = _sglang_stubbed(monkeypatch)
    opts = {"dram.capacity": "64M", "dram.prefault": "off", "dram.shards": 1,
            "dram.policy": "prefix-adapt"}

    def backend(**extra):
        be = ks.KVTierHiCacheStorage(hs.HiCacheStorageConfig(extra_config=dict(
            {"interface_v1": 1, "kvtier.options": opts}, **extra)))
        be.register_mem_pool_host(_StubPool(16))
        assert be.ns is not None
        return be

    keys = ["%064x" % (i + 1) for i in range(8)]
    idx = list(range(16 * 16))                     # pages 0..15, 16 tokens each
    plain = backend()
    plain.mem_pool_host.buf[:] = np.random.default_rng(2).integers(
        0, 256, plain.mem_pool_host.buf.shape, dtype=np.uint8)
    sglang_write = hs.HiCacheStorageExtraInfo(prefix_keys=["%064x" % 99])
    assert plain.batch_set_v1(keys[:4], idx[:4 * 16], sglang_write) == [True] * 4
    assert plain.batch_set_v1(keys[4:6], idx[4 * 16:6 * 16]) == [True] * 2
    st = plain.stats()
    assert st["store"]["dram.retain_hints"] == 0 and st["backend"]["set_retained"] == 0
    hinted = hs.HiCacheStorageExtraInfo(extra_info={"kvtier_retain": True})
    assert plain.batch_set_v1(keys[6:], idx[6 * 16:8 * 16], hinted) == [True] * 2
    st = plain.stats()
    assert st["store"]["dram.retain_hints"] == 2 and st["backend"]["set_retained"] == 2
    # not a hint: a value other than True
    odd = hs.HiCacheStorageExtraInfo(extra_info={"kvtier_retain": "yes"})
    assert plain.batch_set_v1(["%064x" % 50], idx[8 * 16:9 * 16], odd) == [True]
    assert plain.stats()["store"]["dram.retain_hints"] == 2
    assert plain.batch_get_v1(keys, idx[8 * 16:16 * 16]) == [True] * 8
    buf = plain.mem_pool_host.buf
    assert np.array_equal(buf[8:16], buf[0:8])
    plain.close()

    ret = backend(**{"kvtier.retain": True})
    assert ret.desc["retain"] is True and ret.digest == plain.digest   # policy, not identity
    assert ret.batch_set_v1(keys[:4], idx[:4 * 16], sglang_write) == [True] * 4
    st = ret.stats()
    assert st["store"]["dram.retain_hints"] == 4 and st["backend"]["set_retained"] == 4
    ret.close()


# ---------------------------------------------------------------- remote tier


@pytest.fixture
def kvtierd(tmp_path):
    if not os.environ.get("KVTIERD"):
        pytest.fail("KVTIERD is not set (run through meson test)")
    srv = kvtierd_proc.Kvtierd(tmp_path, "128M")
    yield srv
    assert srv.stop() == 0


def test_remote_tier(kvtierd):
    """Engine A writes through to kvtierd; engine B, with an empty DRAM,
    finds the prefix on the server and loads it byte for byte."""
    opts = small(**{"remote.addr": f"127.0.0.1:{kvtierd.port}"})
    rng = np.random.default_rng(5)
    blocks = [rng.standard_normal(64 * 1024).astype(np.float16) for _ in range(6)]
    with kvtier.Store(opts) as a:
        ns = a.register(DESC_A)
        keys = kvtier.key_chain_prompt(a.ns_info(ns)[0], list(range(6 * 16)), 16)
        for k, b in zip(keys, blocks):
            assert a.put(ns, k, b)
        a.flush()
        assert a.stat("remote.down") == 0
    with kvtier.Store(opts) as b:
        ns = b.register(DESC_A)
        count, tiers = b.lookup_prefix(ns, keys + [b"not-there"])
        assert count == 6 and tiers[:6] == [kvtier.TIER_REMOTE] * 6
        assert tiers[6] == kvtier.TIER_NONE
        out = np.empty_like(blocks[0])
        for k, blk in zip(keys, blocks):
            assert b.get_into(ns, k, out) == blk.nbytes
            assert out.tobytes() == blk.tobytes()
        # received straight into the caller's buffer: not kept in B's DRAM
        # (doc/remote.md); a prefetch keeps them local
        assert b.exists(ns, keys[0]) == kvtier.TIER_REMOTE
        assert b.prefetch(ns, keys) == 6
        assert b.exists(ns, keys[0]) == kvtier.TIER_DRAM
        st = b.stats()
        remote = {k: v for k, v in st.items() if k.startswith("remote.")}
        assert remote, sorted(st)
        assert b.get(ns, b"absent-everywhere") is None


def test_remote_retain_hint(kvtierd):
    """With remote.retain_hint on, a hinted put crosses the wire
    (PROTO_IF_RETAIN) and the server takes it: stored, counted."""
    opts = small(**{"remote.addr": f"127.0.0.1:{kvtierd.port}", "remote.retain_hint": "on",
                    "remote.put_local": "never"})
    v = np.arange(8192, dtype=np.uint8)
    with kvtier.Store(opts) as s:
        ns = s.register(DESC_A)
        assert s.put(ns, b"r1", v, retain=True) is True
        assert s.put_many(ns, [b"r2", b"r3"], [v, v], retain=True) == [1, 1]
        s.flush()
        assert s.stat("remote.puts_stored") == 3
        assert s.stat("remote.puts_failed") == 0
        out = np.zeros_like(v)
        assert s.get_into(ns, b"r3", out) == v.nbytes and np.array_equal(out, v)


def test_remote_down_is_a_miss(tmp_path):
    """A server that is not there costs misses, never an exception."""
    opts = small(**{"remote.addr": "127.0.0.1:1", "remote.timeout_ms": 300,
                    "remote.connect_timeout_ms": 200})
    with kvtier.Store(opts) as s:
        ns = s.register(DESC_A)
        assert s.get(ns, b"k") is None
        assert s.put(ns, b"k", b"local")  # the local put's status
        assert s.get(ns, b"k") == b"local"


# ------------------------------------- a connector worker's abstract socket
# kvtier.vllm's workers answer on "\0kvtier-vllm/<engine id>/<tp>/<pp>"
# (kvtier._engine.RankServer).  A worker of a killed engine can outlive it
# and keep the name (a CI run killed by hand: the next engine with that id
# failed with EADDRINUSE).  Here a real process holds the name.

# The holder: a RankServer whose op b"P" answers its pid; prints it, serves.
# (argv: the name without its leading NUL.)
HOLDER = r'''
import os, sys, time
from kvtier._engine import RankServer
RankServer("\0" + sys.argv[1], {b"P": lambda s: s.sendall(b"%10d" % os.getpid())}, wait_s=0)
print(os.getpid(), flush=True)
time.sleep(60)
'''
# Starts a holder and exits once it serves: the holder's engine is gone.
ORPHANER = r'''
import subprocess, sys
p = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE,
                     text=True)
print(p.stdout.readline().strip(), flush=True)
'''


def _sockname():
    import uuid
    return f"\0kvtier-vllm/test-{uuid.uuid4().hex[:12]}/0/0"


def _who(name):
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        s.connect(name)
        s.sendall(b"P")
        return int(s.recv(10))


def _holder(name, orphan):
    import subprocess
    import sys
    if orphan:
        p = subprocess.run([sys.executable, "-c", ORPHANER, HOLDER, name[1:]],
                           stdout=subprocess.PIPE, text=True, timeout=20, check=True)
        return int(p.stdout)
    p = subprocess.Popen([sys.executable, "-c", HOLDER, name[1:]], stdout=subprocess.PIPE,
                         text=True)
    pid = int(p.stdout.readline())
    return pid


def _kill(pid):
    import signal
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_rank_socket_taken_from_an_orphan():
    """The name held by a worker whose engine died: the new worker asks it,
    it gives the name up, and the new worker serves at once."""
    from kvtier._engine import RankServer
    name = _sockname()
    pid = _holder(name, orphan=True)
    try:
        assert _who(name) == pid
        t = time.monotonic()
        srv = RankServer(name, {b"P": lambda s: s.sendall(b"%10d" % os.getpid())}, wait_s=5)
        took = time.monotonic() - t
        try:
            assert _who(name) == os.getpid()
            assert took < 2, took
            os.kill(pid, 0)  # the old process lives on, without the name
        finally:
            srv.close()
    finally:
        _kill(pid)


# An engine that starts its holder with multiprocessing (as vLLM starts its
# workers) and dies before the holder builds its RankServer: the holder's
# getppid() is already init's (or a subreaper's) when it records its parent.
ORPHANED_EARLY = r'''
import multiprocessing as mp, os, sys, time
def holder(name):
    while os.getppid() == mp.parent_process().pid:
        time.sleep(0.01)
    from kvtier._engine import RankServer
    RankServer("\0" + name, {b"P": lambda s: s.sendall(b"%10d" % os.getpid())}, wait_s=0)
    time.sleep(60)
p = mp.get_context("fork").Process(target=holder, args=(sys.argv[1],))
p.start()
print(p.pid, flush=True)
os._exit(0)
'''


def test_rank_socket_taken_from_a_worker_orphaned_before_it_bound():
    """The holder's engine died before the holder bound the name (a worker
    still loading weights when its engine was killed): it is orphaned all
    the same and gives the name up (before: it kept it, the new worker
    failed after wait_s)."""
    import subprocess
    import sys
    from kvtier._engine import RankServer
    name = _sockname()
    # (the holder inherits the pipe: read its pid's line, not to the end)
    p = subprocess.Popen([sys.executable, "-c", ORPHANED_EARLY, name[1:]],
                         stdout=subprocess.PIPE, text=True)
    pid = int(p.stdout.readline())
    assert p.wait(timeout=20) == 0
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                assert _who(name) == pid
                break
            except (ConnectionRefusedError, FileNotFoundError, ValueError):
                assert time.monotonic() < deadline, "the holder never bound"
                time.sleep(0.05)
        t = time.monotonic()
        srv = RankServer(name, {b"P": lambda s: s.sendall(b"%10d" % os.getpid())}, wait_s=2)
        took = time.monotonic() - t
        try:
            assert _who(name) == os.getpid()
            assert took < 1.5, took
        finally:
            srv.close()
    finally:
        _kill(pid)


def test_rank_socket_held_by_a_live_engine():
    """The name held by a process whose parent (its engine) runs: the new
    worker waits wait_s, then fails with the holder's pid and what to do;
    the holder keeps serving."""
    from kvtier._engine import RankServer
    name = _sockname()
    pid = _holder(name, orphan=False)
    try:
        t = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            RankServer(name, {}, wait_s=0.3)
        took = time.monotonic() - t
        msg = str(e.value)
        assert f"held by pid {pid} (" in msg and f"kill {pid}" in msg, msg
        assert "(its engine runs;" in msg and "engine_id" in msg, msg
        assert 0.3 <= took < 1.5, took
        assert _who(name) == pid
    finally:
        _kill(pid)


# Binds the abstract name as whoever runs it and reports what it was sent.
OTHER_USER = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(4)
print(os.getpid(), flush=True)
c, _ = s.accept()
c.settimeout(5)
print("sent %r" % c.recv(64), flush=True)
'''


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a holder as another user")
def test_rank_socket_of_another_user_is_not_used():
    """The name bound first by another user's process: the scheduler's
    lookups and query_stats refuse it (PermissionError naming the user)
    and send it nothing -- before 2026-12-06 they sent it the prompts'
    token ids."""
    import subprocess
    from kvtier._engine import connect_rank
    name = _sockname()
    p = subprocess.Popen(["/usr/bin/python3", "-c", OTHER_USER, name[1:]],
                         stdout=subprocess.PIPE, text=True, user=65534, cwd="/")
    try:
        int(p.stdout.readline())
        with pytest.raises(PermissionError) as e:
            connect_rank(name, 2)
        assert "of user 65534" in str(e.value), e.value
        assert p.stdout.readline().strip() == "sent b''"
    finally:
        p.kill()
        p.wait()


def test_rank_socket_held_by_a_stopped_process(monkeypatch):
    """A holder that does not answer (stopped): the error still names it,
    within the wait and one answer's timeout."""
    import signal
    import kvtier._engine as eng
    monkeypatch.setattr(eng, "_ASK_TIMEOUT_S", 0.2)
    name = _sockname()
    pid = _holder(name, orphan=False)
    try:
        os.kill(pid, signal.SIGSTOP)
        t = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            eng.RankServer(name, {}, wait_s=0.3)
        took = time.monotonic() - t
        msg = str(e.value)
        assert f"held by pid {pid} (" in msg and "stopped" in msg and "no answer" in msg, msg
        assert took < 1.5, took
    finally:
        _kill(pid)
