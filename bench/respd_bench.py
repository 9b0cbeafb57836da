"""What the RESP benches (resp_inline_cost.py, resp_skip_cost.py,
resp_echo_mem.py) share: a process's CPU time, and a throwaway kvtierd
with a RESP listener on a given loopback port."""
import contextlib
import os
import shutil
import socket
import subprocess
import time


def cpu_s(pid):
    """pid's CPU time so far (utime + stime from /proc), in seconds."""
    f = open(f'/proc/{pid}/stat').read().split(')')[-1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')


@contextlib.contextmanager
def resp_server(binary, port, tag):
    """kvtierd BINARY in a fresh /tmp/TAG-PORT, --threads 1, DRAM 256M and
    no SSD, its RESP listener on 127.0.0.1:PORT, once that takes a
    connection (at most 10 s): the process, stopped and its directory
    removed when the block ends."""
    d = f'/tmp/{tag}-{port}'
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    p = subprocess.Popen([binary, '--dir', d, '--unix', d + '/s', '--listen', '127.0.0.1:0',
                          '--resp', f'127.0.0.1:{port}', '--dram', '256M', '--ssd', '0',
                          '--threads', '1'], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(('127.0.0.1', port)).close()
                break
            except OSError:
                time.sleep(0.1)
        yield p
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)
