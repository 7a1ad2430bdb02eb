/** The pull phase's backlogs (bench/lib/pull-backlog.ts): heavy-tailed, one server far behind. */
import test from "ava";
import { pullBacklogSizes } from "../../bench/lib/pull-backlog.js";

test("the pull phase's backlogs are heavy-tailed: the first server's is the large one, every other server's the small one", (t) => {
  t.deepEqual(pullBacklogSizes(4, 20_000, 2_000), [20_000, 2_000, 2_000, 2_000]);
  t.deepEqual(pullBacklogSizes(1, 20_000, 2_000), [20_000]);
});

test("a pull phase without a server, or with a negative backlog, is refused", (t) => {
  t.throws(() => pullBacklogSizes(0, 20_000, 2_000), { message: /at least one server/ });
  t.throws(() => pullBacklogSizes(3, -1, 2_000), { message: /counts of hearts/ });
});
