#!/usr/bin/env python3
"""What a large RESP ECHO (or PING with an argument) holds in kvtierd,
against what --max-memory charges for it.

Starts each kvtierd given (release builds: --threads 1, --dram 1G, no SSD,
--max-memory 2G so that nothing is refused) and, on CONNS connections at
once, sends one ECHO of SIZE MiB each, the answers left unread; waits
until the server's loop is idle (its CPU time still for 0.3 s), then
reads /proc VmHWM (peak RSS), the server's CPU time, and the peak of kvtier_server_memory_bytes
sampled meanwhile; then reads the answers and checks their bytes.  Before
2026-12-06 (session 37) the answer was a copy of the argument, made while
the command's bytes were held, and not charged until queued: the peak RSS
was twice the arguments and the charge once.

  python3 bench/resp_echo_mem.py [REF/kvtierd] NEW/kvtierd CONNS SIZE_MIB
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

from respd_bench import cpu_s


def status_kib(pid, field):
    for line in open(f'/proc/{pid}/status'):
        if line.startswith(field + ':'):
            return int(line.split()[1])
    return 0


def mem_used(mport):
    s = socket.create_connection(('127.0.0.1', mport))
    s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    body = b''
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        body += b
    s.close()
    m = re.search(rb'^kvtier_server_memory_bytes (\S+)$', body, re.M)
    return float(m.group(1)) if m else 0.0


def run(binary, port, conns, size):
    d = f'/tmp/resp-echo-mem-{port}'
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log = d + '/log'
    p = subprocess.Popen([binary, '--dir', d, '--unix', d + '/s', '--listen', '127.0.0.1:0',
                          '--resp', f'127.0.0.1:{port}', '--metrics', '127.0.0.1:0',
                          '--dram', '1G', '--ssd', '0', '--set', 'dram.prefault=off',
                          '--threads', '1', '--max-memory', '2G', '--log', log],
                         stderr=subprocess.DEVNULL)
    mport = None
    for _ in range(100):  # listening within 10 s
        m = os.path.exists(log) and re.search(r'metrics listener on 127\.0\.0\.1:(\d+)',
                                                open(log).read())
        if m:
            mport = int(m.group(1))
            break
        time.sleep(0.1)
    arg = bytes(range(256)) * (size // 256)
    cmd = b'*2\r\n$4\r\nECHO\r\n$%d\r\n' % len(arg) + arg + b'\r\n'
    try:
        rss0 = status_kib(p.pid, 'VmRSS')
        cpu0 = cpu_s(p.pid)
        socks = [socket.create_connection(('127.0.0.1', port)) for _ in range(conns)]
        peak = [mem_used(mport)]
        done = False

        def sampler():
            while not done:
                peak.append(mem_used(mport))
                time.sleep(0.005)
        th = threading.Thread(target=sampler)
        th.start()
        senders = [threading.Thread(target=s.sendall, args=(cmd,)) for s in socks]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        last, still = cpu_s(p.pid), time.monotonic()
        while time.monotonic() - still < 0.3:
            time.sleep(0.05)
            c = cpu_s(p.pid)
            if c != last:
                last, still = c, time.monotonic()
        done = True
        th.join()
        hwm = status_kib(p.pid, 'VmHWM')
        cpu = cpu_s(p.pid) - cpu0
        want = b'$%d\r\n' % len(arg) + arg + b'\r\n'
        for s in socks:
            got = b''
            while len(got) < len(want):
                b = s.recv(1 << 20)
                if not b:
                    break
                got += b
            assert got == want, ('answer', len(got), got[:40])
            s.close()
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)
    return (hwm - rss0) / 1024, max(peak) / (1 << 20), cpu


def main():
    conns, size = int(sys.argv[-2]), int(sys.argv[-1]) << 20
    for i, binary in enumerate(sys.argv[1:-2]):
        hwm, used, cpu = run(binary, 16541 + i, conns, size)
        print(f'{binary}: {conns} ECHOs of {size >> 20} MiB: peak RSS +{hwm:.0f} MiB '
              f'({hwm / conns / (size >> 20):.2f} x the arguments), '
              f'mem_used peak {used:.0f} MiB ({used / conns / (size >> 20):.2f} x), '
              f'server CPU {cpu * 1e3 / conns:.0f} ms an ECHO')


if __name__ == '__main__':
    main()
