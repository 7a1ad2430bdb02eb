/**
 * A stock @grpc/grpc-js client of any service, built from its protobuf-es descriptor
 * (no codegen): the way a third-party gRPC caller reaches the referral service.
 */
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";

/** A client interceptor adding `authorization: Bearer <token>` metadata to every call. */
export function grpcJsBearer(token: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set("authorization", `Bearer ${token}`);
        next(metadata, listener);
      },
    });
}

/** The outcome of one unary call: the response message or the gRPC error. */
export type GrpcJsOutcome = { ok: true; value: unknown } | { ok: false; error: grpc.ServiceError };

/** A generic grpc-js client of `service` at `rpcUrl`; `token` null sends no authorization (default: the test admin token). */
export function createGrpcJsClient(service: DescService, rpcUrl: string, token: string | null = TEST_SERVICE_TOKEN) {
  type Message = Parameters<typeof toBinary>[1];
  const definition: Record<string, grpc.MethodDefinition<Message, Message>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (value: Message) => Buffer.from(toBinary(method.input, value)),
      requestDeserialize: (bytes: Buffer) => fromBinary(method.input, bytes),
      responseSerialize: (value: Message) => Buffer.from(toBinary(method.output, value)),
      responseDeserialize: (bytes: Buffer) => fromBinary(method.output, bytes),
    };
  }
  const Client = grpc.makeGenericClientConstructor(definition, service.name);
  const client = new Client(new URL(rpcUrl).host, grpc.credentials.createInsecure(), token === null ? {} : { interceptors: [grpcJsBearer(token)] });
  return {
    /** Calls `method` with `input` (a partial message). */
    call(method: DescMethod, input: Record<string, unknown> = {}): Promise<GrpcJsOutcome> {
      const fn = (client as unknown as Record<string, (req: unknown, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void>)[method.localName]!;
      return new Promise((resolve) =>
        fn.call(client, create(method.input, input as never), (err, res) => resolve(err ? { ok: false, error: err } : { ok: true, value: res })),
      );
    },
    close: () => client.close(),
  };
}
