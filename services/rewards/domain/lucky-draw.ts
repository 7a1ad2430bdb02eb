import { createHmac } from "node:crypto";

/**
 * A lucky reward's draw (issue 31): deterministic from the vote, so a replay of the same heart draws the same answer,
 * and verifiable by the server's owner, who is shown the draw seed: the draw is HMAC-SHA256(seed, "<heart id>:<entry>")
 * read as a number (its first 48 bits, big-endian), and the vote wins 1 in N when that number is a multiple of N. A
 * voter cannot predict it without the seed. `entry` is the lucky rule's index, so two rules draw independently.
 */
export function luckyDraw(seed: string, heartId: string, entry: number): number {
  return createHmac("sha256", seed).update(`${heartId}:${entry}`).digest().readUIntBE(0, 6);
}

/** Whether the vote wins a 1-in-`oneIn` lucky reward (see luckyDraw). */
export function winsLuckyDraw(seed: string, heartId: string, entry: number, oneIn: number): boolean {
  return luckyDraw(seed, heartId, entry) % oneIn === 0;
}
