#!/usr/bin/env python3
"""unauth_evict_cost.py KVTIERD... [--hold H] [--churn N] [--runs R] - the
event loop's CPU per new connection while the unauthenticated pool is
full, each new connection evicting the oldest (daemon/loop.c
loop_unauth_evict; doc/security.md "Before AUTH").

For each KVTIERD (give the one to compare against first; the figures of
one run are comparable), R times: a fresh kvtierd (test_hostile_http.py's
Server: --tenants, --threads 1, and --resp, --max-conns 2*H) gets H RESP
connections that send nothing (the pool full: H is half of --max-conns;
from 127.0.3.x, 32 an address, under the per-address cap), then N more
(from 127.0.5.x, 20 an address), each of which but the first has the
server close the oldest held one (--max-conns 2*(H+1): the pool holds H
and a scrape's connection).  Measured: the loop thread's CPU (schedstat) from before
the N connects until the N oldest held connections have been closed (seen
from the client, which then closes them: the lingering close ends), per
connect; and as a reference the same N connects while the pool has room
(H held, --max-conns 2*(H+N+2): no eviction, what a connect costs anyway).  Prints a line per
run and the median per KVTIERD.  Python's standard library only."""
import os, selectors, socket, statistics, sys, tempfile, time, shutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import test_hostile_http as H  # noqa: E402


def connect(port, src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    return s


def wait_closed(socks, want, timeout=60.0):
    """Wait until want of socks read EOF (or a reset); they are closed.
    Returns how many did."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    done, end = 0, time.monotonic() + timeout
    while done < want and time.monotonic() < end:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            try:
                b = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                b = b""
            if not b:
                sel.unregister(s)
                s.close()
                done += 1
    sel.close()
    return done


def one(kvtierd, hold, churn, full):
    base = tempfile.mkdtemp()
    # Half of --max-conns may be unauthenticated: H and a scrape's
    # connection, the pool full; or room for all.
    srv = H.Server(kvtierd, base, extra=["--resp", "127.0.0.1:0", "--max-conns",
                                         str(2 * (hold + 1 if full else hold + churn + 2))])
    held, new = [], []
    try:
        rp = H.resp_port(srv)
        n_hold = hold
        for i in range(n_hold):
            held.append(connect(rp, "127.0.%d.%d" % (3 + i // (32 * 250),
                                                     1 + (i // 32) % 250)))
        # All accepted (the gauge, scraped before the clock starts; the
        # scrape's own connection counts until answered).
        for _ in range(200):
            if srv.metric("kvtier_connections_unauthenticated") >= n_hold + 1:
                break
            time.sleep(0.05)
        assert srv.metric("kvtier_connections_unauthenticated") == n_hold + 1
        ev0 = srv.metric("kvtier_connections_unauth_evicted_total")
        time.sleep(0.2)
        cpu0 = H.loop_cpu_s(srv)
        for i in range(churn):
            new.append(connect(rp, "127.0.%d.%d" % (5 + i // (20 * 250),
                                                    1 + (i // 20) % 250)))
        if full:
            # The first fills the scrape's place, each other evicts.
            closed = wait_closed(held, churn - 1)
            assert closed == churn - 1, ("held connections closed", closed, churn)
        else:
            # No eviction: the loop has taken them when the gauge says so;
            # wait by the clock (scrapes would cost the loop CPU).
            time.sleep(1.0)
        time.sleep(0.2)
        cpu1 = H.loop_cpu_s(srv)
        # (this scrape's connection evicts one more when full)
        ev = srv.metric("kvtier_connections_unauth_evicted_total") - ev0
        assert ev == (churn if full else 0), ("evicted", ev)
        if not full:
            assert srv.metric("kvtier_connections_unauthenticated") == n_hold + churn + 1
        return (cpu1 - cpu0) / churn * 1e6
    finally:
        for s in held + new:
            s.close()
        srv.stop()
        shutil.rmtree(base, ignore_errors=True)


def main():
    args, exes = sys.argv[1:], []
    hold, churn, runs = 2048, 2000, 3
    while args:
        a = args.pop(0)
        if a == "--hold":
            hold = int(args.pop(0))
        elif a == "--churn":
            churn = int(args.pop(0))
        elif a == "--runs":
            runs = int(args.pop(0))
        else:
            exes.append(a)
    for exe in exes:
        full, room = [], []
        for r in range(runs):
            room.append(one(exe, hold, churn, False))
            full.append(one(exe, hold, churn, True))
            print("%s run %d: loop CPU per connect %.1f us with the pool full (%d held, each "
                  "connect evicting), %.1f us with room" % (
                      exe, r + 1, full[-1], hold, room[-1]), flush=True)
        print("%s: median %.1f us per connect, pool full; %.1f us with room" % (
            exe, statistics.median(full), statistics.median(room)), flush=True)


if __name__ == "__main__":
    main()
