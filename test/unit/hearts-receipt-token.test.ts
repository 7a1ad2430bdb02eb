/**
 * Receipt tokens (services/hearts/receipt-token.ts): a frozen vector computed independently with openssl, and every
 * way a token can be wrong (tampered, truncated, padded, another heart's MAC, another key) reads as no token at all.
 *
 * The vector: key = bytes 0x00..0x1f, heart 0f8c4e2d-1a4e-4b3b-9c7d-6a5f4e3d2c1b,
 *   printf '010f8c4e2d1a4e4b3b9c7d6a5f4e3d2c1b' | xxd -r -p | openssl dgst -sha256 -mac HMAC -macopt hexkey:<key> -binary
 * first 16 bytes 3ef08255a3ebda991c135ada3044e68f; token = base64url(01 || id || those 16 bytes).
 * The receipt key of that SECRETS_KEY:
 *   openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt hexkey:<key> -kdfopt salt: -kdfopt info:hearts.receipt-token.v1 HKDF
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { createReceiptLinks, mintReceiptToken, readReceiptToken, receiptKeyOf, RECEIPT_TOKEN_CHARS } from "../../services/hearts/receipt-token.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";

const KEY = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
const HEART = "0f8c4e2d-1a4e-4b3b-9c7d-6a5f4e3d2c1b";
const TOKEN = "AQ-MTi0aTks7nH1qX049LBs-8IJVo-vamRwTWtowROaP";
const RECEIPT_KEY_HEX = "ce392695ec571c4289c4d2247fa66f3a2ff00133890b8d3bf1fa8183cb6946a8";

test("the frozen vector: minting gives openssl's token and reading it gives the heart back", (t) => {
  t.is(mintReceiptToken(KEY, HEART), TOKEN);
  t.is(TOKEN.length, RECEIPT_TOKEN_CHARS);
  t.is(readReceiptToken(KEY, TOKEN), HEART);
});

test("the receipt key is SECRETS_KEY's HKDF-SHA256 for the receipt purpose (openssl kdf), never SECRETS_KEY itself", (t) => {
  const box = createSecretBox(KEY);
  t.is(receiptKeyOf(box).toString("hex"), RECEIPT_KEY_HEX);
  t.notDeepEqual(receiptKeyOf(box), KEY);
  t.notDeepEqual(box.deriveKey("another purpose"), receiptKeyOf(box));
});

test("a tampered token (any one character changed) is no token", (t) => {
  for (let i = 0; i < TOKEN.length; i++) {
    const other = TOKEN[i] === "A" ? "B" : "A";
    const tampered = `${TOKEN.slice(0, i)}${other}${TOKEN.slice(i + 1)}`;
    t.is(readReceiptToken(KEY, tampered), undefined, `character ${i}`);
  }
});

test("a truncated, extended, padded or non-URL-safe token is no token", (t) => {
  for (const bad of [
    "",
    TOKEN.slice(0, -1),
    TOKEN.slice(0, 22),
    `${TOKEN}A`,
    `${TOKEN}=`,
    TOKEN.replaceAll("-", "+"),
    `${TOKEN.slice(0, -1)}/`,
    ` ${TOKEN}`,
    `${TOKEN}.json`,
    "x".repeat(10_000),
  ]) {
    t.is(readReceiptToken(KEY, bad), undefined, JSON.stringify(bad.slice(0, 60)));
  }
});

test("another heart's id under this token's MAC, or this MAC on another heart, is no token", (t) => {
  const other = randomUUID();
  const bytes = Buffer.from(TOKEN, "base64url");
  const otherBytes = Buffer.from(mintReceiptToken(KEY, other), "base64url");
  const swappedId = Buffer.concat([bytes.subarray(0, 1), otherBytes.subarray(1, 17), bytes.subarray(17)]).toString("base64url");
  t.is(readReceiptToken(KEY, swappedId), undefined);
  t.is(readReceiptToken(KEY, mintReceiptToken(KEY, other)), other, "the other heart's own token names it");
  t.not(mintReceiptToken(KEY, other), TOKEN);
});

test("a token minted with another key is no token (a wrong SECRETS_KEY, or the raw key instead of the receipt key)", (t) => {
  t.is(readReceiptToken(randomBytes(32), TOKEN), undefined);
  const box = createSecretBox(KEY);
  t.is(readReceiptToken(receiptKeyOf(box), TOKEN), undefined, "minted with SECRETS_KEY itself, not the derived key");
  const links = createReceiptLinks({ secretBox: createSecretBox(randomBytes(32)), publicBaseUrl: "https://list.example/" });
  const url = links.urlOf(HEART);
  t.regex(url, /^https:\/\/list\.example\/receipts\/[A-Za-z0-9_-]{44}$/);
  const token = url.slice(url.lastIndexOf("/") + 1);
  t.is(links.heartIdOf(token), HEART);
  t.is(readReceiptToken(KEY, token), undefined);
});

test("another version byte with a matching MAC is no token (the format can change without old readers accepting it)", (t) => {
  const bytes = Buffer.from(TOKEN, "base64url");
  bytes[0] = 0x02;
  t.is(readReceiptToken(KEY, bytes.toString("base64url")), undefined);
});
