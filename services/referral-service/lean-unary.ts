import type http2 from "node:http2";
import { create, fromBinary, isMessage, toBinary, type DescMethod, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type ConnectRouter,
  type HandlerContext,
  type Interceptor,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
// PRIVATE API, as in services/shared/unary-transport.ts (CONNECT_ES_VERIFIED_VERSION there; test/unit/unary-transport.test.ts
// fails when the installed connect-es differs): the status of a code and the JSON error body, as Connect's own handler writes them.
import { codeToHttpStatus, errorToJsonBytes, protocolVersion, trailerMux } from "@connectrpc/connect/protocol-connect";

/** A unary method's implementation as the router received it. */
type UnaryImpl = (request: unknown, context: HandlerContext) => Promise<unknown> | unknown;

/** A Node handler of the HTTP/2 compat API: (request, response), as connectNodeAdapter returns. */
type NodeHandler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;

/**
 * The lean server path of the hottest unary RPCs (ApplyEvent, ResolveSigningKeys: one call per ingested event;
 * CheckVote, ClaimVote: one call per plugin check or claim),
 * the counterpart of the gateway's lean client (services/shared/unary-transport.ts). A plain Connect unary call in
 * binary - `POST`, `content-type: application/proto`, a `content-length` within `readMaxBytes`, no compression, a
 * well-formed `connect-timeout-ms` when any - is answered here, through THE SAME interceptors (request id, logging,
 * metrics, the error table, the access check) and THE SAME implementation the router holds, with the same wire answer
 * as Connect's own handler: 200 `application/proto`, or the code's HTTP status with the JSON error body and the error's
 * metadata as headers. What it leaves out is Connect's per-call machinery (a deadline signal and linked abort
 * controllers aborted with an exception at the end of every call, async-iterable bodies, a URL parse): most of the
 * referral service's CPU per forwarded event (issue 22). Every other request - another method, JSON, gRPC, gRPC-Web,
 * GET, compression, no length - goes to Connect's handler unchanged.
 *
 * The implementations are recorded while the routes register them on Connect's router (`recordRoutes`), so there
 * is one implementation per method (and one ApplyEvent queue), whichever path a call takes. The handler's context
 * has no deadline signal: the lean methods do not read it (the caller's own deadline still ends the call for it).
 */
export interface LeanUnary {
  /** Wraps `routes` so the lean methods' implementations are recorded as they are registered on Connect's router. */
  recordRoutes(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void;
  /** The request handler: the lean path for the lean methods, `fallback` (Connect's handler) for everything else. */
  handler(fallback: NodeHandler): NodeHandler;
}

/** Creates the lean path of `methods` (see LeanUnary). */
export function createLeanUnary(opts: { methods: readonly DescMethodUnary[]; interceptors: readonly Interceptor[]; readMaxBytes: number }): LeanUnary {
  const byPath = new Map<string, { method: DescMethodUnary; impl?: UnaryImpl }>();
  for (const method of opts.methods) byPath.set(`/${method.parent.typeName}/${method.name}`, { method });

  const record = (service: DescService, impl: Record<string, unknown>) => {
    for (const method of service.methods) {
      const entry = byPath.get(`/${service.typeName}/${method.name}`);
      const fn = impl[method.localName];
      if (entry !== undefined && typeof fn === "function") entry.impl = (fn as UnaryImpl).bind(impl);
    }
  };

  return {
    recordRoutes: (routes) => (router) =>
      routes({
        get handlers() {
          return router.handlers;
        },
        service(service, impl, options) {
          record(service, impl as Record<string, unknown>);
          return router.service(service, impl, options);
        },
        rpc(method: DescMethod, impl: unknown, options?: unknown) {
          const entry = byPath.get(`/${method.parent.typeName}/${method.name}`);
          if (entry !== undefined && typeof impl === "function") entry.impl = impl as UnaryImpl;
          return (router.rpc as (m: unknown, i: unknown, o: unknown) => ConnectRouter)(method, impl, options);
        },
      } as ConnectRouter),
    handler: (fallback) => (req, res) => {
      const entry = req.method === "POST" ? byPath.get(req.url) : undefined;
      const impl = entry?.impl;
      if (entry === undefined || impl === undefined || !isPlainBinaryCall(req.headers, opts.readMaxBytes)) {
        fallback(req, res);
        return;
      }
      serveLean(req, res, entry.method, impl, opts.interceptors);
    },
  };
}

/** `connect-timeout-ms` as Connect accepts it (1-10 digits); anything else is left to Connect's own parse and error. */
const TIMEOUT_SHAPE = /^\d{1,10}$/;

/** True for a unary Connect call in binary that the lean path answers exactly as Connect would. */
function isPlainBinaryCall(headers: http2.IncomingHttpHeaders, readMaxBytes: number): boolean {
  if (headers["content-type"] !== "application/proto") return false;
  const encoding = headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") return false;
  const version = headers["connect-protocol-version"];
  if (version !== undefined && version !== protocolVersion) return false;
  const timeout = headers["connect-timeout-ms"];
  if (timeout !== undefined && (typeof timeout !== "string" || !TIMEOUT_SHAPE.test(timeout))) return false;
  const length = headers["content-length"];
  if (length === undefined || !/^\d+$/.test(length)) return false;
  return Number(length) <= readMaxBytes;
}

function serveLean(
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  method: DescMethodUnary,
  impl: UnaryImpl,
  interceptors: readonly Interceptor[],
): void {
  const chunks: Buffer[] = [];
  let received = 0;
  const promised = Number(req.headers["content-length"]);
  req.on("data", (chunk: Buffer) => {
    received += chunk.byteLength;
    // More than promised is refused below (as Connect does); what is past the promise is not kept.
    if (received <= promised) chunks.push(chunk);
  });
  // Failure policy: a request stream that fails before its end has no one left to answer; the stream is gone.
  req.on("error", () => {});
  req.on("end", () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    void answer(req, res, method, impl, interceptors, body, received);
  });
}

async function answer(
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  method: DescMethodUnary,
  impl: UnaryImpl,
  interceptors: readonly Interceptor[],
  body: Buffer,
  received: number,
): Promise<void> {
  const header = new Headers();
  for (const name in req.headers) {
    if (name.startsWith(":")) continue;
    const value = req.headers[name];
    if (Array.isArray(value)) for (const v of value) header.append(name, v);
    else if (value !== undefined) header.append(name, value);
  }
  const context: HandlerContext = {
    method,
    service: method.parent,
    requestMethod: "POST",
    protocolName: "connect",
    url: `http://${req.headers[":authority"] ?? "localhost"}${req.url}`,
    timeoutMs: () => undefined,
    signal: new AbortController().signal,
    requestHeader: header,
    responseHeader: new Headers({ "content-type": "application/proto" }),
    responseTrailer: new Headers(),
    values: createContextValues(),
  };
  let status = 200;
  let payload: Uint8Array;
  try {
    const promised = Number(req.headers["content-length"]);
    if (received !== promised) throw new ConnectError(`protocol error: promised ${promised} bytes, received ${received}`, Code.InvalidArgument);
    let input: unknown;
    try {
      input = fromBinary(method.input, body);
    } catch (e) {
      // Failure policy: Connect's own answer to an undecodable message (its binary serialization's error).
      throw new ConnectError(`parse binary: ${e instanceof Error ? e.message : String(e)}`, Code.Internal);
    }
    const last = async (request: UnaryRequest): Promise<UnaryResponse> => {
      const output = await impl(request.message, {
        ...context,
        service: request.service,
        requestHeader: request.header,
        signal: request.signal,
        values: request.contextValues,
      });
      return {
        stream: false,
        service: method.parent,
        method,
        header: context.responseHeader,
        trailer: context.responseTrailer,
        message: isMessage(output, method.output) ? output : create(method.output, output as never),
      };
    };
    let next = last as (request: UnaryRequest) => Promise<UnaryResponse>;
    for (let i = interceptors.length - 1; i >= 0; i--) next = (interceptors[i] as Interceptor)(next as never) as typeof next;
    const response = await next({
      stream: false,
      service: method.parent,
      method,
      requestMethod: "POST",
      url: context.url,
      signal: context.signal,
      header,
      contextValues: context.values,
      message: input,
    } as UnaryRequest);
    copyHeaders(response.header, context.responseHeader);
    copyHeaders(response.trailer, context.responseTrailer);
    payload = toBinary(method.output, response.message as never);
  } catch (e) {
    // Failure policy: as Connect's handler - a ConnectError is answered with its code, anything else as `internal error`.
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    status = codeToHttpStatus(error.code);
    context.responseHeader.set("content-type", "application/json");
    error.metadata.forEach((value, key) => context.responseHeader.set(key, value));
    payload = errorToJsonBytes(error, {});
  }
  const out = trailerMux(context.responseHeader, context.responseTrailer);
  out.set("content-length", String(payload.byteLength));
  const headers: Record<string, string> = {};
  out.forEach((value, name) => {
    headers[name] = value;
  });
  // Failure policy: a caller gone before the answer (its stream reset) simply gets none.
  if (res.stream.destroyed) return;
  res.writeHead(status, headers);
  res.end(payload);
}

function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const key of [...to.keys()]) to.delete(key);
  from.forEach((value, key) => to.set(key, value));
}
