/**
 * "Did you mean": the closest command or flag to a mistyped one, by edit distance (Levenshtein:
 * one insertion, deletion or substitution each costs 1), the way `git` and `gh` suggest.
 */

/** How far a typed name may be from a command's name and still be suggested: 2 edits, 3 for names of ten characters or more. */
function allowedDistance(name: string): number {
  return name.length >= 10 ? 3 : 2;
}

/** The edit distance between two strings; a typed word of 3 or more characters that starts `target` counts as 1 ("login" for "login-link"). */
function editDistance(typed: string, target: string): number {
  if (typed.length >= 3 && target.startsWith(typed) && typed !== target) return 1;
  const row = Array.from({ length: target.length + 1 }, (_, i) => i);
  for (let i = 1; i <= typed.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= target.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (typed[i - 1] === target[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[target.length]!;
}

/** The closest of `candidates` to `word` within two edits (for a mistyped flag), or undefined. */
export function findClosest(word: string, candidates: readonly string[]): string | undefined {
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate);
    if (distance <= 2 && (!best || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate;
}

/**
 * The command a mistyped command line most likely meant, or undefined. `words` are the leading
 * words typed (one or two); `names` the commands ("servers create", "listen"). A two-word command
 * is scored on both words ("server craete" -> "servers create"); with one word typed, its group is
 * the candidate ("heart" -> "hearts"); a one-word command is scored on the first word only, so a
 * positional after it does not count ("triger heart.counted" -> "trigger").
 */
export function suggestCommand(words: readonly string[], names: readonly string[]): string | undefined {
  const [first, second] = words;
  if (first === undefined) return undefined;
  let best: { name: string; distance: number } | undefined;
  const consider = (name: string, distance: number) => {
    if (distance <= allowedDistance(name) && (!best || distance < best.distance)) best = { name, distance };
  };
  for (const name of names) {
    const [group, sub] = name.split(" ");
    if (sub === undefined) consider(name, editDistance(first, name));
    else if (second === undefined) consider(group!, editDistance(first, group!));
    else consider(name, editDistance(first, group!) + editDistance(second, sub));
  }
  return best?.name;
}
