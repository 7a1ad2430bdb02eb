/**
 * Scopes of internal API tokens. `admin` holds every scope. RPC_ACCESS
 * (rpc-access.ts) names the scope each RPC requires.
 */
export const SCOPES = ["admin", "read", "ingest", "pull", "claims", "clicks:record", "hearts:cast", "dashboard", "receipts"] as const;
export type Scope = (typeof SCOPES)[number];

/** What each scope allows, for help texts and docs. */
export const SCOPE_MEANING: Record<Scope, string> = {
  admin: "everything: servers, secrets, owners, tokens, login links, deliveries",
  read: "read-only RPCs: servers (no secret values), referrals, leaderboard, funnel, ranking, deliveries",
  ingest:
    "the gateway's ingest path: ResolveSigningKeys and ApplyEvent; the server ids that exist (ListServerIds); the published webhook public keys (ListWebhookSigningKeys)",
  pull: "the gateway's signed pull API: ResolvePullKeys, ListPullHearts and ClaimPullHearts",
  claims:
    "the gateway's check/claim API for reward plugins: CheckVote and ClaimVote, and RecordPluginCalls (what those calls got, for the owner's plugin activity card); the reward queue's ListRewardQueue and AckRewardEntries",
  "clicks:record": "RecordClick (referral links)",
  "hearts:cast": "CastHeart",
  dashboard: "the gateway's owner dashboard: redeem login links and act for an owner's session (x-dashboard-session)",
  receipts: "the gateway's public receipt pages: GetReceipt (one heart, by its unguessable receipt token)",
};

/** True when `value` names a scope. */
export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** True when a token holding `held` may call an RPC requiring `required`. */
export function grants(held: readonly string[], required: Scope): boolean {
  return held.includes(required) || held.includes("admin");
}
