#!/usr/bin/env python3
"""Inline RESP commands against redis-server and kvtierd, byte for byte.

Random lines "ECHO <word>\\r\\n" (words of blanks, quotes, backslashes and
escape letters, 0..10 bytes) are sent to a redis-server and to a kvtierd
RESP listener, each followed by a PING; the replies must be the same
bytes (until 2026-12-06 but for the command's name in "wrong number of
arguments" errors, which kvtierd wrote as sent, Redis lowercased).  NUL
bytes are left out: neither server answers a line with a NUL before its
end (redis-server looks for the end with strchr; kvtierd does the same
since 2026-12-06), so each such line would cost the 2 s timeout.

  redis-server --port 16399 --save '' --appendonly no &
  kvtierd --dir D --unix D/s --resp 127.0.0.1:16400 --dram 64M --ssd 0 &
  python3 tests/data/resp_inline_redis.py 16399 16400 SEED COUNT

doc/resp.md "Inline commands" records a run.
"""
import random
import socket
import sys

ALPHA = [b'A', b'a', b' ', b'"', b"'", b'\\', b'x', b'4', b'F', b'n', b'\t', b'\r', b'g',
         b'\x0b', b'\x0c']


def ask(port, line):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(line + b'PING\r\n')
    s.settimeout(2)
    out = b''
    try:
        while not out.endswith(b'+PONG\r\n'):
            d = s.recv(65536)
            if not d:
                out += b'<EOF>'
                break
            out += d
    except socket.timeout:
        out += b'<TIMEOUT>'
    s.close()
    return out


def main():
    redis_port, kvt_port, seed, count = (int(a) for a in sys.argv[1:5])
    random.seed(seed)
    bad = 0
    for _ in range(count):
        word = b''.join(random.choice(ALPHA) for _ in range(random.randint(0, 10)))
        line = b'ECHO ' + word + b'\r\n'
        a, b = ask(redis_port, line), ask(kvt_port, line)
        if a != b:
            bad += 1
            if bad <= 10:
                print(repr(line), 'redis', repr(a), 'kvtierd', repr(b))
    print('lines', count, 'differ', bad)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
