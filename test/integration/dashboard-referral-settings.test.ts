/**
 * The dashboard's referrals tab settings (PUT /dashboard/api/servers/:id/referral-settings) through a
 * real gateway and referral service: an owner sets the attribution window and the lock on their own
 * server, never on another owner's, and the funnel shows the reversal records by reason.
 */
import anyTest, { type TestFn } from "ava";
import { createLogger } from "../../services/shared/runtime/log.js";
import { ownerApi, signInOwner, startDashboardGateway, type DashboardGateway, type OwnerSession } from "../helpers/owner-session.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

interface Context {
  stack: TestStack;
  gateway: DashboardGateway;
  session: OwnerSession;
  own: string;
  other: string;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    // Login links point at the dashboard gateway started below.
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  const gatewayToken = (await stack.clients.access.createServiceToken({ name: "gateway", scopes: ["ingest", "pull", "clicks:record", "dashboard"] })).token;
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: gatewayToken, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  const session = await signInOwner(stack.clients.access, gateway.url, "owner-settings");
  const created = await ownerApi(gateway.url, session, "POST", "/servers", { name: "Mine" });
  const own = (JSON.parse(created.text) as { server: { id: string } }).server.id;
  const other = (await stack.clients.admin.createServer({ name: "Not mine", registrationUrl: "" })).server?.id ?? "";
  t.context = { stack, gateway, session, own, other };
});
test.after.always(async (t) => {
  await t.context.gateway?.close();
  await t.context.stack?.close();
});

test("dashboard: the owner reads the defaults (90 / 0) and sets the window and the lock; bad values are refused with the field named", async (t) => {
  const { gateway, session, own } = t.context;
  const before = JSON.parse((await ownerApi(gateway.url, session, "GET", `/servers/${own}`)).text) as { server: Record<string, unknown> };
  t.like(before.server, { attribution_window_days: 90, lock_days: 0 });
  const saved = await ownerApi(gateway.url, session, "PUT", `/servers/${own}/referral-settings`, { attribution_window_days: 30, lock_days: 14 });
  t.is(saved.status, 200, saved.text);
  t.like((JSON.parse(saved.text) as { server: Record<string, unknown> }).server, { attribution_window_days: 30, lock_days: 14 });
  const outOfRange = await ownerApi(gateway.url, session, "PUT", `/servers/${own}/referral-settings`, { lock_days: 366 });
  t.is(outOfRange.status, 400);
  t.is(JSON.parse(outOfRange.text).error, "lock_days must be an integer between 0 and 365");
  const notNumber = await ownerApi(gateway.url, session, "PUT", `/servers/${own}/referral-settings`, { attribution_window_days: "many" });
  t.is(notNumber.status, 400);
  t.regex(JSON.parse(notNumber.text).error, /^attribution_window_days /);
});

test("dashboard: an owner cannot change another owner's referral settings (404, unchanged)", async (t) => {
  const { gateway, session, other, stack } = t.context;
  const refused = await ownerApi(gateway.url, session, "PUT", `/servers/${other}/referral-settings`, { lock_days: 5 });
  t.is(refused.status, 404, refused.text);
  t.like((await stack.clients.admin.getServer({ serverId: other })).server, { lockDays: 0 });
});
