import http2 from "node:http2";
import { create, fromBinary, isMessage, toBinary, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type Transport, type UnaryResponse } from "@connectrpc/connect";
// PRIVATE API: connect-es marks these four helpers "@private Internal code, does not follow semantic versioning"
// (@connectrpc/connect/protocol-connect). They keep this transport's wire format, response checks and error decoding
// identical to Connect's own client; any release may change or drop them. The version they were verified against is
// CONNECT_ES_VERIFIED_VERSION below, and test/unit/unary-transport.test.ts fails when the installed version differs.
import { errorFromJsonBytes, protocolVersion, trailerDemux, validateResponse } from "@connectrpc/connect/protocol-connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { MAX_RPC_MESSAGE_BYTES } from "../values/field-rules.js";

/**
 * The @connectrpc/connect and @connectrpc/connect-node version this transport was checked against (its private
 * imports above, and Http2SessionManager's request/notifyResponseByteRead contract). On an upgrade, re-check: the
 * four protocol-connect helpers' signatures and behaviour, the headers Connect's client sends (user agent, protocol
 * version, timeout), connect-node's reset-code mapping (RESET_CODES), then run test/unit/unary-transport.test.ts
 * and raise this constant.
 */
export const CONNECT_ES_VERIFIED_VERSION = "2.1.1";

/**
 * A Connect-protocol transport whose unary calls go straight onto a shared HTTP/2 session:
 * binary protobuf, one stream per call, the request written in one `end()`, the response read
 * from the stream's own events. Same wire format, headers and error mapping as Connect's own
 * client (`createConnectTransport`), without its per-call machinery (interceptor chain, linked
 * AbortControllers aborted with an exception at the end of every call, async-iterable bodies,
 * WHATWG header conversions on the success path), which cost the gateway most of its CPU per
 * forwarded event. Streaming calls use Connect's transport on the same session.
 *
 * `headers` are added to every call after the caller's (they win, like an interceptor's
 * `header.set`): the service token's `authorization`. `sessions` shares an HTTP/2 session manager
 * with other transports of the same process (one session to the service); by default it has its own.
 */
export function createUnaryTransport(baseUrl: string, headers: Record<string, string>, sessions = new Http2SessionManager(baseUrl)): Transport {
  const streaming = createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    sessionManager: sessions,
    interceptors: [
      (next) => (req) => {
        for (const [name, value] of Object.entries(headers)) req.header.set(name, value);
        return next(req);
      },
    ],
  });
  const base = baseUrl.replace(/\/+$/, "");
  const basePath = new URL(base).pathname.replace(/\/+$/, "");
  if (`${new URL(base).origin}${basePath}` !== base) throw new Error(`baseUrl must be a plain http(s) URL, got ${baseUrl}`);
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) =>
      unaryCall(sessions, `${basePath}/${method.parent.typeName}/${method.name}`, headers, method, signal, timeoutMs, header, input, contextValues),
    stream: streaming.stream,
  };
}

/** Connect's name for the deadline error (protocol/signals.ts). */
const DEADLINE_MESSAGE = "the operation timed out";

async function unaryCall<I extends DescMessage, O extends DescMessage>(
  sessions: Http2SessionManager,
  path: string,
  fixedHeaders: Record<string, string>,
  method: DescMethodUnary<I, O>,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: ConstructorParameters<typeof Headers>[0],
  input: MessageInitShape<I>,
  _contextValues: ContextValues | undefined,
): Promise<UnaryResponse<I, O>> {
  const message: MessageShape<I> = isMessage(input, method.input) ? (input as MessageShape<I>) : create(method.input, input);
  const body = toBinary(method.input, message);
  // Connect's semantics: no timeout given -> none; <= 0 -> none.
  const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
  const outgoing: http2.OutgoingHttpHeaders = {};
  addCallerHeaders(outgoing, header);
  if (deadline !== undefined) outgoing["connect-timeout-ms"] = String(deadline);
  outgoing["content-type"] = "application/proto";
  outgoing["connect-protocol-version"] = protocolVersion;
  if (outgoing["user-agent"] === undefined) outgoing["user-agent"] = `connect-es/${CONNECT_ES_VERIFIED_VERSION}`;
  outgoing["content-length"] = body.byteLength;
  for (const name in fixedHeaders) outgoing[name] = fixedHeaders[name];

  if (signal?.aborted) throw ConnectError.from(signal.reason, Code.Canceled);
  let stream: http2.ClientHttp2Stream;
  try {
    stream = await sessions.request("POST", path, outgoing, {});
  } catch (error) {
    // Failure policy: no stream could be opened (service down, connection refused): unavailable, as Connect reports it.
    throw ConnectError.from(error, Code.Unavailable);
  }
  const answer = await new Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer; trailers?: http2.IncomingHttpHeaders }>(
    (resolve, reject) => {
      let status = 0;
      let responseHeaders: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      let received = 0;
      let settled = false;
      const fail = (error: ConnectError, rstCode: number = http2.constants.NGHTTP2_CANCEL) => {
        if (settled) return;
        settled = true;
        cleanup();
        if (!stream.closed) stream.close(rstCode);
        reject(error);
      };
      const timer = deadline === undefined ? undefined : setTimeout(() => fail(new ConnectError(DEADLINE_MESSAGE, Code.DeadlineExceeded)), deadline);
      const onAbort = () => fail(ConnectError.from(signal?.reason, Code.Canceled));
      signal?.addEventListener("abort", onAbort, { once: true });
      const cleanup = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      stream.on("response", (h) => {
        status = Number(h[":status"] ?? 0);
        responseHeaders = h;
      });
      stream.on("data", (chunk: Buffer) => {
        received += chunk.byteLength;
        sessions.notifyResponseByteRead(stream);
        if (received > MAX_RPC_MESSAGE_BYTES) {
          fail(new ConnectError(`message size is larger than configured readMaxBytes ${MAX_RPC_MESSAGE_BYTES}`, Code.ResourceExhausted));
          return;
        }
        chunks.push(chunk);
      });
      stream.on("trailers", (t) => {
        trailers = t;
      });
      stream.on("end", () => {
        if (settled) return;
        settled = true;
        cleanup();
        resolve({
          status,
          headers: responseHeaders,
          body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received),
          ...(trailers ? { trailers } : {}),
        });
      });
      // Failure policy: a stream or session error ends the call with Connect's code for it (unavailable for a
      // connection that failed, the reset code's mapping for a reset stream); the caller's error table decides.
      stream.on("error", (error: Error) => fail(ConnectError.from(error, Code.Unavailable)));
      stream.on("close", () => {
        if (!settled) fail(errorFromResetCode(stream.rstCode));
      });
      stream.end(body);
    },
  );

  if (answer.status === 200 && answer.headers["content-type"] === "application/proto" && answer.headers["content-encoding"] === undefined) {
    // The response's header and trailer as WHATWG Headers only when a caller reads them (an `onHeader` / `onTrailer`
    // call option): the gateway's forwarded events never do, and building them cost a few microseconds per call.
    let demuxed: [Headers, Headers] | undefined;
    const headers = () => {
      demuxed ??= trailerDemux(toWebHeaders(answer.headers, answer.trailers));
      return demuxed;
    };
    const message = fromBinary(method.output, answer.body);
    return {
      stream: false,
      service: method.parent,
      method,
      message,
      get header() {
        return headers()[0];
      },
      get trailer() {
        return headers()[1];
      },
    };
  }
  // Anything else takes Connect's own checks and error decoding (content type, status, JSON error body).
  const web = toWebHeaders(answer.headers, answer.trailers);
  const encoding = web.get("content-encoding");
  if (encoding !== null && encoding.toLowerCase() !== "identity") throw new ConnectError(`unsupported response encoding "${encoding}"`, Code.Internal, web);
  const { isUnaryError, unaryError } = validateResponse(method.methodKind, true, answer.status, web);
  if (isUnaryError) throw errorFromJsonBytes(answer.body, web, unaryError as ConnectError);
  const [responseHeader, trailer] = trailerDemux(web);
  return { stream: false, service: method.parent, method, header: responseHeader, message: fromBinary(method.output, answer.body), trailer };
}

/** The caller's call-option headers, lower-cased (HTTP/2 header names are). */
function addCallerHeaders(into: http2.OutgoingHttpHeaders, header: ConstructorParameters<typeof Headers>[0]): void {
  if (header === undefined) return;
  if (header instanceof Headers) {
    header.forEach((value, name) => {
      into[name] = value;
    });
  } else if (Array.isArray(header)) {
    for (const [name, value] of header) into[(name as string).toLowerCase()] = value as string;
  } else {
    for (const name in header) into[name.toLowerCase()] = (header as Record<string, string>)[name];
  }
}

function toWebHeaders(headers: http2.IncomingHttpHeaders, trailers: http2.IncomingHttpHeaders | undefined): Headers {
  const web = new Headers();
  for (const source of trailers ? [headers, trailers] : [headers]) {
    for (const name in source) {
      if (name.startsWith(":")) continue;
      const value = source[name];
      if (Array.isArray(value)) for (const v of value) web.append(name, v);
      else if (value !== undefined) web.append(name, String(value));
    }
  }
  return web;
}

/** Reset codes by the Connect code Connect's Node client maps them to (connect-node's node-error.ts); any other one is unavailable. */
const RESET_CODES: ReadonlyArray<[Code, readonly number[]]> = [
  [Code.Internal, [0x1, 0x2, 0x3, 0x4, 0x6, 0x9, 0xa]],
  [Code.Canceled, [0x8]],
  [Code.ResourceExhausted, [0xb]],
  [Code.PermissionDenied, [0xc, 0xd]],
];

/** A stream closed before its response ended. */
function errorFromResetCode(rstCode: number | undefined): ConnectError {
  const code = RESET_CODES.find(([, codes]) => rstCode !== undefined && codes.includes(rstCode))?.[0] ?? Code.Unavailable;
  return new ConnectError(`http/2 stream closed with error code 0x${(rstCode ?? 0).toString(16)} before the response ended`, code);
}
