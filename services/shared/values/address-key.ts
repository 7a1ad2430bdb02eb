import { createHmac } from "node:crypto";
import type { SecretBox } from "../runtime/secrets.js";

/**
 * Keyed pseudonyms of voters' addresses (issue 30). A heart's or a click's IP and subnet are erased once older than
 * the address horizon (ADDRESS_RETENTION_HOURS); what the self-referral-by-address rule needs after that, "this click
 * came from an address the referrer's hearts came from", is kept as `ip_key` and `subnet_key`: HMAC-SHA256 of the
 * address under the address key, its first PSEUDONYM_BYTES bytes in base64url, prefixed with the key's version
 * (`v1.` + 22 characters). Equal addresses under one key give equal pseudonyms; the address cannot be read back
 * without the key, and the key never leaves the process.
 *
 * The address key is SECRETS_KEY's HKDF for the purpose `voter address pseudonym v<version>` (SecretBox.deriveKey),
 * so it is per deployment, refused at start when SECRETS_KEY is missing (as every secret is), and never the key that
 * seals secrets. Rotation: ADDRESS_KEY_VERSION (default 1) names the key new rows are written under; raising it
 * derives a new, unrelated key. Pseudonyms of two versions never match, so a row written before the rotation links
 * to a row written after it only while both still hold their address (the rule compares the addresses too); once
 * the older row's address is erased, that link is gone for good. Only the newest version is ever computed.
 */

/** Bytes of the HMAC kept: 128 bits, far beyond any collision among a list's addresses. */
export const PSEUDONYM_BYTES = 16;

/** The key that pseudonymises addresses: its version (in every pseudonym) and its bytes. */
export interface AddressKey {
  version: number;
  key: Buffer;
}

/** The address key of `version` (a positive integer) for the process holding `secretBox`. */
export function addressKeyOf(secretBox: SecretBox, version: number): AddressKey {
  if (!Number.isInteger(version) || version < 1) throw new Error("address key version must be a positive integer");
  return { version, key: secretBox.deriveKey(`voter address pseudonym v${version}`) };
}

/** The pseudonym of an address (an IP in canonical form, or a subnet in CIDR form): `v<version>.<22 base64url>`. */
export function pseudonymOf(addressKey: AddressKey, address: string): string {
  const mac = createHmac("sha256", addressKey.key).update(address, "utf8").digest().subarray(0, PSEUDONYM_BYTES);
  return `v${addressKey.version}.${mac.toString("base64url")}`;
}

/** The pseudonyms of an address and its subnet (null when the address or subnet is unknown). */
export function addressPseudonyms(
  addressKey: AddressKey,
  address: { ip: string | null; subnet: string | null },
): { ipKey: string | null; subnetKey: string | null } {
  return {
    ipKey: address.ip === null ? null : pseudonymOf(addressKey, address.ip),
    subnetKey: address.subnet === null ? null : pseudonymOf(addressKey, address.subnet),
  };
}

const keys = new WeakMap<SecretBox, AddressKey>();

/**
 * The address key new rows are written under, for a process's deps (ADDRESS_KEY_VERSION, 1 when unset): derived at
 * first use, then kept beside the SecretBox it came from.
 */
export function currentAddressKey(deps: { secretBox: SecretBox; addressKeyVersion?: number }): AddressKey {
  const version = deps.addressKeyVersion ?? 1;
  const kept = keys.get(deps.secretBox);
  if (kept?.version === version) return kept;
  const key = addressKeyOf(deps.secretBox, version);
  keys.set(deps.secretBox, key);
  return key;
}
