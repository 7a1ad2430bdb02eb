import type { PrismaClient } from "./db.js";
import type { Logger } from "../runtime/log.js";
import type { SecretBox } from "../runtime/secrets.js";

/** What every store and handler needs; built once in a process's main.ts (or a test). */
export interface CoreDeps {
  prisma: PrismaClient;
  secretBox: SecretBox;
  log: Logger;
  /**
   * The version of the key that pseudonymises voters' addresses on new rows (ADDRESS_KEY_VERSION; 1 when unset;
   * services/shared/values/address-key.ts).
   */
  addressKeyVersion?: number;
  /** The clock; tests pass a fixed or stepping one. */
  now: () => Date;
}
