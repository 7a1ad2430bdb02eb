/**
 * The broker's jars and the JDK that runs them: locates `java`, reads its version, and fetches the
 * Kafka jars named by `pom.xml` (next to this file) into `<repo>/.cache/kafka-<version>/libs` once.
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  accessSync,
  constants as fsConstants,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { log } from "./util.js";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const POM_FILE = path.join(REPO_ROOT, "scripts", "infra", "kafka", "pom.xml");

/** Upper bound for the one-off Maven fetch of the broker jars. */
const MAVEN_FETCH_TIMEOUT_MS = 15 * 60_000;

function readKafkaVersion(): string {
  const pom = readFileSync(POM_FILE, "utf8");
  const match = /<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/.exec(pom);
  if (!match?.[1]) throw new Error(`cannot find <kafka.version> in ${POM_FILE}`);
  return match[1];
}

function cachePaths(): { version: string; cacheDir: string; libsDir: string; markerFile: string; pomSha256: string } {
  const version = readKafkaVersion();
  const cacheDir = path.join(REPO_ROOT, ".cache", `kafka-${version}`);
  return {
    version,
    cacheDir,
    libsDir: path.join(cacheDir, "libs"),
    markerFile: path.join(cacheDir, "libs.complete.json"),
    pomSha256: createHash("sha256").update(readFileSync(POM_FILE)).digest("hex"),
  };
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return statSync(file).isFile();
  } catch {
    // Failure policy: a missing/unreadable candidate just means "not this one"; the caller tries the next.
    return false;
  }
}

export function findOnPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, command))) return path.join(dir, command);
  }
  return undefined;
}

/** The `java` launcher Kafka's own scripts would use: $JAVA_HOME/bin/java, else `java` on PATH. */
export function resolveJava(): string {
  const javaHome = process.env.JAVA_HOME;
  if (javaHome && isExecutable(path.join(javaHome, "bin", "java"))) return path.join(javaHome, "bin", "java");
  const onPath = findOnPath("java");
  if (onPath) return onPath;
  throw new Error(
    "java not found (checked $JAVA_HOME/bin/java and PATH): the local Kafka broker needs a JDK/JRE 17 " + "(e.g. `apt-get install -y openjdk-17-jdk-headless`)",
  );
}

/** Major Java version read from `<java home>/release` (no JVM spawn); undefined if unknown. */
export function javaMajorVersion(javaBin: string): number | undefined {
  try {
    const release = readFileSync(path.join(path.dirname(path.dirname(realpathSync(javaBin))), "release"), "utf8");
    const version = /^JAVA_VERSION="([^"]+)"/m.exec(release)?.[1];
    if (!version) return undefined;
    const parts = version.split(".").map((p) => Number.parseInt(p, 10));
    const major = parts[0] === 1 ? parts[1] : parts[0];
    return Number.isFinite(major) ? major : undefined;
  } catch {
    // Failure policy: unknown JDK layout -> unknown version; we then skip the version-gated optimisations.
    return undefined;
  }
}

function readMarker(markerFile: string): { pomSha256?: string } | undefined {
  try {
    return JSON.parse(readFileSync(markerFile, "utf8")) as { pomSha256?: string };
  } catch {
    // Failure policy: a missing or corrupt marker means "cache incomplete", which triggers a re-fetch.
    return undefined;
  }
}

function isCacheComplete(paths: ReturnType<typeof cachePaths>): boolean {
  return readMarker(paths.markerFile)?.pomSha256 === paths.pomSha256 && existsSync(path.join(paths.libsDir, `kafka_2.13-${paths.version}.jar`));
}

/** Runs a command, collecting its output; rejects with the output on failure or timeout. */
function runCommand(command: string, args: string[], timeoutMs: number, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`failed to run ${command}: ${error.message}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(" ")} failed (code ${code}, signal ${signal}):\n${output.slice(-4000)}`));
    });
  });
}

/**
 * Ensures the Kafka broker jars (kafka_2.13 and its runtime classpath, plus slf4j-reload4j) are in
 * `<repo>/.cache/kafka-<version>/libs`, fetching them from Maven Central with `mvn` on first use.
 * A marker file (tied to the pom's hash) makes later calls a no-op.
 *
 * @returns absolute path of the directory holding all jars (use as `-cp '<dir>/*'`).
 * @throws if the jars are missing and `java` or `mvn` is not installed, or the Maven fetch fails.
 */
export async function ensureKafkaJars(): Promise<string> {
  const paths = cachePaths();
  if (isCacheComplete(paths)) return paths.libsDir;

  resolveJava(); // Maven needs a JDK too: fail early with the clearer message.
  const mvn = findOnPath("mvn");
  if (!mvn) {
    throw new Error(`mvn not found on PATH: it is needed once to fetch the Kafka ${paths.version} jars from Maven Central (e.g. \`apt-get install -y maven\`)`);
  }
  const startedAtMs = Date.now();
  log(`fetching Kafka ${paths.version} jars from Maven Central (first run only)...`);
  mkdirSync(paths.cacheDir, { recursive: true });
  const stagingDir = path.join(paths.cacheDir, `libs.staging-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    await runCommand(
      mvn,
      ["-q", "-B", "-Dstyle.color=never", "-f", POM_FILE, "dependency:copy-dependencies", `-Dkafka.libs.dir=${stagingDir}`],
      MAVEN_FETCH_TIMEOUT_MS,
      REPO_ROOT,
    );
    const mainJar = `kafka_2.13-${paths.version}.jar`;
    if (!existsSync(path.join(stagingDir, mainJar))) {
      throw new Error(`Maven finished but ${mainJar} is not in ${stagingDir}; check ${POM_FILE}`);
    }
    // Another process may have completed the same fetch meanwhile: keep its result, drop ours.
    if (!isCacheComplete(paths)) {
      rmSync(paths.libsDir, { recursive: true, force: true });
      renameSync(stagingDir, paths.libsDir);
      removeCdsArchives(paths.cacheDir); // archives are only valid for the jars they were built from
      writeFileSync(paths.markerFile, `${JSON.stringify({ kafkaVersion: paths.version, pomSha256: paths.pomSha256, fetchedAt: new Date().toISOString() })}\n`);
    }
  } finally {
    rmSync(stagingDir, { recursive: true, force: true });
  }
  const jarCount = readdirSync(paths.libsDir).filter((f) => f.endsWith(".jar")).length;
  log(`Kafka ${paths.version}: ${jarCount} jars ready in ${paths.libsDir} (${((Date.now() - startedAtMs) / 1000).toFixed(1)} s)`);
  return paths.libsDir;
}

function removeCdsArchives(cacheDir: string): void {
  for (const name of readdirSync(cacheDir)) {
    if (name.endsWith(".jsa")) rmSync(path.join(cacheDir, name), { force: true });
  }
}
