import { Prisma } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { oldestDueRowsSql, oldestOfAgeKey, statementRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import { ADDRESS_HELD } from "../shared/adapters/voter-address-erasure.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { generateClickToken } from "../shared/runtime/secrets.js";
import type { RecordClickCommand } from "./domain/commands.js";
import { toRedirectUrl } from "./domain/redirect-url.js";
import { ERROR_TEXT } from "../shared/values/contract.js";
import { toVoterAddress } from "../hearts/domain/ip.js";
import { addressPseudonyms, currentAddressKey } from "../shared/values/address-key.js";
import { deleteTokenEventsSql } from "./apply-event.js";

/** The age columns retention rules key by (ageKeySql). */
const CREATED_AT = Prisma.raw("created_at");

/** A stored click and where to send the visitor. */
export interface RecordedClick {
  clickId: string;
  token: string;
  redirectUrl: string;
}

/**
 * Records a referral click for a server whose referrals are enabled (404
 * `unknown server` / `referrals not enabled for this server` otherwise: links
 * stop working when the owner turns referrals off) and returns its unguessable
 * token and the registration URL with `ref_token` appended.
 */
export async function recordClick(deps: CoreDeps, command: RecordClickCommand): Promise<RecordedClick> {
  const server = await deps.prisma.server.findUnique({
    where: { id: command.serverId },
    select: { referralsEnabled: true, registrationUrl: true },
  });
  if (!server) throw unknownServer();
  if (!server.referralsEnabled) throw new DomainError("referrals_disabled", ERROR_TEXT.referralsDisabled);
  const token = generateClickToken();
  // Stored as hearts store theirs (canonical IP, /24 or /64 subnet), so the anti-abuse facts compare like with like;
  // an address that does not parse is kept as given, without a subnet.
  const parsed = command.ip === null ? null : toVoterAddress(command.ip);
  const address = { ip: parsed?.ip ?? command.ip, subnet: parsed?.subnet ?? null };
  const click = await deps.prisma.referralClick.create({
    data: {
      serverId: command.serverId,
      referrerIdentity: command.referrerIdentity,
      token,
      ...address,
      // Kept after the address is erased, for the self-referral-by-address rule (services/referral/abuse-facts.ts).
      ...addressPseudonyms(currentAddressKey(deps), address),
      userAgent: command.userAgent,
      createdAt: deps.now(),
    },
    select: { id: true },
  });
  return { clickId: click.id, token, redirectUrl: toRedirectUrl(server.registrationUrl, token) };
}

/**
 * The address erasure of clicks (issue 30), as a retention rule (services/retention/): each batch erases (sets to null)
 * the IP, subnet and user agent of at most `limit` clicks made more than `keepSeconds` before `now`, oldest first, in ONE
 * short statement, and returns how many it erased (0: none is due). The keyed pseudonyms (ip_key, subnet_key) stay.
 * Rows locked by another writer are skipped (the next pass takes them), so the pass never waits on the hot path.
 * `keepSeconds` is ADDRESS_RETENTION_HOURS (services/shared/runtime/address-settings.ts).
 */
export function clickAddressesRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "click_addresses",
    table: "referral_clicks",
    keepSeconds,
    // Bounded: reads at most `limit` entries of referral_clicks_address_held_idx (only the clicks still holding an address, oldest first;
    // never the table) and writes those rows by primary key (= ANY of the array: an index scan of the keys; an IN
    // subquery is planned as a hash join that reads the whole table); rows another writer holds are skipped.
    removeDue: (cutoff, limit) => Prisma.sql`
      UPDATE referral_clicks c SET ip = NULL, subnet = NULL, user_agent = NULL
      WHERE c.id = ANY(ARRAY(${oldestDueRowsSql({ table: "referral_clicks", columns: Prisma.raw("id"), due: ADDRESS_HELD, column: CREATED_AT, cut: cutoff, limit })}))`,
    // One entry of referral_clicks_address_held_idx (an age-key index: the anti-abuse reads can never take it).
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(CREATED_AT)} AS oldest FROM referral_clicks WHERE ${ADDRESS_HELD}`,
  });
}

/**
 * The click retention (issue 30), as a retention rule: each batch removes at most `limit` clicks that never registered
 * anyone (not linked to a referral) made more than `keepSeconds` before `now`, oldest first, with their token's dedup
 * rows (only first-touch conflicts: the one outcome an event through a click that stays unlinked leaves), in ONE
 * statement. `keepSeconds` (RETENTION_CLICK_DAYS) is longer than every attribution window a server can set, so such a
 * click can no longer register anyone; an event through its token is answered 404 `unknown token` once it is gone
 * (before, a `registered` got the same 404 past the window, a `qualified` or `reversed` a 422 from `clicked`).
 * A linked click stays while its referral does and goes with it (endedReferralRetention, services/referral/apply-event.ts).
 * Rows locked by a concurrent ApplyEvent (linking the click) are skipped, and the delete re-checks that the click is
 * still unlinked.
 */
export function unlinkedClickRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "unlinked_clicks",
    table: "referral_clicks",
    keepSeconds,
    // Bounded: reads at most `limit` entries of referral_clicks_unlinked_age_key_idx (only never-linked clicks, oldest
    // first, up to the cutoff; never a linked click whatever its age), deletes those rows by primary key and their
    // tokens' dedup rows through the (token, type, server_event_id) unique index.
    removeDue: (cutoff, limit) => Prisma.sql`
      WITH due AS (
        ${oldestDueRowsSql({ table: "referral_clicks", columns: Prisma.raw("id, token"), due: Prisma.sql`referral_id IS NULL`, column: CREATED_AT, cut: cutoff, limit })}
      ), events AS (${deleteTokenEventsSql(Prisma.sql`SELECT token FROM due`)})
      DELETE FROM referral_clicks c WHERE c.id = ANY(ARRAY(SELECT id FROM due)) AND c.referral_id IS NULL`,
    // One entry of referral_clicks_unlinked_age_key_idx.
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(CREATED_AT)} AS oldest FROM referral_clicks WHERE referral_id IS NULL`,
  });
}
