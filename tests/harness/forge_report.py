#!/usr/bin/env python3
"""forge_report.py: an agent's signed report as tally-node sends it on
tally.acks, forged on purpose for the tests (reactors/ack.h,
tl_report_message: "tally-report/1" NUL NODE NUL JSON, signed with the
node's Ed25519 key).

  forge_report.py --node N (--key FILE | --random-key)
                  --held GRANT=HOLDER=VERSION [--held ...] [--since NS]
                  [--csr GRANT=HOLDER=VERSION=FILE ...]

prints the JSON message {"node","report","sig"}.  --key signs with the
node's key file (X25519 secret, then libsodium's Ed25519 secret = seed
|| public); --random-key with a key that is no node's.  Each --held is
one entry of the report's "held", reloaded and acknowledged.  --since
(default: now) is the report's "since" in ns, as tally-node sets it
when its content changes.  Each --csr is one entry of the report's
"csrs": a certificate signing request (the PEM in FILE) for a version
awaiting its certificate, as tally-node asks for one."""
import argparse, json, time
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ap = argparse.ArgumentParser()
ap.add_argument("--node", required=True)
ap.add_argument("--key")
ap.add_argument("--random-key", action="store_true")
ap.add_argument("--held", action="append", default=[])
ap.add_argument("--since", type=int, default=time.time_ns())
ap.add_argument("--csr", action="append", default=[])
a = ap.parse_args()

held = []
for h in a.held:
    g, holder, v = h.split("=")
    held.append({"acked": True, "grant": g, "holder": holder,
                 "reloaded": True, "version": int(v)})
doc = {"agent": "tally-node forged", "held": held, "since": a.since}
if a.csr:
    doc["csrs"] = []
    for c in a.csr:
        g, holder, v, f = c.split("=", 3)
        doc["csrs"].append({"grant": g, "holder": holder, "version": int(v),
                            "csr": open(f).read()})
report = json.dumps(doc, separators=(",", ":"), sort_keys=True)
if a.random_key:
    sk = Ed25519PrivateKey.generate()
else:
    sk = Ed25519PrivateKey.from_private_bytes(open(a.key, "rb").read()[32:64])
msg = b"tally-report/1\0" + a.node.encode() + b"\0" + report.encode()
print(json.dumps({"node": a.node, "report": report, "sig": sk.sign(msg).hex()},
                 separators=(",", ":")))
