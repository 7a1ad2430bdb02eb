import { isIP } from "node:net";
import { fieldProblem } from "./field-rules.js";

/**
 * Reward callback URL policy (SSRF guard). The dashboard checks the URL the
 * owner types with `validateCallbackUrl`; the delivery service checks the
 * address it actually connects to with `isForbiddenAddress`, so a DNS name that
 * later resolves to a private address (DNS rebinding) is still refused.
 * Both are relaxed only by the deployment's explicit development flag
 * (`ALLOW_INSECURE_CALLBACKS`).
 */

/** The result of checking a callback URL. */
export type CallbackUrlCheck = { ok: true; url: URL } | { ok: false; error: string };

/** An IPv4 network as [first address as uint32, prefix length]. */
type V4Net = readonly [number, number];

/** IPv4 ranges no callback may reach. */
const FORBIDDEN_V4: readonly V4Net[] = [
  [v4("0.0.0.0"), 8], // "this network"
  [v4("10.0.0.0"), 8], // private
  [v4("100.64.0.0"), 10], // carrier-grade NAT
  [v4("127.0.0.0"), 8], // loopback
  [v4("169.254.0.0"), 16], // link-local, includes the metadata address 169.254.169.254
  [v4("172.16.0.0"), 12], // private
  [v4("192.168.0.0"), 16], // private
  [v4("224.0.0.0"), 4], // multicast
  [v4("240.0.0.0"), 4], // reserved, includes broadcast 255.255.255.255
];

/** An IPv6 network as [address as 128-bit bigint, prefix length]. */
type V6Net = readonly [bigint, number];

/** IPv6 ranges no callback may reach (embedded IPv4 forms are checked separately). */
const FORBIDDEN_V6: readonly V6Net[] = [
  [0n, 128], // unspecified ::
  [1n, 128], // loopback ::1
  [v6("fe80::"), 10], // link-local
  [v6("fec0::"), 10], // site-local (deprecated)
  [v6("fc00::"), 7], // unique-local, includes the metadata address fd00:ec2::254
  [v6("ff00::"), 8], // multicast
];

/** IPv6 prefixes whose last 32 bits are an IPv4 address, judged as that address. */
const V4_EMBEDDING_V6: readonly V6Net[] = [
  [v6("::ffff:0:0"), 96], // IPv4-mapped
  [v6("64:ff9b::"), 96], // NAT64 well-known prefix
  [0n, 96], // IPv4-compatible (deprecated)
];

/**
 * True when `ip` is an address a callback must never be sent to: loopback,
 * private, link-local, unique-local, CGNAT, "this network", multicast,
 * reserved, cloud metadata, or an IPv4-mapped / NAT64 / IPv4-compatible IPv6
 * form of any of those. A string that is not an IP address is treated as
 * forbidden (fail closed). An IPv6 zone id (`%eth0`) is ignored.
 */
export function isForbiddenAddress(ip: string): boolean {
  const address = stripBrackets(ip.trim()).split("%")[0] ?? "";
  const family = isIP(address);
  if (family === 4) return isForbiddenV4(v4(address));
  if (family === 6) return isForbiddenV6(v6(address));
  // Failure policy: fail closed - something we cannot parse as an address is never connected to.
  return true;
}

/**
 * Checks a reward callback URL the owner configures. `https` is required;
 * `http` only with `allowInsecure`. Hosts that are forbidden IP literals
 * (see `isForbiddenAddress`) and the names `localhost` / `*.localhost` are
 * refused unless `allowInsecure`. Credentials in the URL are always refused.
 * Error texts name the field and never echo the URL.
 */
export function validateCallbackUrl(url: string, opts: { allowInsecure: boolean }): CallbackUrlCheck {
  const trimmed = url.trim();
  if (trimmed === "") return { ok: false, error: "callback_url is required" };
  const problem = fieldProblem("callback_url", trimmed);
  if (problem !== null) return { ok: false, error: problem };
  let parsed: URL;
  try {
    parsed = new URL(trimmed);
  } catch {
    // Failure policy: an unparseable URL is a caller error, reported without echoing it.
    return { ok: false, error: "callback_url is not a valid URL" };
  }
  if (parsed.protocol !== "https:" && !(opts.allowInsecure && parsed.protocol === "http:")) {
    return { ok: false, error: opts.allowInsecure ? "callback_url must use https or http" : "callback_url must use https" };
  }
  if (parsed.username !== "" || parsed.password !== "") return { ok: false, error: "callback_url must not contain credentials" };
  if (parsed.hostname === "") return { ok: false, error: "callback_url must have a host" };
  if (opts.allowInsecure) return { ok: true, url: parsed };
  // WHATWG URL parsing already canonicalised odd IPv4 spellings (0x7f.1, 2130706433) to dotted quads.
  const host = stripBrackets(parsed.hostname).replace(/\.$/, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return { ok: false, error: "callback_url must not point to localhost" };
  if (isIP(host) !== 0 && isForbiddenAddress(host)) {
    return { ok: false, error: "callback_url must not point to a loopback, private, link-local or metadata address" };
  }
  return { ok: true, url: parsed };
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function isForbiddenV4(address: number): boolean {
  return FORBIDDEN_V4.some(([network, prefix]) => inV4Net(address, network, prefix));
}

function isForbiddenV6(address: bigint): boolean {
  if (FORBIDDEN_V6.some(([network, prefix]) => inV6Net(address, network, prefix))) return true;
  const embedding = V4_EMBEDDING_V6.find(([network, prefix]) => inV6Net(address, network, prefix));
  return embedding !== undefined && isForbiddenV4(Number(address & 0xffff_ffffn));
}

function inV4Net(address: number, network: number, prefix: number): boolean {
  if (prefix === 0) return true;
  const mask = (0xffff_ffff << (32 - prefix)) >>> 0;
  return ((address & mask) >>> 0) === ((network & mask) >>> 0);
}

function inV6Net(address: bigint, network: bigint, prefix: number): boolean {
  const shift = BigInt(128 - prefix);
  return address >> shift === network >> shift;
}

/** Dotted quad -> uint32. Callers pass strings `isIP` accepted as IPv4 (or constants). */
function v4(address: string): number {
  return address.split(".").reduce((acc, octet) => ((acc << 8) | Number(octet)) >>> 0, 0);
}

/** IPv6 text (with `::` and an optional trailing dotted quad) -> 128-bit bigint. */
function v6(address: string): bigint {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const n = v4(dotted[1]);
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":");
  const zeros = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array<string>(zeros).fill("0"), ...tailGroups];
  return groups.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}
