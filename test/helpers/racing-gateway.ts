import http from "node:http";
import type { AddressInfo } from "node:net";
import { PULL_HEARTS_PATH } from "../../gateway/handle-pull.js";

/** A pull API front that lets a test pay hearts another way between a poller's list and its claim. */
export interface RacingGateway {
  /** `http://127.0.0.1:<port>`: give it to the poller as the gateway's URL. */
  url: string;
  /** Pages of hearts relayed so far (empty ones included). */
  listed: number;
  close(): Promise<void>;
}

/**
 * Starts a gateway in front of the real one at `target` that relays every request unchanged (the
 * signature covers the body, so it still verifies) and, each time it relays a page of pulled hearts,
 * first awaits `beforeRelay` with them: a claim landing between a poller's list and its own claim,
 * made certain instead of left to timing.
 */
export async function startRacingGateway(target: string, beforeRelay: (hearts: Array<{ heart_id: string }>) => Promise<void>): Promise<RacingGateway> {
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method ?? "POST",
      headers: { "content-type": "application/json", "x-service-signature": String(req.headers["x-service-signature"] ?? "") },
      body: Buffer.concat(chunks),
    });
    const text = await upstream.text();
    if (req.url === PULL_HEARTS_PATH && upstream.ok) {
      await beforeRelay((JSON.parse(text) as { hearts: Array<{ heart_id: string }> }).hearts);
      gateway.listed++;
    }
    res.writeHead(upstream.status, { "content-type": "application/json" });
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const gateway: RacingGateway = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    listed: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return gateway;
}
