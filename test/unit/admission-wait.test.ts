/**
 * Issue #8: the busiest hour must not queue votes (or referral events) for seconds; overload is
 * answered before any internal timeout fires. Both request-path queues take their admission wait
 * from the one constant, and it is well under a second.
 */
import test from "ava";
import { CAST_HEART_BATCH_DEFAULTS } from "../../services/hearts/cast-heart-batch.js";
import { ADMISSION_MAX_QUEUE_WAIT_MS } from "../../services/shared/group-commit.js";

test("CastHeart refuses a vote that waited for capacity well under a second, from the one admission constant", (t) => {
  t.is(CAST_HEART_BATCH_DEFAULTS.maxQueueWaitMs, ADMISSION_MAX_QUEUE_WAIT_MS);
  t.true(ADMISSION_MAX_QUEUE_WAIT_MS > 0 && ADMISSION_MAX_QUEUE_WAIT_MS < 1_000);
});
