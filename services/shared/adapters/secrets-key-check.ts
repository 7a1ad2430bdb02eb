import { ConfigError } from "../runtime/config.js";
import type { PrismaClient } from "./db.js";
import type { SecretBox } from "../runtime/secrets.js";

/** The known value sealed into `secrets_key_check`; opening it proves the key is the one in use. */
const CHECK_PLAINTEXT = "referral-callbacks secrets key check v1";
const CHECK_ROW_ID = 1;

/** The problem reported (exit 2) when the key does not match; names the fix, never the key. */
export const SECRETS_KEY_MISMATCH =
  "SECRETS_KEY does not match the key that sealed the secrets stored in this database (the check value in table secrets_key_check, " +
  "written by the first process that started on it, does not open with it); start with the original key";

/**
 * Verifies at start that `secretBox` holds the key the stored secrets were sealed with, so a
 * wrong key stops the process with one clear problem (ConfigError, exit 2) instead of a 500 on
 * every request that needs a secret.
 *
 * The first process on a database seals a known value into `secrets_key_check`. On a database
 * that has secrets from before this check existed, the oldest secret must open first.
 */
export async function verifySecretsKey(prisma: PrismaClient, secretBox: SecretBox): Promise<void> {
  const opens = (sealed: string): boolean => {
    try {
      return secretBox.open(sealed) !== "";
    } catch {
      // Failure policy: a value that does not open is the answer (wrong key), not an error to rethrow.
      return false;
    }
  };
  let row = await prisma.secretsKeyCheck.findUnique({ where: { id: CHECK_ROW_ID } });
  if (!row) {
    const oldest = await prisma.serverSecret.findFirst({ orderBy: { createdAt: "asc" }, select: { ciphertext: true } });
    if (oldest && !opens(oldest.ciphertext)) throw new ConfigError([SECRETS_KEY_MISMATCH]);
    // Several processes may start at once: the first insert wins and everyone verifies that row.
    await prisma.secretsKeyCheck.createMany({ data: [{ id: CHECK_ROW_ID, sealed: secretBox.seal(CHECK_PLAINTEXT) }], skipDuplicates: true });
    row = await prisma.secretsKeyCheck.findUnique({ where: { id: CHECK_ROW_ID } });
  }
  if (!row || !opens(row.sealed) || secretBox.open(row.sealed) !== CHECK_PLAINTEXT) throw new ConfigError([SECRETS_KEY_MISMATCH]);
}
