#!/usr/bin/python3
"""HTTP/1.1 sink the transport tests send to: a real server on 127.0.0.1 that answers each
request with the next scripted action and records every request.

Usage: pp_http_sink.py --port 0 --dir DIR --script JSON
Prints "PORT <n>" on stdout once listening. The script is a JSON list; request i (in
arrival order, from 0) gets action i, and requests past the end get {"status": 200}.
An action is an object:
  {"status": 503, "headers": {"Retry-After": "2"}, "body": "text"}  plain response
  {"status": 503, "retry_after_date_in": 5}   Retry-After as an HTTP-date now+5 s
  {"status": 200, "partial_success": {"rejected": 3, "message": "why"}}
      an ExportProfilesServiceResponse, protobuf-encoded here by hand
  {"close": true}       read the request, then close the connection without a reply
  {"reset": true}       read only the headers, then reset the connection (RST)
  {"stall": 3.0}        read the request, then wait 3 s before answering 200
Each request is recorded before it is answered, as DIR/req-NNNN.hdr (first line
"METHOD PATH", then "Name: value" lines, then "X-Sink-Peer: <client port>" and
"X-Sink-Action: <n>") and DIR/req-NNNN.body (the body, gunzipped when Content-Encoding is
gzip), written to a temporary name and renamed, so a reader sees whole files.
"""
import argparse
import email.utils
import gzip
import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def partial_success(rejected, message):
    inner = b""
    if rejected:
        inner += b"\x08" + varint(rejected & 0xFFFFFFFFFFFFFFFF)
    if message:
        m = message.encode()
        inner += b"\x12" + varint(len(m)) + m
    return b"\x0a" + varint(len(inner)) + inner


class Sink:
    def __init__(self, directory, script):
        self.dir = directory
        self.script = script
        self.lock = threading.Lock()
        self.count = 0

    def next(self):
        with self.lock:
            n = self.count
            self.count += 1
        act = self.script[n] if n < len(self.script) else {"status": 200}
        return n, act

    def record(self, n, handler, body, act_index):
        hdr = ["%s %s" % (handler.command, handler.path)]
        for k, v in handler.headers.items():
            hdr.append("%s: %s" % (k, v))
        hdr.append("X-Sink-Peer: %d" % handler.client_address[1])
        hdr.append("X-Sink-Action: %d" % act_index)
        base = os.path.join(self.dir, "req-%04d" % n)
        for ext, data in ((".body", body), (".hdr", ("\n".join(hdr) + "\n").encode())):
            tmp = base + ext + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, base + ext)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                break
            data += chunk
        if self.headers.get("Content-Encoding", "") == "gzip":
            try:
                data = gzip.decompress(data)
            except Exception as e:  # recorded so the test sees the bad body
                data = ("GZIP-ERROR %s" % e).encode()
        return data

    def do_POST(self):
        sink = self.server.sink
        n, act = sink.next()
        if act.get("reset"):
            sink.record(n, self, b"", n)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        body = self.read_body()
        sink.record(n, self, body, n)
        if act.get("close"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if "stall" in act:
            time.sleep(float(act["stall"]))
        status = int(act.get("status", 200))
        out = act.get("body", "").encode()
        ctype = "text/plain"
        if "partial_success" in act:
            ps = act["partial_success"]
            out = partial_success(int(ps.get("rejected", 0)), ps.get("message", ""))
            ctype = "application/x-protobuf"
        elif 200 <= status < 300 and not out:
            ctype = "application/x-protobuf"  # an empty ExportProfilesServiceResponse
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(out)))
            for k, v in act.get("headers", {}).items():
                self.send_header(k, v)
            if "retry_after_date_in" in act:
                when = time.time() + float(act["retry_after_date_in"])
                self.send_header("Retry-After", email.utils.formatdate(when, usegmt=True))
            self.end_headers()
            self.wfile.write(out)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up (stall past its timeout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--script", default="[]")
    args = ap.parse_args()
    script = json.loads(args.script)
    if not isinstance(script, list):
        sys.exit("--script must be a JSON list")
    os.makedirs(args.dir, exist_ok=True)
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.sink = Sink(args.dir, script)
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
