import { randomUUID } from "node:crypto";

/** The header carrying the correlation id in and out (same name as the internal RPC header). */
export { REQUEST_ID_HEADER } from "../services/shared/values/wire.js";

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request's id: the caller's `X-Request-Id` when it is 1-128 characters of
 * `A-Z a-z 0-9 . _ : -` (so it is safe to log and forward), otherwise a new uuid.
 */
export function resolveRequestId(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && REQUEST_ID_PATTERN.test(value) ? value : randomUUID();
}
