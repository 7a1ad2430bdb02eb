import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import net, { type AddressInfo } from "node:net";

/**
 * A real Votifier v2 listener for tests (it shares no code with the project's sender), made
 * faithful to NuVotifier's v2 server as read in its source (github.com/NuVotifier/NuVotifier,
 * common/src/main/java/com/vexsoftware/votifier/net/protocol/):
 * - VotifierGreetingHandler.java: greet with `VOTIFIER 2 <challenge>\n`;
 * - VotifierProtocolDifferentiator.java: magic 0x733A, then `LengthFieldBasedFrameDecoder(1024, 2, 2, 0, 4)`:
 *   a big-endian uint16 length and that many bytes of JSON `{payload, signature}`; the whole frame
 *   (magic and length included) at most 1024 bytes, else TooLongFrameException;
 * - VotifierProtocol2Decoder.java, in this order: the payload's challenge ("Challenge is not valid"),
 *   the token of the payload's serviceName or "default" ("Unknown service '<name>'", a
 *   RuntimeException), the base64 HMAC-SHA256 of the payload string ("Signature is not valid
 *   (invalid token?)"), then an optional `uuid` must parse with `UUID.fromString` (else
 *   IllegalArgumentException "Invalid UUID string: <value>"; NuVotifier's Vote drops it after the check),
 *   then the username's length: over 16 characters (Java String.length, UTF-16
 *   code units) is `CorruptedFrameException("Username too long")`;
 * - VoteInboundHandler.java: answer `{"status":"ok"}\r\n`, or on any exception
 *   `{"status":"error","cause":<exception class simple name>,"error":<message>}\r\n`, and close.
 *   NuVotifier has only ever answered `error`; `errorMessage` is what the votifier2 JS client
 *   (node_modules/votifier2/index.js) reads, so the listener adds it only when asked
 *   (`answerKeys: "with-votifier2-key"`), for tests that read votifier2's own error text.
 * Texts that differ from NuVotifier's: an oversized frame says "frame length exceeds 1024"
 * (netty: "Adjusted frame length exceeds 1024: <n> - discarded"); the cause is the same.
 * A manual run against NuVotifier's own server (compiled from that source) gave the same
 * answers for a 16- and a 20-character username.
 */

/** NuVotifier's username limit, from its source (VotifierProtocol2Decoder.java); written here, not imported, so the test double stays independent of the code under test. */
const NUVOTIFIER_MAX_USERNAME_CHARS = 16;
/** What java.util.UUID.fromString accepts: five dash-separated groups of 1-8, 1-4, 1-4, 1-4 and 1-12 hex digits. */
const JAVA_UUID = /^[0-9a-fA-F]{1,8}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,4}-[0-9a-fA-F]{1,12}$/;

/** How the listener behaves. */
export type VotifierBehaviour =
  /** The protocol as described. */
  | "normal"
  /** Accepts the connection and never says anything (a hung server). */
  | "silent"
  /** Greets with one challenge but checks another (as after a mixed-up session). */
  | "wrong-challenge"
  /** Greets as a Votifier v1 server. */
  | "v1";

/** One connection, as it happened. */
export interface VotifierExchange {
  challenge: string;
  /** The frame's bytes as received: magic, length and message. */
  frame: Buffer;
  /** The length field. */
  declaredLength: number;
  payload?: string;
  vote?: Record<string, unknown>;
  signatureValid?: boolean;
  /** What was answered (without the CRLF); empty when nothing was. */
  answer: string;
  accepted: boolean;
}

/** A running listener. */
export interface VotifierReceiver {
  host: string;
  port: number;
  /** Every connection that sent a frame (or was refused one), in order. */
  exchanges: VotifierExchange[];
  /** Accepted votes' payload objects, in order. */
  votes: Array<Record<string, unknown>>;
  /** Connections accepted so far (including ones that never sent a frame). */
  connections(): number;
  setBehaviour(behaviour: VotifierBehaviour): void;
  /** Replaces the tokens by service name ("default" is the fallback, as in NuVotifier). */
  setTokens(tokens: Record<string, string>): void;
  /** Uses this challenge for every connection (random per connection otherwise). */
  setChallenge(challenge: string | undefined): void;
  waitForVotes(count: number, timeoutMs?: number): Promise<Array<Record<string, unknown>>>;
  waitForExchanges(count: number, timeoutMs?: number): Promise<VotifierExchange[]>;
  /** Stops listening and drops connections; the port stays known for `up`. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

const MAGIC = 0x733a;
const MAX_FRAME_BYTES = 1024;

/** Starts a listener on 127.0.0.1 (a free port unless given). */
export async function startVotifierReceiver(
  opts: {
    tokens?: Record<string, string>;
    behaviour?: VotifierBehaviour;
    port?: number;
    /** `nuvotifier` (default): `error` only, as NuVotifier answers; `with-votifier2-key`: `errorMessage` too. */
    answerKeys?: "nuvotifier" | "with-votifier2-key";
    /** Default true (NuVotifier); false: a v2 listener without NuVotifier's username check, for tests of frame sizing alone. */
    checkUsernameLength?: boolean;
  } = {},
): Promise<VotifierReceiver> {
  let tokens = opts.tokens ?? { default: "votifier-token" };
  let behaviour: VotifierBehaviour = opts.behaviour ?? "normal";
  let fixedChallenge: string | undefined;
  let connectionCount = 0;
  const exchanges: VotifierExchange[] = [];
  const votes: Array<Record<string, unknown>> = [];
  const sockets = new Set<net.Socket>();
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());

  const handle = (socket: net.Socket) => {
    connectionCount++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {
      // Failure policy: a client that resets is simply gone; nothing to record.
    });
    if (behaviour === "silent") return;
    if (behaviour === "v1") {
      socket.write("VOTIFIER 1.9\n");
      return;
    }
    const challenge = fixedChallenge ?? randomBytes(16).toString("hex");
    const expectedChallenge = behaviour === "wrong-challenge" ? `${challenge}x` : challenge;
    socket.write(`VOTIFIER 2 ${challenge}\n`);
    let buffer = Buffer.alloc(0);
    let done = false;
    socket.on("data", (chunk: Buffer) => {
      if (done) return;
      buffer = Buffer.concat([buffer, chunk]);
      if (buffer.length < 4) return;
      const exchange: VotifierExchange = { challenge, frame: buffer, declaredLength: buffer.readUInt16BE(2), answer: "", accepted: false };
      const reply = (answer: Record<string, string>) => {
        done = true;
        if (opts.answerKeys === "with-votifier2-key" && answer.error !== undefined) answer.errorMessage = answer.error;
        exchange.answer = JSON.stringify(answer);
        exchange.frame = buffer;
        exchanges.push(exchange);
        if (exchange.accepted && exchange.vote) votes.push(exchange.vote);
        notify();
        socket.end(`${exchange.answer}\r\n`);
      };
      if (buffer.readUInt16BE(0) !== MAGIC) return reply({ status: "error", cause: "CorruptedFrameException", error: "not a v2 frame" });
      if (exchange.declaredLength + 4 > MAX_FRAME_BYTES) {
        return reply({ status: "error", cause: "TooLongFrameException", error: `frame length exceeds ${MAX_FRAME_BYTES}` });
      }
      if (buffer.length < 4 + exchange.declaredLength) return;
      let message: { payload?: unknown; signature?: unknown };
      try {
        message = JSON.parse(buffer.subarray(4, 4 + exchange.declaredLength).toString("utf8")) as typeof message;
      } catch {
        // Failure policy: a frame that is not JSON is refused, as NuVotifier does.
        return reply({ status: "error", cause: "JsonSyntaxException", error: "message is not JSON" });
      }
      if (typeof message.payload !== "string" || typeof message.signature !== "string") {
        return reply({ status: "error", cause: "CorruptedFrameException", error: "payload or signature missing" });
      }
      exchange.payload = message.payload;
      const vote = JSON.parse(message.payload) as Record<string, unknown>;
      exchange.vote = vote;
      if (vote.challenge !== expectedChallenge) return reply({ status: "error", cause: "CorruptedFrameException", error: "Challenge is not valid" });
      const serviceName = String(vote.serviceName);
      const token = tokens[serviceName] ?? tokens.default;
      if (token === undefined) return reply({ status: "error", cause: "RuntimeException", error: `Unknown service '${serviceName}'` });
      const expected = createHmac("sha256", token).update(message.payload, "utf8").digest();
      const presented = Buffer.from(message.signature, "base64");
      exchange.signatureValid = presented.length === expected.length && timingSafeEqual(presented, expected);
      if (!exchange.signatureValid) return reply({ status: "error", cause: "CorruptedFrameException", error: "Signature is not valid (invalid token?)" });
      if (vote.uuid !== undefined && !JAVA_UUID.test(String(vote.uuid)))
        return reply({ status: "error", cause: "IllegalArgumentException", error: `Invalid UUID string: ${String(vote.uuid)}` });
      if (opts.checkUsernameLength !== false && String(vote.username).length > NUVOTIFIER_MAX_USERNAME_CHARS)
        return reply({ status: "error", cause: "CorruptedFrameException", error: "Username too long" });
      for (const field of ["serviceName", "username", "address", "timestamp"]) {
        if (vote[field] === undefined) return reply({ status: "error", cause: "NullPointerException", error: `${field} missing` });
      }
      exchange.accepted = true;
      reply({ status: "ok" });
    });
  };

  let server = net.createServer(handle);
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
    });
  const port = await listen(opts.port ?? 0);
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });

  const waitFor = <T>(ready: () => T | undefined, timeoutMs: number, what: string) =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const value = ready();
        if (value === undefined) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(value);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`${what} did not arrive within ${timeoutMs} ms`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });

  return {
    host: "127.0.0.1",
    port,
    exchanges,
    votes,
    connections: () => connectionCount,
    setBehaviour: (b) => void (behaviour = b),
    setTokens: (t) => void (tokens = t),
    setChallenge: (c) => void (fixedChallenge = c),
    waitForVotes: (count, timeoutMs = 15_000) => waitFor(() => (votes.length >= count ? votes.slice() : undefined), timeoutMs, `${count} vote(s)`),
    waitForExchanges: (count, timeoutMs = 15_000) =>
      waitFor(() => (exchanges.length >= count ? exchanges.slice() : undefined), timeoutMs, `${count} exchange(s)`),
    down: stop,
    async up() {
      server = net.createServer(handle);
      await listen(port);
    },
    close: stop,
  };
}
