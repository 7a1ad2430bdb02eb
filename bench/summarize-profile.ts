/**
 * Where a process's CPU went, from V8 CPU profiles (`node --cpu-prof`, or a bench run with BENCH_CPU_PROF_DIR):
 * self time per component (Prisma, node-postgres, kafkajs, protobuf, HTTP, logging, the project's code...), the
 * hottest functions, and the project's functions by inclusive time. Shares only: the profiler slows what it profiles.
 *
 *   npx tsx bench/summarize-profile.ts /tmp/prof/delivery-1-*.cpuprofile
 */
import { readFileSync } from "node:fs";
import { type CpuProfile, summarizeProfile } from "./lib/profile.js";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: npx tsx bench/summarize-profile.ts FILE.cpuprofile [FILE...]");
  process.exit(2);
}
for (const file of files) {
  let profile: CpuProfile;
  try {
    profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  } catch (error) {
    // Failure policy: a file that is not a profile is named and skipped; the others are still summarised.
    console.error(`${file}: not a readable CPU profile (${error instanceof Error ? error.message : String(error)})`);
    process.exitCode = 1;
    continue;
  }
  const s = summarizeProfile(profile);
  console.log(`\n## ${file} (${s.sampledMs} ms sampled)\n\nself time by component:`);
  for (const c of s.components) console.log(`  ${c.percent.toFixed(1).padStart(5)} %  ${c.component}`);
  console.log("\nhottest functions (self):");
  for (const f of s.functions) console.log(`  ${f.percent.toFixed(1).padStart(5)} %  ${f.fn}  [${f.component}]`);
  console.log("\nthe project's functions (inclusive):");
  for (const f of s.inclusive) console.log(`  ${f.percent.toFixed(1).padStart(5)} %  ${f.fn}`);
}
