/**
 * Embedded PostgreSQL for local development and tests: PGlite (PostgreSQL compiled to WASM, running
 * in this process) with its data persisted in a directory, served over the PostgreSQL wire protocol
 * by `PGLiteSocketServer` from `@electric-sql/pglite-socket`, so that `pg` and `@prisma/adapter-pg`
 * can use it through a normal `postgresql://` URL.
 *
 * Access: PGlite has no roles or passwords (every client is trusted), so by default the server
 * listens on a Unix socket inside a directory only this user may enter (0700), never on a TCP
 * port another local user could reach. The data directory is kept private too (0700 directories,
 * 0600 files: PGlite's file layer creates files world-readable and -writable, so they are swept
 * at start and stop; files it creates in between sit inside the 0700 directory).
 *
 * Concurrency: PGlite is a single backend session. `PGLiteSocketServer` (0.2.17) accepts several
 * client connections (`maxConnections`, default 1) and multiplexes them onto that one session, but
 * its built-in queue interleaves clients per protocol *message*. When a client's
 * Parse/Bind/Execute/Sync batch is split across TCP reads (any statement or parameter payload bigger
 * than one socket read, ~64 KiB), another client's Parse can run in between and the first client's
 * Bind then executes the *other* client's SQL. (Reproduced: 3 of 300 concurrent queries returned
 * another query's columns.) We therefore replace that queue with {@link ProtocolCycleScheduler},
 * which gives one client the session from its first message until the end of its protocol cycle
 * (ReadyForQuery) and for as long as that client is inside a transaction. With it, a normal
 * `pg.Pool` (default 10 connections) and Prisma interactive transactions are safe.
 *
 * Remaining differences from a real server (inherent to a single session):
 * - Statements run one at a time; while a client is in a transaction, every other client waits
 *   until it commits or rolls back. Code that, inside a transaction, awaits a query on *another*
 *   connection will deadlock (on real PostgreSQL that only happens with conflicting locks).
 * - Session state is shared: `SET` (without LOCAL), temporary tables, named prepared statements
 *   and session advisory locks are visible to all clients. Use `SET LOCAL`, avoid named prepared
 *   statements (adapter-pg does not use them unless `statementNameGenerator` is set), and note that
 *   `pg_advisory_lock` never blocks between clients.
 * - One database (`postgres`), no roles/passwords (trust, hence the private socket), no SSL, no cancel requests, no
 *   `CREATE DATABASE` for other connections (so Prisma shadow databases need a separate instance;
 *   see scripts/db/schema-engine.ts).
 * - Only one process may open a data directory at a time (enforced with a `<dataDir>.lock` file).
 */
import { readFileSync, rmSync } from "node:fs";
import { access, chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";

/** Options for {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgresOptions {
  /**
   * `unix-socket` (default): a socket in a private (0700) directory beside the data directory
   * (or a private temporary directory when that path would be too long or the database is in
   * memory). `tcp`: 127.0.0.1, reachable by every local user - for tools that need a port.
   */
  listen?: "unix-socket" | "tcp";
  /** TCP port on 127.0.0.1 with `listen: 'tcp'`; default 0 (a free port chosen by the OS). */
  port?: number;
  /** Maximum simultaneous client connections; default 100 (pg.Pool defaults to 10 per pool). */
  maxConnections?: number;
  /** Log every protocol step of the socket server to the console (very verbose); default false. */
  debug?: boolean;
  /**
   * Where to cache a freshly initialised cluster, so that new databases (in-memory ones, or an empty
   * `dataDir`) are loaded from it instead of running PGlite's initdb again (several times faster;
   * figures: bench/results/ANALYSIS.md); default the OS temp dir, `false` disables the cache.
   */
  templateCacheDir?: string | false;
}

/** A running embedded server returned by {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgres {
  /**
   * `postgresql://postgres@localhost/postgres?host=<socket dir>` (Unix socket), or
   * `postgresql://postgres@127.0.0.1:<port>/postgres` with `listen: 'tcp'` (no password, no SSL).
   */
  url: string;
  /** The TCP port the server listens on (`listen: 'tcp'` only). */
  port?: number;
  /** The Unix socket's path (`listen: 'unix-socket'` only). */
  socketPath?: string;
  /** Closes client connections (rolling back open transactions), the server and the database. Idempotent. */
  stop(): Promise<void>;
}

/** Special `dataDir` value for a non-persistent, in-memory database. */
export const IN_MEMORY_DATA_DIR = "memory://";

const LOOPBACK_HOST = "127.0.0.1";
const DEFAULT_MAX_CONNECTIONS = 100;
const MESSAGE_HEADER_BYTES = 5;
const MESSAGE_TYPE_READY_FOR_QUERY = 0x5a; // 'Z'
const TRANSACTION_STATUS_IDLE = 0x49; // 'I'
/** A bare Sync message ('S', length 4): ends any half-finished extended-protocol cycle. */
const SYNC_MESSAGE = new Uint8Array([0x53, 0, 0, 0, 4]);

/**
 * Starts PGlite on `dataDir` (created if missing; `memory://` for a throwaway in-memory database)
 * and serves it over the PostgreSQL wire protocol on 127.0.0.1.
 *
 * The returned URL works with `pg` and `@prisma/adapter-pg` (pool sizes up to `maxConnections`,
 * interactive transactions included; see the module comment for the single-session caveats).
 */
export async function startEmbeddedPostgres(dataDir: string, opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const inMemory = dataDir === IN_MEMORY_DATA_DIR;
  const absoluteDataDir = inMemory ? undefined : resolve(dataDir);
  if (absoluteDataDir) await mkdir(absoluteDataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const releaseLock = absoluteDataDir ? await lockDataDir(absoluteDataDir) : () => {};
  let db: PGlite;
  try {
    if (absoluteDataDir) await makePrivate(absoluteDataDir);
    db = await openDatabase(absoluteDataDir, opts.templateCacheDir ?? tmpdir());
  } catch (error) {
    // Failure policy: a database that could not be opened (or made private) must not keep its directory locked.
    releaseLock();
    throw error;
  }

  const useSocket = (opts.listen ?? "unix-socket") === "unix-socket";
  let socketDir: { path: string; temporary: boolean } | undefined;
  try {
    socketDir = useSocket ? await createSocketDir(absoluteDataDir) : undefined;
  } catch (error) {
    // Failure policy: without a private socket directory there is nowhere safe to listen; close and report.
    await db.close();
    releaseLock();
    throw error;
  }
  const socketPath = socketDir ? join(socketDir.path, SOCKET_FILE) : undefined;
  const server = new PGLiteSocketServer({
    db,
    ...(socketPath ? { path: socketPath } : { host: LOOPBACK_HOST, port: opts.port ?? 0 }),
    maxConnections: opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    debug: opts.debug ?? false,
  });
  const scheduler = new ProtocolCycleScheduler(db);
  installScheduler(server, scheduler);

  try {
    await server.start();
  } catch (error) {
    // Failure policy: a port that cannot be bound must not leave the database open (its files would stay in use); close it, then report.
    await db.close();
    if (socketDir) await removeSocketDir(socketDir);
    releaseLock();
    throw error;
  }

  let stopped: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    await server.stop();
    await scheduler.close();
    await db.close();
    if (socketDir) await removeSocketDir(socketDir);
    // Files PGlite created while running are made private too (they were already behind the 0700 directory).
    if (absoluteDataDir) await makePrivate(absoluteDataDir);
    releaseLock();
  };
  if (socketDir && socketPath) {
    return {
      url: `postgresql://postgres@localhost/postgres?host=${encodeURIComponent(socketDir.path)}`,
      socketPath,
      stop: () => (stopped ??= stop()),
    };
  }
  const port = Number(server.getServerConn().split(":").pop());
  return {
    url: `postgresql://postgres@${LOOPBACK_HOST}:${port}/postgres`,
    port,
    stop: () => (stopped ??= stop()),
  };
}

/**
 * Opens PGlite on `dataDir` (in memory when undefined). A database that does not exist yet is
 * loaded from the cached template cluster when there is one; otherwise PGlite's initdb runs and
 * the pristine result becomes the template for next time.
 */
async function openDatabase(dataDir: string | undefined, templateCacheDir: string | false): Promise<PGlite> {
  const location = dataDir === undefined ? {} : { dataDir };
  const isNew = dataDir === undefined || !(await pathExists(join(dataDir, "PG_VERSION")));
  if (!isNew || templateCacheDir === false) return PGlite.create(location);
  const templateFile = join(templateCacheDir, `pglite-${pgliteVersion()}-template.tar`);
  templates[templateFile] ??= readFile(templateFile).then(
    (bytes) => new Blob([bytes]),
    // Failure policy: no cached template yet (or unreadable) just means this start runs initdb and writes one.
    () => undefined,
  );
  const template = await templates[templateFile];
  if (template) return PGlite.create({ ...location, loadDataDir: template });
  const db = await PGlite.create(location);
  try {
    const dump = await db.dumpDataDir("none");
    const bytes = Buffer.from(await dump.arrayBuffer());
    // Write-then-rename so that a concurrent process never loads a half-written template.
    const partial = `${templateFile}.${process.pid}.${Date.now()}.partial`;
    await mkdir(templateCacheDir, { recursive: true });
    await writeFile(partial, bytes);
    await rename(partial, templateFile);
    templates[templateFile] = Promise.resolve(new Blob([bytes]));
  } catch {
    // Failure policy: the template is only a start-up optimisation; a read-only or full temp dir must not prevent the database from starting.
  }
  return db;
}

const PRIVATE_DIR_MODE = 0o700;
const PRIVATE_FILE_MODE = 0o600;
/** libpq's socket file name for the default port, so `?host=<dir>` finds it. */
const SOCKET_FILE = ".s.PGSQL.5432";
/** sun_path holds 108 bytes on Linux (104 on macOS); longer socket paths cannot be bound. */
const MAX_SOCKET_PATH_BYTES = 100;

/**
 * Makes a data directory private to this user: 0700 for it and every directory below, 0600 for
 * every file (PGlite's file layer creates files 0666 whatever the umask).
 */
export async function makePrivate(dir: string): Promise<void> {
  await chmod(dir, PRIVATE_DIR_MODE);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await makePrivate(path);
    else if (entry.isFile()) await chmod(path, PRIVATE_FILE_MODE);
  }
}

/**
 * A directory only this user may enter, for the server's socket: `<dataDir>.run` beside a
 * persistent data directory (holding its lock, so a leftover socket of a crashed run is ours to
 * remove), else a fresh temporary directory (mkdtemp creates it 0700).
 */
async function createSocketDir(dataDir: string | undefined): Promise<{ path: string; temporary: boolean }> {
  const beside = dataDir === undefined ? undefined : `${dataDir}.run`;
  if (beside !== undefined && Buffer.byteLength(join(beside, SOCKET_FILE)) <= MAX_SOCKET_PATH_BYTES) {
    await mkdir(beside, { recursive: true, mode: PRIVATE_DIR_MODE });
    await chmod(beside, PRIVATE_DIR_MODE);
    await rm(join(beside, SOCKET_FILE), { force: true });
    return { path: beside, temporary: false };
  }
  return { path: await mkdtemp(join(tmpdir(), "pglite-")), temporary: true };
}

async function removeSocketDir(dir: { path: string; temporary: boolean }): Promise<void> {
  await rm(dir.temporary ? dir.path : join(dir.path, SOCKET_FILE), { recursive: true, force: true });
}

/** Lock files held by this process, removed on exit even when stop() was never called. */
const heldLocks = new Set<string>();
let lockCleanupInstalled = false;

/**
 * PGlite has no postmaster.pid: two processes opening one data directory would corrupt it. A
 * sibling `<dataDir>.lock` file holding the owner's pid prevents that (stale locks of dead
 * processes are taken over).
 *
 * @returns a function releasing the lock.
 */
async function lockDataDir(dataDir: string): Promise<() => void> {
  const lockFile = `${dataDir}.lock`;
  for (;;) {
    try {
      await writeFile(lockFile, `${process.pid}\n`, { flag: "wx" });
      break;
    } catch (error) {
      // Failure policy: only "already exists" is handled (stale or live owner); any other error (read-only dir, ...) is reported as is.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const ownerText = await readFile(lockFile, "utf8").catch(
      // Failure policy: a lock removed or unreadable in between is treated as stale; the exclusive create above is the real arbiter.
      () => "",
    );
    const ownerPid = Number.parseInt(ownerText, 10);
    if (Number.isInteger(ownerPid) && isProcessAlive(ownerPid)) {
      throw new Error(`${dataDir} is already in use by process ${ownerPid}${ownerPid === process.pid ? " (this process)" : ""}; lock file ${lockFile}`);
    }
    await rm(lockFile, { force: true });
  }
  heldLocks.add(lockFile);
  if (!lockCleanupInstalled) {
    lockCleanupInstalled = true;
    process.on("exit", () => {
      for (const file of heldLocks) rmSync(file, { force: true });
    });
  }
  return () => {
    if (heldLocks.delete(lockFile)) rmSync(lockFile, { force: true });
  };
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // Failure policy: ESRCH means the owner is gone (stale lock); EPERM means it exists but belongs to someone else (treat as alive).
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** In-process cache of template clusters, keyed by file path. */
const templates: Record<string, Promise<Blob | undefined>> = {};

async function pathExists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    // Failure policy: "does not exist" is the answer we are asking for.
    return false;
  }
}

/** The installed PGlite version (the template cache must not outlive a PGlite upgrade). */
function pgliteVersion(): string {
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve("@electric-sql/pglite"));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (manifest.name === "@electric-sql/pglite" && manifest.version) return manifest.version;
    } catch {
      // Failure policy: dist/ has no package.json; keep walking up to the package root.
    }
    const parent = dirname(dir);
    if (parent === dir) return "unknown";
    dir = parent;
  }
}

/** The part of pglite-socket's internal query queue that its connection handlers call. */
interface SocketQueryQueue {
  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number>;
  clearQueueForHandler(handlerId: number): void;
  clearTransactionIfNeeded(handlerId: number): Promise<void>;
  getQueueLength(): number;
}

/**
 * Swaps pglite-socket's per-message queue for {@link ProtocolCycleScheduler}. The server hands its
 * `queryQueue` field to every connection handler it creates, so replacing it before `start()`
 * affects all connections. This touches a private field of the exactly pinned 0.2.17; the shape is
 * checked so that an upgrade fails loudly instead of silently losing the fix.
 */
function installScheduler(server: PGLiteSocketServer, scheduler: SocketQueryQueue): void {
  const internals = server as unknown as { queryQueue?: Partial<SocketQueryQueue> };
  const current = internals.queryQueue;
  const compatible =
    current !== undefined &&
    typeof current.enqueue === "function" &&
    typeof current.clearQueueForHandler === "function" &&
    typeof current.clearTransactionIfNeeded === "function" &&
    typeof current.getQueueLength === "function";
  if (!compatible) {
    throw new Error(
      "@electric-sql/pglite-socket internals changed (PGLiteSocketServer.queryQueue); " +
        "scripts/infra/embedded-postgres.ts was written for 0.2.17 and must be re-checked before upgrading.",
    );
  }
  internals.queryQueue = scheduler;
}

interface PendingMessage {
  handlerId: number;
  message: Uint8Array;
  onData: (data: Uint8Array) => void;
  resolve: (bytesSent: number) => void;
  reject: (error: Error) => void;
}

interface PendingCleanup {
  handlerId: number;
  cleanup: true;
  done: () => void;
}

type QueueItem = PendingMessage | PendingCleanup;

/**
 * Serialises all clients onto PGlite's single session at protocol-cycle granularity.
 *
 * A client that sends a message becomes the session *owner*; only its messages run until PGlite
 * answers with ReadyForQuery in state idle ('I'). ReadyForQuery in state 'T'/'E' (inside a
 * transaction) or no ReadyForQuery at all (half-sent Parse/Bind/Execute batch, COPY) keeps the
 * ownership. Other clients' messages wait in FIFO order. When an owner disconnects, its cycle is
 * closed with a Sync and its transaction rolled back before anyone else runs.
 */
export class ProtocolCycleScheduler implements SocketQueryQueue {
  private queue: QueueItem[] = [];
  private owner: number | null = null;
  private running = false;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly db: PGlite) {}

  /** Queues one protocol message of a client; resolves with the number of response bytes sent. */
  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolvePromise, rejectPromise) => {
      if (this.closed) {
        rejectPromise(new Error("embedded postgres is shutting down"));
        return;
      }
      this.queue.push({ handlerId, message, onData, resolve: resolvePromise, reject: rejectPromise });
      void this.pump();
    });
  }

  /** Drops (rejects) the queued messages of a disconnected client. */
  clearQueueForHandler(handlerId: number): void {
    this.queue = this.queue.filter((item) => {
      if (item.handlerId !== handlerId || "cleanup" in item) return true;
      item.reject(new Error("client disconnected"));
      return false;
    });
  }

  /** Ends the half-finished cycle / open transaction of a disconnected client and frees the session. */
  clearTransactionIfNeeded(handlerId: number): Promise<void> {
    return new Promise((resolvePromise) => {
      // Ahead of everything else: other clients are blocked on this session until it is released.
      this.queue.unshift({ handlerId, cleanup: true, done: resolvePromise });
      void this.pump();
    });
  }

  /** Number of messages waiting for the session. */
  getQueueLength(): number {
    return this.queue.length;
  }

  /** Refuses new messages and resolves once everything queued (including disconnect cleanups) has run. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.running && this.queue.length === 0) return;
    await new Promise<void>((resolvePromise) => this.idleWaiters.push(resolvePromise));
  }

  private takeNext(): QueueItem | undefined {
    const index = this.owner === null ? 0 : this.queue.findIndex((item) => item.handlerId === this.owner || "cleanup" in item);
    if (index < 0 || index >= this.queue.length) return undefined;
    return this.queue.splice(index, 1)[0];
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let item = this.takeNext(); item; item = this.takeNext()) {
        if ("cleanup" in item) await this.runCleanup(item);
        else await this.runMessage(item);
      }
    } finally {
      this.running = false;
      if (this.queue.length === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private async runMessage(item: PendingMessage): Promise<void> {
    const tracker = new ReadyForQueryTracker();
    let bytesSent = 0;
    try {
      await this.db.runExclusive(() =>
        this.db.execProtocolRawStream(item.message, {
          onRawData: (data) => {
            tracker.feed(data);
            bytesSent += data.length;
            item.onData(data);
          },
        }),
      );
    } catch (error) {
      // Failure policy: PGlite itself failed (SQL errors come back as ErrorResponse, not as exceptions); fail this client, whose handler then disconnects and triggers the cleanup that frees the session.
      this.owner = item.handlerId;
      item.reject(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.owner = tracker.endedWithReadyForQuery(TRANSACTION_STATUS_IDLE) ? null : item.handlerId;
    item.resolve(bytesSent);
  }

  private async runCleanup(item: PendingCleanup): Promise<void> {
    if (this.owner === item.handlerId && !this.db.closed) {
      try {
        await this.db.runExclusive(() => this.db.execProtocolRawStream(SYNC_MESSAGE, { onRawData: () => {} }));
        if (this.db.isInTransaction()) await this.db.exec("ROLLBACK");
      } catch {
        // Failure policy: the client is already gone and the session must be released for the others; a failed cleanup is not worth more than that (the next client's statements would surface a broken session).
      }
    }
    if (this.owner === item.handlerId) this.owner = null;
    item.done();
  }
}

/**
 * Follows the backend message framing of one execution's output and remembers whether the output
 * ended with ReadyForQuery, and in which transaction state.
 */
class ReadyForQueryTracker {
  private readonly header = new Uint8Array(MESSAGE_HEADER_BYTES);
  private headerBytes = 0;
  private bodyBytesLeft = 0;
  private expectStatus = false;
  private lastStatus: number | undefined;

  feed(chunk: Uint8Array): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.bodyBytesLeft > 0) {
        if (this.expectStatus) {
          this.lastStatus = chunk[offset];
          this.expectStatus = false;
        }
        const take = Math.min(this.bodyBytesLeft, chunk.length - offset);
        offset += take;
        this.bodyBytesLeft -= take;
        continue;
      }
      this.header[this.headerBytes++] = chunk[offset++]!;
      if (this.headerBytes === MESSAGE_HEADER_BYTES) {
        const type = this.header[0];
        const length = new DataView(this.header.buffer).getInt32(1);
        this.headerBytes = 0;
        this.bodyBytesLeft = Math.max(0, length - 4);
        this.lastStatus = undefined;
        this.expectStatus = type === MESSAGE_TYPE_READY_FOR_QUERY && this.bodyBytesLeft === 1;
      }
    }
  }

  endedWithReadyForQuery(status: number): boolean {
    return this.headerBytes === 0 && this.bodyBytesLeft === 0 && this.lastStatus === status;
  }
}
