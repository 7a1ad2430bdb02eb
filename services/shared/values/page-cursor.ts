import { DomainError } from "./domain-error.js";
import { isUuid } from "./ids.js";

/**
 * The one opaque cursor of keyset pages ordered by (created_at, id): the pull lists
 * (services/delivery/rpc/pull-store.ts) and ListServerIds (services/servers/list-server-ids.ts).
 */

/** A page position: after this (created_at, id). */
export interface PageCursor {
  createdAt: Date;
  id: string;
}

/** Opaque cursor text: base64url of `<created_at ISO>|<id>`. */
export function encodePageCursor(cursor: PageCursor): string {
  return Buffer.from(`${cursor.createdAt.toISOString()}|${cursor.id}`, "utf8").toString("base64url");
}

/** Parses a cursor; throws invalid_argument `cursor is not valid` for anything else. */
export function decodePageCursor(text: string): PageCursor {
  const [iso = "", id = ""] = Buffer.from(text, "base64url").toString("utf8").split("|");
  const createdAt = new Date(iso);
  if (!isUuid(id) || Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== iso) {
    throw new DomainError("invalid_argument", "cursor is not valid");
  }
  return { createdAt, id };
}
