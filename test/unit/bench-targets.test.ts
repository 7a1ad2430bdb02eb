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

test("what the bench has no phase for (pull, other event types, the hot address) says so, with the covering test for the hot address", (t) => {
  const rows = evaluateTargets({ summary: summaryOf({}), history: { summary: summaryOf({}) } });
  t.is(rowOf(rows, "CPU per request: pull").verdict, "not measured");
  t.regex(rowOf(rows, "CPU per request: pull").measured, /^not measured by the bench/);
  t.regex(rowOf(rows, "CPU per request: ingest of the other event types").measured, /^not measured by the bench/);
  t.regex(rowOf(rows, "An address with 100,000 earlier clicks: its own events' cost").measured, /test\/integration\/referral-bounded-reads\.test\.ts/);
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
  t.regex(md, /1 met, 0 not met, 24 not measured/);
  t.regex(md, /\| CastHeart with delivery running \| 3,000 \/s \| >= 2,500 \/s \| \*\*met\*\* \|/);
});
