/** The infra scripts' `start` flags (scripts/lib/start-flags.ts): a port and a data directory, anything else a usage problem. */
import test from "ava";
import { parseStartFlags } from "../../scripts/lib/start-flags.js";

test("--port and --data-dir are read; both optional", (t) => {
  t.deepEqual(parseStartFlags([]), {});
  t.deepEqual(parseStartFlags(["--port", "9092", "--data-dir", "/var/lib/kafka"]), { port: 9092, dataDir: "/var/lib/kafka" });
  t.deepEqual(parseStartFlags(["--data-dir=/srv/pg"]), { dataDir: "/srv/pg" });
});

test("a port that is not a port, an empty directory, an unknown flag or a flag without its value is a problem", (t) => {
  for (const args of [["--port", "0"], ["--port", "70000"], ["--port", "80a"], ["--data-dir", ""], ["--datadir", "/x"], ["--port"]]) {
    t.true("problem" in parseStartFlags(args), args.join(" "));
  }
});
