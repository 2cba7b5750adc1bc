/** The known name closest to `name` by edit distance, when it is close enough to be a likely typo. */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (best === undefined || distance < best.distance) best = { name: candidate, distance };
  }
  return best !== undefined && best.distance <= Math.max(1, Math.floor(name.length / 3)) ? best.name : undefined;
}

/** Edits (insert, delete, substitute, swap two neighbours) that turn `left` into `right`. */
function editDistance(left: string, right: string): number {
  const rows = Array.from({ length: left.length + 1 }, (_row, row) =>
    Array.from({ length: right.length + 1 }, (_column, column) => (row === 0 ? column : column === 0 ? row : 0)),
  );
  const at = (row: number, column: number): number => rows[row]?.[column] ?? 0;
  for (let row = 1; row <= left.length; row += 1) {
    for (let column = 1; column <= right.length; column += 1) {
      const cost = left[row - 1] === right[column - 1] ? 0 : 1;
      let distance = Math.min(at(row - 1, column) + 1, at(row, column - 1) + 1, at(row - 1, column - 1) + cost);
      if (row > 1 && column > 1 && left[row - 1] === right[column - 2] && left[row - 2] === right[column - 1])
        distance = Math.min(distance, at(row - 2, column - 2) + 1);
      (rows[row] as number[])[column] = distance;
    }
  }
  return at(left.length, right.length);
}
