import type { Page } from "playwright-core";
import type { LaunchedChromium } from "../../scripts/infra/chromium.js";
import type { TestStack } from "../../scripts/harness/stack.js";

/** A phone's viewport: the narrowest width the dashboard's browser tests hold it to. */
export const PHONE = { width: 375, height: 812 };
/** A laptop's viewport. */
export const LAPTOP = { width: 1280, height: 900 };

/** What a dashboard browser test keeps between its tests: the stack, its gateway, one browser page and where screenshots go. */
export interface DashboardBrowserContext {
  stack: TestStack;
  gatewayUrl: string;
  browser: LaunchedChromium;
  page: Page;
  shots: string;
}
