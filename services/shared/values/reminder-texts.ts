/**
 * The refusals of a vote-reminder opt-in, in the voter's words: the reminders service throws them (the gateway shows
 * them on the reminder page as a 400) and the OpenAPI document quotes them, so each is written once.
 */

/** A bad address. */
export const BAD_EMAIL_TEXT = "enter one e-mail address, like name@example.com";
/** The mail server refused the address for good (a 5xx answer to the confirm mail). */
export const REFUSED_EMAIL_TEXT = "this address refuses e-mail; enter another one";
/** E-mail reminders switched off (no SMTP_URL). */
export const REMINDERS_OFF_TEXT = "e-mail reminders are not available on this list";
/** Discord DM reminders switched off (no DISCORD_BOT_TOKEN). */
export const DISCORD_REMINDERS_OFF_TEXT = "Discord reminders are not available on this list";
/** The heart carries no Discord user id to send to. */
export const NO_DISCORD_ID_TEXT = "this vote carried no Discord account";
