/**
 * The Discord templates' rules (services/shared/values/discord-template.ts): a template error is refused with its line
 * and column; rendering escapes the values' markdown, never lets a mention ping, and keeps within Discord's 2,000
 * characters.
 */
import test from "ava";
import {
  checkDiscordTemplate,
  defaultDiscordTemplate,
  DISCORD_CONTENT_MAX_CHARS,
  renderDiscordTemplate,
} from "../../services/shared/values/discord-template.js";

const errors: Array<[string, string, { line: number; column: number; error: RegExp }]> = [
  ["unknown placeholder", "Thanks!\n  {{votes}}", { line: 2, column: 3, error: /^unknown placeholder \{\{votes\}\}/ }],
  ["unclosed on its line", "{{player} voted\n}}", { line: 1, column: 1, error: /^unclosed \{\{/ }],
  ["empty placeholder", "a {{ }}", { line: 1, column: 3, error: /^empty placeholder/ }],
  ["empty template", "  ", { line: 1, column: 1, error: /^the template is empty/ }],
  ["too long", "x".repeat(501), { line: 1, column: 1, error: /longer than 500/ }],
];
for (const [name, template, expected] of errors) {
  test(`a template error is refused with its line and column: ${name}`, (t) => {
    const check = checkDiscordTemplate(template);
    if (check.ok) return t.fail("accepted");
    t.is(check.line, expected.line);
    t.is(check.column, expected.column);
    t.regex(check.error, expected.error);
  });
}

test("known placeholders, with spaces inside the braces, are accepted; single braces are text", (t) => {
  t.deepEqual(checkDiscordTemplate("{{ player }} voted for {server} ({{month_total}})"), { ok: true });
  t.is(renderDiscordTemplate("{{ player }} voted for {server}", "heart.counted", { player: "Steve" }), "Steve voted for {server}");
});

test("rendered text never pings and never lets a name format the message", (t) => {
  const text = renderDiscordTemplate("@everyone @here <@123> {{player}}", "heart.counted", { player: "**@everyone**_x" });
  t.false(/@(everyone|here)/.test(text), text);
  t.false(text.includes("<@1"), text);
  t.true(text.endsWith("\\*\\*@\u200beveryone\\*\\*\\_x"), text);
});

test("a rendered line is cut to Discord's 2,000 characters; a template that no longer parses renders the default", (t) => {
  const long = renderDiscordTemplate("{{player}}", "heart.counted", { player: "a".repeat(3000) });
  t.is([...long].length, DISCORD_CONTENT_MAX_CHARS);
  t.is(
    renderDiscordTemplate("{{gone}}", "heart.counted", { player: "Alex", server: "S" }),
    renderDiscordTemplate(defaultDiscordTemplate("heart.counted"), "heart.counted", { player: "Alex", server: "S" }),
  );
});
