import test from "ava";
import { DEFAULT_FRAUD_RULES, FraudRulesError, loadFraudRules, type FraudRules } from "../../services/hearts/domain/fraud-rules.js";
import { evaluateFraudRules, fraudReadLimits, fraudWindows, scoreHeart, usernameProblem, type FraudCounts } from "../../services/hearts/domain/score-heart.js";

const BROWSER_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";
const CLEAN: FraudCounts = { identitiesOnIp: 1, identitiesOnSubnet: 1, heartsFromIp: 1 };
const rules = DEFAULT_FRAUD_RULES;

const cases: { title: string; username?: string; userAgent?: string; counts?: Partial<FraudCounts>; rules: string[]; blocked: boolean }[] = [
  { title: "a first heart with a normal name and browser passes", rules: [], blocked: false },
  { title: "identities on one IP at the max do not fire", counts: { identitiesOnIp: 3 }, rules: [], blocked: false },
  { title: "more voter identities on one IP than the max fires and blocks", counts: { identitiesOnIp: 4 }, rules: ["ip_identities"], blocked: true },
  {
    title: "more identities on one /24 or /64 than the max fires but does not block alone",
    counts: { identitiesOnSubnet: 11 },
    rules: ["subnet_identities"],
    blocked: false,
  },
  {
    title: "velocity over the max hearts per IP per minute fires but does not block alone",
    counts: { heartsFromIp: 11 },
    rules: ["ip_velocity"],
    blocked: false,
  },
  {
    title: "subnet identities plus velocity reach the threshold together",
    counts: { identitiesOnSubnet: 11, heartsFromIp: 11 },
    rules: ["subnet_identities", "ip_velocity"],
    blocked: true,
  },
  { title: "a whitespace-only username is malformed and blocks", username: "   ", rules: ["username"], blocked: true },
  { title: "a username longer than 32 characters is malformed", username: "a".repeat(33), rules: ["username"], blocked: true },
  { title: "a username of exactly 32 characters is fine", username: "a".repeat(32), rules: [], blocked: false },
  { title: "a username with a control character is malformed", username: "Steve\u0007", rules: ["username"], blocked: true },
  { title: "a username with a zero-width character is malformed", username: "St\u200Beve", rules: ["username"], blocked: true },
  { title: "a username outside the allowed pattern is malformed", username: "<script>", rules: ["username"], blocked: true },
  { title: "non-Latin letters are allowed in usernames", username: "Мария_2", rules: [], blocked: false },
  { title: "a missing user agent adds score but does not block alone", userAgent: " ", rules: ["user_agent"], blocked: false },
  { title: "a bot-like user agent adds score but does not block alone", userAgent: "curl/8.5.0", rules: ["user_agent"], blocked: false },
  {
    title: "a missing user agent plus a subnet hit block together",
    userAgent: "",
    counts: { identitiesOnSubnet: 11 },
    rules: ["subnet_identities", "user_agent"],
    blocked: true,
  },
];

for (const c of cases) {
  test(`fraud rules: ${c.title}`, (t) => {
    const request = { username: c.username ?? "Steve", userAgent: c.userAgent ?? BROWSER_UA };
    const counts = { ...CLEAN, ...c.counts };
    t.deepEqual(
      evaluateFraudRules(rules, request, counts).map((h) => h.rule),
      c.rules,
    );
    t.is(scoreHeart(rules, request, counts).blocked, c.blocked);
  });
}

test("fraud verdict: score is the sum of the fired rules and each reason names its rule", (t) => {
  const verdict = scoreHeart(rules, { username: "Steve", userAgent: "" }, { ...CLEAN, identitiesOnSubnet: 12 });
  t.is(verdict.score, rules.subnetIdentities.score + rules.userAgent.missingScore);
  t.deepEqual(verdict.reasons, ["subnet_identities: 12 voter identities from this subnet in 1440 min (max 10)", "user_agent: missing"]);
});

test("fraud verdict: blocks at exactly the threshold (score >= threshold)", (t) => {
  const custom: FraudRules = { ...rules, blockThreshold: 50, userAgent: { ...rules.userAgent, missingScore: 50 } };
  t.true(scoreHeart(custom, { username: "Steve", userAgent: "" }, CLEAN).blocked);
  const below: FraudRules = { ...custom, blockThreshold: 51 };
  t.false(scoreHeart(below, { username: "Steve", userAgent: "" }, CLEAN).blocked);
});

test("fraud read limits: each count reads its rule's max earlier rows (enough to decide it), and a rule with score 0 reads none", (t) => {
  t.deepEqual(fraudReadLimits(DEFAULT_FRAUD_RULES), { ipIdentities: 3, subnetIdentities: 10, ipVelocity: 10 });
  const off = loadFraudRules(JSON.stringify({ ipIdentities: { score: 0 }, ipVelocity: { max: 2 } }));
  t.deepEqual(fraudReadLimits(off), { ipIdentities: 0, subnetIdentities: 10, ipVelocity: 2 });
  // max earlier rows + this heart = max + 1 > max: the rule fires exactly when it would with the full count.
  const atLimit = { ...CLEAN, identitiesOnIp: fraudReadLimits(rules).ipIdentities + 1 };
  t.deepEqual(
    evaluateFraudRules(rules, { username: "Steve", userAgent: BROWSER_UA }, atLimit).map((h) => h.rule),
    ["ip_identities"],
  );
});

test("fraud rules: a rule with score 0 is disabled", (t) => {
  const custom: FraudRules = { ...rules, ipIdentities: { ...rules.ipIdentities, score: 0 } };
  t.deepEqual(evaluateFraudRules(custom, { username: "Steve", userAgent: BROWSER_UA }, { ...CLEAN, identitiesOnIp: 50 }), []);
});

test("usernameProblem names the first problem found", (t) => {
  const r = rules.username;
  t.is(usernameProblem("", r), "empty after trimming");
  t.is(usernameProblem("x\n", r), "contains control characters");
  t.is(usernameProblem("b".repeat(40), r), "longer than 32 characters (40)");
  t.is(usernameProblem("a/b", r), "does not match the allowed pattern");
  t.is(usernameProblem("Notch", r), null);
});

test("fraudWindows: each window ends at now and spans its rule's length", (t) => {
  const now = new Date("2026-03-10T12:00:00.000Z");
  const w = fraudWindows(rules, now);
  t.is(w.ipIdentitiesSince.toISOString(), "2026-03-09T12:00:00.000Z");
  t.is(w.subnetIdentitiesSince.toISOString(), "2026-03-09T12:00:00.000Z");
  t.is(w.velocitySince.toISOString(), "2026-03-10T11:59:00.000Z");
});

test("loadFraudRules: a partial override keeps every other default", (t) => {
  const loaded = loadFraudRules(JSON.stringify({ blockThreshold: 80, ipVelocity: { max: 3 }, username: { pattern: "^[A-Za-z0-9_]{3,16}$" } }));
  t.is(loaded.blockThreshold, 80);
  t.deepEqual(loaded.ipVelocity, { ...rules.ipVelocity, max: 3 });
  t.is(loaded.username.pattern, "^[A-Za-z0-9_]{3,16}$");
  t.is(loaded.username.maxLength, rules.username.maxLength);
  t.deepEqual(loaded.ipIdentities, rules.ipIdentities);
  t.is(usernameProblem("Мария", loaded.username), "does not match the allowed pattern");
});

test("loadFraudRules: an empty object gives the defaults and never mutates them", (t) => {
  const loaded = loadFraudRules("{}");
  t.deepEqual(loaded, rules);
  loaded.ipIdentities.max = 99;
  t.is(DEFAULT_FRAUD_RULES.ipIdentities.max, 3);
});

const invalid: { title: string; json: string; problems: RegExp[] }[] = [
  { title: "not JSON", json: "{nope", problems: [/not valid JSON/] },
  { title: "not an object", json: "[1]", problems: [/must be a JSON object/] },
  { title: "an unknown rule (typo)", json: `{"ipIdentites": {}}`, problems: [/unknown rule "ipIdentites"/] },
  { title: "an unknown field", json: `{"ipVelocity": {"perMinute": 3}}`, problems: [/unknown field "ipVelocity.perMinute"/] },
  { title: "a negative number", json: `{"ipVelocity": {"max": -1}}`, problems: [/ipVelocity.max must be a non-negative integer/] },
  { title: "a fractional number", json: `{"subnetIdentities": {"score": 1.5}}`, problems: [/subnetIdentities.score must be a non-negative integer/] },
  { title: "a zero threshold", json: `{"blockThreshold": 0}`, problems: [/blockThreshold must be a positive integer/] },
  { title: "a regex that does not compile", json: `{"username": {"pattern": "(["}}`, problems: [/username.pattern must be a valid regular expression/] },
  {
    title: "several problems at once",
    json: `{"blockThreshold": "high", "userAgent": {"botPattern": 3, "missingScore": -2}}`,
    problems: [/blockThreshold/, /userAgent.botPattern/, /userAgent.missingScore/],
  },
];

for (const c of invalid) {
  test(`loadFraudRules rejects ${c.title}, reporting every problem`, (t) => {
    const error = t.throws(() => loadFraudRules(c.json), { instanceOf: FraudRulesError });
    t.is(error?.problems.length, c.problems.length);
    c.problems.forEach((pattern, i) => t.regex(error?.problems[i] ?? "", pattern));
  });
}
