import test from "ava";
import { pino } from "pino";
import { Writable } from "node:stream";
import { createServerDirectory } from "../../gateway/server-directory.js";

/** A ListServerIds over `ids` (pages of 2, the cursor an index), counting its calls. */
function listing(ids: string[]) {
  const calls: string[] = [];
  let failing = false;
  return {
    calls,
    fail(on: boolean) {
      failing = on;
    },
    async listPage(cursor: string) {
      calls.push(cursor);
      if (failing) throw new Error("unavailable");
      const from = cursor === "" ? 0 : Number(cursor);
      const serverIds = ids.slice(from, from + 2);
      return { serverIds, nextCursor: String(from + serverIds.length), more: from + 2 < ids.length };
    },
  };
}

function captured() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: "info" }, sink), lines };
}

test("the directory reads every server id at start, page by page, then only the servers created since", async (t) => {
  const ids = ["a", "b", "c"];
  const list = listing(ids);
  let clock = 0;
  const directory = createServerDirectory({ listPage: list.listPage, log: captured().log, now: () => clock, catchUpIntervalMs: 1_000 });
  await directory.catchUp(0);
  t.deepEqual(list.calls, ["", "2"]);
  t.true(["a", "b", "c"].every((id) => directory.has(id)));
  t.false(directory.has("made-up"));
  ids.push("d");
  clock = 1_000;
  await directory.catchUp(1_000);
  t.deepEqual(list.calls, ["", "2", "3"], "the next read goes on from the cursor");
  t.true(directory.has("d"));
});

test("reads on demand are shared and at most one per interval: a thousand unknown ids cost one read", async (t) => {
  const list = listing(["a"]);
  let clock = 0;
  const directory = createServerDirectory({ listPage: list.listPage, log: captured().log, now: () => clock, catchUpIntervalMs: 50 });
  await directory.catchUp(0);
  clock = 10;
  const waiting = Promise.all(Array.from({ length: 1_000 }, () => directory.catchUp(10)));
  t.is(list.calls.length, 1, "within the interval: none yet");
  clock = 50;
  await waiting;
  t.is(list.calls.length, 2);
});

test("a key lookup that found the server teaches the directory; a failed read keeps what is known, logged once per outage", async (t) => {
  const list = listing(["a"]);
  const { log, lines } = captured();
  let clock = 0;
  const directory = createServerDirectory({ listPage: list.listPage, log, now: () => clock, catchUpIntervalMs: 1 });
  directory.learn("learned");
  t.true(directory.has("learned"));
  list.fail(true);
  await directory.catchUp(0);
  clock = 10;
  await directory.catchUp(10);
  t.true(directory.has("learned"));
  t.is(lines.filter((l) => l.level === 40).length, 1);
  list.fail(false);
  clock = 20;
  await directory.catchUp(20);
  t.true(directory.has("a"));
  t.is(lines.filter((l) => l.level === 30).length, 1, "and the recovery once");
});
