#!/usr/bin/env python3
"""forge_ack.py: acknowledgements as tally-node sends them, forged on
purpose for the tests (reactors/ack.h has the format).

  forge_ack.py --node N --grant G --holder H --version V
               [--key FILE | --random-key] [--password PW | --no-proof]
               [--count N]

prints the JSON message for tally.acks (N of them, one a line, each
with its own nonce and, with --random-key, its own key).  --key signs with the node's key
file (96 bytes: X25519 secret, then libsodium's Ed25519 secret = seed ||
public); --random-key with a key that is no node's.  --password keys the
MAC with the proof key of that password; --no-proof leaves sig and mac
out."""
import argparse, hashlib, json, os, struct
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ap = argparse.ArgumentParser()
ap.add_argument("--node", required=True)
ap.add_argument("--grant", required=True)
ap.add_argument("--holder", required=True)
ap.add_argument("--version", type=int, required=True)
ap.add_argument("--key")
ap.add_argument("--random-key", action="store_true")
ap.add_argument("--password")
ap.add_argument("--no-proof", action="store_true")
ap.add_argument("--count", type=int, default=1)
a = ap.parse_args()


def one():
    nonce = os.urandom(16)
    msg = (b"tally-ack/1\0" + a.grant.encode() + b"\0" + a.holder.encode() +
           b"\0" + struct.pack(">Q", a.version) + nonce)
    out = {"node": a.node, "grant": a.grant, "holder": a.holder,
           "version": a.version, "nonce": nonce.hex()}
    if not a.no_proof:
        if a.random_key:
            sk = Ed25519PrivateKey.generate()
        else:
            raw = open(a.key, "rb").read()
            sk = Ed25519PrivateKey.from_private_bytes(raw[32:64])
        out["sig"] = sk.sign(msg).hex()
        pkey = hashlib.blake2b(a.password.encode(), key=b"tally-ack-proof1",
                               digest_size=32).digest()
        out["mac"] = hashlib.blake2b(msg, key=pkey, digest_size=32).hexdigest()
    print(json.dumps(out, separators=(",", ":")))


for _ in range(a.count):
    one()
