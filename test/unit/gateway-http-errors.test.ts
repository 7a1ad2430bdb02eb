import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, IllegalTransition, toConnectError } from "../../services/shared/rpc/errors.js";
import { fromRpcError } from "../../gateway/http-errors.js";

const replyOf = (error: unknown) => fromRpcError(error).reply;

test("unknown_token -> 404 `unknown referral token for this server`", (t) => {
  t.deepEqual(replyOf(toConnectError(new DomainError("unknown_token", "x"))), { status: 404, body: { error: "unknown referral token for this server" } });
});

test("unknown_server -> 404 `unknown server`", (t) => {
  t.deepEqual(replyOf(toConnectError(new DomainError("unknown_server", "x"))), { status: 404, body: { error: "unknown server" } });
});

test("referrals_disabled -> 404 `referrals not enabled for this server`", (t) => {
  t.deepEqual(replyOf(toConnectError(new DomainError("referrals_disabled", "x"))), {
    status: 404,
    body: { error: "referrals not enabled for this server" },
  });
});

test("illegal_transition -> 422 `invalid state transition` with from and event", (t) => {
  t.deepEqual(replyOf(toConnectError(new IllegalTransition("clicked", "qualified"))), {
    status: 422,
    body: { error: "invalid state transition", from: "clicked", event: "qualified" },
  });
});

test("invalid_argument -> 400 with the domain error's caller-safe message", (t) => {
  t.deepEqual(replyOf(toConnectError(new DomainError("invalid_argument", "referee_identity is too long"))), {
    status: 400,
    body: { error: "referee_identity is too long" },
  });
});

// The referral service unreachable (Unavailable) is the retryable 503 + Retry-After since issue 18: test/integration/gateway-service-down.test.ts.
test("anything else -> 500 `internal error`, with the cause kept for the log", (t) => {
  const causes: unknown[] = [
    new ConnectError("deadline", Code.DeadlineExceeded),
    new ConnectError("internal error", Code.Internal),
    new ConnectError("not found without a kind", Code.NotFound),
    new ConnectError("invalid state transition", Code.FailedPrecondition), // 422 without from/event
    toConnectError(new DomainError("conflict", "x")),
    toConnectError(new DomainError("not_found", "x")),
    new Error("boom"),
    "a string",
  ];
  for (const cause of causes) {
    const mapped = fromRpcError(cause);
    t.deepEqual(mapped.reply, { status: 500, body: { error: "internal error" } });
    t.is(mapped.cause, cause);
  }
});
