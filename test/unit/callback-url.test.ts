import test from "ava";
import { isForbiddenAddress, validateCallbackUrl } from "../../services/shared/values/callback-url.js";

const forbiddenAddresses: Array<[string, string]> = [
  ["127.0.0.1", "IPv4 loopback"],
  ["127.255.255.254", "IPv4 loopback range"],
  ["10.1.2.3", "private 10/8"],
  ["172.16.0.1", "private 172.16/12 (start)"],
  ["172.31.255.255", "private 172.16/12 (end)"],
  ["192.168.1.1", "private 192.168/16"],
  ["169.254.10.10", "link-local 169.254/16"],
  ["169.254.169.254", "cloud metadata (IPv4)"],
  ["100.64.0.1", "CGNAT 100.64/10 (start)"],
  ["100.127.255.255", "CGNAT 100.64/10 (end)"],
  ["0.0.0.0", "this network 0/8"],
  ["0.1.2.3", "this network 0/8"],
  ["224.0.0.1", "IPv4 multicast"],
  ["239.255.255.250", "IPv4 multicast"],
  ["255.255.255.255", "broadcast"],
  ["::1", "IPv6 loopback"],
  ["::", "IPv6 unspecified"],
  ["fe80::1", "IPv6 link-local"],
  ["febf:ffff::1", "IPv6 link-local (end of fe80::/10)"],
  ["fc00::1", "unique-local fc00::/7"],
  ["fd12:3456::1", "unique-local fd00::/8"],
  ["fd00:ec2::254", "cloud metadata (IPv6)"],
  ["ff02::1", "IPv6 multicast"],
  ["::ffff:127.0.0.1", "IPv4-mapped loopback (dotted)"],
  ["::ffff:7f00:1", "IPv4-mapped loopback (hex)"],
  ["::ffff:10.0.0.1", "IPv4-mapped private"],
  ["::ffff:169.254.169.254", "IPv4-mapped metadata"],
  ["::ffff:a9fe:a9fe", "IPv4-mapped metadata (hex)"],
  ["64:ff9b::192.168.0.1", "NAT64 form of a private address"],
  ["::127.0.0.1", "IPv4-compatible loopback"],
  ["[::1]", "bracketed IPv6 loopback"],
  ["fe80::1%eth0", "link-local with a zone id"],
  ["not-an-ip", "not an address (fail closed)"],
  ["", "empty (fail closed)"],
];

for (const [ip, why] of forbiddenAddresses) {
  test(`isForbiddenAddress refuses ${JSON.stringify(ip)}: ${why}`, (t) => {
    t.true(isForbiddenAddress(ip));
  });
}

const allowedAddresses: Array<[string, string]> = [
  ["8.8.8.8", "public IPv4"],
  ["1.1.1.1", "public IPv4"],
  ["172.15.255.255", "just below 172.16/12"],
  ["172.32.0.0", "just above 172.16/12"],
  ["100.63.255.255", "just below CGNAT"],
  ["100.128.0.0", "just above CGNAT"],
  ["169.253.255.255", "just below link-local"],
  ["223.255.255.255", "just below multicast"],
  ["2606:4700:4700::1111", "public IPv6"],
  ["64:ff9b::8.8.8.8", "NAT64 form of a public address"],
];

for (const [ip, why] of allowedAddresses) {
  test(`isForbiddenAddress allows ${JSON.stringify(ip)}: ${why}`, (t) => {
    t.false(isForbiddenAddress(ip));
  });
}

type UrlCase = { url: string; allowInsecure: boolean; ok: boolean; error?: RegExp; rule: string };

const urlCases: UrlCase[] = [
  { url: "https://example.com/hook", allowInsecure: false, ok: true, rule: "https with a public name is accepted" },
  { url: "https://8.8.8.8/hook", allowInsecure: false, ok: true, rule: "https with a public IP literal is accepted" },
  { url: "https://[2606:4700:4700::1111]/hook", allowInsecure: false, ok: true, rule: "https with a public IPv6 literal is accepted" },
  { url: "  https://example.com/hook  ", allowInsecure: false, ok: true, rule: "surrounding whitespace is trimmed" },
  { url: "http://example.com/hook", allowInsecure: false, ok: false, error: /must use https/, rule: "http is refused without the development flag" },
  { url: "http://example.com/hook", allowInsecure: true, ok: true, rule: "http is accepted with the development flag" },
  { url: "ftp://example.com/hook", allowInsecure: true, ok: false, error: /https or http/, rule: "other schemes are refused even with the flag" },
  { url: "javascript:alert(1)", allowInsecure: false, ok: false, error: /must use https/, rule: "javascript: is refused" },
  { url: "not a url", allowInsecure: false, ok: false, error: /not a valid URL/, rule: "garbage is refused" },
  { url: "", allowInsecure: false, ok: false, error: /required/, rule: "empty is refused" },
  { url: `https://example.com/${"a".repeat(2100)}`, allowInsecure: false, ok: false, error: /at most/, rule: "overlong URL is refused" },
  { url: "https://user:pw@example.com/hook", allowInsecure: true, ok: false, error: /credentials/, rule: "credentials in the URL are refused" },
  { url: "https://example.com:0/hook", allowInsecure: true, ok: false, error: /^callback_url must not use port 0$/, rule: "port 0 is refused (flag on)" },
  { url: "https://example.com:00/hook", allowInsecure: false, ok: false, error: /^callback_url must not use port 0$/, rule: "port 0 written :00 is refused" },
  { url: "https://localhost/hook", allowInsecure: false, ok: false, error: /localhost/, rule: "localhost is refused" },
  { url: "https://LOCALHOST./hook", allowInsecure: false, ok: false, error: /localhost/, rule: "localhost with a trailing dot and capitals is refused" },
  { url: "https://api.localhost/hook", allowInsecure: false, ok: false, error: /localhost/, rule: "*.localhost is refused" },
  { url: "https://localhost.example.com/hook", allowInsecure: false, ok: true, rule: "a name merely starting with localhost is accepted" },
  { url: "https://127.0.0.1/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv4 loopback literal is refused" },
  { url: "https://2130706433/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "decimal spelling of 127.0.0.1 is refused" },
  { url: "https://0x7f.1/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "hex spelling of 127.0.0.1 is refused" },
  { url: "https://10.0.0.5:8443/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "private 10/8 literal is refused" },
  { url: "https://172.20.1.1/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "private 172.16/12 literal is refused" },
  { url: "https://192.168.0.10/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "private 192.168/16 literal is refused" },
  { url: "https://169.254.169.254/latest/meta-data", allowInsecure: false, ok: false, error: /loopback, private/, rule: "metadata address is refused" },
  { url: "https://100.64.1.1/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "CGNAT literal is refused" },
  { url: "https://0.0.0.0/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "0.0.0.0 is refused" },
  { url: "https://224.0.0.1/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "multicast literal is refused" },
  { url: "https://[::1]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv6 loopback literal is refused" },
  { url: "https://[fe80::1]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv6 link-local literal is refused" },
  { url: "https://[fd00:ec2::254]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv6 metadata literal is refused" },
  { url: "https://[fc00::5]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv6 unique-local literal is refused" },
  { url: "https://[::ffff:127.0.0.1]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv4-mapped loopback literal is refused" },
  { url: "https://[::ffff:192.168.1.1]/hook", allowInsecure: false, ok: false, error: /loopback, private/, rule: "IPv4-mapped private literal is refused" },
  { url: "http://127.0.0.1:9999/hook", allowInsecure: true, ok: true, rule: "the development flag allows loopback over http" },
  { url: "https://localhost/hook", allowInsecure: true, ok: true, rule: "the development flag allows localhost" },
  { url: "https://[::1]/hook", allowInsecure: true, ok: true, rule: "the development flag allows IPv6 loopback" },
];

for (const c of urlCases) {
  test(`validateCallbackUrl: ${c.rule}`, (t) => {
    const result = validateCallbackUrl(c.url, { allowInsecure: c.allowInsecure });
    if (c.ok) {
      t.true(result.ok, JSON.stringify(result));
      if (result.ok) t.is(result.url.toString(), new URL(c.url.trim()).toString());
    } else {
      t.false(result.ok);
      if (!result.ok && c.error) t.regex(result.error, c.error);
    }
  });
}

test("validateCallbackUrl errors never echo the URL", (t) => {
  const result = validateCallbackUrl("https://user:hunter2@example.com/", { allowInsecure: false });
  t.false(result.ok);
  if (!result.ok) t.false(result.error.includes("hunter2"));
});
