/**
 * The capacity model (docs/capacity.md) from one benchmark run's results:
 *
 *   npx tsx bench/capacity.ts bench/results/<run>.json > docs/capacity.md
 *   npx tsx bench/capacity.ts bench/results/<run>.json --out docs/capacity.md
 *
 * The run should be a --history run with the ingest, hearts and callbacks phases (the model's CPU
 * per unit of work and bytes per row come from them); the model is bench/lib/capacity-model.ts,
 * the document bench/lib/capacity-doc.ts.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { RELAY_SHARDS } from "../services/shared/adapters/outbox.js";
import { TOPIC_PARTITIONS } from "../services/shared/adapters/kafka-bus.js";
import { DEFAULT_ASSUMPTIONS, renderCapacityDoc, type RunProvenance } from "./lib/capacity-doc.js";
import { type CapacityRun, readCapacityInputs } from "./lib/capacity-model.js";
import type { TargetsInput } from "./lib/targets.js";

const args = process.argv.slice(2);
const outAt = args.indexOf("--out");
const out = outAt >= 0 ? args[outAt + 1] : args.find((a) => a.startsWith("--out="))?.slice("--out=".length);
const file = args.find((a, i) => !a.startsWith("--") && !(outAt >= 0 && i === outAt + 1));
if (file === undefined || (outAt >= 0 && out === undefined)) {
  process.stderr.write("usage: npx tsx bench/capacity.ts <results.json> [--out <file.md>]\n");
  process.exit(2);
}
const results = JSON.parse(readFileSync(file, "utf8")) as CapacityRun & TargetsInput & Omit<RunProvenance, "file">;
// The document names the results file from the repository's root, wherever the command ran.
const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const doc = renderCapacityDoc({ ...results, file: relative(repoRoot, resolve(file)) }, readCapacityInputs(results), {
  ...DEFAULT_ASSUMPTIONS,
  relayShards: RELAY_SHARDS,
  topicPartitions: TOPIC_PARTITIONS,
});
if (out === undefined) process.stdout.write(doc);
else writeFileSync(out, doc);
