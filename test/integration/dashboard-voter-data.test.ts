/**
 * The dashboard's voter data actions (POST /servers/:serverId/voter-data/export and /erase), as a signed-in owner
 * through the real gateway and referral service: the owner exports (a JSON file) and erases a voter of their own
 * server; an erasure needs `"confirm": true`; another owner's server answers 404, and a request without a session 401.
 * The page's form in a browser: test/e2e/dashboard-voter-data.test.ts.
 */
import anyTest, { type TestFn } from "ava";
import { ERASE_CONFIRM_TEXT } from "../../gateway/dashboard/api.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { ownerApi, signInOwner, type OwnerSession } from "../helpers/owner-session.js";

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  session: OwnerSession;
  mine: string;
  theirs: string;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: true });
  const gateway = await stack.startGateway({ dashboard: { token: undefined } });
  const { admin, access } = stack.clients;
  const mine = (await admin.createServer({ name: "mine" })).server!.id;
  const theirs = (await admin.createServer({ name: "theirs" })).server!.id;
  await access.createOwner({ ownerId: "voter-dash-a", displayName: "A" });
  await access.createOwner({ ownerId: "voter-dash-b", displayName: "B" });
  await access.assignServer({ serverId: mine, ownerId: "voter-dash-a" });
  await access.assignServer({ serverId: theirs, ownerId: "voter-dash-b" });
  const session = await signInOwner(access, gateway.url, "voter-dash-a");
  t.context = { stack, gatewayUrl: gateway.url, session, mine, theirs };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

const call = (t: { context: Context }, path: string, body: unknown) => ownerApi(t.context.gatewayUrl, t.context.session, "POST", path, body);

test.serial("an owner exports a voter of their own server as a JSON file and erases them after confirming; the heart then carries the tombstone", async (t) => {
  const { stack, mine } = t.context;
  const [cast] = await Promise.all(
    [mine, t.context.theirs].map((serverId) =>
      stack.clients.hearts.castHeart({
        serverId,
        username: "Dash_Voter",
        voterIdentity: "dash-voter",
        ip: "198.51.100.61",
        userAgent: "Mozilla/5.0 DashVoter",
      }),
    ),
  );
  const exported = await call(t, `/servers/${mine}/voter-data/export`, { key_kind: "username", key: "dash_voter" });
  t.is(exported.status, 200, exported.text);
  t.regex(exported.headers.get("content-type") ?? "", /^application\/json/);
  t.regex(exported.headers.get("content-disposition") ?? "", /attachment; filename="voter-data-/);
  const doc = JSON.parse(exported.text) as { servers: { serverId: string; hearts: { username: string }[] }[] };
  t.deepEqual(
    doc.servers.map((s) => [s.serverId, s.hearts.map((h) => h.username)]),
    [[mine, ["Dash_Voter"]]],
    "the owner's server only",
  );

  const unconfirmed = await call(t, `/servers/${mine}/voter-data/erase`, { key_kind: "username", key: "Dash_Voter" });
  t.is(unconfirmed.status, 400);
  t.is(JSON.parse(unconfirmed.text).error, ERASE_CONFIRM_TEXT);
  const erased = await call(t, `/servers/${mine}/voter-data/erase`, { key_kind: "username", key: "Dash_Voter", confirm: true });
  t.is(erased.status, 200, erased.text);
  const { tombstone, counts } = JSON.parse(erased.text) as { tombstone: string; counts: Record<string, number> };
  t.is(counts.hearts, 1);
  t.deepEqual(
    (await stack.prisma.heart.findMany({ where: { serverId: mine } })).map((h) => h.username),
    [tombstone],
  );
  // The voter's receipt, on the public gateway: "erased", with no name.
  const receiptPath = new URL(cast!.receiptUrl).pathname;
  const json = await fetch(`${stack.gatewayUrl}${receiptPath}.json`);
  t.is(json.status, 200);
  t.like(await json.json(), { outcome: "erased", counted: false, username: "", deliveries: [], claim: null });
  const page = await (await fetch(`${stack.gatewayUrl}${receiptPath}`)).text();
  t.regex(page, /The voter's data was erased/);
  t.false(page.includes("Dash_Voter"));
  t.deepEqual(
    (await stack.prisma.heart.findMany({ where: { serverId: t.context.theirs } })).map((h) => h.username),
    ["Dash_Voter"],
    "another server's voter is untouched",
  );
});

test.serial(
  "the voter data actions refuse another owner's server (404, as a missing one), a request without a session (401) and an unknown key kind (400)",
  async (t) => {
    const { stack, theirs, mine } = t.context;
    for (const action of ["export", "erase"]) {
      const other = await call(t, `/servers/${theirs}/voter-data/${action}`, { key_kind: "username", key: "Dash_Voter", confirm: true });
      t.is(other.status, 404, `${action} on another owner's server`);
      const anonymous = await fetch(`${t.context.gatewayUrl}/dashboard/api/servers/${mine}/voter-data/${action}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ key_kind: "username", key: "Dash_Voter", confirm: true }),
      });
      t.is(anonymous.status, 401, `${action} without a session`);
    }
    const bad = await call(t, `/servers/${mine}/voter-data/export`, { key_kind: "email", key: "x" });
    t.is(bad.status, 400);
    t.regex(JSON.parse(bad.text).error, /^key_kind must be one of/);
    t.deepEqual(
      (await stack.prisma.heart.findMany({ where: { serverId: theirs } })).map((h) => h.username),
      ["Dash_Voter"],
      "nothing of B's server was erased",
    );
  },
);
