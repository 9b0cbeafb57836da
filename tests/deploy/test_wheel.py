#!/usr/bin/env python3
"""test_wheel.py - `pip install .` works: pyproject.toml's wheel (meson-python,
libkvtier linked into the extension) installs into a fresh venv and runs
there with nothing of the build tree on the path.

Usage: test_wheel.py [--sdist] SOURCE-DIR WORK-DIR [WHEEL-FOLDER].  With --sdist (suite
deploy-slow) the sdist comes first: `python -m build --sdist` (build,
pinned, in WORK-DIR/venv-build) makes it with meson-python (meson dist:
the committed tree), it must hold the build files, the library, the
extension and the connector, and the wheel below is built from the
unpacked sdist instead of the source tree.  Builds the wheel with pip (its
build requirements, pinned in pyproject.toml, come from PyPI; exits 77 only
when tests/lib/pipvenv.py's probe cannot reach the index) with
tests/lib/kvwheel.py, in WHEEL-FOLDER (default WORK-DIR/wheel; meson passes
<build>/python/wheel, the folder the vLLM test's wheel is built in, so that
CI compiles the wheel once and this build is incremental; from an sdist,
always WORK-DIR/wheel), the wheel copied into WORK-DIR/dist; makes a fresh
venv WORK-DIR/venv-wheel, installs the wheel with --no-index, and in that
venv, run isolated (-I: no PYTHONPATH, no user site) from an empty
directory:

  1. kvtier imports from the venv's site-packages, not from a build tree;
  2. a Store round-trips a block (put, lookup_prefix, get, bytes equal) and
     a miss is a miss;
  3. kvtier.vllm loads by its module path the way vLLM's connector factory
     loads kv_connector_module_path (importlib.import_module, then getattr
     of the class): without vLLM, torch and numpy in the venv the import
     stops exactly at the first of them (numpy); with stand-ins for those
     three on the path, KVTierConnector is a subclass of the stand-in
     KVConnectorBase_V1, so the module itself, as installed, is whole.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import kvwheel  # noqa: E402
import pipvenv  # noqa: E402

CHECK = r'''
import importlib, os, sys
import kvtier
venv = sys.argv[1]
assert os.path.realpath(kvtier.__file__).startswith(os.path.realpath(venv)), kvtier.__file__
assert kvtier._kvtier.__file__.startswith(os.path.dirname(kvtier.__file__))
with kvtier.Store({"dram.capacity": "64M"}) as s:
    ns = s.register({"model": "m", "dtype": "bf16", "layout": "vllm-flash-nhd",
                     "block_tokens": 16})
    digest, _ = s.ns_info(ns)
    keys = kvtier.key_chain_prompt(digest, list(range(1000, 1064)), 16)
    block = bytes(range(256)) * 256
    assert s.put(ns, keys[0], block) is True
    assert s.lookup_prefix(ns, keys)[0] == 1
    assert s.get(ns, keys[0]) == block
    assert s.get(ns, keys[1]) is None
print("roundtrip ok", kvtier.version())
try:
    importlib.import_module("kvtier.vllm")
    raise SystemExit("kvtier.vllm imported without numpy, torch and vllm?")
except ModuleNotFoundError as e:
    assert e.name == "numpy", e
sys.modules.pop("kvtier.vllm", None)
sys.path.append(sys.argv[2])    # the stand-ins, after site-packages
mod = importlib.import_module("kvtier.vllm")
cls = getattr(mod, "KVTierConnector")
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
assert issubclass(cls, KVConnectorBase_V1) and cls is not KVConnectorBase_V1
assert mod.__file__.startswith(os.path.dirname(kvtier.__file__))
assert mod.store_options({})["dram.capacity"] == "1G"
print("connector ok", cls.__module__ + "." + cls.__name__)
'''

STUBS = {
    "numpy/__init__.py": "",
    "torch/__init__.py": "class Tensor:\n    pass\n",
    "vllm/__init__.py": "",
    "vllm/logger.py": "import logging\ninit_logger = logging.getLogger\n",
    "vllm/distributed/__init__.py": "",
    "vllm/distributed/kv_transfer/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/__init__.py": "",
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": textwrap.dedent("""\
        import enum
        class KVConnectorBase_V1:
            pass
        class KVConnectorMetadata:
            pass
        class KVConnectorRole(enum.Enum):
            SCHEDULER = 0
            WORKER = 1
        class SupportsHMA:
            pass
        """),
}

def run(cmd, **kw):
    """Run a local command (nothing from the index): its stdout, or exit 1
    with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(" ".join(cmd), "failed:\n", r.stdout[-3000:] + r.stderr[-3000:])
        sys.exit(1)
    return r.stdout


BUILD_REQUIREMENTS = ["build==1.2.2.post1"]


def sdist(src, work):
    """The sdist of src, unpacked: its directory."""
    # With pip: the build frontend may run it (its isolated environment).
    py = pipvenv.venv(os.path.join(work, "venv-build"), [BUILD_REQUIREMENTS], pip=True)
    out = os.path.join(work, "sdist")
    shutil.rmtree(out, ignore_errors=True)
    # Its build requirements come from the index too.
    pipvenv.run_checked([py, "-m", "build", "--sdist", "--outdir", out, src],
                        "python -m build --sdist", py)
    tars = glob.glob(os.path.join(out, "kvtier-*.tar.gz"))
    assert len(tars) == 1, tars
    names = subprocess.run(["tar", "tzf", tars[0]], capture_output=True, text=True,
                           check=True).stdout.split()
    for want in ("pyproject.toml", "meson.build", "meson_options.txt", "PKG-INFO",
                 "include/kvtier.h", "lib/store/store.c", "lib/meson.build",
                 "python/kvtier/_kvtier.c", "python/kvtier/vllm.py",
                 "python/kvtier/meson.build"):
        if "kvtier-0.1.0/" + want not in names:
            print(f"FAIL: the sdist lacks {want}")
            sys.exit(1)
    print(f"sdist {os.path.basename(tars[0])}: {len(names)} files")
    subprocess.run(["tar", "xzf", tars[0], "-C", out], check=True)
    return os.path.join(out, "kvtier-0.1.0")


def main():
    args = sys.argv[1:]
    from_sdist = args[0] == "--sdist"
    if from_sdist:
        args = args[1:]
    src, work = os.path.abspath(args[0]), os.path.abspath(args[1])
    os.makedirs(work, exist_ok=True)
    if from_sdist:
        src = sdist(src, work)
    folder = os.path.join(work, "wheel")
    if len(args) > 2 and not from_sdist:
        folder = os.path.abspath(args[2])
    wheel = kvwheel.build(src, folder, os.path.join(work, "dist"))
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", wheel],
                           capture_output=True, text=True, check=True).stdout
    print(names)
    for want in ("kvtier/__init__.py", "kvtier/vllm.py", "kvtier/_kvtier.cpython-"):
        assert want in names, want
    # libkvtier is inside the extension: the wheel holds no libkvtier.so
    # and the extension needs none.
    assert "libkvtier" not in names

    venv = os.path.join(work, "venv-wheel")
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv])
    py = os.path.join(venv, "bin", "python3")
    run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check",
         "--quiet", wheel])
    ext = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "kvtier",
                                 "_kvtier*.so"))
    assert len(ext) == 1, ext
    ldd = subprocess.run(["ldd", ext[0]], capture_output=True, text=True).stdout
    assert "libkvtier" not in ldd, ldd

    with tempfile.TemporaryDirectory(dir=work) as tmp:
        stubs = os.path.join(tmp, "stubs")
        for rel, text in STUBS.items():
            os.makedirs(os.path.dirname(os.path.join(stubs, rel)), exist_ok=True)
            with open(os.path.join(stubs, rel), "w") as f:
                f.write(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        out = run([py, "-I", "-c", CHECK, venv, stubs], cwd=tmp, env=env)
    print(out, end="")
    assert "roundtrip ok" in out and "connector ok kvtier.vllm.KVTierConnector" in out


if __name__ == "__main__":
    main()
