// TEST CODE, never shipped: runs docs/plugins/node/reward-queue.mjs under node with virtual timers, the game's
// players and commands emulated, speaking the hosts' line protocol (test/helpers/reward-plugins-run.ts):
// stdin `join <name> <id>`, `leave <name>`, `advance <seconds>`, each answered `READY <seconds>` once everything it
// caused is done; stdout `COMMAND <command>`, `REQUEST <method> <path>` (never the key), `LOG <text>`.
// Run: node node-host.mjs <reward-queue.mjs> ; settings QUEUE_URL, CLAIM_KEY, EXECUTED_FILE, HOST_EXIT_BEFORE_PATH.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const { createRewardQueuePoller } = await import(pathToFileURL(process.argv[2]).href);
const emit = (line) => process.stdout.write(`${line}\n`);

let nowMs = 0;
let seq = 0;
/** Timers due at a virtual time; a timer's callback may return a promise, awaited before the next one. */
const due = new Map();
const timers = {
  set: (fn, ms) => {
    seq += 1;
    due.set(seq, { at: nowMs + ms, fn });
    return seq;
  },
  clear: (handle) => due.delete(handle),
  now: () => nowMs,
};

const exitBeforePath = process.env.HOST_EXIT_BEFORE_PATH;
const loggedFetch = async (url, init) => {
  const { pathname } = new URL(url);
  const method = init?.method ?? "GET";
  if (exitBeforePath && pathname === exitBeforePath) {
    emit(`KILLED before ${method} ${pathname}`);
    process.exit(137);
  }
  emit(`REQUEST ${method} ${pathname}`);
  return fetch(url, init);
};

const online = [];
const poller = createRewardQueuePoller({
  queueUrl: process.env.QUEUE_URL,
  claimKey: process.env.CLAIM_KEY,
  executedFile: process.env.EXECUTED_FILE,
  runEntry: (entry) => {
    for (const command of entry.commands) emit(`COMMAND ${command}`);
  },
  onlinePlayers: () => online.map((p) => p.name),
  timers,
  fetch: loggedFetch,
  log: (line) => emit(`LOG ${line}`),
});

/** Fires the timers due up to `untilMs`, in order, awaiting each. */
async function runUntil(untilMs) {
  for (;;) {
    let next;
    for (const [handle, t] of due) if (t.at <= untilMs && (next === undefined || t.at < next[1].at)) next = [handle, t];
    if (next === undefined) break;
    due.delete(next[0]);
    nowMs = Math.max(nowMs, next[1].at);
    await next[1].fn();
  }
  nowMs = Math.max(nowMs, untilMs);
}

poller.start();
await runUntil(nowMs);
emit(`READY ${nowMs / 1000}`);
for await (const line of createInterface({ input: process.stdin })) {
  const [command, a, b] = line.trim().split(/\s+/);
  if (command === "join") {
    online.push({ name: a, id: b });
    poller.playerJoined();
    await runUntil(nowMs);
  } else if (command === "leave") {
    const at = online.findIndex((p) => p.name === a);
    if (at !== -1) online.splice(at, 1);
  } else if (command === "advance") {
    await runUntil(nowMs + Number(a) * 1000);
  }
  emit(`READY ${nowMs / 1000}`);
}
