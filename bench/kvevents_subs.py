#!/usr/bin/env python3
"""kvevents_subs.py KVTIERD N TOPIC_LEN - one raw ZMTP SUB peer sends N
distinct subscriptions of TOPIC_LEN bytes to a kvtierd's bound KV-events
socket (doc/kvevents.md "What a subscriber can cost") while RESP MSETs
make events flow, connecting again whenever it is let go; prints
kvtierd's RSS and CPU seconds, and a second RESP client's PING, every
20,000 subscriptions and for 5 s after.  Starts the kvtierd itself
(--dram 32M --ssd 0 --threads 2, in a directory under TMPDIR)."""
import os, re, socket, subprocess, sys, tempfile, threading, time
kvtierd, N, TL = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = tempfile.mkdtemp()
log = d + '/log'
p = subprocess.Popen([kvtierd, '--dir', d + '/data', '--dram', '32M', '--ssd', '0', '--threads', '2', '--set', 'dram.prefault=off',
                      '--listen', '127.0.0.1:0', '--resp', '127.0.0.1:0', '--log', log,
                      '--set', 'events.endpoint=tcp://127.0.0.1:*'],
                     stdout=subprocess.DEVNULL, stderr=open(log + '.err', 'w'))
for _ in range(200):
    time.sleep(0.05)
    m = os.path.exists(log) and re.search(r'RESP listener on 127\.0\.0\.1:(\d+)', open(log).read())
    if m: break
rport = int(m.group(1))
for _ in range(200):
    m = re.search(r'publishing KV events on tcp://127\.0\.0\.1:(\d+)', open(log).read())
    if m: break
    time.sleep(0.05)
eport = int(m.group(1))
def rss():
    for l in open('/proc/%d/status' % p.pid):
        if l.startswith('VmRSS'): return int(l.split()[1]) // 1024
def cpu():
    f = open('/proc/%d/stat' % p.pid).read().split(')')[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
stop = False
def mset():
    s = socket.create_connection(('127.0.0.1', rport)); i = 0
    s.settimeout(5)
    while not stop:
        args = []
        for k in range(100):
            args += [b'k%d' % (i * 100 + k), b'v' * 16]
        i += 1
        cmd = b'*%d\r\n$4\r\nMSET\r\n' % (1 + len(args)) + b''.join(b'$%d\r\n%s\r\n' % (len(a), a) for a in args)
        try:
            s.sendall(cmd); s.recv(100)
        except Exception as e:
            print('mset thread:', e, flush=True); s = socket.create_connection(('127.0.0.1', rport)); s.settimeout(5)
t = threading.Thread(target=mset); t.start()
G = bytes([0xff] + [0] * 8 + [0x7f, 3, 0]) + b'NULL' + bytes(16) + bytes(1) + bytes(31)
R = bytes([0x04, 25, 5]) + b'READY' + bytes([11]) + b'Socket-Type' + bytes([0, 0, 0, 3]) + b'SUB'
for _ in range(600):
    try:
        z = socket.create_connection(('127.0.0.1', eport)); break
    except ConnectionRefusedError:
        time.sleep(0.05)
z.sendall(G + R)
z.setblocking(False)
def drain():
    try:
        while z.recv(1 << 16): pass
    except (BlockingIOError, ConnectionResetError): pass
q = socket.create_connection(('127.0.0.1', rport))
def ping():
    t0 = time.time(); q.sendall(b'PING\r\n'); q.recv(100); return (time.time() - t0) * 1000
time.sleep(0.5)
r0, c0 = rss(), cpu()
print('start: rss %d MiB cpu %.2f s ping %.2f ms' % (r0, c0, ping()))
t0 = time.time(); sent = 0; buf = b''; resets = 0; refused = 0
for i in range(N):
    topic = (b'%010d' % i) + os.urandom(max(0, TL - 10))
    body = b'\x01' + topic[:TL]
    if len(body) < 256: fr = bytes([0, len(body)]) + body
    else: fr = bytes([2]) + len(body).to_bytes(8, 'big') + body
    buf += fr
    if len(buf) > 65536 or i == N - 1:
        view = memoryview(buf)
        while view:
            try:
                n = z.send(view); view = view[n:]
            except BlockingIOError:
                drain(); time.sleep(0.001)
            except (BrokenPipeError, ConnectionResetError):
                resets += 1; view = b''
                z.close(); time.sleep(0.1)
                for _ in range(100):
                    try:
                        z = socket.create_connection(('127.0.0.1', eport)); break
                    except ConnectionRefusedError:
                        refused += 1; time.sleep(0.05)
                z.sendall(G + R); z.setblocking(False)
        buf = b''
    if i % 20000 == 0:
        print('%d subs: rss %d MiB cpu %.2f s ping %.2f ms' % (i, rss(), cpu() - c0, ping()), flush=True)
print('sent %d in %.1f s, reconnected %d times, %d refused' % (N, time.time() - t0, resets, refused))
for k in range(5):
    time.sleep(1); drain()
    print('+%d s: rss %d MiB cpu %.2f s ping %.2f ms' % (k + 1, rss(), cpu() - c0, ping()), flush=True)
z.close(); time.sleep(1)
print('peer closed: rss %d MiB' % rss())
stop = True; t.join(); p.terminate(); p.wait()
