#!/usr/bin/env python3
"""run.py - the kvtier Python package's pytest suite, as a meson test.

Usage: run.py BUILD-PYTHON-DIR KVTIERD.  BUILD-PYTHON-DIR is <build>/python,
which holds the built package (kvtier/).  Installs the pinned test
requirements into a venv under it (once; made from this interpreter, the
one the extension was built for) and exits 77 only when a separate probe
cannot reach the package index (tests/lib/pipvenv.py); any other failed
install fails with pip's log.  Then runs pytest on test_kvtier.py with the package on
PYTHONPATH and KVTIERD naming the server binary for the remote-tier tests.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "lib"))
import pipvenv  # noqa: E402

# numpy 2.5 has no wheel for Python 3.11 (checked: pip lists 2.4.6 as the
# newest it can take); 2.4.6 has.
REQUIREMENTS = ["pytest==9.2.0", "numpy==2.4.6"]


def venv_python(build):
    # Skips (77) only when a separate probe cannot reach the package index;
    # a pin without a wheel here fails with pip's log (tests/lib/pipvenv.py).
    # Locked: python_batch (run_batch.py) shares this venv and runs beside.
    return pipvenv.venv(os.path.join(build, "venv-test"), [REQUIREMENTS])


def main():
    build, kvtierd = sys.argv[1], sys.argv[2]
    py = venv_python(build)
    env = dict(os.environ, PYTHONPATH=build, KVTIERD=kvtierd, PYTHONDONTWRITEBYTECODE="1")
    here = os.path.dirname(os.path.abspath(__file__))
    # test_kvtier.py only: test_vllm.py needs the vLLM venv (run_vllm.py).
    # An exception a test's thread does not handle is an error, not a
    # warning pytest prints and passes.
    r = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-W", "error::pytest.PytestUnhandledThreadExceptionWarning",
                        os.path.join(here, "test_kvtier.py"),
                        "--basetemp", os.path.join(build, "pytest-tmp")], env=env)
    # pytest's 5 (no tests collected) is a failure here, not a pass.
    sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
