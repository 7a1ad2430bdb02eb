<?php
// Vote reward claim page for an MMO CMS site: plain PHP, over the list's check/claim API (no callback needed).
// The player presses "Claim my vote reward"; the page claims the vote with the server's claim key and the
// player's account id (or username), and pays on "1" only.
// Run: CLAIM_URL=https://list.example/api/votes CLAIM_KEY=vck_... php -S 127.0.0.1:8080 claim.php   (see README.md)

// The list's check/claim endpoint (the gateway's /api/votes) and this server's claim key (dashboard).
$claimUrl = (string) getenv('CLAIM_URL');
$claimKey = (string) getenv('CLAIM_KEY');

/**
 * ===== WHO IS CLAIMING: replace this with your CMS's logged-in account (its session), so a player claims for
 * their own account only. This example takes the form's `accountid` or `username`. =====
 * Returns ['accountid' => '...'] or ['username' => '...'], or null.
 */
function current_player(): ?array
{
    foreach (['accountid', 'username'] as $kind) {
        $value = trim((string) ($_POST[$kind] ?? ''));
        if ($value !== '') return [$kind => $value];
    }
    return null;
}

/** ===== THE PAY HOOK: replace this with your game's reward (an insert into the game database's mail table, a SOAP call). ===== */
function pay_vote_reward(array $player): void
{
    file_put_contents('php://stderr', 'PAID claim ' . key($player) . ' ' . current($player) . "\n");
}

function page(int $status, string $message): void
{
    http_response_code($status);
    header('Content-Type: text/html; charset=utf-8');
    echo '<!doctype html><title>Vote reward</title><p id="result">' . htmlspecialchars($message) . '</p>'
        . '<form method="post"><label>Account id <input name="accountid"></label> '
        . '<button>Claim my vote reward</button></form>';
    exit;
}

/** The claim's one-digit answer ("0", "1", "2"), or null when there was no usable answer. */
function claim(string $claimUrl, string $claimKey, array $player): ?string
{
    // http_build_query encodes a space in a username as "+", which the list reads as a space.
    $url = $claimUrl . '?' . http_build_query(['action' => 'claim', 'key' => $claimKey] + $player);
    $context = stream_context_create(['http' => ['method' => 'GET', 'timeout' => 5, 'ignore_errors' => true]]);
    $body = @file_get_contents($url, false, $context);
    // Failure policy: no answer, or a status other than 200 (a 429 too), pays nothing; the player tries again later.
    if ($body === false || !isset($http_response_header[0]) || !preg_match('#^HTTP/\S+ 200 #', $http_response_header[0])) return null;
    $answer = trim($body);
    return in_array($answer, ['0', '1', '2'], true) ? $answer : null;
}

if ($claimUrl === '' || $claimKey === '') page(500, 'Set CLAIM_URL and CLAIM_KEY.');
if ($_SERVER['REQUEST_METHOD'] !== 'POST') page(200, 'Voted for us? Claim your reward here.');
$player = current_player();
if ($player === null) page(400, 'Enter your account id.');

$answer = claim($claimUrl, $claimKey, $player);
if ($answer === '1') {
    // "1": this request claimed the vote, and only this one can get a "1" for it: pay.
    pay_vote_reward($player);
    page(200, 'Thanks for voting! Your reward has been sent to your account.');
}
if ($answer === '2') page(200, 'You have already claimed your reward for this vote.');
if ($answer === '0') page(200, 'No vote found for your account: vote for the server first.');
page(503, 'The vote list did not answer; try again in a minute.');
