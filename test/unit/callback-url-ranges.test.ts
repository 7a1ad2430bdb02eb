/**
 * The SSRF guard against the IANA special-purpose registries, range by range. The expected
 * ranges and their first/last addresses are written out here by hand from the registries
 * (https://www.iana.org/assignments/iana-ipv4-special-registry and iana-ipv6-special-registry),
 * independently of the guard's own table, so a range missing from the table fails a test.
 */
import test from "ava";
import ipaddr from "ipaddr.js";
import {
  SPECIAL_PURPOSE_IPV4,
  SPECIAL_PURPOSE_IPV6,
  isForbiddenAddress,
  specialRangeOf,
  validateCallbackUrl,
} from "../../services/shared/values/callback-url.js";

/** [cidr, first address, last address, what]. */
const IPV4: Array<[string, string, string, string]> = [
  ["0.0.0.0/8", "0.0.0.0", "0.255.255.255", "this network"],
  ["0.0.0.0/32", "0.0.0.0", "0.0.0.0", "this host on this network"],
  ["10.0.0.0/8", "10.0.0.0", "10.255.255.255", "private-use"],
  ["100.64.0.0/10", "100.64.0.0", "100.127.255.255", "shared address space (CGNAT)"],
  ["127.0.0.0/8", "127.0.0.0", "127.255.255.255", "loopback"],
  ["169.254.0.0/16", "169.254.0.0", "169.254.255.255", "link local"],
  ["172.16.0.0/12", "172.16.0.0", "172.31.255.255", "private-use"],
  ["192.0.0.0/24", "192.0.0.0", "192.0.0.255", "IETF protocol assignments"],
  ["192.0.0.0/29", "192.0.0.0", "192.0.0.7", "IPv4 service continuity prefix"],
  ["192.0.0.8/32", "192.0.0.8", "192.0.0.8", "IPv4 dummy address"],
  ["192.0.0.9/32", "192.0.0.9", "192.0.0.9", "PCP anycast"],
  ["192.0.0.10/32", "192.0.0.10", "192.0.0.10", "TURN anycast"],
  ["192.0.0.170/32", "192.0.0.170", "192.0.0.170", "NAT64/DNS64 discovery"],
  ["192.0.0.171/32", "192.0.0.171", "192.0.0.171", "NAT64/DNS64 discovery"],
  ["192.0.2.0/24", "192.0.2.0", "192.0.2.255", "documentation TEST-NET-1"],
  ["192.31.196.0/24", "192.31.196.0", "192.31.196.255", "AS112-v4"],
  ["192.52.193.0/24", "192.52.193.0", "192.52.193.255", "AMT"],
  ["192.88.99.0/24", "192.88.99.0", "192.88.99.255", "deprecated 6to4 relay anycast"],
  ["192.168.0.0/16", "192.168.0.0", "192.168.255.255", "private-use"],
  ["192.175.48.0/24", "192.175.48.0", "192.175.48.255", "direct delegation AS112"],
  ["198.18.0.0/15", "198.18.0.0", "198.19.255.255", "benchmarking"],
  ["198.51.100.0/24", "198.51.100.0", "198.51.100.255", "documentation TEST-NET-2"],
  ["203.0.113.0/24", "203.0.113.0", "203.0.113.255", "documentation TEST-NET-3"],
  ["240.0.0.0/4", "240.0.0.0", "255.255.255.254", "reserved"],
  ["255.255.255.255/32", "255.255.255.255", "255.255.255.255", "limited broadcast"],
  ["224.0.0.0/4", "224.0.0.0", "239.255.255.255", "multicast"],
  ["168.63.129.16/32", "168.63.129.16", "168.63.129.16", "Azure wireserver / metadata"],
];

const IPV6: Array<[string, string, string, string]> = [
  ["::1/128", "::1", "::1", "loopback"],
  ["::/128", "::", "::", "unspecified"],
  ["::ffff:0:0/96", "::ffff:0.0.0.0", "::ffff:255.255.255.255", "IPv4-mapped (even of a public address)"],
  ["64:ff9b:1::/48", "64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "IPv4-IPv6 translation, local use"],
  ["100::/64", "100::", "100::ffff:ffff:ffff:ffff", "discard-only"],
  ["100:0:0:1::/64", "100:0:0:1::", "100:0:0:1:ffff:ffff:ffff:ffff", "dummy IPv6 prefix"],
  ["2001::/23", "2001::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignments"],
  ["2001::/32", "2001::", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "Teredo"],
  ["2001:1::1/128", "2001:1::1", "2001:1::1", "PCP anycast"],
  ["2001:1::2/128", "2001:1::2", "2001:1::2", "TURN anycast"],
  ["2001:1::3/128", "2001:1::3", "2001:1::3", "DNS-SD SRP anycast"],
  ["2001:2::/48", "2001:2::", "2001:2:0:ffff:ffff:ffff:ffff:ffff", "benchmarking"],
  ["2001:3::/32", "2001:3::", "2001:3:ffff:ffff:ffff:ffff:ffff:ffff", "AMT"],
  ["2001:4:112::/48", "2001:4:112::", "2001:4:112:ffff:ffff:ffff:ffff:ffff", "AS112-v6"],
  ["2001:10::/28", "2001:10::", "2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", "deprecated ORCHID"],
  ["2001:20::/28", "2001:20::", "2001:2f:ffff:ffff:ffff:ffff:ffff:ffff", "ORCHIDv2"],
  ["2001:30::/28", "2001:30::", "2001:3f:ffff:ffff:ffff:ffff:ffff:ffff", "drone remote ID DETs"],
  ["2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"],
  ["2002::/16", "2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "6to4 (even of a public address)"],
  ["2620:4f:8000::/48", "2620:4f:8000::", "2620:4f:8000:ffff:ffff:ffff:ffff:ffff", "direct delegation AS112"],
  ["3fff::/20", "3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"],
  ["5f00::/16", "5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "SRv6 SIDs"],
  ["fc00::/7", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"],
  ["fe80::/10", "fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"],
  ["fec0::/10", "fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local (deprecated)"],
  ["ff00::/8", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"],
  ["::/96", "::2", "::ffff:ffff", "IPv4-compatible (deprecated)"],
  ["::ffff:0:0:0/96", "::ffff:0:0.0.0.0", "::ffff:0:255.255.255.255", "IPv4-translated (SIIT)"],
];

for (const [cidr, first, last, what] of [...IPV4, ...IPV6]) {
  test(`SSRF guard refuses ${cidr} (${what}): first ${first} and last ${last}`, (t) => {
    t.true(isForbiddenAddress(first), first);
    t.true(isForbiddenAddress(last), last);
    const literal = first.includes(":") ? `[${first}]` : first;
    t.false(validateCallbackUrl(`https://${literal}/hook`, { allowInsecure: false }).ok, "as a callback URL literal too");
  });
}

test("the guard's tables hold every registry entry listed here (the tables are the source of truth)", (t) => {
  const sorted = (list: string[]) => [...list].sort();
  t.deepEqual(sorted(SPECIAL_PURPOSE_IPV4.map((r) => r.cidr)), sorted(IPV4.map(([cidr]) => cidr)));
  t.deepEqual(sorted(SPECIAL_PURPOSE_IPV6.map((r) => r.cidr)), sorted([...IPV6.map(([cidr]) => cidr), "64:ff9b::/96"]));
});

test("NAT64 64:ff9b::/96 (globally reachable) is judged by the IPv4 address it embeds", (t) => {
  t.false(isForbiddenAddress("64:ff9b::8.8.8.8"));
  t.true(isForbiddenAddress("64:ff9b::192.0.2.1"), "documentation address behind NAT64");
  t.true(isForbiddenAddress("64:ff9b::a9fe:a9fe"), "metadata address behind NAT64");
});

test("neighbours of the ranges stay allowed: the guard refuses ranges, not whole blocks", (t) => {
  for (const ip of [
    "192.0.1.255",
    "192.0.3.0",
    "198.17.255.255",
    "198.20.0.0",
    "168.63.129.15",
    "168.63.129.17",
    "2001:200::1",
    "2003::1",
    "2620:4f:8001::1",
    "3fff:1000::1",
    "64:ff9b:2::1",
    "2606:4700:4700::1111",
    "9.9.9.9",
  ]) {
    t.false(isForbiddenAddress(ip), ip);
  }
});

test("specialRangeOf names the range, for error messages and for other transports (Votifier) checking a resolved address", (t) => {
  t.is(specialRangeOf("198.18.0.1")?.name, "Benchmarking");
  t.is(specialRangeOf("::1")?.name, "Loopback Address");
  t.is(specialRangeOf("not-an-ip")?.name, "not an IP address");
  t.is(specialRangeOf("8.8.8.8"), null);
});

/** Ranges the guard refuses that ipaddr.js (2.5.0) classifies as plain unicast, each for a stated reason. */
const UNKNOWN_TO_IPADDR = new Map([
  ["168.63.129.16/32", "a cloud platform address, not an IANA range"],
  ["100:0:0:1::/64", "RFC 9780 (2025) is newer than the library's table"],
  ["::/96", "deprecated IPv4-compatible addresses (RFC 4291), not in the IANA registry"],
]);

test("cross-check with ipaddr.js: every address the guard refuses by the registries, the library classifies as special too", (t) => {
  for (const [cidr, first, last] of [...IPV4, ...IPV6]) {
    if (UNKNOWN_TO_IPADDR.has(cidr)) continue;
    for (const address of [first, last]) t.not(ipaddr.parse(address).range(), "unicast", `${cidr}: ${address}`);
  }
});

/** A deterministic pseudo-random generator (mulberry32), so a failure names the same addresses every run. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let r = Math.imul(a ^ (a >>> 15), 1 | a);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` addresses inside `network/prefix`: its first and last address and random ones between. */
function samplesOf(network: ipaddr.IPv4 | ipaddr.IPv6, prefix: number, count: number, random: () => number): string[] {
  const bytes = network.toByteArray();
  const make = (fill: () => number) => {
    const out = bytes.map((byte, i) => {
      const fixedBits = Math.max(0, Math.min(8, prefix - i * 8));
      const hostMask = 0xff >> fixedBits;
      return (byte & ~hostMask & 0xff) | (fill() & hostMask);
    });
    return ipaddr.fromByteArray(out).toString();
  };
  return [make(() => 0), make(() => 0xff), ...Array.from({ length: count }, () => make(() => Math.floor(random() * 256)))];
}

test("cross-check with ipaddr.js: every special range the library knows, the guard refuses (first, last and 50 random addresses each)", (t) => {
  const random = seeded(20261123);
  for (const kind of [ipaddr.IPv4, ipaddr.IPv6] as const) {
    const ranges = (kind.prototype as unknown as { SpecialRanges: unknown }).SpecialRanges as Record<
      string,
      Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> | [ipaddr.IPv4 | ipaddr.IPv6, number]
    >;
    for (const [name, value] of Object.entries(ranges)) {
      const nets = (Array.isArray(value[0]) ? value : [value]) as Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
      for (const [network, prefix] of nets) {
        const cidr = `${network.toString()}/${prefix}`;
        // The globally reachable NAT64 prefix is judged by the IPv4 address it embeds (a public one is allowed).
        if (cidr === "64:ff9b::/96") continue;
        for (const address of samplesOf(network, prefix, 50, random)) t.true(isForbiddenAddress(address), `${name} ${cidr}: ${address}`);
      }
    }
  }
});
