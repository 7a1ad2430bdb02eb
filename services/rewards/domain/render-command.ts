/**
 * Reward rules' command templates: `{placeholder}` replaced with one value each (reward-rules.ts checks the names).
 *
 * Why this is not the Discord templates' renderer (services/shared/values/discord-template.ts): the two syntaxes differ.
 * Here a placeholder is `{name}` (single braces, no spaces), a save-time error names the rule's JSON path, and a value is
 * never escaped: a console has no escape every game agrees on, so a value must be one safe argument (SAFE_VALUE) or the
 * reward is refused with a reason, as it is when the vote carries no value. A Discord template's placeholder is
 * `{{name}}` with line/column errors, its values are escaped for Discord's markdown and mentions, and an absent value
 * renders empty. One parser for both would read `{{player}}` as `{` + `{player}` + `}`.
 */
import { placeholdersOf, type Placeholder } from "./reward-rules.js";

/** The values a command's placeholders take for one reward; a platform id the vote did not carry is absent. */
export type PlaceholderValues = Partial<Record<Placeholder, string | number>>;

/** A rendered command, or why it cannot be. */
export type Rendered = { ok: true; command: string } | { ok: false; why: string };

/**
 * A value a console command can carry as one argument: letters and digits of any script, `_`, `.` and `-`, at most 64
 * characters. Anything else (a space, a quote, `;`, a line break) could split the argument or start a second command
 * in some game's console, so a reward that would need it is not queued (the preview says why).
 */
const SAFE_VALUE = /^[\p{L}\p{N}_.-]{1,64}$/u;

/** Replaces each `{placeholder}` of a validated template with its value. */
export function renderCommand(template: string, values: PlaceholderValues): Rendered {
  for (const name of placeholdersOf(template)) {
    const value = values[name as Placeholder];
    if (value === undefined) return { ok: false, why: `the vote carries no {${name}}` };
    if (typeof value === "string" && !SAFE_VALUE.test(value)) return { ok: false, why: `{${name}} holds characters a command cannot carry safely` };
  }
  return { ok: true, command: template.replace(/\{([^{}]*)\}/g, (_, name: string) => String(values[name as Placeholder])) };
}
