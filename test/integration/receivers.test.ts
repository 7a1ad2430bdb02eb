/**
 * The platform receivers of docs/receivers/ (Node, Python, PHP, Go, Java, C#), each run in its own
 * runtime as a subprocess, exactly as their READMEs say, against the frozen HMAC vectors
 * (test/fixtures/signature-vectors.json, computed with openssl, never by the project), with the
 * test-only clock RECEIVER_NOW set to the vectors' time; the Node and Python receivers also against
 * the frozen Standard Webhooks `v1,` (openssl) and `v1a,` (Python `cryptography`) vectors, in their
 * VERIFY=standard-webhooks and VERIFY=public-key modes. Every receiver runs for the vectors' server
 * (SERVER_ID) and does not run without one; another server's callback replayed to it is
 * test/integration/receivers-server-binding.test.ts.
 * The live callbacks, from the four processes, are test/e2e/receivers-processes.test.ts.
 * PHP and Mono (C#) come from apt through the test runner (scripts/infra/apt.ts); Go is built once with
 * `go build`, C# once with `mcs`.
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import test from "ava";
import { RECEIVER_PLATFORMS, configurationErrorOf, startPlatformReceiver, stopOnTeardown, type RunningReceiver } from "../helpers/receivers-run.js";

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
/** The server every frozen HMAC vector is for: the receivers run for it (SERVER_ID). */
const VECTORS_SERVER_ID = (JSON.parse(heartVector.body) as { server_id: string }).server_id;

// The tests run one at a time: each starts runtimes (a JVM compiling, Mono) on a machine the suite shares.

for (const platform of Object.keys(RECEIVER_PLATFORMS)) {
  test.serial(
    `${platform} receiver without SERVER_ID does not run: it says to set SERVER_ID${platform === "php" ? " (a script run per request: it answers 500 saying so)" : " and exits"}`,
    async (t) => {
      const said = await configurationErrorOf(platform, { CALLBACK_SECRET: heartVector.secret });
      t.regex(said, platform === "php" ? /^answered 500: .*set SERVER_ID=/s : /^exited: .*set SERVER_ID=/s);
    },
  );

  test.serial(
    `${platform} receiver: every frozen vector verifies at its time, a changed byte, a re-serialised body and the ingest header form are refused, and one heart_id pays once`,
    async (t) => {
      const secrets = [...new Set(vectors.cases.map((c) => c.secret))];
      const r = stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: VECTORS_SERVER_ID, secrets, nowSeconds: heartVector.t }));
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
      const edge = stopOnTeardown(
        t,
        await startPlatformReceiver(platform, { serverId: VECTORS_SERVER_ID, secrets: older, nowSeconds: rotation.t - TOLERANCE_SECONDS }),
      );
      const accepted = await edge.post(Buffer.from(rotation.body, "utf8"), signed(rotation.callback_header));
      t.is(accepted.status, 200, accepted.text);
      t.is((await edge.settledPaid()).length, 1);
      await edge.stop();
      const late = stopOnTeardown(
        t,
        await startPlatformReceiver(platform, { serverId: VECTORS_SERVER_ID, secrets: older, nowSeconds: rotation.t + TOLERANCE_SECONDS + 1 }),
      );
      t.is((await late.post(Buffer.from(rotation.body, "utf8"), signed(rotation.callback_header))).status, 401);
      t.deepEqual(await late.settledPaid(), [], "a stale signature pays nothing");
    },
  );
}

// The Standard Webhooks vectors of test/unit/delivery-sign.test.ts (`v1,`: openssl) and
// test/unit/delivery-sign-v1a.test.ts (`v1a,`: Python's `cryptography`, RFC 8032 test-1 key), computed
// outside the project: webhook-id is the heart_id, webhook-timestamp the body's timestamp.
const SW = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  otherSecret: "whsec_dGVzdC1zZWNyZXQtb2xkLWtleS0zMmJ5dGVzISE=",
  t: 1773145800,
  id: "0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b",
  body: '{"event":"heart.counted","server_id":"7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6","username":"Steve","heart_id":"0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b","period":"2026-03","timestamp":1773145800,"streak_day":3}',
  v1: "q7/+Nqow5KMNZEKS03EnJdofMfRogJbp5K96uXb1He4=",
  whpk: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
  v1a: "X7kfMYeVTyDOPwo4rzEc0Sj+CW3N8QcDy6mlN90O7hPK6ebxp2zDtHE+53K4L/aILCVKiXw545W0RMFvVn8SCg==",
};
/** The server the Standard Webhooks vectors are for. */
const SW_SERVER_ID = (JSON.parse(SW.body) as { server_id: string }).server_id;
const standardHeaders = (signature: string, t = SW.t) => ({ "webhook-id": SW.id, "webhook-timestamp": String(t), "webhook-signature": signature });
const swTampered = Buffer.from(SW.body.replace('"Steve"', '"Steve2"'), "utf8");

/** A webhook-keys.json as the gateway's well-known URL serves it; its keys can change, and its requests are counted. */
interface PublishedKeys {
  url: string;
  publish(publicKeys: string[]): void;
  /** How many times the document was fetched. */
  fetches(): number;
}

async function servePublishedKeys(t: { teardown: (fn: () => Promise<void>) => void }, publicKeys: string[]): Promise<PublishedKeys> {
  let doc = "";
  let fetches = 0;
  const publish = (keys: string[]) => {
    doc = JSON.stringify({
      keys: keys.map((publicKey, i) => ({
        kid: `wk_test${i}`,
        alg: "Ed25519",
        public_key: publicKey,
        created_at: "2026-03-01T00:00:00.000Z",
        expires_at: null,
      })),
    });
  };
  publish(publicKeys);
  const server = http.createServer((_req, res) => {
    fetches += 1;
    res.writeHead(200, { "content-type": "application/json" }).end(doc);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/webhook-keys.json`, publish, fetches: () => fetches };
}
/** `platform`'s receiver in VERIFY=public-key mode (no secret) for the vectors' server, with the keys at `keysUrl`, at the vectors' time. */
async function startPublicKeyReceiver(t: { teardown: (fn: () => Promise<void>) => void }, platform: string, keysUrl: string): Promise<RunningReceiver> {
  const env = { VERIFY: "public-key", WEBHOOK_KEYS_URL: keysUrl };
  return stopOnTeardown(t, await startPlatformReceiver(platform, { serverId: SW_SERVER_ID, secrets: [], nowSeconds: SW.t, env }));
}
/** RFC 8032's test-2 public key: a key that did not sign the vector. */
const OTHER_WHPK = "whpk_PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw=";

for (const platform of ["node", "python"]) {
  test.serial(
    `${platform} receiver, VERIFY=standard-webhooks: the frozen v1 vector verifies with the whsec_ secret (one heart_id pays once); a changed byte, another secret, a stale timestamp and a request without webhook-* headers are refused`,
    async (t) => {
      const r = stopOnTeardown(
        t,
        await startPlatformReceiver(platform, { serverId: SW_SERVER_ID, secrets: [SW.secret], nowSeconds: SW.t, env: { VERIFY: "standard-webhooks" } }),
      );
      const body = Buffer.from(SW.body, "utf8");
      const ok = await r.post(body, standardHeaders(`v1,${SW.v1}`));
      t.is(ok.status, 200, ok.text);
      t.is((await r.post(body, standardHeaders(`v1,${SW.v1}`))).status, 200, "the same heart_id again: a duplicate");
      t.is((await r.post(swTampered, standardHeaders(`v1,${SW.v1}`))).status, 401, "one changed byte");
      t.is((await r.post(body, standardHeaders(`v1a,${SW.v1a}`))).status, 400, "no v1 entry: a v1a does not stand in for the HMAC");
      t.is(
        (await r.post(body, { "x-service-signature": heartVector.callback_header })).status,
        400,
        "the X-Service-Signature alone is not what this mode checks",
      );
      const other = stopOnTeardown(
        t,
        await startPlatformReceiver(platform, { serverId: SW_SERVER_ID, secrets: [SW.otherSecret], nowSeconds: SW.t, env: { VERIFY: "standard-webhooks" } }),
      );
      t.is((await other.post(body, standardHeaders(`v1,${SW.v1}`))).status, 401, "another secret");
      t.deepEqual(await other.settledPaid(), []);
      const late = stopOnTeardown(
        t,
        await startPlatformReceiver(platform, {
          serverId: SW_SERVER_ID,
          secrets: [SW.otherSecret, SW.secret],
          nowSeconds: SW.t + TOLERANCE_SECONDS + 1,
          env: { VERIFY: "standard-webhooks" },
        }),
      );
      t.is((await late.post(body, standardHeaders(`v1,${SW.v1}`))).status, 401, "stale: outside the 300 s window");
      t.deepEqual(await late.settledPaid(), []);
      t.deepEqual(await r.settledPaid(), [`PAID ${SW.id} Steve`]);
    },
  );

  test.serial(
    `${platform} receiver, VERIFY=public-key (no secret): the frozen v1a vector verifies with the key from webhook-keys.json; a changed byte, an unpublished key and a v1-only header are refused`,
    async (t) => {
      const keys = await servePublishedKeys(t, [SW.whpk]);
      const r = await startPublicKeyReceiver(t, platform, keys.url);
      const body = Buffer.from(SW.body, "utf8");
      const ok = await r.post(body, standardHeaders(`v1,${SW.v1} v1a,${SW.v1a}`));
      t.is(ok.status, 200, ok.text);
      t.is((await r.post(body, standardHeaders(`v1a,${SW.v1a}`))).status, 200, "the same heart_id again: a duplicate");
      t.is((await r.post(swTampered, standardHeaders(`v1a,${SW.v1a}`))).status, 401, "one changed byte");
      t.is((await r.post(body, standardHeaders(`v1,${SW.v1}`))).status, 400, "no v1a entry");
      t.is((await r.post(body, standardHeaders(`v1a,${SW.v1a}`, SW.t + 1))).status, 401, "the timestamp is signed too");
      // A list whose published key is another one: nothing verifies.
      const otherKeys = await servePublishedKeys(t, [OTHER_WHPK]);
      const other = await startPublicKeyReceiver(t, platform, otherKeys.url);
      t.is((await other.post(body, standardHeaders(`v1a,${SW.v1a}`))).status, 401, "a key the list does not publish");
      t.deepEqual(await other.settledPaid(), []);
      t.deepEqual(await r.settledPaid(), [`PAID ${SW.id} Steve`]);
    },
  );
}

for (const platform of ["node", "python"]) {
  test.serial(
    `${platform} receiver, VERIFY=public-key: a key published after the receiver fetched its copy (a rotation) verifies after one refetch; further misses within the minute fetch nothing`,
    async (t) => {
      const keys = await servePublishedKeys(t, [OTHER_WHPK]);
      const r = await startPublicKeyReceiver(t, platform, keys.url);
      t.is(keys.fetches(), 1, "fetched once at start");
      keys.publish([SW.whpk, OTHER_WHPK]);
      const body = Buffer.from(SW.body, "utf8");
      const rotated = await r.post(body, standardHeaders(`v1a,${SW.v1a}`));
      t.is(rotated.status, 200, rotated.text);
      t.is(keys.fetches(), 2, "one refetch on the miss");
      for (let i = 0; i < 3; i++) t.is((await r.post(swTampered, standardHeaders(`v1a,${SW.v1a}`))).status, 401);
      t.is(keys.fetches(), 2, "forged callbacks within the minute make no further fetch");
      t.deepEqual(await r.settledPaid(), [`PAID ${SW.id} Steve`]);
    },
  );
}
