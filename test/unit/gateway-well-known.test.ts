import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { JWKS_PATH, WEBHOOK_KEYS_PATH, WELL_KNOWN_CACHE_MS, createWellKnownKeys } from "../../gateway/handle-well-known.js";
import { ListWebhookSigningKeysResponseSchema } from "../../gen/proto/servers/v1/servers_pb.js";

const CREATED = new Date("2026-11-26T03:00:00.000Z");
const ANSWER = create(ListWebhookSigningKeysResponseSchema, {
  keys: [
    { kid: "wk_new", alg: "Ed25519", publicKey: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", createdAt: timestampFromDate(CREATED), current: true },
    {
      kid: "wk_old",
      alg: "Ed25519",
      publicKey: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
      createdAt: timestampFromDate(CREATED),
      expiresAt: timestampFromDate(new Date("2026-12-03T03:00:00.000Z")),
    },
  ],
});

test("webhook-keys.json: the named fields only, the signing key first, expires_at null while it signs; Cache-Control public", async (t) => {
  const keys = createWellKnownKeys({ listKeys: async () => ANSWER, now: () => CREATED });
  const { reply } = await keys.reply(WEBHOOK_KEYS_PATH);
  t.is(reply.status, 200);
  t.is(reply.headers?.["cache-control"], "public, max-age=300");
  t.deepEqual(reply.body, {
    keys: [
      {
        kid: "wk_new",
        alg: "Ed25519",
        public_key: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
        created_at: "2026-11-26T03:00:00.000Z",
        expires_at: null,
      },
      {
        kid: "wk_old",
        alg: "Ed25519",
        public_key: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
        created_at: "2026-11-26T03:00:00.000Z",
        expires_at: "2026-12-03T03:00:00.000Z",
      },
    ],
  });
});

test("jwks.json: OKP/Ed25519 with x = the raw key in base64url (RFC 8037)", async (t) => {
  const keys = createWellKnownKeys({ listKeys: async () => ANSWER, now: () => CREATED });
  const { reply } = await keys.reply(JWKS_PATH);
  t.deepEqual((reply.body as { keys: unknown[] }).keys[0], {
    kty: "OKP",
    crv: "Ed25519",
    alg: "EdDSA",
    use: "sig",
    kid: "wk_new",
    x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
  });
});

test("the referral service's answer is reused for WELL_KNOWN_CACHE_MS; a failure is the public 500 with the cause kept, and not cached", async (t) => {
  let at = CREATED.getTime();
  let calls = 0;
  let fail = false;
  const keys = createWellKnownKeys({
    listKeys: async () => {
      calls++;
      if (fail) throw new ConnectError("broken", Code.Internal);
      return ANSWER;
    },
    now: () => new Date(at),
  });
  await keys.reply(WEBHOOK_KEYS_PATH);
  await keys.reply(JWKS_PATH);
  t.is(calls, 1);
  at += WELL_KNOWN_CACHE_MS;
  fail = true;
  const failed = await keys.reply(WEBHOOK_KEYS_PATH);
  t.is(failed.reply.status, 500);
  t.deepEqual(failed.reply.body, { error: "internal error" });
  t.truthy(failed.cause);
  fail = false;
  t.is((await keys.reply(WEBHOOK_KEYS_PATH)).reply.status, 200);
  t.is(calls, 3);
});

test("the referral service unreachable: the public 503 with Retry-After (the one error table's answer), not cached", async (t) => {
  let down = true;
  const keys = createWellKnownKeys({
    listKeys: async () => {
      if (down) throw new ConnectError("down", Code.Unavailable);
      return ANSWER;
    },
    now: () => CREATED,
  });
  const failed = await keys.reply(JWKS_PATH);
  t.is(failed.reply.status, 503);
  t.truthy(failed.reply.headers?.["retry-after"]);
  down = false;
  t.is((await keys.reply(JWKS_PATH)).reply.status, 200);
});
