/**
 * The gateway's route table (gateway/server.ts): a known path with another method is 405 with `Allow`
 * listing the table's methods for that path, an unknown path is 404 `not found`; the answers, byte for
 * byte (status, headers that matter, body), are the ones the gateway gave before the table.
 */
import test from "ava";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { createGatewayServer } from "../../gateway/server.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";

let base = "";
let server: http.Server;

test.before(async () => {
  server = createGatewayServer({
    // Nothing here reaches the referral service: a down one is enough.
    ...createReferralServiceClients("http://127.0.0.1:9", "routes-test-token"),
    log: createLogger("gateway-routes-test", "silent"),
    metrics: createMetrics("gateway_routes_test"),
    now: () => new Date(),
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

test.after.always(() => {
  server.closeAllConnections();
  server.close();
});

function send(method: string, path: string): Promise<{ status: number; allow?: string; type?: string; length?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          ...(res.headers.allow === undefined ? {} : { allow: res.headers.allow }),
          ...(res.headers["content-type"] === undefined ? {} : { type: res.headers["content-type"] }),
          ...(res.headers["content-length"] === undefined ? {} : { length: res.headers["content-length"] }),
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

const METHOD_NOT_ALLOWED = '{"error":"method not allowed"}';
const NOT_FOUND = '{"error":"not found"}';

const CASES: ReadonlyArray<[method: string, path: string, allow: string]> = [
  ["GET", "/api/referral/events", "POST"],
  ["PUT", "/api/referral/events?x=1", "POST"],
  ["HEAD", "/api/pull/hearts", "POST"],
  ["GET", "/api/pull/claims", "POST"],
  ["POST", "/r/5b0c3a52-6f1e-4c3b-9a51-2d0f0b6f6c11", "GET"],
  ["DELETE", "/r/a/b", "GET"],
  ["POST", "/openapi/referral.json", "GET, HEAD"],
  ["POST", "/", "GET, HEAD"],
  ["PUT", "/docs/contract.md", "GET, HEAD"],
  ["POST", "/api/votes?action=claim&key=k&steamid=1", "GET"],
  ["HEAD", "/api/votes/json", "GET"],
];

for (const [method, path, allow] of CASES) {
  test(`${method} ${path} -> 405 with Allow: ${allow}`, async (t) => {
    const answer = await send(method, path);
    const body = method === "HEAD" ? "" : METHOD_NOT_ALLOWED;
    t.deepEqual(answer, { status: 405, allow, type: "application/json", length: String(Buffer.byteLength(METHOD_NOT_ALLOWED)), body });
  });
}

for (const path of ["/nope", "/api/referral/events/", "/r", "/openapi/referral.json/x", "/api/pull"]) {
  test(`GET ${path} -> 404 not found`, async (t) => {
    t.deepEqual(await send("GET", path), { status: 404, type: "application/json", length: String(Buffer.byteLength(NOT_FOUND)), body: NOT_FOUND });
  });
}

test("GET /r/ (no server id) and a nested path stay the link route's own 404", async (t) => {
  for (const path of ["/r/", "/r/a/b"]) {
    t.deepEqual(await send("GET", path), { status: 404, type: "application/json", length: String(Buffer.byteLength(NOT_FOUND)), body: NOT_FOUND }, path);
  }
});

test("GET and HEAD of the OpenAPI document and the front page answer 200", async (t) => {
  for (const path of ["/openapi/referral.json", "/"]) {
    t.is((await send("GET", path)).status, 200, path);
    t.like(await send("HEAD", path), { status: 200, body: "" }, path);
  }
});

test("the check/claim API answers unknown or missing parameters with the bare digit 0, without calling the (down) service", async (t) => {
  for (const path of ["/api/votes", "/api/votes?action=status&steamid=76561198000000001", "/api/votes?key=k&steamid=1", "/api/votes?action=claim&key=k"]) {
    t.deepEqual(await send("GET", path), { status: 200, type: "text/plain", length: "1", body: "0" }, path);
  }
  t.deepEqual(JSON.parse((await send("GET", "/api/votes/json?action=status")).body), {
    voted: false,
    claimed: false,
    status: "not_found",
    heart_id: null,
    voted_at: null,
    claimed_at: null,
    expires_at: null,
  });
});
