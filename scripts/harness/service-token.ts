/**
 * The internal API's token in tests. createTestDatabase (db.ts) seeds it into every
 * test database with the scope `admin`, and every shared client factory (stack.ts,
 * the harnesses, the e2e process helpers) sends it, so a test built on them is
 * authenticated without saying so. Throwaway databases only; never a real deployment.
 */
import { hashToken } from "../../services/shared/runtime/secrets.js";

export const TEST_SERVICE_TOKEN = "rst_test-admin-token-of-throwaway-test-databases";
/** Name of the seeded row in service_tokens: the bootstrap admin's name, so ADMIN_SERVICE_TOKEN=TEST_SERVICE_TOKEN leaves it unchanged. */
export const TEST_SERVICE_TOKEN_NAME = "admin";

/** SQL that seeds TEST_SERVICE_TOKEN into a database (run by createTestDatabase). */
export function seedServiceTokenSql(): { text: string; values: unknown[] } {
  return {
    text: "INSERT INTO service_tokens (id, name, token_hash, scopes) VALUES (gen_random_uuid(), $1, $2, ARRAY['admin']) ON CONFLICT (name) DO NOTHING",
    values: [TEST_SERVICE_TOKEN_NAME, hashToken(TEST_SERVICE_TOKEN)],
  };
}
