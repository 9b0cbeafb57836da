#!/usr/bin/env python3
"""kvevents_flood.py PORT PID N one|spread - N raw ZMTP peers against a
bound KV-events socket (doc/kvevents.md "What a subscriber can cost"):
each connects (from 127.0.0.1, or "spread" from N loopback addresses,
127.0.2.1 on), sends a greeting and a SUB's READY and stays; prints the
descriptors and RSS of process PID (kvtierd) 1 s and 7 s later, how
many peers it still holds, and both once the peers have closed."""
import os, resource, socket, sys, time
port, pid, n, spread = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == 'spread'
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
G = bytes([0xff] + [0] * 8 + [0x7f, 3, 0]) + b'NULL' + bytes(16) + bytes(1) + bytes(31)
R = bytes([0x04, 25, 5]) + b'READY' + bytes([11]) + b'Socket-Type' + bytes([0, 0, 0, 3]) + b'SUB'
assert len(G) == 64
def fds(): return len(os.listdir('/proc/%d/fd' % pid))
def rss():
    for l in open('/proc/%d/status' % pid):
        if l.startswith('VmRSS'): return int(l.split()[1]) // 1024
print('before: fds %d rss %d MiB' % (fds(), rss()))
ss = []
for i in range(n):
    s = socket.socket()
    if spread: s.bind(('127.0.%d.%d' % (2 + i // 250, 1 + i % 250), 0))
    s.connect(('127.0.0.1', port))
    s.sendall(G + R)
    ss.append(s)
time.sleep(1)
print('1 s after: fds %d rss %d MiB' % (fds(), rss()))
time.sleep(6)
open_n = 0
for s in ss:
    s.setblocking(False)
    try:
        while True:
            d = s.recv(4096)
            if not d: break
    except BlockingIOError:
        open_n += 1
    except ConnectionResetError:
        pass
print('7 s after: fds %d rss %d MiB; %d of %d peers still open' % (fds(), rss(), open_n, n))
for s in ss: s.close()
time.sleep(1)
print('closed: fds %d rss %d MiB' % (fds(), rss()))
