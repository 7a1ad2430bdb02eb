import test from "ava";
import type { LookupAddress } from "node:dns";
import { createGuardedLookup, ForbiddenAddressError } from "../../services/delivery/pipeline/send-callback.js";

// The resolver is replaced, so these tests never touch DNS or the network.
type Callback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

function lookupWith(addresses: LookupAddress[], allowInsecure: boolean, all: boolean) {
  const lookup = createGuardedLookup({ allowInsecure, resolve: (_host, _opts, cb) => cb(null, addresses) });
  return new Promise<{ err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }>((resolve) => {
    (lookup as (h: string, o: object, cb: Callback) => void)("callback.example", { all }, (err, address, family) => resolve({ err, address, family }));
  });
}

test("connect-time guard: a name resolving to a private address is refused (DNS rebinding)", async (t) => {
  const { err } = await lookupWith([{ address: "10.1.2.3", family: 4 }], false, false);
  t.true(err instanceof ForbiddenAddressError);
  t.regex(err?.message ?? "", /10\.1\.2\.3/);
});

test("connect-time guard: refused when any resolved address is forbidden (metadata among public)", async (t) => {
  const { err } = await lookupWith(
    [
      { address: "93.184.215.14", family: 4 },
      { address: "169.254.169.254", family: 4 },
    ],
    false,
    true,
  );
  t.true(err instanceof ForbiddenAddressError);
});

test("connect-time guard: IPv6 loopback and unique-local are refused", async (t) => {
  t.true((await lookupWith([{ address: "::1", family: 6 }], false, false)).err instanceof ForbiddenAddressError);
  t.true((await lookupWith([{ address: "fd00::5", family: 6 }], false, false)).err instanceof ForbiddenAddressError);
});

test("connect-time guard: a public address passes, in the single and all forms", async (t) => {
  const single = await lookupWith([{ address: "93.184.215.14", family: 4 }], false, false);
  t.is(single.err, null);
  t.is(single.address, "93.184.215.14");
  t.is(single.family, 4);
  const all = await lookupWith(
    [
      { address: "93.184.215.14", family: 4 },
      { address: "2606:4700:4700::1111", family: 6 },
    ],
    false,
    true,
  );
  t.deepEqual(all.address, [
    { address: "93.184.215.14", family: 4 },
    { address: "2606:4700:4700::1111", family: 6 },
  ]);
});

test("connect-time guard: the development flag (allowInsecure) lets private addresses through", async (t) => {
  const { err, address } = await lookupWith([{ address: "127.0.0.1", family: 4 }], true, false);
  t.is(err, null);
  t.is(address, "127.0.0.1");
});
