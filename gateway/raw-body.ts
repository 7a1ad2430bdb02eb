import type { IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";

/** Hard limit on an ingest request body (ruling: over 64 KiB -> 413, read no further). */
export const MAX_BODY_BYTES = 65_536;

/** The outcome of reading a request body. */
export type RawBody =
  | { kind: "ok"; bytes: Buffer }
  /** The body (declared or streamed) is over the limit; reading stopped at the limit. */
  | { kind: "too_large" }
  /** The client went away or the stream failed before the body was complete. */
  | { kind: "aborted" };

/**
 * True when the request declares a Content-Length over `limitBytes`, so it can be
 * rejected before a single body byte is read.
 */
export function declaresTooLarge(headers: IncomingHttpHeaders, limitBytes: number = MAX_BODY_BYTES): boolean {
  const declared = headers["content-length"];
  if (declared === undefined) return false;
  // Node rejects malformed Content-Length values itself (400), so a value here is digits.
  return Number(declared) > limitBytes;
}

/**
 * Reads a request body as raw bytes, never more than `limitBytes`. The bytes are
 * kept exactly as sent: the signature covers them, so nothing here decodes,
 * trims or re-serialises. Once the limit is crossed the stream is paused and
 * `too_large` is returned; the caller answers 413 and closes the connection.
 */
export function readRawBody(stream: Readable, limitBytes: number = MAX_BODY_BYTES): Promise<RawBody> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (result: RawBody) => {
      if (settled) return;
      settled = true;
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("error", onAborted);
      stream.off("close", onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) {
        stream.pause();
        chunks.length = 0;
        settle({ kind: "too_large" });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle({ kind: "ok", bytes: Buffer.concat(chunks, received) });
    // Failure policy: a stream error or early close means the body is incomplete; the caller answers nothing useful to a gone client.
    const onAborted = () => settle({ kind: "aborted" });
    const onClose = () => {
      if (!stream.readableEnded) onAborted();
    };
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onAborted);
    stream.on("close", onClose);
  });
}
