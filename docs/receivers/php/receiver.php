<?php
// Reward callback receiver for a game server: plain PHP (hash_hmac, hash_equals, a flock'ed file).
// Run: SERVER_ID=<your server id> CALLBACK_SECRET=whsec_... php -S 127.0.0.1:8080 receiver.php   (see README.md)

// The contract's replay window: refuse a signature whose t is more than 300 s from now.
const TOLERANCE_SECONDS = 300;

// One secret, or several separated by commas during a rotation (any of them verifies).
$secrets = array_values(array_filter(array_map('trim', explode(',', (string) getenv('CALLBACK_SECRET')))));
// Your server's id (dashboard, server settings). A valid signature proves the list sent a callback; only its
// server_id proves it is for you: the list signs every server's callbacks, so a callback for another server is
// refused however well it is signed.
$serverId = trim((string) getenv('SERVER_ID'));
// The dedupe store: one paid heart_id per line, appended under an exclusive lock.
$paidFile = getenv('PAID_FILE') ?: __DIR__ . '/paid-hearts.txt';
// TEST ONLY: a fixed "now" in unix seconds, so the frozen test vectors verify. Never set it in production.
$fixedNow = getenv('RECEIVER_NOW');

/** ===== THE PAY HOOK: replace this with your game's reward (a console command, an RCON call, a DB insert). ===== */
function pay_reward(string $heartId, string $username): void
{
    file_put_contents('php://stderr', "PAID $heartId $username\n");
}

function answer(int $status, array $body): void
{
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body);
    exit;
}

/** 'ok' | 'malformed' | 'stale' | 'bad_signature', checked over the raw body bytes. */
function verify(string $rawBody, string $header, array $secrets, int $now): string
{
    $t = null;
    $macs = [];
    foreach (explode(',', $header) as $part) {
        [$k, $v] = array_pad(explode('=', trim($part), 2), 2, '');
        if ($k === 't') $t = $v;
        if ($k === 'v1' && preg_match('/^[0-9a-f]{64}$/', $v)) $macs[] = $v;
    }
    if ($t === null || !ctype_digit($t) || !$macs) return 'malformed';
    $matched = false;
    foreach ($secrets as $secret) {
        $expected = hash_hmac('sha256', $t . '.' . $rawBody, $secret);
        foreach ($macs as $mac) $matched = hash_equals($expected, $mac) || $matched;
    }
    if (!$matched) return 'bad_signature';
    if (abs($now - (int) $t) > TOLERANCE_SECONDS) return 'stale';
    return 'ok';
}

if ($serverId === '') answer(500, ['error' => "set SERVER_ID=<your server's id> (dashboard, server settings): a callback for another server is refused"]);
if (!$secrets) answer(500, ['error' => 'set CALLBACK_SECRET=whsec_... (several comma-separated during a rotation)']);
if ($_SERVER['REQUEST_METHOD'] !== 'POST') answer(405, ['error' => 'POST the reward callback here']);

$rawBody = file_get_contents('php://input'); // the raw bytes, never a re-encoded $_POST
$header = $_SERVER['HTTP_X_SERVICE_SIGNATURE'] ?? '';
$verdict = verify($rawBody, $header, $secrets, $fixedNow !== false && $fixedNow !== '' ? (int) $fixedNow : time());
// Any non-2xx makes the service retry later; never answer 410 here (410 disables your callback).
if ($verdict === 'malformed') answer(400, ['error' => 'missing or malformed X-Service-Signature header']);
if ($verdict !== 'ok') answer(401, ['error' => "signature rejected: $verdict"]);

$event = json_decode($rawBody, true); // parse only after the signature checked out
// Failure policy: a signed body that is not a JSON object is refused (400); the service retries.
if (!is_array($event)) answer(400, ['error' => 'body is not valid JSON']);
// Signed by the list, but for whom? Before anything is paid or recorded.
if (($event['server_id'] ?? null) !== $serverId) answer(403, ['error' => "server_id mismatch: this receiver is for server $serverId"]);
preg_match('/t=(\d+)/', $header, $m);
if (array_key_exists('timestamp', $event) && $event['timestamp'] !== (int) $m[1]) answer(400, ['error' => "timestamp differs from the signature's t"]);
if (($event['event'] ?? null) === 'heart.test') answer(200, ['ok' => true, 'test' => true]); // the dashboard's test: pay nothing
if (($event['event'] ?? null) !== 'heart.counted') answer(200, ['ok' => true, 'ignored' => (string) ($event['event'] ?? '')]);
$heartId = $event['heart_id'] ?? null;
$username = $event['username'] ?? null;
if (!is_string($heartId) || !is_string($username)) answer(400, ['error' => 'heart_id and username are required']);

// php -S and PHP-FPM may run requests at once: the check and the append happen under one lock.
$store = fopen($paidFile, 'c+');
if ($store === false || !flock($store, LOCK_EX)) answer(500, ['error' => 'paid store unavailable, retry later']);
$paid = array_filter(explode("\n", stream_get_contents($store)));
if (in_array($heartId, $paid, true)) answer(200, ['ok' => true, 'duplicate' => true]); // a retry or redelivery: already paid
try {
    pay_reward($heartId, $username);
    fseek($store, 0, SEEK_END);
    fwrite($store, "$heartId\n");
    fflush($store);
} catch (Throwable $error) {
    // Failure policy: not paid or not recorded -> 500, so the service retries the same heart_id later.
    file_put_contents('php://stderr', "pay failed for $heartId: {$error->getMessage()}\n");
    answer(500, ['error' => 'reward failed, retry later']);
}
answer(200, ['ok' => true, 'paid' => true]);
