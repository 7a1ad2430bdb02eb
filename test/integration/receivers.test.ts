/**
 * The platform receivers of docs/receivers/ (Node, Python, PHP, Go, Java, C#), each run in its own
 * runtime as a subprocess, exactly as their READMEs say:
 * - against the frozen HMAC vectors (test/fixtures/signature-vectors.json, computed with openssl,
 *   never by the project), with the test-only clock RECEIVER_NOW set to the vectors' time;
 * - against live callbacks from the real pipeline (referral service, outbox relay, Kafka, delivery
 *   worker): a counted heart is paid once, a redelivery and a redelivery after a restart of the
 *   receiver pay nothing more, the dashboard's test callback gets a 2xx and pays nothing, and a
 *   tampered body is refused.
 * PHP and Mono (C#) come from apt through the test runner (scripts/infra/apt.ts); Go is built once with
 * `go build`, C# once with `mcs`.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { eventually } from "../helpers/eventually.js";
import { freePort, RECEIVER_PLATFORMS, startPlatformReceiver, type RunningReceiver } from "../helpers/receivers-run.js";
import { startStack, type TestStack } from "../helpers/stack.js";

interface VectorCase {
  name: string;
  secret: string;
  t: number;
  body: string;
  body_base64: string;
  ingest_header: string;
  callback_header: string;
}
const vectors = JSON.parse(readFileSync(new URL("../fixtures/signature-vectors.json", import.meta.url), "utf8")) as {
  cases: VectorCase[];
  callback_rotation: { secrets_newest_first: string[]; t: number; body: string; callback_header: string };
};
/** The contract's replay window, written out: the receivers each carry their own copy of it. */
const TOLERANCE_SECONDS = 300;
const bodyOf = (c: VectorCase) => Buffer.from(c.body_base64, "base64");
const signed = (header: string) => ({ "x-service-signature": header });
const heartVector = vectors.cases.find((c) => c.name === "heart-counted")!;
const heartOf = (body: string) => JSON.parse(body) as { heart_id: string; username: string };

// The tests run one at a time: each starts runtimes (a JVM compiling, Mono) on a machine the suite shares.
let stack: TestStack;
let voter = 0;
test.before(async () => {
  stack = await startStack({
    gateway: false,
    pipeline: { name: "receivers", delivery: { pollIntervalMs: 100 } },
  });
});
test.after.always(async () => {
  await stack?.close();
});

/** Stops every receiver a test started, pass or fail. */
function cleanup(t: { teardown: (fn: () => Promise<void>) => void }, r: RunningReceiver): RunningReceiver {
  t.teardown(() => r.stop());
  return r;
}

for (const platform of Object.keys(RECEIVER_PLATFORMS)) {
  test.serial(
    `${platform} receiver: every frozen vector verifies at its time, a changed byte, a re-serialised body and the ingest header form are refused, and one heart_id pays once`,
    async (t) => {
      const secrets = [...new Set(vectors.cases.map((c) => c.secret))];
      const r = cleanup(t, await startPlatformReceiver(platform, { secrets, nowSeconds: heartVector.t }));
      for (const c of vectors.cases) {
        const res = await r.post(bodyOf(c), signed(c.callback_header));
        t.is(res.status, 200, `${c.name}: ${res.text}`);

        const tampered = Buffer.from(bodyOf(c));
        const at = tampered.length - 2;
        tampered.writeUInt8(tampered.readUInt8(at) ^ 0x01, at);
        t.is((await r.post(tampered, signed(c.callback_header))).status, 401, `${c.name}: one changed byte`);
        t.is((await r.post(bodyOf(c), signed(c.ingest_header))).status, 400, `${c.name}: the ingest form v1=sha256=... is not a callback signature`);
      }
      const reordered = vectors.cases.find((c) => c.name === "whitespace-and-key-order")!;
      const reserialised = Buffer.from(JSON.stringify(JSON.parse(reordered.body)), "utf8");
      t.is((await r.post(reserialised, signed(reordered.callback_header))).status, 401, "a re-serialised body is not the signed bytes");
      t.is((await r.post(bodyOf(heartVector), {})).status, 400, "no signature header");
      const { heart_id, username } = heartOf(heartVector.body);
      t.deepEqual(await r.settledPaid(), [`PAID ${heart_id} ${username}`], "two vectors carry one heart_id (old and new secret): paid once");
    },
  );

  test.serial(
    `${platform} receiver: during a rotation the older secret verifies the second v1 at exactly -${TOLERANCE_SECONDS} s; at +${TOLERANCE_SECONDS + 1} s it is stale`,
    async (t) => {
      const rotation = vectors.callback_rotation;
      const older = [rotation.secrets_newest_first[1]!];
      const edge = cleanup(t, await startPlatformReceiver(platform, { secrets: older, nowSeconds: rotation.t - TOLERANCE_SECONDS }));
      const accepted = await edge.post(Buffer.from(rotation.body, "utf8"), signed(rotation.callback_header));
      t.is(accepted.status, 200, accepted.text);
      t.is((await edge.settledPaid()).length, 1);
      await edge.stop();
      const late = cleanup(t, await startPlatformReceiver(platform, { secrets: older, nowSeconds: rotation.t + TOLERANCE_SECONDS + 1 }));
      t.is((await late.post(Buffer.from(rotation.body, "utf8"), signed(rotation.callback_header))).status, 401);
      t.deepEqual(await late.settledPaid(), [], "a stale signature pays nothing");
    },
  );

  test.serial(
    `${platform} receiver: a live callback pays once; a redelivery, and a redelivery after a restart, pay nothing more; the test callback gets 2xx and pays nothing; a tampered body is refused`,
    async (t) => {
      const { admin, hearts, delivery } = stack.clients;
      const port = await freePort();
      const storeDir = mkdtempSync(join(tmpdir(), `receiver-live-${platform}-`));
      const { server } = await admin.createServer({ name: `Receivers ${platform}`, registrationUrl: "" });
      const serverId = server!.id;
      await admin.setCallbackSettings({ serverId, callbackUrl: `http://127.0.0.1:${port}/callback`, standardWebhooks: true });
      const { secret } = await admin.revealCallbackSecret({ serverId });
      const first = cleanup(t, await startPlatformReceiver(platform, { secrets: [secret], storeDir, port }));

      voter += 1;
      const username = `Steve_${platform}`;
      const vote = {
        serverId,
        username,
        voterIdentity: `voter-${platform}-${randomBytes(4).toString("hex")}`,
        ip: `203.0.113.${voter}`,
        userAgent: "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0",
      };
      // On a loaded machine the heart batch may answer overloaded (retryable): retry as a client would.
      const cast = await eventually(() => hearts.castHeart(vote), { timeoutMs: 60_000, intervalMs: 1_000, message: "heart cast" });
      t.true(cast.counted, cast.reason);
      const paidLine = `PAID ${cast.heartId} ${username}`;
      await eventually(() => first.paid().includes(paidLine), { timeoutMs: 60_000, message: `${platform}: ${paidLine}` });
      const row = await stack.prisma.delivery.findFirstOrThrow({ where: { heartId: cast.heartId } });
      const succeeded = (n: number) =>
        eventually(async () => (await stack.prisma.deliveryAttempt.count({ where: { deliveryId: row.id, succeeded: true } })) >= n, {
          timeoutMs: 60_000,
          message: `${n} successful attempts`,
        });
      await succeeded(1);

      await delivery.redeliver({ deliveryId: row.id, serverId });
      await succeeded(2);
      t.deepEqual(await first.settledPaid(), [paidLine], "a redelivery (same heart_id) is answered 2xx and pays nothing");

      await first.stop();
      const restarted = cleanup(t, await startPlatformReceiver(platform, { secrets: [secret], storeDir, port }));
      await delivery.redeliver({ deliveryId: row.id, serverId });
      await succeeded(3);
      t.deepEqual(await restarted.settledPaid(), [], "the paid store survived the restart");

      const { report } = await delivery.sendTestCallback({ serverId, username: "Tester" });
      t.true(report?.ok, `${report?.statusCode} ${report?.responseBody}`);
      t.true((report?.statusCode ?? 0) >= 200 && (report?.statusCode ?? 0) < 300);
      t.deepEqual(await restarted.settledPaid(), [], "heart.test pays nothing");

      // The last attempt's exact request, replayed: unchanged it is a duplicate (2xx), changed it is refused.
      const { attempts } = await delivery.getDelivery({ deliveryId: row.id, serverId });
      const last = attempts.at(-1)!;
      const header = last.requestHeaders["X-Service-Signature"]!;
      const replay = await restarted.post(Buffer.from(last.requestBody, "utf8"), signed(header));
      t.is(replay.status, 200, replay.text);
      const tampered = Buffer.from(last.requestBody.replace(username, `${username}x`), "utf8");
      t.is((await restarted.post(tampered, signed(header))).status, 401);
      t.deepEqual(await restarted.settledPaid(), [], "nothing paid for a replay or a tampered body");
    },
  );
}
