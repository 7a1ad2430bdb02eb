// The signature debugger's logic: pure functions, no DOM, no network. Given a body, an
// X-Service-Signature value and optionally the secret, it rebuilds the canonical string
// "<t>.<body>", computes the expected MAC and says which part differs. Runs in the page
// (the secret never leaves it) and in the unit tests (test/unit/dashboard-signature-check.test.ts).
//
// `rules` comes from GET /dashboard/signature-rules.json, built from the gateway's own
// constants (tolerance, patterns, the contract's error texts), so the two cannot drift.

import { hmacSha256, toHex } from "./hmac-sha256.js";

/** The two schemes: ingest (`v1=sha256=<hex>`, optional kid) and reward callback (bare hex `v1`, one per active secret). */
export const SCHEMES = ["ingest", "callback"];

const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const HEADER_NAME = /^\s*x-service-signature\s*:\s*/i;

/**
 * A MAC engine: WebCrypto when the page has it (secure contexts only: https or
 * localhost), else the plain-JS HMAC. `hex(key, message)` takes two strings and
 * returns lower-case hex of HMAC-SHA256 over their UTF-8 bytes.
 */
export function createMacEngine(subtle) {
  const encoder = new TextEncoder();
  if (subtle && typeof subtle.importKey === "function") {
    return {
      name: "webcrypto",
      async hex(key, message) {
        const keyBytes = typeof key === "string" ? encoder.encode(key) : key;
        const cryptoKey = await subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
        return toHex(new Uint8Array(await subtle.sign("HMAC", cryptoKey, encoder.encode(message))));
      },
    };
  }
  return {
    name: "plain-js",
    async hex(key, message) {
      const keyBytes = typeof key === "string" ? encoder.encode(key) : key;
      return toHex(hmacSha256(keyBytes, encoder.encode(message)));
    },
  };
}

/**
 * Parses a header value part by part, exactly as the gateway does for the ingest scheme
 * (services/shared/values/signature.ts, gateway/verify-signature.ts), and the same way for the
 * callback scheme with a bare-hex `v1`. Returns what it found and one finding per problem.
 */
export function parseHeader(rawHeader, scheme, rules) {
  const findings = [];
  let header = rawHeader;
  if (HEADER_NAME.test(header)) {
    header = header.replace(HEADER_NAME, "");
    findings.push(info("header", 'The header name was removed: only the value after "X-Service-Signature:" is checked.'));
  }
  header = header.replace(/[\r\n]+$/, "");
  const result = { header, t: null, tText: null, macs: [], kid: null, malformed: false, findings };
  if (header.trim() === "") {
    result.malformed = true;
    findings.push(error("header", "The header is empty."));
    return result;
  }
  const tPattern = new RegExp(rules.t_pattern);
  const kidPattern = new RegExp(rules.kid_pattern);
  const parts = header.split(",");
  parts.forEach((rawPart, index) => {
    const part = rawPart.trim();
    const where = `part ${index + 1}`;
    const eq = part.indexOf("=");
    if (eq <= 0) {
      result.malformed = true;
      findings.push(error("header", part === "" ? `${cap(where)} is empty (a stray comma?).` : `${cap(where)} "${part}" is not key=value.`));
      return;
    }
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === "t") {
      if (result.tText !== null) {
        result.malformed = true;
        findings.push(error("t", "t appears twice. Send one X-Service-Signature header (two headers are joined into one value)."));
        return;
      }
      result.tText = value;
      if (!tPattern.test(value)) {
        result.malformed = true;
        findings.push(
          error("t", /^-?\d+\.\d+$/.test(value) ? `t=${value} has a fraction: it must be whole Unix seconds.` : `t=${value} is not an integer (Unix seconds).`),
        );
        return;
      }
      result.t = Number(value);
      return;
    }
    if (key === "v1") {
      result.macs.push(parseMac(value, scheme, rules, result, findings));
      return;
    }
    if (key === "kid" && scheme === "ingest") {
      if (result.kid !== null) {
        result.malformed = true;
        findings.push(error("kid", "kid appears twice."));
      } else if (!kidPattern.test(value)) {
        result.malformed = true;
        findings.push(error("kid", `kid=${value} may only hold letters, digits and . _ : - (1 to 128 characters).`));
      } else {
        result.kid = value;
      }
      return;
    }
    const near = key.trim().toLowerCase();
    if (near === "t" || near === "v1" || near === "kid") {
      findings.push(warn("header", `"${key}" is not "${near}": keys are case-sensitive and take no spaces, so this part is ignored.`));
      return;
    }
    findings.push(info("header", `${key}=... is not part of the ${scheme} scheme and is ignored.`));
  });
  if (result.tText === null) {
    result.malformed = true;
    findings.push(error("t", "There is no t=<unix seconds>."));
  }
  if (result.macs.length === 0) {
    result.malformed = true;
    findings.push(error("v1", scheme === "ingest" ? "There is no v1=sha256=<hex>." : "There is no v1=<hex>."));
  }
  return result;
}

function parseMac(value, scheme, rules, result, findings) {
  const mac = { text: value, hex: null };
  let hex = value;
  if (scheme === "ingest") {
    if (!value.startsWith("sha256=")) {
      result.malformed = true;
      if (value.length === rules.mac_hex_length && HEX.test(value))
        findings.push(error("v1", "v1 is bare hex: the ingest scheme wants v1=sha256=<hex>. (Bare hex is the reward callback scheme.)"));
      else findings.push(error("v1", `v1 must start with "sha256=" (found "${value.slice(0, 12)}...").`));
      return mac;
    }
    hex = value.slice("sha256=".length);
  } else if (value.startsWith("sha256=")) {
    findings.push(error("v1", "v1 starts with sha256=: reward callbacks carry bare hex (v1=<hex>). Is this an ingest header? Switch the scheme."));
    result.malformed = true;
    return mac;
  }
  if (hex.length !== rules.mac_hex_length || !HEX.test(hex)) {
    result.malformed = true;
    if (BASE64.test(hex) && hex.length === 44) findings.push(error("v1", "v1 looks like base64: the MAC must be written as lower-case hex (64 characters)."));
    else if (!HEX.test(hex)) findings.push(error("v1", `v1 has characters that are not hex: "${hex.replace(/[0-9a-fA-F]/g, "").slice(0, 10)}".`));
    else findings.push(error("v1", `v1 has ${hex.length} hex characters; an HMAC-SHA256 has ${rules.mac_hex_length}.`));
    return mac;
  }
  if (hex !== hex.toLowerCase()) {
    if (scheme === "ingest") {
      result.malformed = true;
      findings.push(error("v1", "v1 has upper-case hex: hex must be lower-case (the contract reads upper case as a malformed header)."));
    } else {
      findings.push(warn("v1", "v1 has upper-case hex: the service always sends lower case; compare in lower case."));
    }
  }
  mac.hex = hex.toLowerCase();
  mac.upper = hex !== hex.toLowerCase();
  return mac;
}

/**
 * Checks a signature. `input`: {scheme, header, body, secret, nowSeconds, serverId?}. Returns
 * {scheme, canonical, canonicalBytes, expectedHex, expectedHeader, verdict, answer, refusal, findings, engine}.
 * `verdict` is one of malformed | mismatch | stale | valid | refused | unverified (no secret given);
 * `answer` is what the ingest endpoint would reply (status and error text), null for callbacks.
 * `serverId` is the server being debugged: a callback whose body's `server_id` is another one is
 * `refused` even with a valid signature (the list signs every server's callbacks), and `refusal`
 * is what a receiver for `serverId` answers (the shipped receivers' 403 and text).
 */
export async function checkSignature(input, rules, engine) {
  const scheme = SCHEMES.includes(input.scheme) ? input.scheme : "ingest";
  const body = input.body ?? "";
  const secret = input.secret ?? "";
  const parsed = parseHeader(input.header ?? "", scheme, rules);
  const findings = [...parsed.findings];
  const canonical = parsed.tText === null ? null : `${parsed.tText}.${body}`;
  const report = {
    scheme,
    canonical,
    canonicalBytes: canonical === null ? 0 : new TextEncoder().encode(canonical).length,
    expectedHex: null,
    expectedHeader: null,
    verdict: "unverified",
    answer: null,
    refusal: null,
    findings,
    engine: engine.name,
  };

  findings.push(...checkBody(body, scheme, parsed, rules));
  const server = checkServer(body, scheme, input.serverId ?? "", rules);
  findings.push(...server.findings);
  findings.push(...checkSecret(secret, scheme));

  const stale = parsed.t !== null && Math.abs(input.nowSeconds - parsed.t) > rules.tolerance_seconds;
  if (parsed.t !== null) {
    const offBy = input.nowSeconds - parsed.t;
    if (Math.abs(parsed.t) > 1e11) findings.push(warn("t", `t=${parsed.tText} looks like milliseconds: t is Unix seconds.`));
    if (stale) {
      findings.push(
        scheme === "ingest"
          ? error(
              "t",
              `t is ${describeOffset(offBy)} the time checked against, outside the ±${rules.tolerance_seconds} s window: with a matching MAC the service answers 401 "${rules.texts.stale}". Check the signer's clock (NTP) and that t is set when signing, not reused.`,
            )
          : warn(
              "t",
              `t is ${describeOffset(offBy)} the time checked against. Receivers are advised to reject callbacks outside ±${rules.tolerance_seconds} s; a redelivered callback is signed afresh with a new t.`,
            ),
      );
    } else {
      findings.push(
        ok(
          "t",
          offBy === 0 ? "t equals the time checked against." : `t is ${describeOffset(offBy)} the time checked against: within ±${rules.tolerance_seconds} s.`,
        ),
      );
    }
  }

  if (parsed.malformed) {
    report.verdict = "malformed";
    if (scheme === "ingest") report.answer = { status: 400, error: rules.texts.malformed };
  }
  if (canonical === null || secret === "") {
    if (secret === "")
      findings.push(info("secret", "Add the secret to compute the expected signature. It stays in this page: nothing you type here is sent anywhere."));
    return finish(report, scheme);
  }

  const expectedHex = await engine.hex(secret, canonical);
  report.expectedHex = expectedHex;
  report.expectedHeader =
    scheme === "ingest" ? `t=${parsed.tText},v1=sha256=${expectedHex}${parsed.kid ? `,kid=${parsed.kid}` : ""}` : `t=${parsed.tText},v1=${expectedHex}`;
  const candidates = parsed.macs.filter((m) => m.hex !== null);
  const matchIndex = candidates.findIndex((m) => m.hex === expectedHex);
  if (matchIndex >= 0) {
    const match = candidates[matchIndex];
    findings.push(
      ok("mac", candidates.length > 1 ? `v1 #${matchIndex + 1} matches HMAC-SHA256(secret, "<t>.<body>").` : `v1 matches HMAC-SHA256(secret, "<t>.<body>").`),
    );
    if (match.upper && scheme === "ingest") findings.push(error("v1", "The MAC is right but written in upper case: send it in lower case."));
    if (!parsed.malformed) report.verdict = stale ? "stale" : "valid";
    // The receiver checks the server after the signature: a valid one for another server is refused.
    if (report.verdict === "valid" && server.refusal) {
      report.verdict = "refused";
      report.refusal = server.refusal;
    }
    if (scheme === "ingest" && !parsed.malformed) report.answer = stale ? { status: 401, error: rules.texts.stale } : null;
    if (parsed.kid) findings.push(info("kid", `kid=${parsed.kid}: the service tries only the secret with this key id, so it must be this secret's kid.`));
    return finish(report, scheme);
  }
  if (candidates.length > 0) {
    findings.push(
      error("mac", `No v1 matches. Expected ${expectedHex}${candidates.length === 1 ? `, got ${candidates[0].hex}` : ` (got ${candidates.length} others)`}.`),
    );
    findings.push(...(await explainMismatch({ secret, body, tText: parsed.tText, scheme, candidates, engine })));
    if (!parsed.malformed) {
      report.verdict = "mismatch";
      // The gateway checks the MAC before the clock, so a wrong MAC is bad_signature even when t is stale.
      if (scheme === "ingest") report.answer = { status: 401, error: rules.texts.bad_signature };
    }
  }
  return finish(report, scheme);
}

function finish(report, scheme) {
  if (scheme === "ingest" && report.verdict === "valid")
    report.findings.push(ok("header", "The service would accept this signature (the body's fields are checked next)."));
  return report;
}

/**
 * Tries the usual mistakes one by one; each hit names the mistake. Who made it depends on the scheme: a referral
 * event is signed by the game server's backend (the sender may have signed the wrong bytes or with the wrong key),
 * while a reward callback is signed by the service over the raw bytes with the whole whsec_ string, so there a
 * hit means the body or secret pasted here (or what the owner's receiver computed) differs from what was sent.
 */
async function explainMismatch({ secret, body, tText, scheme, candidates, engine }) {
  const seen = new Set(candidates.map((m) => m.hex));
  const ingest = scheme === "ingest";
  /** The callback scheme's v1 never comes from these mistakes: the service signs "<t>.<raw body>" with the whole secret. */
  const notTheService = (what, fix) =>
    `This v1 is ${what}. The service never signs that way, so this value was computed by other code (your receiver?): ${fix}`;
  const tries = [
    {
      key: secret,
      message: body,
      says: ingest
        ? 'They signed the body alone. Sign "<t>.<body>": t, a dot, then the raw body.'
        : notTheService("HMAC(secret, body) over the body alone", 'compute it over "<t>.<raw body>": t, a dot, then the raw body.'),
    },
    {
      key: secret,
      message: `${tText}${body}`,
      says: ingest
        ? 'They signed "<t><body>" without the dot between t and the body.'
        : notTheService('HMAC over "<t><body>" without the dot between t and the body', 'compute it over "<t>.<raw body>".'),
    },
    {
      key: secret,
      message: `${body}.${tText}`,
      says: ingest ? 'They signed "<body>.<t>": t comes first.' : notTheService('HMAC over "<body>.<t>"', 't comes first: "<t>.<raw body>".'),
    },
  ];
  if (body.endsWith("\n"))
    tries.push({
      key: secret,
      message: `${tText}.${body.replace(/\r?\n$/, "")}`,
      says: ingest
        ? "They signed the body without its final newline: the bytes sent and the bytes signed must be the same."
        : "The body pasted here ends with a newline that the service did not send (added when it was copied or logged): verify over the raw request bytes exactly as received.",
    });
  else
    tries.push({
      key: secret,
      message: `${tText}.${body}\n`,
      says: ingest
        ? "They signed the body with a final newline that the request does not carry (or the newline was lost on the way)."
        : "The bytes the service sent end with a newline that the body pasted here lacks (lost when it was copied or logged): verify over the raw request bytes exactly as received.",
    });
  if (body.includes("\r\n"))
    tries.push({
      key: secret,
      message: `${tText}.${body.replace(/\r\n/g, "\n")}`,
      says: ingest
        ? "They signed the body with \\n line ends; it was sent (or pasted) with \\r\\n."
        : "The service sent \\n line ends; the body pasted here has \\r\\n (changed when it was copied): verify over the raw request bytes.",
    });
  const reserialised = reserialise(body);
  if (reserialised !== null && reserialised !== body)
    tries.push({
      key: secret,
      message: `${tText}.${reserialised}`,
      says: ingest
        ? "They signed a re-serialised body (JSON.stringify of the parsed object): sign and send the exact same bytes."
        : "The service signed the raw bytes it sent, and the body pasted here is a re-serialised copy of them (the MAC matches JSON.stringify of its parsed object): your receiver (or the log you copied from) parsed the JSON and wrote it again. Verify over the raw request body, before parsing it.",
    });
  if (secret !== secret.trim())
    tries.push({
      key: secret.trim(),
      message: `${tText}.${body}`,
      says: "The secret pasted here has spaces or newlines around it; the MAC matches the trimmed secret.",
    });
  const prefix = /^(rsec_|whsec_)/.exec(secret);
  if (prefix)
    tries.push({
      key: secret.slice(prefix[1].length),
      message: `${tText}.${body}`,
      says: ingest
        ? `They keyed the HMAC with the secret without its "${prefix[1]}" prefix: the key is the whole string.`
        : notTheService(`keyed with the secret without its "${prefix[1]}" prefix`, `key the HMAC with the whole "${prefix[1]}..." string.`),
    });
  else {
    // The secret pasted here lacks the prefix of this scheme's secrets: the signer may have used the whole string.
    const expected = ingest ? "rsec_" : "whsec_";
    const trimmed = secret.trim();
    tries.push({
      key: `${expected}${trimmed}`,
      message: `${tText}.${body}`,
      says: `The secret pasted here has no "${expected}" prefix, and the MAC matches "${expected}" + it: the key is the whole secret string, prefix included. Paste it whole${ingest ? "" : ", and key your receiver's HMAC with the whole string too"}.`,
    });
  }
  if (secret.startsWith("whsec_")) {
    const decoded = decodeBase64(secret.slice("whsec_".length));
    if (decoded)
      tries.push({
        key: decoded,
        message: `${tText}.${body}`,
        says: ingest
          ? "They keyed the HMAC with the base64-decoded secret (the Standard Webhooks way). X-Service-Signature is keyed with the whole whsec_ string's bytes; only webhook-signature uses the decoded key."
          : "This v1 is keyed with the base64-decoded secret (the Standard Webhooks way), which the service uses only for webhook-signature: X-Service-Signature is keyed with the whole whsec_ string's bytes, so this value was computed by other code (your receiver?).",
      });
  }
  const hits = [];
  for (const attempt of tries) {
    const hex = await engine.hex(attempt.key, attempt.message);
    if (seen.has(hex)) hits.push(error("mac", attempt.says));
  }
  if (hits.length > 0) return hits;
  return [
    info(
      "mac",
      scheme === "ingest"
        ? "No common mistake explains it. Most likely another secret signed it (after a rotation, name the secret with kid=, or check which secret your backend loads), or the body bytes differ from what was signed: compare the canonical string below byte for byte."
        : "No common mistake explains it. Most likely another secret: during a rotation the header carries one v1 per active secret, newest first, so check against each. Otherwise the bytes differ: verify over the raw body before parsing it.",
    ),
  ];
}

function checkBody(body, scheme, parsed, rules) {
  const findings = [];
  if (body === "") {
    findings.push(warn("body", "The body is empty: paste the raw request body exactly as sent."));
    return findings;
  }
  if (body.charCodeAt(0) === 0xfeff)
    findings.push(
      error(
        "body",
        `The body starts with a byte-order mark (U+FEFF). It is part of the signed bytes, and the service answers 400 "${rules.texts.invalid_json}".`,
      ),
    );
  if (/\s$/.test(body)) findings.push(info("body", "The body ends with whitespace or a newline. The MAC covers it: sign exactly the bytes you send."));
  let json;
  try {
    json = JSON.parse(body);
  } catch (_) {
    // Failure policy: a body that is not JSON is reported, and its MAC is still checked.
    findings.push(
      scheme === "ingest"
        ? error("body", `The body is not valid JSON: the service answers 400 "${rules.texts.invalid_json}" (after the header checks).`)
        : warn("body", "The body is not valid JSON."),
    );
    return findings;
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    findings.push(
      scheme === "ingest"
        ? error("body", `The body is JSON but not an object: the service answers 400 "${rules.texts.invalid_json}".`)
        : warn("body", "The body is JSON but not an object."),
    );
    return findings;
  }
  if (scheme === "callback" && parsed.t !== null && "timestamp" in json && json.timestamp !== parsed.t) {
    findings.push(warn("body", `The body's timestamp (${String(json.timestamp)}) differs from t=${parsed.tText}: the service sends them equal.`));
  }
  return findings;
}

/**
 * The callback scheme's audience: the list signs every server's callbacks (public-key signatures with one
 * key pair for the whole list), so a valid signature proves the list sent a body, and only its `server_id`
 * proves it is for the server being debugged. Returns the findings and, on a mismatch, the receivers' refusal.
 */
function checkServer(body, scheme, serverId, rules) {
  if (scheme !== "callback") return { findings: [], refusal: null };
  const rule = "A valid signature proves the list sent it; only the server_id proves it is for you.";
  if (serverId === "") return { findings: [info("server_id", `Check that the body's server_id is your server's id. ${rule}`)], refusal: null };
  let json;
  try {
    json = JSON.parse(body);
  } catch (_) {
    // Failure policy: a body that is not JSON is reported by checkBody; there is no server_id to compare.
    return { findings: [], refusal: null };
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return { findings: [], refusal: null };
  if (json.server_id === serverId) return { findings: [ok("server_id", `server_id is ${serverId}: this callback is for your server.`)], refusal: null };
  const reason = rules.texts.server_mismatch.replace("{server_id}", serverId);
  const found = typeof json.server_id === "string" ? `the body's server_id is ${json.server_id}` : "the body has no server_id";
  return {
    findings: [error("server_id", `${reason} (${found}). ${rule} Your receiver must refuse it and pay nothing, as the shipped receivers do (403).`)],
    refusal: { status: 403, error: reason },
  };
}

function checkSecret(secret, scheme) {
  if (secret === "") return [];
  const findings = [];
  if (scheme === "ingest" && secret.startsWith("whsec_"))
    findings.push(warn("secret", "This is a callback secret (whsec_): referral events are signed with a referral secret (rsec_)."));
  if (scheme === "callback" && secret.startsWith("rsec_"))
    findings.push(warn("secret", "This is a referral secret (rsec_): callbacks are signed with the callback secret (whsec_)."));
  return findings;
}

function reserialise(body) {
  try {
    return JSON.stringify(JSON.parse(body));
  } catch (_) {
    // Failure policy: not JSON, so there is no re-serialised form to try.
    return null;
  }
}

function decodeBase64(text) {
  try {
    const binary = atob(text);
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch (_) {
    // Failure policy: not base64, so the Standard Webhooks key mistake cannot apply.
    return null;
  }
}

function describeOffset(seconds) {
  const abs = Math.abs(seconds);
  const amount =
    abs < 120 ? `${abs} s` : abs < 7200 ? `${Math.round(abs / 60)} min` : abs < 172800 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86400)} days`;
  return seconds > 0 ? `${amount} before` : `${amount} after`;
}

function cap(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

const finding = (level) => (part, message) => ({ level, part, message });
const ok = finding("ok");
const info = finding("info");
const warn = finding("warn");
const error = finding("error");
