/**
 * The README's internal API example, executed as written: the `npx buf curl` commands
 * of the "Ports and the internal API" section, against a real referral service, with
 * the token in $TOKEN. The login link the last one mints is then opened like a browser.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { createLogger } from "../../services/shared/runtime/log.js";
import { REPO_ROOT } from "../../scripts/harness/processes.js";
import { openLoginLink, ownerApi, startDashboardGateway } from "../helpers/owner-session.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { startStack } from "../../scripts/harness/stack.js";

const run = promisify(execFile);

/** The `npx buf curl` commands of the README's internal API example, continuation lines joined. */
function readmeCommands(): string[] {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Ports and the internal API"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  return block
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((line) => line.startsWith("npx buf curl"));
}

test("the README's buf curl example works as written: list servers, create an owner, assign a server, mint a login link that opens the owner's dashboard", async (t) => {
  t.timeout(180_000);
  let gatewayUrl = "";
  const stack = await startStack({
    gateway: false,
    get publicBaseUrl() {
      return gatewayUrl;
    },
  });
  const gateway = await startDashboardGateway({ rpcUrl: stack.rpcUrl, token: TEST_SERVICE_TOKEN, log: createLogger("test", "silent") });
  gatewayUrl = gateway.url;
  try {
    const { server } = await stack.clients.admin.createServer({ name: "README server" });
    const commands = readmeCommands();
    t.is(commands.length, 4, "the README shows four commands");
    const outputs: string[] = [];
    for (const command of commands) {
      t.true(command.includes("http://127.0.0.1:8081/"), command);
      const { stdout } = await run("bash", ["-c", command.replace("http://127.0.0.1:8081", stack.rpcUrl)], {
        cwd: REPO_ROOT,
        env: { ...process.env, TOKEN: TEST_SERVICE_TOKEN, SERVER_ID: server!.id },
        timeout: 60_000,
      });
      outputs.push(stdout);
    }
    t.true(outputs[0]!.includes(server!.id), "ListServers lists the server");
    t.is(JSON.parse(outputs[1]!).owner.id, "acct-42");
    t.is(JSON.parse(outputs[2]!).server.ownerId, "acct-42");
    const { url } = JSON.parse(outputs[3]!) as { url: string };
    t.true(url.startsWith(`${gateway.url}/dashboard/login?token=dl_`), url);
    const session = await openLoginLink(gateway.url, url);
    const servers = JSON.parse((await ownerApi(gateway.url, session, "GET", "/servers")).text) as { servers: { id: string }[] };
    t.deepEqual(
      servers.servers.map((s) => s.id),
      [server!.id],
      "the owner's dashboard shows exactly the assigned server",
    );

    // Without the token, the same command is refused: the internal API is not open.
    const refused = await run("bash", ["-c", commands[0]!.replace("http://127.0.0.1:8081", stack.rpcUrl)], {
      cwd: REPO_ROOT,
      env: { ...process.env, TOKEN: "" },
      timeout: 60_000,
    }).catch((e: { stderr: string }) => e);
    t.regex((refused as { stderr: string }).stderr, /unauthenticated/);
  } finally {
    await gateway.close();
    await stack.close();
  }
});
