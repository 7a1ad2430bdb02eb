import test from "ava";
import { foldEndpointHealth, lastFailureOf } from "../../services/delivery/pipeline/endpoint-health.js";

const server = "00000000-0000-4000-8000-000000000001";
const other = "00000000-0000-4000-8000-000000000002";
const at = (second: number) => new Date(Date.UTC(2026, 2, 10, 12, 0, second));
const iso = (second: number) => at(second).toISOString();

test("the health transition, folded in recording order: a failure starts the run, later failures continue it, a success ends it", (t) => {
  t.deepEqual(
    foldEndpointHealth([
      { serverId: server, endpointId: server, startedAt: at(1), succeeded: false, error: "HTTP 500" },
      { serverId: server, endpointId: server, startedAt: at(2), succeeded: false, error: "timeout" },
    ]),
    [{ endpoint_id: server, server_id: server, last_success_at: null, failing_since: iso(1), last_failure_at: iso(2), last_failure_reason: "timeout" }],
  );
  t.deepEqual(
    foldEndpointHealth([
      { serverId: server, endpointId: server, startedAt: at(1), succeeded: false, error: null },
      { serverId: server, endpointId: server, startedAt: at(2), succeeded: true, error: null },
    ]),
    [{ endpoint_id: server, server_id: server, last_success_at: iso(2), failing_since: null, last_failure_at: iso(1), last_failure_reason: "attempt failed" }],
    "a success ends the run; the failure before it is still the last failure",
  );
  t.deepEqual(
    foldEndpointHealth([
      { serverId: server, endpointId: server, startedAt: at(1), succeeded: true, error: null },
      { serverId: other, endpointId: other, startedAt: at(2), succeeded: false, error: "HTTP 503" },
      { serverId: server, endpointId: server, startedAt: at(3), succeeded: false, error: "HTTP 502" },
    ]),
    [
      { endpoint_id: server, server_id: server, last_success_at: iso(1), failing_since: iso(3), last_failure_at: iso(3), last_failure_reason: "HTTP 502" },
      { endpoint_id: other, server_id: other, last_success_at: null, failing_since: iso(2), last_failure_at: iso(2), last_failure_reason: "HTTP 503" },
    ],
    "one row per endpoint; a failure after the success starts the next run",
  );
});

test("a single attempt folds like a batch of one (the one transition for one attempt or many)", (t) => {
  t.deepEqual(foldEndpointHealth([{ serverId: server, endpointId: server, startedAt: at(5), succeeded: true, error: null }]), [
    { endpoint_id: server, server_id: server, last_success_at: iso(5), failing_since: null, last_failure_at: null, last_failure_reason: null },
  ]);
  t.deepEqual(foldEndpointHealth([]), []);
});

test("lastFailureOf: the endpoint's last attempt when it failed, with its reason", (t) => {
  const attempts = [
    { serverId: server, endpointId: server, startedAt: at(1), succeeded: false, error: "HTTP 500" },
    { serverId: other, endpointId: other, startedAt: at(2), succeeded: true, error: null },
  ];
  t.is(lastFailureOf(attempts, server)?.error, "HTTP 500");
  t.is(lastFailureOf(attempts, other), undefined);
  t.is(lastFailureOf([...attempts, { serverId: server, endpointId: server, startedAt: at(3), succeeded: true, error: null }], server), undefined);
});
