/**
 * Runs the integration guide's signing and pull snippets (test/fixtures/snippets, included
 * verbatim in docs/integration-guide.md) against the real gateway + referral service
 * + PostgreSQL, so the code integrators copy is known to work.
 * Every language runs: PHP needs php-cli and php-curl, which the test runner installs with apt-get
 * (scripts/infra/apt.ts); Go is built once with `go build` (standard library only, no network).
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import test from "ava";
import { insertDelivery } from "../../services/delivery/pipeline/insert-deliveries.js";
import { startRacingGateway } from "../helpers/racing-gateway.js";
import { startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";

const SNIPPETS = fileURLToPath(new URL("../fixtures/snippets/", import.meta.url));
const goBuildDir = mkdtempSync(join(tmpdir(), "snippet-go-"));
const goBinary = join(goBuildDir, "sign_and_send");

const RUNNERS: Record<string, { command: string; args: string[] }> = {
  node: { command: process.execPath, args: [`${SNIPPETS}sign-and-send.mjs`] },
  python: { command: "python3", args: [`${SNIPPETS}sign_and_send.py`] },
  shell: { command: "bash", args: [`${SNIPPETS}sign-and-send.sh`] },
  go: { command: goBinary, args: [] },
  php: { command: "php", args: [`${SNIPPETS}sign_and_send.php`] },
};

let stack: GatewayStack;
let server: TestServer;
test.before(async () => {
  execFileSync("go", ["build", "-o", goBinary, `${SNIPPETS}sign_and_send.go`], { timeout: 120_000, stdio: "pipe" });
  stack = await startGatewayStack();
  server = await stack.createServer();
});
test.after.always(async () => {
  await stack?.close();
  rmSync(goBuildDir, { recursive: true, force: true });
});

/** Runs a snippet with the given env; returns its printed status and body. */
function run(runner: string, env: Record<string, string>): Promise<{ status: number; body: string }> {
  const { command, args } = RUNNERS[runner] ?? { command: "false", args: [] };
  return new Promise((resolve, reject) => {
    execFile(command, args, { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${runner} snippet failed: ${error.message}\n${stderr}`));
      const [status = "", ...rest] = stdout.trim().split("\n");
      resolve({ status: Number(status), body: rest.join("\n") });
    });
  });
}

for (const runner of Object.keys(RUNNERS)) {
  test(`${runner} snippet: without TOKEN it sends a signed test dry-run -> 200 {ok, test}`, async (t) => {
    const res = await run(runner, { BASE_URL: stack.baseUrl, SERVER_ID: server.serverId, SECRET: server.secret });
    t.is(res.status, 200, res.body);
    t.is(res.body, JSON.stringify({ ok: true, test: true }));
  });

  test(`${runner} snippet: a real registered event with a link token -> 200 registered, and its retry -> duplicate`, async (t) => {
    const token = await stack.click(server.serverId, `referrer-${runner}`);
    const env = { BASE_URL: stack.baseUrl, SERVER_ID: server.serverId, SECRET: server.secret, TOKEN: token, REFEREE: `acct-${runner}` };
    const first = await run(runner, env);
    t.is(first.status, 200, first.body);
    t.like(JSON.parse(first.body), { ok: true, state: "registered" });
    const retry = await run(runner, env);
    t.is(retry.body, JSON.stringify({ ok: true, duplicate: true }), "same server_event_id, fresh t");
  });

  test(`${runner} snippet: KID selects the key, EVENT=qualified advances the referral`, async (t) => {
    const token = await stack.click(server.serverId, `referrer-kid-${runner}`);
    const env = { BASE_URL: stack.baseUrl, SERVER_ID: server.serverId, SECRET: server.secret, TOKEN: token, KID: server.kid, REFEREE: `acct-kid-${runner}` };
    t.is((await run(runner, env)).status, 200);
    const qualified = await run(runner, { ...env, EVENT: "qualified" });
    t.is(qualified.status, 200, qualified.body);
    t.like(JSON.parse(qualified.body), { ok: true, state: "qualified" });
  });

  test(`${runner} snippet: a wrong secret prints 401 and the contract's text`, async (t) => {
    const res = await run(runner, { BASE_URL: stack.baseUrl, SERVER_ID: server.serverId, SECRET: "rsec_wrong" });
    t.is(res.status, 401);
    t.is(res.body, JSON.stringify({ error: "signature rejected: bad_signature" }));
  });
}

const PULL_RUNNERS: Record<string, { command: string; args: string[] }> = {
  node: { command: process.execPath, args: [`${SNIPPETS}pull-hearts.mjs`] },
  python: { command: "python3", args: [`${SNIPPETS}pull_hearts.py`] },
};

for (const runner of Object.keys(PULL_RUNNERS)) {
  test(`${runner} pull snippet: claims each page first and rewards only the hearts answered claimed (one taken meanwhile is not rewarded); a second run finds none`, async (t) => {
    const { serverId } = await stack.createServer();
    await stack.clients.admin.setPullEnabled({ serverId, enabled: true });
    const { secret } = await stack.clients.admin.revealPullSecret({ serverId });
    const hearts: string[] = [];
    for (let i = 0; i < 3; i++) {
      const heartId = randomUUID();
      hearts.push(heartId);
      // As the delivery consumer stores a counted heart.
      await insertDelivery(stack.db.prisma, {
        heartId,
        serverId,
        eventType: "heart.counted",
        username: `P${runner}${i}`,
        voterIdentity: `v-${heartId}`,
        period: "2026-03",
        streakDay: null,
        countedAt: new Date(),
      });
    }
    // Another poller takes the first listed heart between the snippet's list and its claim.
    const gateway = await startRacingGateway(stack.baseUrl, async (listed) => {
      if (listed[0]) await stack.clients.delivery.claimPullHearts({ serverId, heartIds: [listed[0].heart_id] });
    });
    t.teardown(() => gateway.close());
    const { command, args } = PULL_RUNNERS[runner]!;
    const runPull = () =>
      new Promise<string>((resolve, reject) => {
        execFile(
          command,
          args,
          { env: { PATH: process.env.PATH, HOME: process.env.HOME, BASE_URL: gateway.url, SERVER_ID: serverId, PULL_SECRET: secret }, timeout: 120_000 },
          (error, stdout, stderr) => (error ? reject(new Error(`${runner} pull snippet failed: ${error.message}\n${stderr}`)) : resolve(stdout.trim())),
        );
      });
    const first = (await runPull()).split("\n");
    t.deepEqual(first, [...hearts.slice(1).map((id, i) => `reward P${runner}${i + 1} for heart ${id}`), "claimed 2"]);
    t.is(await stack.db.prisma.delivery.count({ where: { serverId, transport: "pull", status: "delivered" } }), 3);
    t.is(await runPull(), "claimed 0");
  });
}
