import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A real local HTTP receiver for callback tests. It records every request's raw
 * bytes and headers and answers from a script: a queue of responses used in
 * order, then a fallback (a fixed response or a function of the request).
 * Responses can be delayed or hang forever; the receiver can go down and come
 * back up on the same port.
 */

/** One scripted answer. */
export interface ScriptedResponse {
  /** Default 200. */
  status?: number;
  headers?: Record<string, string>;
  /** Default "ok". */
  body?: string;
  /** Answer after this many milliseconds. */
  delayMs?: number;
  /** Never answer (the socket stays open until the client gives up or the receiver closes). */
  hang?: boolean;
}

/** One request as it arrived. */
export interface RecordedRequest {
  method: string;
  path: string;
  /** Lower-cased header names, as node parses them. */
  headers: http.IncomingHttpHeaders;
  /** Header names and values exactly as sent, alternating. */
  rawHeaders: string[];
  /** The raw body bytes. */
  body: Buffer;
  /** The body as UTF-8 text. */
  text: string;
  /** Date.now() when the body was complete. */
  receivedAt: number;
  /** What the receiver answered (after the script was applied). */
  response: ScriptedResponse;
}

/** Responds to a request: a fixed response or a function of the request. */
export type Responder = ScriptedResponse | ((request: Omit<RecordedRequest, "response">) => ScriptedResponse);

/** A running receiver. */
export interface Receiver {
  /** `http://127.0.0.1:<port><path>`. */
  url: string;
  port: number;
  /** Every request received so far, in arrival order. */
  requests: RecordedRequest[];
  /** Appends scripted responses, used one per request before the fallback. */
  enqueue(...responses: ScriptedResponse[]): void;
  /** Replaces the fallback (default: 200 "ok"). */
  setFallback(responder: Responder): void;
  /** Resolves once at least `count` requests arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Stops listening and drops open connections (the port stays reserved for `up`). */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** Starts a receiver on 127.0.0.1 (a free port unless `port` is given). */
export async function startReceiver(opts: { path?: string; responses?: ScriptedResponse[]; fallback?: Responder; port?: number } = {}): Promise<Receiver> {
  const path = opts.path ?? "/hook";
  const queue: ScriptedResponse[] = [...(opts.responses ?? [])];
  let fallback: Responder = opts.fallback ?? { status: 200, body: "ok" };
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const waiters = new Set<() => void>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const arrived = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
        text: body.toString("utf8"),
        receivedAt: Date.now(),
      };
      const response = queue.shift() ?? (typeof fallback === "function" ? fallback(arrived) : fallback);
      requests.push({ ...arrived, response });
      for (const wake of waiters) wake();
      if (response.hang) return;
      const answer = () => {
        if (res.destroyed) return;
        res.writeHead(response.status ?? 200, response.headers ?? {});
        res.end(response.body ?? "ok");
      };
      if (response.delayMs) setTimeout(answer, response.delayMs);
      else answer();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  const port = await listen(opts.port ?? 0);
  return {
    url: `http://127.0.0.1:${port}${path}`,
    port,
    requests,
    enqueue: (...responses) => void queue.push(...responses),
    setFallback: (responder) => void (fallback = responder),
    async waitForRequests(count, timeoutMs = 15_000) {
      if (requests.length >= count) return requests;
      return new Promise<RecordedRequest[]>((resolve, reject) => {
        const wake = () => {
          if (requests.length < count) return;
          clearTimeout(timer);
          waiters.delete(wake);
          resolve(requests);
        };
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`receiver got ${requests.length} of ${count} requests within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(wake);
      });
    },
    down: stop,
    up: async () => void (await listen(port)),
    close: stop,
  };
}

/** The request's header value as a single string (first value when repeated). */
export function headerOf(request: RecordedRequest, name: string): string | undefined {
  const value = request.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}
