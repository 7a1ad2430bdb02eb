import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import {
  AlertChannelsSchema,
  GetAlertChannelsResponseSchema,
  ListOwnerAlertsResponseSchema,
  MarkOwnerAlertsReadResponseSchema,
  OwnerAlertSchema,
  SetAlertChannelsResponseSchema,
  type AlertChannels,
  type GetAlertChannelsRequest,
  type GetAlertChannelsResponse,
  type ListOwnerAlertsRequest,
  type ListOwnerAlertsResponse,
  type ListServerAlertsRequest,
  type ListServerAlertsResponse,
  ListServerAlertsResponseSchema,
  type OwnerAlert,
  type MarkOwnerAlertsReadRequest,
  type MarkOwnerAlertsReadResponse,
  type SetAlertChannelsRequest,
  type SetAlertChannelsResponse,
} from "../../gen/proto/alerts/v1/alerts_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { executeSql, runSql } from "../shared/adapters/sql/executor.js";
import { OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import { DomainError } from "../shared/values/domain-error.js";
import { isUuid } from "../shared/values/ids.js";
import { requireServerId } from "../servers/server-exists.js";
import { BAD_EMAIL_TEXT } from "../shared/values/reminder-texts.js";
import { normalizeEmail } from "../reminders/domain/reminder-schedule.js";
import { listAlertsSql, markAlertsReadSql, readChannelsSql, upsertChannelsSql, type ListedAlert, type StoredChannels } from "./alert-store.js";
import { notADiscordWebhookText, readDiscordWebhookUrl } from "../shared/values/discord-webhook-url.js";

/** The refusal of an alert channel URL that is not a Discord webhook (never repeating the URL: it carries the token). */
export const WEBHOOK_URL_TEXT = notADiscordWebhookText("discord_webhook_url");

/**
 * OwnerAlertService's use cases (docs/owner-alerts.md): an owner's alert channels and alert list. Who: an owner's
 * dashboard session acts on its own owner only (RPC_ACCESS policy `own`: the owner comes from the session, never from
 * the request); a service token names the owner. The Discord webhook URL is sealed at once and never answered again.
 */

/** An owner id that is not the caller's, or none given by a service token. */
export const UNKNOWN_OWNER_TEXT = "unknown owner";
/** Alerts a page holds at most, and by default. */
export const MAX_ALERTS_PAGE = 100;
export const DEFAULT_ALERTS_PAGE = 50;
/** Alert ids one MarkOwnerAlertsRead takes at most. */
export const MAX_MARKED_ALERTS = 500;

/** The owner a call acts on: the session's own (any other named is unknown), or the one a service token names. */
export function ownerOf(ctx: HandlerContext, requested: string): string {
  const sessionOwner = ctx.values.get(OWNER_SCOPE);
  if (sessionOwner !== undefined) {
    if (requested !== "" && requested !== sessionOwner) throw new DomainError("not_found", UNKNOWN_OWNER_TEXT);
    return sessionOwner;
  }
  if (requested === "") throw new DomainError("invalid_argument", "owner_id is required");
  return requested;
}

function toChannels(deps: CoreDeps, stored: StoredChannels | undefined): AlertChannels {
  const webhook = stored?.discord_webhook ? readDiscordWebhookUrl(deps.secretBox.open(stored.discord_webhook)) : undefined;
  return create(AlertChannelsSchema, {
    email: stored?.email ?? "",
    discordWebhookSet: stored?.discord_webhook != null,
    discordWebhookId: webhook?.id ?? "",
  });
}

/** GetAlertChannels: the owner's channels, one row by primary key. */
export async function getAlertChannels(deps: CoreDeps, req: GetAlertChannelsRequest, ctx: HandlerContext): Promise<GetAlertChannelsResponse> {
  const ownerId = ownerOf(ctx, req.ownerId);
  const [stored] = await runSql<StoredChannels>(deps.prisma, readChannelsSql(ownerId));
  return create(GetAlertChannelsResponseSchema, { channels: toChannels(deps, stored) });
}

/** SetAlertChannels: the address checked as reminders check one, the webhook URL on Discord's hosts only and sealed. */
export async function setAlertChannels(deps: CoreDeps, req: SetAlertChannelsRequest, ctx: HandlerContext): Promise<SetAlertChannelsResponse> {
  const ownerId = ownerOf(ctx, req.ownerId);
  let email: string | null = null;
  if (req.email.trim() !== "") {
    const normalized = normalizeEmail(req.email);
    if (normalized === undefined) throw new DomainError("invalid_argument", BAD_EMAIL_TEXT);
    email = normalized;
  }
  let webhook: string | null | undefined;
  if (req.removeDiscordWebhook) webhook = null;
  else if (req.discordWebhookUrl !== undefined && req.discordWebhookUrl.trim() !== "") {
    if (readDiscordWebhookUrl(req.discordWebhookUrl) === undefined) throw new DomainError("invalid_argument", WEBHOOK_URL_TEXT);
    webhook = deps.secretBox.seal(req.discordWebhookUrl.trim());
  }
  const [stored] = await runSql<StoredChannels>(deps.prisma, upsertChannelsSql(ownerId, email, webhook, deps.now()));
  return create(SetAlertChannelsResponseSchema, { channels: toChannels(deps, stored) });
}

/** ListOwnerAlerts: a page of the owner's alerts, all their servers (listAlertsSql states the bound). */
export async function listOwnerAlerts(deps: CoreDeps, req: ListOwnerAlertsRequest, ctx: HandlerContext): Promise<ListOwnerAlertsResponse> {
  return create(ListOwnerAlertsResponseSchema, { alerts: await listAlerts(deps, { ownerId: ownerOf(ctx, req.ownerId) }, req) });
}

/**
 * ListServerAlerts: a page of one server's alerts (RPC_ACCESS policy `owned: server`: an owner's session reaches its
 * own servers only, checked before the handler); a server that does not exist is unknown_server.
 */
export async function listServerAlerts(deps: CoreDeps, req: ListServerAlertsRequest): Promise<ListServerAlertsResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  return create(ListServerAlertsResponseSchema, { alerts: await listAlerts(deps, { serverId }, req) });
}

async function listAlerts(
  deps: CoreDeps,
  by: { ownerId: string } | { serverId: string },
  req: { unreadOnly: boolean; limit: number; before?: Timestamp | undefined },
): Promise<OwnerAlert[]> {
  if (req.limit < 0 || req.limit > MAX_ALERTS_PAGE) throw new DomainError("invalid_argument", `limit must be 1..${MAX_ALERTS_PAGE}`);
  const rows = await runSql<ListedAlert>(
    deps.prisma,
    listAlertsSql({
      by,
      unreadOnly: req.unreadOnly,
      before: req.before ? timestampDate(req.before) : null,
      limit: req.limit === 0 ? DEFAULT_ALERTS_PAGE : req.limit,
    }),
  );
  return rows.map((r) =>
    create(OwnerAlertSchema, {
      id: r.id,
      serverId: r.server_id,
      kind: r.kind,
      title: r.title,
      detail: r.detail,
      link: r.link,
      createdAt: timestampFromDate(r.created_at),
      read: r.read_at !== null,
      resolved: r.resolved_at !== null,
    }),
  );
}

/** MarkOwnerAlertsRead: the owner's alerts among `alert_ids` become read (others' ids change nothing). */
export async function markOwnerAlertsRead(deps: CoreDeps, req: MarkOwnerAlertsReadRequest, ctx: HandlerContext): Promise<MarkOwnerAlertsReadResponse> {
  const ownerId = ownerOf(ctx, req.ownerId);
  if (req.alertIds.length > MAX_MARKED_ALERTS) throw new DomainError("invalid_argument", `at most ${MAX_MARKED_ALERTS} alert ids`);
  const ids = req.alertIds.filter(isUuid);
  const marked = ids.length === 0 ? 0 : await executeSql(deps.prisma, markAlertsReadSql(ownerId, ids, deps.now()));
  return create(MarkOwnerAlertsReadResponseSchema, { marked });
}
