import test from "ava";
import {
  CLAIM_BATCH_WINDOW_MS,
  type ClaimDecision,
  type ClaimLoopState,
  decideClaim,
  decideInsertLease,
  type InsertLeaseDecision,
  leavesBacklog,
  MAX_UNRECORDED_PER_SLOT,
  minimumClaim,
} from "../../services/delivery/pipeline/claim-decision.js";

const NOW_MS = 10_000;
/** An idle dispatcher of 32 slots (minimum claim 8) at NOW_MS. */
const idle: ClaimLoopState = { concurrency: 32, sending: 0, reserved: 0, unrecorded: 0, freedSinceClaim: 0, waitingSinceMs: undefined, nowMs: NOW_MS };

const claimCases: { name: string; state: Partial<ClaimLoopState>; expected: ClaimDecision }[] = [
  { name: "idle: claims every slot at once", state: {}, expected: { kind: "claim", limit: 32 } },
  { name: "idle with a single free slot: claims it at once (no batch to wait for)", state: { reserved: 31 }, expected: { kind: "claim", limit: 1 } },
  { name: "every slot sending: polls", state: { sending: 32 }, expected: { kind: "poll", reason: "full" } },
  { name: "every slot sending or held by an insert's lease: polls", state: { sending: 20, reserved: 12 }, expected: { kind: "poll", reason: "full" } },
  { name: "an insert's lease holds every slot: polls", state: { reserved: 32 }, expected: { kind: "poll", reason: "full" } },
  {
    name: "recording behind (8 unrecorded per slot): polls",
    state: { unrecorded: 32 * MAX_UNRECORDED_PER_SLOT },
    expected: { kind: "poll", reason: "recording-behind" },
  },
  { name: "one below the recording limit: claims", state: { unrecorded: 32 * MAX_UNRECORDED_PER_SLOT - 1 }, expected: { kind: "claim", limit: 32 } },
  { name: "busy, a quarter of the concurrency freed: claims the room", state: { sending: 24, freedSinceClaim: 8 }, expected: { kind: "claim", limit: 8 } },
  {
    name: "busy, fewer than a quarter freed: waits the batch window from now",
    state: { sending: 25, freedSinceClaim: 7 },
    expected: { kind: "wait", sinceMs: NOW_MS, untilMs: NOW_MS + CLAIM_BATCH_WINDOW_MS },
  },
  {
    name: "busy, still waiting inside the window: waits until the window's end",
    state: { sending: 25, freedSinceClaim: 7, waitingSinceMs: NOW_MS - 3 },
    expected: { kind: "wait", sinceMs: NOW_MS - 3, untilMs: NOW_MS - 3 + CLAIM_BATCH_WINDOW_MS },
  },
  {
    name: "busy, the window has passed: claims what room it has",
    state: { sending: 25, freedSinceClaim: 7, waitingSinceMs: NOW_MS - CLAIM_BATCH_WINDOW_MS },
    expected: { kind: "claim", limit: 7 },
  },
  {
    name: "per-server caps bind (few in flight): a quarter of what was in flight is enough",
    state: { sending: 8, freedSinceClaim: 3 },
    expected: { kind: "claim", limit: 24 },
  },
  {
    name: "per-server caps bind, less than a quarter of what was in flight freed: waits",
    state: { sending: 9, freedSinceClaim: 2 },
    expected: { kind: "wait", sinceMs: NOW_MS, untilMs: NOW_MS + CLAIM_BATCH_WINDOW_MS },
  },
  {
    name: "enough freed but the room is below the minimum claim (reserved by an insert): waits",
    state: { sending: 24, freedSinceClaim: 8, reserved: 1 },
    expected: { kind: "wait", sinceMs: NOW_MS, untilMs: NOW_MS + CLAIM_BATCH_WINDOW_MS },
  },
  { name: "concurrency 1: the minimum claim is one", state: { concurrency: 1, sending: 0 }, expected: { kind: "claim", limit: 1 } },
  { name: "concurrency 3, one freed of three: claims", state: { concurrency: 3, sending: 2, freedSinceClaim: 1 }, expected: { kind: "claim", limit: 1 } },
];

for (const { name, state, expected } of claimCases) {
  test(`decideClaim: ${name}`, (t) => {
    t.deepEqual(decideClaim({ ...idle, ...state }), expected);
  });
}

const leaseBase = { concurrency: 32, sending: 0, reserved: 0, unrecorded: 0, active: true, claiming: false, backlog: false };
const leaseCases: { name: string; state: Partial<typeof leaseBase>; expected: InsertLeaseDecision }[] = [
  { name: "idle and running: leases every slot", state: {}, expected: { kind: "lease", limit: 32 } },
  { name: "leases only the free room", state: { sending: 20, reserved: 4 }, expected: { kind: "lease", limit: 8 } },
  { name: "stopped: no lease", state: { active: false }, expected: { kind: "none", reason: "stopped" } },
  { name: "a claim is running: no lease", state: { claiming: true }, expected: { kind: "none", reason: "claiming" } },
  { name: "the last claim left due rows: no lease (older rows first)", state: { backlog: true }, expected: { kind: "none", reason: "backlog" } },
  {
    name: "recording behind: no lease",
    state: { unrecorded: 32 * MAX_UNRECORDED_PER_SLOT },
    expected: { kind: "none", reason: "recording-behind" },
  },
  { name: "no free slot: no lease", state: { sending: 30, reserved: 2 }, expected: { kind: "none", reason: "full" } },
];

for (const { name, state, expected } of leaseCases) {
  test(`decideInsertLease: ${name}`, (t) => {
    t.deepEqual(decideInsertLease({ ...leaseBase, ...state }), expected);
  });
}

test("leavesBacklog: a claim that filled its limit may have left due rows", (t) => {
  t.true(leavesBacklog(8, 8));
  t.false(leavesBacklog(7, 8));
  t.false(leavesBacklog(0, 32));
});

test("minimumClaim: a quarter of the concurrency, at least one", (t) => {
  t.deepEqual([1, 3, 4, 7, 32, 100].map(minimumClaim), [1, 1, 1, 1, 8, 25]);
});
