/**
 * Configuration errors on a terminal: a process started from a shell (stderr a TTY, here a real
 * pseudo-terminal from util-linux `script`) prints its problems as readable lines, not a JSON log
 * line; piped (test/e2e/config-errors.test.ts) it keeps the one JSON fatal line. Exit 2 either way.
 */
import test from "ava";
import { EXIT_CONFIG_ERROR, runMain } from "../../services/shared/runtime/run-main.js";
import { ConfigError } from "../../services/shared/runtime/config.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { useProcesses } from "../../scripts/harness/processes.js";

/** A shell command line quoting each word for /bin/sh. */
const shellLine = (words: string[]) => words.map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(" ");

test("the gateway with a bad configuration, started on a terminal, prints every problem as a readable line and exits 2", async (t) => {
  const group = useProcesses(t);
  const node = shellLine([process.execPath, "--import", "tsx", "gateway/main.ts"]);
  const proc = group.spawn({
    name: "gateway on a tty",
    file: "gateway/main.ts",
    // `script -qec <cmd> /dev/null`: runs <cmd> on a fresh pseudo-terminal, returns its exit status.
    argv: ["script", "-qec", node, "/dev/null"],
    env: { PORT: "eighty", REFERRAL_SERVICE_URL: "ftp://127.0.0.1:8081" },
  });
  const exit = await proc.exited;
  t.is(exit.code, EXIT_CONFIG_ERROR, proc.output);
  const text = proc.output.replace(/\r/g, "");
  t.regex(text, /^gateway: invalid configuration, not started \(exit 2\):$/m);
  t.regex(text, /^ {2}- PORT must be an integer/m);
  t.regex(text, /^ {2}- REFERRAL_SERVICE_URL must be an http\(s\) URL/m);
  t.regex(text, /^ {2}- REFERRAL_SERVICE_TOKEN is required/m);
  t.false(text.includes('"level"'), `no JSON log line on a terminal:\n${text}`);
});

test("runMain: stderr a TTY -> readable lines there; stdout piped -> the JSON fatal line as well; neither a TTY -> JSON only", async (t) => {
  const exits: number[] = [];
  const realExit = process.exit;
  process.exit = ((code?: number) => {
    exits.push(code ?? 0);
  }) as typeof process.exit;
  t.teardown(() => {
    process.exit = realExit;
  });
  const run = async (stdoutTty: boolean, stderrTty: boolean) => {
    let stderr = "";
    const json: string[] = [];
    const log = createLogger("relay", "info", { write: (line: string) => json.push(line) });
    runMain(
      log,
      async () => {
        throw new ConfigError(["DATABASE_URL is required", "OPS_PORT must be an integer"]);
      },
      { stdout: { isTTY: stdoutTty }, stderr: { isTTY: stderrTty, write: (s: string) => (stderr += s) } },
    );
    await new Promise((resolve) => setImmediate(resolve));
    return { stderr, json };
  };
  const both = await run(true, true);
  t.is(
    both.stderr,
    "relay: invalid configuration, not started (exit 2):\n  - DATABASE_URL is required\n  - OPS_PORT must be an integer\nEvery setting is described in the README's settings table.\n",
  );
  t.is(both.json.length, 0);
  const piped = await run(false, true);
  t.true(piped.stderr.startsWith("relay: invalid configuration"));
  t.is(piped.json.length, 1);
  const neither = await run(false, false);
  t.is(neither.stderr, "");
  t.deepEqual((JSON.parse(neither.json[0]!) as { problems: string[] }).problems, ["DATABASE_URL is required", "OPS_PORT must be an integer"]);
  t.deepEqual(exits, [2, 2, 2]);
});
