import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, type Http2SessionManager } from "@connectrpc/connect-node";
import { createUnaryTransport } from "./unary-transport.js";

/** The header every call to the referral service carries (the referral service requires it). */
function authorization(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/** Client interceptor: every call carries `authorization: Bearer <token>` (the referral service requires it). */
export function bearerToken(token: string): Interceptor {
  const { authorization: value } = authorization(token);
  return (next) => (req) => {
    req.header.set("authorization", value);
    return next(req);
  };
}

/**
 * THE client transport of the referral service: Connect over HTTP/2 (binary), one
 * session shared and reconnecting on its own, every call authenticated with `token`.
 * `sessions` shares the session with other transports of the process.
 */
export function createServiceTransport(baseUrl: string, token: string, opts: { useBinaryFormat?: boolean; sessions?: Http2SessionManager } = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: "2",
    useBinaryFormat: opts.useBinaryFormat ?? true,
    interceptors: [bearerToken(token)],
    ...(opts.sessions ? { sessionManager: opts.sessions } : {}),
  });
}

/**
 * The same calls (Connect over HTTP/2, binary, one shared session, authenticated with `token`)
 * through the lean unary path of services/shared/rpc/unary-transport.ts: for a hot caller (the
 * gateway forwards every ingest event with one unary call). Streaming calls take Connect's transport.
 */
export function createUnaryServiceTransport(baseUrl: string, token: string, sessions?: Http2SessionManager): Transport {
  return createUnaryTransport(baseUrl, authorization(token), sessions);
}

/** `transport` with `headers` added to every call (for example the dashboard session a call acts for). */
export function withHeaders(transport: Transport, headers: Record<string, string>): Transport {
  const merge = (init: ConstructorParameters<typeof Headers>[0]): Headers => {
    const merged = new Headers(init);
    for (const [name, value] of Object.entries(headers)) merged.set(name, value);
    return merged;
  };
  return {
    unary: (method, signal, timeoutMs, header, input, contextValues) => transport.unary(method, signal, timeoutMs, merge(header), input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) => transport.stream(method, signal, timeoutMs, merge(header), input, contextValues),
  };
}
