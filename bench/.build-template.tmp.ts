// scratch (not committed): builds the scale-N history template in the bench cluster, nothing else
import { join } from "node:path";
import { startBenchPostgres } from "./lib/infra.js";
import { ensureHistoryTemplate } from "./lib/history-template.js";
const scale = Number(process.argv[2] ?? "1");
const dataDir = join(process.cwd(), ".cache/bench-pg");
const progress = (l: string) => process.stderr.write(`${new Date().toISOString()} ${l}\n`);
const pgb = await startBenchPostgres(progress, { durability: "default", dataDir });
try {
  const t = await ensureHistoryTemplate({ adminUrl: pgb.adminUrl, dataDir: pgb.dataDir, scale, emptyTemplate: pgb.templateDatabase, targetDir: process.cwd(), migrate: async () => undefined, progress });
  progress(`template ${JSON.stringify(t).slice(0, 400)}`);
} finally {
  await pgb.stop();
}
