#!/usr/bin/env python3
"""amqp_publish.py: publishes messages to a queue over AMQP 0-9-1, as a
third party who may publish to the broker would (a minimal client of its
own: the tests publish bodies larger than the management API takes, and
choose every header).

  amqp_publish.py --port P --user U --password PW --queue Q
                  (--body-file F | --random N) [--count K]
                  [--header KEY=STRING]... [--int KEY=N]...

publishes K messages (each --random body fresh random bytes) to the
default exchange with routing key Q, persistent, with publisher
confirms, and exits 0 once the broker has confirmed them all."""
import argparse, os, socket, struct, sys

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--user", required=True)
ap.add_argument("--password", required=True)
ap.add_argument("--queue", required=True)
ap.add_argument("--body-file")
ap.add_argument("--random", type=int)
ap.add_argument("--count", type=int, default=1)
ap.add_argument("--header", action="append", default=[])
ap.add_argument("--int", action="append", default=[])
a = ap.parse_args()

def shortstr(s):
    b = s.encode()
    return struct.pack("B", len(b)) + b

def longstr(b):
    return struct.pack(">I", len(b)) + b

def table(entries):
    out = b""
    for k, v in entries:
        out += shortstr(k)
        if isinstance(v, int):
            out += b"l" + struct.pack(">q", v)
        else:
            out += b"S" + longstr(v.encode())
    return longstr(out)

sock = socket.create_connection((a.host, a.port))
buf = b""

def read_frame():
    global buf
    while True:
        if len(buf) >= 7:
            t, ch, size = struct.unpack(">BHI", buf[:7])
            if len(buf) >= 8 + size:
                payload = buf[7:7 + size]
                buf = buf[8 + size:]
                return t, ch, payload
        d = sock.recv(65536)
        if not d:
            sys.exit("amqp_publish: the broker closed the connection")
        buf += d

def method_frame(ch, cls, mid, args):
    p = struct.pack(">HH", cls, mid) + args
    return struct.pack(">BHI", 1, ch, len(p)) + p + b"\xce"

def expect(cls, mid):
    while True:
        t, ch, p = read_frame()
        if t != 1:
            continue
        c, m = struct.unpack(">HH", p[:4])
        if (c, m) == (cls, mid):
            return p[4:]
        if (c, m) in ((10, 50), (20, 40)):
            code = struct.unpack(">H", p[4:6])[0]
            n = p[6]
            sys.exit("amqp_publish: closed by the broker: %d %s" %
                     (code, p[7:7 + n].decode(errors="replace")))

sock.sendall(b"AMQP\x00\x00\x09\x01")
expect(10, 10)
sock.sendall(method_frame(0, 10, 11, table([]) + shortstr("PLAIN") +
             longstr(b"\0" + a.user.encode() + b"\0" + a.password.encode()) +
             shortstr("en_US")))
tune = expect(10, 30)
chmax, fmax, _hb = struct.unpack(">HIH", tune[:8])
fmax = fmax or 131072
sock.sendall(method_frame(0, 10, 31, struct.pack(">HIH", chmax, fmax, 0)))
sock.sendall(method_frame(0, 10, 40, shortstr("/") + shortstr("") + b"\0"))
expect(10, 41)
sock.sendall(method_frame(1, 20, 10, shortstr("")))
expect(20, 11)
sock.sendall(method_frame(1, 85, 10, b"\0"))
expect(85, 11)

hdrs = []
for h in a.header:
    k, v = h.split("=", 1)
    hdrs.append((k, v))
for h in a.int:
    k, v = h.split("=", 1)
    hdrs.append((k, int(v)))
fixed = open(a.body_file, "rb").read() if a.body_file else None
for _ in range(a.count):
    body = fixed if fixed is not None else os.urandom(a.random)
    out = [method_frame(1, 60, 40, struct.pack(">H", 0) + shortstr("") +
                        shortstr(a.queue) + b"\0")]
    flags = 0x1000 | (0x2000 if hdrs else 0)
    props = (table(hdrs) if hdrs else b"") + b"\x02"
    hp = struct.pack(">HHQH", 60, 0, len(body), flags) + props
    out.append(struct.pack(">BHI", 2, 1, len(hp)) + hp + b"\xce")
    step = fmax - 8
    for i in range(0, len(body), step):
        chunk = body[i:i + step]
        out.append(struct.pack(">BHI", 3, 1, len(chunk)) + chunk + b"\xce")
    sock.sendall(b"".join(out))
confirmed = 0
while confirmed < a.count:
    p = expect(60, 80)
    tag, multiple = struct.unpack(">QB", p[:9])
    confirmed = tag if multiple else confirmed + 1
sock.sendall(method_frame(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") +
             struct.pack(">HH", 0, 0)))
try:
    expect(10, 51)
except SystemExit:
    pass
sock.close()
