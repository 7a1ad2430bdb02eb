import test from "ava";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  CreateServerRequestSchema,
  CreateServerResponseSchema,
  GetServerRequestSchema,
  GetServerResponseSchema,
  ServerAdminService,
} from "../../gen/proto/servers/v1/servers_pb.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { grpcJsBearer } from "../helpers/grpc-js.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { bearerToken } from "../../services/shared/rpc/service-transport.js";

let stack: TestStack;
test.before(async () => {
  stack = await startStack({ gateway: false });
});
test.after.always(async () => {
  await stack?.close();
});

/** Serializers for a stock @grpc/grpc-js client, from the protobuf-es schemas. */
function method<I extends DescMessage, O extends DescMessage>(path: string, input: I, output: O) {
  return {
    path,
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: MessageShape<I>) => Buffer.from(toBinary(input, value)),
    requestDeserialize: (bytes: Buffer) => fromBinary(input, bytes),
    responseSerialize: (value: MessageShape<O>) => Buffer.from(toBinary(output, value)),
    responseDeserialize: (bytes: Buffer) => fromBinary(output, bytes),
  };
}

test("a stock @grpc/grpc-js client calls the referral service over gRPC (HTTP/2, same port)", async (t) => {
  const definition = {
    createServer: method("/servers.v1.ServerAdminService/CreateServer", CreateServerRequestSchema, CreateServerResponseSchema),
    getServer: method("/servers.v1.ServerAdminService/GetServer", GetServerRequestSchema, GetServerResponseSchema),
  };
  const Client = grpc.makeGenericClientConstructor(definition, "ServerAdminService");
  const client = new Client(new URL(stack.rpcUrl).host, grpc.credentials.createInsecure(), { interceptors: [grpcJsBearer(TEST_SERVICE_TOKEN)] }) as unknown as {
    createServer(req: unknown, cb: (err: grpc.ServiceError | null, res: MessageShape<typeof CreateServerResponseSchema>) => void): void;
    getServer(req: unknown, cb: (err: grpc.ServiceError | null, res: MessageShape<typeof GetServerResponseSchema>) => void): void;
    close(): void;
  };
  try {
    const created = await new Promise<MessageShape<typeof CreateServerResponseSchema>>((resolve, reject) =>
      client.createServer(create(CreateServerRequestSchema, { name: "grpc-js server" }), (err, res) => (err ? reject(err) : resolve(res))),
    );
    t.is(created.server?.name, "grpc-js server");
    t.regex(created.server?.id ?? "", /^[0-9a-f-]{36}$/);
    // A domain error arrives as a real gRPC status with the contract's message.
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      client.getServer(create(GetServerRequestSchema, { serverId: "00000000-0000-0000-0000-000000000000" }), (e) => resolve(e!)),
    );
    t.is(err.code, grpc.status.NOT_FOUND);
    t.is(err.details, "unknown server");
  } finally {
    client.close();
  }
});

for (const [name, transport] of [
  ["Connect", (url: string) => createConnectTransport({ baseUrl: url, httpVersion: "2", interceptors: [bearerToken(TEST_SERVICE_TOKEN)] })],
  ["gRPC (connect-node)", (url: string) => createGrpcTransport({ baseUrl: url, interceptors: [bearerToken(TEST_SERVICE_TOKEN)] })],
  ["gRPC-Web", (url: string) => createGrpcWebTransport({ baseUrl: url, httpVersion: "2", interceptors: [bearerToken(TEST_SERVICE_TOKEN)] })],
] as const) {
  test(`a ${name} client reaches the same port`, async (t) => {
    const client = createClient(ServerAdminService, transport(stack.rpcUrl));
    const { server } = await client.createServer({ name: `${name} server` });
    const got = await client.getServer({ serverId: server!.id });
    t.is(got.server?.name, `${name} server`);
  });
}
