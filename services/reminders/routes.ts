import type { ConnectRouter } from "@connectrpc/connect";
import { ReminderService } from "../../gen/proto/reminders/v1/reminders_pb.js";
import { createReceiptLinks } from "../hearts/receipt-token.js";
import { confirmReminder, subscribeDiscordReminder, subscribeReminder, unsubscribeReminder, type ReminderDeps } from "./manage-reminder.js";
import { createUnsubscribeTokens } from "./reminder-tokens.js";

/** Registers ReminderService (SubscribeReminder, ConfirmReminder, UnsubscribeReminder, SubscribeDiscordReminder) on a Connect router. */
export function reminderRoutes(deps: ReminderDeps): (router: ConnectRouter) => void {
  // deps itself is passed on (never spread): PUBLIC_BASE_URL is read at each use.
  const tokens = { receipts: createReceiptLinks(deps), unsubscribe: createUnsubscribeTokens(deps.secretBox) };
  return (router) => {
    router.service(ReminderService, {
      subscribeReminder: (req) => subscribeReminder(deps, tokens, req),
      confirmReminder: (req) => confirmReminder(deps, req),
      unsubscribeReminder: (req) => unsubscribeReminder(deps, tokens, req),
      subscribeDiscordReminder: (req) => subscribeDiscordReminder(deps, tokens, req),
    });
  };
}
