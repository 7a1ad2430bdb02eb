// Types of signature-check.js (plain JavaScript served to the browser; imported by the unit tests).
export type Scheme = "ingest" | "callback";
export declare const SCHEMES: Scheme[];

/** GET /dashboard/signature-rules.json: the gateway's own constants. */
export interface SignatureRules {
  tolerance_seconds: number;
  t_pattern: string;
  kid_pattern: string;
  mac_hex_length: number;
  texts: { malformed: string; bad_signature: string; stale: string; invalid_json: string; server_mismatch: string };
}

export interface MacEngine {
  name: "webcrypto" | "plain-js";
  hex(key: string | Uint8Array, message: string): Promise<string>;
}

export interface Finding {
  level: "ok" | "info" | "warn" | "error";
  part: "header" | "t" | "v1" | "kid" | "body" | "server_id" | "secret" | "mac";
  message: string;
}

export interface ParsedHeader {
  header: string;
  t: number | null;
  tText: string | null;
  macs: Array<{ text: string; hex: string | null; upper?: boolean }>;
  kid: string | null;
  malformed: boolean;
  findings: Finding[];
}

export interface SignatureReport {
  scheme: Scheme;
  canonical: string | null;
  canonicalBytes: number;
  expectedHex: string | null;
  expectedHeader: string | null;
  verdict: "malformed" | "mismatch" | "stale" | "valid" | "refused" | "unverified";
  answer: { status: number; error: string } | null;
  /** Callbacks: what a receiver for the server being debugged answers to a valid signature on another server's body. */
  refusal: { status: number; error: string } | null;
  findings: Finding[];
  engine: MacEngine["name"];
}

export declare function createMacEngine(subtle: SubtleCrypto | undefined | null): MacEngine;
export declare function parseHeader(header: string, scheme: Scheme, rules: SignatureRules): ParsedHeader;
export declare function checkSignature(
  input: { scheme: Scheme; header: string; body: string; secret: string; nowSeconds: number; serverId?: string },
  rules: SignatureRules,
  engine: MacEngine,
): Promise<SignatureReport>;
