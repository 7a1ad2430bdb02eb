// Reward Queue for a Node.js game server: pays the rewards the server list queues for your players. Standard library
// only (global fetch, node:fs); Node.js 18 or newer. Import it into your server, or run it on its own as an example:
//   QUEUE_URL=https://list.example/api/rewards/queue CLAIM_KEY=vck_... node reward-queue.mjs   (see README.md)
//
// Every `next_check` seconds the list asks for, it lists the server's pending entries, naming the players online
// (online-only entries of the others wait until they join); calls `runEntry` for each, then writes the entry's id to
// the executed-ids file before anything else; then acknowledges the ids. An id already in the file is acknowledged
// without running again: a process killed between running and acknowledging pays nothing twice. An id leaves the file
// once an acknowledgement answered it.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

/** Entries per list; a full page is followed by the next one at once. */
const PAGE_SIZE = 50;
/** The API takes at most 100 ids per acknowledgement. */
const MAX_ACK_IDS = 100;
/** Seconds after a player joins before their rewards are listed (joins close together share one list). */
const JOIN_DELAY_SECONDS = 2;

/**
 * A poller of the reward queue.
 * @param {object} options
 * @param {string} options.queueUrl  https://<list>/api/rewards/queue
 * @param {string} options.claimKey  the server's claim key (vck_..., the list's dashboard)
 * @param {string} [options.executedFile]  where the ids run and not yet acknowledged are kept (default executed-ids.json)
 * @param {(entry: object) => Promise<void> | void} options.runEntry  pays one entry: run `entry.commands` in order; throw to stop (the entry is listed again)
 * @param {() => string[] | null} [options.onlinePlayers]  the names of the players online, or null to list every entry
 * @param {number} [options.retrySeconds]  wait after a failed request (default 60)
 * @param {{ set: (fn: () => unknown, ms: number) => unknown, clear: (handle: unknown) => void, now: () => number }} [options.timers]
 * @param {typeof fetch} [options.fetch]
 * @param {(line: string) => void} [options.log]
 */
export function createRewardQueuePoller(options) {
  const {
    queueUrl,
    claimKey,
    executedFile = "executed-ids.json",
    runEntry,
    onlinePlayers = () => null,
    retrySeconds = 60,
    timers = { set: setTimeout, clear: clearTimeout, now: Date.now },
    fetch = globalThis.fetch,
    log = (line) => console.error(`[reward-queue] ${line}`),
  } = options;
  if (!queueUrl || !claimKey) throw new Error("set queueUrl and claimKey (the claim key from the list's dashboard)");
  /** Ids run and not yet acknowledged (kept on disk so a restart never runs them again). */
  const executed = new Set(loadExecuted(executedFile));
  let timer;
  let dueAt = 0;
  let busy = false;
  let stopped = false;

  const save = () => {
    // Written whole and renamed into place: a crash mid-write never leaves half a file.
    writeFileSync(`${executedFile}.tmp`, JSON.stringify([...executed].sort()));
    renameSync(`${executedFile}.tmp`, executedFile);
  };
  const schedule = (seconds) => {
    if (stopped) return;
    if (timer !== undefined) timers.clear(timer);
    dueAt = timers.now() + seconds * 1000;
    timer = timers.set(() => check(), seconds * 1000);
  };
  const isOnline = (player, online) => online === null || online.includes(String(player?.name ?? "").toLowerCase());

  async function request(method, url, body) {
    try {
      const res = await fetch(url, {
        method,
        ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
        signal: AbortSignal.timeout(15_000),
      });
      return { status: res.status, json: await res.json().catch(() => null) };
    } catch {
      // Failure policy: no answer is status 0; the caller retries later and runs nothing it was not listed.
      return { status: 0, json: null };
    }
  }

  /** Lists, runs and acknowledges one page (more while full pages run something); returns the seconds to wait. */
  async function checkOnce() {
    const names = onlinePlayers();
    const online = names === null ? null : names.map((n) => String(n).toLowerCase());
    const key = encodeURIComponent(claimKey);
    const onlineParam = names === null ? "" : `&online=${names.map((n) => encodeURIComponent(n)).join(",")}`;
    const listed = await request("GET", `${queueUrl}?key=${key}&limit=${PAGE_SIZE}${onlineParam}`);
    if (listed.status !== 200 || !Array.isArray(listed.json?.entries)) {
      // Failure policy: retry later - an unanswered, refused or unreadable list runs nothing; the entries stay queued.
      log(`the reward queue answered ${listed.status}; listing again in ${retrySeconds} s`);
      return retrySeconds;
    }
    const toAck = [];
    for (const entry of listed.json.entries) {
      if (typeof entry?.id !== "string") continue;
      if (executed.has(entry.id)) {
        // Run before a restart or a lost acknowledgement: acknowledge only.
        toAck.push(entry.id);
        continue;
      }
      if (entry.online_only !== false && !isOnline(entry.player, online)) continue;
      await runEntry(entry);
      executed.add(entry.id);
      save();
      toAck.push(entry.id);
    }
    for (let i = 0; i < toAck.length; i += MAX_ACK_IDS) {
      const acked = await request("POST", `${queueUrl}/ack?key=${key}`, { ids: toAck.slice(i, i + MAX_ACK_IDS) });
      if (acked.status !== 200 || acked.json === null) {
        // Failure policy: retry later - the ids stay in the file, so the next list acknowledges them without running them.
        log(`the acknowledgement answered ${acked.status}; the entries run are kept and acknowledged later`);
        return retrySeconds;
      }
      for (const id of [...(acked.json.acked ?? []), ...(acked.json.unknown ?? [])]) executed.delete(id);
      save();
    }
    // A full page that ran something may have more behind it: list again at once.
    if (listed.json.entries.length >= PAGE_SIZE && toAck.length > 0) return 1;
    return Math.max(5, Number(listed.json.next_check) || retrySeconds);
  }

  async function check() {
    timer = undefined;
    busy = true;
    let wait = retrySeconds;
    try {
      wait = await checkOnce();
    } catch (error) {
      // Failure policy: retry later - a runEntry that threw leaves its entry unrecorded, so it is listed and run again.
      log(`paying stopped: ${error instanceof Error ? error.message : String(error)}; listing again in ${retrySeconds} s`);
    } finally {
      busy = false;
    }
    schedule(wait);
  }

  return {
    /** Lists at once, then every `next_check`. */
    start: () => schedule(0),
    /** Call when a player joins: their rewards are listed within JOIN_DELAY_SECONDS. */
    playerJoined() {
      if (!busy && dueAt - timers.now() > JOIN_DELAY_SECONDS * 1000) schedule(JOIN_DELAY_SECONDS);
    },
    stop() {
      stopped = true;
      if (timer !== undefined) timers.clear(timer);
    },
  };
}

function loadExecuted(file) {
  if (!existsSync(file)) return [];
  const ids = JSON.parse(readFileSync(file, "utf8"));
  // Failure policy: fail closed - an unreadable file pays nothing until it is fixed (deleting it may pay entries twice).
  if (!Array.isArray(ids)) throw new Error(`${file} is not a JSON list of ids; fix or delete it`);
  return ids;
}

// Run on its own: an example that prints each command. Replace runEntry with your game's way to run one.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const poller = createRewardQueuePoller({
    queueUrl: process.env.QUEUE_URL ?? "",
    claimKey: process.env.CLAIM_KEY ?? "",
    executedFile: process.env.EXECUTED_FILE ?? "executed-ids.json",
    runEntry: (entry) => {
      for (const command of entry.commands) console.log(`COMMAND ${command}`);
    },
  });
  poller.start();
  process.once("SIGTERM", () => poller.stop());
  process.once("SIGINT", () => poller.stop());
}
