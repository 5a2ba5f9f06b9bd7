#!/usr/bin/python3
"""A real browser for the tests: Debian's Chromium, headless, driven
over the DevTools protocol (python3-websocket).

Usage:
  cdp.py start DIR PORT    chromium --headless on 127.0.0.1:PORT (DevTools),
                           profile in DIR, pid in DIR/chromium.pid; waits
                           (30 s) for its first page
  cdp.py open PORT URL     navigates the page to URL, waits for the load
  cdp.py eval PORT EXPR    evaluates EXPR in the page (awaiting a promise),
                           prints the value as JSON; exit 1 on an exception
  cdp.py wait PORT EXPR S  evaluates EXPR every 50 ms until it is true, at
                           most S seconds; prints the seconds it took, exit
                           1 (and the last value) when it never was
  cdp.py shot PORT FILE    a PNG of the page, full height
  cdp.py stop DIR          ends it
"""
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import websocket


def die(msg):
    print("cdp.py: " + msg, file=sys.stderr)
    sys.exit(1)


def page_ws(port):
    with urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port,
                                timeout=5) as r:
        targets = json.load(r)
    for t in targets:
        if t.get("type") == "page":
            return t["webSocketDebuggerUrl"]
    die("no page in the browser")


class Page:
    def __init__(self, port):
        self.ws = websocket.create_connection(page_ws(port), timeout=30,
                                              suppress_origin=True)
        self.n = 0

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method,
                                 "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.n:
                if "error" in m:
                    die("%s: %s" % (method, m["error"]))
                return m["result"]

    def wait_event(self, name, secs):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            self.ws.settimeout(max(0.1, end - time.monotonic()))
            try:
                m = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                break
            if m.get("method") == name:
                return m
        die("no %s within %s s" % (name, secs))

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr,
                      awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            die("exception: %s" % json.dumps(r["exceptionDetails"])[:500])
        return r["result"].get("value")


def main(argv):
    if len(argv) < 3:
        die(__doc__)
    cmd = argv[1]
    if cmd == "start":
        d, port = argv[2], argv[3]
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(d, "chromium.log"), "w")
        p = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=" + port,
             "--user-data-dir=" + os.path.join(d, "profile"),
             "--window-size=1280,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)
        with open(os.path.join(d, "chromium.pid"), "w") as f:
            f.write(str(p.pid))
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if p.poll() is not None:
                die("chromium exited (%d): see %s/chromium.log" %
                    (p.returncode, d))
            try:
                page_ws(port)
                return 0
            except Exception:
                time.sleep(0.2)
        die("chromium did not answer on %s within 30 s" % port)
    if cmd == "stop":
        try:
            with open(os.path.join(argv[2], "chromium.pid")) as f:
                pid = int(f.read())
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
        return 0
    pg = Page(argv[2])
    if cmd == "open":
        pg.call("Page.enable")
        pg.call("Page.navigate", url=argv[3])
        pg.wait_event("Page.loadEventFired", 30)
        return 0
    if cmd == "eval":
        print(json.dumps(pg.eval(argv[3])))
        return 0
    if cmd == "wait":
        t0 = time.monotonic()
        end = t0 + float(argv[4])
        v = None
        while time.monotonic() < end:
            v = pg.eval(argv[3])
            if v is True:
                print("%.2f" % (time.monotonic() - t0))
                return 0
            time.sleep(0.05)
        print(json.dumps(v))
        return 1
    if cmd == "shot":
        h = pg.eval("document.documentElement.scrollHeight")
        pg.call("Emulation.setDeviceMetricsOverride", width=1280,
                height=min(int(h or 1000), 8000), deviceScaleFactor=1,
                mobile=False)
        r = pg.call("Page.captureScreenshot", format="png")
        with open(argv[3], "wb") as f:
            f.write(base64.b64decode(r["data"]))
        return 0
    die("unknown command " + cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
