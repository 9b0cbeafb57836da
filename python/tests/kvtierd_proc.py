"""kvtierd_proc.py - a real kvtierd for the Python tests: start (the vLLM
and SGLang supports' Kvtierd classes add their own tiers, restarts and
stops) and Kvtierd, a DRAM-only one (test_kvtier, test_batch).  Started on
127.0.0.1, its port read from its log once it listens."""
import os
import re
import signal
import subprocess
import time


def start(exe, data_dir, log, args, port=0):
    """exe --dir data_dir --listen 127.0.0.1:port --threads 2 --log log,
    then args (its tiers and settings); stderr into log + ".stderr".
    Returns (Popen, the port it listens on) once the log says so (within
    60 s); RuntimeError if it exits or does not start by then."""
    log = str(log)
    proc = subprocess.Popen(
        [exe, "--dir", str(data_dir)] + list(args) +
        ["--listen", f"127.0.0.1:{port}", "--threads", "2", "--log", log],
        stdout=subprocess.DEVNULL, stderr=open(log + ".stderr", "w"))
    for _ in range(1200):
        if os.path.exists(log):
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(log).read())
            if m:
                return proc, int(m.group(1))
        if proc.poll() is not None:
            raise RuntimeError("kvtierd exited: " + _text(log) + _text(log + ".stderr"))
        time.sleep(0.05)
    raise RuntimeError("kvtierd did not start")


def _text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class Kvtierd:
    """$KVTIERD with dram of DRAM and no SSD, in base/srv (base: a
    pathlib.Path), on a port of its choosing."""

    def __init__(self, base, dram):
        self.dir = base / "srv"
        self.dir.mkdir()
        self.log = base / "kvtierd.log"
        self.proc, self.port = start(
            os.environ["KVTIERD"], self.dir, self.log,
            ["--dram", dram, "--ssd", "0", "--set", "dram.prefault=off"])

    def wait_stopped(self):
        """Until every thread of the stopped server is in state T (SIGSTOP
        takes effect when each thread next leaves the kernel)."""
        task = f"/proc/{self.proc.pid}/task"
        for _ in range(200):
            if all(open(f"{task}/{t}/stat").read().rsplit(")", 1)[1].split()[0] == "T"
                   for t in os.listdir(task)):
                return
            time.sleep(0.01)
        raise RuntimeError("kvtierd did not stop")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)
