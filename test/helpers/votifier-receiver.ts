import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import net, { type AddressInfo } from "node:net";

/**
 * A real Votifier v2 listener for tests, written from the protocol description
 * alone (it shares no code with the project's sender): greet with
 * `VOTIFIER 2 <challenge>\n`; read magic 0x733A, a big-endian uint16 length and
 * that many bytes of JSON `{payload, signature}`; check the frame fits in 1024
 * bytes (as NuVotifier's frame decoder does), the payload's challenge, and the
 * base64 HMAC-SHA256 of the payload string under the token of the payload's
 * serviceName (or "default"); answer `{"status":"ok"}\r\n` or
 * `{"status":"error","cause":..,"errorMessage":..}\r\n` and close.
 */

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
  opts: { tokens?: Record<string, string>; behaviour?: VotifierBehaviour; port?: number } = {},
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
        exchange.answer = JSON.stringify(answer);
        exchange.frame = buffer;
        exchanges.push(exchange);
        if (exchange.accepted && exchange.vote) votes.push(exchange.vote);
        notify();
        socket.end(`${exchange.answer}\r\n`);
      };
      if (buffer.readUInt16BE(0) !== MAGIC) return reply({ status: "error", cause: "CorruptedFrameException", errorMessage: "not a v2 frame" });
      if (exchange.declaredLength + 4 > MAX_FRAME_BYTES) {
        return reply({ status: "error", cause: "TooLongFrameException", errorMessage: `frame length exceeds ${MAX_FRAME_BYTES}` });
      }
      if (buffer.length < 4 + exchange.declaredLength) return;
      let message: { payload?: unknown; signature?: unknown };
      try {
        message = JSON.parse(buffer.subarray(4, 4 + exchange.declaredLength).toString("utf8")) as typeof message;
      } catch {
        // Failure policy: a frame that is not JSON is refused, as NuVotifier does.
        return reply({ status: "error", cause: "JsonSyntaxException", errorMessage: "message is not JSON" });
      }
      if (typeof message.payload !== "string" || typeof message.signature !== "string") {
        return reply({ status: "error", cause: "CorruptedFrameException", errorMessage: "payload or signature missing" });
      }
      exchange.payload = message.payload;
      const vote = JSON.parse(message.payload) as Record<string, unknown>;
      exchange.vote = vote;
      if (vote.challenge !== expectedChallenge) return reply({ status: "error", cause: "CorruptedFrameException", errorMessage: "Challenge is not valid" });
      const serviceName = String(vote.serviceName);
      const token = tokens[serviceName] ?? tokens.default;
      if (token === undefined) return reply({ status: "error", cause: "RuntimeException", errorMessage: `Unknown service '${serviceName}'` });
      const expected = createHmac("sha256", token).update(message.payload, "utf8").digest();
      const presented = Buffer.from(message.signature, "base64");
      exchange.signatureValid = presented.length === expected.length && timingSafeEqual(presented, expected);
      if (!exchange.signatureValid)
        return reply({ status: "error", cause: "CorruptedFrameException", errorMessage: "Signature is not valid (invalid token?)" });
      for (const field of ["serviceName", "username", "address", "timestamp"]) {
        if (vote[field] === undefined) return reply({ status: "error", cause: "NullPointerException", errorMessage: `${field} missing` });
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
