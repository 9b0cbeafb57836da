#!/usr/bin/env python3
"""What bytes that are no command cost kvtierd's RESP loop, a MB.

Redis skips an array of no arguments (`*0`, `*-1`) and a blank inline
line without an answer; so does kvtierd (doc/resp.md).  A client can send
megabytes of them: they must cost the loop no more a byte than commands
do.  Starts each kvtierd given (release builds, --threads 1, no SSD) and
sends MB megabytes of one kind of input on one connection, then a PING,
while a thread reads what comes back; the server's CPU time (utime +
stime from /proc) until the PONG, a MB of input:

  *0         "*0\\r\\n" over and over (skipped)
  *-1        "*-1\\r\\n" (skipped)
  blank      "\\r\\n", blank inline lines (skipped)
  ping       "*1\\r\\n$4\\r\\nPING\\r\\n", each answered +PONG
  ping-inl   "PING\\r\\n", each answered +PONG
  bulk       an unknown command with a 64 KiB argument (one short error each)

  python3 bench/resp_skip_cost.py [REF/kvtierd] NEW/kvtierd MB

A kvtierd that closes the connection at `*0` (before 2026-12-06) shows
"closed".  doc/security.md "Session 37" records a run.
"""
import socket
import sys
import threading
import time

from respd_bench import cpu_s, resp_server


KINDS = {
    '*0': b'*0\r\n',
    '*-1': b'*-1\r\n',
    'blank': b'\r\n',
    'ping': b'*1\r\n$4\r\nPING\r\n',
    'ping-inl': b'PING\r\n',
    'bulk': b'*2\r\n$4\r\nNOPE\r\n$65536\r\n' + b'a' * 65536 + b'\r\n',
}


def one(port, pid, unit, mb):
    count = max(1, (mb << 20) // len(unit))
    s = socket.create_connection(('127.0.0.1', port))
    closed = False

    def reader():
        nonlocal closed
        lines, last = 0, b''
        while lines <= answers:  # every answer a line, then the PONG
            b = s.recv(1 << 20)
            if not b:
                closed = True
                return
            lines += (last + b).count(b'\r\n')
            last = b[-1:] if b[-1:] == b'\r' else b''
    answers = count if b'PING' in unit or b'NOPE' in unit else 0
    data = unit * count + b'PING\r\n'
    c0 = cpu_s(pid)
    t0 = time.monotonic()
    th = threading.Thread(target=reader)
    th.start()
    try:
        s.sendall(data)
    except OSError:
        closed = True
    th.join()
    wall = time.monotonic() - t0
    s.close()
    if closed:
        return None
    return (cpu_s(pid) - c0) / (len(data) / (1 << 20)) * 1e3, wall


def run(binary, port, mb):
    out = {}
    with resp_server(binary, port, 'resp-skip-cost') as p:
        for name, unit in KINDS.items():
            out[name] = one(port, p.pid, unit, mb)
    return out


def main():
    mb = int(sys.argv[-1])
    for i, binary in enumerate(sys.argv[1:-1]):
        r = run(binary, 16521 + i, mb)
        print(binary, '  '.join(f'{k} ' + ('closed' if v is None else
                                           f'{v[0]:.0f} ms/MB ({v[1]:.2f} s)')
                                for k, v in r.items()))


if __name__ == '__main__':
    main()
