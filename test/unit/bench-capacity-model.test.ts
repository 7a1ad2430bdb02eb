/** The capacity model's arithmetic (bench/lib/capacity-model.ts) on a small run fixture built here. */
import test from "ava";
import {
  type CapacityAssumptions,
  type CapacityRun,
  cpuPerVote,
  readCapacityInputs,
  sizeStorage,
  sizeVolume,
  votesPerSecond,
} from "../../bench/lib/capacity-model.js";

const ASSUMPTIONS: CapacityAssumptions = {
  servers: 10_000,
  votesPerMonth: [1_000_000, 100_000_000],
  peakOverAverage: 10,
  daysPerMonth: 30,
  targetUtilisation: 0.5,
  ingestEventsPerVote: 0.5,
  storageYears: [1, 3],
  retentionDays: 30,
  retainedTables: ["deliveries"],
  relayShards: 16,
  topicPartitions: 6,
};

const spread = (median: number) => ({ median });

/** A --history run: two CastHeart windows on the history side (and one on the empty side, to be ignored), a drain and an ingest figure set. */
function fixture(tables?: Record<string, { bytes: number; rows: number }>): CapacityRun {
  return {
    summary: { "1": {} },
    history: {
      summary: {
        "1": {
          "callbacks.cpuMsPerCallback.delivery": spread(2),
          "callbacks.cpuMsPerCallback.postgres": spread(0.5),
          "callbacks.cpuMsPerCallback.receiver-1": spread(9),
          "ingest.gateway.cpuMsPerEvent.gateway": spread(1),
          "ingest.gateway.cpuMsPerEvent.postgres": spread(0.4),
        },
      },
      template: { sizeBytes: 4_000_000, rows: { hearts: 1000 }, ...(tables ? { tables } : {}) },
    },
    details: [
      {
        phase: "hearts",
        database: "history",
        what: "fresh voters over 50 servers",
        window: { cpuMs: { "referral-service": 600, postgres: 300, "load generator": 999 } },
        load: { requests: 1000 },
      },
      {
        phase: "hearts",
        database: "history",
        what: "fresh voters over 50 servers",
        window: { cpuMs: { "referral-service": 400, postgres: 100 } },
        load: { requests: 1000 },
      },
      {
        phase: "hearts",
        database: "history",
        what: "fresh voters over 50 servers, relay and delivery running",
        window: { cpuMs: { delivery: 5000 } },
        load: { requests: 10 },
      },
      { phase: "hearts", database: "empty", what: "fresh voters over 50 servers", window: { cpuMs: { "referral-service": 9000 } }, load: { requests: 1 } },
    ],
  };
}

test("CPU per vote = CastHeart (its windows' CPU over their hearts) + a callback + the ingest share, per process kind, harness processes left out", (t) => {
  const inputs = readCapacityInputs(fixture());
  t.is(inputs.castHeart["referral-service"], 0.5); // (600 + 400) / 2000
  t.is(inputs.castHeart.postgres, 0.2); // (300 + 100) / 2000
  const perVote = cpuPerVote(inputs, ASSUMPTIONS);
  t.is(perVote["referral-service"], 0.5);
  t.is(perVote.postgres, 0.2 + 0.5 + 0.5 * 0.4);
  t.is(perVote.delivery, 2);
  t.is(perVote.gateway, 0.5);
  t.false("load generator" in perVote);
  t.false("receiver-1" in perVote);
});

test("peak votes/s = votes a month / 30 / 86,400 x 10; cores = CPU ms per vote x peak / utilisation; Node processes = cores rounded up, at least one", (t) => {
  const rate = votesPerSecond(100_000_000, ASSUMPTIONS);
  t.is(Math.round(rate.average * 1000) / 1000, 38.58);
  t.is(Math.round(rate.peak * 100) / 100, 385.8);
  const perVote = { gateway: 0, "referral-service": 1, relay: 0, delivery: 4, postgres: 2, kafka: 0 };
  const s = sizeVolume(100_000_000, perVote, ASSUMPTIONS);
  t.is(Math.round(s.cores.delivery * 1000) / 1000, 3.086); // 4 ms x 385.8/s / 0.5
  t.is(Math.round(s.cores.postgres * 1000) / 1000, 1.543);
  t.is(s.processes.delivery, 4);
  t.is(s.processes.gateway, 1);
  t.is(s.processes.postgres, undefined);
  t.is(s.partitions, 6);
  t.is(Math.round(s.totalCores * 1000) / 1000, 5.401);
  const big = sizeVolume(100_000_000, { ...perVote, delivery: 10 }, ASSUMPTIONS);
  t.is(big.processes.delivery, 8);
  t.is(big.partitions, 8, "more delivery processes than partitions -> the topic needs as many partitions");
});

test("storage: bytes per heart of each table x the hearts of the years; a retained table holds only the retention's days", (t) => {
  const inputs = readCapacityInputs(fixture({ hearts: { bytes: 200_000, rows: 1000 }, deliveries: { bytes: 300_000, rows: 1000 } }));
  t.true(inputs.perTable);
  t.deepEqual(inputs.bytesPerHeart, { hearts: 200, deliveries: 300 });
  const s = sizeStorage(1_000_000, 3, inputs.bytesPerHeart, ASSUMPTIONS);
  t.is(s.withoutRetentionBytes, 500 * 36_000_000);
  t.is(s.withRetentionBytes, 200 * 36_000_000 + 300 * 1_000_000);
});

test("a run without per-table sizes falls back to the database size over its hearts, and retention then bounds nothing", (t) => {
  const inputs = readCapacityInputs(fixture());
  t.false(inputs.perTable);
  const s = sizeStorage(1_000_000, 1, inputs.bytesPerHeart, ASSUMPTIONS);
  t.is(s.withoutRetentionBytes, 4000 * 12_000_000);
  t.is(s.withRetentionBytes, s.withoutRetentionBytes);
});

test("a run without --history or without a needed phase is refused with what is missing", (t) => {
  const run = fixture();
  t.throws(() => readCapacityInputs({ ...run, history: undefined }), { message: /--history/ });
  t.throws(() => readCapacityInputs({ ...run, details: [] }), { message: /no hearts phase/ });
});
