import { heartAddressesRule } from "../hearts/store.js";
import { clickAddressesRule } from "../referral/record-click.js";
import type { RetentionRule } from "./retention-rule.js";
import type { RetentionSettings } from "./retention-settings.js";

/**
 * THE list of retention rules the runner applies, in order, each built from its setting. A new kind of
 * data ages out by adding one line here (its factory lives in the table's owner module) and its setting
 * in retention-settings.ts.
 */
export function retentionRules(settings: RetentionSettings): RetentionRule[] {
  const addressKeepSeconds = settings.addressRetentionHours * 3600;
  return [
    // Voters' IP, subnet and user agent on hearts and clicks: erased (set to null) past the address horizon.
    heartAddressesRule(addressKeepSeconds),
    clickAddressesRule(addressKeepSeconds),
  ];
}
