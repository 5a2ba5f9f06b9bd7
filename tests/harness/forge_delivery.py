#!/usr/bin/env python3
"""forge_delivery.py: messages for a node's queue tally.node.NODE, forged
on purpose for the tests, as anyone who may publish to the broker and
knows the node's public key (node.added pubkey, in the record) could make
them.  Prints the management API's publish request (JSON).

  forge_delivery.py delivery --node N --pubkey HEX --grant G --holder H
                    --version V [--var NAME=VALUE]... [--seq S]
                    [--sig none|random]
  forge_delivery.py removal --node N --module M [--seq S] [--sig ...]

delivery: a box sealed to the node's X25519 key (crypto_box_seal, through
libsodium itself), "#tally" and "#proof" lines as tallyd writes them.
--sig random signs the bytes tally-node checks (reactors/ack.h,
tl_cp_message) with an Ed25519 key that is not the control plane's;
none sends no signature."""
import argparse, base64, ctypes, ctypes.util, json, os, struct
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ap = argparse.ArgumentParser()
ap.add_argument("kind", choices=["delivery", "removal"])
ap.add_argument("--node", required=True)
ap.add_argument("--pubkey")
ap.add_argument("--grant")
ap.add_argument("--holder")
ap.add_argument("--version", type=int, default=1)
ap.add_argument("--var", action="append", default=[])
ap.add_argument("--module")
ap.add_argument("--seq", type=int, default=1 << 40)
ap.add_argument("--sig", choices=["none", "random"], default="none")
a = ap.parse_args()

if a.kind == "delivery":
    na = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
    assert na.sodium_init() >= 0
    plain = ("#tally grant=%s holder=%s version=%d\n#proof %s\n" %
             (a.grant, a.holder, a.version, os.urandom(32).hex()))
    plain += "".join(v + "\n" for v in a.var)
    plain = plain.encode()
    pk = bytes.fromhex(a.pubkey)
    out = ctypes.create_string_buffer(len(plain) + 48)
    assert na.crypto_box_seal(out, plain, ctypes.c_ulonglong(len(plain)), pk) == 0
    body = out.raw
    typ = "credential.delivered"
else:
    body = json.dumps({"module": a.module, "node": a.node},
                      separators=(",", ":")).encode()
    typ = "assignment.removed"

headers = {"seq": a.seq}
if a.sig == "random":
    msg = (b"tally-cp/1\0" + a.node.encode() + b"\0" + typ.encode() + b"\0" +
           struct.pack(">Q", a.seq) + body)
    headers["sig"] = Ed25519PrivateKey.generate().sign(msg).hex()
print(json.dumps({"properties": {"type": typ, "headers": headers},
                  "routing_key": "tally.node." + a.node,
                  "payload": base64.b64encode(body).decode(),
                  "payload_encoding": "base64"}))
