import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { generateClickToken } from "../shared/runtime/secrets.js";
import type { RecordClickCommand } from "./domain/commands.js";
import { toRedirectUrl } from "./domain/redirect-url.js";
import { ERROR_TEXT } from "../shared/values/contract.js";
import { toVoterAddress } from "../hearts/domain/ip.js";

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
  const address = command.ip === null ? null : toVoterAddress(command.ip);
  const click = await deps.prisma.referralClick.create({
    data: {
      serverId: command.serverId,
      referrerIdentity: command.referrerIdentity,
      token,
      ip: address?.ip ?? command.ip,
      subnet: address?.subnet ?? null,
      userAgent: command.userAgent,
      createdAt: deps.now(),
    },
    select: { id: true },
  });
  return { clickId: click.id, token, redirectUrl: toRedirectUrl(server.registrationUrl, token) };
}
