/**
 * `npm run tokens -- <command>`: service tokens of the internal API, straight in the
 * database (DATABASE_URL), for bootstrapping and operations. The AccessService RPCs
 * (CreateServiceToken, ListServiceTokens, RevokeServiceToken) do the same with an admin token.
 *
 *   npm run tokens -- create --name <name> --scopes <scope,scope,...>   prints the token once
 *   npm run tokens -- list                                            names, scopes, dates (never values)
 *   npm run tokens -- revoke --name <name-or-id>
 *
 * Exit codes: 0 success, 1 failure, 2 usage error. Only `create` prints a token, once, on stdout.
 */
import { parseArgs } from "node:util";
import { createPrisma } from "../services/shared/adapters/db.js";
import { DomainError } from "../services/shared/rpc/errors.js";
import { redactUrl } from "../services/shared/runtime/log.js";
import { SCOPES, SCOPE_MEANING } from "../services/access/scopes.js";
import { createServiceToken, listServiceTokens, revokeServiceToken } from "../services/access/service-tokens.js";
import { isMainModule } from "./lib/is-main-module.js";

const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

const USAGE = `usage: npm run tokens -- <command> [options]      (needs DATABASE_URL)

commands:
  create --name <name> --scopes <scope,...>   mint a token; it is printed once, only its SHA-256 is stored
  list                                        every token: name, scopes, created, revoked (never a value)
  revoke --name <name-or-id>                  the token stops working within 1 s

scopes:
${SCOPES.map((s) => `  ${s.padEnd(15)}${SCOPE_MEANING[s]}`).join("\n")}

Use a token as the header  authorization: Bearer <token>  on every Connect, gRPC or gRPC-Web call.
`;

class UsageError extends Error {}

export async function runTokensCli(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { name: { type: "string" }, scopes: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
  } catch (error) {
    // Failure policy: a malformed command line is a usage error with the usage text, nothing touched.
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const [command] = parsed.positionals;
  if (parsed.values.help || command === undefined) {
    process.stdout.write(USAGE);
    return parsed.values.help ? 0 : EXIT_USAGE;
  }
  const databaseUrl = env.DATABASE_URL?.trim();
  if (!databaseUrl) {
    process.stderr.write(`DATABASE_URL is required\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const prisma = createPrisma(databaseUrl, { maxConnections: 1 });
  try {
    const now = new Date();
    if (command === "create") {
      if (!parsed.values.name || !parsed.values.scopes) throw new UsageError("create needs --name and --scopes");
      const { record, token } = await createServiceToken(prisma, now, { name: parsed.values.name, scopes: parsed.values.scopes.split(",") });
      process.stderr.write(`created service token "${record.name}" (scopes ${record.scopes.join(",")}) in ${redactUrl(databaseUrl)}; it is shown only now:\n`);
      process.stdout.write(`${token}\n`);
    } else if (command === "list") {
      for (const t of await listServiceTokens(prisma)) {
        process.stdout.write(
          `${t.id}  ${t.name}  ${t.scopes.join(",")}  created ${t.createdAt.toISOString()}${t.revokedAt ? `  REVOKED ${t.revokedAt.toISOString()}` : ""}\n`,
        );
      }
    } else if (command === "revoke") {
      if (!parsed.values.name) throw new UsageError("revoke needs --name");
      const t = await revokeServiceToken(prisma, now, parsed.values.name);
      process.stdout.write(`revoked service token "${t.name}" (${t.id})\n`);
    } else {
      throw new UsageError(`unknown command "${command}"`);
    }
    return 0;
  } catch (error) {
    // Failure policy: usage and domain errors print their safe message; anything else its message, never a token.
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n\n${USAGE}`);
      return EXIT_USAGE;
    }
    process.stderr.write(`${error instanceof DomainError ? error.message : `failed: ${(error as Error).message}`}\n`);
    return EXIT_FAILURE;
  } finally {
    await prisma.$disconnect();
  }
}

if (isMainModule(import.meta.url)) {
  process.exitCode = await runTokensCli(process.argv.slice(2));
}
