import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { DeadLetterSchema, ListDeadLettersResponseSchema, OperatorService } from "../../gen/proto/ops/v1/ops_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { DEFAULT_DEAD_LETTER_PAGE, listDeadLetters, MAX_DEAD_LETTER_PAGE, type DeadLetterSource } from "../shared/adapters/dead-letters.js";
import { notNegativeText } from "../shared/values/contract.js";

const SOURCES: readonly DeadLetterSource[] = ["relay", "delivery"];

/**
 * Registers OperatorService: what the pipeline set aside (dead letters). Callers:
 * the deployment's operators and their tools on the internal network, never
 * server owners (the dashboard does not expose it).
 */
export function operatorRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(OperatorService, {
      async listDeadLetters(req) {
        if (req.source !== "" && !SOURCES.includes(req.source as DeadLetterSource)) {
          throw new DomainError("invalid_argument", `source must be one of ${SOURCES.join(", ")} or empty`);
        }
        if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
        if (req.beforeId !== "" && !/^[1-9][0-9]{0,18}$/.test(req.beforeId)) throw new DomainError("invalid_argument", "before_id must be a dead letter id");
        const { items, total } = await listDeadLetters(deps.prisma, {
          ...(req.source !== "" ? { source: req.source as DeadLetterSource } : {}),
          ...(req.beforeId !== "" ? { beforeId: BigInt(req.beforeId) } : {}),
          limit: Math.min(req.limit === 0 ? DEFAULT_DEAD_LETTER_PAGE : req.limit, MAX_DEAD_LETTER_PAGE),
        });
        return create(ListDeadLettersResponseSchema, {
          total: BigInt(total),
          deadLetters: items.map((d) =>
            create(DeadLetterSchema, {
              id: String(d.id),
              source: d.source,
              code: d.code,
              reason: d.reason,
              topic: d.topic,
              key: d.key,
              type: d.type ?? "",
              payloadSize: BigInt(d.payloadSize),
              payloadPreview: d.payloadPreview,
              outboxId: d.outboxId === null ? "" : String(d.outboxId),
              partition: d.partition ?? -1,
              offset: d.offset ?? "",
              createdAt: timestampFromDate(d.createdAt),
              ...(d.outboxCreatedAt ? { outboxCreatedAt: timestampFromDate(d.outboxCreatedAt) } : {}),
            }),
          ),
        });
      },
    });
  };
}
