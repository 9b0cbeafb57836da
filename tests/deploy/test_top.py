#!/usr/bin/env python3
"""test_top.py - `kvtier top` against a real kvtierd under load.

Usage: test_top.py KVTIER KVTIERD.  Starts a kvtierd (127.0.0.1, port 0,
--metrics, a tenants file with tenant "alice") and drives `kvtier replay`
through it as alice, then:

  1. not on a terminal, `kvtier top --count 3` writes exactly three logfmt
     lines, one per interval, and the interval with the load shows reads,
     a DRAM hit ratio and a read p99;
  2. a metrics address where nothing listens: exit 1 and a message;
  3. under tmux (its own server socket, a 132x45 window): the screen shows
     the server up, the tier table with DRAM hits, a latency row for
     reads served from DRAM with p50 and p99, and alice among the tenants;
     `send-keys q` ends it within 5 s, exit status 0, and the terminal is
     given back (tmux's pane exits).  The captured screen is printed.

Skips (77) only if tmux is missing.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    kvtier, kvtierd = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmux = shutil.which("tmux")
    if not tmux:
        print("SKIP: tmux not installed")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="deploy-top-")
    secret = "top-test-secret-0123456789"
    with open(os.path.join(tmp, "tenants"), "w") as f:
        f.write(f"alice {secret} tenant\n")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(secret)
    os.chmod(os.path.join(tmp, "tenants"), 0o600)
    os.chmod(os.path.join(tmp, "secret"), 0o600)
    log = open(os.path.join(tmp, "kvtierd.log"), "w+")
    d = subprocess.Popen([kvtierd, "--dir", os.path.join(tmp, "data"), "--listen", "127.0.0.1:0",
                          "--metrics", "127.0.0.1:0", "--dram", "64M", "--ssd", "0",
                          "--threads", "1", "--tenants", os.path.join(tmp, "tenants")],
                         stdout=subprocess.DEVNULL, stderr=log, cwd=tmp)
    sock = "kvtier-top-test-%d" % os.getpid()
    load = None
    try:
        native = metrics = None
        deadline = time.time() + 60
        while not (native and metrics):
            if time.time() > deadline or d.poll() is not None:
                log.seek(0)
                fail("kvtierd did not start: " + log.read())
            log.seek(0)
            text = log.read()
            m = re.search(r'msg="listening on ([0-9.:]+)"', text)
            native = m and m.group(1)
            m = re.search(r'msg="metrics listener on ([0-9.:]+)"', text)
            metrics = m and m.group(1)
            time.sleep(0.1)

        def start_load():
            return subprocess.Popen(
                [kvtier, "replay", "--synth=3000", "--dram", "1M", "--bytes-per-token", "64",
                 "--server", native, "--tenant", "alice", "--secret-file",
                 os.path.join(tmp, "secret"), "--no-progress", "--speed", "20", "--dir", tmp],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)

        # 1. One line per interval when not on a terminal.
        load = start_load()
        r = subprocess.run([kvtier, "top", "--metrics", metrics, "--interval", "1", "--count",
                            "3"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        lines = r.stdout.splitlines()
        print("\n".join(lines))
        if r.returncode != 0 or len(lines) != 3:
            fail(f"non-TTY: rc={r.returncode}, {len(lines)} lines: {r.stdout}{r.stderr}")
        fields = [dict(kv.split("=", 1) for kv in line.split()) for line in lines]
        if any(f["servers_up"] != "1/1" for f in fields):
            fail("a line without the server up")
        busy = [f for f in fields if float(f["reads_per_s"]) > 0]
        if not busy or busy[0]["dram_hit_pct"] == "-" or busy[0]["read_p99_us"] == "-":
            fail(f"no interval shows the load: {fields}")

        # 2. Nothing there.
        r = subprocess.run([kvtier, "top", "--metrics", "127.0.0.1:1", "--count", "1"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or "127.0.0.1:1" not in r.stderr:
            fail(f"unreachable server: rc={r.returncode} {r.stderr}")

        # 3. The live view under tmux; q quits.
        status = os.path.join(tmp, "status")
        cmd = f"{kvtier} top --metrics {metrics} --interval 0.5; echo $? > {status}"
        subprocess.run([tmux, "-L", sock, "new-session", "-d", "-x", "132", "-y", "45",
                        "sh", "-c", cmd], check=True)
        if load.poll() is not None:
            load = start_load()
        screen = ""
        deadline = time.time() + 30
        while time.time() < deadline:
            time.sleep(1)
            screen = subprocess.run([tmux, "-L", sock, "capture-pane", "-p"],
                                    capture_output=True, text=True).stdout
            if re.search(r"^read\s+dram\s+[\d.]+\s+\S+ \S+\s+\S+ \S+", screen, re.M) and \
               re.search(r"^alice\s", screen, re.M):
                break
        print(screen.rstrip())
        for pat in (r"kvtier top - 1 of 1 server up", r"^\S+\s+yes\s+\d+",
                    r"^dram\s+[\d.]+\s+\d+", r"^read\s+dram\s+[\d.]+\s+\S+ \S+\s+\S+ \S+",
                    r"^alice\s+[\d.]+\s+[\d.]+", r"write-down backlog"):
            if not re.search(pat, screen, re.M):
                fail(f"screen lacks /{pat}/")
        subprocess.run([tmux, "-L", sock, "send-keys", "q"], check=True)
        deadline = time.time() + 5
        while time.time() < deadline and not os.path.exists(status):
            time.sleep(0.1)
        if not os.path.exists(status):
            fail("q did not end kvtier top within 5 s")
        time.sleep(0.2)
        if open(status).read().strip() != "0":
            fail(f"kvtier top exited {open(status).read().strip()} after q")
        print("q: quit, exit 0")
    finally:
        subprocess.run([tmux, "-L", sock, "kill-server"], capture_output=True)
        if load and load.poll() is None:
            load.kill()
            load.wait()
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
