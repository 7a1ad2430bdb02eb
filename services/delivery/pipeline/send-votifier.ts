import { createHmac } from "node:crypto";
import net, { isIP } from "node:net";
import { isForbiddenAddress } from "../../shared/values/callback-url.js";
import { VOTIFIER_MAX_FRAME_BYTES } from "../../shared/values/votifier-limits.js";
import { createGuardedLookup, describeConnectionFailure, ForbiddenAddressError, truncate, type Resolver } from "./send-callback.js";

/**
 * The Votifier v2 sender (the protocol NuVotifier speaks), written from the
 * protocol description and checked against NuVotifier's v2 server source
 * (common/src/main/java/com/vexsoftware/votifier/net/protocol/ in github.com/NuVotifier/NuVotifier):
 *
 *  1. the server greets with `VOTIFIER 2 <challenge>\n`;
 *  2. the client sends the magic 0x733A (big-endian uint16), the message length
 *     (big-endian uint16) and the message: JSON `{"payload": "<json string>",
 *     "signature": base64(HMAC-SHA256(token, payload string))}`, where the payload
 *     carries serviceName, username, address, timestamp (ms) and the challenge;
 *  3. the server answers one JSON line: `{"status":"ok"}` or
 *     `{"status":"error","cause":<exception class>,"error":<message>}` (VoteInboundHandler.java;
 *     NuVotifier has only ever sent `error`; `errorMessage` is what the votifier2 JS client reads,
 *     and is read here only when `error` is absent).
 *
 * NuVotifier reads frames with a 1024-byte cap (magic and length included), so a
 * vote that would not fit is refused here, before anything is sent. What a listener can
 * never accept (a username over 16 characters) is services/shared/values/votifier-limits.ts.
 */

/** Connect timeout, and the longest wait for each read (greeting, answer). */
export const VOTIFIER_TIMEOUT_MS = 5_000;
/** NuVotifier's frame cap (services/shared/values/votifier-limits.ts), exported here for the sender's callers. */
export { VOTIFIER_MAX_FRAME_BYTES };
/** The v2 magic that precedes the length. */
export const VOTIFIER_MAGIC = 0x733a;
/** The `address` field of every vote: the voter's IP is not disclosed (the HTTP callback carries none either). */
export const VOTIFIER_VOTE_ADDRESS = "0.0.0.0";
/** The longest greeting line read; a server that sends more is not a Votifier server. */
export const MAX_GREETING_BYTES = 256;
/** The longest answer read. */
export const MAX_ANSWER_BYTES = 4096;

/** The vote fields, in the order they are serialised. */
export interface VotifierVote {
  serviceName: string;
  username: string;
  address: string;
  /** Milliseconds since the epoch. */
  timestamp: number;
  /**
   * The voter's Minecraft UUID (lower-case, dashed), when the vote gave one: NuVotifier's v2 decoder
   * checks an optional `uuid` with `UUID.fromString` (VotifierProtocol2Decoder.java) and ignores every
   * other unknown field; absent otherwise, so the payload is exactly the classic one.
   */
  uuid?: string;
}

/** The signed payload string: `{"serviceName","username","address","timestamp"[,"uuid"],"challenge"}`. */
export function buildVotifierPayload(vote: VotifierVote, challenge: string): string {
  return JSON.stringify({
    serviceName: vote.serviceName,
    username: vote.username,
    address: vote.address,
    timestamp: vote.timestamp,
    ...(vote.uuid === undefined ? {} : { uuid: vote.uuid }),
    challenge,
  });
}

/** base64(HMAC-SHA256(token, payload)), the key and the payload as UTF-8 bytes. */
export function signVotifierPayload(token: string, payload: string): string {
  return createHmac("sha256", Buffer.from(token, "utf8")).update(payload, "utf8").digest("base64");
}

/** Magic, length and message: the bytes a v2 vote puts on the wire. */
export function encodeVotifierFrame(payload: string, token: string): Buffer {
  const message = Buffer.from(JSON.stringify({ payload, signature: signVotifierPayload(token, payload) }), "utf8");
  const header = Buffer.alloc(4);
  header.writeUInt16BE(VOTIFIER_MAGIC, 0);
  header.writeUInt16BE(Math.min(message.length, 0xffff), 2);
  return Buffer.concat([header, message]);
}

/** What a greeting line says. */
export type GreetingParse = { kind: "v2"; challenge: string } | { kind: "invalid"; error: string };

/** Parses `VOTIFIER 2 <challenge>` (the line without its newline; a trailing `\r` is ignored). */
export function parseVotifierGreeting(line: string): GreetingParse {
  const text = line.replace(/\r$/, "");
  const match = /^VOTIFIER (\S+)(?: (\S+))?$/.exec(text);
  if (!match) return { kind: "invalid", error: "the server did not greet as a Votifier server" };
  if (match[1] !== "2" || !match[2])
    return { kind: "invalid", error: `the server speaks Votifier ${match[1] ?? "?"}, not v2 (NuVotifier with v2 enabled is needed)` };
  return { kind: "v2", challenge: match[2] };
}

/** What an answer line says. */
export type AnswerParse = { kind: "ok" } | { kind: "error"; cause: string; message: string } | { kind: "invalid"; error: string };

/** Parses the server's JSON answer. */
export function parseVotifierAnswer(text: string): AnswerParse {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.trim());
  } catch {
    // Failure policy: an answer that is not JSON is not an acknowledgement; the attempt fails and is retried.
    return { kind: "invalid", error: "the server's answer is not JSON" };
  }
  if (typeof parsed !== "object" || parsed === null) return { kind: "invalid", error: "the server's answer is not a JSON object" };
  const answer = parsed as Record<string, unknown>;
  if (answer.status === "ok") return { kind: "ok" };
  if (answer.status === "error") {
    // NuVotifier's key is `error`; `errorMessage` (what the votifier2 JS client reads) only when `error` is absent.
    const message = answer.error ?? answer.errorMessage;
    return { kind: "error", cause: typeof answer.cause === "string" ? answer.cause : "", message: typeof message === "string" ? message : "" };
  }
  return { kind: "invalid", error: "the server's answer has no status ok or error" };
}

/** One vote exchange as it happened; `error` is set unless the server answered ok. */
export interface VotifierOutcome {
  kind: "delivered" | "failed";
  latencyMs: number;
  /** The greeting line (without newline), when one arrived. */
  greeting: string;
  /** The signed payload string, once built. */
  payload: string;
  /** Bytes of the frame sent; 0 when nothing was sent. */
  frameBytes: number;
  /** The answer line as received (trimmed, capped). */
  answer: string;
  error?: string;
}

/** Where to send and how. */
export interface VotifierTarget {
  host: string;
  port: number;
  token: string;
}

/** Options of one send. */
export interface VotifierSendOptions {
  /** Connect timeout and per-read timeout; VOTIFIER_TIMEOUT_MS in production. */
  timeoutMs: number;
  /** Development flag: loopback and private addresses allowed. */
  allowInsecure: boolean;
  /** Replaces DNS resolution (tests); the forbidden-address check still applies. */
  resolve?: Resolver;
}

/** `votifier://host:port`, how attempts and reports name the target. */
export function votifierTargetName(target: { host: string; port: number }): string {
  return `votifier://${isIP(target.host) === 6 ? `[${target.host}]` : target.host}:${target.port}`;
}

/**
 * Sends one vote. The address connected to passes the same SSRF guard as the HTTP
 * callback (the name is resolved once and every resolved address is checked; IP
 * literals are checked directly). Never throws for I/O outcomes: connection errors,
 * timeouts, non-v2 servers, oversized frames and refusals are `failed` outcomes.
 */
export function sendVotifierVote(target: VotifierTarget, vote: VotifierVote, opts: VotifierSendOptions): Promise<VotifierOutcome> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  const host = target.host.startsWith("[") && target.host.endsWith("]") ? target.host.slice(1, -1) : target.host;
  const blank: VotifierOutcome = { kind: "failed", latencyMs: 0, greeting: "", payload: "", frameBytes: 0, answer: "" };
  // Node connects to IP literals without calling lookup, so they are checked here.
  if (isIP(host) !== 0 && !opts.allowInsecure && isForbiddenAddress(host)) {
    return Promise.resolve({ ...blank, error: new ForbiddenAddressError(host).message });
  }

  return new Promise<VotifierOutcome>((resolve) => {
    const state = { phase: "connect" as "connect" | "greeting" | "answer", greeting: "", payload: "", frameBytes: 0 };
    let received = Buffer.alloc(0);
    let settled = false;
    const socket = net.connect({
      host,
      port: target.port,
      lookup: createGuardedLookup({ allowInsecure: opts.allowInsecure, ...(opts.resolve ? { resolve: opts.resolve } : {}) }),
    });
    const finish = (answer: string, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      socket.destroy();
      const outcome: VotifierOutcome = {
        kind: error === undefined ? "delivered" : "failed",
        latencyMs: latency(),
        greeting: state.greeting,
        payload: state.payload,
        frameBytes: state.frameBytes,
        answer: truncate(answer, 500),
      };
      resolve(error === undefined ? outcome : { ...outcome, error });
    };
    // Failure policy: a server that does not accept the connection in time is a failed attempt, retried per schedule.
    const connectTimer = setTimeout(() => finish("", `connect timed out after ${opts.timeoutMs} ms`), opts.timeoutMs);
    socket.once("connect", () => {
      clearTimeout(connectTimer);
      state.phase = "greeting";
      // Failure policy: each read waits at most timeoutMs, so a server that stalls cannot hold the attempt.
      socket.setTimeout(opts.timeoutMs, () =>
        finish(received.toString("utf8"), `timed out after ${opts.timeoutMs} ms waiting for the ${state.phase === "greeting" ? "greeting" : "answer"}`),
      );
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // Failure policy: refused connections, resets and forbidden addresses are failed attempts, never exceptions.
      finish(received.toString("utf8"), describeSocketError(error));
    });
    socket.on("end", () => {
      if (state.phase === "greeting") finish("", "the server closed the connection before greeting");
      else onAnswer(true);
    });
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (state.phase === "greeting") onGreeting();
      else if (state.phase === "answer") onAnswer(false);
    });

    function onGreeting() {
      const newline = received.indexOf(0x0a);
      if (newline === -1) {
        if (received.length > MAX_GREETING_BYTES) finish("", `the greeting is longer than ${MAX_GREETING_BYTES} bytes: not a Votifier server`);
        return;
      }
      state.greeting = truncate(received.subarray(0, newline).toString("utf8").replace(/\r$/, ""), MAX_GREETING_BYTES);
      received = Buffer.alloc(0);
      const greeting = parseVotifierGreeting(state.greeting);
      if (greeting.kind === "invalid") return finish("", greeting.error);
      state.payload = buildVotifierPayload(vote, greeting.challenge);
      const frame = encodeVotifierFrame(state.payload, target.token);
      if (frame.length > VOTIFIER_MAX_FRAME_BYTES) {
        // Failure policy: NuVotifier would drop the connection on this frame; refuse it with the reason instead of sending it.
        return finish(
          "",
          `the vote frame is ${frame.length} bytes, over Votifier's ${VOTIFIER_MAX_FRAME_BYTES}-byte limit (shorten the service name; long usernames cannot be sent)`,
        );
      }
      state.phase = "answer";
      state.frameBytes = frame.length;
      socket.write(frame);
    }

    function onAnswer(ended: boolean) {
      const newline = received.indexOf(0x0a);
      if (newline === -1 && !ended) {
        if (received.length > MAX_ANSWER_BYTES)
          finish(received.subarray(0, MAX_ANSWER_BYTES).toString("utf8"), `the answer is longer than ${MAX_ANSWER_BYTES} bytes`);
        return;
      }
      const line = (newline === -1 ? received : received.subarray(0, newline)).toString("utf8").trim();
      if (line === "") return finish("", "the server closed the connection without answering");
      const answer = parseVotifierAnswer(line);
      if (answer.kind === "ok") return finish(line);
      if (answer.kind === "error")
        return finish(line, `the Votifier server refused the vote: ${[answer.cause, answer.message].filter((s) => s !== "").join(": ") || "no reason given"}`);
      finish(line, answer.error);
    }
  });
}

function describeSocketError(error: NodeJS.ErrnoException): string {
  if (error instanceof ForbiddenAddressError) return error.message;
  return describeConnectionFailure(error.code, error.message);
}
