import { isIP } from "node:net";
import { fieldProblem } from "./field-rules.js";
import { invalidUrlText, requiredText, urlCredentialsText, urlPortZeroText } from "./contract.js";

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

/** One row of the IANA special-purpose address registries (or a well-known cloud address). */
export interface SpecialRange {
  /** The network, `address/prefix`. */
  cidr: string;
  /** The registry's name for it. */
  name: string;
  /** Where it is defined. */
  source: string;
  /** IPv6 only: the last 32 bits are an IPv4 address, judged as that address (the range itself is not refused). */
  embedsIPv4?: boolean;
}

/**
 * THE IPv4 table, the source of truth: every entry of the IANA IPv4 Special-Purpose Address
 * Registry (https://www.iana.org/assignments/iana-ipv4-special-registry), plus multicast and
 * cloud metadata addresses. No callback (or other outbound connection) may reach any of them.
 */
export const SPECIAL_PURPOSE_IPV4: readonly SpecialRange[] = [
  { cidr: "0.0.0.0/8", name: "This network", source: "RFC 791" },
  { cidr: "0.0.0.0/32", name: "This host on this network", source: "RFC 1122" },
  { cidr: "10.0.0.0/8", name: "Private-Use", source: "RFC 1918" },
  { cidr: "100.64.0.0/10", name: "Shared Address Space (carrier-grade NAT)", source: "RFC 6598" },
  { cidr: "127.0.0.0/8", name: "Loopback", source: "RFC 1122" },
  { cidr: "169.254.0.0/16", name: "Link Local (includes the metadata address 169.254.169.254)", source: "RFC 3927" },
  { cidr: "172.16.0.0/12", name: "Private-Use", source: "RFC 1918" },
  { cidr: "192.0.0.0/24", name: "IETF Protocol Assignments", source: "RFC 6890" },
  { cidr: "192.0.0.0/29", name: "IPv4 Service Continuity Prefix", source: "RFC 7335" },
  { cidr: "192.0.0.8/32", name: "IPv4 dummy address", source: "RFC 7600" },
  { cidr: "192.0.0.9/32", name: "Port Control Protocol Anycast", source: "RFC 7723" },
  { cidr: "192.0.0.10/32", name: "Traversal Using Relays around NAT Anycast", source: "RFC 8155" },
  { cidr: "192.0.0.170/32", name: "NAT64/DNS64 Discovery", source: "RFC 8880" },
  { cidr: "192.0.0.171/32", name: "NAT64/DNS64 Discovery", source: "RFC 8880" },
  { cidr: "192.0.2.0/24", name: "Documentation (TEST-NET-1)", source: "RFC 5737" },
  { cidr: "192.31.196.0/24", name: "AS112-v4", source: "RFC 7535" },
  { cidr: "192.52.193.0/24", name: "AMT", source: "RFC 7450" },
  { cidr: "192.88.99.0/24", name: "Deprecated (6to4 Relay Anycast)", source: "RFC 7526" },
  { cidr: "192.168.0.0/16", name: "Private-Use", source: "RFC 1918" },
  { cidr: "192.175.48.0/24", name: "Direct Delegation AS112 Service", source: "RFC 7534" },
  { cidr: "198.18.0.0/15", name: "Benchmarking", source: "RFC 2544" },
  { cidr: "198.51.100.0/24", name: "Documentation (TEST-NET-2)", source: "RFC 5737" },
  { cidr: "203.0.113.0/24", name: "Documentation (TEST-NET-3)", source: "RFC 5737" },
  { cidr: "240.0.0.0/4", name: "Reserved", source: "RFC 1112" },
  { cidr: "255.255.255.255/32", name: "Limited Broadcast", source: "RFC 919" },
  { cidr: "224.0.0.0/4", name: "Multicast", source: "RFC 5771 (IANA multicast registry)" },
  { cidr: "168.63.129.16/32", name: "Azure platform (wireserver, metadata)", source: "Microsoft Azure" },
];

/**
 * THE IPv6 table: every entry of the IANA IPv6 Special-Purpose Address Registry
 * (https://www.iana.org/assignments/iana-ipv6-special-registry), plus multicast, the deprecated
 * site-local and IPv4-compatible ranges and SIIT's IPv4-translated addresses. Only the globally reachable NAT64 prefix 64:ff9b::/96
 * is judged by the IPv4 address it embeds; every other range is refused whole.
 */
export const SPECIAL_PURPOSE_IPV6: readonly SpecialRange[] = [
  { cidr: "::1/128", name: "Loopback Address", source: "RFC 4291" },
  { cidr: "::/128", name: "Unspecified Address", source: "RFC 4291" },
  { cidr: "::ffff:0:0/96", name: "IPv4-mapped Address", source: "RFC 4291" },
  { cidr: "::ffff:0:0:0/96", name: "IPv4-translated Address (SIIT)", source: "RFC 2765" },
  { cidr: "64:ff9b::/96", name: "IPv4-IPv6 Translat.", source: "RFC 6052", embedsIPv4: true },
  { cidr: "64:ff9b:1::/48", name: "IPv4-IPv6 Translat. (local use)", source: "RFC 8215" },
  { cidr: "100::/64", name: "Discard-Only Address Block", source: "RFC 6666" },
  { cidr: "100:0:0:1::/64", name: "Dummy IPv6 Prefix", source: "RFC 9780" },
  { cidr: "2001::/23", name: "IETF Protocol Assignments", source: "RFC 2928" },
  { cidr: "2001::/32", name: "TEREDO", source: "RFC 4380" },
  { cidr: "2001:1::1/128", name: "Port Control Protocol Anycast", source: "RFC 7723" },
  { cidr: "2001:1::2/128", name: "Traversal Using Relays around NAT Anycast", source: "RFC 8155" },
  { cidr: "2001:1::3/128", name: "DNS-SD Service Registration Protocol Anycast", source: "RFC 9665" },
  { cidr: "2001:2::/48", name: "Benchmarking", source: "RFC 5180" },
  { cidr: "2001:3::/32", name: "AMT", source: "RFC 7450" },
  { cidr: "2001:4:112::/48", name: "AS112-v6", source: "RFC 7535" },
  { cidr: "2001:10::/28", name: "Deprecated (previously ORCHID)", source: "RFC 4843" },
  { cidr: "2001:20::/28", name: "ORCHIDv2", source: "RFC 7343" },
  { cidr: "2001:30::/28", name: "Drone Remote ID Protocol Entity Tags (DETs) Prefix", source: "RFC 9374" },
  { cidr: "2001:db8::/32", name: "Documentation", source: "RFC 3849" },
  { cidr: "2002::/16", name: "6to4", source: "RFC 3056" },
  { cidr: "2620:4f:8000::/48", name: "Direct Delegation AS112 Service", source: "RFC 7534" },
  { cidr: "3fff::/20", name: "Documentation", source: "RFC 9637" },
  { cidr: "5f00::/16", name: "Segment Routing (SRv6) SIDs", source: "RFC 9602" },
  { cidr: "fc00::/7", name: "Unique-Local (includes the metadata address fd00:ec2::254)", source: "RFC 4193" },
  { cidr: "fe80::/10", name: "Link-Local Unicast", source: "RFC 4291" },
  { cidr: "fec0::/10", name: "Site-Local (deprecated)", source: "RFC 3879" },
  { cidr: "ff00::/8", name: "Multicast", source: "RFC 4291" },
  { cidr: "::/96", name: "IPv4-Compatible (deprecated)", source: "RFC 4291" },
];

/** An IPv4 network as [first address as uint32, prefix length]. */
type V4Net = readonly [number, number];
/** An IPv6 network as [address as 128-bit bigint, prefix length]. */
type V6Net = readonly [bigint, number];

const V4_NETS: ReadonlyArray<{ net: V4Net; range: SpecialRange }> = SPECIAL_PURPOSE_IPV4.map((range) => {
  const [address = "", prefix = ""] = range.cidr.split("/");
  return { net: [v4(address), Number(prefix)] as const, range };
});
const V6_NETS: ReadonlyArray<{ net: V6Net; range: SpecialRange }> = SPECIAL_PURPOSE_IPV6.map((range) => {
  const [address = "", prefix = ""] = range.cidr.split("/");
  return { net: [v6(address), Number(prefix)] as const, range };
});

/**
 * The special-purpose range `ip` falls in, or null for an ordinary public address. For the
 * NAT64 prefix 64:ff9b::/96 the answer is the embedded IPv4 address's range. A string that is
 * not an IP address is refused as "not an IP address" (fail closed). An IPv6 zone id (`%eth0`)
 * and brackets are ignored. This is the check for any address the service is about to connect
 * to (callbacks, and any other outbound transport), after DNS resolution.
 */
export function specialRangeOf(ip: string): SpecialRange | null {
  const address = stripBrackets(ip.trim()).split("%")[0] ?? "";
  const family = isIP(address);
  if (family === 4) return rangeOfV4(v4(address));
  // Failure policy: fail closed - something we cannot parse as an address is never connected to.
  if (family !== 6) return NOT_AN_ADDRESS;
  const value = v6(address);
  // The most specific (longest prefix) match decides, so the global NAT64 /96 is not shadowed by ::/96-style entries.
  let best: { net: V6Net; range: SpecialRange } | undefined;
  for (const entry of V6_NETS) {
    if (inV6Net(value, entry.net[0], entry.net[1]) && (best === undefined || entry.net[1] > best.net[1])) best = entry;
  }
  if (best === undefined) return null;
  return best.range.embedsIPv4 ? rangeOfV4(Number(value & 0xffff_ffffn)) : best.range;
}

/**
 * True when `ip` is an address no callback may be sent to: any range of SPECIAL_PURPOSE_IPV4 or
 * SPECIAL_PURPOSE_IPV6 (loopback, private, link-local, unique-local, CGNAT, documentation,
 * benchmarking, 6to4, Teredo, IPv4-mapped, NAT64 of a refused IPv4 address, multicast, reserved,
 * cloud metadata, ...), or a string that is not an IP address.
 */
export function isForbiddenAddress(ip: string): boolean {
  return specialRangeOf(ip) !== null;
}

const NOT_AN_ADDRESS: SpecialRange = { cidr: "", name: "not an IP address", source: "" };

function rangeOfV4(address: number): SpecialRange | null {
  return V4_NETS.find(({ net: [network, prefix] }) => inV4Net(address, network, prefix))?.range ?? null;
}

/**
 * Checks a reward callback URL the owner configures. `https` is required;
 * `http` only with `allowInsecure`. Hosts that are forbidden IP literals
 * (see `isForbiddenAddress`) and the names `localhost` / `*.localhost` are
 * refused unless `allowInsecure`. Credentials in the URL and port 0 are always refused.
 * Error texts name the field and never echo the URL.
 */
export function validateCallbackUrl(url: string, opts: { allowInsecure: boolean }): CallbackUrlCheck {
  const trimmed = url.trim();
  if (trimmed === "") return { ok: false, error: requiredText("callback_url") };
  const problem = fieldProblem("callback_url", trimmed);
  if (problem !== null) return { ok: false, error: problem };
  let parsed: URL;
  try {
    parsed = new URL(trimmed);
  } catch {
    // Failure policy: an unparseable URL is a caller error, reported without echoing it.
    return { ok: false, error: invalidUrlText("callback_url") };
  }
  if (parsed.protocol !== "https:" && !(opts.allowInsecure && parsed.protocol === "http:")) {
    return { ok: false, error: opts.allowInsecure ? "callback_url must use https or http" : "callback_url must use https" };
  }
  if (parsed.username !== "" || parsed.password !== "") return { ok: false, error: urlCredentialsText("callback_url") };
  if (parsed.hostname === "") return { ok: false, error: "callback_url must have a host" };
  // WHATWG parsing writes `:00` as `0` and a scheme's default port as "", so this is every spelling of port 0.
  if (parsed.port === "0") return { ok: false, error: urlPortZeroText("callback_url") };
  if (opts.allowInsecure) return { ok: true, url: parsed };
  // WHATWG URL parsing already canonicalised odd IPv4 spellings (0x7f.1, 2130706433) to dotted quads.
  const host = stripBrackets(parsed.hostname).replace(/\.$/, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return { ok: false, error: "callback_url must not point to localhost" };
  if (isIP(host) !== 0 && isForbiddenAddress(host)) {
    return { ok: false, error: "callback_url must not point to a loopback, private, link-local, metadata or other special-purpose address" };
  }
  return { ok: true, url: parsed };
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function inV4Net(address: number, network: number, prefix: number): boolean {
  if (prefix === 0) return true;
  const mask = (0xffff_ffff << (32 - prefix)) >>> 0;
  return (address & mask) >>> 0 === (network & mask) >>> 0;
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
