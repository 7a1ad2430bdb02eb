/**
 * Vote reminders' tokens (services/reminders/reminder-tokens.ts): each names its subscription, is good for one purpose
 * only, and fails closed when tampered, truncated, minted under another key or for another nonce.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import {
  createUnsubscribeTokens,
  hashToken,
  matchesHash,
  mintConfirmToken,
  newUnsubscribeNonce,
  splitReminderToken,
} from "../../services/reminders/reminder-tokens.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";

test("a confirm token names its subscription and matches only its own stored hash", (t) => {
  const id = randomUUID();
  const { token, hash } = mintConfirmToken(id);
  t.is(token.length, 64);
  t.is(splitReminderToken(token)?.id, id);
  t.true(matchesHash(token, hash));
  t.false(matchesHash(mintConfirmToken(id).token, hash), "a later opt-in's token is another one");
  t.false(matchesHash(token, null), "a used (cleared) confirm token matches nothing");
  t.deepEqual(hashToken(token), hash);
});

test("an unsubscribe token matches its subscription and nonce under its key only; a confirm token is never one", (t) => {
  const key = createSecretBox(randomBytes(32));
  const tokens = createUnsubscribeTokens(key);
  const id = randomUUID();
  const nonce = newUnsubscribeNonce();
  const token = tokens.mint(id, nonce);
  const parts = splitReminderToken(token)!;
  t.is(parts.id, id);
  t.true(tokens.matches(id, nonce, parts.secret));
  t.false(tokens.matches(id, newUnsubscribeNonce(), parts.secret), "a new opt-in's nonce voids earlier links");
  t.false(createUnsubscribeTokens(createSecretBox(randomBytes(32))).matches(id, nonce, parts.secret), "another SECRETS_KEY");
  t.false(tokens.matches(id, nonce, splitReminderToken(mintConfirmToken(id).token)!.secret), "a confirm token does not unsubscribe");
});

test("a malformed token is no token", (t) => {
  const token = mintConfirmToken(randomUUID()).token;
  for (const bad of ["", token.slice(1), `${token}A`, `${token.slice(0, 63)}!`, "A".repeat(44)]) t.is(splitReminderToken(bad), undefined, bad);
});
