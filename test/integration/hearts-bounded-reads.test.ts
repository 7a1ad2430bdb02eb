/**
 * CastHeart's reads stay bounded whatever one address's history (issue: the same cost on day 1,000 as on day 1).
 * A carrier-grade NAT address has 20,000 counted hearts on one server from 20,000 voters, all inside every fraud
 * window (the last minute). A heart from it must read a handful of rows, not that history: each fraud count stops
 * one past its rule's maximum. Every statement of the cast is recorded and re-run under EXPLAIN ANALYZE (rolled back).
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { castHeartBatch } from "../../services/hearts/cast-heart-batch.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { toVoterAddress } from "../../services/hearts/domain/ip.js";
import { executeSql } from "../../services/shared/adapters/sql/executor.js";
import { addressVotersOf, countedHeartOf, seedListServers } from "../helpers/list-servers.js";
import { recordingClient, rowsReadByStatements, rowsReadByStatementsGeneric } from "../helpers/rows-read.js";
import { insertAddressHearts, insertAddressVoters } from "../helpers/skewed-history.js";
import { insertServer, startMeasuredHarness, type Harness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";

const HOT_ADDRESS = "198.51.100.7";
const HOT_SUBNET = "198.51.100.0/24";
const HISTORY_ROWS = 20_000;
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  // A list's other servers, each with a counted heart and its (server, address, voter) rows: the tables' statistics
  // then say a server has few hearts (one server's share of a list's), as on a list, for the generic plans below.
  await seedListServers(t.context.h.db.prisma, {
    at: t.context.clock.now(),
    rowsOf: [countedHeartOf, addressVotersOf],
    analyze: ["hearts", "heart_address_voters"],
  });
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/**
 * A server whose hot address has HISTORY_ROWS counted hearts from as many voters in the 50 seconds before `ageSeconds` ago, stored as
 * CastHeart stores them: the hearts and the (server, address, voter) rows the same write keeps (the migration's backfill).
 */
async function serverWithHistory(h: Harness, at: Date, ageSeconds = 0): Promise<string> {
  const serverId = await insertServer(h.db.prisma);
  await insertAddressHearts(h.db.prisma, { serverId, ip: HOT_ADDRESS, subnet: HOT_SUBNET, rows: HISTORY_ROWS, at, ageSeconds, spreadSeconds: 50 }, "2026-05");
  await insertAddressVoters(h.db.prisma, serverId);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE hearts, heart_address_voters`);
  return serverId;
}

test.serial(
  "a heart from an address with 20,000 counted hearts in every window sends two statements and reads at most each rule's maximum + 1 rows, and is still blocked",
  async (t) => {
    const { h, clock, pool } = t.context;
    const { ipIdentities, subnetIdentities, ipVelocity } = DEFAULT_FRAUD_RULES;
    clock.set("2026-05-10T12:00:00.000Z");
    const serverId = await serverWithHistory(h, clock.now());
    const { client, statements } = recordingClient(pool);
    const [outcome] = await castHeartBatch({ ...h.deps, prisma: client }, DEFAULT_FRAUD_RULES, [
      { serverId, voterIdentity: "newcomer", username: "Newcomer", userAgent: UA, address: toVoterAddress(HOT_ADDRESS)!, at: clock.now() },
    ]);
    t.is(outcome?.ok ? outcome.value.kind : "failed", "fraud", "the address's identities and velocity still block the heart");
    t.is(statements().length, 2, "the read and the write, as before");

    const [heart] = await h.db.prisma.heart.findMany({ where: { serverId, voterIdentity: "newcomer" } });
    // The write is re-run under EXPLAIN too: its heart goes first (a fraud heart writes nothing else).
    await h.db.prisma.heart.deleteMany({ where: { serverId, voterIdentity: "newcomer" } });
    const read = await rowsReadByStatements(h.db.prisma, statements());
    // Velocity: at most ipVelocity.max earlier hearts (+1: the write); the identity rules: at most max (+1 the voter's own row) each.
    t.true((read.hearts ?? 0) <= ipVelocity.max + 1, `hearts rows read: ${read.hearts}`);
    t.true((read.heart_address_voters ?? 0) <= ipIdentities.max + subnetIdentities.max + 2, `heart_address_voters rows read: ${read.heart_address_voters}`);
    const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements());
    t.log("generic plan", generic);
    t.true((generic.hearts ?? 0) <= ipVelocity.max + 1, `generic plan: hearts rows read: ${generic.hearts}`);
    t.true(
      (generic.heart_address_voters ?? 0) <= ipIdentities.max + subnetIdentities.max + 2,
      `generic plan: heart_address_voters rows read: ${generic.heart_address_voters}`,
    );

    t.deepEqual(
      heart?.fraudReasons.map((r) => r.split(":")[0]),
      ["ip_identities", "subnet_identities", "ip_velocity"],
      "every address rule still fires",
    );
    t.true(
      heart?.fraudReasons[0]?.startsWith(`ip_identities: ${ipIdentities.max + 1} voter identities`),
      `the count stops one past the maximum: ${heart?.fraudReasons[0]}`,
    );
  },
);

test.serial("yesterday's 20,000 voters from an address cost a heart from it today nothing: the identity rules range over the window only", async (t) => {
  const { h, clock, pool } = t.context;
  clock.set("2026-05-12T12:00:00.000Z");
  // Every earlier heart 25 h old: outside the 24 h identity windows and the velocity window.
  const serverId = await serverWithHistory(h, clock.now(), 25 * 3600);
  const { client, statements } = recordingClient(pool);
  const [outcome] = await castHeartBatch({ ...h.deps, prisma: client }, DEFAULT_FRAUD_RULES, [
    { serverId, voterIdentity: "today", username: "Today", userAgent: UA, address: toVoterAddress(HOT_ADDRESS)!, at: clock.now() },
  ]);
  t.is(outcome?.ok ? outcome.value.kind : "failed", "counted", "no voter of the address is inside a window");
  // The fraud read (the cast's first statement, re-run after it) finds only the cast's own rows in the windows.
  const read = await rowsReadByStatements(h.db.prisma, statements().slice(0, 1));
  t.true((read.heart_address_voters ?? 0) <= 2, `heart_address_voters rows read: ${read.heart_address_voters}`);
  t.true((read.hearts ?? 0) <= 1, `hearts rows read: ${read.hearts}`);
  const generic = await rowsReadByStatementsGeneric(h.db.prisma, statements().slice(0, 1));
  t.log("generic plan", generic);
  t.true((generic.heart_address_voters ?? 0) <= 2, `generic plan: heart_address_voters rows read: ${generic.heart_address_voters}`);
  t.true((generic.hearts ?? 0) <= 1, `generic plan: hearts rows read: ${generic.hearts}`);
  // An empty window may look as cheap to the planner through a bitmap scan of the same index (a CI run's ANALYZE
  // sample once chose it): the same rows, read once (the rows-read helper counted them twice then, index and heap).
  const bitmap = await rowsReadByStatements(h.db.prisma, statements().slice(0, 1), { setup: ["SET LOCAL enable_indexscan = off"] });
  t.true((bitmap.heart_address_voters ?? 0) <= 2, `bitmap plan: heart_address_voters rows read: ${bitmap.heart_address_voters}`);
  t.true((bitmap.hearts ?? 0) <= 1, `bitmap plan: hearts rows read: ${bitmap.hearts}`);
});
