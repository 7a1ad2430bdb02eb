<?php
// Settings of pay-rewards.php. Copy to rewards-config.php, outside your web root (it holds the claim key), and fill in.
return [
    // The list's reward queue URL and this server's claim key (the list's dashboard, server settings).
    'queue_url' => 'https://list.example/api/rewards/queue',
    'claim_key' => 'vck_...',

    // Where the script keeps the ids it paid until they are acknowledged, and when to list next. Not web-readable.
    'state_dir' => __DIR__ . '/reward-state',

    // Seconds to wait after the list did not answer (optional, default 60).
    'retry_seconds' => 60,

    // Who is in the game now, by character or account name, or null when your game has no "online" (then every entry
    // is paid at once, online-only or not). Online-only entries of players not named wait until they are.
    'online_players' => function (): ?array {
        // For example: return $pdo->query("SELECT name FROM characters WHERE online = 1 LIMIT 200")->fetchAll(PDO::FETCH_COLUMN);
        return null;
    },

    // Pays one entry: run its commands in order. $entry['player'] has the name and ids ('name', 'steam_id',
    // 'discord_id', 'minecraft_uuid', 'account_id'), $entry['reason'] says why (vote, streak, milestone, ...).
    // Throw to stop: the entry is not recorded as paid and is listed again next run.
    'run_entry' => function (array $entry): void {
        foreach ($entry['commands'] as $command) {
            // For example, a line in your game's mail table:
            // $pdo->prepare('INSERT INTO mail (recipient, command) VALUES (?, ?)')->execute([$entry['player']['name'], $command]);
            echo "reward for {$entry['player']['name']}: $command\n";
        }
    },
];
