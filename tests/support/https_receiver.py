#!/usr/bin/python3
"""A webhook receiver over HTTPS, as a shop would write one: Python's http.server behind its ssl
module, checking each delivery's X-Flashsale-Signature with hmac (README.md, "Order events").

  https_receiver.py --cert C --key K --signing-key-hex H --log FILE --port-file FILE

Listens on 127.0.0.1 (a free port, written to --port-file once it listens), answers every POST
200 and appends one JSON line per delivery to --log: the event id header, whether the signature
verified, and the body.
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import ssl
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--signing-key-hex", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    signing_key = bytes.fromhex(args.signing_key_hex)

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            timestamp = self.headers.get("X-Flashsale-Timestamp", "")
            expected = "v1=" + hmac.new(signing_key, timestamp.encode() + b"." + body,
                                        hashlib.sha256).hexdigest()
            valid = hmac.compare_digest(expected, self.headers.get("X-Flashsale-Signature", ""))
            with open(args.log, "a", encoding="utf-8") as log:
                log.write(json.dumps({"event_id": self.headers.get("X-Flashsale-Event-Id", ""),
                                      "valid": valid, "body": body.decode()}) + "\n")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *unused):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args.cert, args.key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
