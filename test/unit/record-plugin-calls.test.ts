/**
 * The gateway's feed of the plugin activity card (gateway/record-plugin-calls.ts): which answered check/claim
 * calls become records and what they carry (never the key), and the recorder's bounds: batches of at most the
 * batch size, a full buffer drops and counts, a failed send drops and counts.
 */
import test from "ava";
import { createHash } from "node:crypto";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { PluginCallOutcome, type PluginCall } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import { createPluginCallRecorder, toPluginCall } from "../../gateway/record-plugin-calls.js";
import type { VoteClaimResult } from "../../gateway/handle-vote-claim.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics, type Metrics } from "../../services/shared/runtime/metrics.js";

const KEY = "vck_0123456789abcdef0123456789abcdef0123456789a";
const SERVER = "5b0c6c0e-6f43-4c6a-9a3c-2d7a3c0f1e11";
const AT = new Date("2026-11-29T12:00:00Z");
const reply = (body: string): VoteClaimResult["reply"] => ({ status: 200, headers: {}, body });

test("a wrong key is recorded with the key's SHA-256 and the URL's server, never the key; a right key with the server the answer named", (t) => {
  const wrong = toPluginCall({
    path: "/api/votes",
    query: `action=status&key=${KEY}&server=${SERVER}&steamid=123`,
    jsonPath: false,
    result: { reply: reply("0"), outcome: "wrong_key" },
    at: AT,
  });
  t.like(wrong, {
    family: "/api/votes",
    outcome: PluginCallOutcome.WRONG_KEY,
    playerIdKind: PlayerIdKind.STEAM_ID,
    action: "check",
    answer: "0",
    serverId: "",
    urlServerId: SERVER,
  });
  t.is(wrong?.claimKeySha256, createHash("sha256").update(KEY).digest("hex"));
  t.false(JSON.stringify(wrong, (_, v) => (typeof v === "bigint" ? String(v) : v)).includes(KEY), "the key is in no field");

  const paid = toPluginCall({
    path: "/api/votes/json",
    query: `action=claim&key=${KEY}&server=${SERVER}&username=steve`,
    jsonPath: true,
    result: { reply: reply("{}"), outcome: "claim_claimed_now", serverId: SERVER },
    at: AT,
  });
  t.like(paid, { outcome: PluginCallOutcome.OK, answer: "claimed_now", serverId: SERVER, claimKeySha256: "", urlServerId: "", playerId: "steve" });
});

test("calls answered without asking the service (limiter, unknown action, 503) are not recorded; a malformed id is", (t) => {
  const q = `action=status&key=${KEY}&steamid=STEAM_0:1:1`;
  for (const outcome of ["claim_key_guess_limit", "unknown_action", "service_overloaded", "internal_error"]) {
    t.is(toPluginCall({ path: "/api/votes", query: q, jsonPath: false, result: { reply: reply("0"), outcome }, at: AT }), undefined, outcome);
  }
  t.like(toPluginCall({ path: "/api/", query: q, jsonPath: false, result: { reply: reply("0"), outcome: "invalid_player_id" }, at: AT }), {
    outcome: PluginCallOutcome.MALFORMED_ID,
    playerId: "STEAM_0:1:1",
  });
});

function fixture(send: (calls: PluginCall[]) => Promise<void>, opts: { batchMax?: number; bufferMax?: number } = {}) {
  const metrics: Metrics = createMetrics("gateway");
  const recorder = createPluginCallRecorder({
    send: (request) => send(request.calls as PluginCall[]),
    log: createLogger("test", "silent"),
    metrics,
    flushMs: 60_000,
    ...opts,
  });
  const dropped = async (reason: string) => {
    const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === "plugin_calls_dropped_total");
    return (metric?.values as Array<{ labels: { reason?: string }; value: number }> | undefined)?.find((v) => v.labels.reason === reason)?.value ?? 0;
  };
  return { recorder, dropped };
}

const aCall = (i: number) =>
  toPluginCall({
    path: "/api/votes",
    query: `action=status&key=${KEY}&steamid=${i}`,
    jsonPath: false,
    result: { reply: reply("0"), outcome: "check_not_found", serverId: SERVER },
    at: AT,
  }) as PluginCall;

test("a full batch is sent at once, in batches of at most the batch size; a full buffer drops and counts the rest", async (t) => {
  const batches: number[] = [];
  let release: () => void = () => undefined;
  const blocked = new Promise<void>((resolve) => {
    release = resolve;
  });
  const { recorder, dropped } = fixture(
    async (calls) => {
      batches.push(calls.length);
      await blocked;
    },
    { batchMax: 3, bufferMax: 5 },
  );
  for (let i = 0; i < 3; i++) recorder.record(aCall(i));
  t.deepEqual(batches, [3], "a full batch leaves without waiting for the timer");
  // While that send hangs, the buffer takes 5 and drops the rest.
  for (let i = 0; i < 8; i++) recorder.record(aCall(i));
  t.is(await dropped("buffer_full"), 3);
  release();
  await recorder.flush();
  t.deepEqual(batches, [3, 3, 2]);
});

test("a failed send drops its calls and counts them", async (t) => {
  const { recorder, dropped } = fixture(async () => {
    throw new Error("referral service down");
  });
  for (let i = 0; i < 4; i++) recorder.record(aCall(i));
  await recorder.flush();
  t.is(await dropped("send_failed"), 4);
});
