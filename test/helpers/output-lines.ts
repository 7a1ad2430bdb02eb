/** A child process's stdout and stderr, line by line: the one splitter of the tests' runtime harnesses. */
import type { ChildProcess } from "node:child_process";

/** Calls `onLine` with each complete line (trailing whitespace trimmed) `child` prints on stdout or stderr. */
export function onOutputLines(child: ChildProcess, onLine: (line: string) => void): void {
  for (const stream of [child.stdout, child.stderr]) {
    let rest = "";
    stream?.on("data", (chunk: Buffer) => {
      const parts = (rest + chunk.toString("utf8")).split("\n");
      rest = parts.pop() ?? "";
      for (const line of parts) onLine(line.trimEnd());
    });
  }
}
