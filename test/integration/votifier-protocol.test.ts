/**
 * The Votifier v2 sender against code nobody here wrote and against the protocol
 * description: `votifier2` (NuVotifier's own JavaScript client, from npm) and the
 * project's sender must put the same bytes on the wire for the same vote, and a
 * real TCP listener that checks frames and HMACs from the protocol description
 * alone (test/helpers/votifier-receiver.ts) must accept both. Every failure mode
 * ends as a `failed` outcome with its cause, never an exception.
 */
import { createHmac } from "node:crypto";
import net from "node:net";
import test from "ava";
import votifier2 from "votifier2";
import {
  buildVotifierPayload,
  encodeVotifierFrame,
  sendVotifierVote,
  VOTIFIER_MAX_FRAME_BYTES,
  type VotifierVote,
} from "../../services/delivery/pipeline/send-votifier.js";
import { startVotifierReceiver, type VotifierReceiver } from "../helpers/votifier-receiver.js";

const TOKEN = "7kq2m9x4hd8s3v1c6p0w5r2n8b";
const vote = (overrides: Partial<VotifierVote> = {}): VotifierVote => ({
  serviceName: "HeartsList",
  username: "Steve_42",
  address: "0.0.0.0",
  timestamp: 1767225600123,
  ...overrides,
});
const insecure = { timeoutMs: 5_000, allowInsecure: true };

const receivers: VotifierReceiver[] = [];
async function receiver(opts: Parameters<typeof startVotifierReceiver>[0] = {}): Promise<VotifierReceiver> {
  const r = await startVotifierReceiver({ tokens: { default: TOKEN }, ...opts });
  receivers.push(r);
  return r;
}
test.after.always(async () => {
  await Promise.all(receivers.map((r) => r.close()));
});

/** Sends with NuVotifier's JavaScript client; resolves with its error (or null). */
function sendWithVotifier2(r: VotifierReceiver, token: string, v: VotifierVote): Promise<Error | null> {
  return new Promise((resolve) => {
    // Key order as the project's payload has it, so the JSON the two clients sign is comparable byte for byte.
    votifier2(
      { host: r.host, port: r.port, token, vote: { serviceName: v.serviceName, username: v.username, address: v.address, timestamp: v.timestamp } },
      (error) => resolve(error),
    );
  });
}

test("the project's sender and votifier2 (NuVotifier's JS client) send identical frames, and the listener accepts both", async (t) => {
  const r = await receiver();
  r.setChallenge("fixedchallenge0123456789");
  t.is(await sendWithVotifier2(r, TOKEN, vote()), null);
  const ours = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote(), insecure);
  t.is(ours.kind, "delivered", ours.error);
  const [theirs, mine] = await r.waitForExchanges(2);
  t.true(theirs!.accepted && mine!.accepted);
  t.deepEqual(mine!.frame, theirs!.frame, "byte for byte: magic, length, payload JSON and signature");
  t.is(mine!.frame.readUInt16BE(0), 0x733a);
  t.is(mine!.frame.readUInt16BE(2), mine!.frame.length - 4);
  t.deepEqual(r.votes[1], {
    serviceName: "HeartsList",
    username: "Steve_42",
    address: "0.0.0.0",
    timestamp: 1767225600123,
    challenge: "fixedchallenge0123456789",
  });
  t.is(ours.greeting, "VOTIFIER 2 fixedchallenge0123456789");
  t.is(ours.answer, '{"status":"ok"}');
  t.is(ours.frameBytes, mine!.frame.length);
});

test("with a random challenge per connection both clients are accepted, and the signature verifies independently", async (t) => {
  const r = await receiver();
  t.is(await sendWithVotifier2(r, TOKEN, vote({ username: "Alex" })), null);
  const ours = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote({ username: "Alex" }), insecure);
  t.is(ours.kind, "delivered");
  const exchanges = await r.waitForExchanges(2);
  for (const exchange of exchanges) {
    const message = JSON.parse(exchange.frame.subarray(4).toString("utf8")) as { payload: string; signature: string };
    t.is(message.signature, createHmac("sha256", TOKEN).update(message.payload).digest("base64"));
    t.is((JSON.parse(message.payload) as { challenge: string }).challenge, exchange.challenge);
  }
});

test("a refused token: the listener answers an error and the outcome carries its cause", async (t) => {
  const r = await receiver({ answerKeys: "with-votifier2-key" });
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: "not-the-token" }, vote(), insecure);
  t.is(outcome.kind, "failed");
  t.is(outcome.error, "the Votifier server refused the vote: CorruptedFrameException: Signature is not valid (invalid token?)");
  t.regex(outcome.answer, /"status":"error"/);
  t.false(r.exchanges[0]!.accepted);
  t.is(
    await sendWithVotifier2(r, "not-the-token", vote()).then((e) => e?.message),
    "CorruptedFrameException: Signature is not valid (invalid token?)",
    "votifier2 sees the same refusal",
  );
});

test("a wrong challenge is refused by the listener and reported", async (t) => {
  const r = await receiver({ behaviour: "wrong-challenge" });
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote(), insecure);
  t.is(outcome.kind, "failed");
  t.is(outcome.error, "the Votifier server refused the vote: CorruptedFrameException: Challenge is not valid");
});

test("a closed port is a failed outcome (connection refused), not an exception", async (t) => {
  const r = await receiver();
  await r.down();
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote(), insecure);
  t.is(outcome.kind, "failed");
  t.is(outcome.error, "connection failed: ECONNREFUSED");
  t.is(outcome.frameBytes, 0);
});

test("a server that accepts but never greets times out after the read timeout", async (t) => {
  const r = await receiver({ behaviour: "silent" });
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote(), { timeoutMs: 300, allowInsecure: true });
  t.is(outcome.kind, "failed");
  t.is(outcome.error, "timed out after 300 ms waiting for the greeting");
  t.is(r.connections(), 1);
});

test("a vote whose frame would exceed 1024 bytes is refused before sending; the listener also refuses oversized frames", async (t) => {
  const r = await receiver({ answerKeys: "with-votifier2-key" });
  const long = vote({ username: "x".repeat(900) });
  t.true(encodeVotifierFrame(buildVotifierPayload(long, "c".repeat(32)), TOKEN).length > VOTIFIER_MAX_FRAME_BYTES);
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, long, insecure);
  t.is(outcome.kind, "failed");
  t.regex(outcome.error ?? "", /^the vote frame is \d+ bytes, over Votifier's 1024-byte limit/);
  t.is(outcome.frameBytes, 0, "nothing was sent");
  t.is(r.exchanges.length, 0);
  // The listener's own cap, exercised by the independent client.
  t.is((await sendWithVotifier2(r, TOKEN, long))?.message, "TooLongFrameException: frame length exceeds 1024");
});

test("the largest vote that fits is sent and accepted", async (t) => {
  const r = await receiver({ checkUsernameLength: false });
  r.setChallenge("c".repeat(32));
  const base = encodeVotifierFrame(buildVotifierPayload(vote({ username: "" }), "c".repeat(32)), TOKEN).length;
  const fits = vote({ username: "y".repeat(VOTIFIER_MAX_FRAME_BYTES - base) });
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, fits, insecure);
  t.is(outcome.kind, "delivered", outcome.error);
  t.is(outcome.frameBytes, VOTIFIER_MAX_FRAME_BYTES);
});

test("a Votifier v1 server is reported as such", async (t) => {
  const r = await receiver({ behaviour: "v1" });
  const outcome = await sendVotifierVote({ host: r.host, port: r.port, token: TOKEN }, vote(), insecure);
  t.is(outcome.kind, "failed");
  t.is(outcome.error, "the server speaks Votifier 1.9, not v2 (NuVotifier with v2 enabled is needed)");
});

test("a server that closes without answering, or answers garbage, is a failed outcome", async (t) => {
  for (const [answer, error] of [
    ["", "the server closed the connection without answering"],
    ["hello\n", "the server's answer is not JSON"],
    ['{"status":"maybe"}\n', "the server's answer has no status ok or error"],
  ] as const) {
    const server = net.createServer((socket) => {
      socket.write("VOTIFIER 2 abc\n");
      socket.once("data", () => socket.end(answer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    const outcome = await sendVotifierVote({ host: "127.0.0.1", port, token: TOKEN }, vote(), insecure);
    await new Promise((resolve) => server.close(resolve));
    t.is(outcome.kind, "failed");
    t.is(outcome.error, error);
  }
});

test("the SSRF guard applies to the address connected to: loopback literals and names resolving to loopback are refused", async (t) => {
  const r = await receiver();
  const strict = { timeoutMs: 2_000, allowInsecure: false };
  const literal = await sendVotifierVote({ host: "127.0.0.1", port: r.port, token: TOKEN }, vote(), strict);
  t.is(
    literal.error,
    "refused to connect to 127.0.0.1: loopback, private, link-local, metadata and other special-purpose addresses are not allowed (Loopback)",
  );
  const named = await sendVotifierVote({ host: "votes.example.test", port: r.port, token: TOKEN }, vote(), {
    ...strict,
    resolve: (_host, _options, callback) => callback(null, [{ address: "127.0.0.1", family: 4 }]),
  });
  t.is(named.error, "refused to connect to 127.0.0.1: loopback, private, link-local, metadata and other special-purpose addresses are not allowed (Loopback)");
  t.is(r.connections(), 0, "nothing connected");
});
