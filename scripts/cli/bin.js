#!/usr/bin/env node
// The `rcb` command (package.json "bin"): loads tsx's ESM hooks, then runs the TypeScript CLI
// in scripts/cli/main.ts in this same process, so exit codes, stdin and Ctrl-C behave as usual.
import { register } from "tsx/esm/api";

register();
const { runCli } = await import("./main.ts");
const code = await runCli(process.argv.slice(2));
// Exit once stdout is flushed: the referral service's HTTP/2 session would otherwise keep the process alive.
process.stdout.write("", () => process.exit(code));
