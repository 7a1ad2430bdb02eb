import type { ServerResponse } from "node:http";

/** THE JSON reply writer of every HTTP surface: `content-type: application/json`, an exact `content-length`, then `headers`. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(payload), ...headers });
  res.end(payload);
}
