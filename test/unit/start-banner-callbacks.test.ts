/**
 * The all-in-one banner says whether insecure callbacks are allowed (scripts/lib/callbacks-notice.ts,
 * printed by scripts/start.ts under the admin token line).
 */
import test from "ava";
import { readFileSync } from "node:fs";
import { insecureCallbacksNotice } from "../../scripts/lib/callbacks-notice.js";

test("ALLOW_INSECURE_CALLBACKS=true: the banner says insecure URLs are allowed, for development only", (t) => {
  t.regex(
    insecureCallbacksNotice(true),
    /^ {2}Callbacks: +INSECURE URLs ALLOWED \(ALLOW_INSECURE_CALLBACKS=true\): http, localhost and private addresses .*development only$/,
  );
});

test("the default: the banner says callbacks go to public https addresses only, and how to change it", (t) => {
  t.regex(insecureCallbacksNotice(false), /^ {2}Callbacks: +https to public addresses only; set ALLOW_INSECURE_CALLBACKS=true/);
});

test("scripts/start.ts prints the notice with its own setting", (t) => {
  const start = readFileSync(new URL("../../scripts/start.ts", import.meta.url), "utf8");
  t.regex(start, /insecureCallbacksNotice\(opts\.allowInsecureCallbacks\)/);
  t.regex(start, /allowInsecureCallbacks: config\.dispatch\.allowInsecureCallbacks,\n\s*\}\);/);
});
