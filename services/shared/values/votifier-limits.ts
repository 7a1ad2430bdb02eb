/**
 * What a Votifier v2 listener can carry: THE rule, in one home. CastHeart uses it to tell the
 * list, when a heart is cast, that the server's Votifier transport cannot carry it
 * (services/hearts/cast-heart.ts); the Votifier transport uses it to refuse such a vote at once,
 * failed for good without connecting (services/delivery/pipeline/votifier-transport.ts). Pure.
 *
 * Read in NuVotifier's own source (github.com/NuVotifier/NuVotifier, the v2 server):
 * - common/src/main/java/com/vexsoftware/votifier/net/protocol/VotifierProtocol2Decoder.java:
 *   after the challenge and signature checks, `votePayload.get("username").getAsString().length() > 16`
 *   throws `CorruptedFrameException("Username too long")`, answered
 *   `{"status":"error","cause":"CorruptedFrameException","error":"Username too long"}` (since 2016,
 *   commit 6a51c1c "Don't accept > 16 character usernames in v2"). Java's `String.length()` counts
 *   UTF-16 code units, as JavaScript's `length` does.
 * - VotifierProtocolDifferentiator.java: frames are read with
 *   `LengthFieldBasedFrameDecoder(1024, 2, 2, 0, 4)`: magic (2) + length (2) + message at most 1024 bytes.
 *   A username within the limit and a service name within its field bound
 *   (services/shared/values/field-rules.ts) always fit with NuVotifier's challenge (a 130-bit number in
 *   base 32, at most 26 characters); test/unit/votifier-limits.test.ts checks the worst case.
 */

/** The transport's name, as deliveries and CastHeart's `undeliverable` name it. */
export const VOTIFIER_TRANSPORT_NAME = "votifier";
/** NuVotifier refuses a vote whose username is longer than this (UTF-16 code units). */
export const VOTIFIER_MAX_USERNAME_CHARS = 16;
/** NuVotifier's frame cap: magic (2) + length (2) + message must fit. */
export const VOTIFIER_MAX_FRAME_BYTES = 1024;
/** The longest challenge NuVotifier greets with (`new BigInteger(130, random).toString(32)`, TokenUtil.java). */
export const NUVOTIFIER_MAX_CHALLENGE_CHARS = 26;

/**
 * Why a Votifier listener can never accept a vote for this username, or undefined when it can.
 * A vote refused here would be refused on every attempt: it is never worth retrying.
 */
export function votifierRefusal(vote: { username: string }): string | undefined {
  if (vote.username.length > VOTIFIER_MAX_USERNAME_CHARS) {
    return `the username is ${vote.username.length} characters; Votifier (NuVotifier) refuses usernames over ${VOTIFIER_MAX_USERNAME_CHARS} characters`;
  }
  return undefined;
}
