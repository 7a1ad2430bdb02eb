/**
 * The prefix of every tombstone a voter's erasure leaves in place of their name and ids: `erased:<uuid>`, one random uuid
 * per erasure (services/voter-data/erase-voter-data.ts writes them). Here, with the shared values, because other folders
 * recognise an erased voter too (the e-mail reminders: no reminder for a tombstone) and must not import the erasure.
 */
export const TOMBSTONE_PREFIX = "erased:";
