#!/usr/bin/python3
"""A stand-in Kubernetes API server (or kubelet) for the pod metadata tests: HTTPS on
127.0.0.1 with the given certificate, answering GET /api/v1/pods and GET /pods with a
PodList file, and recording every request.

Usage: pp_k8s_apiserver.py --cert CERT --key KEY --dir DIR --body PODLIST.json [--node NODE]
Prints "PORT <n>" on stdout once listening. What it does is read from files in DIR at each
request, so a test changes it between requests without restarting it:
  DIR/mode            "ok" (default), "401", "500", "malformed" (the first half of the body),
                      "close" (close the connection without an answer)
  DIR/token_required  if present: answer 401 unless "Authorization: Bearer <its content>"
  DIR/body.json       if present: served instead of --body
Each request appends one line to DIR/requests.log: "<path>\t<Authorization header>\t<status>".
With --node, /api/v1/pods without fieldSelector=spec.nodeName=<node> gets 400 (the agent must
never list the whole cluster).
"""
import argparse
import os
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def read(path, default=None):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return default


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, status):
        auth = self.headers.get("Authorization", "")
        with self.server.lock:
            with open(os.path.join(self.server.dir, "requests.log"), "a") as f:
                f.write("%s\t%s\t%s\n" % (self.path, auth, status))

    def answer(self, status, body, ctype="application/json"):
        self.record(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        d = self.server.dir
        mode = (read(os.path.join(d, "mode"), b"ok") or b"ok").decode().strip()
        url = urllib.parse.urlsplit(self.path)
        if url.path not in ("/api/v1/pods", "/pods"):
            return self.answer(404, b'{"kind":"Status","code":404}')
        if url.path == "/api/v1/pods" and self.server.node:
            q = urllib.parse.parse_qs(url.query)
            if q.get("fieldSelector") != ["spec.nodeName=" + self.server.node]:
                return self.answer(400, b'{"kind":"Status","code":400}')
        if mode == "close":
            self.record("close")
            self.close_connection = True
            return
        want = read(os.path.join(d, "token_required"))
        if want is not None:
            if self.headers.get("Authorization", "") != "Bearer " + want.decode().strip():
                return self.answer(401, b'{"kind":"Status","apiVersion":"v1","status":'
                                   b'"Failure","message":"Unauthorized","code":401}')
        if mode == "401":
            return self.answer(401, b'{"kind":"Status","code":401}')
        if mode == "500":
            return self.answer(500, b'{"kind":"Status","code":500}')
        body = read(os.path.join(d, "body.json")) or read(self.server.body)
        if mode == "malformed":
            body = body[: len(body) // 2]
        return self.answer(200, body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--body", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.dir, srv.body, srv.node, srv.lock = a.dir, a.body, a.node, threading.Lock()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
