/**
 * hearts.v1.HeartDelivery carries a delivery's status and transport as strings; the proto's comment is
 * their only documentation for RPC clients, so it names every value the service returns (the delivery
 * statuses and transports of services/shared/values/proto-names.ts, `withdrawn` of pay-once mode included).
 */
import test from "ava";
import { readFileSync } from "node:fs";
import { DELIVERY_STATUS_TO_PROTO, DELIVERY_TRANSPORT_TO_PROTO } from "../../services/shared/values/proto-names.js";

const proto = readFileSync(new URL("../../proto/hearts/v1/hearts.proto", import.meta.url), "utf8");

/** The quoted names in the comment lines right above `field` in `message`. */
function documentedValues(message: string, field: string): string[] {
  const body = new RegExp(`message ${message} \\{([\\s\\S]*?)\\n\\}`).exec(proto)?.[1] ?? "";
  const lines = body.split("\n");
  const at = lines.findIndex((line) => line.trim().startsWith(`string ${field} =`));
  const comment: string[] = [];
  for (let i = at - 1; i >= 0 && lines[i]?.trim().startsWith("//"); i--) comment.unshift(lines[i] ?? "");
  return [...comment.join(" ").matchAll(/"([a-z_]+)"/g)].map((m) => m[1] ?? "").sort();
}

test("HeartDelivery.status's comment lists every delivery status the service returns, withdrawn included", (t) => {
  t.deepEqual(documentedValues("HeartDelivery", "status"), Object.keys(DELIVERY_STATUS_TO_PROTO).sort());
});

test("HeartDelivery.transport's comment lists every transport", (t) => {
  t.deepEqual(documentedValues("HeartDelivery", "transport"), Object.keys(DELIVERY_TRANSPORT_TO_PROTO).sort());
});
