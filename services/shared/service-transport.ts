import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

/** Client interceptor: every call carries `authorization: Bearer <token>` (the referral service requires it). */
export function bearerToken(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * THE client transport of the referral service: Connect over HTTP/2 (binary), one
 * session shared and reconnecting on its own, every call authenticated with `token`.
 */
export function createServiceTransport(baseUrl: string, token: string, opts: { useBinaryFormat?: boolean } = {}): Transport {
  return createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: opts.useBinaryFormat ?? true, interceptors: [bearerToken(token)] });
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
