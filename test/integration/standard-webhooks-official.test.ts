/**
 * The Standard Webhooks opt-in checked by the official `standardwebhooks` library (npm, 1.1.1), not by
 * the project's own helpers: a live heart.counted callback (outbox, relay, Kafka, delivery worker) to a
 * local receiver, verified with `new Webhook(<whsec_ secret>).verify`
 * over the raw body and the `webhook-*` headers; a changed byte and another secret are refused by it.
 * (The library knows the `v1,` HMAC only; `v1a` is checked by Node's and Python's ed25519 in
 * public-key-signatures.test.ts.)
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Webhook } from "standardwebhooks";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver, type RecordedRequest } from "../../scripts/harness/receiver.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

interface Context {
  stack: TestStack;
  receiver: Receiver;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    pipeline: {
      name: "sw-official",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  t.context = { stack, receiver: await startReceiver() };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.receiver?.close();
});

/** The `webhook-*` headers of a recorded request, as the library takes them. */
function webhookHeaders(r: RecordedRequest): Record<string, string> {
  return {
    "webhook-id": String(r.headers["webhook-id"]),
    "webhook-timestamp": String(r.headers["webhook-timestamp"]),
    "webhook-signature": String(r.headers["webhook-signature"]),
  };
}

test("a live heart.counted callback of a server opted in to Standard Webhooks verifies with the official library; a changed byte or another secret does not", async (t) => {
  const { stack, receiver } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: `sw-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  await stack.clients.admin.setCallbackSettings({ serverId, callbackUrl: receiver.url, standardWebhooks: true });
  const { secret } = await stack.clients.admin.revealCallbackSecret({ serverId });
  t.regex(secret, /^whsec_/);
  const cast = await stack.clients.hearts.castHeart({
    serverId,
    username: "Steve",
    voterIdentity: "sw-voter",
    ip: "203.0.113.77",
    userAgent: "Mozilla/5.0 (sw)",
  });
  t.true(cast.counted, cast.reason);
  const request = await eventually(() => receiver.requests.find((r) => r.text.includes(cast.heartId)), { timeoutMs: 30_000, message: "the callback arrives" });

  const payload = new Webhook(secret).verify(request.text, webhookHeaders(request)) as { heart_id: string; event: string };
  t.like(payload, { heart_id: cast.heartId, event: "heart.counted" });
  t.is(request.headers["webhook-id"], cast.heartId);

  const tampered = request.text.replace('"Steve"', '"Steva"');
  t.throws(() => new Webhook(secret).verify(tampered, webhookHeaders(request)), undefined, "a changed byte is refused");
  const other = `whsec_${randomBytes(32).toString("base64")}`;
  t.throws(() => new Webhook(other).verify(request.text, webhookHeaders(request)), undefined, "another secret is refused");
});
