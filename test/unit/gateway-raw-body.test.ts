import { Readable } from "node:stream";
import test from "ava";
import { MAX_BODY_BYTES, declaresTooLarge, readRawBody } from "../../gateway/raw-body.js";

test("the body limit is 64 KiB (65536 bytes)", (t) => {
  t.is(MAX_BODY_BYTES, 65_536);
});

test("a body of exactly 64 KiB is read whole, byte for byte", async (t) => {
  const bytes = Buffer.alloc(MAX_BODY_BYTES, 0xab);
  const result = await readRawBody(Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]));
  t.is(result.kind, "ok");
  t.deepEqual(result.kind === "ok" ? result.bytes : undefined, bytes);
});

test("raw bytes are kept as sent: no decoding, trimming or BOM stripping", async (t) => {
  const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(' {"a": "é"} \n', "utf8"), Buffer.from([0xff])]);
  const result = await readRawBody(Readable.from([bytes]));
  t.deepEqual(result.kind === "ok" ? result.bytes : undefined, bytes);
});

test("one byte over 64 KiB -> too_large, and reading stops at the limit", async (t) => {
  let pulled = 0;
  const chunk = Buffer.alloc(16 * 1024, 0x61);
  // A source that would go on forever: the reader must stop pulling once past the limit.
  const source = new Readable({
    read() {
      pulled += chunk.length;
      this.push(chunk);
    },
  });
  const result = await readRawBody(source);
  t.is(result.kind, "too_large");
  t.true(pulled <= MAX_BODY_BYTES + 4 * chunk.length, `pulled ${pulled} bytes`);
});

test("a stream error before the end -> aborted", async (t) => {
  const source = new Readable({ read() {} });
  const pending = readRawBody(source);
  source.push(Buffer.from("{"));
  source.destroy(new Error("socket hang up"));
  t.is((await pending).kind, "aborted");
});

test("a declared Content-Length over 64 KiB is rejected before reading; at the limit it is not", (t) => {
  t.true(declaresTooLarge({ "content-length": String(MAX_BODY_BYTES + 1) }));
  t.false(declaresTooLarge({ "content-length": String(MAX_BODY_BYTES) }));
  t.false(declaresTooLarge({}));
});
