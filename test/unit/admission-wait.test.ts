/**
 * Issue #8: the busiest hour must not queue votes (or referral events) for seconds; overload is
 * answered before any internal timeout fires. Both request-path queues take their admission wait
 * from the one constant, and it is well under a second.
 */
import test from "ava";
import { RPC_TIMEOUT_MS } from "../../gateway/server.js";
import { CAST_HEART_BATCH_DEFAULTS } from "../../services/hearts/cast-heart-batch.js";
import { ADMISSION_MAX_QUEUE_WAIT_MS, ADMISSION_MAX_TOTAL_WAIT_MS } from "../../services/shared/runtime/group-commit.js";

test("CastHeart refuses a vote that waited for capacity well under a second, from the one admission constant", (t) => {
  t.is(CAST_HEART_BATCH_DEFAULTS.maxQueueWaitMs, ADMISSION_MAX_QUEUE_WAIT_MS);
  t.true(ADMISSION_MAX_QUEUE_WAIT_MS > 0 && ADMISSION_MAX_QUEUE_WAIT_MS < 1_000);
});

test("CastHeart bounds every caller's whole wait, behind its own voter, IP or subnet too, and holds each address to a share of the queue", (t) => {
  t.is(CAST_HEART_BATCH_DEFAULTS.maxTotalWaitMs, ADMISSION_MAX_TOTAL_WAIT_MS);
  t.true(
    ADMISSION_MAX_TOTAL_WAIT_MS >= ADMISSION_MAX_QUEUE_WAIT_MS && ADMISSION_MAX_TOTAL_WAIT_MS < RPC_TIMEOUT_MS / 2,
    "answered far inside the gateway's deadline",
  );
  t.true(CAST_HEART_BATCH_DEFAULTS.maxQueuedPerAddress * 8 <= CAST_HEART_BATCH_DEFAULTS.maxQueue, "one address holds a small share");
  t.true(CAST_HEART_BATCH_DEFAULTS.maxQueuedPerServer < CAST_HEART_BATCH_DEFAULTS.maxQueue, "one server cannot fill the queue");
});
