/** The benchmark's history template (bench/lib/history-template.ts) and the empty-vs-history comparison (bench/lib/compare-databases.ts). */
import test from "ava";
import { compareMedians, cpuPerRequest, renderComparison } from "../../bench/lib/compare-databases.js";
import { HOT_ADDRESS, historyRefreshStatements } from "../../bench/lib/history.js";
import { buildFreeBytes, diskRefusal, historyTemplateName, parseHistoryScale, planHistoryTemplate } from "../../bench/lib/history-template.js";

const GB = 2 ** 30;

test("the template's name carries the history version and the scale, in characters a database name takes unquoted", (t) => {
  t.is(historyTemplateName(1, 1), "bench_history_v1_s1");
  t.is(historyTemplateName(1, 0.002), "bench_history_v1_s0_002");
  t.is(historyTemplateName(2, 0.5), "bench_history_v2_s0_5");
});

test("a missing template is built; other versions', other scales' and unfinished builds are dropped", (t) => {
  const plan = planHistoryTemplate({
    existing: ["postgres", "bench_template", "bench_history_v1_s1", "bench_history_v2_s0_5_building", "bench"],
    wanted: "bench_history_v2_s1",
    templateMigrations: [],
    targetMigrations: ["a", "b"],
  });
  t.deepEqual(plan, { build: true, drop: ["bench_history_v1_s1", "bench_history_v2_s0_5_building"], pending: [] });
});

test("a kept template is reused and migrated forward with the target's newer migrations only", (t) => {
  const plan = planHistoryTemplate({
    existing: ["bench_history_v1_s1"],
    wanted: "bench_history_v1_s1",
    templateMigrations: ["a", "b"],
    targetMigrations: ["a", "b", "c"],
  });
  t.deepEqual(plan, { build: false, drop: [], pending: ["c"] });
  t.deepEqual(planHistoryTemplate({ existing: ["bench_history_v1_s1"], wanted: "bench_history_v1_s1", templateMigrations: ["a"], targetMigrations: ["a"] }), {
    build: false,
    drop: [],
    pending: [],
  });
});

test("a template holding a migration the target does not know is rebuilt (an older target cannot run on a newer schema)", (t) => {
  const plan = planHistoryTemplate({
    existing: ["bench_history_v1_s1"],
    wanted: "bench_history_v1_s1",
    templateMigrations: ["a", "z"],
    targetMigrations: ["a", "b"],
  });
  t.deepEqual(plan, { build: true, drop: ["bench_history_v1_s1"], pending: [] });
});

test("a scale-1 build refuses with less than 25 GB free; small scales ask for at least 1 GB", (t) => {
  t.is(buildFreeBytes(1), 25 * GB);
  t.is(buildFreeBytes(0.002), GB);
  const refusal = diskRefusal("the history at scale 1", "/data", 24 * GB, buildFreeBytes(1));
  t.truthy(refusal);
  t.regex(refusal ?? "", /24\.0 GB free under \/data, about 25\.0 GB needed/);
  t.is(diskRefusal("the history at scale 1", "/data", 30 * GB, buildFreeBytes(1)), undefined);
});

test("CPU per request counts the serving processes and PostgreSQL, not the load generator, receivers or harness; each serving process on its own", (t) => {
  const cpuMs = { gateway: 100, "referral-service": 300, postgres: 500, kafka: 100, "load generator": 900, "receiver-1": 50, harness: 20 };
  t.deepEqual(cpuPerRequest(cpuMs, 1000), { all: 1, postgres: 0.5, byProcess: { gateway: 0.1, "referral-service": 0.3, postgres: 0.5, kafka: 0.1 } });
  t.true(Number.isNaN(cpuPerRequest(cpuMs, 0).all));
});

test("the comparison pairs figures both databases have, ratio = history / empty, none when the empty one is 0", (t) => {
  const rows = compareMedians(
    { "ingest.gateway.rps": { median: 2000 }, "ingest.gateway.cpuMsPerRequest.all": { median: 0.8 }, "only.empty": { median: 1 }, zero: { median: 0 } },
    { "ingest.gateway.rps": { median: 1500 }, "ingest.gateway.cpuMsPerRequest.all": { median: 1 }, "only.history": { median: 1 }, zero: { median: 3 } },
  );
  t.deepEqual(
    rows.map((r) => [r.figure, r.ratio]),
    [
      ["ingest.gateway.cpuMsPerRequest.all", 1.25],
      ["ingest.gateway.rps", 0.75],
      ["zero", Number.NaN],
    ],
  );
  const md = renderComparison(rows);
  t.regex(md, /\| ingest\.gateway \| 0\.800 \| 1\.000 \| 1\.25x \| — \| — \| — \|/);
  t.regex(md, /\| ingest\.gateway\.rps \| 2,?000(\.00)? \| 1,?500(\.00)? \| 0\.75x \|/);
  t.notRegex(
    renderComparison(compareMedians({ "a.cpuMsPerEvent.load generator": { median: 1 } }, { "a.cpuMsPerEvent.load generator": { median: 2 } })),
    /load generator/,
  );
});

test("--history means scale 1, --history=SCALE or BENCH_HISTORY_SCALE another; neither means no history; a scale that is not above 0 is refused", (t) => {
  t.is(parseHistoryScale(["--quick"], undefined), undefined);
  t.is(parseHistoryScale(["--quick"], ""), undefined);
  t.is(parseHistoryScale(["--history"], undefined), 1);
  t.is(parseHistoryScale(["--history=0.002"], "0.5"), 0.002);
  t.is(parseHistoryScale([], "0.5"), 0.5);
  for (const bad of ["0", "-1", "x", ""]) t.throws(() => parseHistoryScale([`--history=${bad}`], undefined), undefined, bad);
});

test("a clone moves the hot address's hearts, voter set and clicks forward by the template's age, so they stay inside the rule windows", (t) => {
  const builtAt = new Date("2026-11-01T00:00:00Z");
  const statements = historyRefreshStatements(builtAt, new Date("2026-11-03T00:01:30Z"));
  t.is(statements.length, 3);
  for (const { sql } of statements) {
    t.regex(sql, /(created_at|last_counted_at) = \1 \+ interval '172890 seconds'/);
    t.true(sql.includes(`'${HOT_ADDRESS}'`));
  }
  t.regex(historyRefreshStatements(builtAt, builtAt)[0]?.sql ?? "", /interval '0 seconds'/);
});
