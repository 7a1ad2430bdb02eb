import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  PullKeyStatus,
  ServerAdminService,
  SigningKeyStatus,
  type CallbackEndpointSchema,
  type SecretInfoSchema,
  type ServerSchema,
  type WebhookSigningKeySchema,
} from "../../gen/proto/servers/v1/servers_pb.js";
import { OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import { validateCallbackUrl } from "../shared/values/callback-url.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { boundField } from "../shared/values/field-rules.js";
import { enableCallback } from "./enable-callback.js";
import type { HeldReleaseDeps } from "./held-release.js";
import {
  createEndpoint,
  deleteEndpoint,
  findEndpoint,
  listEndpoints,
  toEndpointUrl,
  toEventTypes,
  toPayloadVersion,
  updateEndpoint,
  type EndpointRecord,
} from "./endpoint-store.js";
import {
  createDiscordEndpoint,
  parseDiscordWebhookUrl,
  previewDiscordMessage,
  setDiscordTemplates,
  storedDiscordTemplates,
  toDiscordTemplates,
} from "./discord-endpoint.js";
import { revealClaimKey, rotateClaimKey, setClaimSettings } from "./claim-settings.js";
import { listServerIds } from "./list-server-ids.js";
import { toGraceSeconds } from "./domain/secret-policy.js";
import { toRegistrationUrl, toServerName } from "./domain/server-fields.js";
import { toReferralSettings } from "./domain/referral-settings.js";
import { toVotifierSettings } from "./domain/votifier-settings.js";
import {
  createReferralSecret,
  listReferralSecrets,
  resolveSigningKeys,
  revealCallbackSecret,
  revealNewestSecret,
  revealReferralSecret,
  resolvePullKeys,
  revokeReferralSecret,
  rotateSecret,
  type SecretMeta,
} from "./secret-store.js";
import {
  createServer,
  getServer,
  listServers,
  setCallbackSettings,
  setPullEnabled,
  setPullEventTypes,
  setVotifierSettings,
  updateServer,
  type ServerRecord,
} from "./server-store.js";
import { listPublishedSigningKeys, rotateSigningKey, type PublishedSigningKey } from "./webhook-signing-keys.js";

/**
 * What the server admin routes need: the core deps, the release of held deliveries the
 * settings writes make sendable (HeldReleaseDeps), plus the deployment's development flag
 * that allows http and private/loopback callback URLs (ALLOW_INSECURE_CALLBACKS; default false).
 */
export type ServerAdminDeps = CoreDeps & HeldReleaseDeps & { allowInsecureCallbacks?: boolean };

const STATUS_TO_PROTO = {
  ok: SigningKeyStatus.OK,
  unknown_server: SigningKeyStatus.UNKNOWN_SERVER,
  referrals_disabled: SigningKeyStatus.REFERRALS_DISABLED,
} as const;

const PULL_STATUS_TO_PROTO = {
  ok: PullKeyStatus.OK,
  unknown_server: PullKeyStatus.UNKNOWN_SERVER,
  pull_disabled: PullKeyStatus.PULL_DISABLED,
} as const;

/**
 * The ServerAdminService routes (dashboard and gateway): servers, referral
 * secrets with kid/rotation/revocation, the gateway's ResolveSigningKeys, and
 * the reward callback settings and secret, the Votifier v2 settings (the token
 * is write-only), and the pull API switch and secrets. Secret values leave only
 * through Create/Rotate (once), the explicit Reveal RPCs, ResolveSigningKeys and
 * ResolvePullKeys.
 */
export function serverAdminRoutes(deps: ServerAdminDeps): (router: ConnectRouter) => void {
  const allowInsecure = deps.allowInsecureCallbacks ?? false;
  return (router) => {
    router.service(ServerAdminService, {
      async createServer(req, ctx) {
        // An owner's dashboard session creates the server as its own (OWNER_SCOPE; RPC_ACCESS policy "own").
        const ownerId = ctx.values.get(OWNER_SCOPE) ?? null;
        const server = await createServer(deps, { name: toServerName(req.name), registrationUrl: toRegistrationUrl(req.registrationUrl), ownerId });
        return { server: toServerProto(server) };
      },

      async getServer(req) {
        return { server: toServerProto(await getServer(deps, req.serverId.trim())) };
      },

      async listServers(_req, ctx) {
        // An owner's dashboard session sees only its own servers (OWNER_SCOPE; RPC_ACCESS policy "own").
        return { servers: (await listServers(deps, ctx.values.get(OWNER_SCOPE))).map(toServerProto) };
      },

      async setReferralsEnabled(req) {
        return { server: toServerProto(await updateServer(deps, req.serverId.trim(), { referralsEnabled: req.enabled })) };
      },

      async setRegistrationUrl(req) {
        const registrationUrl = toRegistrationUrl(req.registrationUrl);
        return { server: toServerProto(await updateServer(deps, req.serverId.trim(), { registrationUrl })) };
      },

      async setReferralSettings(req) {
        const settings = toReferralSettings({ attributionWindowDays: req.attributionWindowDays, lockDays: req.lockDays });
        return { server: toServerProto(await updateServer(deps, req.serverId.trim(), settings)) };
      },

      async createReferralSecret(req) {
        const created = await createReferralSecret(deps, req.serverId.trim());
        return { info: toSecretInfo(created.info), secret: created.secret };
      },

      async rotateReferralSecret(req) {
        const rotated = await rotateSecret(deps, req.serverId.trim(), "referral", toGraceSeconds(req.graceSeconds));
        return { info: toSecretInfo(rotated.info), secret: rotated.secret };
      },

      async revokeReferralSecret(req) {
        return { info: toSecretInfo(await revokeReferralSecret(deps, req.serverId.trim(), boundField("kid", req.kid.trim()))) };
      },

      async listReferralSecrets(req) {
        return { secrets: (await listReferralSecrets(deps, req.serverId.trim())).map(toSecretInfo) };
      },

      async revealReferralSecret(req) {
        return { secret: await revealReferralSecret(deps, req.serverId.trim(), boundField("kid", req.kid.trim())) };
      },

      async resolveSigningKeys(req) {
        const resolved = await resolveSigningKeys(deps, req.serverId);
        return {
          status: STATUS_TO_PROTO[resolved.status],
          keys: resolved.status === "ok" ? resolved.keys.map((k) => ({ kid: k.kid, secret: Buffer.from(k.secret, "utf8") })) : [],
        };
      },

      async setCallbackSettings(req) {
        let callbackUrl: string | null = null;
        if (req.callbackUrl.trim() !== "") {
          const checked = validateCallbackUrl(req.callbackUrl, { allowInsecure });
          if (!checked.ok) throw new DomainError("invalid_argument", checked.error);
          callbackUrl = checked.url.toString();
        }
        const server = await setCallbackSettings(deps, req.serverId.trim(), {
          callbackUrl,
          standardWebhooks: req.standardWebhooks,
          ...(req.publicKeySignatures === undefined ? {} : { publicKeySignatures: req.publicKeySignatures }),
          endpointId: req.endpointId,
        });
        return { server: toServerProto(server) };
      },

      async rotateCallbackSecret(req) {
        const serverId = req.serverId.trim();
        const endpoint = await findEndpoint(deps.prisma, serverId, req.endpointId);
        const rotated = await rotateSecret(deps, serverId, "callback", toGraceSeconds(req.graceSeconds), endpoint.id);
        return { info: toSecretInfo(rotated.info), secret: rotated.secret };
      },

      async revealCallbackSecret(req) {
        const serverId = req.serverId.trim();
        const endpoint = await findEndpoint(deps.prisma, serverId, req.endpointId);
        const revealed = await revealCallbackSecret(deps, serverId, endpoint.id);
        return { info: toSecretInfo(revealed.info), secret: revealed.secret };
      },

      async enableCallback(req) {
        const enabled = await enableCallback(deps, req.serverId.trim(), req.endpointId);
        return { server: toServerProto(enabled.server), endpoint: toEndpointProto(enabled.endpoint) };
      },

      async createEndpoint(req) {
        const serverId = req.serverId.trim();
        const created = await createEndpoint(deps, serverId, {
          url: toEndpointUrl(req.url, { allowInsecure }),
          eventTypes: toEventTypes(req.eventTypes),
          payloadVersion: toPayloadVersion(req.payloadVersion),
          standardWebhooks: req.standardWebhooks,
          publicKeySignatures: req.publicKeySignatures,
        });
        return { endpoint: toEndpointProto(created.endpoint), info: toSecretInfo(created.info), secret: created.secret };
      },

      async listEndpoints(req) {
        return { endpoints: (await listEndpoints(deps, req.serverId.trim())).map(toEndpointProto) };
      },

      async updateEndpoint(req) {
        const endpoint = await updateEndpoint(deps, req.serverId.trim(), req.endpointId, {
          ...(req.url === undefined ? {} : { url: toEndpointUrl(req.url, { allowInsecure }) }),
          ...(req.updateEventTypes ? { eventTypes: toEventTypes(req.eventTypes) } : {}),
          ...(req.payloadVersion === undefined ? {} : { payloadVersion: toPayloadVersion(req.payloadVersion) }),
          ...(req.standardWebhooks === undefined ? {} : { standardWebhooks: req.standardWebhooks }),
          ...(req.publicKeySignatures === undefined ? {} : { publicKeySignatures: req.publicKeySignatures }),
        });
        return { endpoint: toEndpointProto(endpoint) };
      },

      async createDiscordEndpoint(req) {
        const endpoint = await createDiscordEndpoint(deps, req.serverId.trim(), {
          webhook: parseDiscordWebhookUrl(req.webhookUrl),
          eventTypes: toEventTypes(req.eventTypes),
          templates: toDiscordTemplates(req.templates),
          embed: req.embed,
        });
        return { endpoint: toEndpointProto(endpoint) };
      },

      async setDiscordTemplates(req) {
        return {
          endpoint: toEndpointProto(await setDiscordTemplates(deps, req.serverId.trim(), req.endpointId, toDiscordTemplates(req.templates), req.embed)),
        };
      },

      async previewDiscordMessage(req) {
        return { content: await previewDiscordMessage(deps, req.serverId.trim(), req) };
      },

      async deleteEndpoint(req) {
        await deleteEndpoint(deps, req.serverId.trim(), req.endpointId);
        return {};
      },

      async setVotifierSettings(req) {
        const settings = toVotifierSettings({ host: req.host, port: req.port, serviceName: req.serviceName, token: req.token }, { allowInsecure });
        return { server: toServerProto(await setVotifierSettings(deps, req.serverId.trim(), settings)) };
      },

      async setPullEventTypes(req) {
        return { server: toServerProto(await setPullEventTypes(deps, req.serverId.trim(), toEventTypes(req.eventTypes))) };
      },

      async setPullEnabled(req) {
        return { server: toServerProto(await setPullEnabled(deps, req.serverId.trim(), req.enabled)) };
      },

      async rotatePullSecret(req) {
        const rotated = await rotateSecret(deps, req.serverId.trim(), "pull", toGraceSeconds(req.graceSeconds));
        return { info: toSecretInfo(rotated.info), secret: rotated.secret };
      },

      async revealPullSecret(req) {
        const revealed = await revealNewestSecret(deps, req.serverId.trim(), "pull");
        return { info: toSecretInfo(revealed.info), secret: revealed.secret };
      },

      async resolvePullKeys(req) {
        const resolved = await resolvePullKeys(deps, req.serverId);
        return {
          status: PULL_STATUS_TO_PROTO[resolved.status],
          keys: resolved.status === "ok" ? resolved.keys.map((k) => ({ kid: k.kid, secret: Buffer.from(k.secret, "utf8") })) : [],
        };
      },

      async listServerIds(req) {
        return listServerIds(deps, { cursor: req.cursor, limit: req.limit });
      },

      async listWebhookSigningKeys() {
        return { keys: (await listPublishedSigningKeys(deps)).map(toSigningKeyProto) };
      },

      async rotateClaimKey(req) {
        const rotated = await rotateClaimKey(deps, req.serverId.trim(), req.graceSeconds);
        return { info: toSecretInfo(rotated.info), claimKey: rotated.secret };
      },

      async revealClaimKey(req) {
        const revealed = await revealClaimKey(deps, req.serverId.trim());
        return { info: toSecretInfo(revealed.info), claimKey: revealed.secret };
      },

      async setClaimSettings(req) {
        const input = { holdDays: req.holdDays, maxHeldPerPlayer: req.maxHeldPerPlayer, ...(req.paysOnce === undefined ? {} : { payOnce: req.paysOnce }) };
        return { server: toServerProto(await setClaimSettings(deps, req.serverId.trim(), input)) };
      },

      async rotateWebhookSigningKey() {
        const rotated = await rotateSigningKey(deps);
        return { key: toSigningKeyProto(rotated.key), keys: rotated.keys.map(toSigningKeyProto) };
      },
    });
  };
}

/** Maps a stored server to its proto: the callback settings are its default endpoint's. */
export function toServerProto(server: ServerRecord): MessageInitShape<typeof ServerSchema> {
  const endpoint = server.endpoints.find((e) => e.isDefault);
  return {
    id: server.id,
    name: server.name,
    referralsEnabled: server.referralsEnabled,
    registrationUrl: server.registrationUrl ?? "",
    callbackUrl: endpoint?.url ?? "",
    standardWebhooks: endpoint?.standardWebhooks ?? false,
    publicKeySignatures: endpoint?.publicKeySignatures ?? false,
    payloadVersion: endpoint?.payloadVersion ?? 1,
    callbackDisabledReason: endpoint?.disabledReason ?? "",
    callbackDisabledAt: endpoint?.disabledAt ? timestampFromDate(endpoint.disabledAt) : undefined,
    createdAt: timestampFromDate(server.createdAt),
    votifierHost: server.votifierHost ?? "",
    votifierPort: server.votifierPort ?? 0,
    votifierServiceName: server.votifierServiceName ?? "",
    votifierTokenSet: server.votifierToken !== null,
    pullEnabled: server.pullEnabled,
    pullEventTypes: server.pullEventTypes,
    ownerId: server.ownerId ?? "",
    attributionWindowDays: server.attributionWindowDays,
    lockDays: server.lockDays,
    claims: {
      claimKeySet: server.claimsEnabled,
      holdDays: server.claimHoldDays,
      maxHeldPerPlayer: server.claimMaxHeld,
      paysOnce: server.payOnce,
    },
  };
}

/** Maps a stored endpoint to its proto. */
export function toEndpointProto(endpoint: EndpointRecord): MessageInitShape<typeof CallbackEndpointSchema> {
  return {
    id: endpoint.id,
    serverId: endpoint.serverId,
    isDefault: endpoint.isDefault === true,
    url: endpoint.url ?? "",
    eventTypes: endpoint.eventTypes,
    payloadVersion: endpoint.payloadVersion,
    standardWebhooks: endpoint.standardWebhooks,
    publicKeySignatures: endpoint.publicKeySignatures,
    disabledReason: endpoint.disabledReason ?? "",
    ...(endpoint.disabledAt ? { disabledAt: timestampFromDate(endpoint.disabledAt) } : {}),
    createdAt: timestampFromDate(endpoint.createdAt),
    kind: endpoint.discordWebhookId === null ? "callback" : "discord",
    // The webhook's id only: its token is never returned.
    discordWebhookId: endpoint.discordWebhookId ?? "",
    discordTemplates: Object.entries(storedDiscordTemplates(endpoint)).map(([eventType, template]) => ({ eventType, template })),
    discordEmbed: endpoint.discordEmbed,
  };
}

/** Maps secret metadata (never the value) to SecretInfo. */
function toSecretInfo(meta: SecretMeta): MessageInitShape<typeof SecretInfoSchema> {
  return {
    kid: meta.kid,
    createdAt: timestampFromDate(meta.createdAt),
    expiresAt: meta.expiresAt ? timestampFromDate(meta.expiresAt) : undefined,
    revokedAt: meta.revokedAt ? timestampFromDate(meta.revokedAt) : undefined,
    active: meta.active,
  };
}

/** Maps a published signing key (public material only) to its proto. */
function toSigningKeyProto(key: PublishedSigningKey): MessageInitShape<typeof WebhookSigningKeySchema> {
  return {
    kid: key.kid,
    alg: key.alg,
    publicKey: key.publicKey,
    createdAt: timestampFromDate(key.createdAt),
    expiresAt: key.expiresAt ? timestampFromDate(key.expiresAt) : undefined,
    current: key.current,
  };
}
