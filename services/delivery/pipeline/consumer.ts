import { isUuid } from "../../shared/values/ids.js";
import { isPeriod } from "../../shared/values/period.js";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, type Envelope } from "../../../gen/proto/events/v1/events_pb.js";
import type { Registry } from "prom-client";
import { HEARTS_TOPIC, REFERRALS_TOPIC, type ConsumerSession, type EventBus, type ReceivedMessage, type Subscription } from "../../shared/adapters/bus.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { createDeadLetterCounter, storeDeadMessage } from "../../shared/adapters/dead-letters.js";
import type { Logger } from "../../shared/runtime/log.js";
import type { Dispatcher } from "./dispatcher.js";
import { insertAndLeaseDeliveries, type NewDelivery } from "./insert-deliveries.js";
import { isReferralEventType, toReferralDelivery } from "./referral-event.js";
import { toPeriodClosedDelivery } from "./period-closed-event.js";
import { toGoalReachedDelivery } from "./goal-reached-event.js";
import { GOAL_REACHED_EVENT, PERIOD_CLOSED_EVENT } from "../../shared/values/event-types.js";
import { type CountedHeart, queueVoteRewards } from "../../rewards/queue-vote-rewards.js";
import { storeProgressionEvents, toRewardCountsPayload } from "./progression-event.js";
import { toHeartEligibleDelivery } from "./domain/heart-eligible.js";
import { recordVoterRoleVotes } from "../../voter-roles/voter-role-store.js";
import { queueReferralRewards, type ReferralOutcome } from "../../rewards/queue-referral-rewards.js";

/** The default consumer group of the delivery service. */
export const DELIVERY_CONSUMER_GROUP = "delivery.v1";
/** Default of CONSUMER_STUCK_AFTER_MS: readiness fails after this long without progress while messages wait. */
export const DEFAULT_CONSUMER_STUCK_AFTER_MS = 60_000;
/**
 * Default of KAFKA_SESSION_TIMEOUT_MS: how long the broker waits for a silent member of the delivery
 * group (a killed process) before it hands that member's partitions to the others. 6 s is the
 * broker's default `group.min.session.timeout.ms`, the shortest a stock broker accepts (kafkajs's
 * default, used before, is 30 s). A clean stop leaves the group at once and does not wait for it.
 */
export const DEFAULT_KAFKA_SESSION_TIMEOUT_MS = 6_000;
/** Heartbeats per session timeout; kafkajs recommends at least 3. */
const HEARTBEATS_PER_SESSION = 6;

/**
 * The delivery group's membership timings for a session timeout: a heartbeat every sixth of it
 * (1 s at 6 s), and fetches that wait at most as long, so an idle member learns of a rebalance
 * (a dead member's partitions to take over) within a heartbeat, not after kafkajs's 5 s fetch wait.
 */
export function deliveryConsumerSession(sessionTimeoutMs: number): ConsumerSession {
  const heartbeatIntervalMs = Math.max(100, Math.floor(sessionTimeoutMs / HEARTBEATS_PER_SESSION));
  return { sessionTimeoutMs, heartbeatIntervalMs, fetchMaxWaitMs: heartbeatIntervalMs };
}

/** The consumer's dependencies. */
export interface DeliveryConsumerOptions {
  bus: EventBus;
  prisma: PrismaClient;
  log: Logger;
  groupId?: string;
  /**
   * The hearts topic; defaults to HEARTS_TOPIC, and then REFERRALS_TOPIC is consumed too. Tests pass
   * a topic of their own (then only it is consumed, unless `referralTopic` is given as well).
   */
  topic?: string;
  /** The referrals topic consumed beside `topic` (default REFERRALS_TOPIC when `topic` is not given). */
  referralTopic?: string;
  /**
   * The dispatcher of the same process: the statement storing a batch's deliveries also leases the
   * new rows it has room for (Dispatcher.withInsertLease), which it sends at once, without a claim
   * statement after the insert. Without it the rows wait for a dispatcher's claim.
   */
  dispatcher?: Pick<Dispatcher, "withInsertLease">;
  /** Registry for the dead-letter counter; none when omitted. */
  registry?: Registry;
  /**
   * `checkProgress` fails when one message has been in its handler this long, or
   * when messages wait on this process's partitions (its consumer lag) and none was handled for this long.
   * Default DEFAULT_CONSUMER_STUCK_AFTER_MS.
   */
  stuckAfterMs?: number;
  /** The clock (milliseconds). */
  nowMs?: () => number;
  /** The group session timeout (deliveryConsumerSession); default DEFAULT_KAFKA_SESSION_TIMEOUT_MS. */
  sessionTimeoutMs?: number;
}

/** A consumer that can be started and stopped. */
export interface DeliveryConsumer {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Handles one message (exposed for tests of poison handling and idempotency). */
  handle(message: ReceivedMessage): Promise<void>;
  /** Handles a batch of messages as the bus hands them over: one statement stores all their deliveries. */
  handleBatch(messages: ReceivedMessage[]): Promise<void>;
  /** Readiness: throws with the reason when the consumer is stuck. */
  checkProgress(): Promise<void>;
}

/** What decoding a message gave. */
export type DecodedMessage =
  | { kind: "delivery"; delivery: NewDelivery; eventId: string; reward?: ReferralOutcome }
  | { kind: "ignored"; type: string }
  | { kind: "poison"; code: "undecodable" | "incomplete"; error: string };

/**
 * Decodes a hearts or referrals topic message. `heart.counted` with a complete payload becomes
 * a delivery, and so does a `referral.registered|qualified|reversed` (referral-event.ts: one
 * delivery per endpoint subscribed to it), a `period.closed` (period-closed-event.ts) and a `goal.reached` (goal-reached-event.ts); other event types are ignored; anything undecodable
 * or incomplete is poison. Pure.
 */
export function decodeHeartMessage(value: Uint8Array): DecodedMessage {
  let envelope: Envelope;
  try {
    envelope = fromBinary(EnvelopeSchema, value);
  } catch (error) {
    // Failure policy: an undecodable message can never succeed; report it as poison so it is skipped, not retried forever.
    return { kind: "poison", code: "undecodable", error: `undecodable envelope: ${(error as Error).message}` };
  }
  if (isReferralEventType(envelope.type)) {
    const referral = toReferralDelivery(envelope);
    return referral.kind === "poison"
      ? { kind: "poison", code: "incomplete", error: referral.error }
      : { kind: "delivery", delivery: referral.delivery, eventId: envelope.eventId, ...(referral.reward ? { reward: referral.reward } : {}) };
  }
  if (envelope.type === PERIOD_CLOSED_EVENT) {
    const closed = toPeriodClosedDelivery(envelope);
    return closed.kind === "poison"
      ? { kind: "poison", code: "incomplete", error: closed.error }
      : { kind: "delivery", delivery: closed.delivery, eventId: envelope.eventId };
  }
  if (envelope.type === GOAL_REACHED_EVENT) {
    const reached = toGoalReachedDelivery(envelope);
    return reached.kind === "poison"
      ? { kind: "poison", code: "incomplete", error: reached.error }
      : { kind: "delivery", delivery: reached.delivery, eventId: envelope.eventId };
  }
  if (envelope.type !== "heart.counted") return { kind: "ignored", type: envelope.type };
  if (envelope.payload.case !== "heartCounted") return { kind: "poison", code: "incomplete", error: "heart.counted without a heartCounted payload" };
  const h = envelope.payload.value;
  const serverId = h.serverId || envelope.serverId;
  if (!isUuid(h.heartId) || !isUuid(serverId)) return { kind: "poison", code: "incomplete", error: "heart_id or server_id is not a uuid" };
  if (h.username === "" || h.voterIdentity === "" || !isPeriod(h.period)) {
    return { kind: "poison", code: "incomplete", error: "heart.counted payload is missing username, voter_identity or period" };
  }
  const countedAt = h.countedAt ?? envelope.occurredAt;
  return {
    kind: "delivery",
    eventId: envelope.eventId,
    delivery: {
      heartId: h.heartId,
      serverId,
      eventType: "heart.counted",
      username: h.username,
      voterIdentity: h.voterIdentity,
      period: h.period,
      streakDay: h.streakDay > 0 ? h.streakDay : null,
      countedAt: countedAt ? timestampDate(countedAt) : new Date(0),
      // Empty proto strings are "not given" (CastHeart format-checked what was given).
      platformIds: {
        steamId: h.steamId || null,
        discordId: h.discordId || null,
        minecraftUuid: h.minecraftUuid || null,
        accountId: h.accountId || null,
      },
      nextEligibleAt: h.nextEligibleAt ? timestampDate(h.nextEligibleAt) : null,
    },
  };
}

/** A counted heart's delivery as the reward queue takes it. */
function countedHeartOf(d: NewDelivery): CountedHeart {
  const ids = d.platformIds;
  return {
    heartId: d.heartId,
    serverId: d.serverId,
    voterIdentity: d.voterIdentity,
    countedAt: d.countedAt,
    player: {
      username: d.username,
      steamId: ids?.steamId ?? null,
      discordId: ids?.discordId ?? null,
      minecraftUuid: ids?.minecraftUuid ?? null,
      accountId: ids?.accountId ?? null,
    },
  };
}

/**
 * Subscribes to the hearts and referrals topics and turns each `heart.counted` and `referral.*`
 * into stored delivery rows (idempotent per heart or event id, server, transport and endpoint),
 * a batch of messages at a time with one statement; before it, queues the counted hearts' rewards on
 * servers with reward rules and stores their progression events (queueVoteRewards: one transaction
 * per batch), whose counts the hearts' deliveries carry (payload version 3); after it, queues the
 * referral rewards of its qualified and clawed-back referrals (queueReferralRewards: one transaction
 * per batch); only then it resolves so the bus commits the batch's offsets. It never does HTTP: the dispatcher sends,
 * so a slow receiver never blocks a partition. A message that cannot be decoded is stored in
 * `dead_letters` (with its reason and bytes) and counted, then committed with its batch.
 * Database errors throw, leaving the batch uncommitted so its messages come again.
 */
export function createDeliveryConsumer(opts: DeliveryConsumerOptions): DeliveryConsumer {
  const topic = opts.topic ?? HEARTS_TOPIC;
  const referralTopic = opts.referralTopic ?? (opts.topic === undefined ? REFERRALS_TOPIC : undefined);
  const topics = referralTopic === undefined ? [topic] : [topic, referralTopic];
  const groupId = opts.groupId ?? DELIVERY_CONSUMER_GROUP;
  const stuckAfterMs = opts.stuckAfterMs ?? DEFAULT_CONSUMER_STUCK_AFTER_MS;
  const nowMs = opts.nowMs ?? Date.now;
  const deadLetters = opts.registry ? createDeadLetterCounter(opts.registry) : undefined;
  let subscription: Subscription | undefined;
  /** When a message was last handled (or the consumer started). */
  let lastProgressAt = nowMs();
  /** Messages in their handler now, with when each started. */
  const inFlight = new Map<ReceivedMessage, number>();

  const setAside = async (message: ReceivedMessage, poison: Extract<DecodedMessage, { kind: "poison" }>): Promise<void> => {
    // Failure policy: a poison message can never succeed; store it aside (a redelivery adds nothing) and commit, so the partition keeps moving.
    const added = await storeDeadMessage(opts.prisma, {
      topic: message.topic,
      partition: message.partition,
      offset: message.offset,
      key: message.key,
      value: message.value,
      code: poison.code,
      reason: poison.error,
    });
    if (added) deadLetters?.inc({ source: "delivery", topic: message.topic, code: poison.code });
    opts.log.error(
      { topic: message.topic, partition: message.partition, offset: message.offset, code: poison.code, error: poison.error },
      "poison message moved to dead_letters",
    );
  };

  const handleMessages = async (messages: ReceivedMessage[]): Promise<void> => {
    const stored: { delivery: NewDelivery; eventId: string; reward?: ReferralOutcome }[] = [];
    for (const message of messages) {
      const decoded = decodeHeartMessage(message.value);
      if (decoded.kind === "poison") await setAside(message, decoded);
      else if (decoded.kind === "ignored") opts.log.debug({ type: decoded.type, offset: message.offset }, "ignoring event type");
      else stored.push(decoded);
    }
    if (stored.length === 0) return;
    // The rewards first, in their own transaction with the progression events they make, so the hearts' deliveries can
    // carry the counts (payload version 3). A redelivered batch counts, queues and stores nothing twice (the voter's
    // state, the entry and event keys, the deliveries' dedup keys).
    let rewardsFailure: unknown;
    try {
      const counted = await queueVoteRewards(
        opts.prisma,
        stored.flatMap(({ delivery }) => (delivery.eventType === "heart.counted" ? [countedHeartOf(delivery)] : [])),
        opts.log,
        storeProgressionEvents,
      );
      if (counted.counted + counted.replays > 0) opts.log.debug({ ...counted, counts: counted.counts.size }, "vote rewards queued");
      for (const { delivery } of stored) {
        const counts = delivery.eventType === "heart.counted" ? counted.counts.get(delivery.heartId) : undefined;
        if (counts !== undefined) delivery.rewardCounts = toRewardCountsPayload(counts);
      }
    } catch (error) {
      // Failure policy: fail after storing - a rewards fault must not stop the votes' callbacks: they are stored all the same (without counts), and the error is thrown after, so the batch is not acknowledged and its rewards are counted when it comes again.
      rewardsFailure = error;
    }
    // With the deliveries, in the same statement, each counted heart's heart.eligible (domain/heart-eligible.ts), due when
    // its voter may vote again: stored only where an endpoint or the pull list takes it, never leased (the claim sends it
    // when due), before the batch is acknowledged (a failure throws; the redelivered batch stores it, by its event id never twice).
    const eligible = stored.flatMap(({ delivery }) => {
      const e = toHeartEligibleDelivery(delivery);
      return e === undefined ? [] : [e];
    });
    const insert = (lease?: Parameters<typeof insertAndLeaseDeliveries>[2]) =>
      insertAndLeaseDeliveries(opts.prisma, [...stored.map((s) => s.delivery), ...eligible], lease);
    // The outcomes of the batch's own deliveries come first (the heart.eligible ones after them are not reported).
    const { outcomes } = await (opts.dispatcher ? opts.dispatcher.withInsertLease(insert) : insert());
    stored.forEach(({ delivery, eventId }, i) => {
      const outcome = outcomes[i];
      if (outcome === "unknown_server") {
        // Failure policy: the server was deleted after the heart counted; there is no one to call back, so skip.
        opts.log.warn({ heartId: delivery.heartId, eventId, serverId: delivery.serverId }, "heart for an unknown server; no delivery");
      } else opts.log.debug({ heartId: delivery.heartId, eventId, outcome }, "delivery stored");
    });
    // Voter roles (services/voter-roles): each counted vote with a Discord id on a server with voter roles makes its
    // voter's role due (the role job adds it); a redelivered batch writes the same grants again.
    await recordVoterRoleVotes(
      opts.prisma,
      stored.flatMap(({ delivery: d }, i) =>
        d.eventType === "heart.counted" && d.platformIds?.discordId && outcomes[i] !== "unknown_server"
          ? [{ serverId: d.serverId, discordId: d.platformIds.discordId, voterIdentity: d.voterIdentity, countedAt: d.countedAt }]
          : [],
      ),
      new Date(nowMs()),
    );
    // Referral rewards after the deliveries (queue-referral-rewards.ts: why here and not in ApplyEvent), before the batch is
    // acknowledged: a failure throws, the offsets stay uncommitted, and the redelivered batch queues nothing twice (entry keys).
    const referrals = await queueReferralRewards(
      opts.prisma,
      stored.flatMap(({ reward }, i) => (reward !== undefined && outcomes[i] !== "unknown_server" ? [reward] : [])),
      opts.log,
    );
    if (referrals.queued + referrals.held + referrals.unpaid + referrals.reversed > 0) opts.log.debug(referrals, "referral rewards queued");
    if (rewardsFailure !== undefined) throw rewardsFailure;
  };

  const handleBatch = async (messages: ReceivedMessage[]): Promise<void> => {
    const started = nowMs();
    for (const message of messages) inFlight.set(message, started);
    try {
      await handleMessages(messages);
      lastProgressAt = nowMs();
    } finally {
      for (const message of messages) inFlight.delete(message);
    }
  };
  const handle = (message: ReceivedMessage): Promise<void> => handleBatch([message]);

  /**
   * Stuck: one message has been in its handler for `stuckAfterMs`, or messages wait on the partitions
   * assigned to THIS process (its share of the group's lag, when the bus reports it) and none was
   * handled for `stuckAfterMs`. Another member's waiting messages say nothing of this one: an idle
   * process beside a stuck one is not stuck (the stuck one's own check reports it).
   */
  const checkProgress = async (): Promise<void> => {
    const now = nowMs();
    for (const [message, since] of inFlight) {
      if (now - since > stuckAfterMs) {
        throw new Error(
          `consumer stuck: message ${message.topic}/${message.partition}@${message.offset} in its handler for ${Math.round((now - since) / 1000)} s`,
        );
      }
    }
    if (!subscription || now - lastProgressAt <= stuckAfterMs) return;
    const lag = await subscription.lag?.();
    if (lag !== undefined && lag > 0) {
      throw new Error(`consumer stuck: ${lag} messages wait on ${topics.join(", ")} and none was handled for ${Math.round((now - lastProgressAt) / 1000)} s`);
    }
  };

  return {
    handle,
    handleBatch,
    checkProgress,
    async start() {
      if (subscription) return;
      lastProgressAt = nowMs();
      subscription = await opts.bus.subscribe({
        groupId,
        topics,
        batchHandler: handleBatch,
        fromBeginning: true,
        session: deliveryConsumerSession(opts.sessionTimeoutMs ?? DEFAULT_KAFKA_SESSION_TIMEOUT_MS),
      });
    },
    /** Leaves the group (kafkajs's disconnect sends LeaveGroup): the others take the partitions over at once. */
    async stop() {
      const current = subscription;
      subscription = undefined;
      await current?.stop();
    },
  };
}
