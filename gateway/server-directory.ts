import type { ListServerIdsResponse } from "../gen/proto/servers/v1/servers_pb.js";
import type { Logger } from "../services/shared/runtime/log.js";
import { createSpacedSingleFlight } from "./spaced-single-flight.js";

/** How often the gateway reads the servers created since its last read (ListServerIds). */
export const SERVER_DIRECTORY_REFRESH_MS = 60_000;
/** At most one read on demand per this interval (a lookup the global limit would refuse waits for it). */
export const SERVER_DIRECTORY_CATCH_UP_MS = 1_000;
/** Server ids held at most (about 100 bytes each); the one learned longest ago is dropped beyond it. */
export const MAX_KNOWN_SERVER_IDS = 200_000;

/**
 * The server ids the gateway knows to exist. A server id is public (it is in every referral link), but
 * a forger cannot make one up that exists: ids are random uuids the service mints. So the gateway's
 * global failure limit, which bounds the lookups a flood of made-up ids costs, never refuses a lookup
 * for a known id - those are bounded per id by the key cache instead (gateway/signing-key-cache.ts).
 */
export interface ServerDirectory {
  has(serverId: string): boolean;
  /** A key lookup showed the server exists (any answer but unknown server). */
  learn(serverId: string): void;
  /**
   * Reads the servers created since the last read, by a read that started at or after `since` (the
   * clock's ms): the one in flight when that recent, else the next - shared, at most one per
   * SERVER_DIRECTORY_CATCH_UP_MS. Never rejects: a failed read leaves the directory as it was.
   */
  catchUp(since: number): Promise<void>;
  /** Reads every server id now, then the new ones every SERVER_DIRECTORY_REFRESH_MS, until `stop`. */
  start(): void;
  stop(): void;
}

/**
 * Builds the directory over ListServerIds (`listPage`, from a cursor; "" is the oldest server). It learns
 * ids three ways: the full read at start (so a freshly started gateway is not blind), the periodic and
 * on-demand reads of new servers, and every key lookup that found a server. Bounded memory
 * (MAX_KNOWN_SERVER_IDS); servers are never deleted, so an id once known stays true.
 */
export function createServerDirectory(opts: {
  listPage: (cursor: string) => Promise<Pick<ListServerIdsResponse, "serverIds" | "nextCursor" | "more">>;
  log: Logger;
  now?: () => number;
  refreshMs?: number;
  catchUpIntervalMs?: number;
}): ServerDirectory {
  const now = opts.now ?? Date.now;
  const known = new Set<string>();
  let cursor = "";
  let failing = false;
  let timer: NodeJS.Timeout | undefined;
  const reads = createSpacedSingleFlight<void>({ intervalMs: opts.catchUpIntervalMs ?? SERVER_DIRECTORY_CATCH_UP_MS, now });

  const learn = (serverId: string) => {
    known.delete(serverId);
    known.add(serverId);
    if (known.size > MAX_KNOWN_SERVER_IDS) known.delete(known.values().next().value as string);
  };
  const readNew = async () => {
    try {
      for (;;) {
        const page = await opts.listPage(cursor);
        for (const serverId of page.serverIds) learn(serverId);
        cursor = page.nextCursor;
        if (!page.more) break;
      }
      if (failing) opts.log.info({ knownServers: known.size }, "the gateway reads the list of server ids again");
      failing = false;
    } catch (error) {
      // Failure policy: keep what is known and try again at the next read; until then an id learned
      // neither way is treated as made up (the global limit may refuse its lookup). Logged once per outage.
      if (!failing)
        opts.log.warn({ err: error }, "the gateway could not read the list of server ids (ListServerIds); ids not yet known may meet the global failure limit");
      failing = true;
    }
  };
  const catchUp = (since: number) => reads.run(readNew, since);

  return {
    has: (serverId) => known.has(serverId),
    learn,
    catchUp,
    start() {
      if (timer !== undefined) return;
      void catchUp(now());
      timer = setInterval(() => void catchUp(now()), opts.refreshMs ?? SERVER_DIRECTORY_REFRESH_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}
