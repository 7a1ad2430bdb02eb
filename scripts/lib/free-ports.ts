import { createServer, type AddressInfo, type Server } from "node:net";

/** A TCP port that was free on 127.0.0.1 a moment ago. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/** `count` distinct ports that were free on 127.0.0.1 a moment ago (held together, so no duplicates). */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i += 1) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
      });
    }
    return servers.map((s) => (s.address() as AddressInfo).port);
  } finally {
    // Failure policy: always release what was bound, also when a later listen failed (its error is rethrown).
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))));
  }
}
