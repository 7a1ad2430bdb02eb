import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Prisma } from "../../gen/prisma/client.js";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import {
  GetPluginActivityResponseSchema,
  PluginActivityRowSchema,
  PluginCallOutcome,
  type GetPluginActivityRequest,
  type GetPluginActivityResponse,
} from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { PLAYER_ID_KIND_TO_PROTO, PLUGIN_CALL_OUTCOME_TO_PROTO } from "../shared/values/proto-names.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { requireServerId } from "../servers/server-exists.js";

/**
 * Rows of one server at most: the table's bound (the check/claim API's 8 paths x 5 id kinds x 4 outcomes, plus the reward
 * queue's 2 paths x no id kind x 2 outcomes), so the read is bounded too.
 */
export const MAX_PLUGIN_ACTIVITY_ROWS = 164;

interface ActivityRow {
  family: string;
  player_id_kind: string;
  outcome: string;
  calls: number;
  since: Date;
  last_at: Date;
  last_action: string;
  last_answer: string;
  last_player_id: string | null;
}

/**
 * GetPluginActivity: one server's plugin_activity rows, newest last call first, at most MAX_PLUGIN_ACTIVITY_ROWS
 * (the primary key's prefix on server_id; the LIMIT states the bound). unknown_server for a server that does not exist.
 */
export async function getPluginActivity(deps: CoreDeps, req: GetPluginActivityRequest): Promise<GetPluginActivityResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  const rows = await runSql<ActivityRow>(
    deps.prisma,
    Prisma.sql`
      SELECT family, player_id_kind, outcome, calls, since, last_at, last_action, last_answer, last_player_id
      FROM plugin_activity
      WHERE server_id = ${serverId}::uuid
      ORDER BY last_at DESC, family, player_id_kind, outcome
      LIMIT ${MAX_PLUGIN_ACTIVITY_ROWS}`,
  );
  return create(GetPluginActivityResponseSchema, {
    rows: rows.map((row) =>
      create(PluginActivityRowSchema, {
        family: row.family,
        playerIdKind: PLAYER_ID_KIND_TO_PROTO[row.player_id_kind as keyof typeof PLAYER_ID_KIND_TO_PROTO] ?? PlayerIdKind.UNSPECIFIED,
        outcome: PLUGIN_CALL_OUTCOME_TO_PROTO[row.outcome as keyof typeof PLUGIN_CALL_OUTCOME_TO_PROTO] ?? PluginCallOutcome.UNSPECIFIED,
        calls: row.calls,
        since: timestampFromDate(row.since),
        lastAt: timestampFromDate(row.last_at),
        lastAction: row.last_action,
        lastAnswer: row.last_answer,
        lastPlayerId: row.last_player_id ?? "",
      }),
    ),
  });
}
