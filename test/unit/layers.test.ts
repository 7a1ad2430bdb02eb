/**
 * The layers, checked on the real import graph (ARCHITECTURE.md, "Layers"):
 *
 * 1. The gateway process talks to the referral service only: nothing it loads at run time (the
 *    closure of gateway/main.ts) reaches a database or Kafka client, nor a service's own code.
 * 2. No import cycle between files of services/shared, and none between service folders
 *    (services/<a> -> services/<b> -> services/<a>); services/shared imports no service folder.
 * 3. Nothing under scripts/ or bench/ imports test/: the harness they share with the tests (stack,
 *    test databases, processes, the receiver, plugin clients) has one home, scripts/harness/.
 *
 * Edges are read the way the code runs: each file is compiled alone (TypeScript's transpileModule,
 * as the build does), so imports used only as types are gone, and the imports left are resolved
 * relative to the file (`./x.js` -> `./x.ts`). Bare specifiers (`kafkajs`, `@prisma/client/...`)
 * are leaves. A failure names the chain of imports that reaches the forbidden module.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import test from "ava";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** What the gateway's run-time closure must not reach, and why. */
const FORBIDDEN_IN_GATEWAY: ReadonlyArray<{ pattern: RegExp; what: string }> = [
  { pattern: /^@prisma\//, what: "the Prisma client or its adapter" },
  { pattern: /^pg$/, what: "the PostgreSQL driver" },
  { pattern: /^kafkajs$/, what: "the Kafka client" },
  { pattern: /^@electric-sql\//, what: "the embedded PostgreSQL" },
  { pattern: /^gen\/prisma\//, what: "the generated Prisma client" },
  {
    // An allow-list: the gateway may load the wire and domain values, the process runtime and the RPC plumbing;
    // services/shared/adapters/ holds the modules that open, hold or wait for the database or the bus.
    pattern: /^services\/shared\/(?!(values|runtime|rpc)\/)/,
    what: "a shared module outside values/, runtime/ and rpc/ (the adapters that hold database or bus clients)",
  },
  { pattern: /^services\/(?!shared\/)/, what: "a service's own code (the gateway reaches the services over RPC only)" },
];

/** Repository-relative path of a resolved relative import, or the bare specifier itself. */
function resolveSpecifier(fromFile: string, specifier: string): string {
  if (!specifier.startsWith(".")) return specifier;
  const absolute = resolve(ROOT, dirname(fromFile), specifier);
  const asTs = absolute.endsWith(".js") ? `${absolute.slice(0, -3)}.ts` : absolute;
  return relative(ROOT, existsSync(asTs) ? asTs : absolute)
    .split("\\")
    .join("/");
}

const importCache = new Map<string, string[]>();

/** The imports `file` (repository-relative .ts) still has once compiled: static, re-exports and dynamic `import()`. */
function runtimeImportsOf(file: string): string[] {
  const cached = importCache.get(file);
  if (cached) return cached;
  const source = readFileSync(join(ROOT, file), "utf8");
  const compiled = ts.transpileModule(source, {
    fileName: file,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, isolatedModules: true, verbatimModuleSyntax: false },
  }).outputText;
  const imports = ts.preProcessFile(compiled, true, true).importedFiles.map((f) => resolveSpecifier(file, f.fileName));
  importCache.set(file, imports);
  return imports;
}

/** Breadth-first closure from `entry`: every module reached, with the module that first imported it. */
function closureOf(entry: string): Map<string, string | undefined> {
  const parent = new Map<string, string | undefined>([[entry, undefined]]);
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift() as string;
    for (const target of runtimeImportsOf(file)) {
      if (parent.has(target)) continue;
      parent.set(target, file);
      if (target.endsWith(".ts") && existsSync(join(ROOT, target))) queue.push(target);
    }
  }
  return parent;
}

function chainTo(parent: Map<string, string | undefined>, module: string): string {
  const chain = [module];
  for (let at = parent.get(module); at !== undefined; at = parent.get(at)) chain.unshift(at);
  return chain.join(" -> ");
}

function tsFilesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...tsFilesUnder(path));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/** Strongly connected components of more than one node (or a node importing itself): the cycles. */
function cyclesOf(edges: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const lowLinks = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    indices.set(node, index);
    lowLinks.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        lowLinks.set(node, Math.min(lowLinks.get(node) as number, lowLinks.get(next) as number));
      } else if (onStack.has(next)) {
        lowLinks.set(node, Math.min(lowLinks.get(node) as number, indices.get(next) as number));
      }
    }
    if (lowLinks.get(node) === indices.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || edges.get(node)?.has(node)) cycles.push(component.sort());
    }
  };
  for (const node of edges.keys()) if (!indices.has(node)) visit(node);
  return cycles;
}

/** How one module of a cycle reaches the next: the file edges behind a folder edge, for the failure message. */
function describeCycle(members: readonly string[], edges: ReadonlyMap<string, ReadonlySet<string>>, examples?: ReadonlyMap<string, string>): string {
  const inCycle = new Set(members);
  const lines: string[] = [];
  for (const from of members) {
    for (const to of edges.get(from) ?? []) {
      if (inCycle.has(to)) lines.push(`  ${from} -> ${to}${examples ? ` (${examples.get(`${from}|${to}`)})` : ""}`);
    }
  }
  return `{${members.join(", ")}}:\n${lines.join("\n")}`;
}

test("the gateway's run-time imports reach no database or Kafka client and no service's own code", (t) => {
  const closure = closureOf("gateway/main.ts");
  // The walker works: the closure holds the gateway's own modules and the process skeleton.
  for (const expected of ["gateway/server.ts", "gateway/handle-ingest.ts", "services/shared/runtime/run-service.ts", "@connectrpc/connect"]) {
    t.true(closure.has(expected), `the import walker should reach ${expected} from gateway/main.ts`);
  }
  const violations: string[] = [];
  for (const module of closure.keys()) {
    const rule = FORBIDDEN_IN_GATEWAY.find(({ pattern }) => pattern.test(module));
    if (rule) violations.push(`${chainTo(closure, module)}\n    reaches ${rule.what}`);
  }
  t.deepEqual(violations, [], `gateway/main.ts must not load these (ARCHITECTURE.md, "Layers"):\n${violations.join("\n")}`);
});

test("no import cycle between files of services/shared", (t) => {
  const files = tsFilesUnder("services/shared");
  const edges = new Map<string, Set<string>>();
  for (const file of files) edges.set(file, new Set(runtimeImportsOf(file).filter((target) => target.startsWith("services/shared/"))));
  const cycles = cyclesOf(edges).map((members) => describeCycle(members, edges));
  t.deepEqual(cycles, [], `import cycles in services/shared:\n${cycles.join("\n")}`);
});

test("no import cycle between service folders", (t) => {
  const folderOf = (path: string): string | undefined => /^services\/([^/]+)\//.exec(path)?.[1];
  const edges = new Map<string, Set<string>>();
  const examples = new Map<string, string>();
  for (const file of tsFilesUnder("services")) {
    const from = folderOf(file) as string;
    if (!edges.has(from)) edges.set(from, new Set());
    for (const target of runtimeImportsOf(file)) {
      const to = folderOf(target);
      if (to === undefined || to === from) continue;
      edges.get(from)?.add(to);
      if (!examples.has(`${from}|${to}`)) examples.set(`${from}|${to}`, `${file} imports ${target}`);
    }
  }
  const sharedImports = [...examples].filter(([edge]) => edge.startsWith("shared|")).map(([, example]) => example);
  t.deepEqual(sharedImports, [], 'services/shared imports no service folder (ARCHITECTURE.md, "Layers")');
  const found = cyclesOf(edges);
  const cycles = found.map((members) => describeCycle(members, edges, examples));
  t.deepEqual(cycles, [], `import cycles between service folders:\n${cycles.join("\n")}`);
});

test("nothing under scripts/ or bench/ imports test/ (the harness they share with the tests lives in scripts/harness)", (t) => {
  const violations: string[] = [];
  for (const file of [...tsFilesUnder("scripts"), ...tsFilesUnder("bench")]) {
    // Type-only imports count too: the file still needs test/ to type-check.
    const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), "utf8"), true, true);
    for (const { fileName } of importedFiles) {
      const target = resolveSpecifier(file, fileName);
      if (target.startsWith("test/")) violations.push(`${file} imports ${target}`);
    }
  }
  t.deepEqual(violations, [], `move what these need into scripts/harness/ (ARCHITECTURE.md, folders):\n${violations.join("\n")}`);
});

/** A closure's modules matching `forbidden`, each with the chain of imports that reaches it. */
function reached(entry: string, forbidden: ReadonlyArray<{ pattern: RegExp; what: string }>): string[] {
  const closure = closureOf(entry);
  const violations: string[] = [];
  for (const module of closure.keys()) {
    const rule = forbidden.find(({ pattern }) => pattern.test(module));
    if (rule) violations.push(`${chainTo(closure, module)}\n    reaches ${rule.what}`);
  }
  return violations;
}

test("the referral service's run-time imports reach no Kafka client and none of the delivery pipeline's loops (it hosts the delivery RPCs only)", (t) => {
  const closure = closureOf("services/referral-service/main.ts");
  for (const expected of ["services/delivery/rpc/routes.ts", "services/delivery/pipeline/send-callback.ts", "pg"])
    t.true(closure.has(expected), `the import walker should reach ${expected} from the referral service`);
  const violations = reached("services/referral-service/main.ts", [
    { pattern: /^kafkajs$/, what: "the Kafka client (the referral service holds no bus)" },
    { pattern: /^services\/shared\/adapters\/(kafka-bus|kafka-dependency)\.ts$/, what: "the Kafka bus" },
    { pattern: /^services\/delivery\/(consumer|dispatcher|worker|worker-liveness|main)\.ts$/, what: "the delivery process's own loops" },
  ]);
  t.deepEqual(violations, [], `services/referral-service/main.ts must not load these (ARCHITECTURE.md, "Layers"):\n${violations.join("\n")}`);
});

test("the rcb CLI's run-time imports reach no database client (it talks to the services over HTTP and RPC)", (t) => {
  const closure = closureOf("scripts/cli/main.ts");
  t.true(closure.has("@connectrpc/connect"), "the import walker should reach the RPC client from the CLI");
  const violations = reached("scripts/cli/main.ts", [
    { pattern: /^@prisma\//, what: "the Prisma client or its adapter" },
    { pattern: /^pg$/, what: "the PostgreSQL driver" },
    { pattern: /^gen\/prisma\//, what: "the generated Prisma client" },
    { pattern: /^kafkajs$/, what: "the Kafka client" },
  ]);
  t.deepEqual(violations, [], `scripts/cli/main.ts must not load these:\n${violations.join("\n")}`);
});

test("no import cycle between files of product code (services/, gateway/, scripts/cli/), type-only imports included", (t) => {
  const files = [...tsFilesUnder("services"), ...tsFilesUnder("gateway"), ...tsFilesUnder("scripts/cli")];
  const inProduct = new Set(files);
  const edges = new Map<string, Set<string>>();
  for (const file of files) {
    // The source as written: a type-only cycle still ties the modules' designs together.
    const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), "utf8"), true, true);
    edges.set(file, new Set(importedFiles.map((f) => resolveSpecifier(file, f.fileName)).filter((target) => inProduct.has(target))));
  }
  const cycles = cyclesOf(edges).map((members) => describeCycle(members, edges));
  t.deepEqual(cycles, [], `import cycles in product code:\n${cycles.join("\n")}`);
});

test("services/shared's layers point one way: values <- runtime <- rpc <- adapters", (t) => {
  const RANK = { values: 0, runtime: 1, rpc: 2, adapters: 3 } as const;
  const layerOf = (path: string) => /^services\/shared\/(values|runtime|rpc|adapters)\//.exec(path)?.[1] as keyof typeof RANK | undefined;
  const files = tsFilesUnder("services/shared");
  const outside = files.filter((file) => layerOf(file) === undefined);
  t.deepEqual(outside, [], "every shared module is in one of the four layers");
  const upward: string[] = [];
  for (const file of files) {
    const from = layerOf(file);
    if (from === undefined) continue;
    for (const target of runtimeImportsOf(file)) {
      const to = layerOf(target);
      if (to !== undefined && RANK[to] > RANK[from]) upward.push(`${file} (${from}) imports ${target} (${to})`);
    }
  }
  t.deepEqual(upward, [], `a shared module imports a layer above its own (ARCHITECTURE.md, "Layers"):\n${upward.join("\n")}`);
});

test("the delivery pipeline (consumer, dispatcher, senders, attempt log) imports nothing of the delivery RPC surface the referral service hosts", (t) => {
  const upward: string[] = [];
  for (const file of tsFilesUnder("services/delivery/pipeline"))
    for (const target of runtimeImportsOf(file)) if (target.startsWith("services/delivery/rpc/")) upward.push(`${file} imports ${target}`);
  t.deepEqual(upward, [], `services/delivery/pipeline must not import services/delivery/rpc:\n${upward.join("\n")}`);
});
