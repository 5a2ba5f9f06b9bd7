#!/usr/bin/python3
"""pika_login.py - a consumer's login with pika, the RabbitMQ client most
Python services use, from the url tally delivers.

Usage: /usr/bin/python3 pika_login.py URL

URL is amqps://USER@HOST:PORT/VHOST?cacertfile=F&certfile=F&keyfile=F
&auth_mechanism=external, as the rabbitmq driver composes it for a login
by certificate.  pika takes no client certificate from a URL, so its
parts go into ConnectionParameters: TLS verifying the broker against
cacertfile, the certificate and key presented, ExternalCredentials (the
broker takes the user from the certificate).  Declares a queue, publishes
and reads one message back on the vhost; exit 0 then, 1 when the broker
refused the login or the vhost (its reason printed), 2 on usage.

Debian's python3-pika (tools/deps.sh) lives under /usr/bin/python3.
"""
import ssl
import sys
from urllib.parse import parse_qs, unquote, urlsplit

import pika


def main():
    if len(sys.argv) != 2:
        print("usage: pika_login.py URL", file=sys.stderr)
        return 2
    u = urlsplit(sys.argv[1])
    q = {k: v[0] for k, v in parse_qs(u.query).items()}
    if u.scheme != "amqps" or q.get("auth_mechanism") != "external":
        print("not an amqps url with auth_mechanism=external", file=sys.stderr)
        return 2
    ctx = ssl.create_default_context(cafile=q["cacertfile"])
    ctx.load_cert_chain(q["certfile"], q["keyfile"])
    params = pika.ConnectionParameters(
        host=u.hostname, port=u.port or 5671,
        virtual_host=unquote(u.path[1:]),
        ssl_options=pika.SSLOptions(ctx, u.hostname),
        credentials=pika.credentials.ExternalCredentials(),
        connection_attempts=1, socket_timeout=10)
    try:
        conn = pika.BlockingConnection(params)
    except pika.exceptions.AMQPError as e:
        print("refused: %r" % (e,))
        return 1
    ch = conn.channel()
    q_name = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q_name, b"ping")
    _, _, body = ch.basic_get(q_name, auto_ack=True)
    conn.close()
    if body != b"ping":
        print("read back %r" % (body,))
        return 1
    print("in as %s on %s" % (unquote(u.username or ""), unquote(u.path[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
