/**
 * The Discord destination's message templates (docs/discord.md "Templates"): plain text with `{{placeholder}}`s, one
 * template per event type, checked when the owner saves it (an error names its line and column) and rendered per event
 * by the delivery service. Pure: the servers service checks and previews with it, the delivery service renders with it.
 *
 * Why this is not the reward commands' renderer (services/rewards/domain/render-command.ts): the two syntaxes differ.
 * Here a placeholder is `{{name}}` (double braces, spaces inside allowed, closed on its own line), a single `{` is
 * literal, and a save-time error names its line and column; a value is escaped for Discord's markdown (`\*_~` and the
 * rest backslashed, `@` followed by a zero-width space), an absent value renders empty, and a template that no longer
 * parses falls back to the default. A command's placeholder is `{name}` (single braces, no spaces), its errors name the
 * rule's JSON path, and a value is never escaped: it must be one safe console argument or the whole reward is refused
 * with a reason, as it is when the value is absent. One parser for both would read `{{player}}` as `{` + `{player}` + `}`.
 */

/** Discord's limit on a message's content, in characters. */
export const DISCORD_CONTENT_MAX_CHARS = 2000;
/** Discord's limit on an embed's description, in characters. */
export const DISCORD_EMBED_DESCRIPTION_MAX_CHARS = 4096;
/** The longest template an owner may save (one event's text; a batched message holds several). */
export const DISCORD_TEMPLATE_MAX_CHARS = 500;

/** The placeholders a template may use, with what each holds. */
export const DISCORD_PLACEHOLDERS = {
  player: "the voter's name (a referral event: the referee)",
  server: "the server's name",
  event: "the event type (heart.counted, ...)",
  period: "the month the vote counted in (YYYY-MM)",
  month_total: "the voter's votes this month, by the reward rules (empty without rules)",
  total: "the voter's votes in all, by the reward rules (empty without rules)",
  streak: "the voter's reward streak, by the reward rules (empty without rules)",
} as const;

/** One placeholder name. */
export type DiscordPlaceholder = keyof typeof DISCORD_PLACEHOLDERS;

/** The values of one event's placeholders (absent: rendered empty). */
export type DiscordValues = Partial<Record<DiscordPlaceholder, string | number | null>>;

/** The template an event type gets when the owner saved none. */
export function defaultDiscordTemplate(eventType: string): string {
  switch (eventType) {
    case "heart.counted":
      return "**{{player}}** voted for **{{server}}**!";
    case "heart.test":
      return "Test vote from **{{player}}** for **{{server}}**.";
    default:
      return "**{{server}}**: {{event}} ({{player}})";
  }
}

/** A template checked at save time: ok, or the first error with its 1-based line and column. */
export type TemplateCheck = { ok: true } | { ok: false; line: number; column: number; error: string };

/** A segment of a parsed template. */
type Segment = { text: string } | { placeholder: DiscordPlaceholder };

/**
 * Parses `template`: `{{name}}` with a known name (spaces inside the braces allowed), every other character literal.
 * An unclosed `{{`, an empty or unknown name, or a template over DISCORD_TEMPLATE_MAX_CHARS is an error at its place.
 */
function parseTemplate(template: string): { ok: true; segments: Segment[] } | Extract<TemplateCheck, { ok: false }> {
  const at = (index: number) => {
    const before = template.slice(0, index);
    const line = before.split("\n").length;
    return { line, column: index - before.lastIndexOf("\n") };
  };
  if ([...template].length > DISCORD_TEMPLATE_MAX_CHARS) {
    return { ok: false, ...at(0), error: `the template is longer than ${DISCORD_TEMPLATE_MAX_CHARS} characters` };
  }
  if (template.trim() === "") return { ok: false, ...at(0), error: "the template is empty" };
  const segments: Segment[] = [];
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf("{{", i);
    if (open === -1) {
      segments.push({ text: template.slice(i) });
      break;
    }
    if (open > i) segments.push({ text: template.slice(i, open) });
    const close = template.indexOf("}}", open + 2);
    const lineEnd = template.indexOf("\n", open);
    if (close === -1 || (lineEnd !== -1 && lineEnd < close)) return { ok: false, ...at(open), error: "unclosed {{: a placeholder ends with }} on its line" };
    const name = template.slice(open + 2, close).trim();
    if (name === "") return { ok: false, ...at(open), error: "empty placeholder {{}}" };
    if (!Object.hasOwn(DISCORD_PLACEHOLDERS, name)) {
      return { ok: false, ...at(open), error: `unknown placeholder {{${name}}}; known: ${Object.keys(DISCORD_PLACEHOLDERS).join(", ")}` };
    }
    segments.push({ placeholder: name as DiscordPlaceholder });
    i = close + 2;
  }
  return { ok: true, segments };
}

/** Checks a template as the owner saves it. */
export function checkDiscordTemplate(template: string): TemplateCheck {
  const parsed = parseTemplate(template);
  return parsed.ok ? { ok: true } : parsed;
}

/** A checked template's error as the RPC answers it: `template for <event type>, line L, column C: <error>`. */
export function describeTemplateError(eventType: string, check: Extract<TemplateCheck, { ok: false }>): string {
  return `template for ${eventType}, line ${check.line}, column ${check.column}: ${check.error}`;
}

/**
 * A value as it may appear in a message: Discord's markdown characters escaped (a name cannot bold, strike or hide the
 * text around it), and `@` followed by a zero-width space, so even a mention Discord were to parse pings nobody (the
 * message also carries allowed_mentions with nothing allowed).
 */
export function escapeDiscordValue(value: string): string {
  return value.replace(/[\\*_~`|>#[\]()-]/g, "\\$&").replace(/@/g, "@\u200b");
}

/**
 * Renders `template` with `values` (each escaped); a template that no longer parses (saved under other rules) falls
 * back to the event type's default. The result is cut to DISCORD_CONTENT_MAX_CHARS.
 */
export function renderDiscordTemplate(template: string, eventType: string, values: DiscordValues): string {
  let parsed = parseTemplate(template);
  if (!parsed.ok) parsed = parseTemplate(defaultDiscordTemplate(eventType));
  if (!parsed.ok) return eventType;
  const text = parsed.segments.map((s) => ("text" in s ? neutraliseMentions(s.text) : escapeDiscordValue(String(values[s.placeholder] ?? "")))).join("");
  return cutToChars(text, DISCORD_CONTENT_MAX_CHARS);
}

/** `@everyone`, `@here` and `<@...>` mentions written in a template are shown, never pinged. */
function neutraliseMentions(text: string): string {
  return text.replace(/@(everyone|here)/g, "@\u200b$1").replace(/<@/g, "<@\u200b");
}

/** `text` cut to at most `max` characters (code points), the cut marked with `…`. */
export function cutToChars(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join("")}…`;
}

/** The sample event a preview renders. */
export const SAMPLE_DISCORD_VALUES: DiscordValues = { player: "Steve", event: "heart.counted", period: "2026-11", month_total: 12, total: 140, streak: 5 };
