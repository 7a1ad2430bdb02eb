import { runService } from "../shared/runtime/run-service.js";
import { createPrisma } from "../shared/adapters/db.js";
import { readinessChecks } from "../shared/adapters/readiness.js";
import { redactUrl } from "../shared/runtime/log.js";
import { databaseDependency } from "../shared/adapters/startup-dependencies.js";
import { verifySecretsKey } from "../shared/adapters/secrets-key-check.js";
import { loadReferralServiceConfig } from "./config.js";
import { createReferralServiceServer } from "./server.js";
import { bootstrapServiceTokens } from "../access/bootstrap.js";
import { createRetentionLoop } from "../retention/run-retention.js";
import { createPeriodCloserLoop } from "../rewards/close-periods.js";
import { createGoalPayerLoop } from "../rewards/pay-reached-goals.js";
import { createProcessReminders } from "../reminders/reminder-settings.js";
import { createAlertLoop } from "../alerts/alert-settings.js";
import { createDiscordRest } from "../shared/adapters/discord-rest.js";

runService({
  name: "referral-service",
  loadConfig: () => loadReferralServiceConfig(),
  create(config, { log, metrics, startup }) {
    const prisma = createPrisma(config.databaseUrl, { maxConnections: config.dbPoolSize });
    // The process's one Discord client (rate limits shared by every caller).
    const discord = createDiscordRest({ baseUrl: config.alerts.discordApiBaseUrl });
    // Without SMTP_URL there is no mailer, without DISCORD_BOT_TOKEN no DMs; with neither no sender runs (docs/reminders.md).
    const reminders = createProcessReminders({
      discord,
      db: prisma,
      secretBox: config.secretBox,
      publicBaseUrl: config.publicBaseUrl,
      settings: config.reminders,
      log,
      now: () => new Date(),
    });
    const rpc = createReferralServiceServer({
      prisma,
      secretBox: config.secretBox,
      addressKeyVersion: config.addresses.keyVersion,
      log,
      metrics,
      now: () => new Date(),
      allowInsecureCallbacks: config.allowInsecureCallbacks,
      callbackTimeoutMs: config.callbackTimeoutMs,
      retrySchedule: config.retrySchedule,
      publicBaseUrl: config.publicBaseUrl,
      loginLinkBaseUrl: config.loginLinkBaseUrl,
      fraudRules: config.fraudRules,
      abuseRules: config.abuseRules,
      rewardQueueIdleCheckSeconds: config.rewardQueueIdleCheckSeconds,
      auth: { allowUnauthenticated: config.access.allowUnauthenticated },
      ...(reminders.mailer ? { mailer: reminders.mailer } : {}),
      discordDmReminders: reminders.discordDm,
    });
    // Owner alerts: the time causes' scan and the digests, on the reminders' mailer (docs/owner-alerts.md).
    const alerts = createAlertLoop({
      db: prisma,
      secretBox: config.secretBox,
      mailer: reminders.mailer,
      discord,
      dashboardBaseUrl: config.loginLinkBaseUrl,
      settings: config.alerts,
      log,
      now: () => new Date(),
    });
    // Retention runs in this process (it owns the data); see createRetentionLoop for several instances at once.
    const retention = createRetentionLoop({ db: prisma, settings: config.retention, log, registry: metrics.registry, now: () => new Date() });
    // The period closer runs here too (it writes the reward queue and the outbox); several instances are safe (close-periods.ts).
    const periodCloser = createPeriodCloserLoop({ prisma, settings: config.periodCloser, log, now: () => new Date() });
    // The network goals' payer too (it writes the reward queue); several instances are safe (pay-reached-goals.ts).
    const goalPayer = createGoalPayerLoop({ prisma, settings: config.goalPayer, log, now: () => new Date() });
    let listening = false;
    return {
      checks: [startup.check, ...readinessChecks({ prisma, databaseUrl: config.databaseUrl })],
      async start(opsPort) {
        if (!(await startup.waitFor(databaseDependency(prisma, config.databaseUrl)))) return false;
        await verifySecretsKey(prisma, config.secretBox);
        // Before listening: upsert the configured tokens; refuse to start (exit 2) when no token could call the service.
        await bootstrapServiceTokens(prisma, config.access, log, new Date());
        const port = await rpc.listen(config.port, config.host);
        listening = true;
        retention.start();
        periodCloser.start();
        goalPayer.start();
        // The reminder sender runs here too (it owns vote_reminders); several instances claim disjoint rows (SKIP LOCKED).
        reminders.start();
        alerts.start();
        log.info({ port, opsPort, database: redactUrl(config.databaseUrl) }, "referral service listening (Connect, gRPC, gRPC-Web over HTTP/2)");
        return true;
      },
      drain: async () => {
        await retention.stop();
        await periodCloser.stop();
        await goalPayer.stop();
        await alerts.stop();
        await reminders.stop();
        await discord.close();
        if (listening) await rpc.close();
      },
      close: () => prisma.$disconnect(),
    };
  },
});
