/**
 * Voters' addresses age out (issue 30, docs/referral-rules.md "Voters' addresses"): on the real stack (PostgreSQL,
 * Kafka, relay, delivery worker, the public gateway, a real HTTP receiver), hearts and referral clicks cast with a
 * recognisable IP and user agent still trip the 24-hour fraud and anti-abuse rules before the address horizon; the
 * retention rules run with the clock past it leave the IP, its subnet and the user agent in no text, json or bytea
 * column of any table, no log line, no metric, no callback body and no Kafka message; receipts, the hearts list and
 * the referral review still answer; and the self-referral-by-address rule still links the referrer's erased hearts
 * to a new click or to the referee's erased hearts, through the keyed pseudonyms.
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { HeartVerdict, ReceiptOutcome } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ExportFormat, ReviewMode } from "../../gen/proto/referral/v1/referral_review_pb.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { ALL_TOPICS, type ReceivedMessage, type Subscription } from "../../services/shared/adapters/bus.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { createMetrics, type Metrics } from "../../services/shared/runtime/metrics.js";
import { DEFAULT_ADDRESS_RETENTION_HOURS } from "../../services/shared/runtime/address-settings.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { readRetentionSettings } from "../../services/retention/retention-settings.js";
import { retentionRules } from "../../services/retention/retention-rules.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { eventually } from "../helpers/eventually.js";
import { ownerApi, signInOwner } from "../helpers/owner-session.js";

/** The voter's address and agent, each unlike anything else the service writes (TEST-NET-3; a made-up agent). */
const IP = "203.0.113.197";
const SUBNET = "203.0.113.0/24";
const UA = "Mozilla/5.0 (X11; Linux x86_64) ErasureProbe/9.7.3-c41f";
const OTHER_IP = "198.51.100.23";
const HOUR_MS = 3_600_000;

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  gatewayMetrics: Metrics;
  serviceLog: CapturedLog;
  gatewayLog: CapturedLog;
  receiver: Receiver;
  kafka: { messages: ReceivedMessage[]; subscription: Subscription };
  /** How far the stack's clock runs ahead of the wall clock. */
  clock: { aheadMs: number };
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const serviceLog = captureLog("debug");
  const gatewayLog = captureLog("debug");
  const clock = { aheadMs: 0 };
  const stack = await startStack({
    gateway: false,
    // Login links are opened on the test's gateway by their path; the base only has to be a URL.
    publicBaseUrl: "http://127.0.0.1:9",
    log: serviceLog.log,
    allowInsecureCallbacks: true,
    now: () => new Date(Date.now() + clock.aheadMs),
    pipeline: { name: "address-erasure", delivery: { pollIntervalMs: 100, allowInsecureCallbacks: true } },
  });
  const gatewayMetrics = createMetrics("gateway");
  // Clicks carry the address of the proxy's X-Forwarded-For entry, as behind the list's own proxy.
  // With the owners' dashboard, whose pages read the hearts and referrals after the erasure.
  const gateway = await stack.startGateway({
    log: gatewayLog.log,
    metrics: gatewayMetrics,
    dashboard: { token: undefined, log: gatewayLog.log },
    overrides: () => ({ trustProxy: true }),
  });
  const receiver = await startReceiver();
  // Every message of every topic, from the beginning, on a group of this file's own.
  const messages: ReceivedMessage[] = [];
  const subscription = await stack.pipeline!.bus.subscribe({
    groupId: `address-erasure-${Date.now()}`,
    topics: [...ALL_TOPICS],
    fromBeginning: true,
    handler: async (m) => void messages.push(m),
  });
  t.context = { stack, gatewayUrl: gateway.url, gatewayMetrics, serviceLog, gatewayLog, receiver, kafka: { messages, subscription }, clock };
});

test.after.always(async (t) => {
  await t.context.kafka?.subscription.stop();
  await t.context.stack?.close();
  await t.context.receiver?.close();
});

/** Every (table, column) of the database whose values can hold text: text, varchar, json, jsonb, bytea, arrays. */
async function textColumns(stack: TestStack): Promise<Array<{ table_name: string; column_name: string; data_type: string }>> {
  return runSql(
    stack.prisma,
    Prisma.sql`SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns
               WHERE table_schema = current_schema()
                 AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea', 'ARRAY', 'USER-DEFINED')
               ORDER BY 1, 2`,
  );
}

/** The "table.column" names where any of `needles` occurs (bytea searched as UTF-8 bytes, arrays as their text form). */
async function columnsHolding(stack: TestStack, needles: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const c of await textColumns(stack)) {
    const column = Prisma.raw(`"${c.column_name}"`);
    const table = Prisma.raw(`"${c.table_name}"`);
    for (const needle of needles) {
      const match =
        c.data_type === "bytea" ? Prisma.sql`position(convert_to(${needle}, 'UTF8') in ${column}) > 0` : Prisma.sql`strpos(${column}::text, ${needle}) > 0`;
      const rows = await runSql<{ n: number }>(stack.prisma, Prisma.sql`SELECT count(*)::int AS n FROM ${table} WHERE ${match}`);
      if (rows[0]!.n > 0) found.push(`${c.table_name}.${c.column_name}`);
    }
  }
  return [...new Set(found)];
}

/**
 * Runs every retention rule at the stack's now, in batches of 2, until none has anything due (at most 20 batches a
 * rule: a rule that keeps finding the rows it just erased fails the test rather than hanging it); rows per table.
 */
async function runRetention(c: Context): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  const rules = retentionRules(readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES));
  for (const rule of rules) {
    for (let batch = 0; ; batch++) {
      if (batch === 20) throw new Error(`retention rule ${rule.name} still finds rows due after ${batch} batches`);
      const n = await rule.removeBatch(c.stack.prisma, c.stack.clock.now(), 2);
      removed[rule.table] = (removed[rule.table] ?? 0) + n;
      if (n === 0) break;
    }
  }
  return removed;
}

/** A click on `referrer`'s link from `ip` through the public gateway; its token. */
async function click(c: Context, serverId: string, referrer: string, ip: string): Promise<string> {
  const res = await fetch(`${c.gatewayUrl}/r/${serverId}?referrer=${encodeURIComponent(referrer)}`, {
    redirect: "manual",
    headers: { "x-forwarded-for": ip, "user-agent": UA },
  });
  if (res.status !== 200) throw new Error(`/r/ answered ${res.status}`);
  return ((await res.json()) as { token: string }).token;
}

/** Registers `referee` through `token` (a signed ingest request at the stack's now); the referral's id. */
async function register(c: Context, server: { serverId: string; secret: string }, token: string, referee: string): Promise<string> {
  const raw = JSON.stringify({ event: "registered", token, server_id: server.serverId, referee_identity: referee, server_event_id: `reg-${referee}` });
  const res = await fetch(`${c.gatewayUrl}/api/referral/events`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-service-signature": formatIngestSignature(server.secret, Math.floor(c.stack.clock.now().getTime() / 1000), raw),
    },
    body: raw,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`ingest answered ${res.status}: ${text}`);
  return (JSON.parse(text) as { referral_id: string }).referral_id;
}

async function signals(c: Context, referralId: string): Promise<string[]> {
  return ((await c.stack.clients.reviews.getReferralDetail({ referralId })).referral?.signals ?? []).map((s) => s.code);
}

test("past the address horizon no IP, subnet or user agent of a voter is left in any table, log, metric, callback or Kafka message, while before it the 24-hour fraud and anti-abuse rules fire, and after it the self-referral-by-address rule still links through the keyed pseudonyms", async (t) => {
  const c = t.context;
  const { clients } = c.stack;
  const { server } = await clients.admin.createServer({ name: "address-erasure" });
  const serverId = server!.id;
  await clients.admin.setCallbackSettings({ serverId, callbackUrl: c.receiver.url, standardWebhooks: false });
  await clients.admin.setReferralsEnabled({ serverId, enabled: true });
  const secret = (await clients.admin.createReferralSecret({ serverId })).secret;
  await clients.reviews.setReferralReviewMode({ serverId, mode: ReviewMode.LOOSE });
  await clients.access.createOwner({ ownerId: "owner-erasure", displayName: "Owner" });
  await clients.access.assignServer({ serverId, ownerId: "owner-erasure" });
  const s = { serverId, secret };

  // Before the horizon. Fraud: a fourth voter identity from one IP in 24 h is blocked (ip_identities, max 3).
  const cast = (username: string, ip = IP) => clients.hearts.castHeart({ serverId, username, voterIdentity: `acct-${username}`, ip, userAgent: UA });
  const alex = await cast("Alex");
  for (const name of ["Blake", "Casey"]) t.true((await cast(name)).counted);
  const fourth = await cast("Drew");
  t.is(fourth.verdict, HeartVerdict.FRAUD);
  t.true(
    fourth.fraudReasons.some((r) => r.startsWith("ip_identities")),
    fourth.fraudReasons.join("; "),
  );
  // Anti-abuse: links opened from the referrer's own voting address are self_referral_ip; a fourth referee from one IP
  // in 24 h is ip_fanout (max 3), and the earlier referees from that address are flagged with it (back-flagging).
  const referrals: string[] = [];
  for (const referee of ["puppet-1", "puppet-2", "puppet-3", "puppet-4"]) referrals.push(await register(c, s, await click(c, serverId, "Alex", IP), referee));
  t.deepEqual(await signals(c, referrals[0]!), ["self_referral_ip", "ip_fanout"]);
  t.deepEqual(await signals(c, referrals[3]!), ["self_referral_ip", "ip_fanout"]);
  // A pass before the horizon erases no address.
  const early = await runRetention(c);
  t.deepEqual([early.hearts, early.referral_clicks, early.heart_address_voters], [0, 0, 0]);
  t.true((await columnsHolding(c.stack, [IP])).includes("hearts.ip"));
  const addressRules = retentionRules(readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES)).filter((r) => r.name.endsWith("_addresses"));
  t.deepEqual(
    addressRules.map((r) => r.table),
    ["hearts", "referral_clicks"],
  );
  for (const rule of addressRules)
    t.true(((await rule.oldestAge(c.stack.prisma, c.stack.clock.now())) ?? Infinity) < 3_600, `${rule.name}: the oldest address is young`);
  // The counted hearts' events reached Kafka and their callbacks the receiver (so both can be searched below).
  await eventually(() => c.kafka.messages.filter((m) => m.key === serverId).length >= 3, { timeoutMs: 60_000, message: "the server's events on Kafka" });
  await c.receiver.waitForRequests(3, 30_000);

  // Past the horizon: every rule of the retention registry runs, in batches.
  c.clock.aheadMs = DEFAULT_ADDRESS_RETENTION_HOURS * HOUR_MS + 60_000;
  const removed = await runRetention(c);
  t.is(removed.hearts, 4);
  t.is(removed.referral_clicks, 4);
  for (const rule of addressRules) t.is(await rule.oldestAge(c.stack.prisma, c.stack.clock.now()), null, `${rule.name}: no row holds an address`);
  const again = await runRetention(c);
  t.deepEqual([again.hearts, again.referral_clicks], [0, 0], "a second pass finds nothing left");

  // Every text, json and bytea column of every table (the outbox's payloads and the deliveries' bodies included).
  // (heart_address_voters, the identity rules' window set, is aged out by a rule of its own in the same registry.)
  t.deepEqual(await columnsHolding(c.stack, [IP, SUBNET, UA]), [], "columns still holding the address, subnet or agent");
  t.true(
    (await textColumns(c.stack)).some((col) => col.table_name === "outbox" && col.data_type === "bytea"),
    "the outbox payloads were searched",
  );
  // Logs of the referral service and of the gateway (debug level), metrics of both, callback bodies, Kafka messages.
  const needles = [IP, SUBNET, UA];
  const hits = (text: string) => needles.filter((n) => text.includes(n));
  t.deepEqual(hits(c.serviceLog.raw.join("\n")), [], "referral service log");
  t.deepEqual(hits(c.gatewayLog.raw.join("\n")), [], "gateway log");
  t.deepEqual(hits(await c.stack.metrics.registry.metrics()), [], "referral service metrics");
  t.deepEqual(hits(await c.gatewayMetrics.registry.metrics()), [], "gateway metrics");
  t.deepEqual(hits(c.receiver.requests.map((r) => `${JSON.stringify(r.headers)}\n${r.text}`).join("\n")), [], "callbacks");
  t.deepEqual(hits(c.kafka.messages.map((m) => Buffer.from(m.value).toString("latin1")).join("\n")), [], "Kafka messages");

  // What the owner and the voter read still answers: the receipt, the hearts list, the referral review and export.
  const receipt = await clients.hearts.getReceipt({ token: alex.receiptUrl.split("/").pop()! });
  t.not(receipt.receipt?.outcome, ReceiptOutcome.UNSPECIFIED);
  const listed = await clients.hearts.listHearts({ serverId, pageSize: 10 });
  t.is(listed.hearts.length, 4);
  t.deepEqual(await signals(c, referrals[3]!), ["self_referral_ip", "ip_fanout"]);
  const exported = await clients.reviews.exportReferrals({ serverId, format: ExportFormat.JSON });
  t.is(exported.rows, 4);
  // The owner's dashboard: the hearts list, a referral's detail and the referrals export answer, without the address.
  const owner = await signInOwner(clients.access, c.gatewayUrl, "owner-erasure");
  for (const path of [`/servers/${serverId}/hearts`, `/servers/${serverId}/referrals/${referrals[3]}`, `/servers/${serverId}/referrals/export?format=json`]) {
    const page = await ownerApi(c.gatewayUrl, owner, "GET", path);
    t.is(page.status, 200, `${path}: ${page.text}`);
    t.deepEqual(hits(page.text), [], path);
  }

  // After the erasure the referrer's hearts hold no address, yet a new link opened from it is still self_referral_ip,
  // and so is a referee whose own (erased) hearts came from it, whatever the click's address.
  t.deepEqual(await signals(c, await register(c, s, await click(c, serverId, "Alex", IP), "puppet-late")), ["self_referral_ip"]);
  t.deepEqual(await signals(c, await register(c, s, await click(c, serverId, "Alex", OTHER_IP), "Blake")), ["self_referral_ip"]);
});
