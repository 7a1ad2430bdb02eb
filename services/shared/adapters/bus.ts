/**
 * The message bus between the relay and its consumers. Production uses Kafka
 * (kafka-bus.ts); the embedded single-process mode uses the in-process bus
 * (memory-bus.ts). Both deliver at least once and keep per-key order.
 */

/** Topic for heart events (key = server id). */
export const HEARTS_TOPIC = "hearts.events.v1";
/** Topic for referral transition events (key = server id). */
export const REFERRALS_TOPIC = "referrals.events.v1";
/** Topic for owner notifications: an endpoint disabled, a delivery failed for good (key = server id). */
export const OWNER_NOTIFICATIONS_TOPIC = "owner.notifications.v1";
/** Every topic the relay publishes to; each process creates the ones it uses at start. */
export const ALL_TOPICS = [HEARTS_TOPIC, REFERRALS_TOPIC, OWNER_NOTIFICATIONS_TOPIC] as const;

/** One message to publish. */
export interface BusMessage {
  key: string;
  value: Uint8Array;
}

/** A received message. */
export interface ReceivedMessage {
  topic: string;
  key: string;
  value: Uint8Array;
  partition: number;
  offset: string;
}

/** Handles one message; throwing leaves it uncommitted so it is redelivered. */
export type MessageHandler = (message: ReceivedMessage) => Promise<void>;

/**
 * Handles several messages of one partition at once, in offset order (a consumer that writes
 * them with one statement); throwing leaves all of them uncommitted so they are redelivered.
 */
export type BatchHandler = (messages: ReceivedMessage[]) => Promise<void>;

/**
 * How a group member keeps its membership (Kafka): the broker gives its partitions to the others
 * once it has not heard from it for `sessionTimeoutMs` (a killed process), or at once when it
 * leaves (a clean stop). `fetchMaxWaitMs` bounds a fetch with nothing to read, so an idle member
 * heartbeats, and learns of a rebalance, that often. A bus without groups ignores it.
 */
export interface ConsumerSession {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  fetchMaxWaitMs: number;
}

/** What a subscription needs: one handler per message, or one per batch; `session` defaults to the bus's own. */
export type SubscribeOptions = { groupId: string; topics: string[]; fromBeginning?: boolean; session?: ConsumerSession } & (
  | { handler: MessageHandler; batchHandler?: undefined }
  | { batchHandler: BatchHandler; handler?: undefined }
);

/** A running subscription. */
export interface Subscription {
  stop(): Promise<void>;
  /**
   * Messages not yet committed on the partitions the group assigned to THIS subscription now (its
   * share of the group's lag); undefined when the bus cannot tell, or while no assignment is held
   * (joining, rebalancing). Another member's waiting messages are not counted.
   */
  lag?(): Promise<number | undefined>;
}

/**
 * The bus refused messages for what they are (too large, invalid record or topic),
 * not because it is unavailable: sending the same messages again can never succeed.
 * Any other publish error is retryable. `code` is the broker's error type, for
 * example `MESSAGE_TOO_LARGE`.
 */
export class RejectedMessagesError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "RejectedMessagesError";
  }
}

export interface EventBus {
  /**
   * Publishes messages and resolves once the bus has durably accepted all of them.
   * Throws RejectedMessagesError when the messages themselves are refused; some of a
   * batch may have been written anyway (at least once).
   */
  publish(topic: string, messages: BusMessage[]): Promise<void>;
  /** Subscribes a consumer group; each message is committed after its handler (or its batch's handler) resolves. */
  subscribe(opts: SubscribeOptions): Promise<Subscription>;
  /**
   * Messages of `topics` not yet committed by `groupId` (the whole group's lag, every member's
   * partitions), or undefined when the bus cannot tell. A member's own share: Subscription.lag.
   */
  lag?(groupId: string, topics: string[]): Promise<number | undefined>;
  /**
   * Connects the publishing side ahead of the first publish (a process that publishes calls it at start), so the
   * first event after a start does not wait for the connection (Kafka: some hundreds of ms). Throws when the bus is
   * unreachable; a later publish connects again. A bus without connections has none.
   */
  connectPublisher?(): Promise<void>;
  /** Throws when the bus is unreachable; used by /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
