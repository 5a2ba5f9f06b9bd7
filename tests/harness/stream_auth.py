#!/usr/bin/env python3
"""stream_auth.py: the replication stream's authenticators of one event,
computed apart from tally from what core/secret.h documents, for tests
that publish a genuine event's headers onto another body.

  stream_auth.py KEYFILE SEQ EPOCH HASHHEX BODYFILE

prints two hex MACs: format 1 (HMAC-SHA-512-256 of the chain hash) and
format 2 (of the domain tag "tally/stream-auth" and its NUL, the format
byte 2, seq and epoch as big-endian 64-bit integers, the chain hash, the
body's length as a big-endian 64-bit integer, the body), both under the
master key's subkey 1 of context "tlstream" (libsodium's crypto_kdf:
BLAKE2b keyed with the master key, salt = subkey id little-endian and
eight zero bytes, personal = context and eight zero bytes)."""
import hashlib, hmac, struct, sys

keyfile, seq, epoch, hhex, bodyfile = sys.argv[1:6]
master = open(keyfile, "rb").read()
assert len(master) == 32, "a master key is 32 bytes"
sub = hashlib.blake2b(b"", digest_size=32, key=master,
                      salt=struct.pack("<Q", 1) + b"\0" * 8,
                      person=b"tlstream" + b"\0" * 8).digest()
h = bytes.fromhex(hhex)
body = open(bodyfile, "rb").read()

def mac(msg):
    return hmac.new(sub, msg, hashlib.sha512).digest()[:32].hex()

v2 = (b"tally/stream-auth\0" + bytes([2]) + struct.pack(">QQ", int(seq), int(epoch)) +
      h + struct.pack(">Q", len(body)) + body)
print(mac(h), mac(v2))
