/**
 * The signed pull API against the real gateway, referral service and PostgreSQL:
 * servers behind NAT list their unclaimed counted hearts (cursor-paginated) and
 * claim them by heart_id, idempotently. Every real answer is validated against the
 * OpenAPI document.
 */
import { randomUUID } from "node:crypto";
import test from "ava";
import pg from "pg";
import { createClient } from "@connectrpc/connect";
import { DeliveryTransport } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { DeliveryStatsService } from "../../gen/proto/delivery/v1/delivery_stats_pb.js";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { startGatewayStack, type GatewayStack, type RawResponse } from "./gateway-stack.js";
import { validateAgainstOpenApi } from "./openapi-validate.js";
import { eventually } from "../helpers/eventually.js";

const HEARTS = "/api/pull/hearts";
const CLAIMS = "/api/pull/claims";
let stack: GatewayStack;
test.before(async () => {
  stack = await startGatewayStack();
});
test.after.always(async () => {
  await stack?.close();
});

interface PullServer {
  serverId: string;
  pullSecret: string;
  referralSecret: string;
}

/** A server with the pull API on (which creates its pull secret). */
async function pullServer(): Promise<PullServer> {
  const server = await stack.createServer();
  await stack.clients.admin.setPullEnabled({ serverId: server.serverId, enabled: true });
  const { secret } = await stack.clients.admin.revealPullSecret({ serverId: server.serverId });
  return { serverId: server.serverId, pullSecret: secret, referralSecret: server.secret };
}

/** Stores a counted heart's deliveries as the delivery consumer does; returns the heart id. */
async function countHeart(serverId: string, username = "Steve"): Promise<string> {
  const heartId = randomUUID();
  await insertDelivery(stack.db.prisma, {
    heartId,
    serverId,
    eventType: "heart.counted",
    username,
    voterIdentity: `voter-${heartId}`,
    period: "2026-03",
    streakDay: 2,
    countedAt: new Date("2026-03-04T05:06:07.089Z"),
  });
  return heartId;
}

async function post(path: string, secret: string, body: unknown, t = Math.floor(Date.now() / 1000)): Promise<RawResponse> {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(secret, t, raw) },
    body: raw,
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Asserts the status and that the real body matches the OpenAPI document; returns the parsed body. */
function expectValid(
  t: { is(a: unknown, b: unknown, m?: string): void; deepEqual(a: unknown, b: unknown, m?: string): void },
  res: RawResponse,
  status: number,
  path: string,
) {
  t.is(res.status, status, res.text);
  const body = JSON.parse(res.text) as Record<string, unknown>;
  t.deepEqual(validateAgainstOpenApi(path, "post", res.status, body).errors, [], `${path} ${status} ${res.text}`);
  return body;
}

test("list: unclaimed hearts oldest first, paginated by cursor until next_cursor is null", async (t) => {
  const s = await pullServer();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await countHeart(s.serverId, `Player${i}`));
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const body: Record<string, unknown> = expectValid(
      t,
      await post(HEARTS, s.pullSecret, { server_id: s.serverId, limit: 2, ...(cursor ? { cursor } : {}) }),
      200,
      HEARTS,
    );
    const hearts = body.hearts as Array<Record<string, unknown>>;
    seen.push(...hearts.map((h) => String(h.heart_id)));
    cursor = body.next_cursor as string | null;
    pages++;
  } while (cursor !== null && pages < 10);
  t.deepEqual(seen, ids);
  t.is(pages, 3);
  const first = expectValid(t, await post(HEARTS, s.pullSecret, { server_id: s.serverId, limit: 1 }), 200, HEARTS);
  t.deepEqual((first.hearts as unknown[])[0], {
    heart_id: ids[0],
    username: "Player0",
    period: "2026-03",
    counted_at: "2026-03-04T05:06:07.089Z",
    streak_day: 2,
  });
});

test("claim: claimed once, then already_claimed on retry; unknown ids are named; claimed hearts leave the list and count as delivered", async (t) => {
  const s = await pullServer();
  const [a, b] = [await countHeart(s.serverId), await countHeart(s.serverId)];
  const other = await pullServer();
  const foreign = await countHeart(other.serverId);
  const first = expectValid(t, await post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [a, foreign, "not-a-uuid"] }), 200, CLAIMS);
  t.deepEqual(first.results, [
    { heart_id: a, status: "claimed" },
    { heart_id: foreign, status: "unknown" },
    { heart_id: "not-a-uuid", status: "unknown" },
  ]);
  const retry = expectValid(t, await post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [a] }), 200, CLAIMS);
  t.deepEqual(retry.results, [{ heart_id: a, status: "already_claimed" }]);
  const list = expectValid(t, await post(HEARTS, s.pullSecret, { server_id: s.serverId }), 200, HEARTS);
  t.deepEqual(
    (list.hearts as Array<{ heart_id: string }>).map((h) => h.heart_id),
    [b],
  );
  const delivery = await stack.db.prisma.delivery.findFirstOrThrow({ where: { heartId: a, transport: "pull" }, include: { attemptsLog: true } });
  t.is(delivery.status, "delivered");
  t.truthy(delivery.deliveredAt);
  t.is(delivery.attemptsLog.length, 1, "the claim is in the attempt log");
  t.is(delivery.attemptsLog[0]!.url, "pull API claim");
  t.is(
    (await stack.db.prisma.delivery.findFirstOrThrow({ where: { heartId: foreign, transport: "pull" } })).status,
    "pending",
    "another server's heart is untouched",
  );
});

test("a claimed heart's attempt is a success with its exchange, for the dashboard and the delivery statistics", async (t) => {
  const s = await pullServer();
  const heartId = await countHeart(s.serverId);
  const claim = expectValid(t, await post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [heartId] }), 200, CLAIMS);
  t.deepEqual(claim.results, [{ heart_id: heartId, status: "claimed" }]);
  const { id: deliveryId } = await stack.db.prisma.delivery.findFirstOrThrow({ where: { heartId, transport: "pull" } });
  // What the dashboard reads: DeliveryService.GetDelivery.
  const { attempts } = await stack.clients.delivery.getDelivery({ deliveryId, serverId: s.serverId });
  t.is(attempts.length, 1);
  const attempt = attempts[0]!;
  t.like(attempt, { attempt: 1, url: "pull API claim", statusCode: 200, error: "", succeeded: true, exchangeRecorded: true, responseReceived: true });
  t.deepEqual(JSON.parse(attempt.requestBody), { server_id: s.serverId, heart_ids: [heartId] }, "the claim as it concerned this heart");
  t.deepEqual(JSON.parse(attempt.responseBody), { results: [{ heart_id: heartId, status: "claimed" }] });
  const row = await stack.db.prisma.deliveryAttempt.findFirstOrThrow({ where: { deliveryId } });
  t.is(row.serverId, s.serverId, "the attempt row names its server");
  // What the dashboard's charts read: DeliveryStatsService.GetDeliveryStats counts the claim as an attempt that succeeded.
  const stats = createClient(DeliveryStatsService, createServiceTransport(stack.serviceUrl, TEST_SERVICE_TOKEN));
  const { days } = await stats.getDeliveryStats({ serverId: s.serverId, days: 1, transport: DeliveryTransport.PULL });
  t.like(days[0], { delivered: 1n, failed: 0n, pending: 0n, attempts: 1n, attemptsOk: 1n });
});

test("concurrent claims of the same heart: exactly one answers claimed", async (t) => {
  const s = await pullServer();
  const heart = await countHeart(s.serverId);
  const answers = await Promise.all(Array.from({ length: 6 }, () => post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [heart] })));
  const statuses = answers.map((res) => (JSON.parse(res.text) as { results: Array<{ status: string }> }).results[0]!.status);
  t.is(statuses.filter((x) => x === "claimed").length, 1, statuses.join(","));
  t.is(statuses.filter((x) => x === "already_claimed").length, 5);
});

test.serial("a claim that waited behind another transaction's claim of the same heart answers already_claimed, not unknown", async (t) => {
  const s = await pullServer();
  const heart = await countHeart(s.serverId);
  // Another claim holds the row: it has marked the heart delivered and not yet committed.
  const other = new pg.Client({ connectionString: stack.db.url });
  await other.connect();
  try {
    await other.query("BEGIN");
    await other.query("UPDATE deliveries SET status = 'delivered', delivered_at = now() WHERE heart_id = $1::uuid AND transport = 'pull'", [heart]);
    const waiting = post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [heart] });
    // The claim's statement has taken its snapshot and waits for the row lock.
    await eventually(
      async () => {
        const { rows } = await other.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'transactionid'",
        );
        return rows[0].n > 0;
      },
      { timeoutMs: 10_000, message: "the claim waiting for the row lock" },
    );
    await other.query("COMMIT");
    const res = await waiting;
    t.deepEqual((JSON.parse(res.text) as { results: unknown[] }).results, [{ heart_id: heart, status: "already_claimed" }]);
  } finally {
    await other.end();
  }
});

test("a redelivered pull delivery is offered again", async (t) => {
  const s = await pullServer();
  const heart = await countHeart(s.serverId);
  await post(CLAIMS, s.pullSecret, { server_id: s.serverId, heart_ids: [heart] });
  const delivery = await stack.db.prisma.delivery.findFirstOrThrow({ where: { heartId: heart, transport: "pull" } });
  await stack.clients.delivery.redeliver({ deliveryId: delivery.id });
  const list = expectValid(t, await post(HEARTS, s.pullSecret, { server_id: s.serverId }), 200, HEARTS);
  t.deepEqual(
    (list.hearts as Array<{ heart_id: string }>).map((h) => h.heart_id),
    [heart],
  );
});

test("signature and switches: wrong secret, the referral secret, a stale t -> 401; pull off or unknown server -> 404; malformed header -> 400", async (t) => {
  const s = await pullServer();
  const body = { server_id: s.serverId };
  t.deepEqual(expectValid(t, await post(HEARTS, "psec_wrong", body), 401, HEARTS), { error: "signature rejected: bad_signature" });
  t.deepEqual(
    expectValid(t, await post(HEARTS, s.referralSecret, body), 401, HEARTS),
    { error: "signature rejected: bad_signature" },
    "the referral secret is not a pull secret",
  );
  t.deepEqual(expectValid(t, await post(CLAIMS, s.pullSecret, { ...body, heart_ids: [randomUUID()] }, Math.floor(Date.now() / 1000) - 400), 401, CLAIMS), {
    error: "signature rejected: stale",
  });
  t.deepEqual(expectValid(t, await post(HEARTS, s.pullSecret, { server_id: randomUUID() }), 404, HEARTS), { error: "unknown server" });
  const off = await stack.createServer();
  t.deepEqual(expectValid(t, await post(HEARTS, "psec_x", { server_id: off.serverId }), 404, HEARTS), { error: "pull API not enabled for this server" });
  await stack.clients.admin.setPullEnabled({ serverId: s.serverId, enabled: false });
  t.deepEqual(expectValid(t, await post(HEARTS, s.pullSecret, body), 404, HEARTS), { error: "pull API not enabled for this server" });
  await stack.clients.admin.setPullEnabled({ serverId: s.serverId, enabled: true });
  const res = await fetch(`${stack.baseUrl}${HEARTS}`, { method: "POST", body: JSON.stringify(body) });
  t.deepEqual(expectValid(t, { status: res.status, text: await res.text(), headers: res.headers }, 400, HEARTS), {
    error: "missing or malformed X-Service-Signature header",
  });
  t.is((await fetch(`${stack.baseUrl}${HEARTS}`)).status, 405);
});

test("bad fields -> 400 naming the field; a forged cursor -> 400", async (t) => {
  const s = await pullServer();
  const cases: Array<[string, unknown, string]> = [
    [HEARTS, { server_id: s.serverId, limit: 0.5 }, "limit must be an integer between 1 and 500"],
    [HEARTS, { server_id: s.serverId, limit: 501 }, "limit must be an integer between 1 and 500"],
    [HEARTS, { server_id: s.serverId, cursor: 5 }, "cursor must be a string"],
    [HEARTS, { server_id: s.serverId, cursor: "bm90LWEtY3Vyc29y" }, "cursor is not valid"],
    [CLAIMS, { server_id: s.serverId }, "heart_ids must be an array of 1-500 strings"],
    [CLAIMS, { server_id: s.serverId, heart_ids: [] }, "heart_ids must be an array of 1-500 strings"],
    [CLAIMS, { server_id: s.serverId, heart_ids: [1] }, "heart_ids must be an array of 1-500 strings"],
    [CLAIMS, { server_id: s.serverId, heart_ids: Array.from({ length: 501 }, () => randomUUID()) }, "heart_ids must be an array of 1-500 strings"],
    [HEARTS, "[]", "body is not valid JSON"],
    [HEARTS, {}, "server_id is required"],
  ];
  for (const [path, body, error] of cases) {
    t.deepEqual(expectValid(t, await post(path, s.pullSecret, body), 400, path), { error }, JSON.stringify(body).slice(0, 80));
  }
});

test("a rotated pull secret: the new one works at once, the old one during the overlap", async (t) => {
  const s = await pullServer();
  const rotated = await stack.clients.admin.rotatePullSecret({ serverId: s.serverId, graceSeconds: 60n });
  t.regex(rotated.secret, /^psec_/);
  t.is((await post(HEARTS, rotated.secret, { server_id: s.serverId })).status, 200);
  t.is((await post(HEARTS, s.pullSecret, { server_id: s.serverId })).status, 200);
});

test("list: a heart's platform ids, account id and next eligible time are listed when known, omitted when not", async (t) => {
  const s = await pullServer();
  const withIds = randomUUID();
  await insertDelivery(stack.db.prisma, {
    heartId: withIds,
    serverId: s.serverId,
    eventType: "heart.counted",
    username: "Alex",
    voterIdentity: `voter-${withIds}`,
    period: "2026-03",
    streakDay: null,
    countedAt: new Date("2026-03-04T05:06:07.089Z"),
    platformIds: { steamId: "76561198000000001", discordId: "123456789012345678", minecraftUuid: "8667ba71-b85a-4004-af54-457a9734eed7", accountId: "acct-7" },
    nextEligibleAt: new Date("2026-03-05T05:06:07.089Z"),
  });
  const plain = await countHeart(s.serverId, "Bare");
  const body = expectValid(t, await post(HEARTS, s.pullSecret, { server_id: s.serverId }), 200, HEARTS);
  t.deepEqual(body.hearts, [
    {
      heart_id: withIds,
      username: "Alex",
      period: "2026-03",
      counted_at: "2026-03-04T05:06:07.089Z",
      next_eligible_at: "2026-03-05T05:06:07.089Z",
      steam_id: "76561198000000001",
      discord_id: "123456789012345678",
      minecraft_uuid: "8667ba71-b85a-4004-af54-457a9734eed7",
      account_id: "acct-7",
    },
    { heart_id: plain, username: "Bare", period: "2026-03", counted_at: "2026-03-04T05:06:07.089Z", streak_day: 2 },
  ]);
});
