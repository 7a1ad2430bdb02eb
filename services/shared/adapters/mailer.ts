import nodemailer from "nodemailer";
import { redactUrl } from "../runtime/log.js";

/**
 * Sending e-mail (issue 32: vote reminders with double opt-in, owner alerts) over SMTP with nodemailer, a well-kept
 * mail library, to the server `SMTP_URL` names (`smtp://user:pass@host:587`, `smtps://...` for implicit TLS). The
 * credentials in the URL never reach a log line or an error text (redactUrl). A refused message is classified the way
 * a sender must act on it: `permanent` (a 5xx answer: the address does not exist or refuses mail; stop mailing it, a
 * bounce) or `temporary` (a 4xx answer, a connection that failed or timed out: try again later).
 */

/** One message. `headers` carries List-Unsubscribe and the like; `to` is one address. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
  headers?: Record<string, string>;
}

/** What a send did: accepted (with the server's message id), or refused and whether retrying can help. */
export type MailResult = { ok: true; messageId: string } | { ok: false; kind: "permanent" | "temporary"; reason: string };

export interface Mailer {
  send(message: MailMessage): Promise<MailResult>;
  close(): void;
}

export interface MailerOptions {
  /** `smtp://[user:pass@]host[:port]` or `smtps://...`. */
  smtpUrl: string;
  /** The From address (`Vote reminders <reminders@list.example>`). */
  from: string;
  /** Connection, greeting and socket timeouts (default 10 s each). */
  timeoutMs?: number;
}

/** A mailer over one pooled SMTP transport. */
export function createMailer(opts: MailerOptions): Mailer {
  const url = new URL(opts.smtpUrl);
  if (url.protocol !== "smtp:" && url.protocol !== "smtps:") throw new Error(`SMTP_URL must be smtp:// or smtps://, not ${redactUrl(opts.smtpUrl)}`);
  const timeout = opts.timeoutMs ?? 10_000;
  const transport = nodemailer.createTransport({
    host: url.hostname,
    port: Number(url.port) || (url.protocol === "smtps:" ? 465 : 587),
    secure: url.protocol === "smtps:",
    ...(url.username === "" ? {} : { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } }),
    pool: true,
    maxConnections: 2,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
  });
  return {
    async send(message) {
      try {
        const info = await transport.sendMail({ from: opts.from, ...message });
        if (info.rejected.length > 0) return { ok: false, kind: "permanent", reason: "recipient refused" };
        return { ok: true, messageId: info.messageId };
      } catch (error) {
        // Failure policy: every SMTP failure is a result the caller acts on (stop for a 5xx, retry later otherwise);
        // the reason names the SMTP answer code, never the address or the server's credentials.
        const code = (error as { responseCode?: number }).responseCode;
        if (code !== undefined && code >= 500 && code < 600) return { ok: false, kind: "permanent", reason: `SMTP ${code}` };
        return { ok: false, kind: "temporary", reason: code !== undefined ? `SMTP ${code}` : ((error as { code?: string }).code ?? "connection failed") };
      }
    },
    close: () => transport.close(),
  };
}
