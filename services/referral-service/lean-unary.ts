import type http2 from "node:http2";
import { create, fromBinary, isMessage, toBinary, type DescMethod, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type ConnectRouter,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
// PRIVATE API: connect-es marks these helpers "@private Internal code, does not follow semantic versioning". They keep
// the lean path's options, deadline and wire answer identical to Connect's own unary handler; any release may change or
// drop them. LEAN_UNARY_PRIVATE_HELPERS names them, LEAN_UNARY_VERIFIED_CONNECT_ES_VERSION is the version they were
// verified against, and test/unit/lean-unary.test.ts fails when the installed version differs or one is missing.
import { createDeadlineSignal, createLinkedAbortController, validateUniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorToJsonBytes, parseTimeout, protocolVersion, trailerMux } from "@connectrpc/connect/protocol-connect";
import { connectNodeAdapter, type ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

/**
 * The @connectrpc/connect and @connectrpc/connect-node version the lean path was checked against. On an upgrade,
 * re-check: the helpers in LEAN_UNARY_PRIVATE_HELPERS (signatures and behaviour), Connect's unary handler
 * (protocol-connect/handler-factory.ts: its check order, the context it builds, its error answer), how the router
 * merges a service's options into its own (router.ts `whichProtocols`) and how connectNodeAdapter maps paths; then
 * run test/unit/lean-unary.test.ts and test/integration/referral-service-lean-unary.test.ts and raise this constant.
 */
export const LEAN_UNARY_VERIFIED_CONNECT_ES_VERSION = "2.1.1";

/** The private connect-es helpers this file imports, by module (the version test checks each is still exported). */
export const LEAN_UNARY_PRIVATE_HELPERS = {
  "@connectrpc/connect/protocol": ["createDeadlineSignal", "createLinkedAbortController", "validateUniversalHandlerOptions"],
  "@connectrpc/connect/protocol-connect": ["codeToHttpStatus", "errorToJsonBytes", "parseTimeout", "protocolVersion", "trailerMux"],
} as const;

/** A unary method's implementation as the router received it. */
type UnaryImpl = (request: unknown, context: HandlerContext) => Promise<unknown> | unknown;

/** A Node handler of the HTTP/2 compat API: (request, response), as connectNodeAdapter returns. */
type NodeHandler = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;

/** The handler options one method is served with, after the router merged the service's own options into its own. */
type HandlerOptions = ReturnType<typeof validateUniversalHandlerOptions>;

/** A lean method as registered on the router: its implementation and the options Connect's handler serves it with. */
interface LeanRoute {
  method: DescMethodUnary;
  impl: UnaryImpl;
  opt: HandlerOptions;
}

/** Options of createLeanUnaryAdapter: connectNodeAdapter's, and the methods the lean path answers. */
export interface LeanUnaryOptions extends ConnectNodeAdapterOptions {
  /** The unary methods answered on the lean path (a plain Connect call in binary); every other call goes to Connect. */
  leanMethods: readonly DescMethodUnary[];
}

/**
 * The lean server path of the hottest unary RPCs (ApplyEvent, ResolveSigningKeys: one call per ingested event;
 * CheckVote, ClaimVote: one call per plugin check or claim),
 * the counterpart of the gateway's lean client (services/shared/rpc/unary-transport.ts). Returns connectNodeAdapter's
 * handler for `options`, in front of which a plain Connect unary call in binary to a lean method - `POST`,
 * `content-type: application/proto`, a `content-length` within `readMaxBytes`, sent uncompressed - is answered
 * here, through THE SAME interceptors (request id, logging, metrics, the error table, the access check) and THE SAME
 * implementation the router holds, with the same wire answer as Connect's own handler: 200 `application/proto`, or
 * the code's HTTP status with the JSON error body and the error's metadata as headers, compressed as Connect compresses
 * it (a compression the caller accepts, from `compressMinBytes`).
 *
 * The deadline is Connect's: `connect-timeout-ms` is parsed as Connect parses it (an invalid value, or one above
 * `maxTimeoutMs`, is refused `invalid_argument`), and the handler context's `signal` aborts with Connect's
 * `deadline_exceeded` error when it passes, so an implementation that stops on its signal is answered
 * `deadline_exceeded` (504) exactly as by Connect's handler (one that ignores it answers late, as there too).
 *
 * What it leaves out is Connect's per-call machinery that changes no answer: async-iterable bodies, a URL parse, a
 * signal linked to the request stream, and the abort with an exception at the end of every call; without a deadline
 * (or `shutdownSignal`) the context's signal is one that never aborts. That machinery was most of the referral
 * service's CPU per forwarded event (issue 22). Every other request - another method, JSON, gRPC, gRPC-Web, GET,
 * compression, no length, a missing protocol version header the options require - goes to Connect's handler unchanged.
 *
 * The implementations and options are recorded while `options.routes` registers them on Connect's router, through
 * its whole interface (`service` and `rpc`, chained or not, with their per-service options merged into the router's
 * as the router merges them; the last registration of a path wins, as in connectNodeAdapter), so there is one
 * implementation per method (and one ApplyEvent queue) and one set of interceptors and limits, whichever path a call takes.
 */
export function createLeanUnaryAdapter(options: LeanUnaryOptions): NodeHandler {
  const { leanMethods, ...adapterOptions } = options;
  const prefix = adapterOptions.requestPathPrefix ?? "";
  const pathOf = (service: DescService, name: string) => `${prefix}/${service.typeName}/${name}`;
  const lean = new Set(leanMethods.map((method) => pathOf(method.parent, method.name)));
  const routes = new Map<string, LeanRoute>();
  // The object connectNodeAdapter receives: it sets its defaults there (acceptCompression: gzip, br) before it runs the
  // routes, so the router's options are read from it at the first registration.
  const connectOptions: ConnectNodeAdapterOptions = { ...adapterOptions, routes: (router) => adapterOptions.routes(recorderOf(router)) };
  let routerOptions: HandlerOptions | undefined;
  const serveOptions = (own: (Partial<HandlerOptions> & { connect?: boolean }) | undefined): HandlerOptions | undefined => {
    // As the router's whichProtocols: a service's own options replace the router's, field by field, and decide alone
    // whether the Connect protocol is on.
    routerOptions ??= { ...connectOptions, ...validateUniversalHandlerOptions(connectOptions) };
    if (own === undefined) return connectOptions.connect === false ? undefined : routerOptions;
    if (own.connect === false) return undefined;
    return { ...validateUniversalHandlerOptions(routerOptions), ...own } as HandlerOptions;
  };
  const register = (method: DescMethod, impl: unknown, own: Partial<HandlerOptions> | undefined) => {
    const path = pathOf(method.parent, method.name);
    if (!lean.has(path)) return;
    const opt = serveOptions(own);
    if (method.methodKind !== "unary" || typeof impl !== "function" || opt === undefined) routes.delete(path);
    else routes.set(path, { method: method as DescMethodUnary, impl: impl as UnaryImpl, opt });
  };
  /** The router `routes` registers on: Connect's, each registration also recorded here (chained calls stay recorded). */
  const recorderOf = (router: ConnectRouter): ConnectRouter => {
    const recorder = {
      get handlers() {
        return router.handlers;
      },
      service(service: DescService, impl: Record<string, unknown>, own?: Partial<HandlerOptions>) {
        router.service(service, impl as never, own);
        for (const method of service.methods) {
          const fn = impl[method.localName];
          // As Connect's createServiceImplSpec: the method is bound to its service object.
          register(method, typeof fn === "function" ? fn.bind(impl) : undefined, own);
        }
        return recorder;
      },
      rpc(method: DescMethod, impl: unknown, own?: Partial<HandlerOptions>) {
        (router.rpc as (m: DescMethod, i: unknown, o?: Partial<HandlerOptions>) => ConnectRouter)(method, impl, own);
        register(method, impl, own);
        return recorder;
      },
    };
    return recorder as unknown as ConnectRouter;
  };
  const connect = connectNodeAdapter(connectOptions);
  return (req, res) => {
    const route = req.method === "POST" ? routes.get(req.url) : undefined;
    if (route === undefined || !isPlainBinaryCall(req.headers, route.opt)) {
      connect(req, res);
      return;
    }
    serveLean(req, res, route, adapterOptions.contextValues?.(req));
  };
}

/** True for a unary Connect call in binary that the lean path answers exactly as Connect would. */
function isPlainBinaryCall(headers: http2.IncomingHttpHeaders, opt: HandlerOptions): boolean {
  if (headers["content-type"] !== "application/proto") return false;
  const encoding = headers["content-encoding"];
  if (encoding !== undefined && encoding !== "identity") return false;
  const version = headers["connect-protocol-version"];
  if (version === undefined ? opt.requireConnectProtocolHeader : version !== protocolVersion) return false;
  const length = headers["content-length"];
  if (length === undefined || !/^\d+$/.test(length)) return false;
  return Number(length) <= opt.readMaxBytes;
}

/**
 * The compression of the answer, as Connect's compressionNegotiate picks it for a request sent uncompressed: the first
 * name in `accept-encoding` the options accept, or none.
 */
function answerCompression(accept: string | undefined, opt: HandlerOptions): HandlerOptions["acceptCompression"][number] | undefined {
  if (accept === undefined || accept === "" || opt.acceptCompression.length === 0) return undefined;
  for (const name of accept.split(",")) {
    const found = opt.acceptCompression.find((c) => c.name === name.trim());
    if (found !== undefined) return found;
  }
  return undefined;
}

function serveLean(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, route: LeanRoute, values: ContextValues | undefined): void {
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
    void answer(req, res, route, values, body, received);
  });
}

/** The signal of a call without a deadline or a shutdown signal: nothing can abort it (its controller is not kept). */
const NEVER_ABORTED = new AbortController().signal;
const NO_DEADLINE = () => undefined;

/**
 * The call's deadline as Connect's handler context keeps it: `timeoutMs()` counts down from the header's value, and
 * the signal aborts with Connect's deadline error when it passes (at once for 0), or when the server shuts down.
 */
function createCallSignal(timeoutMs: number | undefined, shutdownSignal: AbortSignal | undefined) {
  if (timeoutMs === undefined && shutdownSignal === undefined) return { signal: NEVER_ABORTED, timeoutMs: NO_DEADLINE, cleanup: () => {} };
  const deadline = createDeadlineSignal(timeoutMs);
  const signal = shutdownSignal === undefined ? deadline.signal : createLinkedAbortController(deadline.signal, shutdownSignal).signal;
  if (timeoutMs === undefined) return { signal, timeoutMs: NO_DEADLINE, cleanup: deadline.cleanup };
  const end = Date.now() + timeoutMs;
  return { signal, timeoutMs: () => end - Date.now(), cleanup: deadline.cleanup };
}

async function answer(
  req: http2.Http2ServerRequest,
  res: http2.Http2ServerResponse,
  route: LeanRoute,
  values: ContextValues | undefined,
  body: Buffer,
  received: number,
): Promise<void> {
  const { method, impl, opt } = route;
  const header = new Headers();
  for (const name in req.headers) {
    if (name.startsWith(":")) continue;
    const value = req.headers[name];
    if (Array.isArray(value)) for (const v of value) header.append(name, v);
    else if (value !== undefined) header.append(name, value);
  }
  const timeout = parseTimeout(header.get("connect-timeout-ms"), opt.maxTimeoutMs);
  const call = createCallSignal(timeout.timeoutMs, opt.shutdownSignal);
  const context: HandlerContext = {
    method,
    service: method.parent,
    requestMethod: "POST",
    protocolName: "connect",
    url: `http://${req.headers[":authority"] ?? "localhost"}${req.url}`,
    timeoutMs: call.timeoutMs,
    signal: call.signal,
    requestHeader: header,
    responseHeader: new Headers({ "content-type": "application/proto" }),
    responseTrailer: new Headers(),
    values: values ?? createContextValues(),
  };
  let status = 200;
  let payload: Uint8Array;
  try {
    // Connect's order: the timeout header is refused before the body is read.
    if (timeout.error) throw timeout.error;
    const promised = Number(req.headers["content-length"]);
    if (received !== promised) throw new ConnectError(`protocol error: promised ${promised} bytes, received ${received}`, Code.InvalidArgument);
    let input: unknown;
    try {
      input = fromBinary(method.input, body, opt.binaryOptions);
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
    for (let i = opt.interceptors.length - 1; i >= 0; i--) next = (opt.interceptors[i] as Interceptor)(next as never) as typeof next;
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
    payload = toBinary(method.output, response.message as never, opt.binaryOptions);
    // Connect's serialization limit (protocol/limit-io.ts assertWriteMaxBytes), with its text.
    if (payload.byteLength > opt.writeMaxBytes) {
      throw new ConnectError(`message size ${payload.byteLength} is larger than configured writeMaxBytes ${opt.writeMaxBytes}`, Code.ResourceExhausted);
    }
  } catch (e) {
    // Failure policy: as Connect's handler - a ConnectError is answered with its code, anything else as `internal error`.
    const error = e instanceof ConnectError ? e : new ConnectError("internal error", Code.Internal, undefined, undefined, e);
    status = codeToHttpStatus(error.code);
    context.responseHeader.set("content-type", "application/json");
    error.metadata.forEach((value, key) => context.responseHeader.set(key, value));
    payload = errorToJsonBytes(error, opt.jsonOptions ?? {});
  } finally {
    call.cleanup();
  }
  // As Connect's handler: an answer (message or error) of at least compressMinBytes is compressed when the caller accepts it.
  const compression = answerCompression(req.headers["accept-encoding"], opt);
  if (compression !== undefined && payload.byteLength >= opt.compressMinBytes) {
    payload = await compression.compress(payload);
    context.responseHeader.set("content-encoding", compression.name);
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
