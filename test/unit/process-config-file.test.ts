/** A setting given inline or as a file (services/shared/runtime/process-config.ts readValueOrFile). */
import test from "ava";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, createEnvReader } from "../../services/shared/runtime/config.js";
import { readValueOrFile } from "../../services/shared/runtime/process-config.js";

test("readValueOrFile: inline wins, else the file's text; neither is undefined; an unreadable file is null and a problem naming it", (t) => {
  const file = join(mkdtempSync(join(tmpdir(), "value-or-file-")), "value");
  writeFileSync(file, "from-file\n");
  t.is(readValueOrFile(createEnvReader({ X: "inline", X_FILE: file }), "X", "X_FILE"), "inline");
  t.is(readValueOrFile(createEnvReader({ X: "", X_FILE: file }), "X", "X_FILE"), "from-file\n");
  t.is(readValueOrFile(createEnvReader({}), "X", "X_FILE"), undefined);
  const env = createEnvReader({ X_FILE: `${file}.missing` });
  t.is(readValueOrFile(env, "X", "X_FILE"), null);
  const error = t.throws(() => env.finish({}), { instanceOf: ConfigError });
  t.deepEqual(error?.problems, [`X_FILE ${file}.missing cannot be read`]);
});
