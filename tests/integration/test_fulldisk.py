#!/usr/bin/env python3
"""test_fulldisk.py - kvtierd on a file system that fills up (doc/ssd.md
"Faults"): a real tmpfs of 40 MiB under a --ssd of 256 MiB.

Usage: test_fulldisk.py PATH-TO-KVTIERD PATH-TO-KVTIER.  Needs root (it
mounts the tmpfs); exits 77 (skipped) where mounting is refused, saying
why.  Asserts: every SET is taken; the SSD tier keeps writing in the
segments the disk had room for (ssd.room_bytes below ssd.capacity_bytes,
never degraded, one warning); every GET is the exact bytes
or a miss; after someone else takes the disk's last bytes, a SIGTERM (whose
checkpoint fails, leaving no partial file) and a restart, values put after
the disk filled are served from the SSD, writes go on, and fsck finds the
store clean.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

FS_MIB = 40
VAL = 128 * 1024


def val(i):
    return (b"%08d" % i) * (VAL // 8)


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Resp:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def set(self, i):
        self.s.sendall(cmd("SET", "k%d" % i, val(i)))
        r = self.f.readline()
        assert r.startswith(b"+OK"), "SET k%d: %r" % (i, r)

    def get(self, i):
        """True: the exact bytes; False: a miss; anything else fails."""
        self.s.sendall(cmd("GET", "k%d" % i))
        r = self.f.readline()
        if r.startswith(b"$-1"):
            return False
        assert r.startswith(b"$"), "GET k%d: %r" % (i, r)
        d = self.f.read(int(r[1:]) + 2)
        assert d[:-2] == val(i), "GET k%d: other bytes" % i
        return True

    def close(self):
        self.s.close()


def launch(kvtierd, d, log, opts):
    """kvtierd on store d with opts (in order: a repeated one wins), native
    and RESP listeners on free ports, logging to log: (process, RESP port,
    native port) once both listen."""
    p = subprocess.Popen([kvtierd, "--dir", d] + list(opts) +
                         ["--listen", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--log", log],
                         stdout=subprocess.DEVNULL, stderr=open(log + ".stderr", "a"))
    for _ in range(600):
        if os.path.exists(log):
            text = open(log).read()
            m = re.findall(r"RESP listener on 127\.0\.0\.1:(\d+)", text)
            n = re.findall(r"listening on 127\.0\.0\.1:(\d+)", text)
            if m and n:
                return p, int(m[-1]), int(n[-1])
        if p.poll() is not None:
            tail = ""
            for f in (log, log + ".stderr"):
                if os.path.exists(f):
                    tail += "".join(open(f).readlines()[-10:])
            raise SystemExit("kvtierd exited (status %s): %s\n%s" % (p.returncode, log, tail))
        time.sleep(0.05)
    raise SystemExit("kvtierd did not start")


def start(kvtierd, d, log):
    return launch(kvtierd, d, log, ["--dram", "16M", "--ssd", "256M", "--set", "ssd.segment=4M",
                                    "--set", "dram.prefault=off",
                                    "--set", "ssd.enospc_retry_ms=300"])


def stats(kvtier, port):
    out = subprocess.run([kvtier, "stat", "--server", "127.0.0.1:%d" % port, "--raw"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    st = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            st[parts[0]] = int(parts[1])
    return st


def settled(kvtier, port):
    """The stats once the write-down backlog is empty (at most 30 s)."""
    for _ in range(300):
        st = stats(kvtier, port)
        if st.get("ssd.writedown_pending_bytes", 0) == 0:
            return st
        time.sleep(0.1)
    raise SystemExit("the write-down backlog never emptied: %r" % st)


def stop(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 0, "kvtierd exit status %s" % p.returncode


def mount_tmpfs(prefix, mib):
    """A tmpfs of mib MiB at BASE/fs under a new temp dir BASE: (BASE, mount
    point); exits 77 (skipped) where mounting is refused."""
    base = tempfile.mkdtemp(prefix=prefix)
    mnt = os.path.join(base, "fs")
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % mib, "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("SKIP: cannot mount a tmpfs here (%s): run as root where mounts are allowed"
              % r.stderr.strip())
        sys.exit(77)
    return base, mnt


def cleanup(p, base, mnt):
    """A run's finally: the kvtierd p (None: none running) killed, the
    tmpfs of mount_tmpfs unmounted and BASE removed."""
    if p is not None:
        p.kill()
        p.wait()
    subprocess.run(["umount", mnt])
    subprocess.run(["rm", "-rf", base])


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    kvtierd, kvtier = sys.argv[1], sys.argv[2]
    base, mnt = mount_tmpfs("kvt-fulldisk-", FS_MIB)
    p = None
    try:
        d = os.path.join(mnt, "store")
        log = os.path.join(base, "kvtierd.log")
        p, rport, nport = start(kvtierd, d, log)
        c = Resp(rport)
        n1 = 600  # 75 MiB of values through a 40 MiB file system
        for i in range(n1):
            c.set(i)
        st = settled(kvtier, nport)
        print("after %d SETs of %d KiB: room %d of %d MiB, segments %d of %d, degraded %d, "
              "shed %d, enospc %d, written %d" % (
                  n1, VAL >> 10, st["ssd.room_bytes"] >> 20, st["ssd.capacity_bytes"] >> 20,
                  st["ssd.segments_room"], st["ssd.segments"], st["ssd.degraded"],
                  st["ssd.writedown_shed"], st["ssd.enospc"], st["ssd.writedown_blocks"]))
        assert st["ssd.room_bytes"] < st["ssd.capacity_bytes"]
        assert st["ssd.room_bytes"] <= FS_MIB << 20
        assert st["ssd.segments_room"] >= 4
        assert st["ssd.room_capped"] >= 1
        assert st["ssd.degraded"] == 0
        # The log went round within its room: more was written than it holds.
        assert st["ssd.writedown_blocks"] * VAL > st["ssd.room_bytes"]
        hits = sum(c.get(i) for i in range(n1))
        print("GETs: %d of %d exact, the rest misses" % (hits, n1))
        assert hits > 0
        c.close()
        text = open(log).read()
        assert "the log will keep to what fits" in text  # said at start
        assert "no room for more segments" in text
        # Someone else takes the last bytes: the checkpoint at the stop
        # cannot be written, leaves no partial file, and the restart
        # walks the segments instead.
        filler = os.path.join(mnt, "filler")
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\1" * 4096)
        except OSError:
            pass
        os.close(fd)
        stop(p)
        p = None
        text = open(log).read()
        assert "ssd: checkpoint:" in text, "the checkpoint did not fail: the disk was not full"
        assert not os.path.exists(os.path.join(d, "ssd", "checkpoint.tmp"))

        # Restarted on the full disk: the newest are on the SSD.
        log = os.path.join(base, "kvtierd-2.log")
        p, rport, nport = start(kvtierd, d, log)
        c = Resp(rport)
        got = [i for i in range(n1) if c.get(i)]
        late = sum(1 for i in got if i >= n1 // 2)
        print("after a restart: %d exact, %d of them put after the disk was full (key >= %d), "
              "newest %d" % (len(got), late, n1 // 2, max(got) if got else -1))
        # The disk filled at about 36 MiB of records (key ~290 with DRAM's
        # share): a log that stopped there would hold none of these.
        assert late >= 40
        os.unlink(filler)
        for i in range(n1, n1 + 200):
            c.set(i)
        st = settled(kvtier, nport)
        print("200 more SETs: room %d MiB, degraded %d, written %d" % (
            st["ssd.room_bytes"] >> 20, st["ssd.degraded"], st["ssd.writedown_blocks"]))
        assert st["ssd.degraded"] == 0
        assert st["ssd.writedown_blocks"] > 0
        for i in range(n1 + 200):
            c.get(i)
        c.close()
        stop(p)
        p = None
        # The slots the disk had no room for are empty files: free slots
        # to fsck as to recovery, not damage.
        r = subprocess.run([kvtier, "fsck", d], capture_output=True, text=True, timeout=60)
        print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr)
        assert r.returncode == 0 and r.stdout.rstrip().endswith("clean"), r.stdout + r.stderr
        print("fulldisk: ok")
    finally:
        cleanup(p, base, mnt)


if __name__ == "__main__":
    main()
