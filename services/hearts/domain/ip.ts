import { isIPv4, isIPv6 } from "node:net";

/** A voter's address, normalised, with the subnet the fraud rules group it into. */
export interface VoterAddress {
  /** Canonical text: dotted IPv4 (IPv4-mapped IPv6 is unwrapped) or compressed lower-case IPv6. */
  ip: string;
  /** "a.b.c.0/24" for IPv4, "xxxx:xxxx:xxxx:xxxx::/64" for IPv6. */
  subnet: string;
  family: 4 | 6;
}

/**
 * Normalises an IP address and derives its /24 (IPv4) or /64 (IPv6) subnet.
 * Returns null when `raw` is not an IP address. Pure: string parsing only.
 */
export function toVoterAddress(raw: string): VoterAddress | null {
  const trimmed = raw.trim();
  if (isIPv4(trimmed)) return fromIPv4(trimmed);
  // A zone id (fe80::1%eth0) names a local interface; it is not part of the address.
  const withoutZone = trimmed.split("%")[0] ?? "";
  if (!isIPv6(withoutZone)) return null;
  const groups = expandIPv6(withoutZone);
  if (groups === null) return null;
  const isMapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (isMapped) {
    const hi = groups[6] ?? 0;
    const lo = groups[7] ?? 0;
    return fromIPv4(`${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`);
  }
  const prefix = groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":");
  return { ip: compressIPv6(groups), subnet: `${prefix}::/64`, family: 6 };
}

function fromIPv4(ip: string): VoterAddress {
  const [a, b, c] = ip.split(".");
  return { ip, subnet: `${a}.${b}.${c}.0/24`, family: 4 };
}

/** Expands an IPv6 address (already validated by isIPv6) into its eight 16-bit groups. */
function expandIPv6(ip: string): number[] | null {
  let text = ip.toLowerCase();
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const v4Tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4Tail?.[1]) {
    const octets = v4Tail[1].split(".").map(Number);
    const [o1 = 0, o2 = 0, o3 = 0, o4 = 0] = octets;
    text = `${text.slice(0, -v4Tail[1].length)}${((o1 << 8) | o2).toString(16)}:${((o3 << 8) | o4).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...tail].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

/** RFC 5952 text form: lower case, leading zeros dropped, the longest run (>= 2) of zero groups as "::". */
function compressIPv6(groups: number[]): string {
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < groups.length; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLength < 2) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}
