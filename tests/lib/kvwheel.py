"""kvwheel.py - the kvtier wheel of a checkout, built in one place per
build directory.

Two tests install the wheel that `pip wheel` makes of the checkout
(pyproject.toml, meson-python): deploy_wheel (tests/deploy/test_wheel.py,
into a fresh venv) and python_vllm (python/tests/run_vllm.py, into the
engine's venv; scripts/test-all builds it early, in the background, with
that venv).  Both call build() with the same folder, <build>/python/wheel:
meson-python's build directory (FOLDER/build) is shared, so the library is
compiled once and every later call is an incremental build (pip's build
environment, a no-op ninja, the packing); a call always runs pip, so the
wheel is never older than the checkout.

The calls may run at once (the background job and the release phase's
tests): a lock (FOLDER.lock) serialises them, and each caller gets its own
copy of the wheel in a directory of its own, so that a later build cannot
replace the file while a caller is still installing it.

A failed build exits 77 only when tests/lib/pipvenv.py's probe cannot
reach the package index (meson-python and its build requirements come from
it), else 1 with pip's log.
"""
import fcntl
import glob
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipvenv  # noqa: E402


def build(src, folder, dest):
    """pip wheel the checkout src (incrementally, in folder/build) and copy
    the wheel into dest (made empty first): its path."""
    os.makedirs(folder, exist_ok=True)
    dist = os.path.join(folder, "dist")
    with open(folder.rstrip("/") + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(dist, ignore_errors=True)
        pipvenv.run_checked([sys.executable, "-m", "pip", "wheel", "--no-deps",
                             "--disable-pip-version-check", "--timeout", "20", "-w", dist,
                             "-Cbuild-dir=" + os.path.join(folder, "build"),
                             os.path.abspath(src)], "pip wheel " + src)
        wheels = glob.glob(os.path.join(dist, "kvtier-*.whl"))
        assert len(wheels) == 1, wheels
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        out = os.path.join(dest, os.path.basename(wheels[0]))
        shutil.copyfile(wheels[0], out)
    return out
