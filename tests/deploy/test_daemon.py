#!/usr/bin/env python3
"""test_daemon.py - kvtierd as a deployed service: the shipped configuration
and --check-config, --log-format json, sd_notify readiness, the systemd unit.

Usage: test_daemon.py CHECK KVTIERD SOURCE-DIR, CHECK one of:

  check_config  deploy/kvtierd.conf passes `kvtierd --check-config` and
                names every long option of `kvtierd --help`; each commented
                example line, uncommented alone, passes too, except those
                naming files, which fail because the file is missing (so the
                check reads them); broken configurations exit 2 with a
                message naming the problem, and nothing is created.
  log_json      `--log-format json`: every line kvtierd writes from start to
                SIGTERM is one JSON object with ts, level and msg; the
                listening line carries the address that accepts a connection;
                numbers are numbers; the library's lines have src=lib.
  sd_notify     with NOTIFY_SOCKET set, kvtierd sends READY=1 (and a STATUS
                naming its address) only when its listener accepts
                connections, and STOPPING=1 on SIGTERM, then exits 0.
  systemd_unit  deploy/systemd/kvtierd.service passes `systemd-analyze
                verify` with no message at all (an unknown key is only a
                warning there, so any output fails), with ExecStart pointing
                at the built binary; skips (77) without systemd-analyze.

Servers listen on 127.0.0.1 port 0, in a temporary directory, and are
stopped by the test.
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FILE_KEYS = {"tenants", "metrics-token", "tls-cert", "tls-key", "tls-ca", "log"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(kvtierd, *args, cwd=None):
    r = subprocess.run([kvtierd, "--check-config", *args], capture_output=True, text=True,
                       cwd=cwd, timeout=60)
    return r.returncode, r.stdout, r.stderr


def t_check_config(kvtierd, src, tmp):
    conf = os.path.join(src, "deploy", "kvtierd.conf")
    text = open(conf).read()
    rc, out, err = check(kvtierd, conf, cwd=tmp)
    if rc != 0 or "configuration OK" not in err:
        fail(f"shipped config refused: rc={rc} {err}")
    settings = dict(line.split(" = ", 1) for line in out.splitlines())
    for k, v in (("dir", "/var/lib/kvtierd"), ("listen", "127.0.0.1:7070"),
                 ("metrics", "127.0.0.1:9464"), ("log-format", "text")):
        if settings.get(k) != v:
            fail(f"effective {k} = {settings.get(k)!r}, want {v!r}")

    helptext = subprocess.run([kvtierd, "--help"], capture_output=True, text=True).stdout
    opts = sorted(set(re.findall(r"^\s+(?:-\w, )?--([a-z][a-z-]+)", helptext, re.M)))
    opts = [o for o in opts if o not in ("help", "version", "config", "check-config")]
    if len(opts) < 25:
        fail(f"only {len(opts)} options parsed from --help: {opts}")
    missing = [o for o in opts if not re.search(rf"^#?{re.escape(o)} = ", text, re.M)]
    if missing:
        fail(f"deploy/kvtierd.conf does not show: {missing}")
    print(f"kvtierd.conf shows all {len(opts)} options")

    examples = re.findall(r"^#([a-z-]+) = (.*)$", text, re.M)
    for key, val in examples:
        path = os.path.join(tmp, f"ex-{key}.conf")
        with open(path, "w") as f:
            f.write(text + f"\n{key} = {val}\n")
        rc, out, err = check(kvtierd, path, cwd=tmp)
        if key in FILE_KEYS and key != "log":
            if rc != 2 or (val not in err and "TLS needs both" not in err):
                fail(f"{key} = {val} (missing file): rc={rc} {err}")
        elif key in ("log", "unix"):
            # /var/log/kvtierd and /run/kvtierd exist only where the unit
            # made them (LogsDirectory=, RuntimeDirectory=).
            want = 0 if os.path.isdir(os.path.dirname(val)) else 2
            if rc != want:
                fail(f"{key} = {val}: rc={rc} want {want}: {err}")
        elif rc != 0:
            fail(f"example '{key} = {val}' refused: {err}")
    print(f"{len(examples)} commented examples checked one by one")

    bad = {
        "dram = lots\n": "is not a size",
        "listen = 127.0.0.1\n": "is not HOST:PORT",
        "set = no.such.option=1\n": "unknown option",
        "set = dram.capacity=banana\n": "--set dram.capacity=banana",
        "metrics = 0.0.0.0:9464\n": "give --metrics-token",
        "listen = none\n": "needs --unix",
        "members = a:1,a:1\n": "--members",
        "etcd = 127.0.0.1:2379\n": "not an http",
        "check-config = x\n": "cannot be set in a config file",
        "tenants = " + conf + "\n": "--tenants",   # readable but not a tenants file
        "nonsense\n": "want \"key = value\"",
        "s3 = nohost\n": "is not HOST:PORT",
        # what a start refuses (exit 2) without --tenants or --insecure
        "s3 = 0.0.0.0:9000\n": "--insecure",
        "listen = 0.0.0.0:7070\n": "--insecure",
        # the SSD tier refuses fewer than two segments (256M by default)
        "ssd = 64M\n": "fewer than two segments",
        # the DRAM tier refuses less than one chunk (64K)
        "dram = 100\n": "less than one dram.chunk",
    }
    for line, want in bad.items():
        path = os.path.join(tmp, "bad.conf")
        with open(path, "w") as f:
            f.write("dir = " + os.path.join(tmp, "never") + "\n" + line)
        rc, out, err = check(kvtierd, path, cwd=tmp)
        if rc != 2 or want not in err or out:
            fail(f"{line.strip()!r}: rc={rc} out={out!r} err={err!r} (want 2, {want!r})")
    if os.path.exists(os.path.join(tmp, "never")):
        fail("--check-config created the store directory")
    # More DRAM than this machine has: a warning (the file may be meant for
    # a larger node; a start here refuses it: deploy_start_fail)
    big = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") + (1 << 30)
    path = os.path.join(tmp, "big.conf")
    with open(path, "w") as f:
        f.write("dir = %s\ndram = %d\n" % (os.path.join(tmp, "never"), big))
    rc, out, err = check(kvtierd, path, cwd=tmp)
    if rc != 0 or "warning: --dram" not in err or "more than this machine's memory" not in err:
        fail(f"dram = {big}: rc={rc} err={err!r} (want 0 and a warning)")
    # The command line is checked too, over the file.
    rc, out, err = check(kvtierd, conf, "--threads", "0", cwd=tmp)
    if rc != 2 or "--threads" not in err:
        fail(f"--threads 0 on the command line: rc={rc} {err}")
    # --check-config=FILE is the same (and must never start a server).
    r = subprocess.run([kvtierd, "--check-config=" + conf], capture_output=True, text=True,
                       cwd=tmp, timeout=60)
    if r.returncode != 0 or "configuration OK" not in r.stderr:
        fail(f"--check-config=FILE: rc={r.returncode} {r.stderr}")
    # (--dir: a directory of its own; tmp holds this test's files, and a
    # directory holding other files than a store's is refused)
    rc, out, err = check(kvtierd, "/dev/null", "--dir", os.path.join(tmp, "never"), "--listen",
                         "127.0.0.1:0", "--log-format", "json", cwd=tmp)
    if rc != 0 or "log-format = json" not in out:
        fail(f"command-line options: rc={rc} {out} {err}")
    print(f"{len(bad) + 1} broken configurations refused with exit 2")
    # A start refuses a port alone (a usage error, exit 2), before it opens
    # anything: not "not loopback", not a bind error.
    r = subprocess.run([kvtierd, "--dir", os.path.join(tmp, "never"), "--ssd", "0",
                        "--listen", "7070"], capture_output=True, text=True, timeout=30)
    if r.returncode != 2 or "'7070' is not HOST:PORT" not in r.stderr:
        fail(f"--listen 7070: rc={r.returncode} {r.stderr}")
    if os.path.exists(os.path.join(tmp, "never")):
        fail("--listen 7070 created the store directory")
    # The effective settings are a configuration that means the same: fed
    # back, they print the same lines (every option is in them).
    rc, out, err = check(kvtierd, "/dev/null", "--dir", os.path.join(tmp, "never"),
                         "--listen", "0.0.0.0:0",
                         "--s3", "0.0.0.0:0", "--resp", "127.0.0.1:0", "--insecure",
                         "--ssd", "64M", "--set", "ssd.segment=8M", cwd=tmp)
    if rc != 0:
        fail(f"--insecure, --s3 and a small --ssd with a small segment: rc={rc} {err}")
    path = os.path.join(tmp, "effective.conf")
    with open(path, "w") as f:
        f.write(out)
    rc2, out2, err2 = check(kvtierd, path, cwd=tmp)
    if rc2 != 0 or out2 != out:
        fail(f"effective settings fed back: rc={rc2} {err2}\n{out}\n---\n{out2}")
    for want in ("s3 = 0.0.0.0:0", "insecure = yes", "resp = 127.0.0.1:0"):
        if want not in out:
            fail(f"effective settings lack {want!r}: {out}")


def start(kvtierd, tmp, *extra, env=None):
    return subprocess.Popen([kvtierd, "--dir", os.path.join(tmp, "data"), "--listen",
                             "127.0.0.1:0", "--dram", "64M", "--ssd", "0", "--threads", "1",
                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=tmp, text=True)


def t_log_json(kvtierd, src, tmp):
    p = start(kvtierd, tmp, "--log-format", "json", "--log-level", "debug")
    lines, addr = [], None
    deadline = time.time() + 60
    try:
        while addr is None and time.time() < deadline:
            line = p.stderr.readline()
            if not line:
                fail("kvtierd exited before listening")
            lines.append(line)
            o = json.loads(line)
            if o.get("msg", "").startswith("listening on"):
                addr = o["addr"]
        host, port = addr.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
    finally:
        p.send_signal(signal.SIGTERM)
        _, rest = p.communicate(timeout=60)
    lines += rest.splitlines(True)
    if p.returncode != 0:
        fail(f"kvtierd exited {p.returncode}")
    objs = []
    for line in lines:
        if not line.endswith("\n"):
            fail(f"unterminated line {line!r}")
        o = json.loads(line)
        if list(o)[:3] != ["ts", "level", "msg"]:
            fail(f"fixed keys not first: {line}")
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", o["ts"]):
            fail(f"ts {o['ts']!r}")
        if o["level"] not in ("error", "warn", "info", "debug"):
            fail(f"level {o['level']!r}")
        objs.append(o)
    started = [o for o in objs if o["msg"] == "kvtierd started"]
    if len(started) != 1 or started[0]["dram_bytes"] != 64 << 20 or started[0]["threads"] != 1:
        fail(f"'kvtierd started' fields: {started}")
    if not any(o.get("src") == "lib" for o in objs):
        fail("no line from the library (src=lib)")
    if not any(o["msg"] == "stopping" and o.get("signal") == "SIGTERM" for o in objs):
        fail("no 'stopping' line with signal=SIGTERM")
    if objs[-1]["msg"] != "stopped" or not isinstance(objs[-1].get("frames_in"), int):
        fail(f"last line {objs[-1]}")
    print(f"{len(objs)} JSON lines; listening on {addr}")


def t_start_fail(kvtierd, src, tmp):
    """A start that fails with --log FILE: the reason is in the file (with
    its hint), and the terminal is told to look there (it said nothing)."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    log = os.path.join(tmp, "kvtierd.log")
    try:
        r = subprocess.run([kvtierd, "--dir", os.path.join(tmp, "data"), "--listen",
                            "127.0.0.1:%d" % busy.getsockname()[1], "--dram", "64M", "--ssd",
                            "0", "--threads", "1", "--log", log],
                           capture_output=True, text=True, timeout=60, cwd=tmp)
    finally:
        busy.close()
    if r.returncode != 1:
        fail(f"exit {r.returncode}, want 1: {r.stderr}")
    if "could not start" not in r.stderr or log not in r.stderr:
        fail(f"stderr does not point at the log: {r.stderr!r}")
    with open(log) as f:
        text = f.read()
    if 'msg="cannot listen"' not in text or "another process listens there" not in text:
        fail(f"the log lacks the reason and its hint: {text}")
    # A --dram beyond the machine's memory is refused before the store is
    # opened (pre-faulting it sat in "opening the store" for minutes).
    big = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") + (1 << 30)
    t0 = time.time()
    r = subprocess.run([kvtierd, "--dir", os.path.join(tmp, "data"), "--listen", "127.0.0.1:0",
                        "--dram", str(big), "--ssd", "0"], capture_output=True, text=True,
                       timeout=60, cwd=tmp)
    if r.returncode == 0 or "more than this machine's memory" not in r.stderr:
        fail(f"--dram {big}: exit {r.returncode}: {r.stderr!r}")
    if time.time() - t0 > 30:
        fail(f"--dram {big}: refused only after {time.time() - t0:.0f} s")
    print("start failure: said on stderr, the reason and hint in the log")


def t_sd_notify(kvtierd, src, tmp):
    path = os.path.join(tmp, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    p = start(kvtierd, tmp, env=env)
    try:
        r, _, _ = select.select([sock], [], [], 60)
        if not r:
            fail("no notification within 60 s")
        msg = sock.recv(4096).decode()
        fields = dict(line.split("=", 1) for line in msg.splitlines())
        if fields.get("READY") != "1":
            fail(f"first notification {msg!r}")
        # Ready means serving: the address in STATUS accepts a connection now.
        host, port = fields["STATUS"].rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
        print("READY=1, STATUS=" + fields["STATUS"] + ": accepts connections")
        p.send_signal(signal.SIGTERM)
        r, _, _ = select.select([sock], [], [], 60)
        msg = sock.recv(4096).decode() if r else ""
        if "STOPPING=1" not in msg.splitlines():
            fail(f"after SIGTERM: {msg!r}")
        if p.wait(timeout=60) != 0:
            fail(f"kvtierd exited {p.returncode}")
        print("STOPPING=1, exit 0")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        sock.close()


def t_healthz_token(kvtierd, src, tmp):
    """With --metrics-token, /metrics needs the token and /healthz does not
    (a Kubernetes readiness probe cannot carry it)."""
    import urllib.error
    import urllib.request
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("healthz-test-token-0123456789\n")
    os.chmod(token, 0o600)
    p = start(kvtierd, tmp, "--metrics", "127.0.0.1:0", "--metrics-token", token)
    try:
        addr = None
        while addr is None:
            line = p.stderr.readline()
            if not line:
                fail("kvtierd exited")
            m = re.search(r'msg="metrics listener on ([0-9.:]+)"', line)
            addr = m and m.group(1)

        def get(path, tok=None):
            req = urllib.request.Request(f"http://{addr}{path}")
            if tok:
                req.add_header("Authorization", "Bearer " + tok)
            try:
                r = urllib.request.urlopen(req, timeout=10)
                return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""
        got = [get("/healthz"), get("/metrics"), get("/metrics", "healthz-test-token-0123456789")]
        if got[0] != (200, "ok\n") or got[1][0] != 401 or got[2][0] != 200 or \
           "kvtier_up 1" not in got[2][1]:
            fail(f"/healthz, /metrics, /metrics with token: {[g[0] for g in got]}")
        print("/healthz 200 without the token; /metrics 401 without it, 200 with it")
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)


def t_systemd_unit(kvtierd, src, tmp):
    sa = shutil.which("systemd-analyze")
    if not sa:
        print("SKIP: no systemd-analyze")
        sys.exit(77)
    unit = open(os.path.join(src, "deploy", "systemd", "kvtierd.service")).read()
    for want in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "LimitMEMLOCK=",
                 "LimitNOFILE=", "StateDirectory=kvtierd", "User=kvtier",
                 "ProtectSystem=strict", "ExecStartPre=/usr/sbin/kvtierd --check-config"):
        if want not in unit:
            fail(f"unit lacks {want}")
    # io_uring and O_DIRECT: no filter that would take io_uring_setup away.
    if re.search(r"^SystemCallFilter=", unit, re.M):
        fail("SystemCallFilter= is set: check io_uring_* survive it")
    path = os.path.join(tmp, "kvtierd.service")
    with open(path, "w") as f:
        f.write(unit.replace("/usr/sbin/kvtierd", os.path.abspath(kvtierd)))
    r = subprocess.run([sa, "verify", "--man=no", path], capture_output=True, text=True,
                       cwd=tmp)
    if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
        fail(f"systemd-analyze verify: rc={r.returncode}\n{r.stdout}{r.stderr}")
    r = subprocess.run([sa, "security", "--offline=true", path], capture_output=True,
                       text=True, cwd=tmp)
    m = re.search(r"Overall exposure level for kvtierd.service: ([\d.]+) (\w+)", r.stdout)
    if not m or float(m.group(1)) > 4.0:
        fail(f"systemd-analyze security: {r.stdout[-400:]}{r.stderr[-400:]}")
    print(f"systemd-analyze verify: clean; security exposure {m.group(1)} {m.group(2)}")


def main():
    name, kvtierd, src = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    with tempfile.TemporaryDirectory(prefix="deploy-") as tmp:
        globals()["t_" + name](kvtierd, src, tmp)


if __name__ == "__main__":
    main()
