/** The test helper that retries a call refused as overloaded, as a client does (test/helpers/retry-overloaded.ts). */
import { Code, ConnectError } from "@connectrpc/connect";
import test from "ava";
import { retryOverloaded } from "../helpers/retry-overloaded.js";

const refusal = (code: Code, kind: string) => new ConnectError("refused", code, new Headers({ "x-error-kind": kind, "retry-after": "0" }));

test("an overloaded refusal is tried again after its hint; the answer that follows is returned", async (t) => {
  let calls = 0;
  const answer = await retryOverloaded(async () => {
    calls += 1;
    if (calls < 3) throw refusal(Code.ResourceExhausted, "overloaded");
    return "counted";
  });
  t.is(answer, "counted");
  t.is(calls, 3);
});

test("any other refusal, a too-large message's resource_exhausted included, is the caller's at once", async (t) => {
  for (const error of [refusal(Code.ResourceExhausted, "too_large"), refusal(Code.InvalidArgument, "overloaded"), new Error("down")]) {
    let calls = 0;
    const thrown = await t.throwsAsync(
      retryOverloaded(async () => {
        calls += 1;
        throw error;
      }),
    );
    t.is(thrown, error);
    t.is(calls, 1);
  }
});
