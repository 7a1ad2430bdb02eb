import { readFileSync } from "node:fs";
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

/** Where the kernel's ephemeral ports begin when /proc does not say (Linux's default). */
const DEFAULT_EPHEMERAL_LOW = 32_768;
/** The lowest port a restartable listener is given. */
const RESTARTABLE_PORT_LOW = 10_000;

/**
 * A free port below the kernel's ephemeral range (net.ipv4.ip_local_port_range), for a process that is stopped
 * and started again on the same port: no outgoing connection and no port-0 listener is ever given it meanwhile,
 * as can happen to a port freePort returned.
 */
export async function freeRestartablePort(): Promise<number> {
  let low = DEFAULT_EPHEMERAL_LOW;
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low;
  } catch {
    // Failure policy: no /proc (not Linux): assume the default range.
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = RESTARTABLE_PORT_LOW + Math.floor(Math.random() * Math.max(1, low - RESTARTABLE_PORT_LOW));
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (bound) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return port;
    }
  }
  throw new Error(`no free port between ${RESTARTABLE_PORT_LOW} and ${low} after 50 tries`);
}
