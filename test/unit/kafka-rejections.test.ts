import test from "ava";
import kafkajs from "kafkajs";
import { RejectedMessagesError } from "../../services/shared/adapters/bus.js";
import { toRejectedMessages } from "../../services/shared/adapters/kafka-bus.js";

// CommonJS exports Node's named-export detection cannot see.
const { KafkaJSProtocolError, KafkaJSNonRetriableError, KafkaJSNumberOfRetriesExceeded, KafkaJSConnectionError } = kafkajs;

/** A broker error as kafkajs builds it from a response's error code. */
const protocolError = (type: string, code: number, retriable: boolean) =>
  new KafkaJSProtocolError({ type, code, retriable, message: `broker says ${type}` } as unknown as Error);

const REFUSALS: [string, number][] = [
  ["MESSAGE_TOO_LARGE", 10],
  ["RECORD_LIST_TOO_LARGE", 18],
  ["INVALID_TOPIC_EXCEPTION", 17],
  ["INVALID_RECORD", 87],
  ["INVALID_TIMESTAMP", 32],
];

for (const [type, code] of REFUSALS) {
  test(`kafka error classification: ${type} (${code}) refuses the messages themselves -> RejectedMessagesError, also when kafkajs wraps it`, (t) => {
    const error = protocolError(type, code, false);
    for (const thrown of [
      error,
      Reflect.construct(KafkaJSNonRetriableError, [error, { cause: error }]) as Error,
      new KafkaJSNumberOfRetriesExceeded(error, { retryCount: 1, retryTime: 1 }),
    ]) {
      const rejected = toRejectedMessages(thrown);
      t.true(rejected instanceof RejectedMessagesError);
      t.is(rejected?.code, type);
      t.is(rejected?.message, `${type}: broker says ${type}`);
    }
  });
}

test("kafka error classification: an outage or a retryable broker error is not a refusal (retried, never dead-lettered)", (t) => {
  const notEnoughReplicas = protocolError("NOT_ENOUGH_REPLICAS", 19, true);
  t.is(toRejectedMessages(notEnoughReplicas), undefined);
  t.is(toRejectedMessages(new KafkaJSNumberOfRetriesExceeded(notEnoughReplicas, { retryCount: 8, retryTime: 1 })), undefined);
  t.is(toRejectedMessages(new KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:9")), undefined);
  t.is(toRejectedMessages(protocolError("NOT_LEADER_FOR_PARTITION", 6, true)), undefined);
  // The text alone never decides: a plain error whose message names a refusal stays retryable.
  t.is(toRejectedMessages(new Error("MESSAGE_TOO_LARGE")), undefined);
  t.is(toRejectedMessages("MESSAGE_TOO_LARGE"), undefined);
});
