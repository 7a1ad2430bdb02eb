import type { AddressInfo } from "node:net";
import { simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";

/**
 * A real local SMTP server for tests (issue 32's e-mail: reminders, owner alerts), built on smtp-server (the SMTP
 * server half of the nodemailer project) with every message parsed by mailparser: the service's mail goes over a real
 * SMTP conversation, and the test reads what a mail client would see. Recipients can be refused at RCPT TO with a
 * permanent (550, a bounce) or a temporary (451) answer.
 */

/** One message as it arrived. */
export interface SunkMail {
  /** The envelope (MAIL FROM and RCPT TO). */
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string | null;
  /** Header names lower-cased; values as parsed (strings for the headers tests read). */
  headers: Map<string, unknown>;
  /** The raw message. */
  raw: string;
}

export interface SmtpSink {
  /** `smtp://127.0.0.1:<port>` (no TLS, no auth: a test server). */
  url: string;
  messages: SunkMail[];
  /** Refuse this address at RCPT TO: `permanent` 550, `temporary` 451. */
  refuse(address: string, kind: "permanent" | "temporary"): void;
  /** Accept this address again (after `refuse`). */
  accept(address: string): void;
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: SunkMail[] = [];
  const refused = new Map<string, "permanent" | "temporary">();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, callback) {
      const kind = refused.get(address.address.toLowerCase());
      if (kind === undefined) return callback();
      const error = Object.assign(new Error(kind === "permanent" ? "5.1.1 No such user" : "4.3.0 Try again later"), {
        responseCode: kind === "permanent" ? 550 : 451,
      });
      return callback(error);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        simpleParser(raw).then(
          (parsed) => {
            messages.push({
              from: session.envelope.mailFrom === false ? "" : session.envelope.mailFrom.address,
              to: session.envelope.rcptTo.map((r) => r.address),
              subject: parsed.subject ?? "",
              text: parsed.text ?? "",
              html: typeof parsed.html === "string" ? parsed.html : null,
              headers: parsed.headers as Map<string, unknown>,
              raw,
            });
            callback();
          },
          (error: unknown) => callback(error as Error),
        );
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    refuse: (address, kind) => void refused.set(address.toLowerCase(), kind),
    accept: (address) => void refused.delete(address.toLowerCase()),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
