/** An outbox row's data for tests that only need rows to exist (one topic, key and shard; a 1-byte payload). */
export function testOutboxRow(times: { publishedAt?: Date | null; createdAt?: Date } = {}) {
  return {
    topic: "t",
    key: "k",
    type: "test.event",
    payload: Buffer.from("x"),
    shard: 0,
    publishedAt: times.publishedAt ?? null,
    ...(times.createdAt ? { createdAt: times.createdAt } : {}),
  };
}
