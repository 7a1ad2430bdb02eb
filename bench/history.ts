/**
 * Builds the production-shaped history (bench/lib/history.ts) into a migrated database:
 *
 *   npx tsx bench/history.ts --url=postgresql://.../db [--scale=1]
 *
 * Scale 1 is the steady-state size (about 26 million rows); --scale=0.01 builds a hundredth for a try.
 * Prints each step's time and the database's size at the end.
 */
import pg from "pg";
import { buildHistory, historyRowsAt } from "./lib/history.js";

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const url = arg("url") ?? process.env.DATABASE_URL;
const scale = Number(arg("scale") ?? "1");
if (!url || !(scale > 0)) {
  process.stderr.write("usage: npx tsx bench/history.ts --url=postgresql://... [--scale=1]\n");
  process.exit(2);
}
const client = new pg.Client({ connectionString: url });
await client.connect();
try {
  process.stderr.write(`history at scale ${scale}: ${JSON.stringify(historyRowsAt(scale))}\n`);
  const started = Date.now();
  await buildHistory(client, scale, new Date(), (line) => process.stderr.write(`${line}\n`));
  const { rows } = await client.query<{ size: string }>("SELECT pg_size_pretty(pg_database_size(current_database())) AS size");
  process.stderr.write(`history built in ${((Date.now() - started) / 1000).toFixed(1)} s; database size ${rows[0]?.size}\n`);
} finally {
  await client.end();
}
