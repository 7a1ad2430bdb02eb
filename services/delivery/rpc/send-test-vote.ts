import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { boundField } from "../../shared/values/field-rules.js";
import { votifierRefusal } from "../../shared/values/votifier-limits.js";
import { TEST_CALLBACK_USERNAME } from "./send-test-callback.js";
import { sendVotifierVote, VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, type VotifierOutcome } from "../pipeline/send-votifier.js";

/**
 * Sends one test vote to the server's Votifier v2 listener with its stored settings (the token is
 * decrypted here only). `serverId` is an existing server; a blank `rawUsername` votes as
 * TEST_CALLBACK_USERNAME. Returns the target and the whole exchange for the dashboard's report.
 */
export async function sendTestVote(
  deps: CoreDeps & { allowInsecureCallbacks: boolean },
  serverId: string,
  rawUsername: string,
): Promise<{ target: { host: string; port: number }; outcome: VotifierOutcome }> {
  // Bounded like a heart's username (services/shared/values/field-rules.ts): a NUL or over-long name is 400, never sent.
  const username = boundField("username", rawUsername).trim() || TEST_CALLBACK_USERNAME;
  // The one rule of what a listener can carry: a name NuVotifier always refuses is not sent, the owner is told why.
  const refusal = votifierRefusal({ username });
  if (refusal !== undefined) throw new DomainError("invalid_argument", `username: ${refusal}`);
  const server = await deps.prisma.server.findUniqueOrThrow({ where: { id: serverId } });
  if (!server.votifierHost || !server.votifierPort || !server.votifierToken) {
    throw new DomainError("failed_precondition", "Votifier is not set up: set host, port, token and service name in the integration tab first");
  }
  const target = { host: server.votifierHost, port: server.votifierPort };
  let token: string;
  try {
    token = deps.secretBox.open(server.votifierToken);
  } catch {
    // Failure policy: a token sealed under another SECRETS_KEY cannot be used; tell the owner to set it again.
    throw new DomainError("failed_precondition", "the stored Votifier token cannot be decrypted: set the token again");
  }
  const outcome = await sendVotifierVote(
    { ...target, token },
    {
      serviceName: server.votifierServiceName ?? "",
      username,
      address: VOTIFIER_VOTE_ADDRESS,
      timestamp: deps.now().getTime(),
    },
    { timeoutMs: VOTIFIER_TIMEOUT_MS, allowInsecure: deps.allowInsecureCallbacks },
  );
  return { target, outcome };
}
