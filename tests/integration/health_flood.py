#!/usr/bin/env python3
"""A hostile network client against the agent's health endpoint: IDLE connections that send
nothing, SLOW ones that send a valid request one byte a second and never finish, all held
open (reconnecting when the server closes them), while a probe asks GET /livez every 0.2 s
the way the kubelet does: a fresh connection, a 1 s timeout.

Usage: health_flood.py PORT IDLE SLOW SECONDS
Prints one line per probe ("probe MS STATUS") and a summary:
"probes N answered N_OK median_ms MED max_ms MAX held H".
"""
import selectors
import socket
import statistics
import sys
import time

SLOW_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096


def connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    return s


def probe(port):
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(max(0.05, 1.0 - (time.monotonic() - t0)))
            s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.") else 0
    except (OSError, ValueError, IndexError):
        status = 0
    return (time.monotonic() - t0) * 1000.0, status


def main():
    port, idle, slow, seconds = (int(a) for a in sys.argv[1:5])
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> bytes of SLOW_REQUEST sent so far (None: idle)
    for i in range(idle + slow):
        s = connect(port)
        conns[s] = 0 if i >= idle else None
        sel.register(s, selectors.EVENT_READ)
    latencies, answered, end = [], 0, time.monotonic() + seconds
    next_probe, next_byte = time.monotonic() + 0.5, time.monotonic() + 1.0
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_probe:
            ms, status = probe(port)
            latencies.append(ms)
            answered += status == 200
            print(f"probe {ms:.0f} {status}", flush=True)
            next_probe = now + 0.2
        if now >= next_byte:
            for s, sent in list(conns.items()):
                if sent is not None and sent < len(SLOW_REQUEST):
                    try:
                        s.send(SLOW_REQUEST[sent:sent + 1])
                        conns[s] = sent + 1
                    except OSError:
                        pass
            next_byte = now + 1.0
        # connections the server closed come back: the pressure never lets up. A few hundred
        # at a time, so that on a busy machine the probes still keep their pace.
        for key, _ in sel.select(timeout=0.05)[:300]:
            s = key.fileobj
            try:
                closed = s.recv(4096) == b""
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if closed:
                kind = conns.pop(s)
                sel.unregister(s)
                s.close()
                n = connect(port)
                conns[n] = None if kind is None else 0
                sel.register(n, selectors.EVENT_READ)
    print(f"probes {len(latencies)} answered {answered} "
          f"median_ms {statistics.median(latencies):.0f} max_ms {max(latencies):.0f} "
          f"held {len(conns)}")


if __name__ == "__main__":
    main()
