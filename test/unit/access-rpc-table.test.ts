import test from "ava";
import { AccessService } from "../../gen/proto/access/v1/access_pb.js";
import { DeliveryService } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { RPC_ACCESS, rpcKey, type OwnedResource } from "../../services/access/rpc-access.js";
import { isScope } from "../../services/access/scopes.js";
import { hostedServices } from "../helpers/hosted-services.js";

test("the referral service hosts the five services (the recording router sees them all)", (t) => {
  const names = hostedServices()
    .map((s) => s.typeName)
    .sort();
  for (const s of [AccessService, DeliveryService, HeartService, ReferralService, ServerAdminService]) t.true(names.includes(s.typeName), s.typeName);
});

test("RPC_ACCESS has an entry for every method of every hosted service, with a known scope", (t) => {
  const missing: string[] = [];
  for (const service of hostedServices()) {
    for (const method of service.methods) {
      const rule = RPC_ACCESS[rpcKey(service.typeName, method.name)];
      if (!rule) missing.push(rpcKey(service.typeName, method.name));
      else t.true(isScope(rule.scope), `${method.name}: scope ${rule.scope}`);
    }
  }
  t.deepEqual(missing, [], "add these RPCs to RPC_ACCESS (services/access/rpc-access.ts)");
});

test("RPC_ACCESS names no RPC that does not exist (no stale rules)", (t) => {
  const known = new Set(hostedServices().flatMap((s) => s.methods.map((m) => rpcKey(s.typeName, m.name))));
  t.deepEqual(
    Object.keys(RPC_ACCESS).filter((k) => !known.has(k)),
    [],
  );
});

/** Request fields that name an owned resource; an RPC taking one must check it for owners, or refuse owners. */
const OWNED_FIELDS: Record<string, OwnedResource> = { server_id: "server", delivery_id: "delivery", referral_id: "referral" };

test("an RPC whose request names a server, delivery or referral either checks that the owner owns it or refuses owner sessions", (t) => {
  for (const service of hostedServices()) {
    for (const method of service.methods) {
      const key = rpcKey(service.typeName, method.name);
      const { owner } = RPC_ACCESS[key]!;
      if (owner.kind === "none") continue;
      const named = method.input.fields.filter((f) => f.name in OWNED_FIELDS);
      if (owner.kind === "own") {
        t.deepEqual(
          named.map((f) => f.name),
          [],
          `${key} takes an id but is "own": it must check ownership instead`,
        );
        continue;
      }
      // "owned": the checked field is a real field of the request, and it is the only id field.
      const field = method.input.fields.find((f) => f.localName === owner.field);
      t.truthy(field, `${key}: request has no field ${owner.field}`);
      t.is(OWNED_FIELDS[field?.name ?? ""], owner.resource, `${key}: ${owner.field} names a ${owner.resource}`);
      // A delivery's RPC may also carry `server_id` as a narrowing filter only: the service answers
      // NotFound unless the (owner-checked) delivery belongs to that server, so it opens nothing.
      const narrowing = owner.resource === "delivery" ? ["server_id"] : [];
      t.deepEqual(
        named.map((f) => f.name).filter((name) => !narrowing.includes(name)),
        [field?.name],
        `${key}: every id field is checked`,
      );
    }
  }
});
