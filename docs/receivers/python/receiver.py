"""Reward callback receiver for a game server: Python 3, standard library only (http.server, hmac, sqlite3).

Run: CALLBACK_SECRET=whsec_... PORT=8080 python3 receiver.py   (see README.md)
"""
import hashlib
import hmac
import json
import os
import re
import sqlite3
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

# The contract's replay window: refuse a signature whose t is more than 300 s from now.
TOLERANCE_SECONDS = 300
# One secret, or several separated by commas during a rotation (any of them verifies).
SECRETS = [s.strip() for s in os.environ.get("CALLBACK_SECRET", "").split(",") if s.strip()]
PORT = int(os.environ.get("PORT", "8080"))
# The dedupe store: an SQLite file of paid heart ids (survives restarts).
PAID_DB = os.environ.get("PAID_DB", "paid-hearts.sqlite3")
# TEST ONLY: a fixed "now" in unix seconds, so the frozen test vectors verify. Never set it in production.
FIXED_NOW = os.environ.get("RECEIVER_NOW")

if not SECRETS:
    sys.exit("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)")

db = sqlite3.connect(PAID_DB, isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS paid (heart_id TEXT PRIMARY KEY, username TEXT NOT NULL, paid_at INTEGER NOT NULL)")


def pay_reward(heart_id: str, username: str) -> None:
    """===== THE PAY HOOK: replace this with your game's reward (a console command, an RCON call). ====="""
    print(f"PAID {heart_id} {username}", flush=True)


def verify(raw_body: bytes, header: str) -> str:
    """'ok' | 'malformed' | 'stale' | 'bad_signature', checked over the raw body bytes."""
    pairs = [p.strip().partition("=") for p in header.split(",")]
    t = next((v for k, _, v in pairs if k == "t"), "")
    macs = [v for k, _, v in pairs if k == "v1" and re.fullmatch(r"[0-9a-f]{64}", v)]
    if not t.isdigit() or not macs:
        return "malformed"
    now = int(FIXED_NOW) if FIXED_NOW else int(time.time())
    matched = False
    for secret in SECRETS:
        expected = hmac.new(secret.encode(), t.encode() + b"." + raw_body, hashlib.sha256).hexdigest()
        for mac in macs:
            matched |= hmac.compare_digest(mac, expected)
    if not matched:
        return "bad_signature"
    if abs(now - int(t)) > TOLERANCE_SECONDS:
        return "stale"
    return "ok"


class Handler(BaseHTTPRequestHandler):
    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.answer(405, {"error": "POST the reward callback here"})

    def do_POST(self) -> None:
        raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        header = self.headers.get("X-Service-Signature") or ""
        verdict = verify(raw_body, header)
        # Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
        if verdict == "malformed":
            return self.answer(400, {"error": "missing or malformed X-Service-Signature header"})
        if verdict != "ok":
            return self.answer(401, {"error": f"signature rejected: {verdict}"})
        try:
            event = json.loads(raw_body)  # parse only after the signature checked out
        except ValueError:
            # Failure policy: a signed body that is not JSON is refused (400); the service retries.
            return self.answer(400, {"error": "body is not valid JSON"})
        t = int(re.search(r"t=(\d+)", header).group(1))
        if "timestamp" in event and event["timestamp"] != t:
            return self.answer(400, {"error": "timestamp differs from the signature's t"})
        if event.get("event") == "heart.test":
            return self.answer(200, {"ok": True, "test": True})  # the dashboard's test: pay nothing
        if event.get("event") != "heart.counted":
            return self.answer(200, {"ok": True, "ignored": str(event.get("event"))})
        heart_id, username = event.get("heart_id"), event.get("username")
        if not isinstance(heart_id, str) or not isinstance(username, str):
            return self.answer(400, {"error": "heart_id and username are required"})
        if db.execute("SELECT 1 FROM paid WHERE heart_id = ?", (heart_id,)).fetchone():
            return self.answer(200, {"ok": True, "duplicate": True})  # a retry or redelivery: already paid
        try:
            pay_reward(heart_id, username)
            db.execute("INSERT INTO paid VALUES (?, ?, ?)", (heart_id, username, int(time.time())))
        except Exception as error:  # noqa: BLE001
            # Failure policy: not paid or not recorded -> 500, so the service retries the same heart_id later.
            print(f"pay failed for {heart_id}: {error}", file=sys.stderr, flush=True)
            return self.answer(500, {"error": "reward failed, retry later"})
        return self.answer(200, {"ok": True, "paid": True})

    def log_message(self, format: str, *args) -> None:  # keep stdout for PAID lines
        sys.stderr.write("%s %s\n" % (self.address_string(), format % args))


server = HTTPServer(("127.0.0.1", PORT), Handler)  # one request at a time: no double pay between check and insert
print(f"listening on http://127.0.0.1:{PORT}", flush=True)
server.serve_forever()
