#!/usr/bin/env python3
"""amqp_login.py - logs in to an AMQP 0-9-1 broker as a consumer would.

Usage: amqp_login.py URL [HOLD_SECONDS]

URL is amqp://USER:PASSWORD@HOST:PORT/VHOST, each part percent-encoded
(as tally's url field delivers it); amqps://... speaks TLS (default port
5671), verifying the broker's certificate and HOST against the CA file
the URL's cacertfile= names (the RabbitMQ URI spec's TLS query
parameter, as tally's url field carries it), else the one in
$AMQP_LOGIN_CAFILE, else the system's CAs: a certificate that does not
verify is exit 2 ("tls: ...").  With certfile= and keyfile= (and
auth_mechanism=external, the spec's query parameters) it presents that
client certificate and logs in with EXTERNAL (the broker takes the user
from the certificate), else with PLAIN.  Opens the connection and
the vhost; exit 0 when the broker let it in, 1 when it refused (its
reply is printed), 2 on a usage or network error.  With HOLD_SECONDS it
then stays connected that long: exit 0 if it was still connected at
the end, 3 if the broker closed the connection first (printed).

No client library is needed on the test machine (Debian's amqp-tools
is not among tools/deps.sh's packages); this is test code only, the
handshake of the AMQP 0-9-1 specification, section 2.2.4.
"""
import os
import select
import socket
import ssl
import struct
import sys
import time
from urllib.parse import parse_qs, unquote, urlsplit


def frame(ftype, channel, payload):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def method(cls, mid, args=b""):
    return frame(1, 0, struct.pack(">HH", cls, mid) + args)


def shortstr(s):
    b = s.encode()
    return struct.pack(">B", len(b)) + b


def longstr(b):
    return struct.pack(">I", len(b)) + b


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed by the broker")
        buf += chunk
    return buf


def read_method(sock):
    while True:
        ftype, _, size = struct.unpack(">BHI", read_exact(sock, 7))
        payload = read_exact(sock, size)
        read_exact(sock, 1)
        if ftype == 1:
            cls, mid = struct.unpack(">HH", payload[:4])
            return cls, mid, payload[4:]


def close_text(args):
    code = struct.unpack(">H", args[:2])[0]
    n = args[2]
    return "%d %s" % (code, args[3:3 + n].decode(errors="replace"))


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    u = urlsplit(sys.argv[1])
    hold = float(sys.argv[2]) if len(sys.argv) == 3 else 0
    user = unquote(u.username or "")
    password = unquote(u.password or "")
    vhost = unquote(u.path[1:]) if u.path.startswith("/") else "/"
    tls = u.scheme == "amqps"
    try:
        sock = socket.create_connection(
            (u.hostname, u.port or (5671 if tls else 5672)), 5)
    except OSError as e:
        print("connect: %s" % e, file=sys.stderr)
        return 2
    if tls:
        q = parse_qs(u.query)
        ctx = ssl.create_default_context(
            cafile=(q.get("cacertfile") or [None])[0] or
            os.environ.get("AMQP_LOGIN_CAFILE") or None)
        if q.get("certfile") and q.get("keyfile"):
            ctx.load_cert_chain(q["certfile"][0], q["keyfile"][0])
        try:
            sock = ctx.wrap_socket(sock, server_hostname=u.hostname)
        except (ssl.SSLError, OSError) as e:
            print("tls: %s" % e, file=sys.stderr)
            return 2
    sock.settimeout(10)
    try:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        cls, mid, _ = read_method(sock)
        if (cls, mid) != (10, 10):
            print("no connection.start", file=sys.stderr)
            return 2
        q = parse_qs(u.query)
        if (q.get("auth_mechanism") or [""])[0].lower() == "external":
            mech, resp = "EXTERNAL", b""
        else:
            mech = "PLAIN"
            resp = b"\x00" + user.encode() + b"\x00" + password.encode()
        sock.sendall(method(10, 11, longstr(b"") + shortstr(mech) +
                            longstr(resp) + shortstr("en_US")))
        cls, mid, args = read_method(sock)
        if (cls, mid) == (10, 50):
            print("refused: %s" % close_text(args))
            return 1
        # Tune-ok echoes the broker's limits (channel_max 0 is refused).
        chmax, fmax, _ = struct.unpack(">HIH", args[:8])
        sock.sendall(method(10, 31, struct.pack(">HIH", chmax, fmax, 0)))
        sock.sendall(method(10, 40, shortstr(vhost) + shortstr("") + b"\x00"))
        cls, mid, args = read_method(sock)
        if (cls, mid) == (10, 50):
            print("refused: %s" % close_text(args))
            return 1
        if (cls, mid) != (10, 41):
            print("unexpected method %d.%d" % (cls, mid), file=sys.stderr)
            return 2
    except (EOFError, ConnectionResetError) as e:
        # RabbitMQ may drop the socket on a bad password.
        print("refused: %s" % e)
        return 1
    except OSError as e:
        print("network: %s" % e, file=sys.stderr)
        return 2
    if hold > 0:
        end = time.time() + hold
        while time.time() < end:
            r, _, _ = select.select([sock], [], [], max(0, end - time.time()))
            if r:
                try:
                    cls, mid, args = read_method(sock)
                except (EOFError, OSError) as e:
                    print("closed: %s" % e)
                    return 3
                if (cls, mid) == (10, 50):
                    print("closed: %s" % close_text(args))
                    return 3
    try:
        sock.sendall(method(10, 50, struct.pack(">H", 200) + shortstr("") +
                            struct.pack(">HH", 0, 0)))
        read_method(sock)
    except (EOFError, OSError):
        pass
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
