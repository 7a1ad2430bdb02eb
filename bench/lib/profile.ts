/**
 * A sampling CPU profile of this process (the servers under test) while a phase
 * runs, reduced to self time per component (Prisma, node-postgres, Connect,
 * protobuf, HTTP/1, HTTP/2, logging, app code, GC...) and the hottest functions.
 * The profiler adds overhead, so only the shares are reported, never throughput.
 */
import { Session } from "node:inspector/promises";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self-time shares of one profiled phase. */
export interface ProfileSummary {
  sampledMs: number;
  /** Percent of busy (non-idle) samples per component, largest first. */
  components: Array<{ component: string; percent: number }>;
  /** Hottest functions by self time, percent of busy samples. */
  functions: Array<{ fn: string; component: string; percent: number }>;
  /** The project's own functions (services/, gateway/) by inclusive time (self and everything they called), percent of busy samples. */
  inclusive: Array<{ fn: string; percent: number }>;
}

const COMPONENTS: Array<[string, (url: string) => boolean]> = [
  ["WebAssembly (Prisma query compiler)", (u) => u.startsWith("wasm://")],
  ["Prisma client + query compiler (@prisma, gen/prisma)", (u) => u.includes("/@prisma/") || u.includes("/gen/prisma/") || u.includes("/prisma/client")],
  ["node-postgres driver (pg, pg-protocol, pg-pool)", (u) => /\/node_modules\/(pg|pg-protocol|pg-pool|pg-types|postgres-\w+|pgpass)\//.test(u)],
  ["Connect RPC (@connectrpc)", (u) => u.includes("/@connectrpc/")],
  ["protobuf runtime + generated code (@bufbuild, gen/proto)", (u) => u.includes("/@bufbuild/") || u.includes("/gen/proto/")],
  [
    "logging (pino, fast-redact, sonic-boom)",
    (u) =>
      /\/node_modules\/(pino|pino-std-serializers|fast-redact|sonic-boom|thread-stream|quick-format-unescaped|safe-stable-stringify|on-exit-leak-free|fast-safe-stringify)/.test(
        u,
      ),
  ],
  ["Kafka client (kafkajs)", (u) => u.includes("/kafkajs/")],
  ["TypeScript loading (tsx, esbuild): startup", (u) => u.includes("/tsx/") || u.includes("/esbuild/") || u.includes("/get-tsconfig/")],
  ["metrics (prom-client)", (u) => u.includes("/prom-client/") || u.includes("/tdigest/") || u.includes("/bintrees/")],
  ["gateway code (gateway/)", (u) => u.includes("/gateway/")],
  ["service code (services/)", (u) => u.includes("/services/")],
  ["Node HTTP/2 core", (u) => u.startsWith("node:") && u.includes("http2")],
  ["Node HTTP/1 core", (u) => u.startsWith("node:") && (u.includes("_http_") || u.includes("internal/http"))],
  ["Node net/streams/timers core", (u) => u.startsWith("node:") && /(net|stream|timers|buffer|events|async_hooks|process)/.test(u)],
  ["Node crypto core", (u) => u.startsWith("node:") && u.includes("crypto")],
  ["other Node core", (u) => u.startsWith("node:")],
  ["other node_modules", (u) => u.includes("/node_modules/")],
];

const SOCKET_WRITES = new Set(["writev", "writeBuffer", "writeUtf8String", "writeLatin1String", "writeAsciiString", "writeUcs2String"]);

const PROFILER_OVERHEAD = "(profiler)";

function componentOfUrl(url: string): string {
  for (const [name, test] of COMPONENTS) if (test(url)) return name;
  return "other";
}

/**
 * The component a sample's self time is charged to. Native frames (no url) are
 * charged to the nearest JavaScript caller's component, except GC, the
 * unattributed "(program)" and socket writes: a write on loopback TCP also runs
 * the receiving side's TCP processing in the kernel, charged to the writer.
 */
function componentOf(node: ProfileNode, parents: Map<number, ProfileNode>): string {
  const { url, functionName } = node.callFrame;
  if (url !== "") return componentOfUrl(url);
  if (functionName === "(garbage collector)") return "garbage collector";
  if (functionName === "(program)") return "(program: native, not attributed)";
  if (functionName === "(idle)") return "(idle)";
  if (SOCKET_WRITES.has(functionName)) return "socket write syscalls (loopback TCP)";
  for (let up = parents.get(node.id); up; up = parents.get(up.id)) {
    // The profiler's own Profiler.stop (serialising the profile) shows up as a native call from node:inspector.
    if (up.callFrame.url.includes("inspector")) return PROFILER_OVERHEAD;
    if (up.callFrame.url !== "") return componentOfUrl(up.callFrame.url);
  }
  return "native (no JavaScript caller)";
}

/** Profiles this process while `run` executes. */
export async function profileWhile<T>(run: () => Promise<T>, samplingIntervalMicros = 500): Promise<{ result: T; summary: ProfileSummary }> {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: samplingIntervalMicros });
    await session.post("Profiler.start");
    const result = await run();
    const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
    return { result, summary: summarizeProfile(profile) };
  } finally {
    session.disconnect();
  }
}

/** Self-time shares of a V8 CPU profile (`Profiler.stop`'s answer, or a `--cpu-prof` file's JSON). */
export function summarizeProfile(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parents = new Map<number, ProfileNode>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node);
  const selfMicros = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + delta);
    total += delta;
  });
  const byComponent = new Map<string, number>();
  const byFunction = new Map<string, { component: string; micros: number }>();
  let busy = 0;
  for (const [id, micros] of selfMicros) {
    const node = byId.get(id);
    if (!node) continue;
    const component = componentOf(node, parents);
    if (component === "(idle)" || component === PROFILER_OVERHEAD) continue;
    busy += micros;
    byComponent.set(component, (byComponent.get(component) ?? 0) + micros);
    const file = node.callFrame.url.split("/").slice(-2).join("/");
    const key =
      file === ""
        ? `${node.callFrame.functionName} (native, under ${component})`
        : `${node.callFrame.functionName || "(anonymous)"} ${file}:${node.callFrame.lineNumber + 1}`;
    const entry = byFunction.get(key) ?? { component, micros: 0 };
    entry.micros += micros;
    byFunction.set(key, entry);
  }
  const pct = (micros: number) => Math.round((micros / Math.max(1, busy)) * 1000) / 10;
  // Inclusive time of the project's functions: each busy sample is charged once to every distinct project function on its stack.
  const keyOf = (node: ProfileNode) =>
    `${node.callFrame.functionName || "(anonymous)"} ${node.callFrame.url.split("/").slice(-2).join("/")}:${node.callFrame.lineNumber + 1}`;
  const isOurs = (url: string) => (url.includes("/services/") || url.includes("/gateway/")) && !url.includes("/node_modules/");
  const inclusiveMicros = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    if (!node) return;
    const component = componentOf(node, parents);
    if (component === "(idle)" || component === PROFILER_OVERHEAD) return;
    const seen = new Set<string>();
    for (let up: ProfileNode | undefined = node; up; up = parents.get(up.id)) {
      if (!isOurs(up.callFrame.url)) continue;
      const key = keyOf(up);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusiveMicros.set(key, (inclusiveMicros.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
    }
  });
  return {
    sampledMs: Math.round(total / 1000),
    components: [...byComponent].sort((a, b) => b[1] - a[1]).map(([component, micros]) => ({ component, percent: pct(micros) })),
    functions: [...byFunction]
      .sort((a, b) => b[1].micros - a[1].micros)
      .slice(0, 15)
      .map(([fn, v]) => ({ fn, component: v.component, percent: pct(v.micros) })),
    inclusive: [...inclusiveMicros]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([fn, micros]) => ({ fn, percent: pct(micros) })),
  };
}
