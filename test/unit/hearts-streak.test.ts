import test from "ava";
import { toVoterAddress } from "../../services/hearts/domain/ip.js";
import { daysBetween, nextStreak, streakAtDelivery, utcDay } from "../../services/hearts/domain/streak.js";
import { isPeriod, periodOf } from "../../services/shared/values/period.js";

const at = (iso: string) => new Date(iso);
const day = (ymd: string) => new Date(`${ymd}T00:00:00.000Z`);

const periods: [string, string][] = [
  ["2026-01-31T23:59:59.999Z", "2026-01"],
  ["2026-02-01T00:00:00.000Z", "2026-02"],
  // 23:30 on Dec 31 in New York is already January in UTC: the period is the UTC month.
  ["2027-01-01T04:30:00.000Z", "2027-01"],
];
for (const [instant, period] of periods) {
  test(`period is the UTC month "YYYY-MM": ${instant} -> ${period}`, (t) => {
    t.is(periodOf(at(instant)), period);
    t.true(isPeriod(period));
  });
}

test("isPeriod rejects anything but YYYY-MM with a real month", (t) => {
  for (const bad of ["2026-13", "2026-00", "2026-1", "26-01", "2026-01-01", ""]) t.false(isPeriod(bad), bad);
});

test("utcDay and daysBetween count UTC calendar days, not 24 h spans", (t) => {
  t.is(utcDay(at("2026-05-05T23:59:59Z")).toISOString(), "2026-05-05T00:00:00.000Z");
  t.is(daysBetween(at("2026-05-05T23:59:00Z"), at("2026-05-06T00:01:00Z")), 1);
  t.is(daysBetween(at("2026-05-05T00:00:00Z"), at("2026-05-05T23:59:00Z")), 0);
});

const streaks: { title: string; previous: { lastDay: string; streakDays: number } | null; now: string; expected: number }[] = [
  { title: "a first counted heart starts a streak of 1", previous: null, now: "2026-05-05T10:00:00Z", expected: 1 },
  {
    title: "a counted heart the next UTC day extends the streak",
    previous: { lastDay: "2026-05-04", streakDays: 4 },
    now: "2026-05-05T10:00:00Z",
    expected: 5,
  },
  { title: "a counted heart the same UTC day keeps the streak", previous: { lastDay: "2026-05-05", streakDays: 4 }, now: "2026-05-05T23:00:00Z", expected: 4 },
  { title: "a missed UTC day restarts the streak at 1", previous: { lastDay: "2026-05-03", streakDays: 9 }, now: "2026-05-05T10:00:00Z", expected: 1 },
  { title: "the streak crosses a month boundary", previous: { lastDay: "2026-04-30", streakDays: 30 }, now: "2026-05-01T00:00:01Z", expected: 31 },
];
for (const s of streaks) {
  test(`streak_day: ${s.title}`, (t) => {
    const previous = s.previous && { lastDay: day(s.previous.lastDay), streakDays: s.previous.streakDays };
    t.is(nextStreak(previous, at(s.now)), s.expected);
  });
}

test("streak at delivery time: alive when the last counted day is today or yesterday (UTC)", (t) => {
  t.is(streakAtDelivery({ lastDay: day("2026-05-05"), streakDays: 7 }, at("2026-05-05T12:00:00Z")), 7);
  t.is(streakAtDelivery({ lastDay: day("2026-05-04"), streakDays: 7 }, at("2026-05-05T12:00:00Z")), 7);
});

test("streak at delivery time: 0 when the last counted day is older than yesterday", (t) => {
  t.is(streakAtDelivery({ lastDay: day("2026-05-03"), streakDays: 7 }, at("2026-05-05T00:00:00Z")), 0);
});

test("streak at delivery time: no voter state means no streak info (undefined, field omitted)", (t) => {
  t.is(streakAtDelivery(null, at("2026-05-05T00:00:00Z")), undefined);
});

const addresses: [string, string, string][] = [
  ["203.0.113.45", "203.0.113.45", "203.0.113.0/24"],
  [" 198.51.100.7 ", "198.51.100.7", "198.51.100.0/24"],
  ["::ffff:203.0.113.9", "203.0.113.9", "203.0.113.0/24"],
  ["::ffff:cb00:7109", "203.0.113.9", "203.0.113.0/24"],
  ["2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1", "2001:db8:0:0::/64"],
  ["2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff", "2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff", "2001:db8:aaaa:bbbb::/64"],
  ["fe80::1%eth0", "fe80::1", "fe80:0:0:0::/64"],
  ["::1", "::1", "0:0:0:0::/64"],
];
for (const [raw, ip, subnet] of addresses) {
  test(`IP normalisation and subnet: ${raw.trim()} -> ${subnet}`, (t) => {
    t.deepEqual(toVoterAddress(raw), { ip, subnet, family: ip.includes(":") ? 6 : 4 });
  });
}

test("two IPv6 addresses in one /64 share a subnet; a different /64 does not", (t) => {
  const a = toVoterAddress("2001:db8:1:2::10");
  const b = toVoterAddress("2001:db8:1:2:ffff::1");
  const c = toVoterAddress("2001:db8:1:3::10");
  t.is(a?.subnet, b?.subnet);
  t.not(a?.subnet, c?.subnet);
});

test("a non-IP is rejected", (t) => {
  for (const bad of ["", "localhost", "300.1.1.1", "1.2.3", "127.000.000.001", "2001:db8::g"]) t.is(toVoterAddress(bad), null, bad);
});
