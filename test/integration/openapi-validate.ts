/**
 * Validates real bodies against the published OpenAPI document (gateway/openapi.ts)
 * with Ajv's JSON Schema 2020-12 validator, so tests prove the running system
 * matches the document integrators read. Used by the gateway's tests (responses)
 * and by the hearts/delivery tests (reward callback bodies and headers).
 */
import { isUuid } from "../../services/shared/values/ids.js";
import Ajv2020 from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv/dist/2020.js";
import { openApiDocument } from "../../gateway/openapi.js";

/** The outcome of a validation: `errors` is empty when `valid`. */
export interface ValidationResult {
  valid: boolean;
  errors: string[];
}

const DOC_ID = "https://referral.invalid/openapi/referral.json";
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A loose view of the document for lookups (the exported object is deeply readonly). */
type Json = Record<string, unknown>;
const doc = openApiDocument as unknown as Json;

// CJS interop: the module object is the class and also carries it as `.default`, which is what the types name.
const ajv = new Ajv2020.default({ allErrors: true, strict: true, strictTypes: false });
ajv.addFormat("uuid", { type: "string", validate: isUuid });
ajv.addFormat("date-time", {
  type: "string",
  validate: (value: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value) && !Number.isNaN(Date.parse(value)),
});
ajv.addFormat("uri", { type: "string", validate: (value: string) => URL.canParse(value) });
ajv.addFormat("int64", { type: "number", validate: (value: number) => Number.isInteger(value) && BigInt(value) >= INT64_MIN && BigInt(value) <= INT64_MAX });
ajv.addFormat("int32", { type: "number", validate: (value: number) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 });
// OpenAPI keywords around the schemas: annotations for Ajv, so `#/components/...` pointers resolve.
ajv.addKeyword({ keyword: "components" });
ajv.addSchema({ $id: DOC_ID, components: doc.components as Json }, DOC_ID);

const compiled = new Map<string, ValidateFunction>();

/** Compiles a schema taken from the document; its `#/components/...` refs point into the document. */
function compile(key: string, schema: unknown): ValidateFunction {
  const cached = compiled.get(key);
  if (cached) return cached;
  const rewritten = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`)) as Json;
  const validate = ajv.compile(rewritten);
  compiled.set(key, validate);
  return validate;
}

function run(validate: ValidateFunction, body: unknown): ValidationResult {
  const valid = validate(body) as boolean;
  const errors = valid
    ? []
    : (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? "invalid"}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`);
  return { valid, errors };
}

/** Follows a `$ref` to `#/components/...` inside the document (responses, parameters, headers). */
function deref(node: unknown): Json | undefined {
  if (typeof node !== "object" || node === null) return undefined;
  const ref = (node as Json).$ref;
  if (typeof ref !== "string") return node as Json;
  let current: unknown = doc;
  for (const part of ref.replace(/^#\//, "").split("/")) current = (current as Json | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  return deref(current);
}

/** The operation at `path` (a `paths` key) or, failing that, a `webhooks` name. */
function operationOf(path: string, method: string): Json | undefined {
  const item = ((doc.paths as Json)[path] ?? (doc.webhooks as Json)[path]) as Json | undefined;
  return item?.[method.toLowerCase()] as Json | undefined;
}

/**
 * Validates a response `body` (already parsed JSON; `undefined` for an empty body)
 * for `status` of the operation `method path` against the document. A status the
 * document does not list (nor its `4XX`-style range, nor `default`) is invalid,
 * and so is a body where the document declares none (or none where it declares one).
 */
export function validateAgainstOpenApi(path: string, method: string, status: number | string, body: unknown): ValidationResult {
  const operation = operationOf(path, method);
  if (!operation) return { valid: false, errors: [`no operation ${method.toUpperCase()} ${path} in the document`] };
  const responses = operation.responses as Json;
  const code = String(status);
  const response = deref(responses[code] ?? responses[`${code[0]}XX`] ?? responses.default);
  if (!response) return { valid: false, errors: [`status ${code} is not documented for ${method.toUpperCase()} ${path}`] };
  const schema = ((response.content as Json | undefined)?.["application/json"] as Json | undefined)?.schema;
  if (schema === undefined) {
    return body === undefined || body === "" ? { valid: true, errors: [] } : { valid: false, errors: [`status ${code} documents no body`] };
  }
  if (body === undefined) return { valid: false, errors: [`status ${code} documents a JSON body but none was sent`] };
  return run(compile(`response ${method} ${path} ${code}`, schema), body);
}

/**
 * Validates a `text/plain` response (the raw text, exactly as received) for `status` of `method path`
 * against the document's `text/plain` schema: a status or a media type the document does not list is invalid.
 */
export function validateTextAgainstOpenApi(path: string, method: string, status: number | string, text: string): ValidationResult {
  const operation = operationOf(path, method);
  if (!operation) return { valid: false, errors: [`no operation ${method.toUpperCase()} ${path} in the document`] };
  const response = deref((operation.responses as Json)[String(status)]);
  if (!response) return { valid: false, errors: [`status ${status} is not documented for ${method.toUpperCase()} ${path}`] };
  const schema = ((response.content as Json | undefined)?.["text/plain"] as Json | undefined)?.schema;
  if (schema === undefined) return { valid: false, errors: [`status ${status} documents no text/plain body`] };
  return run(compile(`text ${method} ${path} ${status}`, schema), text);
}

/**
 * Checks a page answer (HTML) of `method path` against the document: the status is documented for the operation and
 * its response lists `contentType` (the media type without parameters) as a content type.
 */
export function validatePageAgainstOpenApi(path: string, method: string, status: number | string, contentType: string): ValidationResult {
  const operation = operationOf(path, method);
  if (!operation) return { valid: false, errors: [`no operation ${method.toUpperCase()} ${path} in the document`] };
  const response = deref((operation.responses as Json)[String(status)]);
  if (!response) return { valid: false, errors: [`status ${status} is not documented for ${method.toUpperCase()} ${path}`] };
  const mediaType = contentType.split(";")[0]!.trim();
  const listed = Object.keys((response.content as Json | undefined) ?? {});
  return listed.includes(mediaType)
    ? { valid: true, errors: [] }
    : { valid: false, errors: [`status ${status} of ${method.toUpperCase()} ${path} documents ${listed.join(", ") || "no body"}, not ${mediaType}`] };
}

/** Validates a request body of `method path` (a `paths` key or a `webhooks` name) against the document. */
export function validateRequestBody(path: string, method: string, body: unknown): ValidationResult {
  const operation = operationOf(path, method);
  const schema = (((operation?.requestBody as Json | undefined)?.content as Json | undefined)?.["application/json"] as Json | undefined)?.schema;
  if (schema === undefined) return { valid: false, errors: [`no JSON request body for ${method.toUpperCase()} ${path}`] };
  return run(compile(`request ${method} ${path}`, schema), body);
}

/**
 * Validates a reward callback body against `webhooks.heartCallback` (HeartEvent).
 * Stricter than the published schema on one point: a field the contract's table does
 * not list is reported, so a sender that drifts from the contract fails its tests.
 */
export function validateHeartEvent(body: unknown): ValidationResult {
  const result = validateRequestBody("heartCallback", "post", body);
  const known = Object.keys(((doc.components as Json).schemas as Json & { HeartEvent: { properties: Json } }).HeartEvent.properties);
  const extra = typeof body === "object" && body !== null ? Object.keys(body).filter((k) => !known.includes(k)) : [];
  const errors = [...result.errors, ...extra.map((k) => `/ has a field the contract does not list: ${k}`)];
  return { valid: errors.length === 0, errors };
}

/**
 * Validates a payload-version-2 reward callback body against `webhooks.heartCallbackV2` (HeartEventV2),
 * as strictly as validateHeartEvent: a field neither HeartEvent nor the version-2 additions list is reported.
 */
export function validateHeartEventV2(body: unknown): ValidationResult {
  const result = validateRequestBody("heartCallbackV2", "post", body);
  const schemas = (doc.components as Json).schemas as Json & {
    HeartEvent: { properties: Json };
    HeartEventV2: { allOf: [unknown, { properties: Json }] };
  };
  const known = [...Object.keys(schemas.HeartEvent.properties), ...Object.keys(schemas.HeartEventV2.allOf[1].properties)];
  const extra = typeof body === "object" && body !== null ? Object.keys(body).filter((k) => !known.includes(k)) : [];
  const errors = [...result.errors, ...extra.map((k) => `/ has a field version 2 does not list: ${k}`)];
  return { valid: errors.length === 0, errors };
}

/**
 * Validates a reward callback's headers (names case-insensitive) against the header
 * parameters of `webhooks.heartCallback`: required ones present, each matching its schema.
 */
export function validateHeartCallbackHeaders(headers: Record<string, string | undefined> | Headers): ValidationResult {
  const get = (name: string) =>
    headers instanceof Headers ? (headers.get(name) ?? undefined) : Object.entries(headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  const errors: string[] = [];
  for (const node of (operationOf("heartCallback", "post")?.parameters as unknown[]) ?? []) {
    const param = deref(node);
    if (param?.in !== "header") continue;
    const name = String(param.name);
    const value = get(name);
    if (value === undefined) {
      if (param.required === true) errors.push(`header ${name} is required`);
      continue;
    }
    errors.push(...run(compile(`header heartCallback ${name}`, param.schema), value).errors.map((e) => `header ${name}: ${e}`));
  }
  return { valid: errors.length === 0, errors };
}
