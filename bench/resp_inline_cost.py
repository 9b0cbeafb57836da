#!/usr/bin/env python3
"""What an inline RESP line costs kvtierd's loop: plain, quoted, escaped.

Starts each kvtierd given (release builds: a reference and the one
measured, --threads 1, no SSD) and pipelines COUNT copies of one 60 KB
ECHO line on one connection while a thread reads the answers; the
server's CPU time (utime + stime from /proc) over the lines, per line:

  plain      ECHO aaaa...            (60,000 bytes)
  quoted     ECHO "aaaa..."          (the same bytes in quotes)
  escapes    ECHO "\\x41\\x41..."      (15,000 escapes: 60,000 bytes, 15,000 decoded)

  python3 bench/resp_inline_cost.py REF/kvtierd NEW/kvtierd 20000

doc/resp.md "Inline commands" records a run.
"""
import socket
import sys
import threading

from respd_bench import cpu_s, resp_server


def one_reply(s):
    buf = b''
    while buf.count(b'\r\n') < 2:
        buf += s.recv(1 << 20)
    return len(buf)


def run(binary, port, lines, count):
    out = {}
    with resp_server(binary, port, 'resp-inline-cost') as p:
        for name, line in lines.items():
            s = socket.create_connection(('127.0.0.1', port))
            s.sendall(line)
            want = one_reply(s) * count
            got = 0

            def reader():
                nonlocal got
                while got < want:
                    b = s.recv(1 << 20)
                    if not b:
                        break
                    got += len(b)
            c0 = cpu_s(p.pid)
            th = threading.Thread(target=reader)
            th.start()
            s.sendall(line * count)
            th.join()
            out[name] = (cpu_s(p.pid) - c0) / count * 1e6
            s.close()
    return out


def main():
    n = 60000
    lines = {'plain': b'ECHO ' + b'a' * n + b'\r\n',
             'quoted': b'ECHO "' + b'a' * (n - 2) + b'"\r\n',
             'escapes': b'ECHO "' + b'\\x41' * (n // 4 - 1) + b'"\r\n'}
    count = int(sys.argv[-1])
    for i, binary in enumerate(sys.argv[1:-1]):
        r = run(binary, 16501 + i, lines, count)
        print(binary, ' '.join(f'{k} {v:.1f} us' for k, v in r.items()))


if __name__ == '__main__':
    main()
