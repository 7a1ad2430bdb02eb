/**
 * Bad configuration at start: each process, run as a real OS process, exits 2 and
 * prints one fatal pino line on stdout whose `problems` list EVERY problem at once
 * (not just the first), and no secret value it was given appears anywhere in its
 * output. Nothing here needs a database or a broker: a bad config stops the start
 * before any connection.
 */
import test, { type ExecutionContext } from "ava";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { useProcesses } from "../../scripts/harness/processes.js";
import { configProblems } from "../../scripts/harness/e2e-support.js";

/** A value that would be a valid SECRETS_KEY (32 bytes, base64). */
const validKey = () => randomBytes(32).toString("base64");
/** A secret-looking SECRETS_KEY that is not 32 bytes: invalid, and still must never be echoed. */
const invalidKey = () => `not-a-key-${randomBytes(12).toString("hex")}`;
/** A database password that must never be echoed. */
const dbPassword = () => `pw-${randomBytes(12).toString("hex")}`;

interface Case {
  /** The entry file. */
  file: string;
  env: Record<string, string>;
  /** One pattern per expected problem; each must match exactly one listed problem. */
  problems: RegExp[];
  /** Values that must not appear in stdout or stderr. */
  secrets: string[];
  /** Extra checks once the process exited. */
  after?: (t: ExecutionContext) => void;
}

const macro = test.macro({
  async exec(t, build: () => Case) {
    const c = build();
    const group = useProcesses(t);
    const proc = group.spawn({ name: c.file, file: c.file, env: c.env });
    const exit = await proc.exited;
    t.is(exit.code, 2, "exit code 2 on a bad configuration");
    const problems = configProblems(proc.stdout);
    if (!problems) return t.fail(`no fatal line with problems on stdout:\n${proc.output}`);
    t.is(problems.length, c.problems.length, `every problem listed once, nothing else: ${JSON.stringify(problems)}`);
    for (const pattern of c.problems) {
      t.is(problems.filter((p) => pattern.test(p)).length, 1, `exactly one problem matches ${pattern}: ${JSON.stringify(problems)}`);
    }
    for (const secret of c.secrets) t.false(proc.output.includes(secret), "a secret value appears in the output");
    c.after?.(t);
  },
  title: (provided = "") => provided,
});

test("gateway with an invalid PORT, a non-http REFERRAL_SERVICE_URL and no REFERRAL_SERVICE_TOKEN exits 2 and lists all three problems", macro, () => ({
  file: "gateway/main.ts",
  env: { PORT: "eighty", REFERRAL_SERVICE_URL: "ftp://127.0.0.1:8081" },
  problems: [/^PORT must be an integer/, /^REFERRAL_SERVICE_URL must be an http\(s\) URL/, /^REFERRAL_SERVICE_TOKEN is required/],
  secrets: [],
}));

test("referral service with an empty env exits 2 and lists both DATABASE_URL and SECRETS_KEY", macro, () => ({
  file: "services/referral-service/main.ts",
  env: {},
  problems: [/^DATABASE_URL is required/, /^SECRETS_KEY .*is required/],
  secrets: [],
}));

test(
  "referral service with a too-short ADMIN_SERVICE_TOKEN, a GATEWAY_SERVICE_TOKEN with whitespace and an unknown gateway scope exits 2, lists them, and echoes no token",
  macro,
  () => {
    const shortToken = `short-${randomBytes(6).toString("hex")}`;
    const spacedToken = `spaced ${randomBytes(24).toString("hex")}`;
    return {
      file: "services/referral-service/main.ts",
      env: { ADMIN_SERVICE_TOKEN: shortToken, GATEWAY_SERVICE_TOKEN: spacedToken, GATEWAY_SERVICE_TOKEN_SCOPES: "ingest,root" },
      problems: [
        /^DATABASE_URL is required/,
        /^SECRETS_KEY .*is required/,
        /^ADMIN_SERVICE_TOKEN must be at least 32 characters$/,
        /^GATEWAY_SERVICE_TOKEN must not contain whitespace$/,
        /^GATEWAY_SERVICE_TOKEN_SCOPES: unknown scope "root"$/,
      ],
      secrets: [shortToken, spacedToken],
    };
  },
);

test("referral service with five bad settings exits 2, lists all five, and echoes neither the database password nor the secrets key", macro, () => {
  const password = dbPassword();
  const key = validKey();
  return {
    file: "services/referral-service/main.ts",
    env: {
      DATABASE_URL: `mysql://app:${password}@db.internal/referrals`,
      SECRETS_KEY: key,
      PORT: "70000",
      ALLOW_INSECURE_CALLBACKS: "maybe",
      CALLBACK_TIMEOUT_MS: "5",
      FRAUD_RULES_JSON: `{"noSuchRule": 1}`,
    },
    problems: [
      /^DATABASE_URL must start with postgres/,
      /^PORT must be <= 65535/,
      /^ALLOW_INSECURE_CALLBACKS must be true or false/,
      /^CALLBACK_TIMEOUT_MS must be >= 100/,
      /^fraud rules: unknown rule "noSuchRule"/,
    ],
    secrets: [password, key],
  };
});

test("relay with no DATABASE_URL and no KAFKA_BROKERS exits 2 and mentions both", macro, () => ({
  file: "services/relay/main.ts",
  env: {},
  problems: [/^DATABASE_URL is required/, /^KAFKA_BROKERS is required/],
  secrets: [],
}));

test(
  "relay with a non-postgres DATABASE_URL, a broker without a port and a too-small poll interval exits 2, lists all three, and echoes no password",
  macro,
  () => {
    const password = dbPassword();
    return {
      file: "services/relay/main.ts",
      env: { DATABASE_URL: `http://relay:${password}@127.0.0.1/db`, KAFKA_BROKERS: "127.0.0.1:9092,kafka-without-port", RELAY_POLL_INTERVAL_MS: "1" },
      problems: [
        /^DATABASE_URL must start with postgres/,
        /^KAFKA_BROKERS entry "kafka-without-port" must be host:port/,
        /^RELAY_POLL_INTERVAL_MS must be >= 5/,
      ],
      secrets: [password],
    };
  },
);

test("delivery with an empty env exits 2 and lists DATABASE_URL, KAFKA_BROKERS and SECRETS_KEY", macro, () => ({
  file: "services/delivery/main.ts",
  env: {},
  problems: [/^DATABASE_URL is required/, /^KAFKA_BROKERS is required/, /^SECRETS_KEY .*is required/],
  secrets: [],
}));

test(
  "delivery with a bad DELIVERY_RETRY_SCHEDULE and a bad SECRETS_KEY exits 2, mentions both, and echoes neither the key nor the database password",
  macro,
  () => {
    const password = dbPassword();
    const key = invalidKey();
    return {
      file: "services/delivery/main.ts",
      env: {
        DATABASE_URL: `postgres://delivery:${password}@127.0.0.1:1/db`,
        KAFKA_BROKERS: "127.0.0.1:1",
        SECRETS_KEY: key,
        DELIVERY_RETRY_SCHEDULE: "10s,soon,-5m",
      },
      problems: [/^SECRETS_KEY must be 32 bytes/, /^DELIVERY_RETRY_SCHEDULE: invalid retry schedule: "soon" .*; "-5m" /],
      secrets: [password, key],
    };
  },
);

test(
  "npm start (scripts/start.ts) with a bad PORT, SECRETS_KEY, retry schedule and fraud rules exits 2, lists all four, and creates no data folder",
  macro,
  () => {
    const key = invalidKey();
    const dataDir = join(tmpdir(), `e2e-config-${randomBytes(6).toString("hex")}`);
    return {
      file: "scripts/start.ts",
      env: { DATA_DIR: dataDir, PORT: "http", SECRETS_KEY: key, DELIVERY_RETRY_SCHEDULE: "0s", FRAUD_RULES_JSON: "{not json" },
      problems: [
        /^PORT must be an integer/,
        /^SECRETS_KEY must be 32 bytes/,
        /^DELIVERY_RETRY_SCHEDULE: invalid retry schedule/,
        /^fraud rules: not valid JSON/,
      ],
      secrets: [key],
      after: (t) => t.false(existsSync(dataDir), "a bad configuration stops the start before anything is written"),
    };
  },
);
