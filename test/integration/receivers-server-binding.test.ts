/**
 * A signed callback pays only the server it was signed for. The list signs every server's callbacks, and
 * with public-key signatures (`v1a`) with ONE key pair, so a valid signature proves only that the list sent
 * a callback; the body's `server_id` (inside the signed bytes) says whom it is for. Here server B's real
 * callback (a heart cast for B, signed by the delivery worker's own code with `X-Service-Signature`,
 * Standard Webhooks `v1,` and `v1a,`) is replayed, byte for byte with its headers, to each shipped receiver
 * of docs/receivers/ configured for server A, each in its own runtime (node, python3, php, go, java, mono):
 * every one refuses it and pays nothing, and B's own receiver pays it.
 * The frozen vectors and the missing SERVER_ID are test/integration/receivers.test.ts.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { serverMismatchText } from "../../gateway/dashboard/signature-rules.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { eventually } from "../helpers/eventually.js";
import { startReceiver, type Receiver } from "../../scripts/harness/receiver.js";
import { RECEIVER_PLATFORMS, startPlatformReceiver, stopOnTeardown } from "../helpers/receivers-run.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

/** One server on the list: its id and callback secret. */
interface ListedServer {
  id: string;
  secret: string;
}

interface Context {
  stack: TestStack;
  recorder: Receiver;
  a: ListedServer;
  b: ListedServer;
  /** Server B's counted heart, as the list sent it to B's endpoint. */
  callback: { body: Buffer; headers: Record<string, string>; heartId: string; username: string };
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({
    allowInsecureCallbacks: true,
    pipeline: { name: "binding", delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true } },
  });
  const recorder = await startReceiver();
  t.context = { stack, recorder } as Context;
  const listed = async (name: string): Promise<ListedServer> => {
    const { server } = await stack.clients.admin.createServer({ name: `${name}-${randomBytes(3).toString("hex")}` });
    const id = server!.id;
    // Every scheme on: the replay carries X-Service-Signature, a `v1,` and a `v1a,` entry.
    await stack.clients.admin.setCallbackSettings({ serverId: id, callbackUrl: recorder.url, standardWebhooks: true, publicKeySignatures: true });
    return { id, secret: (await stack.clients.admin.revealCallbackSecret({ serverId: id })).secret };
  };
  const a = await listed("server-a");
  const b = await listed("server-b");
  const username = "AttackerOnA";
  const cast = await stack.clients.hearts.castHeart({
    serverId: b.id,
    username,
    voterIdentity: `voter-${randomBytes(4).toString("hex")}`,
    ip: "203.0.113.77",
    userAgent: "Mozilla/5.0 (binding test)",
  });
  if (!cast.counted) throw new Error(`heart not counted: ${cast.reason}`);
  const sent = await eventually(() => recorder.requests.find((r) => r.text.includes(cast.heartId)), { timeoutMs: 30_000, message: "B's callback" });
  const headers = Object.fromEntries(
    Object.entries(sent.headers).filter((e): e is [string, string] => typeof e[1] === "string" && /^(x-service-|webhook-)/.test(e[0])),
  );
  t.context = { stack, recorder, a, b, callback: { body: sent.body, headers, heartId: cast.heartId, username } };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.recorder?.close();
});

test.serial("B's callback is a real one: for server B, with X-Service-Signature and webhook-signature holding a v1 and a v1a entry", (t) => {
  const { callback, b } = t.context;
  t.is((JSON.parse(callback.body.toString("utf8")) as { server_id: string }).server_id, b.id);
  t.regex(callback.headers["x-service-signature"] ?? "", /^t=\d+,v1=[0-9a-f]{64}$/);
  t.regex(callback.headers["webhook-signature"] ?? "", /^v1,\S+ v1a,\S+$/);
});

for (const platform of Object.keys(RECEIVER_PLATFORMS)) {
  test.serial(
    `${platform} receiver for server A: server B's real callback is refused and pays nothing (with A's secret the MAC fails; with B's secret shared the signature verifies and the answer is 403 server_id mismatch); B's own receiver pays it`,
    async (t) => {
      const { a, b, callback } = t.context;
      const own = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: a.id, secrets: [a.secret] }));
      const refused = await own.post(callback.body, callback.headers);
      t.is(refused.status, 401, refused.text);

      const shared = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: a.id, secrets: [b.secret] }));
      const mismatch = await shared.post(callback.body, callback.headers);
      t.is(mismatch.status, 403, mismatch.text);
      t.deepEqual(JSON.parse(mismatch.text), { error: serverMismatchText(a.id) });
      t.deepEqual(await own.settledPaid(), []);
      t.deepEqual(await shared.settledPaid(), [], "a valid signature for another server pays nothing");

      const mine = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: b.id, secrets: [b.secret] }));
      const paid = await mine.post(callback.body, callback.headers);
      t.is(paid.status, 200, paid.text);
      t.deepEqual(await mine.settledPaid(), [`PAID ${callback.heartId} ${callback.username}`]);
    },
  );
}

/** The modes of the Node and Python receivers that check the webhook-* headers. */
const MODES = {
  "public-key": "v1a signature (the list's one key pair) verifies with the published key",
  "standard-webhooks": "v1 signature verifies with B's secret, shared",
} as const;

for (const platform of ["node", "python"]) {
  for (const [mode, why] of Object.entries(MODES)) {
    test.serial(
      `${platform} receiver, VERIFY=${mode}, for server A: server B's real callback, whose ${why}, is refused 403 server_id mismatch and pays nothing; B's own receiver pays it`,
      async (t) => {
        const { a, b, callback, stack } = t.context;
        const env = { VERIFY: mode, ...(mode === "public-key" ? { WEBHOOK_KEYS_URL: `${stack.gatewayUrl}/.well-known/webhook-keys.json` } : {}) };
        const secrets = mode === "public-key" ? [] : [b.secret];
        const forA = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: a.id, secrets, env }));
        const refused = await forA.post(callback.body, callback.headers);
        t.is(refused.status, 403, refused.text);
        t.deepEqual(JSON.parse(refused.text), { error: serverMismatchText(a.id) });
        t.deepEqual(await forA.settledPaid(), [], "a valid signature for another server pays nothing");

        const forB = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: b.id, secrets, env }));
        const paid = await forB.post(callback.body, callback.headers);
        t.is(paid.status, 200, paid.text);
        t.deepEqual(await forB.settledPaid(), [`PAID ${callback.heartId} ${callback.username}`]);
      },
    );
  }
}
