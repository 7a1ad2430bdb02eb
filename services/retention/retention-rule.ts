/** The rule shape, whose home is services/shared/adapters/retention-rule.ts (so owner modules in services/shared can use it). */
export { ageSeconds, cutoffOf, readOldestAge, type RetentionRule } from "../shared/adapters/retention-rule.js";
