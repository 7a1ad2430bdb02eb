/**
 * The Votifier rule (services/shared/values/votifier-limits.ts) against NuVotifier's two limits: a username
 * the rule lets through, with any service name the settings accept, always fits NuVotifier's
 * 1024-byte frame with its longest challenge; so the only vote a NuVotifier listener can never
 * accept is the one the rule refuses.
 */
import test from "ava";
import { buildVotifierPayload, encodeVotifierFrame } from "../../services/delivery/pipeline/send-votifier.js";
import { maxCharsOf } from "../../services/shared/values/field-rules.js";
import {
  NUVOTIFIER_MAX_CHALLENGE_CHARS,
  VOTIFIER_MAX_FRAME_BYTES,
  VOTIFIER_MAX_USERNAME_CHARS,
  votifierRefusal,
} from "../../services/shared/values/votifier-limits.js";

test("the worst vote the rule lets through fits NuVotifier's frame: every character escaped twice, the longest service name and challenge", (t) => {
  // JSON escapes a control character or a lone surrogate as \uXXXX (6 bytes), and the payload string is escaped again
  // inside the message (7 bytes): the most bytes one UTF-16 code unit can take on the wire.
  const username = "\u001f".repeat(VOTIFIER_MAX_USERNAME_CHARS);
  t.is(votifierRefusal({ username }), undefined);
  const serviceName = "\ud800".repeat(maxCharsOf("votifier_service_name"));
  const payload = buildVotifierPayload(
    { serviceName, username, address: "0.0.0.0", timestamp: 9_999_999_999_999, uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5" },
    "v".repeat(NUVOTIFIER_MAX_CHALLENGE_CHARS),
  );
  const frame = encodeVotifierFrame(payload, "any-token");
  t.true(frame.length <= VOTIFIER_MAX_FRAME_BYTES, `${frame.length} bytes`);
});

test("one character more than NuVotifier accepts is refused, whatever the characters", (t) => {
  t.is(votifierRefusal({ username: "a".repeat(VOTIFIER_MAX_USERNAME_CHARS) }), undefined);
  t.regex(votifierRefusal({ username: "a".repeat(VOTIFIER_MAX_USERNAME_CHARS + 1) }) ?? "", /^the username is 17 characters; /);
  // Java's String.length() and JavaScript's length both count UTF-16 code units: an emoji is two.
  t.regex(votifierRefusal({ username: "😀".repeat(9) }) ?? "", /^the username is 18 characters; /);
});
