/**
 * The raw baseline of the ingest target (issue #8, target 1), run as its own
 * process beside the system under test: node:http + node-postgres, the same
 * signature check as the gateway (parseSignatureHeader + verifySignature over the
 * raw body, the secret held in memory as the gateway's signing-key cache holds
 * it), the same JSON validation, and the rows an applied `registered` event
 * writes (dedup row in referral_events, the referral, the click link, the outbox
 * row with the same protobuf envelope) in ONE statement (a CTE chain), prepared
 * once per connection. It skips what only the product must do (replays,
 * first-touch conflicts, other event types): a lower bound of the work, which is
 * what a baseline is for. It answers 200 with `"state":"registered"` like the gateway.
 * A `test: true` event (the dry-run baseline) is answered `{ok:true,test:true}` after the signature
 * check and validation, with no database work, as the gateway answers it.
 *
 * Env: DATABASE_URL, BASELINE_SERVER_ID, BASELINE_KID, BASELINE_SECRET, BASELINE_POOL (20).
 * Prints `listening <port>` on stdout once it accepts connections; exits on SIGTERM.
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import pg from "pg";
import { ReferralTransitionedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { parseJsonObject, validateEvent } from "../../gateway/validate-event.js";
import { parseSignatureHeader, verifySignature } from "../../gateway/verify-signature.js";
import { REFERRALS_TOPIC } from "../../services/shared/adapters/bus.js";
import { toOutboxRow } from "../../services/shared/adapters/outbox.js";

const serverId = process.env.BASELINE_SERVER_ID ?? "";
const kid = process.env.BASELINE_KID ?? "";
const keys = [{ kid, secret: new Uint8Array(Buffer.from(process.env.BASELINE_SECRET ?? "", "utf8")) }];
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.BASELINE_POOL ?? 20) });

/** Dedup row, mint, click link and outbox row in one statement; the event row is written already 'advanced'. */
const APPLY_REGISTERED = `
WITH click AS (
  SELECT id, server_id, referrer_identity FROM referral_clicks WHERE token = $1 AND server_id = $2::uuid
), ev AS (
  INSERT INTO referral_events (token, type, server_event_id, server_id, outcome, referral_id, kid, caller_ts, received_at)
  SELECT $1, 'registered', $3, click.server_id, 'advanced', $4::uuid, $5, $6::bigint, now() FROM click
  ON CONFLICT (token, type, server_event_id) DO NOTHING
  RETURNING id
), minted AS (
  INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at)
  SELECT $4::uuid, click.server_id, $7, click.referrer_identity, 'registered'::"ReferralState", 1, now()
  FROM click WHERE EXISTS (SELECT 1 FROM ev)
  ON CONFLICT (server_id, referee_identity) DO NOTHING
  RETURNING id
), linked AS (
  UPDATE referral_clicks c SET referral_id = minted.id FROM minted, click
  WHERE c.id = click.id AND c.referral_id IS NULL
  RETURNING c.id
), queued AS (
  INSERT INTO outbox (topic, key, type, payload, shard, created_at)
  SELECT $8, $2, 'referral.registered', $9::bytea, $10::int, now() FROM minted
  RETURNING id
)
SELECT (SELECT count(*) FROM click)::int AS clicks, (SELECT count(*) FROM minted)::int AS minted`;

function reply(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function handle(rawBody: Buffer, header: string | undefined): Promise<{ status: number; body: unknown }> {
  const signature = parseSignatureHeader(header);
  if (!signature) return { status: 401, body: { error: "bad signature header" } };
  const verdict = verifySignature({ signature, keys, rawBody, nowSeconds: Math.floor(Date.now() / 1000) });
  if (verdict.kind !== "verified") return { status: 401, body: { error: verdict.kind } };
  const json = parseJsonObject(rawBody);
  const event = json ? validateEvent(json) : null;
  if (event?.kind !== "ok") return { status: 400, body: { error: "invalid event" } };
  const e = event.value;
  // The raw dry-run baseline: what the gateway does for `test: true` (signature, validation, answer), no database.
  if (e.test) return { status: 200, body: { ok: true, test: true } };
  if (e.event !== "registered" || e.serverId !== serverId || !e.refereeIdentity)
    return { status: 422, body: { error: "baseline handles registered events only" } };
  const referralId = randomUUID();
  const outbox = toOutboxRow({
    topic: REFERRALS_TOPIC,
    type: "referral.registered",
    serverId,
    occurredAt: new Date(),
    payload: {
      case: "referralTransitioned",
      value: create(ReferralTransitionedSchema, {
        referralId,
        serverId,
        refereeIdentity: e.refereeIdentity,
        state: "registered",
        previousState: "clicked",
        serverEventId: e.serverEventId,
      }),
    },
  });
  const { rows } = await pool.query<{ clicks: number; minted: number }>({
    name: "apply_registered",
    text: APPLY_REGISTERED,
    values: [
      e.token,
      serverId,
      e.serverEventId,
      referralId,
      kid,
      e.ts === undefined ? null : String(e.ts),
      e.refereeIdentity,
      outbox.topic,
      outbox.payload,
      outbox.shard,
    ],
  });
  const row = rows[0];
  if (!row || row.clicks === 0) return { status: 404, body: { error: "unknown token" } };
  if (row.minted === 0) return { status: 200, body: { ok: true, duplicate: true } };
  return { status: 200, body: { ok: true, referral_id: referralId, state: "registered" } };
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const header = req.headers["x-service-signature"];
    handle(Buffer.concat(chunks), Array.isArray(header) ? header[0] : header).then(
      (r) => reply(res, r.status, r.body),
      (error: unknown) => {
        // Failure policy: a baseline that fails answers 500; the load generator counts it as unexpected.
        reply(res, 500, { error: (error as Error).message.slice(0, 200) });
      },
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
process.once("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  void pool.end().finally(() => process.exit(0));
});
