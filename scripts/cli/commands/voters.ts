/**
 * A voter's export and erasure (VoterDataService): `voters export`, `voters erase` and `voters audit`, with the
 * service token (admin). A voter is found by username (case-insensitive) or by one platform id, on one server
 * (--server) or on the whole list (no --server).
 */
import { writeFileSync } from "node:fs";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { VoterKeyKind } from "../../../gen/proto/voters/v1/voters_pb.js";
import { PROTO_KEY_KIND, VOTER_KEY_KINDS } from "../../../services/shared/values/voter-key-kinds.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CliError, EXIT_OK, EXIT_USAGE, formatPairs } from "../output.js";
import { callRpc, createClients } from "../rpc.js";
import { CLI_RUN } from "../name.js";

/** An export or erasure walks the voter's history in bounded steps; a long one is waited for this long. */
const VOTER_RPC_TIMEOUT_MS = 10 * 60_000;

const KEY_FLAGS = {
  server: { type: "string" },
  username: { type: "string" },
  "steam-id": { type: "string" },
  "discord-id": { type: "string" },
  "minecraft-uuid": { type: "string" },
  "account-id": { type: "string" },
} as const;

const KEY_HELP: [string, string][] = [
  ["--server ID", "the server to act on; leave it out for the whole list"],
  ["--username NAME", "the voter's username (compared case-insensitively)"],
  ["--steam-id ID | --discord-id ID | --minecraft-uuid UUID | --account-id ID", "or one platform id instead of the username"],
];

/** The request's scope and key from the flags: exactly one key flag. */
function voterRequest(ctx: CommandContext): { serverId: string; keyKind: VoterKeyKind; key: string } {
  const given = VOTER_KEY_KINDS.flatMap((kind) => {
    const value = stringFlag(ctx.flags, kind.replace("_", "-"));
    return value === undefined ? [] : [{ kind, value }];
  });
  if (given.length !== 1) {
    throw new CliError("give the voter as exactly one of --username, --steam-id, --discord-id, --minecraft-uuid or --account-id", {
      hint: `for example --username Steve`,
      exitCode: EXIT_USAGE,
    });
  }
  return { serverId: stringFlag(ctx.flags, "server") ?? "", keyKind: PROTO_KEY_KIND[given[0]!.kind], key: given[0]!.value };
}

export const votersExport: Command = {
  name: "voters export",
  summary: "export everything held about a voter as one JSON document (recorded in the audit)",
  usage: "(--username NAME | --steam-id ID | ...) [--server ID] [--out FILE]",
  flagHelp: [...KEY_HELP, ["--out FILE", "write the document to FILE instead of stdout"]],
  flags: { ...KEY_FLAGS, out: { type: "string" } },
  examples: [`${CLI_RUN} voters export --server <id> --username Steve --out steve.json`],
  async run(ctx) {
    const config = ctx.config();
    const req = voterRequest(ctx);
    const { document } = await callRpc(config, "exporting the voter's data", () =>
      createClients(config).voters.exportVoterData(req, { timeoutMs: VOTER_RPC_TIMEOUT_MS }),
    );
    const out = stringFlag(ctx.flags, "out");
    if (out !== undefined) {
      writeFileSync(out, `${document}\n`, { mode: 0o600 });
      ctx.out.progress(`wrote ${out}`);
    } else if (ctx.out.json) {
      ctx.out.result(JSON.parse(document));
    } else {
      ctx.out.line(JSON.stringify(JSON.parse(document), null, 2));
    }
    return EXIT_OK;
  },
};

export const votersErase: Command = {
  name: "voters erase",
  summary: "erase a voter: their identities become a tombstone, their addresses are dropped; counts and payments stay (recorded in the audit)",
  usage: "(--username NAME | --steam-id ID | ...) [--server ID] --yes",
  flagHelp: [...KEY_HELP, ["--yes", "confirm: the erasure cannot be undone"]],
  flags: { ...KEY_FLAGS, yes: { type: "boolean" } },
  examples: [`${CLI_RUN} voters erase --server <id> --username Steve --yes`],
  async run(ctx) {
    const req = voterRequest(ctx);
    if (ctx.flags.yes !== true) {
      throw new CliError("the erasure cannot be undone: add --yes to confirm", {
        hint: `export first: ${CLI_RUN} voters export ... --out FILE`,
        exitCode: EXIT_USAGE,
      });
    }
    const config = ctx.config();
    const erased = await callRpc(config, "erasing the voter's data", () =>
      createClients(config).voters.eraseVoterData(req, { timeoutMs: VOTER_RPC_TIMEOUT_MS }),
    );
    const counts = Object.fromEntries(Object.entries(erased.counts).map(([k, v]) => [k, Number(v)]));
    ctx.out.result({ tombstone: erased.tombstone, counts });
    ctx.out.line(`Erased. The voter now reads as ${erased.tombstone}.\n`);
    ctx.out.line(formatPairs(Object.entries(counts).map(([table, n]) => [table, String(n)])));
    return EXIT_OK;
  },
};

export const votersAudit: Command = {
  name: "voters audit",
  summary: "list the recorded exports and erasures, newest first (who, when, what; the voter's key hashed)",
  usage: "[--limit N]",
  flagHelp: [["--limit N", "at most N entries (default 50, at most 500)"]],
  flags: { limit: { type: "string" } },
  async run(ctx) {
    const config = ctx.config();
    const limit = Number(stringFlag(ctx.flags, "limit") ?? "0");
    if (!Number.isInteger(limit) || limit < 0) throw new CliError("--limit must be a whole number", { exitCode: EXIT_USAGE });
    const { entries } = await callRpc(config, "listing the audit", (o) => createClients(config).voters.listVoterDataAudit({ limit }, o));
    const rows = entries.map((e) => ({
      at: e.createdAt ? timestampDate(e.createdAt).toISOString() : "",
      action: e.action,
      principal: e.principal,
      server_id: e.serverId || null,
      key_kind: e.keyKind,
      key_hash: e.keyHash,
      counts: JSON.parse(e.counts) as Record<string, number>,
    }));
    ctx.out.result({ entries: rows });
    if (rows.length === 0) ctx.out.line("No exports or erasures yet.");
    ctx.out.table(
      ["AT", "ACTION", "BY", "SERVER", "KEY"],
      rows.map((r) => [r.at, r.action, r.principal, r.server_id ?? "(whole list)", `${r.key_kind} ${r.key_hash.slice(0, 12)}`]),
    );
    return EXIT_OK;
  },
};
