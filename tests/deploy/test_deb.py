#!/usr/bin/env python3
"""test_deb.py - the Debian packages (debian/, scripts/build-deb), suite
deploy-slow (a full release build inside dpkg-buildpackage: minutes).

Usage: test_deb.py SOURCE-DIR WORK-DIR.  Runs scripts/build-deb WORK-DIR/deb
(dpkg-buildpackage -b, then lintian with errors and warnings failing), then,
without touching the system's package database, unpacks every .deb with
dpkg-deb -x into a scratch root and:

  1. each package holds what it should (libkvtier0 the soname, -dev the
     header, .so, .a and kvtier.pc, kvtierd the server, its conffile, unit
     and man page, kvtier-tools the CLI and its man pages), kvtierd's
     conffiles list /etc/kvtier/kvtierd.conf and its postinst makes the
     kvtier user;
  2. the README's example (doc/examples/quickstart.c) compiles against the
     unpacked libkvtier-dev with `pkg-config --cflags --libs kvtier`
     (PKG_CONFIG_SYSROOT_DIR) and runs against the unpacked libkvtier0;
  3. the unpacked kvtierd passes --check-config on the unpacked
     /etc/kvtier/kvtierd.conf, then starts with it (only --dir and the two
     ports moved into the sandbox), answers /healthz, and stops on SIGTERM
     with exit 0;
  4. the unpacked unit passes `systemd-analyze verify` with ExecStart
     pointing into the scratch root.

Skips (77) without dpkg-buildpackage or lintian.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def main():
    src, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool in ("dpkg-buildpackage", "lintian", "dpkg-deb"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed (debhelper, lintian)")
            sys.exit(77)
    out = os.path.join(work, "deb")
    if os.environ.get("KVT_DEB_PREBUILT"):
        # The packages of an earlier scripts/build-deb run, to iterate on
        # the checks below without a rebuild (never set by CI).
        out = os.environ["KVT_DEB_PREBUILT"]
    else:
        t0 = time.time()
        r = subprocess.run(["bash", os.path.join(src, "scripts", "build-deb"), out],
                           capture_output=True, text=True)
        print(r.stdout[-4000:], r.stderr[-4000:])
        if r.returncode != 0:
            fail("scripts/build-deb failed")
        print(f"built and linted in {time.time() - t0:.0f} s")
    debs = {re.sub(r"_.*", "", os.path.basename(d)): d for d in glob.glob(out + "/*.deb")}
    want = {"libkvtier0", "libkvtier-dev", "kvtierd", "kvtier-tools"}
    if not want <= set(debs):
        fail(f"packages {sorted(debs)}")

    ma = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
    contents = {p: run(["dpkg-deb", "-c", debs[p]]) for p in want}
    expect = {
        "libkvtier0": [f"./usr/lib/{ma}/libkvtier.so.0"],
        "libkvtier-dev": ["./usr/include/kvtier.h", f"./usr/lib/{ma}/libkvtier.so",
                          f"./usr/lib/{ma}/libkvtier.a", f"./usr/lib/{ma}/pkgconfig/kvtier.pc"],
        "kvtierd": ["./usr/sbin/kvtierd", "./etc/kvtier/kvtierd.conf",
                    "./lib/systemd/system/kvtierd.service", "./usr/share/man/man8/kvtierd.8.gz"],
        "kvtier-tools": ["./usr/bin/kvtier", "./usr/share/man/man1/kvtier.1.gz",
                         "./usr/share/man/man1/kvtier-admin.1.gz"],
    }
    for p, files in expect.items():
        for f in files:
            if not re.search(r" " + re.escape(f) + r"( |$)", contents[p], re.M):
                fail(f"{p} lacks {f}:\n{contents[p]}")
    ctrl = os.path.join(work, "ctrl")
    shutil.rmtree(ctrl, ignore_errors=True)
    run(["dpkg-deb", "-e", debs["kvtierd"], ctrl])
    if "/etc/kvtier/kvtierd.conf" not in open(os.path.join(ctrl, "conffiles")).read():
        fail("kvtierd.conf is not a conffile")
    if "adduser --system" not in open(os.path.join(ctrl, "postinst")).read():
        fail("postinst makes no user")

    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    for p in want:
        run(["dpkg-deb", "-x", debs[p], root])
    libdir = os.path.join(root, "usr", "lib", ma)
    # kvtier.pc first, from the root; the libraries it requires privately
    # from the system (PKG_CONFIG_PATH is searched before the defaults).
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=root,
               PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "kvtier"], env=env).split()
    if not any(f.startswith("-I" + root) for f in flags):
        fail(f"pkg-config flags do not point into the root: {flags}")
    exe = os.path.join(work, "quickstart")
    run(["cc", "-o", exe, os.path.join(src, "doc", "examples", "quickstart.c"), *flags])
    ldd = run(["ldd", exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir))
    if os.path.join(libdir, "libkvtier.so.0") not in ldd:
        fail(f"the example does not use the unpacked library:\n{ldd}")
    print(run([exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir)).strip())

    kvtierd = os.path.join(root, "usr", "sbin", "kvtierd")
    conf = os.path.join(root, "etc", "kvtier", "kvtierd.conf")
    print(run([kvtierd, "--check-config", conf], cwd=work).strip())
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    log = open(os.path.join(work, "kvtierd.log"), "w+")
    d = subprocess.Popen([kvtierd, "--config", conf, "--dir", data, "--listen", "127.0.0.1:0",
                          "--metrics", "127.0.0.1:0", "--dram", "64M", "--ssd", "64M",
                          "--set", "ssd.segment=8M"], stdout=subprocess.DEVNULL, stderr=log,
                         cwd=work)
    try:
        metrics = None
        deadline = time.time() + 60
        while not metrics:
            if time.time() > deadline or d.poll() is not None:
                log.seek(0)
                fail("the installed kvtierd did not start: " + log.read())
            log.seek(0)
            m = re.search(r'msg="metrics listener on ([0-9.:]+)"', log.read())
            metrics = m and m.group(1)
            time.sleep(0.1)
        body = urllib.request.urlopen(f"http://{metrics}/healthz", timeout=10).read()
        if body != b"ok\n":
            fail(f"/healthz: {body!r}")
        print(f"installed kvtierd with the shipped configuration: /healthz ok on {metrics}")
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            rc = d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
            rc = -9
    if rc != 0:
        fail(f"kvtierd exited {rc} on SIGTERM")

    sa = shutil.which("systemd-analyze")
    if sa:
        unit = open(os.path.join(root, "lib", "systemd", "system", "kvtierd.service")).read()
        path = os.path.join(work, "kvtierd.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/sbin/kvtierd", kvtierd))
        r = subprocess.run([sa, "verify", "--man=no", path], capture_output=True, text=True,
                           cwd=work)
        if r.returncode or r.stdout.strip() or r.stderr.strip():
            fail(f"systemd-analyze verify of the packaged unit: {r.stdout}{r.stderr}")
        print("packaged unit: systemd-analyze verify clean")


if __name__ == "__main__":
    main()
