/** Issue 29's targets read from a run's results (bench/lib/targets.ts), on small fixtures built here. */
import test from "ava";
import { evaluateTargets, renderTargets, type RunSummary, type TargetRow } from "../../bench/lib/targets.js";

/** A summary of one instance count from plain numbers. */
const summaryOf = (figures: Record<string, number>): RunSummary => ({
  "1": Object.fromEntries(Object.entries(figures).map(([k, median]) => [k, { median }])),
});

const rowOf = (rows: TargetRow[], target: string): TargetRow => {
  const row = rows.find((r) => r.target === target);
  if (!row) throw new Error(`no row ${target}`);
  return row;
};

test("CPU per request on the history database within 1.25x of the empty one -> met; above -> not met", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({ "hearts.many.cpuMsPerRequest.all": 1, "claims.claim.cpuMsPerRequest.all": 1 }),
    history: { summary: summaryOf({ "hearts.many.cpuMsPerRequest.all": 1.25, "claims.claim.cpuMsPerRequest.all": 1.3 }) },
  });
  t.is(rowOf(rows, "CPU per request: CastHeart over many servers").verdict, "met");
  const claim = rowOf(rows, "CPU per request: claim");
  t.is(claim.verdict, "not met");
  t.is(claim.measured, "1.30x (1.30 / 1.00 ms)");
});

test("a hot path the run has no figure for, or a run without --history, -> not measured, never met", (t) => {
  const withHistory = evaluateTargets({ summary: summaryOf({}), history: { summary: summaryOf({}) } });
  t.is(rowOf(withHistory, "CPU per request: callbacks drained from a backlog (delivery)").measured, "not measured in this run");
  const noHistory = evaluateTargets({ summary: summaryOf({ "hearts.many.cpuMsPerRequest.all": 1, "hearts.many.rps": 3000 }) });
  const cpu = rowOf(noHistory, "CPU per request: CastHeart over many servers");
  t.is(cpu.verdict, "not measured");
  t.is(cpu.measured, "not measured in this run (no --history)");
});

test("the pull API (the pull phase): list and claim each a CPU ratio history / empty within 1.25x -> met, above -> not met", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({ "pull.list.cpuMsPerRequest.all": 2, "pull.claim.cpuMsPerRequest.all": 4 }),
    history: { summary: summaryOf({ "pull.list.cpuMsPerRequest.all": 2.5, "pull.claim.cpuMsPerRequest.all": 5.2 }) },
  });
  const list = rowOf(rows, "CPU per request: pull list");
  t.is(list.verdict, "met");
  t.is(list.measured, "1.25x (2.50 / 2.00 ms)");
  t.is(rowOf(rows, "CPU per request: pull claim (a page listed, then claimed)").verdict, "not met");
  const noPhase = evaluateTargets({ summary: summaryOf({}), history: { summary: summaryOf({}) } });
  t.is(rowOf(noPhase, "CPU per request: pull list").measured, "not measured in this run");
});

test("ingest of `qualified` and `reversed` (the lifecycle phase): a CPU ratio within 1.25x -> met, above -> not met", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({ "lifecycle.qualified.cpuMsPerRequest.all": 2, "lifecycle.reversed.cpuMsPerRequest.all": 2 }),
    history: { summary: summaryOf({ "lifecycle.qualified.cpuMsPerRequest.all": 2.4, "lifecycle.reversed.cpuMsPerRequest.all": 2.6 }) },
  });
  t.is(rowOf(rows, "CPU per request: ingest `qualified`, c=32").verdict, "met");
  t.is(rowOf(rows, "CPU per request: ingest `reversed`, c=32").verdict, "not met");
});

const HOT_OWN = "An address with 100,000 earlier clicks: its own events' CPU per request (ingest-hot)";
const HOT_OTHERS = "Ordinary senders' events on the same server (ingest-hot)";

test("the hot address's own events and ordinary senders' events: each CPU ratio history / empty within 1.25x -> met, above -> not met", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({ "ingestHot.hotAddress.cpuMsPerRequest.all": 2, "ingestHot.otherSenders.cpuMsPerRequest.all": 2 }),
    history: { summary: summaryOf({ "ingestHot.hotAddress.cpuMsPerRequest.all": 2.6, "ingestHot.otherSenders.cpuMsPerRequest.all": 2.5 }) },
  });
  const own = rowOf(rows, HOT_OWN);
  t.is(own.verdict, "not met");
  t.is(own.measured, "1.30x (2.60 / 2.00 ms)");
  t.is(own.bound, "history / empty <= 1.25x");
  t.is(rowOf(rows, HOT_OTHERS).verdict, "met");
});

test("the hot address's targets without the ingest-hot figures, or without --history -> not measured", (t) => {
  const noPhase = evaluateTargets({ summary: summaryOf({}), history: { summary: summaryOf({}) } });
  t.is(rowOf(noPhase, HOT_OWN).verdict, "not measured");
  t.is(rowOf(noPhase, HOT_OWN).measured, "not measured in this run");
  const noHistory = evaluateTargets({ summary: summaryOf({ "ingestHot.hotAddress.cpuMsPerRequest.all": 2, "ingestHot.otherSenders.cpuMsPerRequest.all": 2 }) });
  t.is(rowOf(noHistory, HOT_OWN).measured, "not measured in this run (no --history)");
  t.is(rowOf(noHistory, HOT_OTHERS).verdict, "not measured");
});

test("throughput and latency targets are read on the history side: each bound met, missed, or not measured when the phase did not run", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({ "ingest.ratio": 0.95, "callbacks.drain.rps": 9000 }),
    settings: { lowConcurrency: 4 },
    history: {
      summary: summaryOf({
        "ingest.ratio": 0.89,
        "ingest.c4.ratio": 0.6,
        "callbacks.drain.rps": 5000,
        "callbacks.ratio": 0.19,
        "hearts.withDelivery.rps": 2500,
        "latency.idle.p50": 5.1,
      }),
    },
  });
  t.is(rowOf(rows, "Ingest `registered` at c=32 / the one-statement raw server").verdict, "not met");
  t.is(rowOf(rows, "Ingest `registered` at c=4 / the one-statement raw server").verdict, "met");
  t.is(rowOf(rows, "Callbacks drained from a backlog").verdict, "met");
  t.is(rowOf(rows, "Callbacks drained / the best raw keep-alive sender").verdict, "not met");
  t.is(rowOf(rows, "CastHeart with delivery running").verdict, "met");
  t.is(rowOf(rows, "Vote -> callback p50, idle").verdict, "not met");
  const p99 = rowOf(rows, "Vote -> callback p99 at 1,000 hearts/s offered");
  t.is(p99.verdict, "not measured");
  t.is(p99.measured, "not measured in this run");
});

test("the rendered table has one line per target and counts each verdict", (t) => {
  const rows = evaluateTargets({ summary: summaryOf({ "hearts.withDelivery.rps": 3000 }) });
  const md = renderTargets(rows, false);
  t.is(md.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| target") && !l.startsWith("| ---")).length, rows.length);
  t.regex(md, /1 met, 0 not met, 27 not measured/);
  t.regex(md, /\| CastHeart with delivery running \| 3,000 \/s \| >= 2,500 \/s \| \*\*met\*\* \|/);
});

test("a throughput target not met says what holds it: each serving process's CPU per request and the rate the cores allow; a met one says nothing", (t) => {
  const figures = {
    "hearts.withDelivery.rps": 450,
    "hearts.withDelivery.cpuMsPerRequest.by.referral-service": 0.5,
    "hearts.withDelivery.cpuMsPerRequest.by.delivery": 1.5,
    "hearts.withDelivery.cpuMsPerRequest.by.postgres": 2,
    "callbacks.drain.rps": 6000,
    "callbacks.drain.cpuMsPerRequest.by.delivery": 0.2,
  };
  const rows = evaluateTargets({ summary: summaryOf(figures), machine: { atStart: { nproc: 2 } } });
  const withDelivery = rowOf(rows, "CastHeart with delivery running");
  t.is(withDelivery.verdict, "not met");
  t.is(withDelivery.limit, "CPU per heart: 4.00 ms (referral-service 0.50, delivery 1.50, postgres 2.00); 2 cores give about 500 heart/s at that cost");
  t.is(rowOf(rows, "Callbacks drained from a backlog").limit, undefined);
  t.true(renderTargets(rows, false).includes(`- **CastHeart with delivery running**: ${withDelivery.limit}.`));
});

test("an ingest ratio to the raw server not met names both CPU costs and how many times the raw server's ours is; a latency target its stages", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({
      "ingest.ratio": 0.5,
      "ingest.gateway.cpuMsPerEvent.gateway": 1,
      "ingest.gateway.cpuMsPerEvent.referral-service": 0.5,
      "ingest.gateway.cpuMsPerEvent.postgres": 0.5,
      "ingest.gateway.cpuMsPerEvent.load generator": 9,
      "ingest.baseline.cpuMsPerEvent.baseline": 0.6,
      "ingest.baseline.cpuMsPerEvent.postgres": 0.4,
      "ingest.baseline.cpuMsPerEvent.relay": 0.3,
      "latency.idle.p50": 9,
      "latency.idle.stage.relay.p50": 4.5,
      "latency.idle.stage.send.p50": 1.2,
    }),
  });
  t.is(
    rowOf(rows, "Ingest `registered` at c=32 / the one-statement raw server").limit,
    "CPU per event: ours 2.00 ms (gateway 1.00, referral-service 0.50, postgres 0.50), the raw server 1.00 ms (postgres 0.40, baseline 0.60): ours costs 2.00x the raw server's CPU",
  );
  t.is(rowOf(rows, "Vote -> callback p50, idle").limit, "stages (p50): relay 4.5 ms, send 1.2 ms");
});

test("a CPU ratio not met says where the history's extra CPU went, process by process, the largest growth first", (t) => {
  const rows = evaluateTargets({
    summary: summaryOf({
      "pull.list.cpuMsPerRequest.all": 2,
      "pull.list.cpuMsPerRequest.by.referral-service": 1.2,
      "pull.list.cpuMsPerRequest.by.postgres": 0.6,
      "pull.list.cpuMsPerRequest.by.gateway": 0.2,
    }),
    history: {
      summary: summaryOf({
        "pull.list.cpuMsPerRequest.all": 2.8,
        "pull.list.cpuMsPerRequest.by.referral-service": 1.3,
        "pull.list.cpuMsPerRequest.by.postgres": 1.3,
        "pull.list.cpuMsPerRequest.by.gateway": 0.2,
      }),
    },
  });
  t.is(
    rowOf(rows, "CPU per request: pull list").limit,
    "the history's extra CPU per request, by process (empty -> history): postgres 0.60 -> 1.30 ms, referral-service 1.20 -> 1.30 ms",
  );
});
