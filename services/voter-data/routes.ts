import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import {
  EraseVoterDataResponseSchema,
  ExportVoterDataResponseSchema,
  ListVoterDataAuditResponseSchema,
  VoterDataAuditEntrySchema,
  VoterDataService,
  type VoterKeyKind,
} from "../../gen/proto/voters/v1/voters_pb.js";
import { requireServer } from "../servers/server-exists.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { CALLER_PRINCIPAL, OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import { notNegativeText } from "../shared/values/contract.js";
import { eraseVoterData, newTombstone } from "./erase-voter-data.js";
import { exportCounts, exportVoterData } from "./export-voter-data.js";
import { listVoterDataAudit, recordVoterDataAudit, setVoterDataAuditCounts } from "./voter-data-audit.js";
import { fromProtoKeyKind } from "../shared/values/voter-key-kinds.js";
import { toVoterKey, type VoterKey } from "./voter-key.js";

/** The text of a whole-list request by a server's owner (the access table already refuses it: an empty id is no server of theirs). */
export const WHOLE_LIST_TEXT = "server_id is required: a server's owner acts on that server only";

/** A request's scope and key: the server (null: the whole list, for tokens only) and the voter's key in normal form. */
async function toScope(deps: CoreDeps, ctx: HandlerContext, req: { serverId: string; keyKind: VoterKeyKind; key: string }) {
  const key: VoterKey = toVoterKey(fromProtoKeyKind(req.keyKind), req.key);
  if (req.serverId.trim() === "") {
    if (ctx.values.get(OWNER_SCOPE) !== undefined) throw new DomainError("invalid_argument", WHOLE_LIST_TEXT);
    return { serverId: null, key };
  }
  return { serverId: await requireServer(deps, req.serverId), key };
}

/**
 * Registers VoterDataService: a voter's export and erasure (services/voter-data), each recorded in the audit with
 * the caller (CALLER_PRINCIPAL) and the key hashed. Access (services/access/rpc-access.ts): admin tokens on any server
 * or the whole list; a server's owner on that server only; the audit for admins only.
 */
export function voterDataRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(VoterDataService, {
      async exportVoterData(req, ctx) {
        const scope = await toScope(deps, ctx, req);
        const now = deps.now();
        const doc = await exportVoterData(deps.prisma, { ...scope, now });
        await recordVoterDataAudit(deps.prisma, {
          action: "export",
          principal: ctx.values.get(CALLER_PRINCIPAL),
          ...scope,
          tombstone: null,
          counts: exportCounts(doc),
          at: now,
        });
        return create(ExportVoterDataResponseSchema, { document: JSON.stringify(doc) });
      },
      async eraseVoterData(req, ctx) {
        const scope = await toScope(deps, ctx, req);
        const now = deps.now();
        const tombstone = newTombstone();
        // The audit row first: it holds the tombstone, so a receipt of a heart already erased answers "erased" at once,
        // and an erasure cut short is still on record (running it again finishes it, with a tombstone of its own).
        const auditId = await recordVoterDataAudit(deps.prisma, {
          action: "erase",
          principal: ctx.values.get(CALLER_PRINCIPAL),
          ...scope,
          tombstone,
          counts: {},
          at: now,
        });
        const erasure = await eraseVoterData(deps.prisma, { ...scope, now, tombstone });
        await setVoterDataAuditCounts(deps.prisma, auditId, erasure.counts);
        deps.log.info({ serverId: scope.serverId, counts: erasure.counts }, "voter data erased");
        return create(EraseVoterDataResponseSchema, {
          tombstone,
          counts: Object.fromEntries(Object.entries(erasure.counts).map(([k, v]) => [k, BigInt(v)])),
        });
      },
      async listVoterDataAudit(req) {
        if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
        const entries = await listVoterDataAudit(deps.prisma, req.limit);
        return create(ListVoterDataAuditResponseSchema, {
          entries: entries.map((e) =>
            create(VoterDataAuditEntrySchema, {
              id: e.id,
              action: e.action,
              principal: e.principal,
              serverId: e.server_id ?? "",
              keyKind: e.key_kind,
              keyHash: e.key_hash,
              counts: JSON.stringify(e.counts),
              createdAt: timestampFromDate(e.created_at),
            }),
          ),
        });
      },
    });
  };
}
