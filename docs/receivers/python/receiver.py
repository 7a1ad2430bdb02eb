"""Reward callback receiver for a game server: Python 3, standard library only (http.server, hmac, sqlite3).

Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... PORT=8080 python3 receiver.py   (see README.md)
Or, with no secret at all (needs `cryptography` for ed25519):
     SERVER_ID=<your server id> VERIFY=public-key WEBHOOK_KEYS_URL=https://<list>/.well-known/webhook-keys.json python3 receiver.py
"""
import base64
import hashlib
import hmac
import json
import os
import re
import sqlite3
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

# The contract's replay window: refuse a signature whose t is more than 300 s from now.
TOLERANCE_SECONDS = 300
# One secret, or several separated by commas during a rotation (any of them verifies).
SECRETS = [s.strip() for s in os.environ.get("CALLBACK_SECRET", "").split(",") if s.strip()]
PORT = int(os.environ.get("PORT", "8080"))
# Your server's id (dashboard, server settings). A valid signature proves the list sent a callback; only its
# server_id proves it is for you: the list signs every server's callbacks (with one key pair for public-key
# signatures), so a callback for another server is refused however well it is signed.
SERVER_ID = os.environ.get("SERVER_ID", "").strip()
# The dedupe store: an SQLite file of paid heart ids (survives restarts).
PAID_DB = os.environ.get("PAID_DB", "paid-hearts.sqlite3")
# TEST ONLY: a fixed "now" in unix seconds, so the frozen test vectors verify. Never set it in production.
FIXED_NOW = os.environ.get("RECEIVER_NOW")
# Which signature to check:
# - "service" (default): X-Service-Signature, HMAC with CALLBACK_SECRET; every callback carries it;
# - "standard-webhooks": webhook-id/-timestamp/-signature `v1,` entries, HMAC keyed by the base64-decoded
#   part of CALLBACK_SECRET (turn "Standard Webhooks" on for your server);
# - "public-key": the `v1a,` ed25519 entries, checked with the list's keys from WEBHOOK_KEYS_URL; no secret
#   (turn "public-key signatures" on for your server; needs the `cryptography` package).
VERIFY = os.environ.get("VERIFY", "service")
# For VERIFY=public-key: https://<list>/.well-known/webhook-keys.json
WEBHOOK_KEYS_URL = os.environ.get("WEBHOOK_KEYS_URL", "")
# Refetch the keys at most this often when no cached key verifies (a rotation may be newer than our copy).
KEYS_REFETCH_SECONDS = 60

if VERIFY not in ("service", "standard-webhooks", "public-key"):
    sys.exit("VERIFY is service (default), standard-webhooks or public-key")
if not SERVER_ID:
    sys.exit("set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused")
if VERIFY == "public-key" and not WEBHOOK_KEYS_URL:
    sys.exit("set WEBHOOK_KEYS_URL=https://<list>/.well-known/webhook-keys.json")
if VERIFY != "public-key" and not SECRETS:
    sys.exit("set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)")


def standard_webhooks_key(secret: str) -> bytes:
    """The Standard Webhooks HMAC key: the base64-decoded part of whsec_<base64>."""
    return base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret, validate=True)


if VERIFY == "standard-webhooks":
    try:
        STANDARD_KEYS = [standard_webhooks_key(s) for s in SECRETS]
    except ValueError:
        # Failure policy: a secret that is not whsec_<base64> stops the receiver at start, never mid-request.
        sys.exit("CALLBACK_SECRET: each secret must be whsec_<base64>, exactly as the dashboard shows it")

db = sqlite3.connect(PAID_DB, isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS paid (heart_id TEXT PRIMARY KEY, username TEXT NOT NULL, paid_at INTEGER NOT NULL)")


def pay_reward(heart_id: str, username: str) -> None:
    """===== THE PAY HOOK: replace this with your game's reward (a console command, an RCON call). ====="""
    print(f"PAID {heart_id} {username}", flush=True)


def verify_service(raw_body: bytes, headers) -> tuple:
    """X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>], HMAC_SHA256(secret, "<t>.<raw body>")."""
    pairs = [p.strip().partition("=") for p in (headers.get("X-Service-Signature") or "").split(",")]
    t = next((v for k, _, v in pairs if k == "t"), "")
    macs = [v for k, _, v in pairs if k == "v1" and re.fullmatch(r"[0-9a-f]{64}", v)]
    if not t.isdigit() or not macs:
        return "malformed", 0
    matched = False
    for secret in SECRETS:
        expected = hmac.new(secret.encode(), t.encode() + b"." + raw_body, hashlib.sha256).hexdigest()
        for mac in macs:
            matched |= hmac.compare_digest(mac, expected)
    return ("ok" if matched else "bad_signature"), int(t)


def standard_headers(raw_body: bytes, headers, prefix: str):
    """(t, "<id>.<t>.<raw body>", [signature bytes of the `prefix` entries]) from the webhook-* headers, or None."""
    webhook_id = headers.get("webhook-id") or ""
    t = headers.get("webhook-timestamp") or ""
    signatures = []
    for entry in (headers.get("webhook-signature") or "").split(" "):
        if entry.startswith(prefix):
            try:
                signatures.append(base64.b64decode(entry[len(prefix):], validate=True))
            except ValueError:
                pass  # Failure policy: an entry that is not base64 verifies nothing; the others may.
    if not webhook_id or not t.isdigit() or not signatures:
        return None
    return int(t), f"{webhook_id}.{t}.".encode() + raw_body, signatures


def verify_standard_webhooks(raw_body: bytes, headers) -> tuple:
    """Standard Webhooks `v1,`: base64 HMAC_SHA256(base64-decoded part of whsec_..., "<id>.<t>.<raw body>")."""
    found = standard_headers(raw_body, headers, "v1,")
    if found is None:
        return "malformed", 0
    t, content, signatures = found
    matched = False
    for key in STANDARD_KEYS:
        expected = hmac.new(key, content, hashlib.sha256).digest()
        for signature in signatures:
            matched |= hmac.compare_digest(signature, expected)
    return ("ok" if matched else "bad_signature"), t


public_keys = []  # the list's published ed25519 keys
refetched_at = 0.0  # when a callback no key verified last fetched the keys again


def fetch_keys() -> None:
    """Reads WEBHOOK_KEYS_URL into public_keys (Ed25519 entries only)."""
    global public_keys
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        with urllib.request.urlopen(WEBHOOK_KEYS_URL, timeout=5) as res:
            keys = json.load(res)["keys"]
        public_keys = [
            Ed25519PublicKey.from_public_bytes(base64.b64decode(k["public_key"][len("whpk_"):]))
            for k in keys
            if k.get("alg") == "Ed25519" and k.get("public_key", "").startswith("whpk_")
        ]
    except Exception as error:  # noqa: BLE001
        # Failure policy: keep the keys we had; a callback no key verifies is refused and retried by the service.
        print(f"could not fetch {WEBHOOK_KEYS_URL}: {error}", file=sys.stderr, flush=True)


def verify_public_key(raw_body: bytes, headers) -> tuple:
    """Standard Webhooks `v1a,`: ed25519 over "<id>.<t>.<raw body>" with any published key; refetches once a minute at most."""
    global refetched_at
    from cryptography.exceptions import InvalidSignature

    found = standard_headers(raw_body, headers, "v1a,")
    if found is None:
        return "malformed", 0
    t, content, signatures = found

    def matches() -> bool:
        for key in public_keys:
            for signature in signatures:
                try:
                    key.verify(signature, content)
                    return True
                except InvalidSignature:
                    pass  # Failure policy: this key or entry does not verify; try the next.
        return False

    if not matches() and time.time() - refetched_at >= KEYS_REFETCH_SECONDS:
        refetched_at = time.time()  # at most once a minute, so forged callbacks cannot make us hammer the list
        fetch_keys()
    return ("ok" if matches() else "bad_signature"), t


def verify(raw_body: bytes, headers) -> tuple:
    """('ok' | 'malformed' | 'stale' | 'bad_signature', t), checked over the raw body bytes."""
    if VERIFY == "public-key":
        verdict, t = verify_public_key(raw_body, headers)
    elif VERIFY == "standard-webhooks":
        verdict, t = verify_standard_webhooks(raw_body, headers)
    else:
        verdict, t = verify_service(raw_body, headers)
    now = int(FIXED_NOW) if FIXED_NOW else int(time.time())
    if verdict == "ok" and abs(now - t) > TOLERANCE_SECONDS:
        return "stale", t
    return verdict, t


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
        verdict, t = verify(raw_body, self.headers)
        # Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
        if verdict == "malformed":
            which = "X-Service-Signature" if VERIFY == "service" else "webhook-*"
            return self.answer(400, {"error": f"missing or malformed {which} headers"})
        if verdict != "ok":
            return self.answer(401, {"error": f"signature rejected: {verdict}"})
        try:
            event = json.loads(raw_body)  # parse only after the signature checked out
        except ValueError:
            # Failure policy: a signed body that is not JSON is refused (400); the service retries.
            return self.answer(400, {"error": "body is not valid JSON"})
        # Signed by the list, but for whom? Before anything is paid or recorded.
        if not isinstance(event, dict) or event.get("server_id") != SERVER_ID:
            return self.answer(403, {"error": f"server_id mismatch: this receiver is for server {SERVER_ID}"})
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


if VERIFY == "public-key":
    fetch_keys()
server = HTTPServer(("127.0.0.1", PORT), Handler)  # one request at a time: no double pay between check and insert
print(f"listening on http://127.0.0.1:{PORT} (verifying {VERIFY}, server {SERVER_ID})", flush=True)
server.serve_forever()
