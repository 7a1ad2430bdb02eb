import test from "ava";
import { MASKED_VALUE, maskSecretValues, toStoredExchange, type AttemptExchange } from "../../services/delivery/pipeline/attempt-exchange.js";
import { GONE_ERROR, toHttpExchange } from "../../services/delivery/pipeline/send-callback.js";

const request = {
  url: "https://game.example/hook",
  body: '{"event":"heart.test"}',
  headers: { "Content-Type": "application/json", "X-Service-Signature": "t=1,v1=ab" },
};

test("maskSecretValues hides whsec_ and rsec_ values wherever they stand, and nothing else", (t) => {
  t.is(maskSecretValues("key whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw= end"), `key whsec_${MASKED_VALUE} end`);
  t.is(maskSecretValues('{"s":"rsec_abc-DEF_123"}'), `{"s":"rsec_${MASKED_VALUE}"}`);
  t.is(maskSecretValues("t=1700000000,v1=0a1b"), "t=1700000000,v1=0a1b", "a signature is not a secret");
  t.is(maskSecretValues("nowhsec_x"), "nowhsec_x", "only a whole word is a secret prefix");
});

test("toStoredExchange keeps the signature header, hides receiver credentials (cookies, authorization) and secret values", (t) => {
  const exchange: AttemptExchange = {
    target: request.url,
    request: { headers: request.headers, body: request.body },
    response: {
      status: 401,
      headers: { "Set-Cookie": "sid=1", "www-authenticate": "Bearer", "x-debug": "used whsec_abc" },
      body: "bad rsec_zzz",
      bodyTruncated: false,
    },
    latencyMs: 3,
    error: "receiver answered 401",
    succeeded: false,
  };
  const stored = toStoredExchange(exchange);
  t.is(stored.request.headers["X-Service-Signature"], "t=1,v1=ab");
  t.deepEqual(stored.response?.headers, { "Set-Cookie": MASKED_VALUE, "www-authenticate": "Bearer", "x-debug": `used whsec_${MASKED_VALUE}` });
  t.is(stored.response?.body, `bad rsec_${MASKED_VALUE}`);
  t.is(exchange.response?.body, "bad rsec_zzz", "the input is not changed");
});

test("toHttpExchange: the request as sent (with its Content-Length); no response when none arrived; 410 carries the disable text", (t) => {
  const refused = toHttpExchange(request, { kind: "failed", error: "connection failed: ECONNREFUSED", latencyMs: 1 });
  t.is(refused.request.headers["Content-Length"], String(Buffer.byteLength(request.body)));
  t.is(refused.response, null);
  t.false(refused.succeeded);
  const response = { status: 410, headers: {}, body: "gone", bodyTruncated: false };
  const gone = toHttpExchange(request, { kind: "gone", status: 410, latencyMs: 2, responseBody: "gone", response });
  t.is(gone.error, GONE_ERROR);
  t.deepEqual(gone.response, response);
  const ok = toHttpExchange(request, { kind: "delivered", status: 204, latencyMs: 2, responseBody: "", response: { ...response, status: 204 } });
  t.true(ok.succeeded);
  t.is(ok.error, null);
});
