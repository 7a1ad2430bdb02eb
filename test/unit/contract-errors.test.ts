import test from "ava";
import {
  atMostCharsText,
  CHECK_ERRORS,
  choiceText,
  CONTRACT_ERRORS,
  DASHBOARD_ERRORS,
  ERROR_TEXT,
  integerBetweenText,
  notNegativeText,
  oneOfText,
  REFERRAL_EVENTS,
  REFERRAL_STATES,
  requiredText,
  statusOf,
} from "../../services/shared/values/contract.js";
import { errorReply } from "../../gateway/http-errors.js";
import { openApiDocument } from "../../gateway/openapi.js";

const isHttpErrorStatus = (status: unknown) => typeof status === "number" && Number.isInteger(status) && status >= 400 && status <= 599;

test("every contract error kind has an HTTP error status and a non-empty text; check-written kinds a status", (t) => {
  for (const [kind, error] of Object.entries({ ...CONTRACT_ERRORS, ...DASHBOARD_ERRORS })) {
    t.true(isHttpErrorStatus(error.status), kind);
    t.true(typeof error.text === "string" && error.text.trim() !== "", kind);
  }
  for (const [kind, error] of Object.entries(CHECK_ERRORS)) t.true(isHttpErrorStatus(error.status), kind);
  t.deepEqual(Object.keys(ERROR_TEXT), Object.keys(CONTRACT_ERRORS));
});

test("errorReply builds {error} with the kind's status and text (the check's text for a check-written kind)", (t) => {
  for (const kind of Object.keys(CONTRACT_ERRORS) as Array<keyof typeof CONTRACT_ERRORS>) {
    t.deepEqual(errorReply(kind), { status: CONTRACT_ERRORS[kind].status, body: { error: CONTRACT_ERRORS[kind].text } }, kind);
  }
  t.deepEqual(errorReply("invalidField", "token is required"), { status: 400, body: { error: "token is required" } });
  t.deepEqual(errorReply("methodNotAllowed", { headers: { allow: "GET" } }), { status: 405, body: { error: "method not allowed" }, headers: { allow: "GET" } });
  t.deepEqual(errorReply("invalidTransition", { fields: { from: "clicked", event: "qualified" } }).body, {
    error: "invalid state transition",
    from: "clicked",
    event: "qualified",
  });
  t.is(statusOf("conflict"), 409);
});

type Examples = Record<string, { value: unknown }>;
const doc = openApiDocument as unknown as {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { examples?: Examples }> }> }>>;
  components: { schemas: Record<string, { properties?: Record<string, { enum?: string[]; const?: string; properties?: unknown }> }> };
};

test("openapi's error examples equal the contract table: a contract text appears only under its status, and every 4xx/5xx example is a contract text or a field text", (t) => {
  const statusByText = new Map<string, number>(Object.values(CONTRACT_ERRORS).map((e) => [e.text, e.status]));
  let contractExamples = 0;
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue;
        for (const [name, example] of Object.entries(response.content?.["application/json"]?.examples ?? {})) {
          const error = (example.value as { error?: unknown }).error;
          t.is(typeof error, "string", `${method} ${path} ${status} ${name}`);
          const expected = statusByText.get(error as string);
          if (expected === undefined) {
            // A field error: 400 naming the field (its text is written by the failing check).
            t.is(Number(status), CHECK_ERRORS.invalidField.status, `${method} ${path} ${status} ${name}: ${String(error)}`);
            continue;
          }
          t.is(Number(status), expected, `${method} ${path} ${status} ${name}`);
          contractExamples++;
        }
      }
    }
  }
  t.true(contractExamples >= 20, `only ${contractExamples} contract examples found`);
});

test("openapi's event and state enums are the contract's lists", (t) => {
  const transition = doc.components.schemas.TransitionErrorResponse?.properties;
  t.deepEqual(transition?.from?.enum, [...REFERRAL_STATES]);
  t.deepEqual(transition?.event?.enum, [...REFERRAL_EVENTS]);
  t.is(transition?.error?.const, ERROR_TEXT.invalidTransition);
  const json = JSON.stringify(openApiDocument);
  for (const list of json.matchAll(/"enum":\[("(?:registered|qualified|reversed|clicked)"(?:,"[a-z]+")*)\]/g)) {
    const values = JSON.parse(`[${list[1]}]`) as string[];
    t.true(
      values.every((v) => (REFERRAL_STATES as readonly string[]).includes(v)),
      list[0],
    );
  }
});

test("the field text builders write the texts the checks answer with (the contract's event text is the enum rule's text)", (t) => {
  t.is(oneOfText("event", REFERRAL_EVENTS), ERROR_TEXT.badEvent);
  t.is(requiredText("server_id"), "server_id is required");
  t.is(notNegativeText("limit"), "limit must not be negative");
  t.is(choiceText("verdict", ["counted", "cooldown", "fraud"]), "verdict must be counted, cooldown or fraud");
  t.is(integerBetweenText("limit", 1, 500), "limit must be an integer between 1 and 500");
  t.is(atMostCharsText("query", 200), "query must be at most 200 characters");
});
