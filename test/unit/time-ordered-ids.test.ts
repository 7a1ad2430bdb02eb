/**
 * Time-ordered ids (uuid version 7): the rows of the big tables the application names get keys that append at the
 * right edge of their primary-key index, not on a random leaf.
 */
import test from "ava";
import { isUuid, timeOrderedId } from "../../services/shared/values/ids.js";

test("a time-ordered id is a uuid of version 7 and variant 10, its first 48 bits the milliseconds it was made at", (t) => {
  const at = Date.UTC(2026, 10, 29, 16, 0, 0, 123);
  const id = timeOrderedId(at);
  t.true(isUuid(id));
  t.is(id[14], "7", "version 7");
  t.true(["8", "9", "a", "b"].includes(id[19]!), "variant 10");
  t.is(Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16), at);
});

test("ids of later milliseconds sort after earlier ones, as text and as uuids; ids of one millisecond differ", (t) => {
  const ids = [0, 1, 2, 1000, 86_400_000].map((d) => timeOrderedId(Date.UTC(2026, 0, 1) + d));
  t.deepEqual([...ids].sort(), ids);
  const same = new Set(Array.from({ length: 1000 }, () => timeOrderedId(Date.UTC(2026, 0, 1))));
  t.is(same.size, 1000, "74 random bits");
});
