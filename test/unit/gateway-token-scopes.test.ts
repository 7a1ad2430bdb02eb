/**
 * The gateway's start-up token check asks for every scope its routes need, and nothing else: its table
 * (GATEWAY_ROUTE_SCOPES) lists exactly the scopes a gateway token is given by default
 * (DEFAULT_GATEWAY_SCOPES), and each probe calls an RPC that needs exactly its scope (RPC_ACCESS).
 */
import test from "ava";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { GATEWAY_ROUTE_SCOPES } from "../../gateway/check-service-token.js";
import { DEFAULT_GATEWAY_SCOPES } from "../../services/access/bootstrap.js";
import { RPC_ACCESS, rpcKey } from "../../services/access/rpc-access.js";
import { createRpcClients } from "../../services/shared/rpc/service-clients.js";

test("GATEWAY_ROUTE_SCOPES names exactly the gateway's default scopes", (t) => {
  t.deepEqual(GATEWAY_ROUTE_SCOPES.map((row) => row.scope).sort(), [...DEFAULT_GATEWAY_SCOPES].sort());
});

test("each probe calls one RPC that needs exactly its scope", async (t) => {
  for (const row of GATEWAY_ROUTE_SCOPES) {
    const called: string[] = [];
    const transport = {
      unary: async (method: { parent: { typeName: string }; name: string }) => {
        called.push(rpcKey(method.parent.typeName, method.name));
        throw new ConnectError("refused", Code.PermissionDenied);
      },
      stream: async () => {
        throw new Error("no streams");
      },
    } as unknown as Transport;
    const { admin, claims, referral, hearts, access } = createRpcClients(transport);
    await t.throwsAsync(row.probe({ admin, claims, referral, hearts, access }, { timeoutMs: 1_000 }));
    t.is(called.length, 1, row.scope);
    t.is(RPC_ACCESS[called[0] ?? ""]?.scope as string | undefined, row.scope, `${row.scope}: ${called[0]}`);
  }
});
