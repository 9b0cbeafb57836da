#!/usr/bin/env python3
"""pipvenv.py - pinned PyPI packages in a venv for a test, and the one rule
for when a failed install may be a skip.

A test that needs packages from the package index may skip (exit 77) only
when the index itself cannot be reached, and that is decided by a separate
probe (an HTTP GET of the index's page for "pip", which every index
holds), never by reading the installer's messages: pip prints "from
versions: none" both for an unreachable index and for a pin with no wheel
for this Python or platform.  Any other failed install fails the test
(exit 1) with the installer's whole log printed.

The installer is uv (UV, pinned; from the same index, by pip, into a venv
of its own beside the one being made, once per folder): it downloads and
unpacks in parallel (the vLLM venv's 3 GB: 58 s, and 94 s more for its
bytecode, on a loaded 2-core machine; pip took 256 s on a quiet one), and
installs from its cache (~/.cache/uv) by hard links.  It is given pip's
index URL, certificate file and timeout, and compiles bytecode as pip
does.

As a module (python/tests/run.py, vllm_support.py, test_resp_py.py):

    py = pipvenv.venv(path, [["pytest==9.2.0"], ["-r", "reqs.txt"]])

As a program (tests/lib/weed.h):

    pipvenv.py VENV-DIR PIP-INSTALL-ARG...   exit 0, 77 or 1 as above

The index probed (and given to uv) is the one pip uses: $PIP_INDEX_URL,
else pip's configured index-url, else https://pypi.org/simple/.
"""
import fcntl
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

DEFAULT_INDEX = "https://pypi.org/simple/"
UV = "uv==0.13.8"


def pip_setting(key, py=sys.executable):
    """pip's setting key ("index-url", "cert"): $PIP_<KEY>, else pip's
    configuration, else None."""
    env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
    if env:
        return env
    r = subprocess.run([py, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        name, _, value = line.partition("=")
        if name.endswith("." + key) and value:
            return value.strip("'\"")
    return None


def index_url(py=sys.executable):
    """The index URL pip would use."""
    return pip_setting("index-url", py) or DEFAULT_INDEX


def index_reachable(url, timeout=20):
    """(True, "") if the index answers at all (any HTTP status), else
    (False, why)."""
    probe = url.rstrip("/") + "/pip/"
    cafile = os.environ.get("PIP_CERT")
    ctx = ssl.create_default_context(cafile=cafile if cafile and os.path.exists(cafile) else None)
    try:
        with urllib.request.urlopen(urllib.request.Request(probe, method="GET"),
                                    timeout=timeout, context=ctx) as r:
            r.read(1)
        return True, ""
    except urllib.error.HTTPError:
        return True, ""   # it answered: reachable
    except (urllib.error.URLError, OSError, ValueError) as e:
        return False, f"{probe}: {e}"


def run_checked(cmd, what, py=sys.executable, env=None):
    """Run a command that needs the package index (an install, a pip
    wheel); on failure exit 77 if the index is unreachable, else print its
    log and exit 1."""
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(f"{what}: rc={r.returncode} in {time.time() - t0:.0f} s", flush=True)
    if r.returncode == 0:
        return
    url = index_url(py)
    ok, why = index_reachable(url)
    if not ok:
        print(f"SKIP: the package index is unreachable ({why}); the installer said:\n"
              + (r.stderr + r.stdout)[-600:], flush=True)
        sys.exit(77)
    print(f"FAIL: {what} failed although the index {url} answers; "
          f"its log:\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}", flush=True)
    sys.exit(1)


def uv_binary(folder, python=sys.executable, timeout=60):
    """The uv executable of a venv folder/venv-uv holding UV (pip installs
    it there once; others wait on the lock beside it)."""
    path = os.path.join(folder, "venv-uv")
    uv = os.path.join(path, "bin", "uv")
    stamp = os.path.join(path, ".ok")
    os.makedirs(folder, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(stamp) and open(stamp).read() == UV:
            return uv
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([python, "-m", "venv", path], check=True)
        run_checked([os.path.join(path, "bin", "python3"), "-m", "pip", "install",
              "--disable-pip-version-check", "--timeout", str(timeout), UV],
             f"pip install {UV}", python)
        with open(stamp, "w") as f:
            f.write(UV)
    return uv


def install(py, args, timeout=60):
    """Install ARGS (pip install's: pins, -r FILE, --no-deps) into the
    venv whose interpreter is py, with uv; on failure exit 77 if the index
    is unreachable, else print the log and exit 1.  pip's settings (index,
    certificate) are read with the pip of uv's own venv beside it: the
    venv may have none (venv's pip=False), and a new venv has no pip
    configuration of its own (pip reads the same user and global files in
    either)."""
    venv_dir = os.path.dirname(os.path.dirname(os.path.abspath(py)))
    uv = uv_binary(os.path.dirname(venv_dir), timeout=timeout)
    pip_py = os.path.join(os.path.dirname(uv), "python3")
    env = dict(os.environ, UV_HTTP_TIMEOUT=str(timeout))
    cert = pip_setting("cert", pip_py)
    if cert and os.path.exists(cert):
        env["SSL_CERT_FILE"] = cert
    run_checked([uv, "pip", "install", "--python", py, "--index-url", index_url(pip_py),
          "--compile-bytecode"] + list(args), f"uv pip install {' '.join(args)}", pip_py,
                env)


def venv(path, installs, python=sys.executable, pip=False):
    """Interpreter of the venv at path holding installs (a list of pip
    argument lists, run in order), made once: a stamp of the arguments and
    of any -r files' contents says when it is current.  Without pip unless
    pip=True (a venv whose users run its pip): uv installs into it from
    outside, and venv's ensurepip cost 3-10 s a venv on a 2-core machine
    (a CI run makes about ten of them)."""
    h = hashlib.sha256(json.dumps([installs, pip]).encode())
    for args in installs:
        for i, a in enumerate(args):
            if a == "-r" and i + 1 < len(args):
                with open(args[i + 1], "rb") as f:
                    h.update(f.read())
    want = h.hexdigest()
    py = os.path.join(path, "bin", "python3")
    stamp = os.path.join(path, ".ok")
    # Tests that share a venv run in parallel (python_kvtier, python_batch):
    # one makes it while the others wait on the lock beside it.
    with open(path.rstrip("/") + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(stamp) and open(stamp).read() == want:
            return py
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([python, "-m", "venv"] + ([] if pip else ["--without-pip"]) + [path],
                       check=True)
        for args in installs:
            install(py, args)
        with open(stamp, "w") as f:
            f.write(want)
    return py


def main(argv):
    if len(argv) < 3:
        print("usage: pipvenv.py VENV-DIR PIP-INSTALL-ARG...", file=sys.stderr)
        return 2
    venv(argv[1], [argv[2:]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
