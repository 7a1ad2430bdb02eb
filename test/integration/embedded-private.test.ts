/**
 * Embedded mode is private to the user running it: the PGlite database listens on a Unix socket
 * in a 0700 directory (no TCP port another local user could reach; PGlite has no passwords), its
 * data files are 0600 in 0700 directories, and the in-process bus keeps memory bounded.
 */
import test from "ava";
import { chmodSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { startEmbeddedPostgres } from "../../scripts/infra/embedded-postgres.js";
import { createMemoryBus } from "../../services/shared/adapters/memory-bus.js";
import { eventually } from "../helpers/eventually.js";
import { openToOthers } from "../helpers/file-modes.js";

test("embedded PostgreSQL listens on a Unix socket in a 0700 directory, never on TCP, and answers through its URL", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "embedded-private-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const embedded = await startEmbeddedPostgres(join(root, "pg"));
  try {
    t.is(embedded.port, undefined, "no TCP port");
    const url = new URL(embedded.url);
    const socketDir = url.searchParams.get("host") ?? "";
    t.true(socketDir.startsWith("/"), embedded.url);
    t.is(statSync(socketDir).mode & 0o777, 0o700, "only this user may enter the socket's directory");
    t.true(statSync(embedded.socketPath ?? "").isSocket());
    const client = new pg.Client({ connectionString: embedded.url });
    await client.connect();
    const { rows } = await client.query<{ one: number }>("SELECT 1 AS one");
    await client.end();
    t.deepEqual(rows, [{ one: 1 }]);
  } finally {
    await embedded.stop();
  }
});

test("embedded PostgreSQL data files are private: 0700 directories and 0600 files, also for a data directory made world-readable before", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "embedded-private-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const dataDir = join(root, "pg");
  const first = await startEmbeddedPostgres(dataDir, { templateCacheDir: false });
  await first.stop();
  t.deepEqual(openToOthers(dataDir), []);
  // A data directory written by an older version (PGlite creates files 0666) is made private on start.
  chmodSync(dataDir, 0o777);
  chmodSync(join(dataDir, "PG_VERSION"), 0o666);
  const second = await startEmbeddedPostgres(dataDir);
  try {
    t.is(statSync(dataDir).mode & 0o777, 0o700);
    t.is(statSync(join(dataDir, "PG_VERSION")).mode & 0o777, 0o600);
  } finally {
    await second.stop();
  }
  t.deepEqual(openToOthers(dataDir), []);
});

test("in-process bus: acknowledged messages are dropped, so 50,000 messages through a consumer leave almost nothing in memory", async (t) => {
  const bus = createMemoryBus({ maxRetainedMessages: 1_000 });
  let handled = 0;
  const sub = await bus.subscribe({ groupId: "g", topics: ["t"], handler: async () => void handled++ });
  for (let i = 0; i < 50_000; i += 500) {
    await eventually(() => bus.retainedMessages("t") + 500 <= 1_000, { intervalMs: 1 });
    await bus.publish(
      "t",
      Array.from({ length: 500 }, (_, j) => ({ key: "k", value: Buffer.from(String(i + j)) })),
    );
  }
  await eventually(() => handled === 50_000);
  await sub.stop();
  await bus.close();
  t.true(bus.retainedMessages("t") <= 256, `retained: ${bus.retainedMessages("t")}`);
});

test("in-process bus: a topic no group reads keeps only its newest messages", async (t) => {
  const bus = createMemoryBus({ maxRetainedMessages: 100 });
  for (let i = 0; i < 1_000; i++) await bus.publish("unread", [{ key: "k", value: Buffer.from(String(i)) }]);
  t.is(bus.retainedMessages("unread"), 100);
  await bus.close();
});

test("in-process bus: a lagging group makes publish refuse (the relay retries) instead of growing; nothing is lost and order holds", async (t) => {
  const bus = createMemoryBus({ maxRetainedMessages: 10, retryDelayMs: 5 });
  const seen: string[] = [];
  let open = false;
  const sub = await bus.subscribe({
    groupId: "slow",
    topics: ["t"],
    handler: async (m) => {
      if (!open) throw new Error("receiver down");
      seen.push(Buffer.from(m.value).toString());
    },
  });
  for (let i = 0; i < 10; i++) await bus.publish("t", [{ key: "k", value: Buffer.from(String(i)) }]);
  await t.throwsAsync(() => bus.publish("t", [{ key: "k", value: Buffer.from("10") }]), { message: /not yet acknowledged/ });
  t.is(bus.retainedMessages("t"), 10);
  open = true;
  await eventually(() => seen.length === 10);
  await bus.publish("t", [{ key: "k", value: Buffer.from("10") }]);
  await eventually(() => seen.length === 11);
  t.deepEqual(
    seen,
    Array.from({ length: 11 }, (_, i) => String(i)),
  );
  await sub.stop();
  await bus.close();
});

test("in-process bus: a second group holds retention until it has acknowledged too", async (t) => {
  const bus = createMemoryBus({ maxRetainedMessages: 1_000 });
  const a = await bus.subscribe({ groupId: "a", topics: ["t"], handler: async () => {} });
  let bOpen = false;
  const b = await bus.subscribe({
    groupId: "b",
    topics: ["t"],
    handler: async () => {
      if (!bOpen) throw new Error("b is behind");
    },
  });
  await bus.publish(
    "t",
    Array.from({ length: 300 }, () => ({ key: "k", value: Buffer.from("x") })),
  );
  t.is(bus.retainedMessages("t"), 300, "b has not acknowledged");
  bOpen = true;
  await eventually(() => bus.retainedMessages("t") === 0);
  await a.stop();
  await b.stop();
  await bus.close();
  t.pass();
});
