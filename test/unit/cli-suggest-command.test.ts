import test from "ava";
import { findClosest, suggestCommand } from "../../scripts/cli/suggest-command.js";

const NAMES = ["servers create", "servers list", "hearts cast", "clicks record", "login-link", "trigger", "listen", "events send", "sign", "verify"];

const CASES: [string[], string | undefined][] = [
  [["lisen"], "listen"],
  [["server", "create"], "servers create"],
  [["servers", "craete"], "servers create"],
  [["sevrers", "list"], "servers list"],
  [["heart", "cast"], "hearts cast"],
  [["click", "record"], "clicks record"],
  [["evnts", "send"], "events send"],
  [["triger", "heart.counted"], "trigger"],
  [["login"], "login-link"],
  [["heart"], "hearts"],
  [["verfy"], "verify"],
  [["frobnicate"], undefined],
  [["deploy", "now"], undefined],
];

for (const [words, expected] of CASES) {
  test(`a mistyped command "${words.join(" ")}" suggests the closest command by edit distance: ${expected ?? "none"}`, (t) => {
    t.is(suggestCommand(words, NAMES), expected);
  });
}

test("a mistyped flag suggests the closest flag within two edits, none beyond", (t) => {
  t.is(findClosest("nme", ["name", "callback-url", "json"]), "name");
  t.is(findClosest("steamid", ["steam-id", "discord-id"]), "steam-id");
  t.is(findClosest("zzzzzz", ["name", "json"]), undefined);
});
