import type { Registry } from "prom-client";
import type { EventBus } from "../../shared/adapters/bus.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import type { ReadinessCheck } from "../../shared/runtime/health.js";
import type { Logger } from "../../shared/runtime/log.js";
import type { SecretBox } from "../../shared/runtime/secrets.js";
import { DEFAULT_DISPATCH_SETTINGS, type DispatchSettings } from "./config.js";
import { createDeliveryConsumer, type DeliveryConsumer } from "./consumer.js";
import { createDispatcher, type Dispatcher, type DispatcherOptions } from "./dispatcher.js";

/** What a delivery worker takes from the process that runs it. */
export interface DeliveryWorkerDeps {
  prisma: PrismaClient;
  bus: EventBus;
  secretBox: SecretBox;
  log: Logger;
  /** The clock of attempts and schedules; default the wall clock. */
  now?: () => Date;
  /** Where attempt, dead-letter and lag metrics are registered; none when omitted. */
  registry?: Registry;
  /** Replaces the transports (tests); by default the HTTP callback and Votifier v2. */
  transports?: DispatcherOptions["transports"];
  /** The process's one Discord client (its owner closes it); without it the dispatcher makes and closes its own. */
  discord?: DispatcherOptions["discord"];
}

/**
 * Settings of a delivery worker, named as the delivery process's settings (DeliveryConfig).
 * Each one left out takes its default: DEFAULT_DISPATCH_SETTINGS, DELIVERY_CONSUMER_GROUP,
 * DEFAULT_CONSUMER_STUCK_AFTER_MS, DEFAULT_KAFKA_SESSION_TIMEOUT_MS, HEARTS_TOPIC.
 */
export interface DeliveryWorkerSettings extends Partial<DispatchSettings> {
  groupId?: string;
  consumerStuckAfterMs?: number;
  /** How long a killed process keeps its partitions; default DEFAULT_KAFKA_SESSION_TIMEOUT_MS. */
  kafkaSessionTimeoutMs?: number;
  /** The topic consumed; tests may pass one of their own. */
  topic?: string;
}

/** The consumer (hearts topic -> delivery rows) and the dispatcher (rows -> callbacks) of one process. */
export interface DeliveryWorker {
  consumer: DeliveryConsumer;
  dispatcher: Dispatcher;
  /** The worker's /readyz check (`consumer`), besides the database and bus checks of its process. */
  checks: ReadinessCheck[];
  /** Starts dispatching stored deliveries, then joins the consumer group. */
  start(): Promise<void>;
  /** Stops taking new work first (the consumer leaves its group, so another process takes its partitions at once), then lets in-flight callbacks finish and record their attempts. */
  stop(): Promise<void>;
}

/**
 * The delivery service's wiring, written once for every process that runs it (the delivery
 * process, the all-in-one `npm start`, tests and benchmarks): a consumer that stores deliveries
 * already leased to the dispatcher of the same process, which sends them at once.
 */
export function createDeliveryWorker(deps: DeliveryWorkerDeps, settings: DeliveryWorkerSettings = {}): DeliveryWorker {
  const dispatch: DispatchSettings = { ...DEFAULT_DISPATCH_SETTINGS, ...definedOnly(settings) };
  const dispatcher = createDispatcher({
    prisma: deps.prisma,
    secretBox: deps.secretBox,
    log: deps.log,
    now: deps.now ?? (() => new Date()),
    schedule: dispatch.schedule,
    timeoutMs: dispatch.callbackTimeoutMs,
    allowInsecure: dispatch.allowInsecureCallbacks,
    concurrency: dispatch.concurrency,
    perServerConcurrency: dispatch.perServerConcurrency,
    pollIntervalMs: dispatch.pollIntervalMs,
    discordApiBaseUrl: dispatch.discordApiBaseUrl,
    ...(deps.registry ? { registry: deps.registry } : {}),
    ...(deps.transports ? { transports: deps.transports } : {}),
    ...(deps.discord ? { discord: deps.discord } : {}),
  });
  const consumer = createDeliveryConsumer({
    bus: deps.bus,
    prisma: deps.prisma,
    log: deps.log,
    dispatcher,
    ...(settings.groupId !== undefined ? { groupId: settings.groupId } : {}),
    ...(settings.topic !== undefined ? { topic: settings.topic } : {}),
    ...(settings.consumerStuckAfterMs !== undefined ? { stuckAfterMs: settings.consumerStuckAfterMs } : {}),
    ...(settings.kafkaSessionTimeoutMs !== undefined ? { sessionTimeoutMs: settings.kafkaSessionTimeoutMs } : {}),
    ...(deps.registry ? { registry: deps.registry } : {}),
  });
  return {
    consumer,
    dispatcher,
    checks: [{ name: "consumer", check: () => consumer.checkProgress() }],
    async start() {
      dispatcher.start();
      await consumer.start();
    },
    async stop() {
      await consumer.stop();
      await dispatcher.stop();
    },
  };
}

/** The dispatcher settings given (a whole DeliveryConfig may be passed), without keys set to undefined (which would hide a default). */
function definedOnly(settings: DeliveryWorkerSettings): Partial<DispatchSettings> {
  const keys = Object.keys(DEFAULT_DISPATCH_SETTINGS) as (keyof DispatchSettings)[];
  return Object.fromEntries(keys.filter((key) => settings[key] !== undefined).map((key) => [key, settings[key]])) as Partial<DispatchSettings>;
}
