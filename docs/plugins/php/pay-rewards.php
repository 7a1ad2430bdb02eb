<?php
// Reward Queue for web-based game sites: pays the rewards the server list queues for your players. Plain PHP with
// the curl extension, run by cron every minute:
//   * * * * * php /path/to/pay-rewards.php /path/to/rewards-config.php
// The settings, and what paying an entry means on your site, are in the config file (rewards-config.example.php;
// see README.md). Each run: list the server's pending entries (naming the players online, when the config says who
// is), call `run_entry` for each, write the entry's id to executed-ids.json, then acknowledge the ids. An id already
// in executed-ids.json is acknowledged without being paid again: a run killed between paying and acknowledging pays
// nothing twice. A run before the `next_check` the list asked for does nothing; overlapping runs wait for none: the
// second one exits at once.

/** Entries per list; a full page is followed by the next one in the same run. */
const PAGE_SIZE = 50;
/** Most pages one run lists, so a run stays well inside the cron minute. */
const MAX_PAGES_PER_RUN = 20;
/** The API takes at most 100 ids per acknowledgement. */
const MAX_ACK_IDS = 100;

function fail(string $message): void
{
    fwrite(STDERR, "pay-rewards: $message\n");
    exit(1);
}

$configFile = $argv[1] ?? __DIR__ . '/rewards-config.php';
if (!is_file($configFile)) fail("no config file at $configFile (copy rewards-config.example.php)");
$config = require $configFile;
foreach (['queue_url', 'claim_key', 'state_dir'] as $required) {
    if (!is_string($config[$required] ?? null) || $config[$required] === '') fail("set '$required' in $configFile");
}
if (!is_callable($config['run_entry'] ?? null)) fail("set 'run_entry' in $configFile: a function that pays one entry");
$retrySeconds = (int) ($config['retry_seconds'] ?? 60);
$stateDir = rtrim($config['state_dir'], '/');
if (!is_dir($stateDir) && !mkdir($stateDir, 0700, true)) fail("cannot create state_dir $stateDir");
$executedFile = "$stateDir/executed-ids.json";
$nextCheckFile = "$stateDir/next-check.json";
// Test only: a fixed "now" in unix seconds, so a test moves time on. Never set it in production.
$now = getenv('REWARDS_NOW') !== false ? (int) getenv('REWARDS_NOW') : time();

// One run at a time: a run still busy when cron starts the next keeps it from listing the same entries.
$lock = fopen("$stateDir/pay-rewards.lock", 'c');
if ($lock === false || !flock($lock, LOCK_EX | LOCK_NB)) exit(0);

$nextCheckAt = is_file($nextCheckFile) ? (int) (json_decode((string) file_get_contents($nextCheckFile), true)['next_check_at'] ?? 0) : 0;
if ($now < $nextCheckAt) exit(0);

/** Writes a file whole and renames it into place: a run killed mid-write never leaves half a file. */
function write_file(string $path, string $text): void
{
    $temp = "$path.tmp";
    $f = fopen($temp, 'wb');
    if ($f === false || fwrite($f, $text) !== strlen($text) || !fflush($f) || !fsync($f) || !fclose($f) || !rename($temp, $path)) {
        fail("cannot write $path");
    }
}

function read_executed(string $file): array
{
    if (!is_file($file)) return [];
    $ids = json_decode((string) file_get_contents($file), true);
    // Failure policy: fail closed - an unreadable file pays nothing until it is fixed (deleting it may pay entries twice).
    if (!is_array($ids)) fail("$file is not a JSON list of ids; fix or delete it");
    return array_fill_keys($ids, true);
}

function save_executed(string $file, array $executed): void
{
    $ids = array_keys($executed);
    sort($ids);
    write_file($file, json_encode($ids));
}

/** One HTTP request: [status, body]; status 0 when there was no answer. */
function http(string $method, string $url, ?string $body = null): array
{
    $ch = curl_init($url);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_CUSTOMREQUEST => $method, CURLOPT_TIMEOUT => 15, CURLOPT_CONNECTTIMEOUT => 5]);
    if ($body !== null) {
        curl_setopt($ch, CURLOPT_POSTFIELDS, $body);
        curl_setopt($ch, CURLOPT_HTTPHEADER, ['Content-Type: application/json']);
    }
    $answer = curl_exec($ch);
    $status = $answer === false ? 0 : (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
    curl_close($ch);
    return [$status, $answer === false ? '' : $answer];
}

$executed = read_executed($executedFile);
$key = rawurlencode($config['claim_key']);
$onlinePlayers = is_callable($config['online_players'] ?? null) ? ($config['online_players'])() : null;
$online = is_array($onlinePlayers) ? array_map('strtolower', array_map('strval', $onlinePlayers)) : null;
$nextCheck = $retrySeconds;

for ($page = 0; $page < MAX_PAGES_PER_RUN; $page++) {
    $url = $config['queue_url'] . '?key=' . $key . '&limit=' . PAGE_SIZE;
    if ($online !== null) $url .= '&online=' . implode(',', array_map('rawurlencode', $onlinePlayers));
    [$status, $body] = http('GET', $url);
    $listed = json_decode($body, true);
    if ($status !== 200 || !is_array($listed) || !is_array($listed['entries'] ?? null)) {
        // Failure policy: retry later - an unanswered, refused or unreadable list pays nothing; the entries stay queued.
        fwrite(STDERR, "pay-rewards: the reward queue answered $status; listing again in $retrySeconds s\n");
        $nextCheck = $retrySeconds;
        break;
    }
    $nextCheck = max(5, (int) ($listed['next_check'] ?? $retrySeconds));
    $toAck = [];
    foreach ($listed['entries'] as $entry) {
        $id = $entry['id'] ?? null;
        if (!is_string($id)) continue;
        if (isset($executed[$id])) {
            // Paid before a kill or a lost acknowledgement: acknowledge only.
            $toAck[] = $id;
            continue;
        }
        $name = strtolower((string) ($entry['player']['name'] ?? ''));
        if (($entry['online_only'] ?? true) && $online !== null && !in_array($name, $online, true)) continue;
        ($config['run_entry'])($entry);
        $executed[$id] = true;
        save_executed($executedFile, $executed);
        $toAck[] = $id;
    }
    foreach (array_chunk($toAck, MAX_ACK_IDS) as $batch) {
        [$status, $body] = http('POST', $config['queue_url'] . '/ack?key=' . $key, json_encode(['ids' => $batch]));
        $answer = json_decode($body, true);
        if ($status !== 200 || !is_array($answer)) {
            // Failure policy: retry later - the ids stay in executed-ids.json, so the next run acknowledges them without paying them.
            fwrite(STDERR, "pay-rewards: the acknowledgement answered $status; the entries paid are kept and acknowledged later\n");
            $nextCheck = $retrySeconds;
            break 2;
        }
        foreach (array_merge($answer['acked'] ?? [], $answer['unknown'] ?? []) as $done) unset($executed[$done]);
        save_executed($executedFile, $executed);
    }
    // A full page that paid something may have more behind it: list again now; otherwise wait for next_check.
    if (count($listed['entries']) < PAGE_SIZE || count($toAck) === 0) break;
}

write_file($nextCheckFile, json_encode(['next_check_at' => $now + $nextCheck]));
