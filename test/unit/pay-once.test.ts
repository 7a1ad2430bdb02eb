/** Pay-once mode's one rule for when a push's reservation is given back (services/delivery/pipeline/pay-once.ts). */
import test from "ava";
import type { AttemptExchange } from "../../services/delivery/pipeline/attempt-exchange.js";
import { isDefiniteFailure } from "../../services/delivery/pipeline/pay-once.js";
import type { AttemptOutcome } from "../../services/delivery/pipeline/transport.js";

const exchange = (over: Partial<AttemptExchange> = {}): AttemptExchange => ({
  target: "http://203.0.113.5/hook",
  request: { headers: {}, body: '{"event":"heart.counted"}' },
  response: null,
  latencyMs: 1,
  error: "x",
  succeeded: false,
  ...over,
});
const failed = (error: string, over: Partial<AttemptExchange> = {}, final?: true): AttemptOutcome => ({
  kind: "failed",
  target: "t",
  statusCode: null,
  latencyMs: 1,
  error,
  exchange: exchange({ error, ...over }),
  ...(final ? { final } : {}),
});
const answered = (status: number) => ({ status, headers: {}, body: "", bodyTruncated: false });

const CASES: Array<[string, AttemptOutcome, boolean]> = [
  ["a 2xx delivered: not a failure", { kind: "delivered", target: "t", statusCode: 200, latencyMs: 1, exchange: exchange({ response: answered(200) }) }, false],
  ["nothing sent (held): definite", { kind: "held", reason: "no secret" }, true],
  [
    "410 Gone: the receiver refused",
    { kind: "gone", target: "t", statusCode: 410, latencyMs: 1, error: "gone", exchange: exchange({ response: answered(410) }) },
    true,
  ],
  ["a 500 answer: the receiver refused", failed("receiver answered 500", { response: answered(500) }), true],
  ["connection refused: nothing reached the receiver", failed("connection failed: ECONNREFUSED"), true],
  ["an unknown name: nothing reached the receiver", failed("connection failed: ENOTFOUND"), true],
  ["a refused address (SSRF guard): nothing sent", failed("refused to connect to 10.0.0.5: loopback, private ..."), true],
  ["a timeout after the request left: in doubt", failed("timed out after 10000 ms"), false],
  ["a reset connection: in doubt", failed("connection failed: ECONNRESET"), false],
  ["Votifier: a vote never sent (no payload)", failed("connect timed out after 5000 ms", { request: { headers: {}, body: "" } }), true],
  ["Votifier: refused before sending, for good", failed("not sent: the username is 20 characters", { request: { headers: {}, body: "" } }, true), true],
  [
    "Votifier: the listener answered an error",
    failed("the Votifier server refused the vote: CorruptedFrameException", {
      response: { status: 0, headers: {}, body: 'VOTIFIER 2 abc\n{"status":"error","cause":"CorruptedFrameException","error":"x"}', bodyTruncated: false },
    }),
    true,
  ],
  [
    "Votifier: no answer after the vote was sent: in doubt",
    failed("timed out after 5000 ms waiting for the answer", { response: { status: 0, headers: {}, body: "VOTIFIER 2 abc", bodyTruncated: false } }),
    false,
  ],
];

for (const [title, outcome, definite] of CASES) {
  test(`isDefiniteFailure: ${title}`, (t) => {
    t.is(isDefiniteFailure(outcome), definite);
  });
}
